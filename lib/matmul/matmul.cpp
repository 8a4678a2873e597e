// matmul.cpp — matmul / matmul_out: checks, batch broadcasting, dispatch to the packed
// GEMM (gemm_kernel.cpp) or, for CUDA tensors, to sb::cuda::matmul.
// Cost: 2*B*M*N*K flop; each operand read once per pack (A: ceil(N/NC) times), C written once.
#include "stridebench/matmul.h"

#include <type_traits>

#include "matmul/gemm_impl.h"
#ifdef SB_WITH_CUDA
#include "cuda/cuda_backend.h"
#endif

namespace sb {
namespace {

// Note [matmul as PyTorch shapes it]
// matmul takes what torch.matmul takes: a 1-D a is a row [1, K] and a 1-D b a column
// [K, 1], the dim so added dropped from the result (two vectors give a 0-D dot
// product); every dim before the last two is a batch dim, and the two operands' batch
// dims broadcast. The GEMM core below takes 2-D operands and one batch dim; Operands
// turns the rest into views for it (unsqueeze for the vectors, expand for the broadcast
// batch), and a result with several batch dims runs the core once per index of all
// but the last (select views), so nothing is copied.
struct Operands {
  Tensor a, b;   // the operands with their vectors as matrices, batch dims broadcast (expanded)
  Shape sizes;   // the result's sizes, as PyTorch gives them
};

Operands matmul_operands(const Tensor& a, const Tensor& b, const char* op) {
  SB_CHECK(a.defined() && b.defined(), op, ": undefined operand");
  SB_CHECK(a.dim() >= 1 && b.dim() >= 1, op, ": both operands must be at least 1-D, got sizes ", a.sizes(), " x ",
           b.sizes());
  SB_CHECK(a.dtype() == b.dtype(), op, ": dtype mismatch ", a.dtype(), " vs ", b.dtype());
  SB_CHECK(a.device() == b.device(), op, ": device mismatch ", a.device(), " vs ", b.device());
  // float16 on CUDA only (cuBLAS), as in PyTorch 1.13, whose CPU matmul has no float16
  SB_CHECK(a.dtype() == DType::Float32 || a.dtype() == DType::Float64 || a.dtype() == DType::BFloat16 ||
               (a.dtype() == DType::Float16 && a.device().is_cuda()),
           op, ": expected float32, float64 or bfloat16 (or float16 on CUDA), got ", a.dtype(), " on ", a.device());
  Operands o{a.dim() == 1 ? a.unsqueeze(0) : a, b.dim() == 1 ? b.unsqueeze(1) : b, {}};
  SB_CHECK(o.a.size(-1) == o.b.size(-2), op, ": inner dimensions differ: ", a.sizes(), " x ", b.sizes(), " (",
           o.a.size(-1), " vs ", o.b.size(-2), ")");
  const int64_t M = o.a.size(-2), K = o.a.size(-1), N = o.b.size(-1);
  const Shape ba(o.a.sizes().begin(), o.a.sizes().end() - 2), bb(o.b.sizes().begin(), o.b.sizes().end() - 2);
  Shape batch;
  try {
    batch = broadcast_shapes(ba, bb, op);
  } catch (const Error&) {
    SB_CHECK(false, op, ": batch sizes do not broadcast: ", a.sizes(), " x ", b.sizes());
  }
  if (!batch.empty()) {  // stride-0 batch dims where an operand broadcasts
    Shape ea = batch, eb = batch;
    ea.insert(ea.end(), {M, K});
    eb.insert(eb.end(), {K, N});
    o.a = o.a.expand(ea);
    o.b = o.b.expand(eb);
  }
  o.sizes = batch;
  if (a.dim() > 1) o.sizes.push_back(M);
  if (b.dim() > 1) o.sizes.push_back(N);
  return o;
}

// out (of o.sizes) seen with the vectors' dims back: batch..., M, N.
Tensor full_view(const Tensor& out, const Tensor& a, const Tensor& b) {
  Tensor f = out;
  if (b.dim() == 1) f = f.unsqueeze(f.dim());
  if (a.dim() == 1) f = f.unsqueeze(f.dim() - 1);
  return f;
}

template <typename T>
void matmul_cpu(const Tensor& out, const Tensor& a, const Tensor& b) {
  // the bfloat16 GEMM's epilogue is float32's (its arithmetic type)
  using Ep = std::conditional_t<std::is_same_v<T, BFloat16>, GemmEpilogue, GemmEpilogueT<T>>;
  const int64_t M = a.size(-2), K = a.size(-1), N = b.size(-1);
  const T* pa = static_cast<const T*>(a.data_ptr());
  const T* pb = static_cast<const T*>(b.data_ptr());
  T* pc = static_cast<T*>(out.data_ptr());
  const int64_t a_rs = a.stride(-2), a_cs = a.stride(-1), b_rs = b.stride(-2), b_cs = b.stride(-1);
  const int64_t c_rs = out.stride(-2), c_cs = out.stride(-1);
  if (out.dim() == 2) {
    gemm(M, N, K, pa, a_rs, a_cs, pb, b_rs, b_cs, pc, c_rs, c_cs, Ep{});
    return;
  }
  const int64_t B = out.size(0);
  const int64_t a_bs = (a.dim() == 3 && a.size(0) != 1) ? a.stride(0) : 0;
  const int64_t b_bs = (b.dim() == 3 && b.size(0) != 1) ? b.stride(0) : 0;
  // A shared B with batch and rows of A (and C) that merge into one dim: one big GEMM.
  if (b_bs == 0 && (B == 1 || (a_bs == M * a_rs && out.stride(0) == M * c_rs))) {
    gemm(B * M, N, K, pa, a_rs, a_cs, pb, b_rs, b_cs, pc, c_rs, c_cs, Ep{});
    return;
  }
  for (int64_t i = 0; i < B; ++i)
    gemm(M, N, K, pa + i * a_bs, a_rs, a_cs, pb + i * b_bs, b_rs, b_cs, pc + i * out.stride(0), c_rs, c_cs,
         Ep{});
}

void matmul_core(const Tensor& out, const Tensor& a, const Tensor& b);

// out, a and b of the same batch dims (Operands), any number of them.
void matmul_dispatch(const Tensor& out, const Tensor& a, const Tensor& b) {
  if (out.numel() == 0) return;
  if (out.dim() <= 3) return matmul_core(out, a, b);
  for (int64_t i = 0; i < out.size(0); ++i) matmul_dispatch(out.select(0, i), a.select(0, i), b.select(0, i));
}

// out [M, N] with a and b matrices, or [B, M, N] with a and b of out's batch (a
// broadcast one as stride-0 batches, Operands): the GEMM core.
void matmul_core(const Tensor& out, const Tensor& a, const Tensor& b) {
#ifdef SB_WITH_CUDA
  if (a.device().is_cuda()) {
    cuda::matmul(out, a, b);
    return;
  }
#endif
  SB_CHECK(a.device().is_cpu(), "matmul: no backend for device ", a.device(), " in this build");
  if (a.dtype() == DType::Float32) matmul_cpu<float>(out, a, b);
  else if (a.dtype() == DType::BFloat16) matmul_cpu<BFloat16>(out, a, b);
  else matmul_cpu<double>(out, a, b);
}

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b) {
  const Operands o = matmul_operands(a, b, "matmul");
  Tensor out = empty(o.sizes, a.dtype(), a.device());
  matmul_dispatch(full_view(out, a, b), o.a, o.b);
  return out;
}

Tensor& matmul_out(Tensor& out, const Tensor& a, const Tensor& b) {
  const Operands o = matmul_operands(a, b, "matmul_out");
  const Shape& sizes = o.sizes;
  SB_CHECK(out.defined(), "matmul_out: undefined out");
  SB_CHECK(out.sizes() == sizes, "matmul_out: out has sizes ", out.sizes(), ", expected ", sizes, " for ", a.sizes(),
           " x ", b.sizes());
  SB_CHECK(out.dtype() == a.dtype(), "matmul_out: out dtype ", out.dtype(), ", expected ", a.dtype());
  SB_CHECK(out.device() == a.device(), "matmul_out: out on ", out.device(), ", operands on ", a.device());
  SB_CHECK(has_internal_overlap(out) != MemOverlap::Yes, "matmul_out: out has overlapping elements (strides ",
           out.strides(), ")");
  check_disjoint("matmul_out", out, a, "operand a");
  check_disjoint("matmul_out", out, b, "operand b");
  matmul_dispatch(full_view(out, a, b), o.a, o.b);
  return out;
}

}  // namespace sb
