// conv_impl.h — what the conv2d paths share (private to lib/conv): the checked shape of
// one call and the entry of each path. conv.cpp checks the arguments, picks the path
// (Note in conv_cpu) and owns the public API; each path has its own file:
//   conv_depthwise.cpp  direct loops: depthwise and groups with very few channels, any strides
//   conv_gemm.cpp       implicit GEMM: im2col panels packed on the fly into the GEMM driver
//   conv_direct512.cpp  the direct AVX-512 kernel (6 pixels x 64 output channels in registers)
// Every entry writes all of `out`; conv_gemm and conv_direct512 need `out` dense in the
// input's layout (conv_cpu hands them a temporary otherwise).
#pragma once
#include <cstdint>

#include "stridebench/tensor.h"

namespace sb::conv_detail {

// Sizes of one conv2d: input N x C x H x W, weight O x C/G x KH x KW, output OH x OW;
// stride s, padding p, dilation d, groups G with Cg input and Og output channels each.
struct ConvShape {
  int64_t N, C, H, W, O, KH, KW, OH, OW, s, p, d, G, Cg, Og;
};

void conv_direct(const ConvShape& g, const Tensor& out, const Tensor& x, const Tensor& w, const Tensor& bias, bool relu);
void conv_gemm(const ConvShape& g, const Tensor& out, const Tensor& x, const Tensor& w, const Tensor& bias, bool relu,
               bool nhwc);
// Whether the direct AVX-512 kernel takes this conv (false in a build without AVX-512).
bool direct_ok(const ConvShape& g, const Tensor& x, bool nhwc);
void conv_direct512(const ConvShape& g, const Tensor& out, const Tensor& x, const Tensor& w, const Tensor& bias,
                    bool relu, bool nhwc);

}  // namespace sb::conv_detail
