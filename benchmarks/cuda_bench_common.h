// cuda_bench_common.h — what every GPU benchmark binary shares, written against Google
// Benchmark directly (benchmarks/bench_common.h, the shared harness, was not merged
// when these were written; once it is, its main() and CPU context replace sb_main()).
//
//   SB_REQUIRE_DEVICE(state)   skip with SkipWithError("no CUDA device") when absent
//   EventTimer                 UseManualTime timing of one iteration with CUDA events
//                              on the legacy default stream
//   add_gpu_context()          the sb_gpu_* / sb_cuda_* context keys of docs/BENCHMARKS.md
//   regime_label(bytes)        regime:L2 when the working set fits the GPU's L2, else DRAM
#pragma once
#include <benchmark/benchmark.h>
#include <cuda_runtime.h>

#include <string>

#include "cuda/cuda_backend.h"
#include "cuda/cuda_check.h"

namespace sb::bench {

#define SB_REQUIRE_DEVICE(state)                     \
  do {                                               \
    if (!::sb::cuda::is_available()) {               \
      (state).SkipWithError("no CUDA device");       \
      return;                                        \
    }                                                \
  } while (0)

class EventTimer {
 public:
  EventTimer() {
    SB_CUDA_CHECK(cudaEventCreate(&start_));
    SB_CUDA_CHECK(cudaEventCreate(&stop_));
  }
  ~EventTimer() {
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
  }
  void start() { SB_CUDA_CHECK(cudaEventRecord(start_, 0)); }
  double stop_seconds() {  // waits for the work in between
    SB_CUDA_CHECK(cudaEventRecord(stop_, 0));
    SB_CUDA_CHECK(cudaEventSynchronize(stop_));
    float ms = 0;
    SB_CUDA_CHECK(cudaEventElapsedTime(&ms, start_, stop_));
    return ms * 1e-3;
  }

 private:
  cudaEvent_t start_{}, stop_{};
};

inline std::string driver_str(int v) { return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10); }

inline void add_gpu_context() {
  if (!cuda::is_available()) {
    benchmark::AddCustomContext("sb_gpu_name", "none");
    return;
  }
  const cuda::DeviceInfo d = cuda::device_info(0);
  benchmark::AddCustomContext("sb_gpu_name", d.name);
  benchmark::AddCustomContext("sb_gpu_memory", std::to_string(d.total_memory));
  benchmark::AddCustomContext("sb_gpu_sms", std::to_string(d.sm_count));
  benchmark::AddCustomContext("sb_gpu_cc", std::to_string(d.major) + "." + std::to_string(d.minor));
  benchmark::AddCustomContext("sb_gpu_l2", std::to_string(d.l2_bytes));
  benchmark::AddCustomContext("sb_cuda_driver", driver_str(d.driver_version));
  benchmark::AddCustomContext("sb_cuda_runtime", driver_str(d.runtime_version));
}

inline std::string regime_label(int64_t working_set_bytes) {
  if (!cuda::is_available()) return "regime:DRAM";
  return working_set_bytes <= cuda::device_info(0).l2_bytes / 2 ? "regime:L2" : "regime:DRAM";
}

inline int sb_main(int argc, char** argv, const char* family) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::AddCustomContext("sb_family", family);
  add_gpu_context();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

}  // namespace sb::bench
