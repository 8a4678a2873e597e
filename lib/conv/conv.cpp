// conv.cpp — conv2d: the argument checks, the choice of path and the public API. The
// paths (conv_impl.h): direct loops for depthwise and tiny groups (conv_depthwise.cpp),
// the direct AVX-512 kernel (conv_direct512.cpp), the implicit GEMM (conv_gemm.cpp);
// pooling is in pool.cpp. See conv.h for the paths and costs.
#include "stridebench/conv.h"

#include "conv/conv_impl.h"
#include "stridebench/cpu_features.h"
#ifdef SB_WITH_CUDA
#include "cuda/cuda_backend.h"
#endif

namespace sb {
namespace {

using conv_detail::ConvShape;
using conv_detail::conv_direct;
using conv_detail::conv_direct512;
using conv_detail::conv_gemm;
using conv_detail::direct_ok;

ConvShape conv_shape(const Tensor& x, const Tensor& w, const Tensor& bias, const Conv2dParams& p, const char* op) {
  SB_CHECK(x.defined() && w.defined(), op, ": undefined input or weight");
  SB_CHECK(x.dim() == 4, op, ": expected a 4-D input [N, C, H, W], got ", x.dim(), "-D sizes ", x.sizes());
  SB_CHECK(w.dim() == 4, op, ": expected a 4-D weight [O, C/groups, KH, KW], got ", w.dim(), "-D sizes ", w.sizes());
  SB_CHECK(x.dtype() == DType::Float32 || x.dtype() == DType::Float16 || x.dtype() == DType::BFloat16, op,
           ": expected a float32, float16 or bfloat16 input, got ", x.dtype());
  SB_CHECK(w.dtype() == x.dtype(), op, ": weight dtype ", w.dtype(), " differs from input dtype ", x.dtype());
  SB_CHECK(w.device() == x.device(), op, ": device mismatch: input on ", x.device(), ", weight on ", w.device());
  SB_CHECK(p.stride >= 1 && p.dilation >= 1 && p.padding >= 0 && p.groups >= 1, op,
           ": expected stride >= 1, dilation >= 1, padding >= 0, groups >= 1, got stride ", p.stride, " dilation ",
           p.dilation, " padding ", p.padding, " groups ", p.groups);
  ConvShape g{};
  g.N = x.size(0); g.C = x.size(1); g.H = x.size(2); g.W = x.size(3);
  g.O = w.size(0); g.KH = w.size(2); g.KW = w.size(3);
  g.s = p.stride; g.p = p.padding; g.d = p.dilation; g.G = p.groups;
  SB_CHECK(g.C % g.G == 0, op, ": input channels ", g.C, " not divisible by groups ", g.G);
  SB_CHECK(g.O % g.G == 0, op, ": output channels ", g.O, " not divisible by groups ", g.G);
  g.Cg = g.C / g.G; g.Og = g.O / g.G;
  SB_CHECK(w.size(1) == g.Cg, op, ": weight sizes ", w.sizes(), " expect ", g.Cg, " input channels per group (input ",
           x.sizes(), ", groups ", g.G, ")");
  if (bias.defined()) {
    SB_CHECK(bias.dim() == 1 && bias.size(0) == g.O, op, ": bias must be 1-D of size ", g.O, ", got sizes ",
             bias.sizes());
    SB_CHECK(bias.dtype() == x.dtype(), op, ": bias dtype ", bias.dtype(), " differs from input dtype ", x.dtype());
    SB_CHECK(bias.device() == x.device(), op, ": device mismatch: input on ", x.device(), ", bias on ", bias.device());
  }
  const int64_t eh = g.d * (g.KH - 1) + 1, ew = g.d * (g.KW - 1) + 1;
  SB_CHECK(g.KH >= 1 && g.KW >= 1 && eh <= g.H + 2 * g.p && ew <= g.W + 2 * g.p, op, ": kernel ", g.KH, "x", g.KW,
           " (dilated ", eh, "x", ew, ") is larger than the padded input ", g.H + 2 * g.p, "x", g.W + 2 * g.p);
  g.OH = (g.H + 2 * g.p - eh) / g.s + 1;
  g.OW = (g.W + 2 * g.p - ew) / g.s + 1;
  return g;
}

void conv_cpu(const ConvShape& g, const Tensor& out, const Tensor& x, const Tensor& w, const Tensor& bias, bool relu) {
  const bool nhwc = x.suggest_memory_format() == MemoryFormat::ChannelsLast;
  const MemoryFormat native = nhwc ? MemoryFormat::ChannelsLast : MemoryFormat::Contiguous;
  // The GEMM paths write C with the pixel index folded: out must be dense in the
  // native layout, else compute into a temporary and copy.
  if (g.Og < 4 || g.Cg * g.KH * g.KW < 8) {
    conv_direct(g, out, x, w, bias, relu);  // any out strides
    return;
  }
  Tensor res = out.is_contiguous(native) ? out : empty(out.sizes(), DType::Float32, Device::cpu(), native);
  if (direct_ok(g, x, nhwc))
    conv_direct512(g, res, x, w, bias, relu, nhwc);
  else
    conv_gemm(g, res, x, w, bias, relu, nhwc);
  if (!res.shares_storage_with(out)) Tensor(out).copy_(res);  // a view handle writes into out's storage
}

// Note [16-bit conv through float32]: float16 and bfloat16 convolutions on the CPU, and
// on CUDA in a build without cuDNN, widen x, w and the bias to float32, run the float32
// path and round the result once into out: the float32 path's error plus one rounding,
// at the cost of the copies (there is no 16-bit conv kernel of ours). With cuDNN, CUDA
// takes them as they are (Note [cuDNN conv plans]).
void conv_dispatch(const ConvShape& g, const Tensor& out, const Tensor& x, const Tensor& w, const Tensor& bias,
                   const Conv2dParams& p, bool relu) {
  if (out.numel() == 0) return;
#ifdef SB_WITH_CUDA
#ifdef SB_WITH_CUDNN
  const bool cuda_takes_it = x.device().is_cuda();
#else
  const bool cuda_takes_it = x.device().is_cuda() && x.dtype() == DType::Float32;
#endif
  if (cuda_takes_it) {
    cuda::conv2d(out, x, w, bias, p, relu);
    return;
  }
#endif
  if (x.dtype() != DType::Float32) {
    const Tensor wide = empty(out.sizes(), DType::Float32, out.device(), out.suggest_memory_format());
    conv_dispatch(g, wide, x.to(DType::Float32), w.to(DType::Float32),
                  bias.defined() ? bias.to(DType::Float32) : Tensor(), p, relu);
    Tensor(out).copy_(wide);
    return;
  }
  SB_CHECK(x.device().is_cpu(), "conv2d: no backend for device ", x.device(), " in this build");
  conv_cpu(g, out, x, w, bias, relu);
}

}  // namespace

Shape conv2d_output_sizes(const Tensor& x, const Tensor& w, const Tensor& bias, const Conv2dParams& p) {
  const ConvShape g = conv_shape(x, w, bias, p, "conv2d");
  return {g.N, g.O, g.OH, g.OW};
}

Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor& bias, const Conv2dParams& p, bool relu) {
  const ConvShape g = conv_shape(x, w, bias, p, "conv2d");
  // PyTorch's rule: the output is channels-last when the input or the weight is
  const bool cl = x.suggest_memory_format() == MemoryFormat::ChannelsLast ||
                  w.suggest_memory_format() == MemoryFormat::ChannelsLast;
  Tensor out = empty({g.N, g.O, g.OH, g.OW}, x.dtype(), x.device(), cl ? MemoryFormat::ChannelsLast : MemoryFormat::Contiguous);
  conv_dispatch(g, out, x, w, bias, p, relu);
  return out;
}

Tensor& conv2d_out(Tensor& out, const Tensor& x, const Tensor& w, const Tensor& bias, const Conv2dParams& p,
                   bool relu) {
  const ConvShape g = conv_shape(x, w, bias, p, "conv2d_out");
  const Shape sizes{g.N, g.O, g.OH, g.OW};
  SB_CHECK(out.defined() && out.sizes() == sizes, "conv2d_out: out has sizes ",
           out.defined() ? out.sizes() : Shape{}, ", expected ", sizes);
  SB_CHECK(out.dtype() == x.dtype(), "conv2d_out: out dtype ", out.dtype(), ", expected ", x.dtype());
  SB_CHECK(out.device() == x.device(), "conv2d_out: out on ", out.device(), ", input on ", x.device());
  SB_CHECK(has_internal_overlap(out) != MemOverlap::Yes, "conv2d_out: out has overlapping elements (strides ",
           out.strides(), ")");
  check_disjoint("conv2d_out", out, x, "the input");
  check_disjoint("conv2d_out", out, w, "the weight");
  if (bias.defined()) check_disjoint("conv2d_out", out, bias, "the bias");
  conv_dispatch(g, out, x, w, bias, p, relu);
  return out;
}

}  // namespace sb
