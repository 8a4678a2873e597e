// cases/elementwise.h — the elementwise family's case table (Note [Case tables]): the
// ops, layouts and styles that bench_elementwise, bench_elementwise_cuda and the
// device-parameterized tests (ElementwiseOnDevice.EveryCaseOfTheTable) all run, the
// operands' layouts, and the call of each op in each style.
//
// Note [Case tables]
// A family's table lists what it runs, once (ggml's tests/test-backend-ops.cpp: one
// test_case type, every case run on every backend against the CPU). An entry names the
// op, the layout and the style; the caller adds the shapes, dtypes and threads: the
// benchmarks their L2 and DRAM sizes and the matrix's subset, the tests small odd
// shapes, every dtype and every device. The operands are made by one function and the op
// called by one function, so what a benchmark row times is what the test checked, on the
// same layouts (Note [One layout builder]). The values are the caller's: a test needs
// random ones to check against float64, a benchmark in-place row needs ones that do not
// drift (mul by ones).
#pragma once
#include <functional>
#include <vector>

#include "cases/layout.h"
#include "stridebench/memory_format.h"

namespace sb::cases {

enum class EwOp { Add, Mul, Relu, Normalize, Loop };
const char* op_name(EwOp op);  // "add", ..., "loop"
// add and mul read a and b; the loop is relu(add(mul(a, b), b)) (CLAIMS.md S3); relu
// and normalize (along the last dim) read x.
bool is_binary(EwOp op);
inline constexpr int64_t kNormalizeDim = -1;

struct EwCase {
  EwOp op;
  Layout layout;
  Style style;
};

// Every (op, layout, style) of `ops` on the family's layouts (contiguous, transposed,
// sliced, expanded, channels_last, mixed_formats) and styles, in registration order:
// layout, then op, then style, the loop after the ops of the contiguous layout. Left out:
// in place on an expanded x (the writes would overlap: an error); the loop except on
// contiguous inputs out=, out-of-place and out-of-place through the system allocator;
// mixed_formats for unary ops except out= (in place and out-of-place, out takes x's
// format) and for the loop.
std::vector<EwCase> elementwise_cases(const std::vector<EwOp>& ops);

// The operands' layouts: binary ops take a contiguous (channels_last where the case is)
// and b in the case's layout; unary ops take x (a) in the case's layout; outs are dense,
// channels-last where the case is.
// mixed_formats, the operands in two memory formats (a channels-last tensor meeting an
// NCHW one): binary ops take a contiguous and b channels_last, into an NCHW out (out= and
// in place; out-of-place too, where the first operand decides the format as in
// PyTorch); unary ops take x contiguous into a channels-last out (out=).
Layout a_layout(const EwCase& c);
Layout b_layout(const EwCase& c);
MemoryFormat out_format(const EwCase& c);

// The tensors of one case. target: what an in-place call updates (a copy of a for
// binary ops, a fresh x in the case's layout for unary ones); out, t1, t2: the out= call's
// result and the loop's temporaries.
struct EwOperands {
  Tensor a, b, target, out, t1, t2;
};
// make(layout, role) returns a tensor of the case's shape in `layout` (role 'a', 'b', or
// 'x' for an in-place unary target), on the device and in the dtype the caller wants;
// the outs are made empty beside a (uninitialized: a test poisons them).
EwOperands ew_operands(const EwCase& c, const std::function<Tensor(Layout, char)>& make);
// Runs the case's op once in its style and returns the tensor it wrote (target, out,
// or the out-of-place result). inverse: add_ runs as sub_ (a benchmark's in-place loop
// alternates the two so its target never drifts).
Tensor ew_call(const EwCase& c, EwOperands& t, bool inverse = false);

}  // namespace sb::cases
