// cublas_util.h — the cuBLAS and cuBLASLt handles shared by the CUDA ops that call them
// (matmul.cu, conv.cu, quant.cu): one per device, created on first use, never destroyed
// (see allocator.cpp on teardown order); cuBLAS's bound to the legacy default stream,
// where every cuBLASLt call of ours runs too. Defined in matmul.cu.
#pragma once
#include "cuda/cublas_api.h"  // the cuBLAS headers, and the entry points loaded on first use

#include <cstddef>

namespace sb::cuda {
cublasHandle_t cublas_handle(int device);
cublasLtHandle_t cublaslt_handle(int device);
// The cuBLASLt workspace of `device`: kCublasLtWorkspace bytes, cudaMalloc'd once and
// kept (as cuBLAS keeps its own). Shared by every cublasLt call on the device: they all
// run on the legacy default stream, so no two use it at once.
constexpr size_t kCublasLtWorkspace = size_t{32} << 20;
void* cublaslt_workspace(int device);
}  // namespace sb::cuda
