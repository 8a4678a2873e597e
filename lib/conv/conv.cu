// conv.cu — conv2d on the GPU where cuDNN is absent (with cuDNN, conv2d goes to
// conv_cudnn.cpp after the checks here): im2col into a device workspace, cuBLAS
// strided-batched GEMMs, then one epilogue kernel for bias and relu. float32, NCHW and
// channels-last. Pooling (Note [CUDA pooling]) at the end of the file, in every build.
//
// The layout follows x (suggest_memory_format, as the CPU path): the output is built
// dense in that layout (a temporary when `out` is not, copied into it at the end).
// P = OH*OW pixels per image, K = Cg*KH*KW (the reduction of one group).
//   NCHW  col[n][c, kh, kw][p]  (= [G][K][P] per image: rows of group g start at g*K)
//         out_n[g*Og + i][p] = sum_k W[g*Og + i][k] col_n[g*K + k][p]
//         cuBLAS (column-major): C^T (P x Og, ldc P) = col^T (P x K, lda P, op N) ·
//         W_g^T (K x Og, ldb K, op N). Batched over images with W's batch stride 0
//         (one call per group), or over groups (one call per image), whichever makes
//         fewer calls.
//   NHWC  col[m = (n, oh, ow)][g, kh, kw, c]: each (pixel, tap) copies Cg channels that
//         are contiguous in a channels-last x, and the GEMM reads them contiguously
//         along k. out[m][g*Og + i] = sum_k col[m][g*K + k] W[g*Og + i][k] with k =
//         (kh, kw, c), W as w.contiguous(ChannelsLast) = [O][KH][KW][Cg].
//         cuBLAS: C (Og x M, ldc O) = W_g (K x Og, lda K, op T) · col_g (K x M, ldb G*K,
//         op N); one call batched over groups (strides Og*K, K, Og).
//   1x1, stride 1, no padding, x dense in its layout: x is the col matrix (no im2col).
// Images go in chunks so the workspace stays under kWorkspaceFloats (at least one
// image per chunk). Weights are made contiguous in the k order above (a copy only when
// they are not already: they are small). TF32 follows set_allow_tf32 (as matmul).
// Cost: 2*N*O*P*K flop. Memory: x read KH*KW times through im2col (written once to the
// workspace and read by the GEMM: 2*N*G*K*P*4 bytes of extra traffic), out written by
// the GEMM and read+written once more by the epilogue when there is a bias or relu.
// A direct kernel for depthwise convolutions (K tiny, Og = 1: the GEMMs are then
// degenerate) would be faster; not done (docs/notes/cuda.md).
#include <algorithm>

#include "cuda/cublas_util.h"
#include "cuda/cuda_backend.h"
#include "cuda/kernel_util.cuh"

namespace sb::cuda {

namespace {

constexpr int64_t kWorkspaceFloats = int64_t{32} << 20;  // 128 MiB of im2col per chunk

struct ConvGeom {
  int64_t N, C, H, W, O, KH, KW, OH, OW, s, pad, d, G, Cg, Og, K, P;
};

// Strides of x in elements.
struct XStrides {
  int64_t n, c, h, w;
};

// col[n][c][kh][kw][p] for images n0 .. n0+nb-1 (n local), zero where the tap is padding.
template <typename I>
__global__ void im2col_nchw(float* __restrict__ col, const float* __restrict__ x, XStrides xs, I total, I P, I OW,
                            I KH, I KW, I C, int64_t H, int64_t W, int64_t s, int64_t pad, int64_t d) {
  for (I idx = static_cast<I>(blockIdx.x) * blockDim.x + threadIdx.x; idx < total;
       idx += static_cast<I>(gridDim.x) * blockDim.x) {
    const I p = idx % P;
    I r = idx / P;
    const I kw = r % KW;
    r /= KW;
    const I kh = r % KH;
    r /= KH;
    const I c = r % C;
    const I n = r / C;
    const int64_t ih = static_cast<int64_t>(p / OW) * s - pad + static_cast<int64_t>(kh) * d;
    const int64_t iw = static_cast<int64_t>(p % OW) * s - pad + static_cast<int64_t>(kw) * d;
    float v = 0.0f;
    if (ih >= 0 && ih < H && iw >= 0 && iw < W)
      v = x[static_cast<int64_t>(n) * xs.n + static_cast<int64_t>(c) * xs.c + ih * xs.h + iw * xs.w];
    col[idx] = v;
  }
}

// col[m][g][kh][kw][cl] for pixels m of images n0 .. (m = n*P + p, n local).
template <typename I>
__global__ void im2col_nhwc(float* __restrict__ col, const float* __restrict__ x, XStrides xs, I total, I P, I OW,
                            I KH, I KW, I G, I Cg, int64_t H, int64_t W, int64_t s, int64_t pad, int64_t d) {
  for (I idx = static_cast<I>(blockIdx.x) * blockDim.x + threadIdx.x; idx < total;
       idx += static_cast<I>(gridDim.x) * blockDim.x) {
    const I cl = idx % Cg;
    I r = idx / Cg;
    const I kw = r % KW;
    r /= KW;
    const I kh = r % KH;
    r /= KH;
    const I g = r % G;
    const I m = r / G;
    const I n = m / P, p = m % P;
    const int64_t ih = static_cast<int64_t>(p / OW) * s - pad + static_cast<int64_t>(kh) * d;
    const int64_t iw = static_cast<int64_t>(p % OW) * s - pad + static_cast<int64_t>(kw) * d;
    float v = 0.0f;
    if (ih >= 0 && ih < H && iw >= 0 && iw < W)
      v = x[static_cast<int64_t>(n) * xs.n + static_cast<int64_t>(g * Cg + cl) * xs.c + ih * xs.h + iw * xs.w];
    col[idx] = v;
  }
}

bool fits_int(int64_t v) { return v >= 0 && v <= INT32_MAX; }

// C = op(A) op(B), float32, `batch` strided matrices (column-major cuBLAS view).
void sgemm_batched(cublasHandle_t h, cublasOperation_t ta, int64_t m, int64_t n, int64_t k, const float* A,
                   int64_t lda, int64_t sa, const float* B, int64_t ldb, int64_t sb, float* C, int64_t ldc, int64_t sc,
                   int64_t batch) {
  SB_CHECK(fits_int(m) && fits_int(n) && fits_int(k) && fits_int(lda) && fits_int(ldb) && fits_int(ldc) &&
               fits_int(batch),
           "conv2d (CUDA): GEMM sizes m ", m, " n ", n, " k ", k, " (ld ", lda, ", ", ldb, ", ", ldc, ", batch ", batch,
           ") exceed cuBLAS's 32-bit dimensions");
  const float alpha = 1.0f, beta = 0.0f;
  const bool tf32 = allow_tf32();
  SB_CUBLAS_CHECK(::sb::cuda::cublas_api().cublasSetMathMode(h, tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
  SB_CUBLAS_CHECK(::sb::cuda::cublas_api().cublasGemmStridedBatchedEx(
      h, ta, CUBLAS_OP_N, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), &alpha, A, CUDA_R_32F,
      static_cast<int>(lda), sa, B, CUDA_R_32F, static_cast<int>(ldb), sb, &beta, C, CUDA_R_32F, static_cast<int>(ldc),
      sc, static_cast<int>(batch), tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

template <typename Kernel, typename... Args>
void launch_grid_stride(Kernel k, int64_t work, int dev, Args... args) {
  k<<<grid_for(work, dev), kThreads>>>(args...);
  SB_CUDA_LAUNCH_CHECK();
}

// out (dense in the layout of `nhwc`) = conv(x, wm) without bias: wm is [O][K] row-major
// in the layout's k order.
void conv_dense(const ConvGeom& g, bool nhwc, float* out, const Tensor& x, const float* wm, int dev) {
  const float* xp = x.data<float>();
  const XStrides xs{x.stride(0), x.stride(1), x.stride(2), x.stride(3)};
  const MemoryFormat fmt = nhwc ? MemoryFormat::ChannelsLast : MemoryFormat::Contiguous;
  const bool direct = g.KH == 1 && g.KW == 1 && g.s == 1 && g.pad == 0 && x.is_contiguous(fmt);
  const int64_t per_image = g.G * g.K * g.P;  // col floats of one image (= C*KH*KW*P)
  const int64_t chunk = std::max<int64_t>(1, std::min<int64_t>(g.N, kWorkspaceFloats / std::max<int64_t>(per_image, 1)));
  Tensor ws;
  if (!direct) ws = empty({chunk * per_image}, DType::Float32, x.device());
  cublasHandle_t h = cublas_handle(dev);
  for (int64_t n0 = 0; n0 < g.N; n0 += chunk) {
    const int64_t nb = std::min(chunk, g.N - n0);
    const float* col = nullptr;
    if (direct) {
      col = xp + n0 * xs.n;  // dense: NCHW [nb][C][P], NHWC [nb*P][C]
    } else {
      float* cw = ws.data<float>();
      const float* x0 = xp + n0 * xs.n;
      const int64_t total = nb * per_image;
      // 32-bit indices when idx + the grid stride cannot wrap (the grid is at most
      // 32 blocks per SM: far below 2^31 threads).
      const bool small = total <= static_cast<int64_t>(INT32_MAX);
      if (!nhwc) {
        if (small)
          launch_grid_stride(im2col_nchw<uint32_t>, total, dev, cw, x0, xs, static_cast<uint32_t>(total),
                             static_cast<uint32_t>(g.P), static_cast<uint32_t>(g.OW), static_cast<uint32_t>(g.KH),
                             static_cast<uint32_t>(g.KW), static_cast<uint32_t>(g.C), g.H, g.W, g.s, g.pad, g.d);
        else
          launch_grid_stride(im2col_nchw<int64_t>, total, dev, cw, x0, xs, total, g.P, g.OW, g.KH, g.KW, g.C, g.H, g.W,
                             g.s, g.pad, g.d);
      } else {
        if (small)
          launch_grid_stride(im2col_nhwc<uint32_t>, total, dev, cw, x0, xs, static_cast<uint32_t>(total),
                             static_cast<uint32_t>(g.P), static_cast<uint32_t>(g.OW), static_cast<uint32_t>(g.KH),
                             static_cast<uint32_t>(g.KW), static_cast<uint32_t>(g.G), static_cast<uint32_t>(g.Cg), g.H,
                             g.W, g.s, g.pad, g.d);
        else
          launch_grid_stride(im2col_nhwc<int64_t>, total, dev, cw, x0, xs, total, g.P, g.OW, g.KH, g.KW, g.G, g.Cg,
                             g.H, g.W, g.s, g.pad, g.d);
      }
      col = cw;
    }
    float* o0 = out + n0 * g.O * g.P;  // images are O*P apart in either dense layout
    if (!nhwc) {
      if (g.G <= nb) {  // per group, batched over the images (W's batch stride 0)
        for (int64_t grp = 0; grp < g.G; ++grp)
          sgemm_batched(h, CUBLAS_OP_N, g.P, g.Og, g.K, col + grp * g.K * g.P, g.P, g.G * g.K * g.P,
                        wm + grp * g.Og * g.K, g.K, 0, o0 + grp * g.Og * g.P, g.P, g.O * g.P, nb);
      } else {  // per image, batched over the groups
        for (int64_t i = 0; i < nb; ++i)
          sgemm_batched(h, CUBLAS_OP_N, g.P, g.Og, g.K, col + i * per_image, g.P, g.K * g.P, wm, g.K, g.Og * g.K,
                        o0 + i * g.O * g.P, g.P, g.Og * g.P, g.G);
      }
    } else {  // one call, batched over the groups
      sgemm_batched(h, CUBLAS_OP_T, g.Og, nb * g.P, g.K, wm, g.K, g.Og * g.K, col, g.G * g.K, g.K, o0, g.O, g.Og, g.G);
    }
  }
}

// The im2col path: out = conv(x, w) (+ bias, relu), every check done.
[[maybe_unused]] void conv2d_im2col(const ConvGeom& g, const Tensor& out, const Tensor& x, const Tensor& w,
                                    const Tensor& bias, bool relu, int dev) {
  const bool nhwc = x.suggest_memory_format() == MemoryFormat::ChannelsLast;
  const MemoryFormat fmt = nhwc ? MemoryFormat::ChannelsLast : MemoryFormat::Contiguous;
  Tensor res = out.is_contiguous(fmt) ? out : empty(out.sizes(), DType::Float32, out.device(), fmt);
  float* rp = res.data<float>();
  if (g.K == 0) {  // no input channels: an empty sum
    fill(res, 0.0);
  } else {
    const Tensor wm = w.contiguous(fmt);  // [O][K] row-major in the layout's k order
    conv_dense(g, nhwc, rp, x, wm.data<float>(), dev);
  }
  if (bias.defined() || relu) {
    const int64_t total = res.numel();
    bias_relu_kernel<<<grid_for(total, dev), kThreads>>>(rp, bias.defined() ? bias.data<float>() : nullptr,
                                                         bias.defined() ? bias.stride(0) : 0, total,
                                                         nhwc ? 1 : g.P, g.O, relu);
    SB_CUDA_LAUNCH_CHECK();
  }
  if (!res.shares_storage_with(out)) copy(out, res);
}

}  // namespace

void conv2d(const Tensor& out, const Tensor& x, const Tensor& w, const Tensor& bias, const Conv2dParams& p, bool relu) {
  const int dev = bias.defined() ? common_device("conv2d", {&out, &x, &w, &bias}) : common_device("conv2d", {&out, &x, &w});
#ifdef SB_WITH_CUDNN
  const DType dt = x.dtype();
  const bool dtype_ok = dt == DType::Float32 || dt == DType::Float16 || dt == DType::BFloat16;
  const char* dtypes = "float32, float16 or bfloat16";
#else
  const DType dt = DType::Float32;
  const bool dtype_ok = x.dtype() == dt;
  const char* dtypes = "float32 (float16 and bfloat16 go through float32 copies in conv.cpp)";
#endif
  SB_CHECK(dtype_ok && w.dtype() == dt && out.dtype() == dt && (!bias.defined() || bias.dtype() == dt),
           "conv2d (CUDA): expected ", dtypes, " tensors of one dtype, got x ", x.dtype(), ", w ", w.dtype(), ", out ",
           out.dtype(), bias.defined() ? ", bias " : "", bias.defined() ? dtype_name(bias.dtype()) : "");
  SB_CHECK(x.dim() == 4 && w.dim() == 4 && out.dim() == 4, "conv2d (CUDA): expected 4-D x, w and out, got ",
           x.sizes(), ", ", w.sizes(), ", ", out.sizes());
  SB_CHECK(p.stride >= 1 && p.dilation >= 1 && p.padding >= 0 && p.groups >= 1 && x.size(1) % p.groups == 0 &&
               w.size(0) % p.groups == 0 && w.size(1) * p.groups == x.size(1),
           "conv2d (CUDA): x ", x.sizes(), ", w ", w.sizes(), " do not fit groups ", p.groups, " (stride ", p.stride,
           ", padding ", p.padding, ", dilation ", p.dilation, ")");
  ConvGeom g{};
  g.N = x.size(0); g.C = x.size(1); g.H = x.size(2); g.W = x.size(3);
  g.O = w.size(0); g.KH = w.size(2); g.KW = w.size(3);
  g.s = p.stride; g.pad = p.padding; g.d = p.dilation; g.G = p.groups;
  g.Cg = g.C / g.G; g.Og = g.O / g.G;
  g.OH = (g.H + 2 * g.pad - g.d * (g.KH - 1) - 1) / g.s + 1;
  g.OW = (g.W + 2 * g.pad - g.d * (g.KW - 1) - 1) / g.s + 1;
  g.K = g.Cg * g.KH * g.KW;
  g.P = g.OH * g.OW;
  SB_CHECK(g.KH >= 1 && g.KW >= 1 && g.d * (g.KH - 1) + 1 <= g.H + 2 * g.pad &&
               g.d * (g.KW - 1) + 1 <= g.W + 2 * g.pad && out.sizes() == Shape({g.N, g.O, g.OH, g.OW}),
           "conv2d (CUDA): out sizes ", out.sizes(), " for x ", x.sizes(), ", w ", w.sizes(), " (expected [", g.N,
           ", ", g.O, ", ", g.OH, ", ", g.OW, "])");
  SB_CHECK(!bias.defined() || (bias.dim() == 1 && bias.size(0) == g.O), "conv2d (CUDA): bias sizes ",
           bias.defined() ? bias.sizes() : Shape{}, ", expected [", g.O, "]");
  if (out.numel() == 0) return;
  DeviceGuard guard(dev);
#ifdef SB_WITH_CUDNN
  conv2d_cudnn(out, x, w, bias, p, relu);  // Note [cuDNN conv plans]
#else
  conv2d_im2col(g, out, x, w, bias, relu, dev);
#endif
}

#ifndef SB_WITH_CUDNN
ConvPlanInfo conv2d_last_plan() { return {}; }
int cudnn_version() { return 0; }
const char* conv2d_backend() { return "im2col"; }
#endif

// ---------------------------------------------------------------- pooling

namespace {
// Note [CUDA pooling]: one thread per output element in a grid-stride loop, the window
// read through x's strides and the result stored through out's, so every layout of
// either takes the same kernel. The linear index runs channels fastest when x has
// channels innermost (a channels-last x: a warp reads and writes 32 adjacent channels),
// and the output width fastest otherwise. The arithmetic is the CPU kernels' (pool.cpp):
// max from -inf with NaN propagated (a NaN in the window gives NaN, PyTorch's rule); avg
// sums the window's elements inside the input and multiplies by 1/(k*k), counting the
// padding (count_include_pad). A direct kernel, not cuDNN: issue #48 names cuDNN for
// the convolutions; pooling's cost is one read of x.
template <bool kMax>
__global__ void pool2d_kernel(float* out, const float* x, int64_t total, bool c_inner, int64_t C, int64_t H,
                              int64_t W, int64_t OH, int64_t OW, int k, int s, int pad, XStrides xs, XStrides os,
                              float scale) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t r = i, n, c, oh, ow;
    if (c_inner) {
      c = r % C; r /= C;
      ow = r % OW; r /= OW;
      oh = r % OH; n = r / OH;
    } else {
      ow = r % OW; r /= OW;
      oh = r % OH; r /= OH;
      c = r % C; n = r / C;
    }
    const float* xp = x + n * xs.n + c * xs.c;
    const int64_t h0 = oh * s - pad, w0 = ow * s - pad;
    float acc = kMax ? -INFINITY : 0.0f;
    for (int dh = 0; dh < k; ++dh) {
      const int64_t h = h0 + dh;
      if (h < 0 || h >= H) continue;
      for (int dw = 0; dw < k; ++dw) {
        const int64_t w = w0 + dw;
        if (w < 0 || w >= W) continue;
        const float v = xp[h * xs.h + w * xs.w];
        acc = kMax ? nan_max(acc, v) : acc + v;
      }
    }
    out[n * os.n + c * os.c + oh * os.h + ow * os.w] = kMax ? acc : acc * scale;
  }
}
}  // namespace

void pool2d(bool max, const Tensor& out, const Tensor& x, int64_t k, int64_t s, int64_t pad) {
  const int dev = common_device("pool2d", {&out, &x});
  SB_CHECK(x.dim() == 4 && out.dim() == 4 && x.dtype() == DType::Float32 && out.dtype() == DType::Float32,
           "pool2d (CUDA): expected float32 [N, C, H, W] tensors, got x ", x.sizes(), " ", x.dtype(), ", out ",
           out.sizes(), " ", out.dtype());
  if (out.numel() == 0) return;
  SB_CHECK(k <= 1024 && s <= INT32_MAX && pad <= INT32_MAX, "pool2d (CUDA): kernel ", k, ", stride ", s,
           ", padding ", pad, " too large");
  DeviceGuard guard(dev);
  const bool c_inner = x.stride(1) == 1 && x.stride(3) != 1 && x.size(1) > 1;  // as the CPU's pool_channels_inner
  const XStrides xs{x.stride(0), x.stride(1), x.stride(2), x.stride(3)};
  const XStrides os{out.stride(0), out.stride(1), out.stride(2), out.stride(3)};
  const float scale = 1.0f / static_cast<float>(k * k);
  const int64_t total = out.numel();
  if (max)
    launch_grid_stride(pool2d_kernel<true>, total, dev, out.data<float>(), x.data<float>(), total, c_inner, x.size(1),
                       x.size(2), x.size(3), out.size(2), out.size(3), static_cast<int>(k), static_cast<int>(s),
                       static_cast<int>(pad), xs, os, scale);
  else
    launch_grid_stride(pool2d_kernel<false>, total, dev, out.data<float>(), x.data<float>(), total, c_inner,
                       x.size(1), x.size(2), x.size(3), out.size(2), out.size(3), static_cast<int>(k),
                       static_cast<int>(s), static_cast<int>(pad), xs, os, scale);
}

}  // namespace sb::cuda
