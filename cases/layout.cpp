// cases/layout.cpp — see layout.h (Note [One layout builder]).
#include "cases/layout.h"

#include <algorithm>
#include <numeric>
#include <sstream>
#include <utility>

#include "stridebench/error.h"

namespace sb::cases {

const char* layout_name(Layout l) {
  switch (l) {
    case Layout::Contiguous: return "contiguous";
    case Layout::Transposed: return "transposed";
    case Layout::Sliced: return "sliced";
    case Layout::Expanded: return "expanded";
    case Layout::ChannelsLast: return "channels_last";
    case Layout::ColumnMajor: return "column_major";
    case Layout::ContiguousFirst: return "contiguous_first";
    case Layout::Offset: return "offset";
    case Layout::MixedFormats: return "mixed_formats";
  }
  return "?";
}

const char* style_name(Style s) {
  switch (s) {
    case Style::Inplace: return "inplace";
    case Style::Out: return "out";
    case Style::Outofplace: return "outofplace";
    case Style::OutofplaceSystem: return "outofplace_system";
  }
  return "?";
}

std::string Placement::describe() const {
  std::ostringstream os;
  auto list = [&](const char* what, const std::vector<int64_t>& v) {
    os << what << " [";
    for (size_t i = 0; i < v.size(); ++i) os << (i ? ", " : "") << v[i];
    os << "] ";
  };
  list("order", order);
  list("step", step);
  list("start", start);
  list("pad", pad);
  os << "offset " << offset;
  return os.str();
}

Placement dense(const Shape& sizes) {
  const size_t nd = sizes.size();
  Placement p;
  p.order.resize(nd);
  std::iota(p.order.begin(), p.order.end(), 0);
  p.step.assign(nd, 1);
  p.start.assign(nd, 0);
  p.pad.assign(nd, 0);
  return p;
}

Placement placement(Layout l, const Shape& sizes, int64_t sliced_dim) {
  const int64_t nd = static_cast<int64_t>(sizes.size());
  Placement p = dense(sizes);
  switch (l) {
    case Layout::Contiguous: return p;
    case Layout::Offset: p.offset = 1; return p;
    case Layout::MixedFormats:
      SB_CHECK(false, "placement: mixed_formats names a case's operands, not one tensor's placement");
      return p;
    case Layout::ChannelsLast:
      if (nd == 4) {
        p.order = {0, 2, 3, 1};
        return p;
      }
      [[fallthrough]];
    case Layout::Transposed:
    case Layout::ContiguousFirst:
      if (nd < 2) return placement(Layout::Sliced, sizes, sliced_dim);
      std::swap(p.order[nd - 1], p.order[nd - 2]);
      return p;
    case Layout::ColumnMajor:
      std::reverse(p.order.begin(), p.order.end());
      return p;
    case Layout::Expanded: {
      const int64_t last = nd < 3 ? std::min<int64_t>(nd, 1) : nd - 2;  // dims [0, last) broadcast
      bool any = false;
      for (int64_t d = 0; d < last; ++d)
        if (sizes[d] > 1) p.step[d] = 0, any = true;
      return any ? p : placement(Layout::Sliced, sizes, sliced_dim);
    }
    case Layout::Sliced: {
      if (nd == 0) return placement(Layout::Offset, sizes);
      const int64_t d = sliced_dim < 0 ? sliced_dim + nd : sliced_dim;
      SB_CHECK(d >= 0 && d < nd, "placement: sliced dim ", sliced_dim, " out of range for ", nd, " dims");
      p.step[d] = 2;
      p.pad[d] = 1;
      return p;
    }
  }
  return p;
}

std::vector<int64_t> broadcast_dims(const Placement& p) {
  std::vector<int64_t> r;
  for (size_t d = 0; d < p.step.size(); ++d)
    if (p.step[d] == 0) r.push_back(static_cast<int64_t>(d));
  return r;
}

namespace {
bool spans_one(const Shape& sizes, const Placement& p, int64_t d) { return p.step[d] == 0 || sizes[d] == 0; }
}  // namespace

Shape storage_sizes(const Shape& sizes, const Placement& p) {
  const size_t nd = sizes.size();
  SB_CHECK(p.order.size() == nd && p.step.size() == nd && p.start.size() == nd && p.pad.size() == nd,
           "placement: ", p.describe(), " does not have the ", nd, " dims of the sizes");
  Shape big(nd);
  for (size_t j = 0; j < nd; ++j) {
    const int64_t d = p.order[j];
    big[j] = spans_one(sizes, p, d) ? 1 : p.start[d] + (sizes[d] - 1) * p.step[d] + 1 + p.pad[d];
  }
  return big;
}

Tensor view_in(const Tensor& storage, const Shape& sizes, const Placement& p) {
  const int64_t nd = static_cast<int64_t>(sizes.size());
  SB_CHECK(storage.sizes() == storage_sizes(sizes, p), "view_in: storage sizes ", storage.sizes(), " are not ",
           storage_sizes(sizes, p), " (", p.describe(), ")");
  Tensor v = storage;
  for (int64_t j = 0; j < nd; ++j) {
    const int64_t d = p.order[j];
    if (spans_one(sizes, p, d)) v = v.narrow(j, 0, sizes[d] == 0 ? 0 : 1);
    else v = v.slice(j, p.start[d], p.start[d] + (sizes[d] - 1) * p.step[d] + 1, p.step[d]);
  }
  Shape inverse(nd);
  for (int64_t j = 0; j < nd; ++j) inverse[p.order[j]] = j;
  if (nd) v = v.permute(inverse);
  return v.expand(sizes);
}

Placed place(const Shape& sizes, const Placement& p, DType dt, Device dev) {
  const Shape big = storage_sizes(sizes, p);
  const int64_t n = checked_numel(big, "place");
  Placed r;
  r.buffer = empty({p.offset + n + 2}, dt, dev);
  r.view = view_in(r.buffer.narrow(0, p.offset, n).view(big), sizes, p);
  return r;
}

}  // namespace sb::cases
