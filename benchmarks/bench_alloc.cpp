// bench_alloc.cpp — the CPU allocators (CLAIMS.md M1–M5).
//
// op:alloc_free (M5): allocate() + deallocate() of one block, sizes 512 B .. 1 GiB,
//   through the caching allocator and the system allocator (aligned_alloc/free),
//   `alloc:caching|system`, `size:<bytes>`. The block is not touched: this is the
//   allocator's own latency (page faults of first use are the ops' cost). The caching
//   allocator's first call goes to the system; every later one is a cache hit.
//
// op:reuse_experiment (M1–M4): the CLAIMS.md sequence on the CPU, once per allocator.
//   The "device" is the allocator under test (every sb tensor of the experiment is
//   made through it); the "host" is plain malloc memory (what a framework's host
//   tensors use), filled with memset so its pages are resident. Steps:
//     0 before anything (after empty_cache())   5 c = zeros (old c alive until then)
//     1 a = zeros                               6 d = zeros
//     2 b = zeros                               7 del d
//     3 b = b.to(host): host copy, b freed      8 e = zeros on the host; e = e.to(device)
//     4 c = zeros                                 (host buffer freed at once)
//                                               9 del e; empty_cache()
//   Tensor size: 64 MiB (quick), 1 GiB (full), 256 KiB (smoke). One run per step,
//   `step:N`, with counters after the step: allocated_bytes and reserved_bytes of the
//   allocator under test, host_allocated_bytes (live host buffers), host_rss_bytes
//   (/proc/self/statm) and host_reserved_bytes = the growth of the resident set since
//   step 0 that the allocator under test does not hold (what the host side keeps from
//   the OS, glibc's own caching included). The time of a run is the time of its step.
//   The whole sequence runs once, at the first step's run.
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "bench_common.h"

namespace sb::bench {

const char* const kFamily = "alloc";

namespace {

const char* kind_name(AllocatorKind k) { return k == AllocatorKind::Caching ? "caching" : "system"; }
Allocator* allocator_of(AllocatorKind k) {
  return k == AllocatorKind::Caching ? caching_cpu_allocator() : system_cpu_allocator();
}

void run_alloc_free(benchmark::State& st, AllocatorKind kind, size_t nbytes) {
  Allocator* a = allocator_of(kind);
  for (auto _ : st) {
    void* p = a->allocate(nbytes);
    benchmark::DoNotOptimize(p);
    a->deallocate(p, nbytes);
  }
  a->empty_cache();  // leave no GiB block cached for the next run
}

// ---- the reuse experiment ----
struct Step {
  double seconds = 0;
  int64_t allocated = 0, reserved = 0, host_allocated = 0, host_reserved = 0, rss = 0;
};

struct HostFree {
  void operator()(void* p) const { std::free(p); }
};
using HostBuffer = std::unique_ptr<void, HostFree>;

constexpr int kSteps = 10;  // 0 .. 9

std::vector<Step> reuse_experiment(AllocatorKind kind, const Shape& shape) {
  CpuAllocatorGuard guard(kind);
  Allocator* dev = cpu_allocator();
  dev->empty_cache();
  const size_t nbytes = static_cast<size_t>(checked_numel(shape, "reuse_experiment")) * sizeof(float);
  const AllocatorStats s0 = dev->stats();
  const int64_t rss0 = host_rss_bytes();
  int64_t host_live = 0;
  std::vector<Step> steps;
  auto record = [&](double secs) {
    const AllocatorStats s = dev->stats();
    Step r;
    r.seconds = secs;
    r.allocated = s.allocated_bytes;
    r.reserved = s.reserved_bytes;
    r.host_allocated = host_live;
    r.rss = host_rss_bytes();
    r.host_reserved = (r.rss - rss0) - (s.reserved_bytes - s0.reserved_bytes);
    steps.push_back(r);
  };
  auto host_zeros = [&] {
    HostBuffer h(std::malloc(nbytes));
    SB_CHECK(h != nullptr, "reuse_experiment: malloc of ", nbytes, " bytes failed");
    std::memset(h.get(), 0, nbytes);
    host_live += static_cast<int64_t>(nbytes);
    return h;
  };
  auto host_free = [&](HostBuffer& h) {
    if (h) host_live -= static_cast<int64_t>(nbytes);
    h.reset();
  };
  using Clock = std::chrono::steady_clock;
  auto timed = [&](const std::function<void()>& f) {
    const auto t0 = Clock::now();
    f();
    record(std::chrono::duration<double>(Clock::now() - t0).count());
  };

  Tensor a, b, c, d, e;
  HostBuffer b_host, e_host;
  timed([] {});                                // 0: the state before (time: a stats read)
  timed([&] { a = zeros(shape); });            // 1
  timed([&] { b = zeros(shape); });            // 2
  timed([&] {                                  // 3 b = b.to(host)
    b_host = host_zeros();
    std::memcpy(b_host.get(), b.data_ptr(), nbytes);
    b = Tensor();
  });
  timed([&] { c = zeros(shape); });            // 4
  timed([&] { c = zeros(shape); });            // 5: the new c exists before the old one dies
  timed([&] { d = zeros(shape); });            // 6
  timed([&] { d = Tensor(); });                // 7
  timed([&] {                                  // 8
    e_host = host_zeros();
    e = empty(shape);
    std::memcpy(e.data_ptr(), e_host.get(), nbytes);
    host_free(e_host);
  });
  timed([&] {                                  // 9
    e = Tensor();
    dev->empty_cache();
  });
  benchmark::DoNotOptimize(a);
  benchmark::DoNotOptimize(c);
  host_free(b_host);
  return steps;
}

void run_reuse_step(benchmark::State& st, AllocatorKind kind, const Shape& shape, int step) {
  static std::map<int, std::vector<Step>> done;  // per allocator kind
  auto it = done.find(static_cast<int>(kind));
  if (it == done.end()) it = done.emplace(static_cast<int>(kind), reuse_experiment(kind, shape)).first;
  const Step& s = it->second.at(step);
  for (auto _ : st) st.SetIterationTime(s.seconds);
  st.counters["allocated_bytes"] = static_cast<double>(s.allocated);
  st.counters["reserved_bytes"] = static_cast<double>(s.reserved);
  st.counters["host_allocated_bytes"] = static_cast<double>(s.host_allocated);
  st.counters["host_reserved_bytes"] = static_cast<double>(s.host_reserved);
  st.counters["host_rss_bytes"] = static_cast<double>(s.rss);
}

}  // namespace

void register_family() {
  const std::vector<size_t> sizes =
      smoke() ? std::vector<size_t>{512, size_t{1} << 16, size_t{1} << 20}
              : std::vector<size_t>{512, 4096, size_t{1} << 16, size_t{1} << 20, size_t{16} << 20,
                                    size_t{256} << 20, size_t{1} << 30};
  for (size_t n : sizes) {
    for (AllocatorKind k : {AllocatorKind::Caching, AllocatorKind::System}) {
      add_run(RunName().op("alloc_free").threads(1).alloc(kind_name(k)).size(static_cast<int64_t>(n)),
              [k, n](benchmark::State& st) { run_alloc_free(st, k, n); }, benchmark::kNanosecond);
    }
  }
  const Shape shape = pick<Shape>({1, 64, 1024}, {16, 1024, 1024}, {256, 1024, 1024});
  for (AllocatorKind k : {AllocatorKind::Caching, AllocatorKind::System}) {
    for (int step = 0; step < kSteps; ++step) {
      add_single_run(
          RunName().op("reuse_experiment").dtype(DType::Float32).shape(shape).threads(1).alloc(kind_name(k)).step(step),
          [k, shape, step](benchmark::State& st) { run_reuse_step(st, k, shape, step); });
    }
  }
}

}  // namespace sb::bench
