// scratch.h — the per-thread staging buffer the CPU kernels share (the iterator's
// tile and group staging, the copy's transpose blocks).
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace sb {

// This thread's staging buffer, 64-byte aligned and at least `bytes` long (kept between
// calls; one for every kernel, where a buffer per run_tiles instantiation kept one per op
// and dtype ever run). Its contents are not kept across calls that ask for more bytes.
inline char* tile_scratch(size_t bytes) {
  static thread_local std::vector<char> store;
  if (store.size() < bytes + 64) store.resize(bytes + 64);
  char* const p = store.data();
  return p + (64 - reinterpret_cast<uintptr_t>(p) % 64) % 64;
}

}  // namespace sb
