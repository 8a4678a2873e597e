// cases/layout.h — the run names' layouts and styles, and the one layout builder of the
// tests, the differential test and the benchmarks: a named layout (docs/BENCHMARKS.md's
// `layout` values) or a random one is a Placement, and one chain of view ops turns a
// buffer into the view it describes.
//
// Note [One layout builder]
// A Placement says, for each logical dim, its place in the storage order (order[0]
// outermost), its step in the buffer dim it is sliced from (1 dense, 2 every other
// element, 0 broadcast), the elements skipped before it (start) and after it (pad), and
// the buffer's leading offset. view_in() makes the view by view ops only: the storage
// tensor (storage_sizes(), in storage order) sliced dim by dim with its start and step,
// permuted into logical order, broadcast dims expanded. So every layout a test checks,
// a benchmark times or the differential test draws is made the same way, by the public
// view API a user calls, and a named layout means the same strides everywhere:
//   contiguous        identity order, dense;
//   transposed        the last two dims swapped in storage (x.transpose(-1, -2) of a dense buffer);
//   column_major      every dim reversed in storage (a matrix's .t(); dense below 2-D);
//   contiguous_first  transposed's storage (the op runs on contiguous() of it);
//   sliced            step 2 in one dim (the last unless the family says otherwise, e.g.
//                     matmul's rows), start 0 and one element of pad: x[..., ::2] of a
//                     buffer twice as long;
//   expanded          step 0 in the dims before the last two (dim 0 where there are
//                     fewer than three), each of size > 1: x[:1, :1].expand(...);
//   channels_last     order {0, 2, 3, 1} for 4-D (NHWC strides); others as transposed;
//   offset            dense, one element into its buffer (misaligned);
//   mixed_formats     a case's layout, not a tensor's: its operands disagree on memory
//                     format, each contiguous or channels_last (cases/elementwise.h).
// A layout that cannot change the strides of a shape (expanded where no broadcast dim
// has more than one element, transposed and channels_last below 2-D, sliced of a 0-d
// tensor) is the next one that can: expanded/transposed -> sliced -> offset, so a case
// named for one of those layouts never runs a dense tensor at offset 0.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "stridebench/tensor.h"

namespace sb::cases {

// The `layout` values of docs/BENCHMARKS.md, plus offset (tests only). A family uses the
// subset it measures.
enum class Layout {
  Contiguous,
  Transposed,
  Sliced,
  Expanded,
  ChannelsLast,
  ColumnMajor,
  ContiguousFirst,
  Offset,
  MixedFormats
};
const char* layout_name(Layout l);  // "contiguous", "channels_last", ...
// The `style` values: a.add_(b), add_out(out, a, b), add(a, b), and add(a, b) through
// the system allocator (CPU: aligned_alloc and free; GPU: cudaMalloc and cudaFree).
enum class Style { Inplace, Out, Outofplace, OutofplaceSystem };
inline constexpr Style kStyles[] = {Style::Inplace, Style::Out, Style::Outofplace, Style::OutofplaceSystem};
const char* style_name(Style s);  // "inplace", "out", "outofplace", "outofplace_system"

struct Placement {
  std::vector<int64_t> order;  // storage position j holds logical dim order[j]
  Shape step, start, pad;      // per logical dim
  int64_t offset = 0;          // elements before the storage tensor in its buffer
  std::string describe() const;
};

// The dense placement of sizes (identity order, step 1, no gaps).
Placement dense(const Shape& sizes);
// The placement of named layout l for sizes; `sliced_dim` is the dim sliced takes its
// step in (negative: from the end).
Placement placement(Layout l, const Shape& sizes, int64_t sliced_dim = -1);
// The logical dims a placement broadcasts (step 0), ascending.
std::vector<int64_t> broadcast_dims(const Placement& p);

// The storage tensor's sizes, in storage order: a dim of step s spans
// start + (size - 1) s + 1 + pad elements; a broadcast or empty dim spans 1 (the view
// narrows it to 1 or 0).
Shape storage_sizes(const Shape& sizes, const Placement& p);
// The view of `sizes` in placement p over `storage`, a tensor of storage_sizes(sizes, p)
// (p.offset is the caller's: see place()).
Tensor view_in(const Tensor& storage, const Shape& sizes, const Placement& p);

// A fresh buffer on dev and the view in it: the buffer is 1-D, p.offset elements before
// the storage tensor and two spare elements after it (so a write past the view's end
// lands in the buffer, where a test can see it). Its contents are uninitialized.
struct Placed {
  Tensor view, buffer;
};
Placed place(const Shape& sizes, const Placement& p, DType dt, Device dev = Device::cpu());

}  // namespace sb::cases
