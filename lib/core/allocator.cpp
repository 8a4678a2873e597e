// allocator.cpp — the CPU caching allocator and the plain system allocator.
//
// Caching allocator rules:
//  - Every request is rounded to its size class (cpu_caching_round_size).
//  - A free keeps the block in a free list of its class; the next request of that
//    class takes it (LIFO, so the cache-warm block is reused first). Blocks of other
//    classes are never split or merged: reuse is exact-class only, which keeps the
//    statistics easy to predict (the M1 experiment of CLAIMS.md).
//  - Nothing is returned to the system until empty_cache().
//  - On allocation failure, the cache is emptied and the request retried once;
//    then sb::Error names the request and the statistics.
//  - One mutex guards the free lists and the statistics; allocate/free from any
//    thread.
//  - Note [Huge pages]: a block of 2 MiB or more is aligned to 2 MiB and marked
//    MADV_HUGEPAGE (Linux), so its memory comes in 2 MiB pages where the kernel has
//    them (transparent huge pages in `madvise` mode, the common default): fewer TLB
//    misses for kernels that walk a large tensor in several streams at once (a
//    transposing copy writes 32 rows 16 KiB apart: +10-20 % measured with 2 MiB pages,
//    the copy ceiling +3-6 %). The STREAM-style ceilings allocate through the same
//    allocator, so every "% of ceiling" compares like with like. SB_CPU_HUGEPAGES=0 in
//    the environment turns it off (read once). The system allocator stays plain
//    aligned_alloc: it stands for what a framework without a cache does.
//  - Note [Blocks on pages]: a block whose size class is a whole number of 4 KiB pages
//    (every class from 16 KiB up, and 4, 8 and 12 KiB) starts on a page, as the large
//    size classes of jemalloc and tcmalloc do; the classes between keep the 64-byte
//    alignment, so that no block takes more memory than its class, which the
//    statistics count. Every such tensor's data then
//    has the same address modulo 4 KiB, and no kernel's stores to one operand alias its
//    loads from another in the low 12 bits the core compares first ("4K aliasing").
//    With the plain 64-byte alignment, glibc put a block allocated right after another
//    of the same size 64 bytes further modulo 4 KiB: the worst place for a loop that
//    writes out while it reads x a few vectors ahead, and which place a benchmark run got
//    changed from process to process (docs/notes/elementwise.md, "Blocks on pages").
#include "stridebench/allocator.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unordered_map>
#include <vector>

#ifdef __linux__
#include <sys/mman.h>
#endif

namespace sb {

namespace {

void* system_aligned_alloc(size_t nbytes) {
  size_t rounded = (nbytes + kCpuAlignment - 1) / kCpuAlignment * kCpuAlignment;
  return std::aligned_alloc(kCpuAlignment, rounded);
}

constexpr size_t kHugePage = size_t{2} << 20;

bool huge_pages_enabled() {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  static const bool on = [] {
    const char* e = std::getenv("SB_CPU_HUGEPAGES");
    return !(e && std::strcmp(e, "0") == 0);
  }();
  return on;
#else
  return false;
#endif
}

constexpr size_t kPage = 4096;

// Note [Huge pages]: large caching-allocator blocks start on a 2 MiB boundary and ask
// for transparent huge pages; the block size (and so every statistic) is unchanged.
// Note [Blocks on pages]: the other blocks of whole pages start on a page.
void* large_block_alloc(size_t nbytes) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  if (nbytes >= kHugePage && huge_pages_enabled()) {
    const size_t rounded = (nbytes + 4095) / 4096 * 4096;
    void* p = std::aligned_alloc(kHugePage, (rounded + kHugePage - 1) / kHugePage * kHugePage);
    if (p) madvise(p, rounded, MADV_HUGEPAGE);  // advice only: a failure leaves 4 KiB pages
    return p;
  }
#endif
  if (nbytes % kPage == 0) return std::aligned_alloc(kPage, nbytes);
  return system_aligned_alloc(nbytes);
}

std::string stats_str(const AllocatorStats& s) {
  return detail::str_cat("allocated ", s.allocated_bytes, " B, reserved ", s.reserved_bytes,
                         " B, peak reserved ", s.peak_reserved_bytes, " B");
}

class SystemAllocator final : public Allocator {
 public:
  void* allocate(size_t nbytes) override {
    if (nbytes == 0) return nullptr;
    void* p = system_aligned_alloc(nbytes);
    std::lock_guard<std::mutex> g(mu_);
    SB_CHECK(p != nullptr, "system CPU allocator: out of memory allocating ", nbytes, " bytes (",
             stats_str(stats_), ")");
    const auto n = static_cast<int64_t>(nbytes);
    stats_.on_system_alloc(n);
    stats_.on_alloc(n, n, false);
    return p;
  }
  void deallocate(void* ptr, size_t nbytes) override {
    if (!ptr) return;
    std::free(ptr);
    std::lock_guard<std::mutex> g(mu_);
    const auto n = static_cast<int64_t>(nbytes);
    stats_.on_free(n, n);
    stats_.on_system_free(n);
  }
  AllocatorStats stats() const override {
    std::lock_guard<std::mutex> g(mu_);
    return stats_;
  }
  void reset_peak_stats() override {
    std::lock_guard<std::mutex> g(mu_);
    stats_.reset_peaks();
  }
  void empty_cache() override {}
  const char* name() const override { return "system"; }
  Device device() const override { return Device::cpu(); }

 private:
  mutable std::mutex mu_;
  AllocatorStats stats_;
};

class CachingAllocator final : public Allocator {
 public:
  ~CachingAllocator() override { release_all(); }

  void* allocate(size_t nbytes) override {
    if (nbytes == 0) return nullptr;
    const size_t size = cpu_caching_round_size(nbytes);
    std::lock_guard<std::mutex> g(mu_);
    void* p = nullptr;
    auto it = free_.find(size);
    const bool hit = it != free_.end() && !it->second.empty();
    if (hit) {
      p = it->second.back();
      it->second.pop_back();
    } else {
      p = large_block_alloc(size);
      if (!p) {  // free what we hold and try once more
        release_all();
        p = large_block_alloc(size);
      }
      SB_CHECK(p != nullptr, "caching CPU allocator: out of memory allocating ", nbytes,
               " bytes (rounded to ", size, "; ", stats_str(stats_), ")");
      stats_.on_system_alloc(static_cast<int64_t>(size));
    }
    stats_.on_alloc(static_cast<int64_t>(size), static_cast<int64_t>(nbytes), hit);
    return p;
  }

  void deallocate(void* ptr, size_t nbytes) override {
    if (!ptr) return;
    const size_t size = cpu_caching_round_size(nbytes);
    std::lock_guard<std::mutex> g(mu_);
    free_[size].push_back(ptr);
    stats_.on_free(static_cast<int64_t>(size), static_cast<int64_t>(nbytes));
  }

  AllocatorStats stats() const override {
    std::lock_guard<std::mutex> g(mu_);
    return stats_;
  }
  void reset_peak_stats() override {
    std::lock_guard<std::mutex> g(mu_);
    stats_.reset_peaks();
  }
  void empty_cache() override {
    std::lock_guard<std::mutex> g(mu_);
    release_all();
  }
  const char* name() const override { return "caching"; }
  Device device() const override { return Device::cpu(); }

 private:
  void release_all() {  // mu_ held (or destructor)
    for (auto& [size, blocks] : free_) {
      for (void* p : blocks) {
        std::free(p);
        stats_.reserved_bytes -= static_cast<int64_t>(size);
        stats_.system_frees++;
      }
      blocks.clear();
    }
    free_.clear();
  }

  mutable std::mutex mu_;
  AllocatorStats stats_;
  std::unordered_map<size_t, std::vector<void*>> free_;  // size class -> cached blocks
};

// Both allocators live for the whole program: storages freed during static
// destruction still find them (they are deliberately leaked).
CachingAllocator* g_caching = new CachingAllocator();
SystemAllocator* g_system = new SystemAllocator();

AllocatorKind initial_kind() {
  const char* env = std::getenv("SB_CPU_ALLOCATOR");
  return (env && std::strcmp(env, "system") == 0) ? AllocatorKind::System : AllocatorKind::Caching;
}
std::atomic<AllocatorKind> g_kind{initial_kind()};

}  // namespace

bool cpu_huge_pages_enabled() { return huge_pages_enabled(); }

size_t cpu_caching_round_size(size_t nbytes) {
  if (nbytes <= kCpuSmallSize) return (nbytes + 63) / 64 * 64;
  // four steps per power of two
  int k = 63 - __builtin_clzll(static_cast<unsigned long long>(nbytes));
  const size_t base = size_t{1} << k;
  const size_t step = base >> 2;
  return (nbytes + step - 1) / step * step;
}

Allocator* caching_cpu_allocator() { return g_caching; }
Allocator* system_cpu_allocator() { return g_system; }
Allocator* cpu_allocator() {
  return g_kind.load(std::memory_order_relaxed) == AllocatorKind::System ? static_cast<Allocator*>(g_system)
                                                                          : g_caching;
}
void set_cpu_allocator(AllocatorKind kind) { g_kind.store(kind); }
AllocatorKind cpu_allocator_kind() { return g_kind.load(); }

}  // namespace sb
