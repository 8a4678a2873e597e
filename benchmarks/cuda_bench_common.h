// cuda_bench_common.h — what every GPU benchmark binary shares on top of the harness
// (bench_common.h: its main() adds the machine context, the GPU's from gpu_info() in
// bench_gpu.cpp).
//
//   SB_REQUIRE_DEVICE(state)   skip with SkipWithError("no CUDA device") when absent
//   EventTimer                 UseManualTime timing of one iteration with CUDA events
//                              on the legacy default stream
//   regime_label(bytes)        regime:L2 when the working set fits the GPU's L2, else DRAM
//   flush_l2()                 overwrite an L2-sized buffer on the stream (Note [Cold L2 samples])
//   gpu_name()                 RunName with device:cuda:0 and threads:1 (one host
//                              thread drives the GPU; the peers' torch cuda:0 rows
//                              carry threads:1 too, so the rows pair up)
//   measure_cuda_allocs(f)     peak_alloc_bytes / allocs_per_iter of one call of f
//                              through the device allocators (caching and direct),
//                              outside the timed loop (as measure_allocs on the CPU)
//   time_gpu_loop(st, f)       the timed loop: K calls per CUDA-event interval, K chosen
//                              so short calls are timed as kernels (Note [Batched GPU
//                              timing]), intervals sampled until the row's noise is
//                              measured (Note [GPU rows stop on their noise])
#pragma once
#include <benchmark/benchmark.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <functional>
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

inline bool fits_l2(int64_t working_set_bytes) {
  return cuda::is_available() && working_set_bytes <= cuda::device_info(0).l2_bytes / 2;
}
inline std::string regime_label(int64_t working_set_bytes) {
  return fits_l2(working_set_bytes) ? "regime:L2" : "regime:DRAM";
}

// Note [Cold L2 samples]
// A row whose working set fits the L2 is timed warm (its operands stay in the L2 from
// call to call, as in a loop over one layer) and, as nvbench's l2flush does, cold as
// well: before each cold sample an L2-sized buffer (twice the L2) is overwritten on the
// same stream, outside the events, and one call is timed alone (a batch would warm the
// L2 after its first call). The cold median is the counter cold_time_ns, with
// cold_samples and cold_rse_pct; the row's time stays the warm one.
inline void flush_l2() {
  static void* buf = nullptr;
  static size_t bytes = 0;
  if (!buf) {
    bytes = 2 * static_cast<size_t>(cuda::device_info(0).l2_bytes);
    SB_CUDA_CHECK(cudaMalloc(&buf, bytes));  // once per process, outside every allocator's statistics
  }
  static int v = 0;
  SB_CUDA_CHECK(cudaMemsetAsync(buf, ++v & 0xFF, bytes, 0));
}

inline RunName gpu_name() { return RunName().device("cuda:0").threads(1); }

// A GPU row registered by its full name (the baseline and transfer families), the way
// add_manual_run registers the others: one iteration that time_gpu_loop samples.
inline benchmark::internal::Benchmark* add_gpu_row(const std::string& name, BenchFn fn) {
  return add_guarded(name, std::move(fn))->Iterations(1)->Repetitions(1)->UseManualTime();
}

inline AllocCount measure_cuda_allocs(const std::function<void()>& f) {
  Allocator* as[2] = {cuda::caching_allocator(0), cuda::direct_allocator(0)};
  AllocatorStats before[2];
  for (int i = 0; i < 2; ++i) {
    as[i]->reset_peak_stats();
    before[i] = as[i]->stats();
  }
  f();
  cuda::synchronize(0);  // faults of the call surface here, not in the timed loop
  AllocCount r;
  for (int i = 0; i < 2; ++i) {
    const AllocatorStats after = as[i]->stats();
    r.peak_bytes += after.peak_allocated_bytes - before[i].allocated_bytes;
    r.allocs += after.allocation_count - before[i].allocation_count;
  }
  return r;
}

// Note [Batched GPU timing]
// A call of a few microseconds timed alone between two events measures its launch and
// the events' round trip as much as its kernel. So the loop times one call first (after
// a warm-up call), then puts K = ceil(kBatchSeconds / that time) calls back to back
// between each pair of events (at most kMaxBatch; 1 for calls of kBatchSeconds or
// longer) and reports the interval / K as the iteration's time, with K as the counter
// calls_per_interval. The fixed cost of one launch timed alone is a row of its own
// (baseline/op:overhead in bench_baseline_cuda.cpp). Events on the legacy default stream;
// the stop event's synchronisation is outside the interval.
constexpr double kBatchSeconds = 200e-6;
constexpr int64_t kMaxBatch = 1000;

// The timed loop of a GPU row, registered with add_manual_run (one Google Benchmark
// iteration and repetition): K calls per event interval (Note [Batched GPU timing]),
// intervals sampled until the row's noise is measured (Note [GPU rows stop on their
// noise]), the median reported as the iteration's time. Counters: calls_per_interval,
// samples (kept), throttled, rse_pct, spread_pct (half the range over the median),
// steady (1 or 0), and the SM clock, temperature and power after the row
// (sm_clock_mhz, temp_c, power_w; absent without NVML).
// working_set_bytes (when given): a row that fits the L2 is sampled cold as well (Note
// [Cold L2 samples]).
// batched false: one call per interval whatever its length (baseline/op:overhead, which
// measures the launch the batches keep out).
inline void time_gpu_loop(benchmark::State& st, const std::function<void()>& f, int64_t working_set_bytes = -1,
                          bool batched = true) {
  ThreadScope one(1);  // threads:1 in the name: any host-side work runs on one thread
  EventTimer timer;
  f();
  timer.start();
  f();
  const double once = timer.stop_seconds();
  const int64_t k = !batched || once >= kBatchSeconds ? 1
                                          : std::min<int64_t>(kMaxBatch, static_cast<int64_t>(std::ceil(kBatchSeconds / std::max(once, 1e-7))));
  const double floor_mhz = gpu_throttle_threshold() * gpu_clocks().sm_max_mhz;
  auto slow = [&] {
    const unsigned mhz = gpu_sm_clock_mhz();  // 0: no NVML, never throttled
    return mhz != 0 && mhz < floor_mhz;
  };
  SampleSummary s;
  for (auto _ : st) {
    s = sample_until_steady(
        [&] {
          const bool before = slow();
          timer.start();
          for (int64_t i = 0; i < k; ++i) f();
          const double t = timer.stop_seconds() / static_cast<double>(k);
          return Sample{t, before || slow()};
        },
        gpu_stop_rule());
    st.SetIterationTime(s.median);
  }
  if (working_set_bytes >= 0 && fits_l2(working_set_bytes)) {
    const SampleSummary cold = sample_until_steady(
        [&] {
          flush_l2();
          const bool before = slow();
          timer.start();
          f();
          const double t = timer.stop_seconds();
          return Sample{t, before || slow()};
        },
        gpu_stop_rule());
    st.counters["cold_time_ns"] = 1e9 * cold.median;
    st.counters["cold_samples"] = cold.kept;
    st.counters["cold_rse_pct"] = 100 * cold.rse;
  }
  st.counters["calls_per_interval"] = static_cast<double>(k);
  st.counters["samples"] = s.kept;
  st.counters["throttled"] = s.throttled;
  st.counters["rse_pct"] = 100 * s.rse;
  st.counters["spread_pct"] = 100 * s.spread;
  st.counters["steady"] = s.steady ? 1 : 0;
  const GpuClocks c = gpu_clocks();
  if (c.ok) {
    st.counters["sm_clock_mhz"] = c.sm_mhz;
    st.counters["temp_c"] = c.temp_c;
    st.counters["power_w"] = c.power_w;
  }
}

}  // namespace sb::bench
