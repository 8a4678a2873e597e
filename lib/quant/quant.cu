// quant.cu — the CUDA Linear (cuda_backend.h: linear_forward), in the four precisions of
// stridebench/quant.h.
//
//   F32          one cublasLt matmul with the bias in its epilogue (Note [Linear
//                epilogue in cuBLASLt]), the relu after it; x row-major or column-major
//                as an op flag, any other layout copied first.
//   F16, BF16    a float32 x rounded to float16 (bfloat16) by the copy kernel, then the
//                same cublasLt matmul with float16 (bfloat16) operands, float32 output
//                and float32 accumulation (tensor cores). A 16-bit x goes in as it is
//                (row- or column-major as an op flag), with a 16-bit output and the
//                bias in that type: cuBLASLt adds it in float32 and rounds once (Note
//                [16-bit activations] in stridebench/quant.h).
//   Int8Dynamic  range_kernel: per-block min/max of x (0 included, NaN ignored, as
//                tensor_range) into a small scratch, its last block folds them into
//                act_qparams's scale, inverse and zero point in device memory (Note
//                [Device activation parameters]); quantize_kernel writes xq [M, in'] as
//                int8 (values 0..127, as quant1), zero padded to in'; cuBLAS int8 GEMM
//                (TN, int32 accumulation) into acc [M, out']; dequant_kernel:
//                y = (sx * sw[n]) * float(acc - zp * row_sum[n]) + b[n], relu.
//   Int8Static   as Int8Dynamic without the range pass: the calibrated parameters
//                travel as kernel arguments.
// Note [Device activation parameters]: reading x's range back to the host would put a
// device round trip (as long as a whole 256x1024x1024 layer on an H100:
// docs/notes/cuda.md) in every call; PyTorch's dynamic quantization runs on the CPU only, so there is no peer
// practice to follow. The parameters stay on the device: each later kernel reads them
// from there, with the same float operations as the host's act_qparams and quant1
// (IEEE division and rintf, round half to even), so the GPU's xq equals the CPU's.
// Note [Linear epilogue in cuBLASLt]
// A separate bias/relu kernel reads and writes y once more (128 MiB and a launch at
// 4096x4096x4096), which put us behind PyTorch's f32 layer (cuBLASLt with the bias in
// the GEMM's epilogue; docs/notes/cuda.md). So the f32 and f16 layers
// call cublasLt with CUBLASLT_EPILOGUE_BIAS: bias is a vector over the rows of
// cuBLAS's column-major D = y^T, our output features. The relu is not cuBLASLt's:
// its RELU/RELU_BIAS epilogues turn NaN into 0 in some kernels (the H100's float16
// kernel at K 50) and keep it in others, where the layer keeps NaN (Note [Fused relu
// and NaN] in matmul/gemm_impl.h; CudaLinear.FusedReluPropagatesNaN). A relu layer
// runs bias_relu_kernel's relu over y after the matmul: one more read and write of y.
// Descriptors and the heuristic's first algorithm are made once per (device, type,
// shape, x's layout, epilogue) and kept; the workspace is the device's one
// (cublas_util.h).
// Where the heuristic returns nothing, the layer falls back to cuBLAS (cublasGemmEx) and the
// bias/relu kernel (counted apart: linear_path_counts()).
// Cost (int8): x read twice (range, quantize), xq written and read, acc written and
// read, y written; the GEMM reads the int8 weights once.
#include <atomic>
#include <map>
#include <mutex>
#include <tuple>
#include <vector>

#include "cuda/cublas_util.h"
#include "cuda/cuda_backend.h"
#include "cuda/kernel_util.cuh"
#include "stridebench/elementwise.h"

namespace sb::cuda {
namespace {

struct DevQParams {
  float scale, inv;
  int32_t zero_point;
  uint32_t blocks_done;  // range_kernel's arrival counter (zeroed before the launch)
};

constexpr int kRangeThreads = 256;

__device__ __forceinline__ void block_min_max(float& mn, float& mx) {
  __shared__ float smn[kRangeThreads / kWarp], smx[kRangeThreads / kWarp];
#pragma unroll
  for (int o = kWarp / 2; o > 0; o >>= 1) {
    mn = fminf(mn, __shfl_down_sync(0xffffffffu, mn, o));
    mx = fmaxf(mx, __shfl_down_sync(0xffffffffu, mx, o));
  }
  const int w = threadIdx.x / kWarp, l = threadIdx.x % kWarp;
  if (l == 0) {
    smn[w] = mn;
    smx[w] = mx;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int i = 1; i < kRangeThreads / kWarp; ++i) {
      mn = fminf(mn, smn[i]);
      mx = fmaxf(mx, smx[i]);
    }
  }
}

// Min and max of x [rows, cols] (strides rs, cs), 0 included, NaN ignored (fminf and
// fmaxf return the other operand, as tensor_range's std::min/std::max with the running
// value first); the last block to finish turns them into act_qparams's parameters.
__global__ void range_kernel(const float* __restrict__ x, int64_t rows, int64_t cols, int64_t rs, int64_t cs,
                             float2* __restrict__ part, DevQParams* q) {
  float mn = 0.0f, mx = 0.0f;
  const int64_t n = rows * cols;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / cols, c = i - r * cols;
    const float v = x[r * rs + c * cs];
    mn = fminf(mn, v);
    mx = fmaxf(mx, v);
  }
  block_min_max(mn, mx);
  __shared__ bool last;
  if (threadIdx.x == 0) {
    part[blockIdx.x] = make_float2(mn, mx);
    __threadfence();  // the partial is visible before the counter says so
    last = atomicAdd(&q->blocks_done, 1u) == gridDim.x - 1;
  }
  __syncthreads();
  if (!last) return;
  __threadfence();
  mn = 0.0f;
  mx = 0.0f;
  for (unsigned i = threadIdx.x; i < gridDim.x; i += blockDim.x) {
    const float2 p = __ldcg(part + i);  // past L1: other blocks wrote it
    mn = fminf(mn, p.x);
    mx = fmaxf(mx, p.y);
  }
  block_min_max(mn, mx);
  if (threadIdx.x == 0) {  // act_qparams, operation for operation
    mn = fminf(mn, 0.0f);
    mx = fmaxf(mx, 0.0f);
    const float scale = mx > mn ? (mx - mn) / 127.0f : 1.0f;
    const float z = rintf(-mn / scale);
    const float zl = 0.0f < z ? z : 0.0f;  // std::max(0.0f, z): NaN -> 0
    q->scale = scale;
    q->inv = 1.0f / scale;
    q->zero_point = static_cast<int32_t>(zl < 127.0f ? zl : 127.0f);
  }
}

// quant1: clamp(rint(v * inv) + zp, 0, 127), NaN to 0, with std::max/std::min's
// comparison order.
__device__ __forceinline__ signed char quant1(float v, float inv, int32_t zp) {
  const float q = rintf(v * inv) + static_cast<float>(zp);
  const float lo = 0.0f < q ? q : 0.0f;
  return static_cast<signed char>(static_cast<int>(lo < 127.0f ? lo : 127.0f));
}

// xq [rows, colsp] int8, 4 per thread (colsp a multiple of 4), zero past cols.
__global__ void quantize_kernel(const float* __restrict__ x, int64_t rows, int64_t cols, int64_t rs, int64_t cs,
                                int64_t colsp, const DevQParams* q, float inv_arg, int32_t zp_arg,
                                char4* __restrict__ xq) {
  const float inv = q ? q->inv : inv_arg;
  const int32_t zp = q ? q->zero_point : zp_arg;
  const int64_t groups = colsp / 4, n = rows * groups;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / groups, k0 = (i - r * groups) * 4;
    const float* row = x + r * rs;
    signed char v[4];
#pragma unroll
    for (int t = 0; t < 4; ++t) v[t] = k0 + t < cols ? quant1(row[(k0 + t) * cs], inv, zp) : 0;
    xq[i] = make_char4(v[0], v[1], v[2], v[3]);
  }
}

// y [rows, cols] (contiguous) from acc [rows, ld]: the CPU epilogue's arithmetic
// (quant.cpp: s = sx * sw[n], then s * float(acc - zp * row_sum[n]), then + bias);
// __fmul_rn keeps nvcc from fusing the product with the bias add.
__global__ void dequant_kernel(float* __restrict__ y, const int32_t* __restrict__ acc, int64_t rows, int64_t cols,
                               int64_t ld, const float* __restrict__ sw, const int32_t* __restrict__ row_sum,
                               const float* __restrict__ bias, const DevQParams* q, float sx_arg, int32_t zp_arg,
                               bool relu) {
  const float sx = q ? q->scale : sx_arg;
  const int32_t zp = q ? q->zero_point : zp_arg;
  const int64_t n = rows * cols;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / cols, c = i - r * cols;
    float v = __fmul_rn(__fmul_rn(sx, sw[c]), static_cast<float>(acc[r * ld + c] - zp * row_sum[c]));
    if (bias) v += bias[c];
    if (relu) v = v < 0.0f ? 0.0f : v;  // NaN stays, as the elementwise relu
    y[i] = v;
  }
}

// bias (float32, y float32 only) and relu over y; a 16-bit y takes the relu only
// (its bias is in cuBLASLt's epilogue, or added in float32 before the rounding).
void epilogue(const Tensor& y, const Tensor& bias, bool relu, int dev) {
  if (!bias.defined() && !relu) return;
  if (y.dtype() != DType::Float32) {
    SB_INTERNAL_ASSERT(!bias.defined(), "Linear (CUDA): a bias over a ", y.dtype(), " output");
    Tensor out = y;
    sb::relu_out(out, y);  // the elementwise relu in place: NaN stays
    return;
  }
  const int64_t total = y.numel();
  bias_relu_kernel<<<grid_for(total, dev), kThreads>>>(y.data<float>(), bias.defined() ? bias.data<float>() : nullptr,
                                                       1, total, 1, y.size(1), relu);
  SB_CUDA_LAUNCH_CHECK();
}

// y float32 [M, out] = x16 [M, in] (float16 or bfloat16, row-major) @ w16^T ([out, in],
// row-major): column-major y^T (out x M) = w16' (op T: in x out stored, ld in) * x16'
// (op N, ld in).
void gemm_16_f32(const Tensor& y, const Tensor& x16, const Tensor& w16, cudaDataType_t ab, int dev) {
  const int64_t M = y.size(0), N = y.size(1), K = x16.size(1);
  SB_CHECK(M <= INT32_MAX && N <= INT32_MAX && K <= INT32_MAX, "Linear (CUDA): sizes ", x16.sizes(), " x ",
           w16.sizes(), " exceed cuBLAS's 32-bit dimensions");
  cublasHandle_t h = cublas_handle(dev);
  SB_CUBLAS_CHECK(::sb::cuda::cublas_api().cublasSetMathMode(h, CUBLAS_DEFAULT_MATH));
  const float one = 1.0f, zero = 0.0f;
  SB_CUBLAS_CHECK(::sb::cuda::cublas_api().cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(N), static_cast<int>(M),
                               static_cast<int>(K), &one, w16.data_ptr(), ab, static_cast<int>(K),
                               x16.data_ptr(), ab, static_cast<int>(x16.stride(0)), &zero, y.data_ptr(),
                               CUDA_R_32F, static_cast<int>(N), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}


std::atomic<int64_t> g_lt_calls{0}, g_fallback_calls{0};

struct LtPlan {
  bool ok = false;
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
};

// (device, operand type, output type, M, N, K, x transposed, ld of x, epilogue)
using LtKey = std::tuple<int, int, int, int64_t, int64_t, int64_t, bool, int64_t, int>;

// Note [16-bit outputs and split-K]: for a small M x N cuBLASLt's heuristic may pick an
// algorithm that splits K. With a float16 or bfloat16 y and the bias epilogue, such an
// algorithm rounded the product to 16 bits before adding the bias, whatever reduction
// scheme it was allowed (in the output, or in float32 workspace): two roundings where
// Note [16-bit activations] promises one, and many ulp of y where the bias cancels most
// of the product (tests/quant_test.cpp caught it on an H200; docs/notes/cuda.md). For a
// 16-bit y the plan takes the heuristic's first algorithm that does not split K; with
// none, the layer takes the float32 path (one rounding at the end).

// y^T (N x M column-major, ld N) = op(w') (w [N, K] row-major: K x N column-major, op T)
// x op(x') (x [M, K]: row-major -> K x M, op N; column-major -> M x K, op T) with the
// bias epilogue, then the relu. y (C and D) of type cd: float32, or the operands' 16-bit
// type with a bias of that type (cuBLASLt's bias takes D's type). False when cuBLASLt
// offers no algorithm for it.
bool lt_linear(const Tensor& y, const Tensor& x, bool xtrans, int64_t ldx, const Tensor& w, cudaDataType_t ab,
               cudaDataType_t cd, const Tensor& bias, bool relu, int dev) {
  const int64_t M = y.size(0), N = y.size(1), K = w.size(1);
  if (M > INT32_MAX || N > INT32_MAX || K > INT32_MAX || ldx > INT32_MAX) return false;
  // No RELU epilogue: Note [Linear epilogue in cuBLASLt]
  const cublasLtEpilogue_t epi = bias.defined() ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
  static std::mutex mu;
  static std::map<LtKey, LtPlan> plans;
  std::lock_guard<std::mutex> lock(mu);  // also guards the shared descriptor's bias pointer below
  const LtKey key{dev, static_cast<int>(ab), static_cast<int>(cd), M, N, K, xtrans, ldx, static_cast<int>(epi)};
  auto it = plans.find(key);
  if (it == plans.end()) {
    LtPlan p;
    const cublasOperation_t ta = CUBLAS_OP_T, tb = xtrans ? CUBLAS_OP_T : CUBLAS_OP_N;
    SB_CUBLAS_CHECK(::sb::cuda::cublas_api().cublasLtMatmulDescCreate(&p.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    SB_CUBLAS_CHECK(::sb::cuda::cublas_api().cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
    SB_CUBLAS_CHECK(::sb::cuda::cublas_api().cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
    SB_CUBLAS_CHECK(::sb::cuda::cublas_api().cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)));
    if (bias.defined()) {  // the heuristic sees a bias pointer of the alignment every call will have
      const void* bp = bias.data_ptr();
      SB_CUBLAS_CHECK(::sb::cuda::cublas_api().cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bp, sizeof(bp)));
    }
    SB_CUBLAS_CHECK(::sb::cuda::cublas_api().cublasLtMatrixLayoutCreate(&p.a, ab, static_cast<uint64_t>(K), static_cast<uint64_t>(N), K));
    SB_CUBLAS_CHECK(xtrans ? ::sb::cuda::cublas_api().cublasLtMatrixLayoutCreate(&p.b, ab, static_cast<uint64_t>(M), static_cast<uint64_t>(K), ldx)
                             : ::sb::cuda::cublas_api().cublasLtMatrixLayoutCreate(&p.b, ab, static_cast<uint64_t>(K), static_cast<uint64_t>(M), ldx));
    SB_CUBLAS_CHECK(::sb::cuda::cublas_api().cublasLtMatrixLayoutCreate(&p.c, cd, static_cast<uint64_t>(N), static_cast<uint64_t>(M), N));
    cublasLtMatmulPreference_t pref;
    SB_CUBLAS_CHECK(::sb::cuda::cublas_api().cublasLtMatmulPreferenceCreate(&pref));
    const size_t ws = kCublasLtWorkspace;
    SB_CUBLAS_CHECK(
        ::sb::cuda::cublas_api().cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
    cublasLtMatmulHeuristicResult_t res[8] = {};
    int found = 0;
    const cublasStatus_t st =
        ::sb::cuda::cublas_api().cublasLtMatmulAlgoGetHeuristic(cublaslt_handle(dev), p.op, p.a, p.b, p.c, p.c, pref, 8, res, &found);
    ::sb::cuda::cublas_api().cublasLtMatmulPreferenceDestroy(pref);
    p.ok = false;
    for (int i = 0; st == CUBLAS_STATUS_SUCCESS && i < found && !p.ok; ++i) {
      int32_t splitk = 1;
      size_t written = 0;
      if (cd != CUDA_R_32F &&  // Note [16-bit outputs and split-K]
          (::sb::cuda::cublas_api().cublasLtMatmulAlgoConfigGetAttribute(&res[i].algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splitk, sizeof(splitk),
                                                &written) != CUBLAS_STATUS_SUCCESS || splitk > 1))
        continue;
      p.ok = true;
      p.algo = res[i].algo;
    }
    it = plans.emplace(key, p).first;  // descriptors kept for the process (as the handles)
  }
  const LtPlan& p = it->second;
  if (!p.ok) return false;
  if (bias.defined()) {
    const void* bp = bias.data_ptr();
    SB_CUBLAS_CHECK(::sb::cuda::cublas_api().cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bp, sizeof(bp)));
  }
  const float one = 1.0f, zero = 0.0f;
  SB_CUBLAS_CHECK(::sb::cuda::cublas_api().cublasLtMatmul(cublaslt_handle(dev), p.op, &one, w.data_ptr(), p.a, x.data_ptr(), p.b, &zero,
                                   y.data_ptr(), p.c, y.data_ptr(), p.c, &p.algo, cublaslt_workspace(dev), kCublasLtWorkspace, 0));
  epilogue(y, Tensor(), relu, dev);
  ++g_lt_calls;
  return true;
}

// x [M, K] as cuBLASLt's B operand: row-major (op N) or column-major (op T) as it is,
// any other layout copied to row-major first.
struct LtOperand {
  Tensor x;
  bool trans = false;
  int64_t ld = 1;
};
LtOperand lt_operand(const Tensor& x, int64_t K) {
  const int64_t M = x.size(0), rs = x.stride(0), cs = x.stride(1);
  const bool row_major = (K <= 1 || cs == 1) && (M <= 1 || rs >= K);
  const bool col_major = !row_major && (M <= 1 || rs == 1) && (K <= 1 || cs >= M);
  LtOperand o;
  o.x = row_major || col_major ? x : x.contiguous();
  o.trans = col_major;
  o.ld = std::max<int64_t>(o.trans ? (K <= 1 ? M : cs) : (M <= 1 ? K : o.x.stride(0)), 1);
  return o;
}

}  // namespace

void linear_forward(const Tensor& y, const Tensor& x, const LinearWeights& w, const ActQParams& act, bool relu) {
  const int dev = common_device("Linear", {&y, &x, &w.w});
  const bool narrow = w.precision == Precision::F16 || w.precision == Precision::BF16;
  SB_INTERNAL_ASSERT(x.dim() == 2 && x.size(1) == w.in && y.is_contiguous() && y.size(0) == x.size(0) &&
                         y.size(1) == w.out && y.dtype() == x.dtype() &&
                         (x.dtype() == DType::Float32 || (narrow && x.dtype() == w.w.dtype())),
                     "linear_forward: y ", y.sizes(), " ", y.dtype(), ", x ", x.sizes(), " ", x.dtype(), ", weights [",
                     w.out, ", ", w.in, "] ", w.w.dtype());
  DeviceGuard g(dev);
  const int64_t M = x.size(0);
  if (M == 0 || w.out == 0) return;
  if (w.in == 0 && w.precision != Precision::Int8Dynamic && w.precision != Precision::Int8Static) {
    if (y.dtype() == DType::Float32) {  // an empty sum
      fill(y, 0.0);
      epilogue(y, w.bias, relu, dev);
    } else {  // the rounded bias, or zeros
      Tensor y32 = empty({M, w.out}, DType::Float32, y.device());
      fill(y32, 0.0);
      epilogue(y32, w.bias_rounded, relu, dev);
      copy(y, y32);
    }
    return;
  }
  switch (w.precision) {
    case Precision::F32: {
      const LtOperand xo = lt_operand(x, w.in);
      if (lt_linear(y, xo.x, xo.trans, xo.ld, w.w, CUDA_R_32F, CUDA_R_32F, w.bias, relu, dev)) return;
      ++g_fallback_calls;
      linear(y, x, w.w);
      epilogue(y, w.bias, relu, dev);
      return;
    }
    case Precision::F16:
    case Precision::BF16: {
      const bool bf = w.precision == Precision::BF16;
      const cudaDataType_t ab = bf ? CUDA_R_16BF : CUDA_R_16F;
      const DType dt = bf ? DType::BFloat16 : DType::Float16;
      if (x.dtype() == dt) {  // Note [16-bit activations]: x as it is, y rounded once from float32
        const LtOperand xo = lt_operand(x, w.in);
        if (lt_linear(y, xo.x, xo.trans, xo.ld, w.w, ab, ab, w.bias16, relu, dev)) return;
        ++g_fallback_calls;
        Tensor y32 = empty({M, w.out}, DType::Float32, x.device());
        gemm_16_f32(y32, x.contiguous(), w.w, ab, dev);
        epilogue(y32, w.bias_rounded, relu, dev);
        copy(y, y32);
        return;
      }
      Tensor x16 = empty({M, w.in}, dt, x.device());
      copy(x16, x);
      if (lt_linear(y, x16, false, w.in, w.w, ab, CUDA_R_32F, w.bias, relu, dev)) return;
      ++g_fallback_calls;
      gemm_16_f32(y, x16, w.w, ab, dev);
      epilogue(y, w.bias, relu, dev);
      return;
    }
    default: break;
  }
  const bool dynamic = w.precision == Precision::Int8Dynamic;
  const int64_t outp = w.w.size(0), inp = w.w.size(1);
  // Scratch: the parameters, then one (min, max) pair per range block.
  const unsigned range_blocks = std::min<unsigned>(grid_for(x.numel(), dev), 1024);
  Tensor scratch;
  DevQParams* q = nullptr;
  if (dynamic) {
    static_assert(sizeof(DevQParams) % 8 == 0, "the partials after the parameters stay 8-byte aligned");
    scratch = empty({static_cast<int64_t>(sizeof(DevQParams) / 4 + 2 * range_blocks)}, DType::Int32, x.device());
    q = static_cast<DevQParams*>(scratch.data_ptr());
    float2* part = reinterpret_cast<float2*>(static_cast<char*>(scratch.data_ptr()) + sizeof(DevQParams));
    SB_CUDA_CHECK(cudaMemsetAsync(q, 0, sizeof(DevQParams), 0));
    range_kernel<<<range_blocks, kRangeThreads>>>(x.data<float>(), M, w.in, x.stride(0), x.stride(1), part, q);
    SB_CUDA_LAUNCH_CHECK();
  }
  Tensor xq = empty({M, inp}, DType::Int8, x.device());
  quantize_kernel<<<grid_for(M * inp / 4, dev), kThreads>>>(x.data<float>(), M, w.in, x.stride(0), x.stride(1), inp, q,
                                                            1.0f / act.scale, act.zero_point,
                                                            static_cast<char4*>(xq.data_ptr()));
  SB_CUDA_LAUNCH_CHECK();
  Tensor acc = empty({M, outp}, DType::Int32, x.device());
  linear(acc, xq, w.w);
  dequant_kernel<<<grid_for(M * w.out, dev), kThreads>>>(
      y.data<float>(), acc.data<int32_t>(), M, w.out, outp, w.scale.data<float>(), w.row_sum.data<int32_t>(),
      w.bias.defined() ? w.bias.data<float>() : nullptr, q, act.scale, act.zero_point, relu);
  SB_CUDA_LAUNCH_CHECK();
}

LinearPathCounts linear_path_counts() { return {g_lt_calls.load(), g_fallback_calls.load()}; }
void reset_linear_path_counts() {
  g_lt_calls = 0;
  g_fallback_calls = 0;
}

}  // namespace sb::cuda
