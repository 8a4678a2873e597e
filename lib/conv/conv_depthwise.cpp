// conv_depthwise.cpp — conv2d as direct loops, for depthwise convs and groups with very
// few channels (conv_cpu sends a conv here when O/G < 4 or C/G*KH*KW < 8): per output
// pixel, a sum over the taps that land inside the input; channels-last depthwise runs
// the channels as the vector dim (Note [Channels-last depthwise]). Any strides of x, w
// and out.
#include <algorithm>

#include "conv/conv_impl.h"
#include "core/vec.h"
#include "matmul/gemm_impl.h"  // detail::Workspace
#include "stridebench/cpu_features.h"
#include "stridebench/parallel.h"

namespace sb::conv_detail {
namespace {

// f(ih, iw, kh, kw) for each tap of output pixel (oh, ow) that lands inside the input.
template <typename F>
inline void for_each_tap(const ConvShape& g, int64_t oh, int64_t ow, const F& f) {
  for (int64_t kh = 0; kh < g.KH; ++kh) {
    const int64_t ih = oh * g.s - g.p + kh * g.d;
    if (ih < 0 || ih >= g.H) continue;
    for (int64_t kw = 0; kw < g.KW; ++kw) {
      const int64_t iw = ow * g.s - g.p + kw * g.d;
      if (iw >= 0 && iw < g.W) f(ih, iw, kh, kw);
    }
  }
}

#ifdef SB_HAVE_AVX2
// Note [Channels-last depthwise]
// A depthwise conv (one input channel per group, one output channel per input channel)
// on channels-last x and out: per output pixel the channels are the vector dim, up to 64
// (8 vectors) per pass over the taps, then one at a time: acc[o] = bias[o] + sum over
// taps of x[ih, iw, o] * wpk[tap][o], the weights and bias repacked once per call as
// [KH][KW][O] and [O] (O * (KH * KW + 1) floats of workspace from the CPU allocator).
// Pixels whose taps all lie inside the row go two at a time, up to 32 channels per pass,
// each weight vector loaded once for both. The generic per-pixel loop (an integer
// division and a strided weight gather per multiply-add) was an order of magnitude
// slower than NCHW (docs/notes/conv.md).
template <int V>
inline void dw_pixel_chunk(float* o, const float* xn, int64_t xh, int64_t xw, const float* wpk, int64_t O,
                           const float* bpk, const ConvShape& g, int64_t oh, int64_t ow, bool relu) {
  using L = vec::Vec<float>;
  L::V acc[V];
  for (int v = 0; v < V; ++v) acc[v] = L::load(bpk + 8 * v);
  for_each_tap(g, oh, ow, [&](int64_t ih, int64_t iw, int64_t kh, int64_t kw) {
    const float* xp = xn + ih * xh + iw * xw;
    const float* wk = wpk + (kh * g.KW + kw) * O;
    for (int v = 0; v < V; ++v) acc[v] = L::fma(L::load(xp + 8 * v), L::load(wk + 8 * v), acc[v]);
  });
  for (int v = 0; v < V; ++v) L::store(o + 8 * v, relu ? L::relu(acc[v]) : acc[v]);
}

// The same for two output pixels ow and ow + 1 whose taps all lie inside the row (no
// column checks), each weight vector loaded once for both; V <= 4 (16 registers).
template <int V>
inline void dw_pair_chunk(float* o0, float* o1, const float* xn, int64_t xh, int64_t xw, const float* wpk, int64_t O,
                          const float* bpk, const ConvShape& g, int64_t oh, int64_t ow, bool relu) {
  using L = vec::Vec<float>;
  L::V a0[V], a1[V];
  for (int v = 0; v < V; ++v) a0[v] = a1[v] = L::load(bpk + 8 * v);
  const int64_t step = g.s * xw;
  for (int64_t kh = 0; kh < g.KH; ++kh) {
    const int64_t ih = oh * g.s - g.p + kh * g.d;
    if (ih < 0 || ih >= g.H) continue;
    const float* xr = xn + ih * xh + (ow * g.s - g.p) * xw;
    for (int64_t kw = 0; kw < g.KW; ++kw) {
      const float* xp = xr + kw * g.d * xw;
      const float* wk = wpk + (kh * g.KW + kw) * O;
      for (int v = 0; v < V; ++v) {
        const L::V wv = L::load(wk + 8 * v);
        a0[v] = L::fma(L::load(xp + 8 * v), wv, a0[v]);
        a1[v] = L::fma(L::load(xp + step + 8 * v), wv, a1[v]);
      }
    }
  }
  for (int v = 0; v < V; ++v) {
    L::store(o0 + 8 * v, relu ? L::relu(a0[v]) : a0[v]);
    L::store(o1 + 8 * v, relu ? L::relu(a1[v]) : a1[v]);
  }
}

// One channel o of one output pixel.
inline float dw_scalar(const float* xn, int64_t xh, int64_t xw, const float* wpk, int64_t O, const float* bpk,
                       const ConvShape& g, int64_t oh, int64_t ow, int64_t o, bool relu) {
  float acc = bpk[o];
  for_each_tap(g, oh, ow, [&](int64_t ih, int64_t iw, int64_t kh, int64_t kw) {
    acc += xn[ih * xh + iw * xw + o] * wpk[(kh * g.KW + kw) * O + o];
  });
  return relu && acc < 0.0f ? 0.0f : acc;
}

// Note [Channels-last depthwise]: x and out with stride 1 along channels, Cg = Og = 1.
void conv_depthwise_nhwc(const ConvShape& g, const Tensor& out, const Tensor& x, const Tensor& w, const Tensor& bias,
                         bool relu) {
  const int64_t O = g.O, taps = g.KH * g.KW;
  Tensor pack = empty({(taps + 1) * O});  // [KH][KW][O] weights, then the bias
  float* wpk = pack.data<float>();
  float* bpk = wpk + taps * O;
  const float* wp = w.data<float>();
  for (int64_t o = 0; o < O; ++o) {
    for (int64_t kh = 0; kh < g.KH; ++kh)
      for (int64_t kw = 0; kw < g.KW; ++kw)
        wpk[(kh * g.KW + kw) * O + o] = wp[o * w.stride(0) + kh * w.stride(2) + kw * w.stride(3)];
    bpk[o] = bias.defined() ? bias.data<float>()[o * bias.stride(0)] : 0.0f;
  }
  const float* xp = x.data<float>();
  float* op = out.data<float>();
  const int64_t xn = x.stride(0), xh = x.stride(2), xw = x.stride(3);
  const int64_t on = out.stride(0), oh_ = out.stride(2), ow_ = out.stride(3);  // channel stride 1
  // pixels whose taps all lie inside the row: ow in [lo, hi), taken two at a time
  const int64_t lo = std::min(g.OW, (g.p + g.s - 1) / g.s);
  const int64_t last = g.W - 1 - (g.KW - 1) * g.d + g.p;  // ow * s <= last
  const int64_t hi = last < 0 ? lo : std::max(lo, std::min(g.OW, last / g.s + 1));
  const int64_t grain = std::max<int64_t>(1, kGrainSize / std::max<int64_t>(1, g.OW * O * taps));
  parallel_for(0, g.N * g.OH, grain, [&](int64_t b, int64_t e) {
    for (int64_t nh = b; nh < e; ++nh) {
      const int64_t n = nh / g.OH, oh = nh % g.OH;
      const float* xim = xp + n * xn;
      for (int64_t ow = 0; ow < g.OW; ++ow) {
        float* opx = op + n * on + oh * oh_ + ow * ow_;
        int64_t o = 0;
        if (ow >= lo && ow + 1 < hi) {  // a pair: ow and ow + 1
          float* opx1 = opx + ow_;
          for (int64_t nv; (nv = std::min<int64_t>(4, (O - o) / 8)) > 0; o += 8 * nv) {
            float *const p0 = opx + o, *const p1 = opx1 + o;
            const float *const xo = xim + o, *const wo = wpk + o, *const bo = bpk + o;
            switch (nv) {
              case 1: dw_pair_chunk<1>(p0, p1, xo, xh, xw, wo, O, bo, g, oh, ow, relu); break;
              case 2: dw_pair_chunk<2>(p0, p1, xo, xh, xw, wo, O, bo, g, oh, ow, relu); break;
              case 3: dw_pair_chunk<3>(p0, p1, xo, xh, xw, wo, O, bo, g, oh, ow, relu); break;
              default: dw_pair_chunk<4>(p0, p1, xo, xh, xw, wo, O, bo, g, oh, ow, relu); break;
            }
          }
          for (; o < O; ++o) {  // the channel tail of both pixels
            opx[o] = dw_scalar(xim, xh, xw, wpk, O, bpk, g, oh, ow, o, relu);
            opx1[o] = dw_scalar(xim, xh, xw, wpk, O, bpk, g, oh, ow + 1, o, relu);
          }
          ++ow;
          continue;
        }
        for (int64_t nv; (nv = std::min<int64_t>(8, (O - o) / 8)) > 0; o += 8 * nv) {  // up to 64 channels a pass
          float* const oo = opx + o;
          const float *const xo = xim + o, *const wo = wpk + o, *const bo = bpk + o;
          switch (nv) {
            case 1: dw_pixel_chunk<1>(oo, xo, xh, xw, wo, O, bo, g, oh, ow, relu); break;
            case 2: dw_pixel_chunk<2>(oo, xo, xh, xw, wo, O, bo, g, oh, ow, relu); break;
            case 3: dw_pixel_chunk<3>(oo, xo, xh, xw, wo, O, bo, g, oh, ow, relu); break;
            case 4: dw_pixel_chunk<4>(oo, xo, xh, xw, wo, O, bo, g, oh, ow, relu); break;
            case 5: dw_pixel_chunk<5>(oo, xo, xh, xw, wo, O, bo, g, oh, ow, relu); break;
            case 6: dw_pixel_chunk<6>(oo, xo, xh, xw, wo, O, bo, g, oh, ow, relu); break;
            case 7: dw_pixel_chunk<7>(oo, xo, xh, xw, wo, O, bo, g, oh, ow, relu); break;
            default: dw_pixel_chunk<8>(oo, xo, xh, xw, wo, O, bo, g, oh, ow, relu); break;
          }
        }
        for (; o < O; ++o) opx[o] = dw_scalar(xim, xh, xw, wpk, O, bpk, g, oh, ow, o, relu);
      }
    }
  });
}
#endif

}  // namespace

void conv_direct(const ConvShape& g, const Tensor& out, const Tensor& x, const Tensor& w, const Tensor& bias, bool relu) {
  const float* xp = x.data<float>();
  const float* wp = w.data<float>();
  const float* bp = bias.defined() ? bias.data<float>() : nullptr;
  float* op = out.data<float>();
  const int64_t xn = x.stride(0), xc = x.stride(1), xh = x.stride(2), xw = x.stride(3);
  const int64_t wo = w.stride(0), wc = w.stride(1), wh = w.stride(2), ww = w.stride(3);
  const int64_t on = out.stride(0), oc = out.stride(1), oh_ = out.stride(2), ow_ = out.stride(3);
  const int64_t bs = bias.defined() ? bias.stride(0) : 0;
  const bool cl = out.suggest_memory_format() == MemoryFormat::ChannelsLast;
  if (!cl) {  // per (n, o) plane, inner loop along OW
    parallel_for(0, g.N * g.O, 1, [&](int64_t b, int64_t e) {
      for (int64_t no = b; no < e; ++no) {
        const int64_t n = no / g.O, o = no % g.O, grp = o / g.Og;
        float* plane = op + n * on + o * oc;
        const float b0 = bp ? bp[o * bs] : 0.0f;
        for (int64_t oh = 0; oh < g.OH; ++oh)
          for (int64_t ow = 0; ow < g.OW; ++ow) plane[oh * oh_ + ow * ow_] = b0;
        for (int64_t ci = 0; ci < g.Cg; ++ci) {
          const float* xpl = xp + n * xn + (grp * g.Cg + ci) * xc;
          for (int64_t kh = 0; kh < g.KH; ++kh)
            for (int64_t kw = 0; kw < g.KW; ++kw) {
              const float wv = wp[o * wo + ci * wc + kh * wh + kw * ww];
              // valid ow: 0 <= ow*s - p + kw*d < W
              const int64_t off = kw * g.d - g.p;
              int64_t lo = off >= 0 ? 0 : (-off + g.s - 1) / g.s;
              int64_t hi = g.W - off <= 0 ? 0 : std::min(g.OW, (g.W - off - 1) / g.s + 1);
              for (int64_t oh = 0; oh < g.OH; ++oh) {
                const int64_t ih = oh * g.s - g.p + kh * g.d;
                if (ih < 0 || ih >= g.H) continue;
                float* orow = plane + oh * oh_;
                const float* xrow = xpl + ih * xh + off * xw;
                if (ow_ == 1 && xw == 1 && g.s == 1)
                  for (int64_t ow = lo; ow < hi; ++ow) orow[ow] += wv * xrow[ow];
                else
                  for (int64_t ow = lo; ow < hi; ++ow) orow[ow * ow_] += wv * xrow[ow * g.s * xw];
              }
            }
        }
        if (relu)
          for (int64_t oh = 0; oh < g.OH; ++oh)
            for (int64_t ow = 0; ow < g.OW; ++ow) {
              float& v = plane[oh * oh_ + ow * ow_];
              v = v < 0.0f ? 0.0f : v;  // NaN stays (Note [Fused relu and NaN] in matmul/gemm_impl.h)
            }
      }
    });
  } else {  // per output pixel, inner loop along output channels
#ifdef SB_HAVE_AVX2
    if (use_avx2() && g.Cg == 1 && g.Og == 1 && xc == 1 && oc == 1) return conv_depthwise_nhwc(g, out, x, w, bias, relu);
#endif
    parallel_for(0, g.N * g.OH, 1, [&](int64_t b, int64_t e) {
      for (int64_t nh = b; nh < e; ++nh) {
        const int64_t n = nh / g.OH, oh = nh % g.OH;
        for (int64_t ow = 0; ow < g.OW; ++ow) {
          float* opx = op + n * on + oh * oh_ + ow * ow_;
          for (int64_t o = 0; o < g.O; ++o) opx[o * oc] = bp ? bp[o * bs] : 0.0f;
          for_each_tap(g, oh, ow, [&](int64_t ih, int64_t iw, int64_t kh, int64_t kw) {
            const float* xpx = xp + n * xn + ih * xh + iw * xw;
            const float* wk = wp + kh * wh + kw * ww;
            for (int64_t ci = 0; ci < g.Cg; ++ci)
              for (int64_t o = 0; o < g.O; ++o)
                opx[o * oc] += xpx[((o / g.Og) * g.Cg + ci) * xc] * wk[o * wo + ci * wc];
          });
          if (relu)
            for (int64_t o = 0; o < g.O; ++o) opx[o * oc] = opx[o * oc] < 0.0f ? 0.0f : opx[o * oc];
        }
      }
    });
  }
}

}  // namespace sb::conv_detail
