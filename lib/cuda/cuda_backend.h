// cuda_backend.h — what the device-independent code (lib/core, lib/ops) calls on
// CUDA tensors. Compiled only when meson finds nvcc (SB_WITH_CUDA); implemented in
// lib/cuda/*.cu. Every function expects its preconditions checked by the public op.
#pragma once
#include "core/tensor.h"
#include "ops/elementwise.h"
#include "ops/reduce.h"

namespace sb::cuda {

bool is_available();   // a device is present and the driver answers
int device_count();    // 0 when none
Allocator* allocator(int device);  // the current CUDA allocator (caching by default)

void copy(const Tensor& dst, const Tensor& src);  // any device pair, dtype conversion, broadcast src
void fill(const Tensor& t, double value);

// a and b already broadcast (expanded) to out's sizes.
void binary(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b);
void binary_scalar(BinaryOp op, const Tensor& out, const Tensor& a, double b);
void unary(UnaryOp op, const Tensor& out, const Tensor& a);
void normalize(const Tensor& out, const Tensor& x, int64_t dim, double eps);
// out has x's sizes with the reduced dims (sorted, unique) set to 1 (keepdim form).
void reduce(ReduceOp op, const Tensor& out, const Tensor& x, const Shape& dims, int64_t correction);

}  // namespace sb::cuda
