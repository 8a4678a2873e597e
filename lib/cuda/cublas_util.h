// cublas_util.h — the cuBLAS handle shared by the CUDA ops that call cuBLAS (matmul.cu,
// conv.cu): one per device, created on first use, bound to the legacy default stream,
// never destroyed (see allocator.cpp on teardown order). Defined in matmul.cu.
#pragma once
#include <cublas_v2.h>

namespace sb::cuda {
cublasHandle_t cublas_handle(int device);
}  // namespace sb::cuda
