// cases/copy.h — the copy family's case table (Note [Case tables] in
// cases/elementwise.h): the materializations that bench_copy, bench_copy_cuda and
// CopyOnDevice.EveryCaseOfTheTable all run, their sources' placements and the call.
//
//   op:contiguous layout:transposed     x.contiguous() of a .t() view of an n x n buffer
//   op:contiguous layout:contiguous     the twin: clone() of a contiguous tensor, a copy
//                                       of the same bytes in the same order (contiguous()
//                                       there would return x itself)
//   op:nchw_to_nhwc layout:contiguous   x.contiguous(ChannelsLast)
//   op:contiguous layout:channels_last  NHWC -> NCHW: contiguous() of a channels-last x
//   op:permute layout:contiguous        x.permute({2, 0, 1}).contiguous() of a 3-D x
// `layout` is the source's layout, `shape` its logical sizes. Each call returns a new
// tensor: dense in its result format, never sharing x's storage.
#pragma once
#include <string>
#include <vector>

#include "cases/layout.h"

namespace sb::cases {

enum class CopyOp { Contiguous, NchwToNhwc, Permute };
const char* op_name(CopyOp op);  // "contiguous", "nchw_to_nhwc", "permute"

struct CopyCase {
  CopyOp op;
  Layout layout;
  Shape shape;
};

// For each n of `squares`: contiguous of a transposed n x n and its twin; for each of
// `conversions`, NCHW -> NHWC; at `nchw`, NHWC -> NCHW and its twin; for each of `cubes`,
// the permute. In that order.
std::vector<CopyCase> copy_cases(const std::vector<int64_t>& squares, const std::vector<Shape>& conversions,
                                 const Shape& nchw, const std::vector<Shape>& cubes = {});
// The NCHW cases at one shape: NCHW -> NHWC, NHWC -> NCHW and the twin.
std::vector<CopyCase> nchw_cases(const Shape& nchw);

// The source's placement.
Placement copy_placement(const CopyCase& c);
// The case's copy of x (x in copy_placement(c)).
Tensor copy_call(const CopyCase& c, const Tensor& x);
// The result's memory format: channels-last for NCHW -> NHWC, else contiguous.
MemoryFormat copy_format(const CopyCase& c);

}  // namespace sb::cases
