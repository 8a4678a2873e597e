// cases/matmul.h — the matmul family's case table (Note [Case tables] in
// cases/elementwise.h): the operand layouts and styles that bench_matmul,
// bench_matmul_cuda and MatmulOnDevice.EveryCaseOfTheTable all run, the operands'
// placements and the call in each style.
//
// `layout` names the non-contiguous operand, always A ([M, K]); B ([K, N]) is row-major
// except in column_major:
//   contiguous        A, B row-major
//   transposed        A a .t() view of a row-major [K, M] buffer
//   sliced            A every other row of a row-major [2M, K] buffer (rows 2K apart:
//                     a leading dimension BLAS takes)
//   column_major      A and B column-major (.t() views of [K, M] and [N, K]); the out=
//                     result column-major too (a Fortran-order caller)
//   contiguous_first  A as transposed; A.contiguous() then matmul, in one call
// Styles: out (matmul_out into C made beforehand), outofplace, outofplace_system (the
// caller sets the system allocator around the call).
#pragma once
#include <functional>
#include <vector>

#include "cases/layout.h"

namespace sb::cases {

struct MmCase {
  Layout layout;
  Style style;
};

// Every layout above with out=, out-of-place and out-of-place through the system
// allocator, layout outermost.
std::vector<MmCase> matmul_cases();

// The placements of A [M, K] ('a'), B [K, N] ('b') and the out= result [M, N] ('o').
Placement mm_placement(const MmCase& c, char role, const Shape& sizes);

struct MmOperands {
  Tensor a, b, out;
};
// make(placement, sizes, role) returns A or B ('a', 'b') in that placement, in the
// caller's dtype and device and with its values; out (style out) is made here beside A,
// uninitialized (a test poisons it).
MmOperands mm_operands(const MmCase& c, int64_t M, int64_t K, int64_t N,
                       const std::function<Tensor(const Placement&, const Shape&, char)>& make);
// One call in the case's style; returns the result (out, or the out-of-place result).
Tensor mm_call(const MmCase& c, MmOperands& t);

}  // namespace sb::cases
