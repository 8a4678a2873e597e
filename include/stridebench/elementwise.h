// elementwise.h — elementwise ops in three styles.
//
//   out-of-place  Tensor add(const Tensor& a, const Tensor& b)      allocates through
//                 the current allocator; the result takes the layout of the inputs
//                 (PyTorch's rule: the first input's dense layout, e.g. channels-last)
//   out=          Tensor& add_out(Tensor& out, const Tensor& a, const Tensor& b)
//                 out must have the broadcast shape and the result dtype
//   in-place      a.add_(b) (Tensor methods, tensor.h)           b broadcasts to a
//
// Binary: add, sub, mul, div, maximum, minimum, each tensor-tensor and tensor-scalar.
// Unary: neg, abs, relu, exp, sqrt. Fused: normalize ((x - mean) / sqrt(var + eps)
// along one dim, population variance).
// Broadcasting follows PyTorch. Inputs must share one dtype (no type promotion) and
// one device (a mismatch is an error naming both). Cost: one read per input element,
// one write per output element.
//
// dtypes: float32, float64, int32, and float16 and bfloat16 (computed in float32; a
// tensor-scalar op takes the scalar into that arithmetic unrounded, where PyTorch 1.13's
// CPU kernels round it to the 16-bit dtype first: docs/LIBRARY.md).
// Integers (no type promotion, so where PyTorch would return a float we refuse):
//   div on int32 is an error (PyTorch true-divides integers into a float result);
//   exp, sqrt, normalize on int32 are errors; a tensor-scalar op on int32 needs an
//   integral scalar in int32 range; add/sub/mul/neg/abs wrap around (two's complement).
// NaN propagates through maximum/minimum/relu, as in PyTorch.
// exp: float32/float16 on the AVX2 path use a polynomial (<= 2 ulp); the scalar path
// and float64 call std::exp per element (compute-bound, several ns per element).
//
// Overlap rules: writing into a tensor whose elements overlap (an expanded one) is an
// error; an input that shares elements with the output at other positions
// (a.add_(a.t())) is an error; an input that is exactly the output (a.add_(a)) is fine,
// and so is one whose elements are disjoint from the output's however their addresses
// interleave (x[..., 0::2] and x[..., 1::2]), decided from the strides (Note [Overlap
// from strides] in core/tensor.cpp).
#pragma once
#include "stridebench/tensor.h"

namespace sb {

enum class BinaryOp : uint8_t { Add, Sub, Mul, Div, Maximum, Minimum };
enum class UnaryOp : uint8_t { Neg, Abs, Relu, Exp, Sqrt };

const char* binary_op_name(BinaryOp op);
const char* unary_op_name(UnaryOp op);

// Generic entry points (the named functions below call these).
Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b);
Tensor& binary_out(BinaryOp op, Tensor& out, const Tensor& a, const Tensor& b);
Tensor binary(BinaryOp op, const Tensor& a, double b);
Tensor& binary_out(BinaryOp op, Tensor& out, const Tensor& a, double b);
Tensor unary(UnaryOp op, const Tensor& a);
Tensor& unary_out(UnaryOp op, Tensor& out, const Tensor& a);

#define SB_DECLARE_BINARY(name)                                              \
  Tensor name(const Tensor& a, const Tensor& b);                             \
  Tensor& name##_out(Tensor& out, const Tensor& a, const Tensor& b);         \
  Tensor name(const Tensor& a, double b);                                    \
  Tensor& name##_out(Tensor& out, const Tensor& a, double b);
SB_DECLARE_BINARY(add)
SB_DECLARE_BINARY(sub)
SB_DECLARE_BINARY(mul)
SB_DECLARE_BINARY(div)
SB_DECLARE_BINARY(maximum)
SB_DECLARE_BINARY(minimum)
#undef SB_DECLARE_BINARY

#define SB_DECLARE_UNARY(name)          \
  Tensor name(const Tensor& a);         \
  Tensor& name##_out(Tensor& out, const Tensor& a);
SB_DECLARE_UNARY(neg)
SB_DECLARE_UNARY(abs)
SB_DECLARE_UNARY(relu)
SB_DECLARE_UNARY(exp)
SB_DECLARE_UNARY(sqrt)
#undef SB_DECLARE_UNARY

Tensor normalize(const Tensor& x, int64_t dim, double eps = 1e-5);
Tensor& normalize_out(Tensor& out, const Tensor& x, int64_t dim, double eps = 1e-5);

}  // namespace sb
