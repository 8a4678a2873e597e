// cases/matmul.cpp — see matmul.h.
#include "cases/matmul.h"

#include "stridebench/matmul.h"

namespace sb::cases {

std::vector<MmCase> matmul_cases() {
  std::vector<MmCase> r;
  for (Layout l : {Layout::Contiguous, Layout::Transposed, Layout::Sliced, Layout::ColumnMajor, Layout::ContiguousFirst})
    for (Style s : {Style::Out, Style::Outofplace, Style::OutofplaceSystem}) r.push_back({l, s});
  return r;
}

Placement mm_placement(const MmCase& c, char role, const Shape& sizes) {
  if (role == 'a') {
    // contiguous_first: transposed's A, copied by the call; sliced: A's rows
    const Layout l = c.layout == Layout::ContiguousFirst ? Layout::Transposed : c.layout;
    return placement(l, sizes, /*sliced_dim=*/0);
  }
  return placement(c.layout == Layout::ColumnMajor ? Layout::ColumnMajor : Layout::Contiguous, sizes);
}

MmOperands mm_operands(const MmCase& c, int64_t M, int64_t K, int64_t N,
                       const std::function<Tensor(const Placement&, const Shape&, char)>& make) {
  MmOperands t;
  t.a = make(mm_placement(c, 'a', {M, K}), {M, K}, 'a');
  t.b = make(mm_placement(c, 'b', {K, N}), {K, N}, 'b');
  if (c.style == Style::Out) t.out = place({M, N}, mm_placement(c, 'o', {M, N}), t.a.dtype(), t.a.device()).view;
  return t;
}

Tensor mm_call(const MmCase& c, MmOperands& t) {
  const Tensor a = c.layout == Layout::ContiguousFirst ? t.a.contiguous() : t.a;
  if (c.style == Style::Out) return matmul_out(t.out, a, t.b);
  return matmul(a, t.b);
}

}  // namespace sb::cases
