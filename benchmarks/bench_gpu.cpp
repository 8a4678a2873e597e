// bench_gpu.cpp — the CUDA hook of the machine metadata: GPU name, memory, SM count,
// compute capability, L2 size, driver and runtime versions of device 0 (through
// lib/cuda's device_info), for the sb_gpu_* / sb_cuda_* context keys and the
// sb_machine slug. Empty strings when the CUDA backend is not built (SB_WITH_CUDA
// unset) or no device answers, so CPU-only machines get a CPU-only slug.
// Read once at start-up, never inside a timed loop.
#include "bench_common.h"

#ifdef SB_WITH_CUDA
#include "cuda/cuda_backend.h"
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
  try {
    if (!cuda::is_available()) return g;
    const cuda::DeviceInfo d = cuda::device_info(0);
    g.name = d.name;
    g.memory_bytes = std::to_string(d.total_memory);
    g.sms = std::to_string(d.sm_count);
    g.cc = std::to_string(d.major) + "." + std::to_string(d.minor);
    g.l2_bytes = std::to_string(d.l2_bytes);
    g.driver = version_string(d.driver_version);
    g.runtime = version_string(d.runtime_version);
  } catch (const std::exception&) {
    return GpuInfo();  // a device that does not answer counts as none
  }
#endif
  return g;
}

}  // namespace sb::bench
