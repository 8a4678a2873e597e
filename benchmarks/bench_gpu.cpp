// bench_gpu.cpp — the CUDA hook of the machine metadata: GPU name, memory, SM count,
// driver and runtime versions of device 0, for the sb_gpu_* context keys and the
// sb_machine slug. Empty strings when the CUDA backend is not built (SB_WITH_CUDA
// unset) or no device answers, so CPU-only machines get a CPU-only slug.
// The CUDA backend may refine this (e.g. through lib/cuda once it has a query); it is
// read once at start-up, never inside a timed loop.
#include "bench_common.h"

#ifdef SB_WITH_CUDA
#include <cuda_runtime.h>
#endif

namespace sb::bench {

namespace {
#ifdef SB_WITH_CUDA
std::string version_string(int v) {  // 12040 -> "12.4"
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}
#endif
}  // namespace

GpuInfo gpu_info() {
  GpuInfo g;
#ifdef SB_WITH_CUDA
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    cudaGetLastError();  // clear the sticky "no device" error
    return g;
  }
  cudaDeviceProp p{};
  if (cudaGetDeviceProperties(&p, 0) != cudaSuccess) {
    cudaGetLastError();
    return g;
  }
  g.name = p.name;
  g.memory_bytes = std::to_string(p.totalGlobalMem);
  g.sms = std::to_string(p.multiProcessorCount);
  int v = 0;
  if (cudaDriverGetVersion(&v) == cudaSuccess) g.driver = version_string(v);
  if (cudaRuntimeGetVersion(&v) == cudaSuccess) g.runtime = version_string(v);
#endif
  return g;
}

}  // namespace sb::bench
