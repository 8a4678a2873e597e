// dim_plan.h — the one planner of N-D walks: which dims a kernel loops over, in which
// order, with which strides. The CPU elementwise iterator, the CPU copy, the CPU
// reductions and the CUDA host side all start from plan_dims().
//
// Note [One dimension planner]
// Operands share one set of sizes (inputs already broadcast: stride 0 where expanded,
// see broadcast_strides) and are listed in priority order, the output first. The plan
//   1. drops size-1 dims (they move nothing);
//   2. orders the rest fastest first by PyTorch's reorder_dimensions rule: for a pair
//      of dims, the first operand whose strides along both are non-zero and differ
//      decides (smaller stride inside); an operand with equal strides puts the smaller
//      size inside, else defers; when no operand decides, the logical order stands
//      (later dims inside). A dense output of any layout is then walked in memory
//      order, and an expanded input never decides;
//   3. merges dims d (inside) and d + 1 where every operand has
//      stride[d + 1] == stride[d] * size[d], so a dense tensor becomes one dim and
//      NCHW -> NHWC three.
// A plan with no dims is one element (every size was 1); a size-0 dim is kept, so
// numel() tells an empty walk. Strides are in elements and never negative here (the
// library makes no negative strides). Cost: O(ndim^2) integer work, no allocation up to
// kInlineDims dims.
#pragma once
#include <array>
#include <cstdint>
#include <initializer_list>
#include <vector>

#include "core/small_vec.h"
#include "stridebench/tensor.h"

namespace sb {

struct DimPlan {
  static constexpr int kMaxOperands = 4;
  static constexpr int kInlineDims = 8;
  using Strides = std::array<int64_t, kMaxOperands>;  // one per operand, elements

  int nops = 0;
  SmallVec<int64_t, kInlineDims> sizes;    // fastest first
  SmallVec<Strides, kInlineDims> strides;  // [dim][operand]

  int ndim() const { return static_cast<int>(sizes.size()); }
  int64_t numel() const {
    int64_t n = 1;
    for (size_t d = 0; d < sizes.size(); ++d) n *= sizes[d];
    return n;
  }
};

// sizes: ndim entries; strides[i]: operand i's ndim strides (elements, 0 where it is
// broadcast), operands in priority order (nops in [1, kMaxOperands]).
DimPlan plan_dims(const int64_t* sizes, int64_t ndim, const int64_t* const* strides, int nops);
DimPlan plan_dims(const Shape& sizes, std::initializer_list<const Shape*> strides);

// Step 2 alone: perm[0] is the dim to walk innermost (all ndim dims, size-1 ones too).
void order_fastest_first(const int64_t* sizes, int64_t ndim, const int64_t* const* strides, int nops, int64_t* perm);

// t's strides seen through `sizes` (t broadcasts to them): 0 for new and size-1 dims.
Shape broadcast_strides(const Tensor& t, const Shape& sizes);

// PyTorch's output layout for an op over inputs of `sizes` (each input's strides
// already broadcast): dense strides in the order step 2 gives the inputs, so
// channels-last in gives channels-last out, and a.t() + b a column-major result.
Shape output_strides_like(const Shape& sizes, const Shape* const* input_strides, int n);
Shape output_strides_like(const Shape& sizes, std::initializer_list<const Shape*> input_strides);

}  // namespace sb
