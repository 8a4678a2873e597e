// conv_gemm.cpp — conv2d as an implicit GEMM: C[o, pixel] (NCHW) or C[pixel, o] (NHWC)
// = W[o, k] x im2col(x)[k, pixel], the im2col panels packed on the fly by the GEMM
// driver's B packer (matmul/gemm_impl.h), so the im2col matrix is never stored whole;
// bias and relu in the driver's epilogue. A 1x1 stride-1 unpadded NCHW conv packs x
// directly as B. Needs out dense in x's layout (conv_cpu's temporary otherwise).
#include <algorithm>

#include "conv/conv_impl.h"
#include "core/vec.h"
#include "matmul/gemm_impl.h"
#include "stridebench/cpu_features.h"
#include "stridebench/parallel.h"

namespace sb::conv_detail {
namespace {

using detail::kNRf;

// Panel packer for the NCHW im2col matrix B[k = (c, kh, kw), j = (oh, ow)] of one image
// and group; columns in one output row are copied as contiguous runs with the padding
// zeroed (Note: the fast loop needs stride 1 and unit W stride).
struct Im2colNchw {
  const ConvShape* g;
  const float* x;  // image n, first channel of the group
  int64_t xc, xh, xw;
  void operator()(float* dst, int64_t p0, int64_t kc, int64_t j0, int64_t nc) const {
    const ConvShape& G = *g;
    [[maybe_unused]] const int64_t khw = G.KH * G.KW;
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
              vec::Vec<float>::store(d, vec::Vec<float>::load(src));
              vec::Vec<float>::store(d + 8, vec::Vec<float>::load(src + 8));
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
          vec::Vec<float>::store(d, vec::Vec<float>::load(src));
          vec::Vec<float>::store(d + 8, vec::Vec<float>::load(src + 8));
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

}  // namespace

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

}  // namespace sb::conv_detail
