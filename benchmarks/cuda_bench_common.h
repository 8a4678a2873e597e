// cuda_bench_common.h — what every GPU benchmark binary shares on top of the harness
// (bench_common.h: its main() adds the machine context, the GPU's from gpu_info() in
// bench_gpu.cpp).
//
//   SB_REQUIRE_DEVICE(state)   skip with SkipWithError("no CUDA device") when absent
//   EventTimer                 UseManualTime timing of one iteration with CUDA events
//                              on the legacy default stream
//   regime_label(bytes)        regime:L2 when the working set fits the GPU's L2, else DRAM
#pragma once
#include <benchmark/benchmark.h>
#include <cuda_runtime.h>

#include <string>

#include "bench_common.h"
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

inline std::string regime_label(int64_t working_set_bytes) {
  if (!cuda::is_available()) return "regime:DRAM";
  return working_set_bytes <= cuda::device_info(0).l2_bytes / 2 ? "regime:L2" : "regime:DRAM";
}

}  // namespace sb::bench
