// cuda_check.h — checks around every CUDA runtime and cuBLAS call and every launch.
//
//   SB_CUDA_CHECK(expr)     runs expr (a cudaError_t); on failure throws sb::Error
//                           naming the expression, file:line and cudaGetErrorString.
//   SB_CUDA_LAUNCH_CHECK()  after every kernel launch: reports launch errors
//                           (bad configuration, too much shared memory) at once.
//   SB_CUBLAS_CHECK(expr)   the same for cublasStatus_t.
// Asynchronous faults inside a kernel surface at the next synchronising call, which
// is checked too; compute-sanitizer pins them to the kernel (scripts/gpu_run.sh).
#pragma once
#include <cuda_runtime.h>

#include "stridebench/error.h"

namespace sb::cuda::detail {
[[noreturn]] void throw_cuda_error(cudaError_t err, const char* expr, const char* file, int line);
[[noreturn]] void throw_cublas_error(int status, const char* expr, const char* file, int line);
}  // namespace sb::cuda::detail

#define SB_CUDA_CHECK(expr)                                                       \
  do {                                                                            \
    const cudaError_t sb_err_ = (expr);                                           \
    if (sb_err_ != cudaSuccess)                                                   \
      ::sb::cuda::detail::throw_cuda_error(sb_err_, #expr, __FILE__, __LINE__);   \
  } while (0)

#define SB_CUDA_LAUNCH_CHECK() SB_CUDA_CHECK(cudaGetLastError())

#define SB_CUBLAS_CHECK(expr)                                                            \
  do {                                                                                   \
    const auto sb_st_ = (expr);                                                          \
    if (sb_st_ != CUBLAS_STATUS_SUCCESS)                                                 \
      ::sb::cuda::detail::throw_cublas_error(static_cast<int>(sb_st_), #expr, __FILE__, __LINE__); \
  } while (0)

namespace sb::cuda {
// Makes `device` current for one scope, then restores the previous device.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    SB_CUDA_CHECK(cudaGetDevice(&prev_));
    if (device != prev_) SB_CUDA_CHECK(cudaSetDevice(device));
  }
  ~DeviceGuard() { cudaSetDevice(prev_); }  // cannot throw from a destructor; best effort
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int prev_ = 0;
};
}  // namespace sb::cuda
