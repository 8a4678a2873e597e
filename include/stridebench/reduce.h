// reduce.h — reductions over any set of dims.
//
//   sum, mean, max, var, std (var/std with a correction, 1 = unbiased by default,
//   as PyTorch). dims empty = all dims. keepdim keeps reduced dims as size 1.
//   Each has an out= form; the result dtype is the input's (an int32 sum too, where
//   PyTorch gives int64: no type promotion, docs/LIBRARY.md).
// Cost: one read of the input, one write of the (small) output. float32 sums use
// several accumulators (pairwise across chunks) so error grows like O(log n); the
// reduction kernels are free to choose, the tests bound the error against float64.
#pragma once
#include "stridebench/tensor.h"

namespace sb {

enum class ReduceOp : uint8_t { Sum, Mean, Max, Var, Std };
const char* reduce_op_name(ReduceOp op);  // "sum", "mean", ...

Tensor sum(const Tensor& x, const Shape& dims = {}, bool keepdim = false);
Tensor mean(const Tensor& x, const Shape& dims = {}, bool keepdim = false);
Tensor max(const Tensor& x, const Shape& dims = {}, bool keepdim = false);
Tensor var(const Tensor& x, const Shape& dims = {}, int64_t correction = 1, bool keepdim = false);
Tensor std(const Tensor& x, const Shape& dims = {}, int64_t correction = 1, bool keepdim = false);

Tensor& sum_out(Tensor& out, const Tensor& x, const Shape& dims = {}, bool keepdim = false);
Tensor& mean_out(Tensor& out, const Tensor& x, const Shape& dims = {}, bool keepdim = false);
Tensor& max_out(Tensor& out, const Tensor& x, const Shape& dims = {}, bool keepdim = false);
Tensor& var_out(Tensor& out, const Tensor& x, const Shape& dims = {}, int64_t correction = 1, bool keepdim = false);
Tensor& std_out(Tensor& out, const Tensor& x, const Shape& dims = {}, int64_t correction = 1, bool keepdim = false);

}  // namespace sb
