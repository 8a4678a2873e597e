// cases/elementwise.cpp — see elementwise.h (Note [Case tables]).
#include "cases/elementwise.h"

#include "stridebench/elementwise.h"
#include "stridebench/error.h"

namespace sb::cases {

const char* op_name(EwOp op) {
  switch (op) {
    case EwOp::Add: return "add";
    case EwOp::Mul: return "mul";
    case EwOp::Relu: return "relu";
    case EwOp::Normalize: return "normalize";
    case EwOp::Loop: return "loop";
  }
  return "?";
}

bool is_binary(EwOp op) { return op == EwOp::Add || op == EwOp::Mul || op == EwOp::Loop; }

std::vector<EwCase> elementwise_cases(const std::vector<EwOp>& ops) {
  std::vector<EwCase> r;
  for (Layout l : {Layout::Contiguous, Layout::Transposed, Layout::Sliced, Layout::Expanded, Layout::ChannelsLast,
                   Layout::MixedFormats}) {
    for (EwOp op : ops) {
      if (op == EwOp::Loop) continue;
      for (Style s : kStyles) {
        if (s == Style::Inplace && l == Layout::Expanded && !is_binary(op)) continue;
        if (l == Layout::MixedFormats && !is_binary(op) && s != Style::Out) continue;
        r.push_back({op, l, s});
      }
    }
    if (l == Layout::Contiguous)
      for (EwOp op : ops)
        if (op == EwOp::Loop)
          for (Style s : {Style::Out, Style::Outofplace, Style::OutofplaceSystem}) r.push_back({op, l, s});
  }
  return r;
}

Layout a_layout(const EwCase& c) {
  if (c.layout == Layout::MixedFormats) return Layout::Contiguous;
  return is_binary(c.op) && c.layout != Layout::ChannelsLast ? Layout::Contiguous : c.layout;
}

Layout b_layout(const EwCase& c) { return c.layout == Layout::MixedFormats ? Layout::ChannelsLast : c.layout; }

MemoryFormat out_format(const EwCase& c) {
  const bool cl = c.layout == Layout::ChannelsLast || (c.layout == Layout::MixedFormats && !is_binary(c.op));
  return cl ? MemoryFormat::ChannelsLast : MemoryFormat::Contiguous;
}

EwOperands ew_operands(const EwCase& c, const std::function<Tensor(Layout, char)>& make) {
  EwOperands t;
  const bool bin = is_binary(c.op);
  t.a = make(a_layout(c), 'a');
  if (bin) t.b = make(b_layout(c), 'b');
  if (c.style == Style::Inplace) t.target = bin ? t.a.clone() : make(c.layout, 'x');
  if (c.style == Style::Out) {
    auto empty_like_a = [&] { return empty(t.a.sizes(), t.a.dtype(), t.a.device(), out_format(c)); };
    t.out = empty_like_a();
    if (c.op == EwOp::Loop) t.t1 = empty_like_a(), t.t2 = empty_like_a();
  }
  return t;
}

Tensor ew_call(const EwCase& c, EwOperands& t, bool inverse) {
  const Tensor &a = t.a, &b = t.b;
  switch (c.style) {
    case Style::Inplace:
      switch (c.op) {
        case EwOp::Add: inverse ? t.target.sub_(b) : t.target.add_(b); break;
        case EwOp::Mul: t.target.mul_(b); break;
        case EwOp::Relu: t.target.relu_(); break;
        case EwOp::Normalize: t.target.normalize_(kNormalizeDim); break;
        case EwOp::Loop: SB_INTERNAL_ASSERT(false, "elementwise case: the loop has no in-place style");
      }
      return t.target;
    case Style::Out:
      switch (c.op) {
        case EwOp::Add: return add_out(t.out, a, b);
        case EwOp::Mul: return mul_out(t.out, a, b);
        case EwOp::Relu: return relu_out(t.out, a);
        case EwOp::Normalize: return normalize_out(t.out, a, kNormalizeDim);
        case EwOp::Loop: return relu_out(t.out, add_out(t.t2, mul_out(t.t1, a, b), b));
      }
      break;
    case Style::Outofplace:
    case Style::OutofplaceSystem:
      switch (c.op) {
        case EwOp::Add: return add(a, b);
        case EwOp::Mul: return mul(a, b);
        case EwOp::Relu: return relu(a);
        case EwOp::Normalize: return normalize(a, kNormalizeDim);
        case EwOp::Loop: return relu(add(mul(a, b), b));
      }
      break;
  }
  return Tensor();
}

}  // namespace sb::cases
