// cases/copy.cpp — see copy.h.
#include "cases/copy.h"

namespace sb::cases {

const char* op_name(CopyOp op) {
  switch (op) {
    case CopyOp::Contiguous: return "contiguous";
    case CopyOp::NchwToNhwc: return "nchw_to_nhwc";
    case CopyOp::Permute: return "permute";
  }
  return "?";
}

std::vector<CopyCase> copy_cases(const std::vector<int64_t>& squares, const std::vector<Shape>& conversions,
                                 const Shape& nchw, const std::vector<Shape>& cubes) {
  std::vector<CopyCase> r;
  for (int64_t n : squares) {
    r.push_back({CopyOp::Contiguous, Layout::Transposed, {n, n}});
    r.push_back({CopyOp::Contiguous, Layout::Contiguous, {n, n}});
  }
  for (const Shape& s : conversions) r.push_back({CopyOp::NchwToNhwc, Layout::Contiguous, s});
  r.push_back({CopyOp::Contiguous, Layout::ChannelsLast, nchw});
  r.push_back({CopyOp::Contiguous, Layout::Contiguous, nchw});
  for (const Shape& s : cubes) r.push_back({CopyOp::Permute, Layout::Contiguous, s});
  return r;
}

std::vector<CopyCase> nchw_cases(const Shape& nchw) { return copy_cases({}, {nchw}, nchw); }

Placement copy_placement(const CopyCase& c) { return placement(c.layout, c.shape); }

Tensor copy_call(const CopyCase& c, const Tensor& x) {
  switch (c.op) {
    case CopyOp::Contiguous: return c.layout == Layout::Contiguous ? x.clone() : x.contiguous();
    case CopyOp::NchwToNhwc: return x.contiguous(MemoryFormat::ChannelsLast);
    case CopyOp::Permute: return x.permute({2, 0, 1}).contiguous();
  }
  return Tensor();
}

MemoryFormat copy_format(const CopyCase& c) {
  return c.op == CopyOp::NchwToNhwc ? MemoryFormat::ChannelsLast : MemoryFormat::Contiguous;
}

}  // namespace sb::cases
