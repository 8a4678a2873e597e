// matmul.cu — matmul and linear through cuBLAS (cublasGemmStridedBatchedEx).
//
// cuBLAS is column-major; a row-major C = A·B is computed as the column-major
// C^T = B^T·A^T, so cuBLAS's first operand is b and its second is a. Each operand's
// layout becomes an op flag and a leading dimension, with no copy:
//   row-major     (stride of the last dim 1, of the other >= the last size): op N,
//                 ld = the row stride (covers row-strided views: a[:, ::1] of a wider
//                 buffer, narrow() along the columns)
//   column-major  (a transposed view, .t() of a row-major tensor): op T, ld = the
//                 column stride
//   anything else (stepped slices along the last dim, expanded dims, ...): copied
//                 to a contiguous buffer first, counted by matmul_operand_copies()
// out row-major or column-major is written in place (a column-major out is computed as
// out^T = b^T·a^T into its row-major transpose); any other non-overlapping out through a
// temporary (Note [Outs cuBLAS cannot write]). 3-D: one strided-batched call;
// a batch stride of 0 (expanded batch, or batch size 1) broadcasts that operand.
// Types: float32 (CUBLAS_COMPUTE_32F, or 32F_FAST_TF32 when allow_tf32), float64,
// float16 and bfloat16 (inputs and output 16-bit, fp32 accumulation: tensor cores), int8 x int8 ->
// int32 (CUBLAS_COMPUTE_32I; cuBLAS wants the TN form and ld multiples of 4, which
// linear(x, w) with row-major x and w gives; other int8 layouts may be refused by
// cuBLAS with CUBLAS_STATUS_NOT_SUPPORTED, reported as an sb::Error).
// Cost: 2·M·N·K FLOP; reads M·K + K·N, writes M·N elements.
#include <cublas_v2.h>

#include <atomic>
#include <mutex>
#include <vector>

#include "cuda/cublas_util.h"
#include "cuda/cuda_backend.h"
#include "cuda/kernel_util.cuh"

namespace sb::cuda {

// One handle per device, on the legacy default stream (cublas_util.h).
cublasHandle_t cublas_handle(int device) {
  static std::mutex mu;
  static std::vector<cublasHandle_t> handles;
  std::lock_guard<std::mutex> lock(mu);
  if (handles.empty()) handles.assign(static_cast<size_t>(device_count()), nullptr);
  cublasHandle_t& h = handles[static_cast<size_t>(device)];
  if (!h) {  // never destroyed (see allocator.cpp on teardown order)
    DeviceGuard g(device);
    SB_CUBLAS_CHECK(::sb::cuda::cublas_api().cublasCreate(&h));
    SB_CUBLAS_CHECK(::sb::cuda::cublas_api().cublasSetStream(h, 0));
  }
  return h;
}

cublasLtHandle_t cublaslt_handle(int device) {
  static std::mutex mu;
  static std::vector<cublasLtHandle_t> handles;
  std::lock_guard<std::mutex> lock(mu);
  if (handles.empty()) handles.assign(static_cast<size_t>(device_count()), nullptr);
  cublasLtHandle_t& h = handles[static_cast<size_t>(device)];
  if (!h) {
    DeviceGuard g(device);
    SB_CUBLAS_CHECK(::sb::cuda::cublas_api().cublasLtCreate(&h));
  }
  return h;
}

void* cublaslt_workspace(int device) {
  static std::mutex mu;
  static std::vector<void*> spaces;
  std::lock_guard<std::mutex> lock(mu);
  if (spaces.empty()) spaces.assign(static_cast<size_t>(device_count()), nullptr);
  void*& w = spaces[static_cast<size_t>(device)];
  if (!w) {
    DeviceGuard g(device);
    SB_CUDA_CHECK(cudaMalloc(&w, kCublasLtWorkspace));
  }
  return w;
}

namespace {

std::atomic<int64_t> g_operand_copies{0};
std::atomic<bool> g_allow_tf32{false};

struct MatLayout {
  bool ok = false;      // row- or column-major
  bool trans = false;   // column-major: cuBLAS op T for our operand roles
  int64_t ld = 0;
};

// A 2-D matrix (rows, cols) with strides (sr, sc), as cuBLAS sees it.
MatLayout layout_of(int64_t rows, int64_t cols, int64_t sr, int64_t sc) {
  MatLayout l;
  const bool row_major = (cols <= 1 || sc == 1) && (rows <= 1 || sr >= std::max<int64_t>(cols, 1));
  const bool col_major = (rows <= 1 || sr == 1) && (cols <= 1 || sc >= std::max<int64_t>(rows, 1));
  if (row_major) {
    l.ok = true;
    l.ld = rows <= 1 ? std::max<int64_t>(cols, 1) : sr;
  } else if (col_major) {
    l.ok = true;
    l.trans = true;
    l.ld = cols <= 1 ? std::max<int64_t>(rows, 1) : sc;
  }
  return l;
}

// The last two dims of t as a matrix; batch stride from dim 0 when 3-D (0 when size 1).
MatLayout layout_2d(const Tensor& t) {
  const int64_t n = t.dim();
  return layout_of(t.size(n - 2), t.size(n - 1), t.stride(n - 2), t.stride(n - 1));
}
int64_t batch_stride(const Tensor& t) { return t.dim() == 3 && t.size(0) > 1 ? t.stride(0) : 0; }

cudaDataType_t cuda_type(DType t) {
  switch (t) {
    case DType::Float32: return CUDA_R_32F;
    case DType::Float64: return CUDA_R_64F;
    case DType::Float16: return CUDA_R_16F;
    case DType::BFloat16: return CUDA_R_16BF;
    case DType::Int8: return CUDA_R_8I;
    case DType::Int32: return CUDA_R_32I;
    default: break;
  }
  SB_CHECK(false, "matmul (CUDA): dtype ", t, " has no cuBLAS type");
  return CUDA_R_32F;
}

bool fits_int(int64_t v) { return v >= 0 && v <= INT32_MAX; }

// out (row-major) = a @ b, operands already usable as they are.
void gemm(const Tensor& out, const Tensor& a, const Tensor& b) {
  const int64_t M = out.size(-2), N = out.size(-1), K = a.size(-1);
  const int64_t batch = out.dim() == 3 ? out.size(0) : 1;
  const MatLayout lo = layout_2d(out), la = layout_2d(a), lb = layout_2d(b);
  SB_INTERNAL_ASSERT(lo.ok && !lo.trans && la.ok && lb.ok, "matmul: layouts");
  SB_CHECK(fits_int(M) && fits_int(N) && fits_int(K) && fits_int(batch) && fits_int(lo.ld) && fits_int(la.ld) &&
               fits_int(lb.ld),
           "matmul (CUDA): sizes ", a.sizes(), " x ", b.sizes(), " exceed cuBLAS's 32-bit dimensions");
  const int dev = out.device().index;
  DeviceGuard g(dev);
  cublasHandle_t h = cublas_handle(dev);
  const DType dt = a.dtype();
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  float alpha_f = 1.f, beta_f = 0.f;
  double alpha_d = 1.0, beta_d = 0.0;
  int32_t alpha_i = 1, beta_i = 0;
  const void* alpha = &alpha_f;
  const void* beta = &beta_f;
  switch (dt) {
    case DType::Float32: compute = g_allow_tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F; break;
    case DType::Float64:
      compute = CUBLAS_COMPUTE_64F;
      alpha = &alpha_d;
      beta = &beta_d;
      break;
    case DType::Float16:   // fp32 accumulation, fp16 / bf16 tensor cores
    case DType::BFloat16: compute = CUBLAS_COMPUTE_32F; break;
    case DType::Int8:
      compute = CUBLAS_COMPUTE_32I;
      alpha = &alpha_i;
      beta = &beta_i;
      break;
    default: SB_INTERNAL_ASSERT(false, "matmul dtype ", dt);
  }
  if (M == 0 || N == 0) return;
  if (K == 0) {  // an empty sum: zeros
    fill(out, 0.0);
    return;
  }
  SB_CUBLAS_CHECK(::sb::cuda::cublas_api().cublasSetMathMode(h, dt == DType::Float32 && g_allow_tf32 ? CUBLAS_TF32_TENSOR_OP_MATH
                                                                            : CUBLAS_DEFAULT_MATH));
  // Column-major C^T (N x M, ldc) = op(B') (N x K) · op(A') (K x M); B' is b seen
  // column-major: row-major b (K x N) is N x K column-major (op N); a column-major b
  // is K x N column-major (op T). Likewise for a.
  SB_CUBLAS_CHECK(::sb::cuda::cublas_api().cublasGemmStridedBatchedEx(
      h, lb.trans ? CUBLAS_OP_T : CUBLAS_OP_N, la.trans ? CUBLAS_OP_T : CUBLAS_OP_N, static_cast<int>(N),
      static_cast<int>(M), static_cast<int>(K), alpha, b.data_ptr(), cuda_type(b.dtype()), static_cast<int>(lb.ld),
      batch_stride(b), a.data_ptr(), cuda_type(a.dtype()), static_cast<int>(la.ld), batch_stride(a), beta,
      out.data_ptr(), cuda_type(out.dtype()), static_cast<int>(lo.ld), batch_stride(out), static_cast<int>(batch),
      compute, CUBLAS_GEMM_DEFAULT));
}

Tensor usable(const Tensor& t) {
  if (layout_2d(t).ok) return t;
  ++g_operand_copies;
  return t.contiguous();
}

}  // namespace

void matmul(const Tensor& out, const Tensor& a, const Tensor& b) {
  common_device("matmul", {&out, &a, &b});
  SB_CHECK(a.dim() == b.dim() && (a.dim() == 2 || a.dim() == 3) && out.dim() == a.dim(),
           "matmul (CUDA): expected 2-D or 3-D operands of one rank, got a ", a.sizes(), ", b ", b.sizes(), ", out ",
           out.sizes());
  SB_CHECK(a.dtype() == b.dtype(), "matmul (CUDA): dtypes differ: a ", a.dtype(), ", b ", b.dtype());
  const bool int8 = a.dtype() == DType::Int8;
  SB_CHECK(is_floating(a.dtype()) || int8, "matmul (CUDA): dtype ", a.dtype(),
           " is not supported (float32, float64, float16, bfloat16, int8)");
  SB_CHECK(out.dtype() == (int8 ? DType::Int32 : a.dtype()), "matmul (CUDA): out dtype ", out.dtype(),
           " for inputs of ", a.dtype(), " (expected ", (int8 ? DType::Int32 : a.dtype()), ")");
  SB_CHECK(a.size(-1) == b.size(-2), "matmul (CUDA): inner sizes differ: a ", a.sizes(), ", b ", b.sizes());
  SB_CHECK(out.size(-2) == a.size(-2) && out.size(-1) == b.size(-1), "matmul (CUDA): out sizes ", out.sizes(),
           " for a ", a.sizes(), " x b ", b.sizes());
  if (a.dim() == 3) {
    const int64_t B = out.size(0);
    SB_CHECK((a.size(0) == B || a.size(0) == 1) && (b.size(0) == B || b.size(0) == 1), "matmul (CUDA): batch sizes a ",
             a.size(0), ", b ", b.size(0), ", out ", B, " (a batch of 1 broadcasts)");
  }
  SB_CHECK(has_internal_overlap(out) != MemOverlap::Yes, "matmul (CUDA): out (strides ", out.strides(),
           ") has overlapping elements");
  if (out.numel() == 0) return;  // nothing to write, whatever the operands' strides
  if (a.size(-1) == 0) {         // every element a sum of nothing
    Tensor(out).fill_(0.0);      // a handle on out's storage: the const is the handle's
    return;
  }
  // Note [Outs cuBLAS cannot write]: cuBLAS writes a matrix of one leading dimension per
  // batch, batches a fixed stride apart and not interleaved. Any other out whose elements
  // do not overlap (a stepped out, batches interleaved with each other, as a permuted
  // buffer gives) is computed into a contiguous temporary and copied in, as the CPU's
  // packed C store takes any strides (matmul.h); the copy costs one pass over out.
  const MatLayout lo = layout_2d(out);
  const bool batches_apart = out.dim() != 3 || out.size(0) <= 1 || out.stride(0) >= out.size(1) * out.size(2);
  if (!lo.ok || !batches_apart) {
    Tensor tmp = empty(out.sizes(), out.dtype(), out.device());
    matmul(tmp, a, b);
    Tensor(out).copy_(tmp);
    return;
  }
  if (lo.trans) {  // out^T = b^T a^T into out's row-major transpose
    const int64_t n = out.dim();
    matmul(out.transpose(n - 2, n - 1), b.transpose(n - 2, n - 1), a.transpose(n - 2, n - 1));
    return;
  }
  gemm(out, usable(a), usable(b));
}

void linear(const Tensor& out, const Tensor& x, const Tensor& w) {
  SB_CHECK(w.dim() == 2, "linear (CUDA): expected a 2-D weight (out_features, in_features), got ", w.sizes());
  SB_CHECK(x.dim() == 2, "linear (CUDA): expected a 2-D input (batch, in_features), got ", x.sizes());
  matmul(out, x, w.t());
}

void set_allow_tf32(bool allow) { g_allow_tf32 = allow; }
bool allow_tf32() { return g_allow_tf32.load(); }
int64_t matmul_operand_copies() { return g_operand_copies.load(); }
void reset_matmul_operand_copies() { g_operand_copies = 0; }

}  // namespace sb::cuda
