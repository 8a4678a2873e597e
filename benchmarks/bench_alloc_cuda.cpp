// bench_alloc_cuda.cpp — the device allocators: alloc+free latency, caching vs cudaMalloc, and
// the CLAIMS.md M1–M4 reuse experiment on the GPU (1 GiB tensors).
//
//   alloc/op:alloc_free/impl:ours/device:cuda:0/alloc:caching|cudamalloc/size:<bytes>
//       sizes: 512 B to 512 MiB in steps of 4x, and 1 GiB.
//       one allocate + deallocate through sb::cuda::caching_allocator / direct_allocator;
//       host wall time (steady_clock: allocation is host work; cudaFree also waits for
//       the device). A cache hit is a set lookup; cudaMalloc+cudaFree cost far more
//       and grow with the size (docs/notes/cuda.md).
//   alloc/op:reuse_experiment/impl:ours/device:cuda:0/alloc:caching|cudamalloc/step:<1..9>
//       the sequence of CLAIMS.md run up to step N from an empty cache, then the
//       allocator state: allocated_bytes, reserved_bytes (device), host_allocated_bytes,
//       host_reserved_bytes (the CPU allocator, for M3). One iteration; the time is that
//       of step N alone. Needs about 3 GiB of device memory and 2 GiB of host memory.
#include <chrono>

#include "cuda_bench_common.h"

namespace sb::bench {
namespace {

Allocator* device_allocator(bool caching) { return caching ? cuda::caching_allocator(0) : cuda::direct_allocator(0); }

void bm_alloc_free(benchmark::State& state, bool caching, int64_t bytes) {
  SB_REQUIRE_DEVICE(state);
  Allocator* al = device_allocator(caching);
  al->deallocate(al->allocate(static_cast<size_t>(bytes)), static_cast<size_t>(bytes));  // warm the cache
  const AllocatorStats s0 = al->stats();
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    void* p = al->allocate(static_cast<size_t>(bytes));
    benchmark::DoNotOptimize(p);
    al->deallocate(p, static_cast<size_t>(bytes));
    state.SetIterationTime(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  const AllocatorStats s1 = al->stats();
  state.counters["allocs_per_iter"] = 1;
  state.counters["system_allocs_per_iter"] =
      static_cast<double>(s1.system_allocs - s0.system_allocs) / static_cast<double>(state.iterations());
  al->empty_cache();
}

// CLAIMS.md M1–M4, steps 1–8, plus 9 = `del e; empty_cache()`.
void bm_reuse(benchmark::State& state, bool caching, int step) {
  SB_REQUIRE_DEVICE(state);
  cuda::AllocatorGuard guard(caching ? cuda::CudaAllocatorKind::Caching : cuda::CudaAllocatorKind::Direct);
  Allocator* dev = device_allocator(caching);
  const Shape s = {256, 1024, 1024};  // float32: 1 GiB
  const Device g = Device::cuda(0);
  for (auto _ : state) {
    dev->empty_cache();
    cpu_allocator()->empty_cache();
    Tensor a, b, c, d, e;
    double seconds = 0;
    for (int k = 1; k <= step; ++k) {
      cuda::synchronize(0);
      const auto t0 = std::chrono::steady_clock::now();
      switch (k) {
        case 1: a = zeros(s, DType::Float32, g); break;
        case 2: b = zeros(s, DType::Float32, g); break;
        case 3: b = b.to(Device::cpu()); break;
        case 4: c = zeros(s, DType::Float32, g); break;
        case 5: c = zeros(s, DType::Float32, g); break;
        case 6: d = zeros(s, DType::Float32, g); break;
        case 7: d = Tensor(); break;
        case 8:
          e = zeros(s);
          e = e.to(g);
          break;
        case 9:
          e = Tensor();
          dev->empty_cache();
          break;
      }
      cuda::synchronize(0);
      seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
    state.SetIterationTime(seconds);
    const AllocatorStats ds = dev->stats(), hs = cpu_allocator()->stats();
    state.counters["allocated_bytes"] = static_cast<double>(ds.allocated_bytes);
    state.counters["reserved_bytes"] = static_cast<double>(ds.reserved_bytes);
    state.counters["host_allocated_bytes"] = static_cast<double>(hs.allocated_bytes);
    state.counters["host_reserved_bytes"] = static_cast<double>(hs.reserved_bytes);
  }
  dev->empty_cache();
}

void register_runs() {
  for (bool caching : {true, false}) {
    const std::string alloc = caching ? "caching" : "cudamalloc";
    std::vector<int64_t> sizes;  // 512 B to 512 MiB in steps of 4x, then 1 GiB (the claims' tensor size)
    for (int64_t b = 512; b <= (int64_t{1} << 29); b *= 4) sizes.push_back(b);
    sizes.push_back(int64_t{1} << 30);
    for (int64_t b : sizes) {
      const std::string name =
          "alloc/op:alloc_free/impl:ours/device:cuda:0/alloc:" + alloc + "/size:" + std::to_string(b);
      // the matrix's repetitions and window, as the CPU rows: with Google Benchmark's
      // default window these 24 rows took most of a GPU run (docs/GPU.md)
      add_guarded(name, [=](benchmark::State& st) { bm_alloc_free(st, caching, b); })
          ->UseManualTime()
          ->Repetitions(repetitions())
          ->MinTime(min_time_s());
    }
  }
  for (bool caching : {true, false}) {
    for (int step = 1; step <= 9; ++step) {
      const std::string name = std::string("alloc/op:reuse_experiment/impl:ours/device:cuda:0/alloc:") +
                               (caching ? "caching" : "cudamalloc") + "/step:" + std::to_string(step);
      add_guarded(name, [=](benchmark::State& st) { bm_reuse(st, caching, step); })->UseManualTime()->Iterations(1);
    }
  }
}

}  // namespace
}  // namespace sb::bench

namespace sb::bench {
// The shared main() (bench_common.cpp) adds the machine context, GPU included, and
// registers the runs once the matrix (--sb_matrix) is known.
const char* const kFamily = "alloc";
void register_family() { register_runs(); }
}  // namespace sb::bench
