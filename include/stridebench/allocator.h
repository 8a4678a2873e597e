// allocator.h — allocators with statistics.
//
// Every Storage is obtained from an Allocator and returned to the same one. The CPU
// has two, selectable at run time (set_cpu_allocator): a caching allocator that
// keeps freed blocks for reuse, and a plain system allocator (aligned_alloc/free on
// every call) to compare against. The CUDA allocators live in lib/cuda/.
//
// Statistics (AllocatorStats), all in bytes or counts since the allocator was made
// (or since reset_peak_stats() for the peaks):
//   allocated_bytes       bytes of blocks currently handed out to live storages, at
//                         the block's rounded size (what the allocator set aside)
//   requested_bytes       the same blocks at the sizes that were asked for
//   peak_allocated_bytes  the highest allocated_bytes seen
//   reserved_bytes        bytes currently obtained from the system and not yet given
//                         back: allocated plus cached (== allocated for the system
//                         allocator)
//   peak_reserved_bytes   the highest reserved_bytes seen
//   allocation_count      allocate() calls that returned a block (size > 0)
//   free_count            deallocate() calls
//   cache_hits            allocate() calls served from the cache
//   system_allocs         calls to the system allocator (aligned_alloc, cudaMalloc, …)
//   system_frees          blocks given back to the system (free, cudaFree, …)
// Invariants: allocated <= reserved; allocation_count == cache_hits + system_allocs
// for the caching allocators; live blocks == allocation_count - free_count.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "stridebench/dtype.h"

namespace sb {

struct AllocatorStats {
  int64_t allocated_bytes = 0;
  int64_t requested_bytes = 0;
  int64_t peak_allocated_bytes = 0;
  int64_t reserved_bytes = 0;
  int64_t peak_reserved_bytes = 0;
  int64_t allocation_count = 0;
  int64_t free_count = 0;
  int64_t cache_hits = 0;
  int64_t system_allocs = 0;
  int64_t system_frees = 0;

  // The bookkeeping every allocator shares (the caller holds its own lock):
  // a block handed out (`block` bytes set aside for `requested` asked; from the cache
  // or not), a block given back, memory obtained from / returned to the system.
  void on_alloc(int64_t block, int64_t requested, bool cache_hit) {
    allocated_bytes += block;
    requested_bytes += requested;
    ++allocation_count;
    if (cache_hit) ++cache_hits;
    if (allocated_bytes > peak_allocated_bytes) peak_allocated_bytes = allocated_bytes;
  }
  void on_free(int64_t block, int64_t requested) {
    allocated_bytes -= block;
    requested_bytes -= requested;
    ++free_count;
  }
  void on_system_alloc(int64_t bytes) {
    reserved_bytes += bytes;
    ++system_allocs;
    if (reserved_bytes > peak_reserved_bytes) peak_reserved_bytes = reserved_bytes;
  }
  void on_system_free(int64_t bytes) {
    reserved_bytes -= bytes;
    ++system_frees;
  }
  void reset_peaks() {
    peak_allocated_bytes = allocated_bytes;
    peak_reserved_bytes = reserved_bytes;
  }
};

class Allocator {
 public:
  virtual ~Allocator() = default;
  // A block of at least nbytes, aligned to kCpuAlignment on the CPU. nbytes == 0
  // gives nullptr and counts nothing.
  virtual void* allocate(size_t nbytes) = 0;
  // Gives back a block from allocate(); nbytes must be the size asked for.
  virtual void deallocate(void* ptr, size_t nbytes) = 0;
  virtual AllocatorStats stats() const = 0;
  virtual void reset_peak_stats() = 0;
  // Returns every cached block that no storage uses to the system.
  virtual void empty_cache() = 0;
  virtual const char* name() const = 0;
  virtual Device device() const = 0;
};

constexpr size_t kCpuAlignment = 64;  // bytes: one cache line, a full AVX-512 vector

enum class AllocatorKind : uint8_t { Caching, System };

Allocator* caching_cpu_allocator();
Allocator* system_cpu_allocator();
// The allocator that new CPU tensors use. Caching unless SB_CPU_ALLOCATOR=system is
// set in the environment at start-up, or set_cpu_allocator() says otherwise.
Allocator* cpu_allocator();
void set_cpu_allocator(AllocatorKind kind);
AllocatorKind cpu_allocator_kind();

// Sets the CPU allocator for one scope, then restores the previous one.
class CpuAllocatorGuard {
 public:
  explicit CpuAllocatorGuard(AllocatorKind kind) : prev_(cpu_allocator_kind()) { set_cpu_allocator(kind); }
  ~CpuAllocatorGuard() { set_cpu_allocator(prev_); }
  CpuAllocatorGuard(const CpuAllocatorGuard&) = delete;
  CpuAllocatorGuard& operator=(const CpuAllocatorGuard&) = delete;

 private:
  AllocatorKind prev_;
};

// The caching allocator's size classes: sizes up to kCpuSmallSize round up to a
// multiple of 64 bytes; larger ones to one of four steps per power of two
// (2^k, 1.25·2^k, 1.5·2^k, 1.75·2^k), so a block wastes at most 25%.
constexpr size_t kCpuSmallSize = 4096;  // bytes
// Whether the caching allocator asks for 2 MiB pages on blocks of 2 MiB or more
// (Note [Huge pages] in allocator.cpp; SB_CPU_HUGEPAGES=0 turns it off).
bool cpu_huge_pages_enabled();
size_t cpu_caching_round_size(size_t nbytes);

}  // namespace sb
