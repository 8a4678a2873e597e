// cuda_allocator_test.cpp — the caching allocator's rules (include/stridebench/cuda_allocator.h)
// on a fake backend: no GPU needed, so this runs in every build. The fake hands out
// addresses from a counter (never dereferenced), leaves a gap between segments so a
// merge across segments would show, and refuses beyond a fixed capacity (the OOM path).
// At the end, the same allocator behind real device tensors (skipped without a GPU).
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <random>

#include "stridebench/cuda_allocator.h"
#include "test_util.h"

#ifdef SB_WITH_CUDA
#include "cuda/cuda_backend.h"
#endif

namespace sb::cuda {
namespace {

constexpr size_t kMiB = 1 << 20;

class FakeBackend : public MemoryBackend {
 public:
  explicit FakeBackend(size_t capacity) : capacity_(capacity) {}
  void* malloc(size_t nbytes) override {
    ++malloc_calls;
    if (used_ + nbytes > capacity_) {
      ++refusals;
      return nullptr;
    }
    used_ += nbytes;
    const uintptr_t p = next_;
    next_ += (nbytes + 2 * kMiB) / (2 * kMiB) * (2 * kMiB) + 2 * kMiB;  // a gap after each segment
    live[p] = nbytes;
    return reinterpret_cast<void*>(p);
  }
  void free(void* ptr, size_t nbytes) override {
    auto it = live.find(reinterpret_cast<uintptr_t>(ptr));
    ASSERT_NE(it, live.end()) << "free of a pointer the backend never gave";
    ASSERT_EQ(it->second, nbytes) << "free with the wrong size";
    used_ -= nbytes;
    live.erase(it);
  }
  std::map<uintptr_t, size_t> live;  // segment -> bytes
  int malloc_calls = 0, refusals = 0;

 private:
  size_t capacity_;
  size_t used_ = 0;
  uintptr_t next_ = 0x100000000ull;
};

struct Fixture {
  explicit Fixture(size_t capacity = size_t{1} << 40) {
    auto b = std::make_unique<FakeBackend>(capacity);
    backend = b.get();
    alloc = std::make_unique<CachingAllocator>(std::move(b), "fake", Device::cuda(0));
  }
  FakeBackend* backend;
  std::unique_ptr<CachingAllocator> alloc;
};

char* as_char(void* p) { return static_cast<char*>(p); }

TEST(CudaCachingAllocator, RoundsTo512AndCountsNothingForZero) {
  Fixture f;
  EXPECT_EQ(f.alloc->allocate(0), nullptr);
  EXPECT_EQ(f.alloc->stats().allocation_count, 0);
  void* p = f.alloc->allocate(1);
  AllocatorStats s = f.alloc->stats();
  EXPECT_EQ(s.allocated_bytes, 512);
  EXPECT_EQ(s.requested_bytes, 1);
  EXPECT_EQ(s.reserved_bytes, static_cast<int64_t>(kSmallBuffer));
  EXPECT_EQ(s.system_allocs, 1);
  EXPECT_EQ(s.cache_hits, 0);
  f.alloc->deallocate(p, 1);
  s = f.alloc->stats();
  EXPECT_EQ(s.allocated_bytes, 0);
  EXPECT_EQ(s.requested_bytes, 0);
  EXPECT_EQ(s.reserved_bytes, static_cast<int64_t>(kSmallBuffer));  // cached, not returned
  EXPECT_EQ(s.free_count, 1);
  EXPECT_EQ(round_block_size(512), 512u);
  EXPECT_EQ(round_block_size(513), 1024u);
  EXPECT_EQ(segment_size(kSmallSize), kSmallBuffer);
  EXPECT_EQ(segment_size(kSmallSize + 512), kLargeBuffer);
  EXPECT_EQ(segment_size(kMinLargeAlloc), kMinLargeAlloc);
  EXPECT_EQ(segment_size(kMinLargeAlloc + 512), kMinLargeAlloc + kRoundLarge);
}

TEST(CudaCachingAllocator, ReusesAndSplitsSmallSegments) {
  Fixture f;
  void* a = f.alloc->allocate(1000);  // 1024
  void* b = f.alloc->allocate(1000);
  EXPECT_EQ(as_char(b), as_char(a) + 1024) << "the tail of the split segment serves the next request";
  EXPECT_EQ(f.backend->malloc_calls, 1);
  f.alloc->deallocate(a, 1000);
  void* c = f.alloc->allocate(700);  // 1024 again: the freed block is the best fit
  EXPECT_EQ(c, a);
  const AllocatorStats s = f.alloc->stats();
  EXPECT_EQ(s.cache_hits, 2);
  EXPECT_EQ(s.system_allocs, 1);
  EXPECT_EQ(s.allocation_count, s.cache_hits + s.system_allocs);
  f.alloc->deallocate(b, 1000);
  f.alloc->deallocate(c, 700);
}

TEST(CudaCachingAllocator, MergesFreeNeighboursAndEmptiesCache) {
  Fixture f;
  void* a = f.alloc->allocate(4096);
  void* b = f.alloc->allocate(4096);
  void* c = f.alloc->allocate(4096);
  EXPECT_EQ(f.alloc->cached_blocks(), 1u);  // the segment's tail
  f.alloc->deallocate(a, 4096);
  f.alloc->deallocate(c, 4096);  // c merges with the tail; a stays alone (b is live)
  EXPECT_EQ(f.alloc->cached_blocks(), 2u);
  f.alloc->empty_cache();  // b pins the segment
  EXPECT_EQ(f.alloc->stats().reserved_bytes, static_cast<int64_t>(kSmallBuffer));
  EXPECT_EQ(f.backend->live.size(), 1u);
  f.alloc->deallocate(b, 4096);  // a + b + (c + tail): one block, the whole segment
  EXPECT_EQ(f.alloc->cached_blocks(), 1u);
  void* whole = f.alloc->allocate(kSmallBuffer - 512);  // > kSmallSize: large pool, a new segment
  EXPECT_EQ(f.backend->malloc_calls, 2);
  f.alloc->deallocate(whole, kSmallBuffer - 512);
  void* again = f.alloc->allocate(kSmallSize);  // small pool: the merged segment, from its start
  EXPECT_EQ(again, a);
  f.alloc->deallocate(again, kSmallSize);
  f.alloc->empty_cache();
  const AllocatorStats s = f.alloc->stats();
  EXPECT_EQ(s.reserved_bytes, 0);
  EXPECT_EQ(s.system_frees, 2);
  EXPECT_TRUE(f.backend->live.empty());
}

TEST(CudaCachingAllocator, BestFitPicksTheSmallestHole) {
  Fixture f;
  void* big = f.alloc->allocate(8192);     // hole 1 later: 8 KiB at the lowest address
  void* sep1 = f.alloc->allocate(512);
  void* small = f.alloc->allocate(2048);   // hole 2 later: 2 KiB
  void* sep2 = f.alloc->allocate(512);
  f.alloc->deallocate(big, 8192);
  f.alloc->deallocate(small, 2048);
  void* p = f.alloc->allocate(1500);  // 1536: fits both holes; best fit is the 2 KiB one
  EXPECT_EQ(p, small);
  void* q = f.alloc->allocate(3000);  // 3072: only the 8 KiB hole (lowest address of that size)
  EXPECT_EQ(q, big);
  void* r = f.alloc->allocate(5120);  // the rest of the 8 KiB hole, split off by q
  EXPECT_EQ(as_char(r), as_char(big) + 3072);
  EXPECT_EQ(f.backend->malloc_calls, 1);
  for (auto [ptr, n] : {std::pair<void*, size_t>{sep1, 512}, {sep2, 512}, {p, 1500}, {q, 3000}, {r, 5120}})
    f.alloc->deallocate(ptr, n);
  EXPECT_EQ(f.alloc->stats().allocated_bytes, 0);
}

TEST(CudaCachingAllocator, LargePoolSegmentsAndSplitRule) {
  Fixture f;
  void* a = f.alloc->allocate(2 * kMiB);  // a 20 MiB shared segment
  EXPECT_EQ(f.alloc->stats().reserved_bytes, static_cast<int64_t>(kLargeBuffer));
  void* b = f.alloc->allocate(2 * kMiB);  // the split tail (18 MiB > 1 MiB)
  EXPECT_EQ(as_char(b), as_char(a) + 2 * kMiB);
  EXPECT_EQ(f.alloc->stats().system_allocs, 1);
  // 19.5 MiB >= 10 MiB: a 20 MiB segment of its own; the 0.5 MiB rest (<= 1 MiB) is not split off.
  const size_t n = 19 * kMiB + kMiB / 2;
  void* c = f.alloc->allocate(n);
  AllocatorStats s = f.alloc->stats();
  EXPECT_EQ(s.reserved_bytes, static_cast<int64_t>(2 * kLargeBuffer));
  EXPECT_EQ(s.allocated_bytes, static_cast<int64_t>(4 * kMiB + 20 * kMiB));
  EXPECT_EQ(s.requested_bytes, static_cast<int64_t>(4 * kMiB + n));
  // Small requests never come from the large pool, even when it has room.
  void* d = f.alloc->allocate(1024);
  EXPECT_EQ(f.alloc->stats().system_allocs, 3);
  f.alloc->deallocate(a, 2 * kMiB);
  f.alloc->deallocate(b, 2 * kMiB);
  f.alloc->deallocate(c, n);
  f.alloc->deallocate(d, 1024);
  f.alloc->empty_cache();
  EXPECT_TRUE(f.backend->live.empty());
  s = f.alloc->stats();
  EXPECT_EQ(s.reserved_bytes, 0);
  EXPECT_EQ(s.peak_reserved_bytes, static_cast<int64_t>(2 * kLargeBuffer + kSmallBuffer));
  f.alloc->reset_peak_stats();
  EXPECT_EQ(f.alloc->stats().peak_reserved_bytes, 0);
  EXPECT_EQ(f.alloc->stats().peak_allocated_bytes, 0);
}

TEST(CudaCachingAllocator, OutOfMemoryFreesCacheRetriesThenThrows) {
  Fixture f(30 * kMiB);
  void* s1 = f.alloc->allocate(1024);           // small segment: 2 MiB
  void* l1 = f.alloc->allocate(20 * kMiB);      // large segment: 20 MiB
  f.alloc->deallocate(s1, 1024);
  f.alloc->deallocate(l1, 20 * kMiB);
  EXPECT_EQ(f.alloc->stats().reserved_bytes, static_cast<int64_t>(22 * kMiB));
  // 25 MiB -> a 26 MiB segment: refused (22 + 26 > 30), cache freed, retried: served.
  void* big = f.alloc->allocate(25 * kMiB);
  EXPECT_NE(big, nullptr);
  EXPECT_EQ(f.backend->refusals, 1);
  AllocatorStats s = f.alloc->stats();
  EXPECT_EQ(s.system_frees, 2);
  EXPECT_EQ(s.reserved_bytes, static_cast<int64_t>(26 * kMiB));
  // Nothing left to free: the exception names the request and the statistics.
  try {
    f.alloc->allocate(10 * kMiB + 1);
    FAIL() << "expected sb::Error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("out of memory"), std::string::npos) << msg;
    EXPECT_NE(msg.find(std::to_string(10 * kMiB + 1)), std::string::npos) << msg;
    EXPECT_NE(msg.find("reserved " + std::to_string(26 * kMiB)), std::string::npos) << msg;
    EXPECT_NE(msg.find("allocated " + std::to_string(26 * kMiB)), std::string::npos) << msg;
  }
  EXPECT_EQ(f.backend->refusals, 3);  // the first try and the retry
  s = f.alloc->stats();
  EXPECT_EQ(s.allocated_bytes, static_cast<int64_t>(26 * kMiB));  // unchanged by the failure
  EXPECT_EQ(s.allocation_count, 3);
  // A request the block rounding would overflow: refused before the pools or the backend
  const size_t absurd = (size_t{1} << 63) + 1;
  test::expect_msg([&] { f.alloc->allocate(absurd); }, "fake: request of " + std::to_string(absurd) + " bytes is too large");
  EXPECT_EQ(f.backend->refusals, 3);
  EXPECT_EQ(f.alloc->stats().allocation_count, 3);
  // Still usable: free, then a request that fits.
  f.alloc->deallocate(big, 25 * kMiB);
  void* ok = f.alloc->allocate(10 * kMiB + 1);
  EXPECT_NE(ok, nullptr);
  f.alloc->deallocate(ok, 10 * kMiB + 1);
  f.alloc->empty_cache();
  EXPECT_TRUE(f.backend->live.empty());
}

// Random sequences against an independent model: live blocks never overlap, lie inside
// a live backend segment, and the statistics match the sums over live blocks.
TEST(CudaCachingAllocator, RandomSequencesKeepInvariants) {
  for (uint64_t seed : {1u, 2u, 3u}) {
    Fixture f(256 * kMiB);
    std::mt19937_64 rng(seed);
    struct Live { char* p; size_t n; };
    std::vector<Live> live;
    int64_t requested = 0;
    for (int step = 0; step < 3000; ++step) {
      const bool do_alloc = live.empty() || rng() % 100 < 55;
      if (do_alloc) {
        const int kind = static_cast<int>(rng() % 10);
        size_t n = kind < 7 ? 1 + rng() % 65536 : (kind < 9 ? kMiB + rng() % (8 * kMiB) : 10 * kMiB + rng() % (20 * kMiB));
        void* p = nullptr;
        try {
          p = f.alloc->allocate(n);
        } catch (const Error&) {
          continue;  // fake capacity reached: allowed, must leave everything consistent
        }
        live.push_back({as_char(p), n});
        requested += static_cast<int64_t>(n);
      } else {
        const size_t i = rng() % live.size();
        f.alloc->deallocate(live[i].p, live[i].n);
        requested -= static_cast<int64_t>(live[i].n);
        live.erase(live.begin() + static_cast<long>(i));
      }
      if (rng() % 200 == 0) f.alloc->empty_cache();
      const AllocatorStats s = f.alloc->stats();
      ASSERT_EQ(s.requested_bytes, requested) << "seed " << seed << " step " << step;
      ASSERT_LE(s.allocated_bytes, s.reserved_bytes);
      ASSERT_GE(s.allocated_bytes, s.requested_bytes);
      ASSERT_EQ(s.allocation_count, s.cache_hits + s.system_allocs);
      ASSERT_EQ(s.allocation_count - s.free_count, static_cast<int64_t>(live.size()));
      int64_t seg_bytes = 0;
      for (auto& [p, n] : f.backend->live) seg_bytes += static_cast<int64_t>(n);
      ASSERT_EQ(s.reserved_bytes, seg_bytes);
      if (step % 50 == 0) {
        std::vector<Live> sorted = live;
        std::sort(sorted.begin(), sorted.end(), [](const Live& a, const Live& b) { return a.p < b.p; });
        for (size_t i = 0; i < sorted.size(); ++i) {
          if (i + 1 < sorted.size()) {
            ASSERT_LE(sorted[i].p + round_block_size(sorted[i].n), sorted[i + 1].p);
          }
          auto seg = f.backend->live.upper_bound(reinterpret_cast<uintptr_t>(sorted[i].p));
          ASSERT_NE(seg, f.backend->live.begin());
          --seg;
          ASSERT_LE(reinterpret_cast<uintptr_t>(sorted[i].p) + sorted[i].n, seg->first + seg->second);
        }
      }
    }
    for (auto& l : live) f.alloc->deallocate(l.p, l.n);
    f.alloc->empty_cache();
    EXPECT_TRUE(f.backend->live.empty()) << "every segment merged back whole and returned";
    EXPECT_EQ(f.alloc->stats().reserved_bytes, 0);
  }
}

TEST(CudaCachingAllocator, RejectsForeignPointers) {
  Fixture f;
  int x = 0;
  EXPECT_THROW(f.alloc->deallocate(&x, 4), InternalError);
  void* p = f.alloc->allocate(100);
  EXPECT_THROW(f.alloc->deallocate(p, 99), InternalError);  // wrong size
  f.alloc->deallocate(p, 100);
}

}  // namespace
}  // namespace sb::cuda

#ifdef SB_WITH_CUDA
// ---------------------------------------------------------------- on a real device
// The caching allocator behind device tensors (statistics, reuse, the direct allocator
// selected at run time, the OOM path), the device's facts, and the errors without one.
namespace sb {
namespace {

TEST(CudaAllocator, StatisticsAfterSequences) {
  const Device dev = Device::cuda(0);
  SB_SKIP_WITHOUT_DEVICE(dev);
  Allocator* al = cuda::caching_allocator(0);
  if (std::getenv("SB_CUDA_ALLOCATOR") == nullptr) {  // gpu_run.sh's memcheck sets it to direct
    ASSERT_EQ(cuda::allocator(0), al) << "caching is the default";
  }
  cuda::AllocatorGuard caching(cuda::CudaAllocatorKind::Caching);
  ASSERT_EQ(cuda::allocator(0), al);
  al->empty_cache();
  const AllocatorStats s0 = al->stats();
  {
    Tensor a = empty({1000}, DType::Float32, dev);  // 4000 -> 4096
    Tensor b = empty({3}, DType::Float16, dev);     // 6 -> 512
    AllocatorStats s = al->stats();
    EXPECT_EQ(s.allocated_bytes - s0.allocated_bytes, 4096 + 512);
    EXPECT_EQ(s.requested_bytes - s0.requested_bytes, 4006);
    EXPECT_LE(s.allocated_bytes, s.reserved_bytes);
    EXPECT_EQ(s.allocation_count - s0.allocation_count, 2);
  }
  AllocatorStats s1 = al->stats();
  EXPECT_EQ(s1.allocated_bytes, s0.allocated_bytes);
  {
    Tensor c = empty({1000}, DType::Float32, dev);  // reuses the cached block
    EXPECT_EQ(al->stats().cache_hits - s1.cache_hits, 1);
    EXPECT_EQ(al->stats().system_allocs, s1.system_allocs);
  }
  al->empty_cache();  // no tensor is alive here: every segment is whole and free
  EXPECT_EQ(al->stats().allocated_bytes, 0);
  EXPECT_EQ(al->stats().reserved_bytes, 0);
  {  // the direct allocator, selected at run time
    cuda::AllocatorGuard g(cuda::CudaAllocatorKind::Direct);
    Allocator* d = cuda::allocator(0);
    EXPECT_EQ(d, cuda::direct_allocator(0));
    const AllocatorStats d0 = d->stats();
    Tensor x = zeros({100}, DType::Float32, dev);
    Tensor y = x.clone();
    EXPECT_EQ(d->stats().system_allocs - d0.system_allocs, 2);
    EXPECT_EQ(d->stats().allocated_bytes - d0.allocated_bytes, 800);
    EXPECT_TRUE(test::all_close(y, std::vector<double>(100, 0.0), 0, 0));
  }
  EXPECT_EQ(cuda::allocator(0), al);
}

TEST(CudaAllocator, ImpossibleRequestThrowsAndLeavesAllocatorUsable) {
  const Device dev = Device::cuda(0);
  SB_SKIP_WITHOUT_DEVICE(dev);
  Allocator* al = cuda::caching_allocator(0);
  const AllocatorStats before = al->stats();
  const int64_t pib = int64_t{1} << 50;
  try {
    empty({pib / 4}, DType::Float32, dev);
    FAIL() << "expected sb::Error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("out of memory"), std::string::npos) << msg;
    EXPECT_NE(msg.find(std::to_string(pib)), std::string::npos) << msg;
  }
  const AllocatorStats after = al->stats();
  EXPECT_EQ(after.allocated_bytes, before.allocated_bytes);
  EXPECT_EQ(after.allocation_count, before.allocation_count);
  Tensor t = full({1024}, 2.0, DType::Float32, dev);
  EXPECT_TRUE(test::all_close(t, std::vector<double>(1024, 2.0), 0, 0));
  cuda::AllocatorGuard g(cuda::CudaAllocatorKind::Direct);
  EXPECT_THROW(empty({pib / 4}, DType::Float32, dev), Error);
  Tensor u = full({16}, 1.0, DType::Float32, dev);
  EXPECT_TRUE(test::all_close(u, std::vector<double>(16, 1.0), 0, 0));
}

TEST(CudaDevice, InfoIsFilled) {
  const Device dev = Device::cuda(0);
  SB_SKIP_WITHOUT_DEVICE(dev);
  const cuda::DeviceInfo info = cuda::device_info(0);
  EXPECT_FALSE(info.name.empty());
  EXPECT_GT(info.total_memory, 0);
  EXPECT_GT(info.sm_count, 0);
  EXPECT_GT(info.runtime_version, 0);
  EXPECT_GE(info.driver_version, info.runtime_version / 1000 * 1000);
}

TEST(CudaNoDevice, ClearErrors) {
  const Device dev = Device::cuda(0);
  if (cuda::is_available()) GTEST_SKIP() << "a CUDA device is present: this test covers its absence";
  EXPECT_EQ(cuda::device_count(), 0);
  try {
    empty({4}, DType::Float32, dev);
    FAIL() << "expected sb::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no CUDA device"), std::string::npos) << e.what();
  }
  EXPECT_THROW(cuda::pinned_empty({4}), Error);
  EXPECT_THROW(cuda::device_info(0), Error);
}

}  // namespace
}  // namespace sb
#endif  // SB_WITH_CUDA
