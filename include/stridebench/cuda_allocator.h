// cuda_allocator.h — the bookkeeping of the CUDA caching allocator, free of CUDA.
//
// CachingAllocator implements sb::Allocator over an injected MemoryBackend (malloc /
// free of whole segments). lib/cuda/allocator.cu plugs in cudaMalloc (device memory)
// and cudaHostAlloc (pinned host memory); tests/cuda_allocator_test.cpp plugs in a
// fake backend with a fixed capacity, so every rule below is tested without a GPU.
// Cost: allocate/deallocate are O(log n) in the number of cached blocks (a std::set
// ordered by (size, address)) plus one hash lookup; a backend call only on a miss.
//
// Rules (after c10/cuda/CUDACachingAllocator.cpp):
//  - Every request is rounded up to a multiple of 512 bytes (kMinBlockSize); 0 bytes
//    gives nullptr and counts nothing.
//  - Requests <= 1 MiB (kSmallSize) are served from the small pool, whose segments
//    are 2 MiB (kSmallBuffer). Larger requests use the large pool: a request below
//    10 MiB (kMinLargeAlloc) gets a 20 MiB segment (kLargeBuffer); a larger one a
//    segment of its own size rounded up to 2 MiB (kRoundLarge).
//  - Best fit: the smallest free block of the request's pool that is large enough
//    (ties: lowest address). Blocks never move between pools.
//  - Splitting: when the chosen block is larger than needed, the tail becomes a new
//    free block if it is at least 512 bytes (small pool) or more than 1 MiB (large
//    pool); otherwise the whole block is handed out (at most 1 MiB is wasted).
//  - Freeing: the block goes back to its pool and is merged with its free neighbours
//    in the same segment (segments are never merged with each other).
//  - Out of memory: when the backend refuses a new segment, every segment that is
//    entirely free is returned to the backend (empty_cache) and the request is tried
//    once more; if that fails too, sb::Error is thrown naming the request, the
//    rounded size and the statistics. The allocator stays usable afterwards.
//  - empty_cache() returns every entirely free segment to the backend; a segment with
//    one live block stays whole (the live block pins it).
//  - Statistics (sb::AllocatorStats, see include/stridebench/allocator.h): allocated_bytes counts
//    blocks handed out at their block size (rounded, plus any unsplit tail),
//    requested_bytes at the sizes asked for, reserved_bytes the segments held;
//    cache_hits = requests served without a new segment, system_allocs/frees =
//    backend calls that succeeded.
//  - Not stream-aware: one stream (the legacy default stream) is assumed, so a block
//    freed while a kernel still reads it can only be reused by later work on the
//    same stream. Users of other streams must synchronise before freeing (as with
//    sb::cuda::to_async).
//  - Thread-safe: one mutex around everything.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>

#include "stridebench/allocator.h"
#include "stridebench/error.h"

namespace sb::cuda {

constexpr size_t kMinBlockSize = 512;          // bytes: every size rounds up to this
constexpr size_t kSmallSize = 1 << 20;         // bytes: largest small-pool request
constexpr size_t kSmallBuffer = 2 << 20;       // bytes: small-pool segment
constexpr size_t kMinLargeAlloc = 10 << 20;    // bytes: below this a large request gets kLargeBuffer
constexpr size_t kLargeBuffer = 20 << 20;      // bytes: shared large-pool segment
constexpr size_t kRoundLarge = 2 << 20;        // bytes: large segments round up to this

inline size_t round_block_size(size_t nbytes) {
  return nbytes < kMinBlockSize ? kMinBlockSize : (nbytes + kMinBlockSize - 1) / kMinBlockSize * kMinBlockSize;
}
inline size_t segment_size(size_t rounded) {
  if (rounded <= kSmallSize) return kSmallBuffer;
  if (rounded < kMinLargeAlloc) return kLargeBuffer;
  return (rounded + kRoundLarge - 1) / kRoundLarge * kRoundLarge;
}

// Where segments come from. malloc returns nullptr when out of memory (any other
// failure throws); free never fails silently.
class MemoryBackend {
 public:
  virtual ~MemoryBackend() = default;
  virtual void* malloc(size_t nbytes) = 0;
  virtual void free(void* ptr, size_t nbytes) = 0;
};

class CachingAllocator : public Allocator {
 public:
  CachingAllocator(std::unique_ptr<MemoryBackend> backend, std::string name, Device device)
      : backend_(std::move(backend)), name_(std::move(name)), device_(device) {}
  ~CachingAllocator() override {  // live blocks leak with their segments (their owners outlive us)
    std::lock_guard<std::mutex> lock(mu_);
    release_free_segments(small_);
    release_free_segments(large_);
  }
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  void* allocate(size_t nbytes) override {
    if (nbytes == 0) return nullptr;
    SB_CHECK(nbytes <= (size_t{1} << 62), name_, ": request of ", nbytes, " bytes is too large");
    std::lock_guard<std::mutex> lock(mu_);
    const size_t size = round_block_size(nbytes);
    const bool small = size <= kSmallSize;
    Pool& pool = small ? small_ : large_;
    Block* b = best_fit(pool, size);
    const bool hit = b != nullptr;
    if (!hit) b = new_segment(pool, size, small, nbytes);
    pool.erase(b);
    maybe_split(pool, b, size, small);
    b->allocated = true;
    b->requested = nbytes;
    live_.emplace(b->ptr, b);
    stats_.on_alloc(static_cast<int64_t>(b->size), static_cast<int64_t>(nbytes), hit);
    return b->ptr;
  }

  void deallocate(void* ptr, size_t nbytes) override {
    if (ptr == nullptr) return;
    std::lock_guard<std::mutex> lock(mu_);
    auto it = live_.find(static_cast<char*>(ptr));
    SB_INTERNAL_ASSERT(it != live_.end(), name_, ": deallocate of ", ptr, " which this allocator did not hand out");
    Block* b = it->second;
    SB_INTERNAL_ASSERT(b->requested == nbytes, name_, ": deallocate of ", nbytes, " bytes, block was asked for ",
                       b->requested);
    live_.erase(it);
    stats_.on_free(static_cast<int64_t>(b->size), static_cast<int64_t>(b->requested));
    b->allocated = false;
    b->requested = 0;
    Pool& pool = b->small ? small_ : large_;
    b = merge(pool, b, b->prev);  // b may be absorbed into its predecessor
    merge(pool, b, b->next);
    pool.insert(b);
  }

  AllocatorStats stats() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
  }
  void reset_peak_stats() override {
    std::lock_guard<std::mutex> lock(mu_);
    stats_.reset_peaks();
  }
  void empty_cache() override {
    std::lock_guard<std::mutex> lock(mu_);
    release_free_segments(small_);
    release_free_segments(large_);
  }
  const char* name() const override { return name_.c_str(); }
  Device device() const override { return device_; }

  // Introspection for tests and benchmarks.
  size_t cached_blocks() const {  // free blocks in both pools
    std::lock_guard<std::mutex> lock(mu_);
    return small_.size() + large_.size();
  }
  size_t segment_count() const {
    std::lock_guard<std::mutex> lock(mu_);
    return static_cast<size_t>(stats_.system_allocs - stats_.system_frees);
  }

 private:
  struct Block {
    char* ptr;
    size_t size;
    bool small;
    bool allocated = false;
    size_t requested = 0;
    size_t segment_bytes = 0;  // set on the segment's first block only
    Block* prev = nullptr;     // neighbours in the same segment, by address
    Block* next = nullptr;
  };
  struct BySizeThenAddress {
    bool operator()(const Block* a, const Block* b) const {
      return a->size != b->size ? a->size < b->size : a->ptr < b->ptr;
    }
  };
  using Pool = std::set<Block*, BySizeThenAddress>;

  static Block* best_fit(Pool& pool, size_t size) {
    Block key{nullptr, size, false};
    auto it = pool.lower_bound(&key);  // smallest size >= size, lowest address first
    return it == pool.end() ? nullptr : *it;
  }

  // A new segment holding one free block, inserted into pool. OOM: free the cache,
  // retry once, then throw.
  Block* new_segment(Pool& pool, size_t size, bool small, size_t requested) {
    const size_t seg = segment_size(size);
    void* p = backend_->malloc(seg);
    if (p == nullptr) {
      release_free_segments(small_);
      release_free_segments(large_);
      p = backend_->malloc(seg);
    }
    SB_CHECK(p != nullptr, name_, " on ", device_, ": out of memory allocating ", requested, " bytes (rounded to ",
             size, ", segment of ", seg, " bytes); allocated ", stats_.allocated_bytes, " bytes, reserved ",
             stats_.reserved_bytes, " bytes (peak allocated ", stats_.peak_allocated_bytes, ", peak reserved ",
             stats_.peak_reserved_bytes, "), ", stats_.system_allocs - stats_.system_frees,
             " segments held; the cache was freed and the request retried");
    stats_.on_system_alloc(static_cast<int64_t>(seg));
    Block* b = new Block{static_cast<char*>(p), seg, small};
    b->segment_bytes = seg;
    pool.insert(b);
    return b;
  }

  // b (already out of its pool) keeps `size` bytes; a large enough tail becomes a free block.
  static void maybe_split(Pool& pool, Block* b, size_t size, bool small) {
    const size_t rest = b->size - size;
    const bool split = small ? rest >= kMinBlockSize : rest > kSmallSize;
    if (!split) return;
    Block* tail = new Block{b->ptr + size, rest, small};
    tail->prev = b;
    tail->next = b->next;
    if (b->next) b->next->prev = tail;
    b->next = tail;
    b->size = size;
    pool.insert(tail);
  }

  // Merges two neighbours when `other` is free; returns the surviving block (the
  // lower address). `b` is free and not in the pool; `other` may be in it.
  static Block* merge(Pool& pool, Block* b, Block* other) {
    if (other == nullptr || other->allocated) return b;
    pool.erase(other);
    Block* lo = other->ptr < b->ptr ? other : b;
    Block* hi = lo == b ? other : b;
    lo->size += hi->size;
    lo->next = hi->next;
    if (hi->next) hi->next->prev = lo;
    delete hi;
    return lo;
  }

  void release_free_segments(Pool& pool) {
    for (auto it = pool.begin(); it != pool.end();) {
      Block* b = *it;
      if (b->prev == nullptr && b->next == nullptr) {  // a whole free segment
        SB_INTERNAL_ASSERT(b->segment_bytes == b->size, name_, ": free segment of ", b->size, " bytes, made as ",
                           b->segment_bytes);
        backend_->free(b->ptr, b->size);
        stats_.on_system_free(static_cast<int64_t>(b->size));
        it = pool.erase(it);
        delete b;
      } else {
        ++it;
      }
    }
  }

  std::unique_ptr<MemoryBackend> backend_;
  std::string name_;
  Device device_;
  mutable std::mutex mu_;
  Pool small_, large_;
  std::unordered_map<char*, Block*> live_;
  AllocatorStats stats_;
};

}  // namespace sb::cuda
