// bench_gpu.cpp — the CUDA hook of the machine metadata: GPU name, memory, SM count,
// compute capability, L2 size, driver and runtime versions of device 0 (through
// lib/cuda's device_info), for the sb_gpu_* / sb_cuda_* context keys and the
// sb_machine slug. Empty strings when the CUDA backend is not built (SB_WITH_CUDA
// unset) or no device answers, so CPU-only machines get a CPU-only slug.
// Read once at start-up, never inside a timed loop. And the clocks, temperature and
// power of device 0 through NVML, which GPU rows read before and after each sample
// (outside the timed interval).
#include <dlfcn.h>

#include <type_traits>

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
// Note [GPU clocks from NVML]
// NVML comes with the driver (libnvidia-ml.so.1) on a GPU machine and nowhere else, and
// no NVML header ships with the toolkit here, so the library is opened at run time and
// the six functions used are declared below with the C signatures of NVML's API
// (nvml.h: nvmlReturn_t is an int, NVML_SUCCESS 0, NVML_CLOCK_SM 1,
// NVML_TEMPERATURE_GPU 0, power in milliwatts). Without the library, or when a call
// fails, gpu_clocks() says ok = false and no sample is ever flagged as throttled.
// Device 0 in NVML's order is taken as CUDA's device 0 (one GPU per machine here).
struct Nvml {
  using Device = void*;
  int (*init)() = nullptr;
  int (*handle)(unsigned, Device*) = nullptr;
  int (*clock)(Device, int, unsigned*) = nullptr;
  int (*max_clock)(Device, int, unsigned*) = nullptr;
  int (*temperature)(Device, int, unsigned*) = nullptr;
  int (*power)(Device, unsigned*) = nullptr;
  Device dev = nullptr;
  bool ok = false;

  Nvml() {
    void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return;
    auto sym = [&](auto& f, const char* name) { f = reinterpret_cast<std::remove_reference_t<decltype(f)>>(dlsym(lib, name)); };
    sym(init, "nvmlInit_v2");
    sym(handle, "nvmlDeviceGetHandleByIndex_v2");
    sym(clock, "nvmlDeviceGetClockInfo");
    sym(max_clock, "nvmlDeviceGetMaxClockInfo");
    sym(temperature, "nvmlDeviceGetTemperature");
    sym(power, "nvmlDeviceGetPowerUsage");
    ok = init && handle && clock && max_clock && temperature && power && init() == 0 && handle(0, &dev) == 0;
  }
};

const Nvml& nvml() {
  static const Nvml n;
  return n;
}
}  // namespace

GpuClocks gpu_clocks() {
  GpuClocks c;
  const Nvml& n = nvml();
  if (!n.ok) return c;
  unsigned mw = 0;
  c.ok = n.clock(n.dev, 1, &c.sm_mhz) == 0 && n.max_clock(n.dev, 1, &c.sm_max_mhz) == 0 &&
         n.temperature(n.dev, 0, &c.temp_c) == 0 && n.power(n.dev, &mw) == 0;
  c.power_w = mw / 1000.0;
  return c;
}

unsigned gpu_sm_clock_mhz() {
  const Nvml& n = nvml();
  unsigned mhz = 0;
  return n.ok && n.clock(n.dev, 1, &mhz) == 0 ? mhz : 0;
}

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
