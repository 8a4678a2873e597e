// memory_format.h — memory formats and the stride rules that define them.
//
// Contiguous: row-major (C order). ChannelsLast: a 4-D NCHW tensor whose strides
// put C innermost (NHWC in memory). Preserve (clone only): keep the input's
// strides when they are non-overlapping and dense, else its suggested format.
// Column-major layouts are built from strides (transpose of a contiguous tensor).
//
// Note [Ambiguous channels-last strides]
// A tensor with C == 1, or H == W == 1, is both contiguous and channels-last
// contiguous. As PyTorch does, is_contiguous() answers each question on its own,
// and suggest_memory_format() decides from the strides with PyTorch's
// is_channels_last_strides_2d: size-1 dims are skipped in a fixed order
// (C, W, H, N) and ties fall back to Contiguous. So N×C×1×1 with contiguous
// strides suggests Contiguous, and so does N×1×H×W with contiguous strides; the
// same sizes created as ChannelsLast suggest ChannelsLast only where the strides
// tell them apart (see tests/tensor_test.cpp, ChannelsLast*).
#pragma once
#include <cstdint>
#include <ostream>
#include <vector>

namespace sb {

enum class MemoryFormat : uint8_t { Contiguous, ChannelsLast, Preserve };

inline const char* memory_format_name(MemoryFormat f) {
  switch (f) {
    case MemoryFormat::Contiguous: return "Contiguous";
    case MemoryFormat::ChannelsLast: return "ChannelsLast";
    case MemoryFormat::Preserve: return "Preserve";
  }
  return "?";
}
inline std::ostream& operator<<(std::ostream& os, MemoryFormat f) { return os << memory_format_name(f); }

using Shape = std::vector<int64_t>;

// Row-major strides; a size-0 or size-1 dim counts as 1 for the dims outside it.
Shape contiguous_strides(const Shape& sizes);
// NHWC strides for NCHW sizes (4-D only).
Shape channels_last_strides(const Shape& sizes);
Shape strides_for(const Shape& sizes, MemoryFormat f);

bool is_contiguous_strides(const Shape& sizes, const Shape& strides);
bool is_channels_last_contiguous_strides(const Shape& sizes, const Shape& strides);
// PyTorch's is_channels_last_strides_2d: do the strides *look* channels-last.
bool is_channels_last_like_strides(const Shape& sizes, const Shape& strides);
// Dense strides that keep the order of `strides` (PyTorch's infer_dense_strides):
// dims sorted innermost-first by stride, ties broken by size, stride-0 dims left in
// place. What clone(Preserve) gives a non-dense input.
Shape dense_strides_like(const Shape& sizes, const Shape& strides);
// No two indices share an address and the addresses fill a dense range.
bool is_non_overlapping_and_dense(const Shape& sizes, const Shape& strides);

}  // namespace sb
