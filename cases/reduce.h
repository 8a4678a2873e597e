// cases/reduce.h — the reduce family's case table (Note [Case tables] in
// cases/elementwise.h): the reductions that bench_reduce, bench_reduce_cuda and
// ReduceOnDevice.EveryCaseOfTheTable all run, their input's placement and the call.
//
// Over one dim of a 2-D R x C tensor, out-of-place (the small result through the
// allocator), var and std with correction 1:
//   dim:inner  reduce dim 1 (along a row of the logical matrix) -> R values
//   dim:outer  reduce dim 0 (down a column)                     -> C values
// layouts: contiguous (row-major), column_major (the same logical matrix stored column
// by column) and sliced (every other element of each row of an R x 2C buffer,
// x[:, ::2]). On a row-major tensor dim:inner walks memory in order; on a column-major
// one dim:outer does; a sliced one reads every line of its buffer for half its bytes.
#pragma once
#include <vector>

#include "cases/layout.h"
#include "stridebench/reduce.h"

namespace sb::cases {

struct ReduceCase {
  ReduceOp op;
  Layout layout;
  bool inner;
};
const char* dim_name(const ReduceCase& c);  // "inner", "outer"

// Every op of `ops` on the three layouts and both dims: op, then layout, then dim.
std::vector<ReduceCase> reduce_cases(const std::vector<ReduceOp>& ops);
// The input's placement for its logical sizes.
Placement reduce_placement(const ReduceCase& c, const Shape& sizes);
// The case's reduction of x (x in reduce_placement(c)).
Tensor reduce_call(const ReduceCase& c, const Tensor& x);

}  // namespace sb::cases
