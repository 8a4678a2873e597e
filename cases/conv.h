// cases/conv.h — the conv family's case table (Note [Case tables] in
// cases/elementwise.h): the convolutions and poolings that bench_conv, bench_conv_cuda
// and ConvOnDevice.EveryCaseOfTheTable all run, the operands' placements and the calls.
//
//   conv2d      stride 1, padding k / 2, no bias; layouts contiguous (NCHW x and
//               weights), channels_last (NHWC x and weights), sliced (x every other
//               column of an [N, C, H, 2W] buffer), transposed (x a .transpose(2, 3)
//               view of [N, C, W, H]); weights dense, channels-last in channels_last
//   max_pool2d, avg_pool2d  3x3, stride 2, padding 1; contiguous and channels_last
// Styles out (into an output made beforehand, dense in the case's native format:
// NHWC for channels_last, NCHW otherwise) and outofplace (PyTorch's format rule).
// The geometry (input sizes, output channels, kernel size, groups) is the caller's.
#pragma once
#include <functional>
#include <vector>

#include "cases/layout.h"
#include "stridebench/conv.h"

namespace sb::cases {

enum class ConvOp { Conv, MaxPool, AvgPool };
const char* op_name(ConvOp op);  // "conv2d", "max_pool2d", "avg_pool2d"

struct ConvCase {
  ConvOp op;
  Layout layout;
  Style style;  // Out or Outofplace
};
// The conv's geometry: x [N, C, H, W], weight [cout, C / groups, k, k].
struct ConvGeometry {
  Shape x;
  int64_t cout = 0, k = 3, groups = 1;
};

// Every op of `ops` on its layouts (conv: four; pooling: contiguous and channels_last),
// out and outofplace: op, then layout, then style.
std::vector<ConvCase> conv_cases(const std::vector<ConvOp>& ops);

Conv2dParams conv_params(const ConvGeometry& g);  // stride 1, padding k / 2
// The run name's shape of a conv: the input's NCHW sizes for the table's main geometry
// (3x3, as many output channels as input channels, groups 1), else those sizes then the
// output channels, the kernel size and the groups (NxCxHxWxOxKxG), so that a peer
// rebuilds the same layer from the name (scripts/stridebench/peers/cases.py). Pooling
// (cout 0): the input's sizes.
Shape shape_key(const ConvGeometry& g);
Pool2dParams pool_params();                        // 3x3 / 2, padding 1
MemoryFormat native_format(const ConvCase& c);     // channels-last for channels_last

struct ConvOperands {
  Tensor x, w, out;
};
// make(placement, sizes, role) returns x ('x') or the weight ('w') in that placement,
// in the caller's dtype and device; out (style out) is made here beside x in the native
// format, uninitialized.
ConvOperands conv_operands(const ConvCase& c, const ConvGeometry& g,
                           const std::function<Tensor(const Placement&, const Shape&, char)>& make);
// One call in the case's style; returns the result.
Tensor conv_call(const ConvCase& c, const ConvGeometry& g, ConvOperands& t);

}  // namespace sb::cases
