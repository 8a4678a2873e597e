// memory_format.cpp — stride rules for the memory formats (see memory_format.h and
// Note [Ambiguous channels-last strides]). Each rule is PyTorch's, written anew.
#include "stridebench/memory_format.h"

#include "core/small_vec.h"

#include <algorithm>
#include <numeric>

#include "stridebench/error.h"

namespace sb {

Shape contiguous_strides(const Shape& sizes) {
  Shape st(sizes.size());
  int64_t z = 1;
  for (int64_t d = static_cast<int64_t>(sizes.size()) - 1; d >= 0; --d) {
    st[d] = z;
    z *= std::max<int64_t>(sizes[d], 1);
  }
  return st;
}

Shape channels_last_strides(const Shape& sizes) {
  SB_CHECK(sizes.size() == 4, "ChannelsLast: expected a 4-D (NCHW) tensor, got ", sizes.size(), "-D sizes ", sizes);
  // PyTorch's rule, sizes taken as they are: a zero size gives zero strides outside it
  // (N x 0 x H x W: 0, 1, 0, 0), which is_channels_last_contiguous_strides accepts
  Shape st(4);
  st[1] = 1;
  st[3] = sizes[1];
  st[2] = st[3] * sizes[3];
  st[0] = st[2] * sizes[2];
  return st;
}

Shape strides_for(const Shape& sizes, MemoryFormat f) {
  switch (f) {
    case MemoryFormat::ChannelsLast: return channels_last_strides(sizes);
    default: return contiguous_strides(sizes);
  }
}

bool is_contiguous_strides(const Shape& sizes, const Shape& strides) {
  int64_t z = 1;
  for (int64_t d = static_cast<int64_t>(sizes.size()) - 1; d >= 0; --d) {
    if (sizes[d] == 0) return true;
  }
  for (int64_t d = static_cast<int64_t>(sizes.size()) - 1; d >= 0; --d) {
    if (sizes[d] != 1) {
      if (strides[d] != z) return false;
      z *= sizes[d];
    }
  }
  return true;
}

bool is_channels_last_contiguous_strides(const Shape& sizes, const Shape& strides) {
  // the strides decide even with a zero size (PyTorch: no numel shortcut here, unlike
  // is_contiguous, so an empty NCHW-strided tensor is not channels-last)
  if (sizes.size() != 4) return false;
  int64_t expected = 1;
  for (int d : {1, 3, 2, 0}) {
    if (sizes[d] != 1) {
      if (strides[d] != expected) return false;
      expected *= sizes[d];
    }
  }
  return true;
}

bool is_channels_last_like_strides(const Shape& sizes, const Shape& strides) {
  if (sizes.size() != 4) return false;
  int64_t min = 0;
  if (strides[1] == 0) return false;  // trivial C dimension: NCHW
  for (int d : {1, 3, 2, 0}) {
    if (sizes[d] == 0) return false;
    if (strides[d] < min) return false;
    // N111 with identical strides, or N11W sliced on W: ambiguous, fall back to NCHW
    if (d == 0 && min == strides[1]) return false;
    min = strides[d];
    if (sizes[d] > 1) min *= sizes[d];
  }
  return true;
}

Shape dense_strides_like(const Shape& sizes, const Shape& strides) {
  const int64_t n = static_cast<int64_t>(sizes.size());
  // -1: keep order, 1: swap, 0: ambiguous (stride 0 on either side, or equal strides and sizes)
  auto should_swap = [&](int64_t d0, int64_t d1) {
    if (strides[d0] == 0 || strides[d1] == 0) return 0;
    if (strides[d0] != strides[d1]) return strides[d0] < strides[d1] ? -1 : 1;
    return sizes[d0] > sizes[d1] ? 1 : 0;
  };
  std::vector<int64_t> perm(n);  // innermost first: n-1, ..., 0
  for (int64_t i = 0; i < n; ++i) perm[i] = n - 1 - i;
  for (int64_t i = 1; i < n; ++i) {  // insertion sort that tolerates ambiguous pairs
    int64_t d1 = i;
    for (int64_t d0 = i - 1; d0 >= 0; --d0) {
      const int c = should_swap(perm[d0], perm[d1]);
      if (c > 0) {
        std::swap(perm[d0], perm[d1]);
        d1 = d0;
      } else if (c < 0) {
        break;
      }
    }
  }
  Shape out(n);
  int64_t cur = 1;
  for (int64_t i = 0; i < n; ++i) {
    out[perm[i]] = cur;
    if (sizes[perm[i]] > 1) cur *= sizes[perm[i]];
  }
  return out;
}

bool is_non_overlapping_and_dense(const Shape& sizes, const Shape& strides) {
  const size_t n = sizes.size();
  if (n == 1) return sizes[0] < 2 || strides[0] == 1;
  // the common case first, without the sort: dense in row-major order (strides grow
  // from the last dim, size-0/1 dims skipped), which the sorted order below would be
  int64_t z = 1;
  bool row_major = true;
  for (size_t d = n; d-- > 0 && row_major;) {
    if (sizes[d] < 2) continue;
    row_major = strides[d] == z;
    z *= sizes[d];
  }
  if (row_major) return true;
  // sort dims by stride, size-0/1 dims last (they do not matter): a stable insertion
  // sort, no allocation up to eight dims
  SmallVec<size_t, 8> perm;
  for (size_t i = 0; i < n; ++i) perm.push_back(i);
  auto before = [&](size_t a, size_t b) {
    if (sizes[a] < 2) return false;
    if (sizes[b] < 2) return true;
    return strides[a] < strides[b];
  };
  for (size_t i = 1; i < n; ++i)
    for (size_t j = i; j > 0 && before(perm[j], perm[j - 1]); --j) std::swap(perm[j], perm[j - 1]);
  int64_t require = 1;
  for (size_t i = 0; i < n; ++i) {
    const int64_t s = sizes[perm[i]];
    if (s < 2) return true;
    if (strides[perm[i]] != require) return false;
    require *= s;
  }
  return true;
}

}  // namespace sb
