// allocator_test.cpp — the CPU caching and system allocators (lib/core/allocator.*):
// reuse of freed blocks, statistics arithmetic, empty_cache, peaks, size classes,
// run-time selection, and alloc/free from several threads at once.
//
// The allocators are process-wide singletons, so each test empties the cache first
// and checks differences of statistics.
#include "stridebench/allocator.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <thread>

#include "stridebench/tensor.h"
#include "test_util.h"

namespace sb {
namespace {

struct Fresh {  // the caching allocator with nothing cached and peaks reset
  Allocator* a = caching_cpu_allocator();
  AllocatorStats s0;
  Fresh() {
    a->empty_cache();
    a->reset_peak_stats();
    s0 = a->stats();
  }
};

TEST(SizeClasses, RoundingBounds) {
  EXPECT_EQ(cpu_caching_round_size(1), 64u);
  EXPECT_EQ(cpu_caching_round_size(64), 64u);
  EXPECT_EQ(cpu_caching_round_size(65), 128u);
  EXPECT_EQ(cpu_caching_round_size(4096), 4096u);
  EXPECT_EQ(cpu_caching_round_size(4097), 5120u);
  EXPECT_EQ(cpu_caching_round_size(1 << 20), size_t{1} << 20);
  EXPECT_EQ(cpu_caching_round_size((1 << 20) + 1), (size_t{1} << 20) + (1 << 18));
  std::mt19937_64 rng(3);
  for (int i = 0; i < 100000; ++i) {
    const size_t n = 1 + rng() % (size_t{1} << (rng() % 34));
    const size_t r = cpu_caching_round_size(n);
    ASSERT_GE(r, n);
    ASSERT_EQ(r % 64, 0u);
    if (n > kCpuSmallSize) {
      ASSERT_LE(r, n + n / 4) << n;  // wastes at most 25%
    }
    ASSERT_EQ(cpu_caching_round_size(r), r) << "a class must round to itself";
  }
}

// Note [Huge pages]: a block of 2 MiB or more starts on a 2 MiB boundary (so the
// kernel can back it with huge pages) and the statistics still count its size class.
TEST(CachingAllocator, LargeBlocksAlignedForHugePages) {
  Fresh f;
  const char* env = std::getenv("SB_CPU_HUGEPAGES");
  const bool on = !(env && std::string(env) == "0");
  for (size_t n : {size_t{3} << 20, (size_t{2} << 20) + 4097, size_t{2} << 20}) {
    const size_t cls = cpu_caching_round_size(n);
    const AllocatorStats before = f.a->stats();
    void* p = f.a->allocate(n);
    ASSERT_NE(p, nullptr);
    std::memset(p, 7, n);  // the whole block is usable
#ifdef __linux__
    if (on) {
      EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % (size_t{2} << 20), 0u) << n;
    }
#endif
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % kCpuAlignment, 0u);
    const AllocatorStats s1 = f.a->stats();
    EXPECT_EQ(s1.reserved_bytes - before.reserved_bytes, static_cast<int64_t>(cls)) << n;
    EXPECT_EQ(s1.allocated_bytes - before.allocated_bytes, static_cast<int64_t>(cls)) << n;
    f.a->deallocate(p, n);
  }
  // below 2 MiB: on a page (Note [Blocks on pages])
  void* q = f.a->allocate(size_t{1} << 20);
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(q) % 4096, 0u);
  f.a->deallocate(q, size_t{1} << 20);
}

// Note [Blocks on pages]: every block whose class is a whole number of pages starts on a
// page, so blocks allocated one after another (x, then out) share their address modulo
// 4 KiB; the other classes (below 16 KiB) keep the 64-byte alignment, and every block
// takes its class's size in the statistics.
TEST(CachingAllocator, BlocksOfWholePagesStartOnAPage) {
  Fresh f;
  std::vector<std::pair<void*, size_t>> held;
  for (size_t n : {size_t{4096}, size_t{8000}, size_t{12288}, size_t{16385}, size_t{65536}, size_t{128} << 10,
                   (size_t{128} << 10) + 64, size_t{256} << 10, size_t{1} << 20, (size_t{2} << 20) - 64})
    for (int k = 0; k < 3; ++k) {
      ASSERT_EQ(cpu_caching_round_size(n) % 4096, 0u) << n;
      const AllocatorStats before = f.a->stats();
      void* p = f.a->allocate(n);
      ASSERT_NE(p, nullptr);
      EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 4096, 0u) << n << " bytes, block " << k;
      std::memset(p, 3, n);
      EXPECT_EQ(f.a->stats().reserved_bytes - before.reserved_bytes, static_cast<int64_t>(cpu_caching_round_size(n)))
          << n << ": the statistics count the size class, not the page rounding";
      held.emplace_back(p, n);
    }
  for (size_t n : {size_t{64}, size_t{1000}, size_t{4032}, size_t{4097}, size_t{6000}, size_t{10000}}) {
    ASSERT_NE(cpu_caching_round_size(n) % 4096, 0u) << n;
    void* p = f.a->allocate(n);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % kCpuAlignment, 0u) << n;
    std::memset(p, 5, n);
    held.emplace_back(p, n);
  }
  for (auto& [p, n] : held) f.a->deallocate(p, n);
}

TEST(CachingAllocator, ReusesFreedBlockOfSameClass) {
  Fresh f;
  void* p = f.a->allocate(1000);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % kCpuAlignment, 0u);
  std::memset(p, 1, 1000);
  AllocatorStats s1 = f.a->stats();
  EXPECT_EQ(s1.allocated_bytes - f.s0.allocated_bytes, 1024);
  EXPECT_EQ(s1.requested_bytes - f.s0.requested_bytes, 1000);
  EXPECT_EQ(s1.reserved_bytes - f.s0.reserved_bytes, 1024);
  EXPECT_EQ(s1.system_allocs - f.s0.system_allocs, 1);
  f.a->deallocate(p, 1000);
  AllocatorStats s2 = f.a->stats();
  EXPECT_EQ(s2.allocated_bytes, f.s0.allocated_bytes);
  EXPECT_EQ(s2.reserved_bytes - f.s0.reserved_bytes, 1024) << "freed memory stays reserved";
  void* q = f.a->allocate(1010);  // same class (1024)
  EXPECT_EQ(q, p);
  AllocatorStats s3 = f.a->stats();
  EXPECT_EQ(s3.cache_hits - f.s0.cache_hits, 1);
  EXPECT_EQ(s3.system_allocs - f.s0.system_allocs, 1);
  void* r = f.a->allocate(5000);  // another class: a new block
  EXPECT_NE(r, p);
  EXPECT_EQ(f.a->stats().system_allocs - f.s0.system_allocs, 2);
  f.a->deallocate(q, 1010);
  f.a->deallocate(r, 5000);
  AllocatorStats s4 = f.a->stats();
  EXPECT_EQ(s4.allocation_count - f.s0.allocation_count, 3);
  EXPECT_EQ(s4.free_count - f.s0.free_count, 3);
  EXPECT_EQ(s4.peak_allocated_bytes - f.s0.allocated_bytes, 1024 + 5120);
  EXPECT_EQ(s4.reserved_bytes - f.s0.reserved_bytes, 1024 + 5120);
  f.a->empty_cache();
  AllocatorStats s5 = f.a->stats();
  EXPECT_EQ(s5.reserved_bytes, s5.allocated_bytes);
  EXPECT_EQ(s5.system_frees - f.s0.system_frees, 2);
  EXPECT_EQ(s5.allocation_count - s5.free_count, f.s0.allocation_count - f.s0.free_count);
}

TEST(CachingAllocator, MostRecentlyFreedBlockComesFirst) {
  Fresh f;
  void* p = f.a->allocate(3000);
  void* q = f.a->allocate(3000);
  f.a->deallocate(p, 3000);
  f.a->deallocate(q, 3000);
  void* r = f.a->allocate(3000);  // q is the cache-warm one
  EXPECT_EQ(r, q);
  void* s = f.a->allocate(3000);
  EXPECT_EQ(s, p);
  f.a->deallocate(r, 3000);
  f.a->deallocate(s, 3000);
}

TEST(CachingAllocator, ZeroBytesCountsNothing) {
  Fresh f;
  EXPECT_EQ(f.a->allocate(0), nullptr);
  f.a->deallocate(nullptr, 0);
  EXPECT_EQ(f.a->stats().allocation_count, f.s0.allocation_count);
  Tensor e = empty({0, 5});
  EXPECT_EQ(e.numel(), 0);
}

TEST(CachingAllocator, PeakResetsToCurrent) {
  Fresh f;
  void* p = f.a->allocate(1 << 20);
  void* q = f.a->allocate(1 << 20);
  f.a->deallocate(q, 1 << 20);
  EXPECT_EQ(f.a->stats().peak_allocated_bytes - f.s0.allocated_bytes, 2 << 20);
  f.a->reset_peak_stats();
  EXPECT_EQ(f.a->stats().peak_allocated_bytes, f.a->stats().allocated_bytes);
  f.a->deallocate(p, 1 << 20);
}

// The CLAIMS.md M1 pattern through tensors: freed storage is reused, not returned.
TEST(CachingAllocator, TensorStorageIsReusedAfterFree) {
  Fresh f;
  const void* first;
  {
    Tensor a = zeros({256, 1024});  // 1 MiB
    first = a.data_ptr();
  }
  const AllocatorStats mid = f.a->stats();
  EXPECT_EQ(mid.reserved_bytes - f.s0.reserved_bytes, 1 << 20);
  EXPECT_EQ(mid.allocated_bytes, f.s0.allocated_bytes);
  Tensor b = zeros({1024, 256});  // same bytes: the same block
  EXPECT_EQ(b.data_ptr(), first);
  EXPECT_EQ(f.a->stats().reserved_bytes, mid.reserved_bytes);
}

TEST(SystemAllocator, ReservedEqualsAllocatedAndNoCache) {
  Allocator* s = system_cpu_allocator();
  const AllocatorStats s0 = s->stats();
  void* p = s->allocate(3000);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % kCpuAlignment, 0u);
  AllocatorStats s1 = s->stats();
  EXPECT_EQ(s1.allocated_bytes - s0.allocated_bytes, 3000);
  EXPECT_EQ(s1.reserved_bytes - s0.reserved_bytes, 3000);
  s->deallocate(p, 3000);
  AllocatorStats s2 = s->stats();
  EXPECT_EQ(s2.reserved_bytes, s0.reserved_bytes);
  EXPECT_EQ(s2.cache_hits, 0);
  EXPECT_EQ(s2.system_frees - s0.system_frees, 1);
  EXPECT_EQ(s2.peak_reserved_bytes - s0.reserved_bytes >= 3000, true);
  // out of memory: an sb::Error naming the request, the counts unchanged, still usable
  const AllocatorStats before_oom = s->stats();
  try {
    s->allocate(size_t{1} << 62);
    FAIL() << "expected an out-of-memory error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("system CPU allocator: out of memory allocating 4611686018427387904 bytes"),
              std::string::npos) << e.what();
  }
  EXPECT_EQ(s->stats().allocation_count, before_oom.allocation_count);
  EXPECT_EQ(s->stats().reserved_bytes, before_oom.reserved_bytes);
  // the rest of the interface: peaks reset to the current use, nothing cached to empty
  EXPECT_STREQ(s->name(), "system");
  EXPECT_STREQ(caching_cpu_allocator()->name(), "caching");
  void* q = s->allocate(5000);
  s->deallocate(q, 5000);
  s->reset_peak_stats();
  const AllocatorStats s3 = s->stats();
  EXPECT_EQ(s3.peak_allocated_bytes, s3.allocated_bytes);
  EXPECT_EQ(s3.peak_reserved_bytes, s3.reserved_bytes);
  s->empty_cache();
  const AllocatorStats s4 = s->stats();
  EXPECT_EQ(s4.reserved_bytes, s3.reserved_bytes);
  EXPECT_EQ(s4.system_frees, s3.system_frees);
}

TEST(AllocatorSelection, TensorsRememberTheirAllocator) {
  Fresh f;
  const AllocatorStats sys0 = system_cpu_allocator()->stats();
  Tensor a;
  {
    CpuAllocatorGuard g(AllocatorKind::System);
    EXPECT_EQ(cpu_allocator(), system_cpu_allocator());
    a = ones({100});
    EXPECT_EQ(a.storage()->allocator(), system_cpu_allocator());
  }
  EXPECT_EQ(cpu_allocator(), caching_cpu_allocator());
  EXPECT_EQ(system_cpu_allocator()->stats().allocated_bytes - sys0.allocated_bytes, 400);
  a = Tensor();  // freed to the system allocator, not the caching one
  EXPECT_EQ(system_cpu_allocator()->stats().allocated_bytes, sys0.allocated_bytes);
  EXPECT_EQ(f.a->stats().free_count, f.s0.free_count);
}

TEST(CachingAllocator, ManyThreadsAllocateAndFree) {
  Fresh f;
  constexpr int kThreads = 4, kIters = 20000;
  std::atomic<int> bad{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; ++t) {
    ts.emplace_back([&, t] {
      std::mt19937_64 rng(t);
      std::vector<std::pair<unsigned char*, size_t>> live;
      for (int i = 0; i < kIters; ++i) {
        if (live.size() < 16 && (live.empty() || rng() % 2)) {
          const size_t n = 1 + rng() % 20000;
          auto* p = static_cast<unsigned char*>(f.a->allocate(n));
          std::memset(p, t + 1, n);  // a block handed to two owners would be overwritten
          live.emplace_back(p, n);
        } else {
          const size_t k = rng() % live.size();
          auto [p, n] = live[k];
          for (size_t j = 0; j < n; j += 97)
            if (p[j] != t + 1) bad++;
          f.a->deallocate(p, n);
          live.erase(live.begin() + static_cast<std::ptrdiff_t>(k));
        }
      }
      for (auto [p, n] : live) f.a->deallocate(p, n);
    });
  }
  for (auto& th : ts) th.join();
  EXPECT_EQ(bad.load(), 0) << "a block was given to two owners";
  const AllocatorStats s = f.a->stats();
  EXPECT_EQ(s.allocated_bytes, f.s0.allocated_bytes);
  EXPECT_EQ(s.requested_bytes, f.s0.requested_bytes);
  EXPECT_EQ(s.allocation_count - f.s0.allocation_count, s.free_count - f.s0.free_count);
  EXPECT_EQ((s.cache_hits - f.s0.cache_hits) + (s.system_allocs - f.s0.system_allocs),
            s.allocation_count - f.s0.allocation_count);
  EXPECT_GT(s.cache_hits - f.s0.cache_hits, 0);
  EXPECT_LE(s.allocated_bytes, s.reserved_bytes);
  f.a->empty_cache();
  EXPECT_EQ(f.a->stats().reserved_bytes, f.a->stats().allocated_bytes);
}

TEST(CachingAllocator, OutOfMemoryRaisesAndStaysUsable) {
  Fresh f;
  const size_t huge = size_t{1} << 62;  // no machine has this
  try {
    f.a->allocate(huge);
    FAIL() << "expected an out-of-memory error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("out of memory"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(std::to_string(huge)), std::string::npos) << e.what();
  }
  void* p = f.a->allocate(100);
  EXPECT_NE(p, nullptr);
  f.a->deallocate(p, 100);
  EXPECT_EQ(f.a->stats().allocated_bytes, f.s0.allocated_bytes);
}

}  // namespace
}  // namespace sb
