// matmul.h — matrix products on strided tensors, and the GEMM entry conv/linear reuse.
//
//   matmul(a, b)            torch.matmul's shapes: 2-D [M,K]x[K,N] -> [M,N]; batched
//                           [...,M,K]x[...,K,N] -> [...,M,N], the batch dims (all but the
//                           last two, any number) broadcasting as PyTorch's do; a 1-D
//                           operand is a row on the left and a column on the right, its
//                           dim dropped from the result ([K]x[K] -> a 0-D dot product).
//                           Allocates only its (contiguous) result, plus the packing
//                           workspace of Note [GEMM workspace] (gemm_workspace_bytes).
//   matmul_out(out, a, b)   out of the result's sizes and dtype, any non-overlapping
//                           strides; must not overlap a or b.
//   gemm(...)               the raw entry: C = alpha*A*B + beta*C (+bias, relu), operands
//                           given by pointer and (row, column) strides in elements.
// Dtypes float32 (our packed GEMM, AVX2+FMA 6x16 or AVX-512 16x16 micro-kernel, or the
// scalar one; on AVX-512 a product of at most 64 columns and 64 or more rows, with
// unit-stride rows of A and C, reads A unpacked: Note [Narrow GEMMs] in
// lib/matmul/gemm_impl.h), float64 (the same blocking with a 4x8 plain-C micro-kernel)
// and bfloat16 (float32 accumulation, the result rounded once; AVX512_BF16 vdpbf16ps
// where the CPU has it, else the float32 kernels on operands widened while packing).
// Operands of any strides are packed straight from their strides: a transposed,
// column-major or stepped operand costs its packing, never a copy first. Cost: 2*M*N*K flop; A, B read ~once, C written once.
// CUDA operands go to sb::cuda::matmul (cuBLAS) after the same checks, which on CUDA
// also accept float16 (PyTorch 1.13's CPU matmul has no float16 either).
#pragma once
#include "stridebench/bfloat16.h"
#include "stridebench/half.h"
#include "stridebench/tensor.h"

namespace sb {

Tensor matmul(const Tensor& a, const Tensor& b);
Tensor& matmul_out(Tensor& out, const Tensor& a, const Tensor& b);

template <typename T>
struct GemmEpilogueT {
  T alpha = 1;
  T beta = 0;                  // 0: C is only written (never read, so NaN there is harmless)
  const T* bias = nullptr;     // added last, before relu
  int64_t bias_stride = 1;     // in elements
  bool bias_per_row = false;   // false: bias[j] per column of C; true: bias[i] per row
  bool relu = false;
};
using GemmEpilogue = GemmEpilogueT<float>;

// C(i, j) = alpha * sum_k A(i, k) B(k, j) + beta * C(i, j) [+ bias] [relu], with
// A(i, k) = a[i*a_rs + k*a_cs], B(k, j) = b[k*b_rs + j*b_cs], C(i, j) = c[i*c_rs + j*c_cs].
// C must not overlap A or B and its (i, j) must be distinct elements.
void gemm(int64_t M, int64_t N, int64_t K, const float* a, int64_t a_rs, int64_t a_cs, const float* b, int64_t b_rs,
          int64_t b_cs, float* c, int64_t c_rs, int64_t c_cs, const GemmEpilogue& ep = {});
// B (and A) stored as float16, converted to float32 while packing (F16C where built in).
void gemm(int64_t M, int64_t N, int64_t K, const float* a, int64_t a_rs, int64_t a_cs, const Half* b, int64_t b_rs,
          int64_t b_cs, float* c, int64_t c_rs, int64_t c_cs, const GemmEpilogue& ep = {});
void gemm(int64_t M, int64_t N, int64_t K, const Half* a, int64_t a_rs, int64_t a_cs, const Half* b, int64_t b_rs,
          int64_t b_cs, float* c, int64_t c_rs, int64_t c_cs, const GemmEpilogue& ep = {});
// bfloat16 A and B, float32 accumulation; C in bfloat16 (rounded once, at the end) or
// float32. vdpbf16ps on pairs along k where the CPU has AVX512_BF16, else A and B
// widened to float32 while packing (gemm_bf16.cpp).
void gemm(int64_t M, int64_t N, int64_t K, const BFloat16* a, int64_t a_rs, int64_t a_cs, const BFloat16* b,
          int64_t b_rs, int64_t b_cs, BFloat16* c, int64_t c_rs, int64_t c_cs, const GemmEpilogue& ep = {});
void gemm(int64_t M, int64_t N, int64_t K, const BFloat16* a, int64_t a_rs, int64_t a_cs, const BFloat16* b,
          int64_t b_rs, int64_t b_cs, float* c, int64_t c_rs, int64_t c_cs, const GemmEpilogue& ep = {});
void gemm(int64_t M, int64_t N, int64_t K, const double* a, int64_t a_rs, int64_t a_cs, const double* b,
          int64_t b_rs, int64_t b_cs, double* c, int64_t c_rs, int64_t c_cs, const GemmEpilogueT<double>& ep = {});

// Note [GEMM workspace]: bytes of packing buffers one gemm call of this size takes from
// cpu_allocator() (one KCxNC block of B plus one MCxKC block of A per thread; for a
// float32 shape of Note [Narrow GEMMs], the larger of that and the narrow path's), for
// `threads` threads (default: the current OpenMP team size).
size_t gemm_workspace_bytes(int64_t M, int64_t N, int64_t K, DType dtype = DType::Float32, int threads = 0);

}  // namespace sb
