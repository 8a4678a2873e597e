// conv.h — 2-D convolution and pooling, NCHW and channels-last (NHWC strides).
//
//   conv2d(x, w, bias, params, relu)   x [N, C, H, W], w [O, C/groups, KH, KW], bias [O]
//                                      or an undefined Tensor; relu fused in the epilogue.
//                                      Output [N, O, OH, OW], channels-last when x or w
//                                      is (PyTorch's rule), else contiguous.
//                                      OH = (H + 2*pad - dil*(KH-1) - 1) / stride + 1.
//   conv2d_out(out, ...)               out of those sizes, any non-overlapping strides
//                                      (computed in place when out is dense in the
//                                      path's native layout, else through a temporary).
//   max_pool2d / avg_pool2d            kernel, stride, padding (avg counts the padding,
//                                      PyTorch's count_include_pad=True), either layout;
//                                      output in x.suggest_memory_format(). NaN
//                                      propagates through max and avg, as in PyTorch.
//   max_pool2d_out / avg_pool2d_out    out= style: out of those sizes, float32, any
//                                      non-overlapping strides, not overlapping x.
//                                      (In place is impossible: the sizes change.)
// Pooling loops (Note [Pooling kernels] in pool.cpp): per plane (with AVX-512, rows of unit
// stride and a 3x3 / 2, 2x2 / 2 or 3x3 / 1 window, 16 outputs of a row at a time in
// registers, Note [Pooling rows in zmm]; else a vertical pass into a padded row buffer,
// then a horizontal pass at stride s, 8-wide for unit-stride rows and s <= 2) unless x
// has channels innermost, then per output pixel with the window's
// channel runs reduced in registers; on CUDA one thread per output element through
// both tensors' strides (Note [CUDA pooling] in conv.cu). Cost: x read once, out written
// once.
// Paths (float32; weights and bias of any strides):
//   NCHW   implicit GEMM per (image, group): C[O_g, OH*OW] = W_g[O_g, C_g*KH*KW] x
//          im2col[C_g*KH*KW, OH*OW], the im2col panels packed straight from x (no column
//          buffer); images run in parallel when there are enough of them.
//   NHWC   implicit GEMM over all pixels: C[N*OH*OW, O_g] = im2col[N*OH*OW, KH*KW*C_g] x
//          W_g^T, A panels gathered from x's contiguous channel runs (1x1: a plain GEMM).
//   direct AVX-512 (SimdLevel::AVX512, KH*KW <= 64; Note [Direct AVX-512 conv]): taken
//          instead of both GEMM paths: 6-pixel x 64-channel register tiles read
//          channels-last x in place; NCHW x is transposed per (image, group) into a
//          channels-last buffer (no padding: edge pixels skip their outside taps), and
//          blocks of output rows go through a per-thread channels-last buffer that one
//          tile transpose writes into the NCHW output (Note [NCHW through the
//          channels-last kernel] in conv.cpp).
//   direct depthwise / few channels per group (C_g*KH*KW or O_g tiny): NCHW plain loops
//          along OW (compiler-vectorised at stride 1); NHWC depthwise (C_g = O_g = 1,
//          x and out of unit channel stride) with AVX2 up to 64 channels in registers
//          per pixel over the taps (Note [Channels-last depthwise]); other NHWC cases a
//          scalar per-pixel loop.
// Cost: 2*N*O*OH*OW*C_g*KH*KW flop; x and w read once (plus packing), out written once.
// Workspace: the GEMM packing buffers (Note [GEMM workspace]) per thread, from cpu_allocator();
// NHWC depthwise: its weights and bias repacked, O * (KH*KW + 1) floats;
// the direct path: its packed weights (O_g rounded to 64 x C_g*KH*KW per group) and, for
// NCHW, one (image, group) of x channels-last (C_g*H*W floats) and per thread a block of
// output rows (6*OW*O_g floats).
// dtypes: float32, float16 and bfloat16 (x, weight, bias and out of one dtype). The CPU
// paths below compute float32; float16 and bfloat16 go through float32 copies rounded
// once into out (Note [16-bit conv through float32] in conv.cpp).
// CUDA inputs go to sb::cuda::conv2d after the same checks: cuDNN's graph API in every
// dtype where the build has cuDNN (Note [cuDNN conv plans]), else im2col + cuBLAS in
// float32.
#pragma once
#include "stridebench/tensor.h"

namespace sb {

struct Conv2dParams {
  int64_t stride = 1;
  int64_t padding = 0;
  int64_t dilation = 1;
  int64_t groups = 1;
};

Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor& bias = Tensor(), const Conv2dParams& p = {},
              bool relu = false);
Tensor& conv2d_out(Tensor& out, const Tensor& x, const Tensor& w, const Tensor& bias = Tensor(),
                   const Conv2dParams& p = {}, bool relu = false);
// The output sizes conv2d would give (after all checks).
Shape conv2d_output_sizes(const Tensor& x, const Tensor& w, const Tensor& bias, const Conv2dParams& p);

struct Pool2dParams {
  int64_t kernel = 2;
  int64_t stride = 0;   // 0: = kernel
  int64_t padding = 0;  // at most kernel / 2
};
Tensor max_pool2d(const Tensor& x, const Pool2dParams& p);
Tensor avg_pool2d(const Tensor& x, const Pool2dParams& p);
Tensor& max_pool2d_out(Tensor& out, const Tensor& x, const Pool2dParams& p);
Tensor& avg_pool2d_out(Tensor& out, const Tensor& x, const Pool2dParams& p);

}  // namespace sb
