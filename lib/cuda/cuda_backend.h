// cuda_backend.h — what the device-independent code (lib/core, lib/ops) calls on
// CUDA tensors. Compiled only when meson finds nvcc (SB_WITH_CUDA); implemented in
// lib/cuda/*.cu. Every function expects its preconditions checked by the public op.
#pragma once
#include "core/tensor.h"
#include "ops/conv.h"
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
// out = a @ b (float32/float64; 2-D, or 3-D batched with a batch size of 1 or a 2-D
// operand broadcasting: those operands have batch stride 0 semantics), any strides
// (transposed views as cuBLAS op flags). out has the result sizes and does not overlap.
void matmul(const Tensor& out, const Tensor& a, const Tensor& b);
// out [N, O, OH, OW] (x's memory format) = conv2d(x, w) + bias (undefined: none),
// relu when asked. Sizes, dtypes (float32) and devices checked by sb::conv2d.
void conv2d(const Tensor& out, const Tensor& x, const Tensor& w, const Tensor& bias, const Conv2dParams& p, bool relu);

}  // namespace sb::cuda
