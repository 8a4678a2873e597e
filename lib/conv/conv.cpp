// conv.cpp — conv2d (implicit GEMM in NCHW and NHWC, direct loops for depthwise/tiny
// groups); pooling is in pool.cpp. See conv.h for the paths and costs.
#include "stridebench/conv.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/scratch.h"
#include "matmul/gemm_impl.h"
#include "core/transpose_tile.h"
#ifdef SB_WITH_CUDA
#include "cuda/cuda_backend.h"
#endif

namespace sb {
namespace {

using detail::kNRf;

struct ConvShape {
  int64_t N, C, H, W, O, KH, KW, OH, OW, s, p, d, G, Cg, Og;
};

ConvShape conv_shape(const Tensor& x, const Tensor& w, const Tensor& bias, const Conv2dParams& p, const char* op) {
  SB_CHECK(x.defined() && w.defined(), op, ": undefined input or weight");
  SB_CHECK(x.dim() == 4, op, ": expected a 4-D input [N, C, H, W], got ", x.dim(), "-D sizes ", x.sizes());
  SB_CHECK(w.dim() == 4, op, ": expected a 4-D weight [O, C/groups, KH, KW], got ", w.dim(), "-D sizes ", w.sizes());
  SB_CHECK(x.dtype() == DType::Float32, op, ": expected a float32 input, got ", x.dtype());
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

// ---- direct kernel: depthwise and groups with very few channels ----
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
  __m256 acc[V];
  for (int v = 0; v < V; ++v) acc[v] = _mm256_loadu_ps(bpk + 8 * v);
  for_each_tap(g, oh, ow, [&](int64_t ih, int64_t iw, int64_t kh, int64_t kw) {
    const float* xp = xn + ih * xh + iw * xw;
    const float* wk = wpk + (kh * g.KW + kw) * O;
    for (int v = 0; v < V; ++v) acc[v] = _mm256_fmadd_ps(_mm256_loadu_ps(xp + 8 * v), _mm256_loadu_ps(wk + 8 * v), acc[v]);
  });
  for (int v = 0; v < V; ++v) _mm256_storeu_ps(o + 8 * v, relu ? _mm256_max_ps(acc[v], _mm256_setzero_ps()) : acc[v]);
}

// The same for two output pixels ow and ow + 1 whose taps all lie inside the row (no
// column checks), each weight vector loaded once for both; V <= 4 (16 registers).
template <int V>
inline void dw_pair_chunk(float* o0, float* o1, const float* xn, int64_t xh, int64_t xw, const float* wpk, int64_t O,
                          const float* bpk, const ConvShape& g, int64_t oh, int64_t ow, bool relu) {
  __m256 a0[V], a1[V];
  for (int v = 0; v < V; ++v) a0[v] = a1[v] = _mm256_loadu_ps(bpk + 8 * v);
  const int64_t step = g.s * xw;
  for (int64_t kh = 0; kh < g.KH; ++kh) {
    const int64_t ih = oh * g.s - g.p + kh * g.d;
    if (ih < 0 || ih >= g.H) continue;
    const float* xr = xn + ih * xh + (ow * g.s - g.p) * xw;
    for (int64_t kw = 0; kw < g.KW; ++kw) {
      const float* xp = xr + kw * g.d * xw;
      const float* wk = wpk + (kh * g.KW + kw) * O;
      for (int v = 0; v < V; ++v) {
        const __m256 wv = _mm256_loadu_ps(wk + 8 * v);
        a0[v] = _mm256_fmadd_ps(_mm256_loadu_ps(xp + 8 * v), wv, a0[v]);
        a1[v] = _mm256_fmadd_ps(_mm256_loadu_ps(xp + step + 8 * v), wv, a1[v]);
      }
    }
  }
  const __m256 z = _mm256_setzero_ps();
  for (int v = 0; v < V; ++v) {
    _mm256_storeu_ps(o0 + 8 * v, relu ? _mm256_max_ps(a0[v], z) : a0[v]);
    _mm256_storeu_ps(o1 + 8 * v, relu ? _mm256_max_ps(a1[v], z) : a1[v]);
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
              v = v > 0.0f ? v : 0.0f;
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
            for (int64_t o = 0; o < g.O; ++o) opx[o * oc] = opx[o * oc] > 0.0f ? opx[o * oc] : 0.0f;
        }
      }
    });
  }
}

// Panel packer for the NCHW im2col matrix B[k = (c, kh, kw), j = (oh, ow)] of one image
// and group; columns in one output row are copied as contiguous runs with the padding
// zeroed (Note: the fast loop needs stride 1 and unit W stride).
struct Im2colNchw {
  const ConvShape* g;
  const float* x;  // image n, first channel of the group
  int64_t xc, xh, xw;
  void operator()(float* dst, int64_t p0, int64_t kc, int64_t j0, int64_t nc) const {
    const ConvShape& G = *g;
    const int64_t khw = G.KH * G.KW;
    const bool avx2 = use_avx2();
    (void)avx2;
#ifdef SB_HAVE_AVX2
    if (avx2 && G.s == 1 && xw == 1 && khw <= kMaxTaps) return pack_unit(dst, p0, kc, j0, nc);
#endif
    for (int64_t jp = 0; jp < nc; jp += kNRf, dst += kNRf * kc)
      pack_panel(dst, p0, kc, j0 + jp, static_cast<int>(std::min<int64_t>(kNRf, nc - jp)));
  }

  // One 16-column panel (columns jcol .. jcol + nr - 1, zero past nr), any geometry.
  void pack_panel(float* dst, int64_t p0, int64_t kc, int64_t jcol, int nr) const {
    const ConvShape& G = *g;
    const int64_t khw = G.KH * G.KW;
    const bool avx2 = use_avx2();
    (void)avx2;
    {  // segments of columns sharing one output row
      int seg_q[kNRf + 1];
      int64_t seg_oh[kNRf], seg_ow[kNRf];
      int nseg = 0;
      for (int q = 0; q < nr;) {
        const int64_t j = jcol + q, oh = j / G.OW, ow = j % G.OW;
        const int len = static_cast<int>(std::min<int64_t>(nr - q, G.OW - ow));
        seg_q[nseg] = q; seg_oh[nseg] = oh; seg_ow[nseg] = ow;
        ++nseg;
        q += len;
      }
      seg_q[nseg] = nr;
      int64_t c = p0 / khw, kh = (p0 % khw) / G.KW, kw = p0 % G.KW;
      for (int64_t k = 0; k < kc; ++k) {
        float* d = dst + k * kNRf;
        const float* xcp = x + c * xc;
        for (int sgi = 0; sgi < nseg; ++sgi) {
          const int q0 = seg_q[sgi], q1 = seg_q[sgi + 1];
          const int64_t ih = seg_oh[sgi] * G.s - G.p + kh * G.d;
          if (ih < 0 || ih >= G.H) {
            for (int q = q0; q < q1; ++q) d[q] = 0.0f;
            continue;
          }
          const int64_t iw0 = seg_ow[sgi] * G.s - G.p + kw * G.d;  // iw of column q0
          const float* row = xcp + ih * xh;
          if (G.s == 1 && xw == 1) {
            // valid q: 0 <= iw0 + (q - q0) < W
            const int lo = static_cast<int>(std::max<int64_t>(q0, std::min<int64_t>(q1, q0 - iw0)));
            const int hi = static_cast<int>(std::max<int64_t>(lo, std::min<int64_t>(q1, q0 + G.W - iw0)));
            const float* src = row + iw0 - q0;
#ifdef SB_HAVE_AVX2
            if (lo == 0 && hi == kNRf && avx2) {  // the whole panel row from one input row
              _mm256_storeu_ps(d, _mm256_loadu_ps(src));
              _mm256_storeu_ps(d + 8, _mm256_loadu_ps(src + 8));
              continue;
            }
#endif
            for (int q = q0; q < lo; ++q) d[q] = 0.0f;
            for (int q = lo; q < hi; ++q) d[q] = src[q];
            for (int q = hi; q < q1; ++q) d[q] = 0.0f;
          } else {
            for (int q = q0; q < q1; ++q) {
              const int64_t iw = iw0 + (q - q0) * G.s;
              d[q] = (iw >= 0 && iw < G.W) ? row[iw * xw] : 0.0f;
            }
          }
        }
        for (int q = nr; q < kNRf; ++q) d[q] = 0.0f;
        if (++kw == G.KW) { kw = 0; if (++kh == G.KH) { kh = 0; ++c; } }
      }
    }
  }

#ifdef SB_HAVE_AVX2
  static constexpr int64_t kMaxTaps = 64;
  // Stride 1, unit W stride: per panel, each tap's (kh, kw) source offset and valid
  // column range per output-row segment are worked out once, so a k row is a table
  // lookup and (in the common case of 16 columns from one input row) two vector moves.
  void pack_unit(float* dst, int64_t p0, int64_t kc, int64_t j0, int64_t nc) const {
    const ConvShape& G = *g;
    const int64_t khw = G.KH * G.KW;
    int64_t off[kMaxTaps][2];
    int lo[kMaxTaps][2], hi[kMaxTaps][2];
    bool full[kMaxTaps];
    for (int64_t jp = 0; jp < nc; jp += kNRf, dst += kNRf * kc) {
      const int nr = static_cast<int>(std::min<int64_t>(kNRf, nc - jp));
      int seg_q[3], nseg = 0;
      int64_t seg_oh[2], seg_ow[2];
      bool generic = false;
      for (int q = 0; q < nr;) {
        if (nseg == 2) { generic = true; break; }  // a panel over three output rows (OW < 16)
        const int64_t j = j0 + jp + q, oh = j / G.OW, ow = j % G.OW;
        seg_q[nseg] = q; seg_oh[nseg] = oh; seg_ow[nseg] = ow;
        ++nseg;
        q += static_cast<int>(std::min<int64_t>(nr - q, G.OW - ow));
      }
      if (generic) {  // rare: the general packer for this panel alone
        pack_panel(dst, p0, kc, j0 + jp, nr);
        continue;
      }
      seg_q[nseg] = nr;
      for (int64_t t = 0; t < khw; ++t) {
        const int64_t kh = t / G.KW, kw = t % G.KW;
        for (int sg = 0; sg < nseg; ++sg) {
          const int q0 = seg_q[sg], q1 = seg_q[sg + 1];
          const int64_t ih = seg_oh[sg] - G.p + kh * G.d, iw0 = seg_ow[sg] - G.p + kw * G.d;
          if (ih < 0 || ih >= G.H) { lo[t][sg] = hi[t][sg] = q1; off[t][sg] = 0; continue; }
          lo[t][sg] = static_cast<int>(std::max<int64_t>(q0, std::min<int64_t>(q1, q0 - iw0)));
          hi[t][sg] = static_cast<int>(std::max<int64_t>(lo[t][sg], std::min<int64_t>(q1, q0 + G.W - iw0)));
          off[t][sg] = ih * xh + iw0 - q0;
        }
        full[t] = nseg == 1 && nr == kNRf && lo[t][0] == 0 && hi[t][0] == kNRf;
      }
      int64_t c = p0 / khw, t = p0 % khw;
      for (int64_t k = 0; k < kc; ++k) {
        float* d = dst + k * kNRf;
        const float* xcp = x + c * xc;
        if (full[t]) {
          const float* src = xcp + off[t][0];
          _mm256_storeu_ps(d, _mm256_loadu_ps(src));
          _mm256_storeu_ps(d + 8, _mm256_loadu_ps(src + 8));
        } else {
          for (int sg = 0; sg < nseg; ++sg) {
            const int q0 = seg_q[sg], q1 = seg_q[sg + 1], l = lo[t][sg], h = hi[t][sg];
            const float* src = xcp + off[t][sg];
            for (int q = q0; q < l; ++q) d[q] = 0.0f;
            for (int q = l; q < h; ++q) d[q] = src[q];
            for (int q = h; q < q1; ++q) d[q] = 0.0f;
          }
          for (int q = nr; q < kNRf; ++q) d[q] = 0.0f;
        }
        if (++t == khw) { t = 0; ++c; }
      }
    }
  }
#endif
};

// Panel packer for the NHWC im2col matrix A[m = (n, oh, ow), k = (kh, kw, c)] of one
// group: each row's channel runs are contiguous in x.
struct Im2colNhwc {
  const ConvShape* g;
  const float* x;  // first channel of the group
  int64_t xn, xc, xh, xw;
  void operator()(float* dst, int64_t i0, int64_t mc, int64_t p0, int64_t kc, int MR) const {
#ifdef SB_HAVE_AVX2
    if (xc == 1 && use_avx2()) return pack_tiled(dst, i0, mc, p0, kc, MR);
#endif
    pack_rows(dst, i0, mc, p0, kc, MR);
  }

#ifdef SB_HAVE_AVX2
  // Note [NHWC im2col by transposes]: within one tap (kh, kw) and one output row, the
  // panel's consecutive pixels read channel runs that sit a fixed s*xw apart in x, so
  // that block (run channels x pixels) goes through the AVX2 8x8 transposes into the
  // MR-interleaved panel instead of MR-strided scalar stores; padded pixels are zeroed.
  void pack_tiled(float* dst, int64_t i0, int64_t mc, int64_t p0, int64_t kc, int MR) const {
    const ConvShape& G = *g;
    const int64_t kwc = G.KW * G.Cg;
    int seg_r[detail::kMRmax + 1];
    int64_t seg_n[detail::kMRmax], seg_oh[detail::kMRmax], seg_ow[detail::kMRmax];
    for (int64_t ip = 0; ip < mc; ip += MR, dst += MR * kc) {
      const int mr = static_cast<int>(std::min<int64_t>(MR, mc - ip));
      int nseg = 0;
      for (int r = 0; r < mr;) {  // segments of pixels in one output row
        const int64_t m = i0 + ip + r, pix = m % (G.OH * G.OW), ow = pix % G.OW;
        seg_r[nseg] = r; seg_n[nseg] = m / (G.OH * G.OW); seg_oh[nseg] = pix / G.OW; seg_ow[nseg] = ow;
        ++nseg;
        r += static_cast<int>(std::min<int64_t>(mr - r, G.OW - ow));
      }
      seg_r[nseg] = mr;
      int64_t k = 0;
      while (k < kc) {
        const int64_t kk = p0 + k, kh = kk / kwc, kw = (kk % kwc) / G.Cg, c = kk % G.Cg;
        const int64_t run = std::min(kc - k, G.Cg - c);
        float* d = dst + k * MR;
        auto zero_rows = [&](int r0, int r1) {
          for (int64_t t = 0; t < run; ++t)
            for (int r = r0; r < r1; ++r) d[t * MR + r] = 0.0f;
        };
        for (int sg = 0; sg < nseg; ++sg) {
          const int r0 = seg_r[sg], r1 = seg_r[sg + 1];
          const int64_t ih = seg_oh[sg] * G.s - G.p + kh * G.d;
          if (ih < 0 || ih >= G.H) { zero_rows(r0, r1); continue; }
          const int64_t iw0 = seg_ow[sg] * G.s - G.p + kw * G.d;  // iw of row r0; row r adds (r - r0)*s
          // valid rows: 0 <= iw0 + (r - r0)*s < W
          int lo = r0, hi = r1;
          while (lo < hi && iw0 + (lo - r0) * G.s < 0) ++lo;
          while (hi > lo && iw0 + (hi - 1 - r0) * G.s >= G.W) --hi;
          zero_rows(r0, lo);
          zero_rows(hi, r1);
          if (hi > lo) {
            const float* src = x + seg_n[sg] * xn + ih * xh + (iw0 + (lo - r0) * G.s) * xw + c;
            detail::transpose_tile_f32(d + lo, MR, src, G.s * xw, run, hi - lo);
          }
        }
        k += run;
      }
      for (int r = mr; r < MR; ++r)
        for (int64_t kq = 0; kq < kc; ++kq) dst[kq * MR + r] = 0.0f;
    }
  }
#endif

  void pack_rows(float* dst, int64_t i0, int64_t mc, int64_t p0, int64_t kc, int MR) const {
    const ConvShape& G = *g;
    const int64_t kwc = G.KW * G.Cg;
    for (int64_t ip = 0; ip < mc; ip += MR, dst += MR * kc) {
      const int mr = static_cast<int>(std::min<int64_t>(MR, mc - ip));
      for (int r = 0; r < mr; ++r) {
        const int64_t m = i0 + ip + r, n = m / (G.OH * G.OW), pix = m % (G.OH * G.OW);
        const int64_t ih0 = (pix / G.OW) * G.s - G.p, iw0 = (pix % G.OW) * G.s - G.p;
        const float* xb = x + n * xn;
        int64_t k = 0;
        while (k < kc) {
          const int64_t kk = p0 + k, kh = kk / kwc, kw = (kk % kwc) / G.Cg, c = kk % G.Cg;
          const int64_t run = std::min(kc - k, G.Cg - c);
          const int64_t ih = ih0 + kh * G.d, iw = iw0 + kw * G.d;
          float* d = dst + k * MR + r;
          if (ih < 0 || ih >= G.H || iw < 0 || iw >= G.W) {
            for (int64_t t = 0; t < run; ++t) d[t * MR] = 0.0f;
          } else {
            const float* src = xb + ih * xh + iw * xw + c * xc;
            if (xc == 1) for (int64_t t = 0; t < run; ++t) d[t * MR] = src[t];
            else for (int64_t t = 0; t < run; ++t) d[t * MR] = src[t * xc];
          }
          k += run;
        }
      }
      for (int r = mr; r < MR; ++r)
        for (int64_t k = 0; k < kc; ++k) dst[k * MR + r] = 0.0f;
    }
  }
};

// Weight element offsets along k for one output channel: koff[k] for the k order of
// the path (NCHW: (c, kh, kw); NHWC: (kh, kw, c)).
void weight_koff(const ConvShape& g, const Tensor& w, bool nhwc, int64_t* koff) {
  const int64_t wc = w.stride(1), wh = w.stride(2), ww = w.stride(3);
  int64_t k = 0;
  if (!nhwc) {
    for (int64_t c = 0; c < g.Cg; ++c)
      for (int64_t kh = 0; kh < g.KH; ++kh)
        for (int64_t kw = 0; kw < g.KW; ++kw) koff[k++] = c * wc + kh * wh + kw * ww;
  } else {
    for (int64_t kh = 0; kh < g.KH; ++kh)
      for (int64_t kw = 0; kw < g.KW; ++kw)
        for (int64_t c = 0; c < g.Cg; ++c) koff[k++] = c * wc + kh * wh + kw * ww;
  }
}

void conv_gemm(const ConvShape& g, const Tensor& out, const Tensor& x, const Tensor& w, const Tensor& bias, bool relu,
               bool nhwc) {
  const int64_t K = g.Cg * g.KH * g.KW;
  detail::Workspace koff_ws(K * sizeof(int64_t));
  int64_t* koff = koff_ws.as<int64_t>();
  weight_koff(g, w, nhwc, koff);
  const float* xp = x.data<float>();
  const float* wp = w.data<float>();
  float* op = out.data<float>();
  const int64_t xn = x.stride(0), xc = x.stride(1), xh = x.stride(2), xw = x.stride(3);
  const int64_t wo = w.stride(0);
  GemmEpilogue ep;
  ep.relu = relu;
  ep.bias_stride = bias.defined() ? bias.stride(0) : 1;
  const bool one_by_one = g.KH == 1 && g.KW == 1 && g.s == 1 && g.p == 0;
  if (nhwc) {
    // C[m, o] over all N*OH*OW pixels (out is channels-last dense: pixel m at m*O).
    for (int64_t grp = 0; grp < g.G; ++grp) {
      const float* xg = xp + grp * g.Cg * xc;
      const float* wg = wp + grp * g.Og * wo;
      ep.bias = bias.defined() ? bias.data<float>() + grp * g.Og * ep.bias_stride : nullptr;
      ep.bias_per_row = false;
      auto pack_b = [&](float* dst, int64_t p0, int64_t kc, int64_t j0, int64_t nc) {
        for (int64_t jp = 0; jp < nc; jp += kNRf, dst += kNRf * kc) {
          const int nr = static_cast<int>(std::min<int64_t>(kNRf, nc - jp));
          for (int64_t k = 0; k < kc; ++k) {
            const float* src = wg + koff[p0 + k] + (j0 + jp) * wo;
            for (int q = 0; q < nr; ++q) dst[k * kNRf + q] = src[q * wo];
            for (int q = nr; q < kNRf; ++q) dst[k * kNRf + q] = 0.0f;
          }
        }
      };
      float* cg = op + grp * g.Og * out.stride(1);
      const int64_t M = g.N * g.OH * g.OW;
      if (one_by_one && xh == g.W * xw && xn == g.H * xh) {  // pixels fold: a plain strided GEMM
        detail::gemm_driver<float>(
            M, g.Og, K,
            [&](float* dst, int64_t i0, int64_t mc, int64_t p0, int64_t kc, int MR) {
              detail::pack_a_strided<float>(dst, xg, xw, xc, i0, mc, p0, kc, MR);
            },
            pack_b, cg, out.stride(3), out.stride(1), ep);
      } else {
        Im2colNhwc pa{&g, xg, xn, xc, xh, xw};
        detail::gemm_driver<float>(M, g.Og, K, pa, pack_b, cg, out.stride(3), out.stride(1), ep);
      }
    }
    return;
  }
  // NCHW: per (image, group) C[o, j] = W_g[o, k] x im2col[k, j]; images in parallel.
  const int64_t units = g.N * g.G;
  const bool outer = units >= detail::team_size() && detail::team_size() > 1;
  auto one = [&](int64_t u) {
    const int64_t n = u / g.G, grp = u % g.G;
    const float* xg = xp + n * xn + grp * g.Cg * xc;
    const float* wg = wp + grp * g.Og * wo;
    GemmEpilogue e2 = ep;
    e2.bias = bias.defined() ? bias.data<float>() + grp * g.Og * ep.bias_stride : nullptr;
    e2.bias_per_row = true;
    auto pack_a = [&](float* dst, int64_t i0, int64_t mc, int64_t p0, int64_t kc, int MR) {
      for (int64_t ip = 0; ip < mc; ip += MR, dst += MR * kc) {
        const int mr = static_cast<int>(std::min<int64_t>(MR, mc - ip));
        for (int r = 0; r < MR; ++r) {
          if (r >= mr) { for (int64_t k = 0; k < kc; ++k) dst[k * MR + r] = 0.0f; continue; }
          const float* row = wg + (i0 + ip + r) * wo;
          for (int64_t k = 0; k < kc; ++k) dst[k * MR + r] = row[koff[p0 + k]];
        }
      }
    };
    float* cg = op + n * out.stride(0) + grp * g.Og * out.stride(1);
    const int64_t N = g.OH * g.OW;
    if (one_by_one && xh == g.W * xw) {
      detail::gemm_driver<float>(
          g.Og, N, K, pack_a,
          [&](float* dst, int64_t p0, int64_t kc, int64_t j0, int64_t nc) {
            detail::pack_b_strided<float, kNRf>(dst, xg, xc, xw, p0, kc, j0, nc);
          },
          cg, out.stride(1), out.stride(3), e2);
    } else {
      Im2colNchw pb{&g, xg, xc, xh, xw};
      detail::gemm_driver<float>(g.Og, N, K, pack_a, pb, cg, out.stride(1), out.stride(3), e2);
    }
  };
  if (outer)
    parallel_for(0, units, 1, [&](int64_t b, int64_t e) { for (int64_t u = b; u < e; ++u) one(u); });
  else
    for (int64_t u = 0; u < units; ++u) one(u);
}

// ---- direct AVX-512 kernel (Note [Direct AVX-512 conv]) ----
// Note [Direct AVX-512 conv]: the implicit-GEMM paths pack every im2col element once
// and use it for only O_g/16 micro-tiles; at 64 output channels perf put the packing at
// 27 % (NHWC) and 38 % (NCHW) of conv2d's time. This kernel reads channels-last x in
// place instead: a tile is 6 pixels of one output row x up to 64 output channels (4 zmm
// per pixel, 24 accumulators); per (tap, c) 4 weight loads and 6 broadcasts from the 6
// pixels' channel runs, which sit a fixed s*xw apart (10 loads per 24 FMAs; the GEMM
// tile has 17 per 16). Taps whose input row is padding are left out of a row's tap
// list; pixels whose taps reach into the left/right padding run one at a time with
// their own tap list. Weights are repacked once per call as [tap][c][64 channels].
// NCHW x takes the same kernel (Note [NCHW through the channels-last kernel]). A direct
// NCHW kernel (16 channels x 16 pixels of a row, one masked row load and 16 weight
// broadcasts per (c, tap)) was slower: row loads split across cache lines and 16
// broadcasts per load tie up the load ports (docs/notes/gemm.md).
// Note [NCHW through the channels-last kernel]: each (image, group) of an NCHW x is
// first transposed into a channels-last buffer (H*W*C_g floats, 0.8 MB at 64x56x56,
// about L2), then its output rows run exactly as NHWC ones do (interior tiles of 6
// pixels, edge columns through edges()), in blocks of at most kRowsTile rows (as many
// blocks as a multiple of the threads, of near-equal height) into a per-thread
// channels-last buffer (6*OW*O_g floats, 86 KB), which one transpose_tile_f32 writes
// into the NCHW output. The staging prefetches the next row's C_g short runs (too many
// streams for the hardware prefetchers), and each block prefetches its output lines for
// writing while its rows compute. A zero-padded buffer and scattered output stores were
// slower (docs/notes/gemm.md, NCHW conv2d on the AMD EPYC VM).
#if defined(SB_HAVE_AVX2) && defined(SB_HAVE_AVX512)
constexpr int kMaxDirectTaps = 64;
constexpr int kCoTile = 64;  // output channels per tile (4 zmm)
constexpr int kRowsTile = 6;

// R pixels x NZ zmm of output channels. tp[j]: channel 0 of the first pixel's input for
// tap j; the pixels are rs floats apart; wp: [T][Cg][64]. out: the first pixel's first
// channel; pixels ows apart; channels contiguous.
template <int R, int NZ>
__attribute__((target("avx512f"))) void conv_tile(int ntap, const float* const* tp, int64_t delta, const int* tw,
                                                  int64_t Cg, int64_t rs, const float* wp, const float* bias,
                                                  bool relu, float* out, int64_t ows, __mmask16 last) {
  __m512 acc[R][NZ];
#pragma GCC unroll 6
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int z = 0; z < NZ; ++z) acc[r][z] = _mm512_setzero_ps();
  const int64_t rs3 = 3 * rs;
  for (int j = 0; j < ntap; ++j) {
    const float* x0 = tp[j] + delta;  // pixels 0, 1, 2 at x0 + {0, 1, 2}*rs
    const float* x3 = x0 + rs3;       // pixels 3, 4, 5 at x3 + {0, 1, 2}*rs
    const float* w = wp + tw[j] * Cg * kCoTile;
#pragma GCC unroll 2
    for (int64_t c = 0; c < Cg; ++c, w += kCoTile) {
      __m512 wv[NZ];
#pragma GCC unroll 4
      for (int z = 0; z < NZ; ++z) wv[z] = _mm512_loadu_ps(w + 16 * z);
#pragma GCC unroll 6
      for (int r = 0; r < R; ++r) {
        const __m512 a = _mm512_set1_ps(((r < 3 ? x0 : x3) + (r % 3) * rs)[c]);
#pragma GCC unroll 4
        for (int z = 0; z < NZ; ++z) acc[r][z] = _mm512_fmadd_ps(a, wv[z], acc[r][z]);
      }
    }
  }
  const __m512 zero = _mm512_setzero_ps();
#pragma GCC unroll 6
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int z = 0; z < NZ; ++z) {
      __m512 v = _mm512_add_ps(acc[r][z], _mm512_loadu_ps(bias + 16 * z));
      if (relu) v = _mm512_mask_max_ps(v, 0xFFFF, v, zero);  // not _mm512_max_ps: GCC 12 false positive
      const __mmask16 m = z == NZ - 1 ? last : __mmask16(0xFFFF);
      _mm512_mask_storeu_ps(out + r * ows + 16 * z, m, v);
    }
}

using ConvTileFn = void (*)(int, const float* const*, int64_t, const int*, int64_t, int64_t, const float*,
                            const float*, bool, float*, int64_t, __mmask16);
template <int R>
ConvTileFn tile_fn_nz(int nz) {
  return nz == 1 ? conv_tile<R, 1> : nz == 2 ? conv_tile<R, 2> : nz == 3 ? conv_tile<R, 3> : conv_tile<R, 4>;
}
ConvTileFn tile_fn(int rows, int nz) {
  switch (rows) {
    case 1: return tile_fn_nz<1>(nz);
    case 2: return tile_fn_nz<2>(nz);
    case 3: return tile_fn_nz<3>(nz);
    case 4: return tile_fn_nz<4>(nz);
    case 5: return tile_fn_nz<5>(nz);
    default: return tile_fn_nz<6>(nz);
  }
}

// Whether the direct kernel takes this conv: AVX-512, channels-last x with unit channel
// stride or NCHW x (staged).
bool direct_ok(const ConvShape& g, const Tensor& x, bool nhwc) {
  if (!use_avx512() || g.KH * g.KW > kMaxDirectTaps) return false;
  return !nhwc || x.stride(1) == 1;
}

// Output rows of one (image, group) from channels-last input xg (channel 0 of the
// group; strides xh, xw): operator() runs one row's interior pixels; the edge pixels,
// whose taps reach into the left/right padding, go column by column across a block of
// rows (edges(), Note [Edge columns by rows]).
struct DirectRow {
  const ConvShape& g;
  const float* wpk;   // [group][block][T][Cg][64]
  const float* bpad;  // [group][blocks*64]
  bool relu;
  int64_t nblk;

  // Output columns [lo, hi) have every kw tap inside the input row.
  std::pair<int64_t, int64_t> interior() const {
    const int64_t ew = g.d * (g.KW - 1);
    const int64_t lo = std::min<int64_t>((g.p + g.s - 1) / g.s, g.OW);
    const int64_t hi = g.W + g.p - ew <= 0 ? 0 : (g.W + g.p - ew - 1) / g.s + 1;
    return {lo, std::max(lo, std::min(hi, g.OW))};
  }
  // The taps of output pixel (oh, ow) whose input lies inside the image -> their count,
  // input pointers tp and tap ids tw (in tap order).
  int taps(const float* xg, int64_t xh, int64_t xw, int64_t oh, int64_t ow, const float** tp, int* tw) const {
    // (nested loops, no t / KW: with two 64-bit divisions per tap this set-up took ~2 % of
    // an 8x64x56x56 conv, once per 6-pixel tile)
    int n = 0, t = 0;
    for (int64_t kh = 0; kh < g.KH; ++kh) {
      const int64_t ih = oh * g.s - g.p + kh * g.d;
      if (ih < 0 || ih >= g.H) {
        t += static_cast<int>(g.KW);
        continue;
      }
      for (int64_t kw = 0; kw < g.KW; ++kw, ++t) {
        const int64_t iw = ow * g.s - g.p + kw * g.d;
        if (iw < 0 || iw >= g.W) continue;
        tp[n] = xg + ih * xh + iw * xw;
        tw[n++] = t;
      }
    }
    return n;
  }
  struct Block {
    int nz;
    __mmask16 last;
    const float* wb;
    const float* bb;
    int64_t off;  // output offset of the block's first channel
  };
  Block block(int64_t grp, int64_t b) const {
    const int64_t nco = std::min<int64_t>(kCoTile, g.Og - b * kCoTile);
    return {static_cast<int>((nco + 15) / 16), static_cast<__mmask16>(nco % 16 ? (1u << (nco % 16)) - 1 : 0xFFFF),
            wpk + (grp * nblk + b) * kCoTile * g.Cg * g.KH * g.KW, bpad + (grp * nblk + b) * kCoTile,
            b * kCoTile};
  }

  // The interior pixels of row oh; og: the row's first pixel, channels contiguous,
  // pixels ows apart.
  void operator()(const float* xg, int64_t xh, int64_t xw, float* og, int64_t ows, int64_t grp, int64_t oh) const {
    const float* tp[kMaxDirectTaps];
    int tw[kMaxDirectTaps];
    const auto [lo, hi] = interior();
    if (lo >= hi) return;
    // every interior pixel has the same taps, s*xw floats on from its left neighbour's
    const int ntap = taps(xg, xh, xw, oh, lo, tp, tw);
    for (int64_t b = 0; b < nblk; ++b) {
      const Block k = block(grp, b);
      auto run = [&](int64_t ow0, int rows) {
        tile_fn(rows, k.nz)(ntap, tp, (ow0 - lo) * g.s * xw, tw, g.Cg, g.s * xw, k.wb, k.bb, relu,
                            og + k.off + ow0 * ows, ows, k.last);
      };
      for (int64_t ow0 = lo; ow0 < hi; ow0 += kRowsTile) run(ow0, static_cast<int>(std::min<int64_t>(kRowsTile, hi - ow0)));
    }
  }


  // Note [Edge columns by rows]: a pixel whose taps reach into the left or right padding
  // has its own tap list, so row by row it ran alone (before git 9298602 (2026-11-22)): a 1-pixel tile
  // has 4 accumulator chains, half of what hides the FMA latency, and at 56x56 with
  // padding 1 those 2 columns took ~7 % of an NHWC conv. The same column of consecutive
  // output rows with the same taps (every row whose kh taps are all inside the image)
  // differs only by s input rows per output row, so up to 6 of them make one tile of the
  // kernel, pixels s*xh apart in the input and ohs apart in the output. Rows [oh0, oh1);
  // og: output row orow's first pixel (the image's row 0 or a buffer holding rows from
  // orow on).
  void edges(const float* xg, int64_t xh, int64_t xw, float* og, int64_t ows, int64_t ohs, int64_t grp, int64_t oh0,
             int64_t oh1, int64_t orow) const {
    const float* tp[kMaxDirectTaps];
    const float* tq[kMaxDirectTaps];
    int tw[kMaxDirectTaps], tv[kMaxDirectTaps];
    const auto [lo, hi] = interior();
    for (int64_t b = 0; b < nblk; ++b) {
      const Block k = block(grp, b);
      auto column = [&](int64_t ow) {
        for (int64_t oh = oh0; oh < oh1;) {
          const int ntap = taps(xg, xh, xw, oh, ow, tp, tw);
          int rows = 1;
          while (rows < kRowsTile && oh + rows < oh1 && taps(xg, xh, xw, oh + rows, ow, tq, tv) == ntap &&
                 std::equal(tw, tw + ntap, tv))
            ++rows;
          tile_fn(rows, k.nz)(ntap, tp, 0, tw, g.Cg, g.s * xh, k.wb, k.bb, relu,
                              og + k.off + (oh - orow) * ohs + ow * ows, ohs, k.last);
          oh += rows;
        }
      };
      for (int64_t ow = 0; ow < lo; ++ow) column(ow);
      for (int64_t ow = hi; ow < g.OW; ++ow) column(ow);
    }
  }
};

void conv_direct512(const ConvShape& g, const Tensor& out, const Tensor& x, const Tensor& w, const Tensor& bias, bool relu,
                    bool nhwc) {
  const int T = static_cast<int>(g.KH * g.KW);
  const int64_t nblk = (g.Og + kCoTile - 1) / kCoTile, ogp = nblk * kCoTile;
  // workspace: packed weights [group][block][tap][c][64] and padded bias [group][ogp];
  // NCHW also one (image, group) of x channels-last
  const int64_t wsz = g.G * ogp * g.Cg * T + g.G * ogp;
  const int64_t stage = nhwc ? 0 : g.H * g.W * g.Cg;
  detail::Workspace ws(static_cast<size_t>(wsz + stage) * sizeof(float));
  float* wpk = ws.as<float>();
  float* bpad = wpk + g.G * ogp * g.Cg * T;
  float* xs = wpk + wsz;
  const float* wsrc = w.data<float>();
  const int64_t wo = w.stride(0), wc = w.stride(1), wh = w.stride(2), ww = w.stride(3);
  // (nested kh, kw loops: the repack runs on every call, and t / KW, t % KW per element
  // were two 64-bit divisions each)
  const int64_t tstep = g.Cg * kCoTile;  // floats from one tap's block to the next
  for (int64_t grp = 0; grp < g.G; ++grp)
    for (int64_t b = 0; b < nblk; ++b) {
      float* dst = wpk + (grp * nblk + b) * kCoTile * g.Cg * T;
      for (int64_t q = 0; q < kCoTile; ++q) {
        const int64_t o = b * kCoTile + q, co = grp * g.Og + o;
        for (int64_t c = 0; c < g.Cg; ++c) {
          float* d = dst + c * kCoTile + q;
          const float* src = wsrc + co * wo + c * wc;
          for (int64_t kh = 0; kh < g.KH; ++kh)
            for (int64_t kw = 0; kw < g.KW; ++kw, d += tstep) *d = o < g.Og ? src[kh * wh + kw * ww] : 0.0f;
        }
        bpad[grp * ogp + o] = (o < g.Og && bias.defined()) ? bias.data<float>()[co * bias.stride(0)] : 0.0f;
      }
    }
  const float* xp = x.data<float>();
  float* op = out.data<float>();
  const int64_t xn = x.stride(0), xc = x.stride(1), xh = x.stride(2), xw = x.stride(3);
  const int64_t on = out.stride(0), oc = out.stride(1), ohs = out.stride(2), ows = out.stride(3);
  const DirectRow row{g, wpk, bpad, relu, nblk};
  if (nhwc) {  // blocks of kRowsTile output rows, so that edges() can tile a column across them,
    // but at least 2 blocks per thread when the batch is small (a single 6-row image would
    // otherwise be one unit: one thread idle)
    const int64_t per_img = (2 * get_num_threads() + g.N - 1) / g.N;
    const int64_t rpb = std::clamp<int64_t>(g.OH / std::max<int64_t>(per_img, 1), 1, kRowsTile);
    const int64_t nrb = (g.OH + rpb - 1) / rpb;
    parallel_for(0, g.N * nrb, 1, [&](int64_t b0, int64_t e0) {
      for (int64_t nb = b0; nb < e0; ++nb) {
        const int64_t n = nb / nrb, oh0 = nb % nrb * rpb, oh1 = std::min(g.OH, oh0 + rpb);
        for (int64_t grp = 0; grp < g.G; ++grp) {
          const float* xg = xp + n * xn + grp * g.Cg * xc;
          float* og = op + n * on + grp * g.Og * oc;
          for (int64_t oh = oh0; oh < oh1; ++oh) row(xg, xh, xw, og + oh * ohs, ows, grp, oh);
          row.edges(xg, xh, xw, og, ows, ohs, grp, oh0, oh1, 0);
        }
      }
    });
    return;
  }
  // NCHW (Note [NCHW through the channels-last kernel]): per (image, group), stage x
  // channels-last without padding, then per block of output rows compute into a
  // per-thread channels-last buffer and transpose it into the NCHW output.
  const int64_t rowlen = g.W * g.Cg;  // staged floats per input row
  // blocks of at most kRowsTile output rows, as many as a multiple of the threads and of
  // near-equal height (56 rows on 2 threads: 10 blocks of 5-6 rows, not 9 x 6 + 2)
  const int64_t nthr = get_num_threads();
  const int64_t nrb = std::min(g.OH, ((g.OH + kRowsTile - 1) / kRowsTile + nthr - 1) / nthr * nthr);
  for (int64_t n = 0; n < g.N; ++n)
    for (int64_t grp = 0; grp < g.G; ++grp) {
      const float* xg = xp + n * xn + grp * g.Cg * xc;
      if (xh == 1 && xw != 1) {  // a transposed x: per input column, (h, c) is a transpose with unit h stride
        parallel_for(0, g.W, 1, [&](int64_t w0, int64_t w1) {
          for (int64_t iw = w0; iw < w1; ++iw) {  // staged[h*rowlen + iw*Cg + c] = x[c, h, iw]
            if (iw + 1 < w1)  // as below
              for (int64_t c = 0; c < g.Cg; ++c)
                for (int64_t l = 0; l < g.H * 4; l += 64) __builtin_prefetch(xg + c * xc + (iw + 1) * xw + l / 4, 0, 1);
            detail::transpose_tile_f32(xs + iw * g.Cg, rowlen, xg + iw * xw, xc, g.H, g.Cg);
          }
        });
      } else {
        parallel_for(0, g.H, 1, [&](int64_t h0, int64_t h1) {
          alignas(64) float tmp[8 * 256];
          for (int64_t h = h0; h < h1; ++h) {
            float* d = xs + h * rowlen;
            if (xw == 1) {
              if (h + 1 < h1)  // the next row's Cg short runs: too many streams for the hardware prefetchers
                for (int64_t c = 0; c < g.Cg; ++c)
                  for (int64_t l = 0; l < g.W * 4; l += 64) __builtin_prefetch(xg + c * xc + (h + 1) * xh + l / 4, 0, 1);
              detail::transpose_tile_f32(d, g.Cg, xg + h * xh, xc, g.W, g.Cg);  // d[iw*Cg + c] = x[c, h, iw]
              continue;
            }
            // any strides: gather 8 channels x 256 pixels of the row contiguous, then transpose
            for (int64_t c0 = 0; c0 < g.Cg; c0 += 8)
              for (int64_t w0 = 0; w0 < g.W; w0 += 256) {
                const int64_t nc = std::min<int64_t>(8, g.Cg - c0), nw = std::min<int64_t>(256, g.W - w0);
                for (int64_t j = 0; j < nc; ++j) {
                  const float* src = xg + (c0 + j) * xc + h * xh + w0 * xw;
                  for (int64_t i = 0; i < nw; ++i) tmp[j * 256 + i] = src[i * xw];
                }
                detail::transpose_tile_f32(d + w0 * g.Cg + c0, g.Cg, tmp, 256, nw, nc);
              }
          }
        });
      }
      float* og = op + n * on + grp * g.Og * oc;
      parallel_for(0, nrb, 1, [&](int64_t b0, int64_t e0) {
        static thread_local std::vector<float> obuf;  // kRowsTile output rows, channels-last
        const int64_t tohs = g.OW * g.Og;
        if (obuf.size() < static_cast<size_t>(kRowsTile * tohs)) obuf.resize(static_cast<size_t>(kRowsTile * tohs));
        float* t = obuf.data();
        for (int64_t rb = b0; rb < e0; ++rb) {
          const int64_t oh0 = rb * g.OH / nrb, oh1 = (rb + 1) * g.OH / nrb;
          const int64_t run = (oh1 - oh0) * g.OW * 4;  // bytes of each channel's output run
          for (int64_t oh = oh0; oh < oh1; ++oh) {
            // the block's output lines, a share per row, for writing (their RFOs off the transpose's path)
            for (int64_t c = (oh - oh0) * g.Og / (oh1 - oh0); c < (oh + 1 - oh0) * g.Og / (oh1 - oh0); ++c)
              for (int64_t l = 0; l < run; l += 64) __builtin_prefetch(og + c * oc + oh0 * ohs + l / 4, 1, 1);
            row(xs, rowlen, g.Cg, t + (oh - oh0) * tohs, g.Og, grp, oh);
          }
          row.edges(xs, rowlen, g.Cg, t, g.Og, tohs, grp, oh0, oh1, oh0);
          // out[c, oh0 + i] = t[i*Og + c] for the (oh1 - oh0) * OW pixels of the block
          detail::transpose_tile_f32(og + oh0 * ohs, oc, t, g.Og, g.Og, (oh1 - oh0) * g.OW);
        }
      });
    }
}
#endif

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
#if defined(SB_HAVE_AVX2) && defined(SB_HAVE_AVX512)
  if (direct_ok(g, x, nhwc))
    conv_direct512(g, res, x, w, bias, relu, nhwc);
  else
#endif
    conv_gemm(g, res, x, w, bias, relu, nhwc);
  if (!res.shares_storage_with(out)) Tensor(out).copy_(res);  // a view handle writes into out's storage
}

void conv_dispatch(const ConvShape& g, const Tensor& out, const Tensor& x, const Tensor& w, const Tensor& bias,
                   const Conv2dParams& p, bool relu) {
  if (out.numel() == 0) return;
#ifdef SB_WITH_CUDA
  if (x.device().is_cuda()) {
    cuda::conv2d(out, x, w, bias, p, relu);
    return;
  }
#endif
  (void)p;
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
