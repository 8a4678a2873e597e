// cases/conv.cpp — see conv.h.
#include "cases/conv.h"

namespace sb::cases {

const char* op_name(ConvOp op) {
  switch (op) {
    case ConvOp::Conv: return "conv2d";
    case ConvOp::MaxPool: return "max_pool2d";
    case ConvOp::AvgPool: return "avg_pool2d";
  }
  return "?";
}

std::vector<ConvCase> conv_cases(const std::vector<ConvOp>& ops) {
  std::vector<ConvCase> r;
  for (ConvOp op : ops) {
    const std::vector<Layout> layouts =
        op == ConvOp::Conv ? std::vector<Layout>{Layout::Contiguous, Layout::ChannelsLast, Layout::Sliced, Layout::Transposed}
                           : std::vector<Layout>{Layout::Contiguous, Layout::ChannelsLast};
    for (Layout l : layouts)
      for (Style s : {Style::Out, Style::Outofplace}) r.push_back({op, l, s});
  }
  return r;
}

Conv2dParams conv_params(const ConvGeometry& g) {
  Conv2dParams p;
  p.padding = g.k / 2;
  p.groups = g.groups;
  return p;
}

Shape shape_key(const ConvGeometry& g) {
  if (g.cout == 0 || (g.k == 3 && g.groups == 1 && g.cout == g.x[1])) return g.x;  // cout 0: pooling
  Shape s = g.x;
  s.insert(s.end(), {g.cout, g.k, g.groups});
  return s;
}

Pool2dParams pool_params() { return Pool2dParams{3, 2, 1}; }

MemoryFormat native_format(const ConvCase& c) {
  return c.layout == Layout::ChannelsLast ? MemoryFormat::ChannelsLast : MemoryFormat::Contiguous;
}

ConvOperands conv_operands(const ConvCase& c, const ConvGeometry& g,
                           const std::function<Tensor(const Placement&, const Shape&, char)>& make) {
  ConvOperands t;
  t.x = make(placement(c.layout, g.x), g.x, 'x');
  Shape os;
  if (c.op == ConvOp::Conv) {
    const Shape ws{g.cout, g.x[1] / g.groups, g.k, g.k};
    t.w = make(placement(c.layout == Layout::ChannelsLast ? Layout::ChannelsLast : Layout::Contiguous, ws), ws, 'w');
    os = conv2d_output_sizes(t.x, t.w, Tensor(), conv_params(g));
  } else {
    const Pool2dParams p = pool_params();
    const Shape& s = g.x;
    auto out_len = [&](int64_t n) { return (n + 2 * p.padding - p.kernel) / p.stride + 1; };
    os = {s[0], s[1], out_len(s[2]), out_len(s[3])};
  }
  if (c.style == Style::Out) t.out = empty(os, t.x.dtype(), t.x.device(), native_format(c));
  return t;
}

Tensor conv_call(const ConvCase& c, const ConvGeometry& g, ConvOperands& t) {
  const bool out = c.style == Style::Out;
  switch (c.op) {
    case ConvOp::Conv: {
      const Conv2dParams p = conv_params(g);
      return out ? conv2d_out(t.out, t.x, t.w, Tensor(), p) : conv2d(t.x, t.w, Tensor(), p);
    }
    case ConvOp::MaxPool: return out ? max_pool2d_out(t.out, t.x, pool_params()) : max_pool2d(t.x, pool_params());
    case ConvOp::AvgPool: return out ? avg_pool2d_out(t.out, t.x, pool_params()) : avg_pool2d(t.x, pool_params());
  }
  return Tensor();
}

}  // namespace sb::cases
