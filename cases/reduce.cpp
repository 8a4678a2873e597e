// cases/reduce.cpp — see reduce.h.
#include "cases/reduce.h"

namespace sb::cases {

const char* dim_name(const ReduceCase& c) { return c.inner ? "inner" : "outer"; }

std::vector<ReduceCase> reduce_cases(const std::vector<ReduceOp>& ops) {
  std::vector<ReduceCase> r;
  for (ReduceOp op : ops)
    for (Layout l : {Layout::Contiguous, Layout::ColumnMajor, Layout::Sliced})
      for (bool inner : {true, false}) r.push_back({op, l, inner});
  return r;
}

Placement reduce_placement(const ReduceCase& c, const Shape& sizes) { return placement(c.layout, sizes); }

Tensor reduce_call(const ReduceCase& c, const Tensor& x) {
  const Shape dims{c.inner ? 1 : 0};
  switch (c.op) {
    case ReduceOp::Sum: return sum(x, dims);
    case ReduceOp::Mean: return mean(x, dims);
    case ReduceOp::Max: return max(x, dims);
    case ReduceOp::Var: return var(x, dims);
    case ReduceOp::Std: return std(x, dims);
  }
  return Tensor();
}

}  // namespace sb::cases
