// pool.cpp — max_pool2d and avg_pool2d (float32) in either layout, in out= and
// out-of-place styles: the checks, the CPU kernels, and CUDA tensors handed to
// cuda::pool2d after the same checks (conv.cu). See conv.h for the API and costs.
#include "stridebench/conv.h"

#ifdef SB_HAVE_AVX2
#include <immintrin.h>
#endif

#include <algorithm>
#include <cmath>
#include <limits>

#include "stridebench/cpu_features.h"
#include "stridebench/parallel.h"
#include "core/scratch.h"
#include "core/transpose_tile.h"
#include "core/vec.h"
#ifdef SB_WITH_CUDA
#include "cuda/cuda_backend.h"
#endif

namespace sb {

// Note [Pooling kernels]
// Two loop orders, both one read of x (from cache where windows overlap) and one write
// of out:
//   planes  (channels not innermost in x: NCHW, stepped slices, transposes) per (n, c)
//           plane, in batches of kPoolRowBatch output rows: a vertical pass reduces each
//           window's rows into a row buffer padded with the identity (-inf / 0) on both
//           sides, then a horizontal pass reduces k neighbours of the buffer at stride s.
//           With AVX2, unit-stride rows and stride 1 or 2 both passes are 8-wide (a
//           ragged end as one more vector overlapping the last): stride 2 first splits
//           each buffer into its even and odd elements (two shuffles and two permutes
//           per 16 floats), so tap j reads phase j % 2 at offset j / 2, a plain vector
//           load. Other strides take a scalar horizontal pass. 3-row windows and the 3x3
//           / 2 taps are unrolled: the loops over rows and taps with run-time trip
//           counts made the NCHW benchmark row slower (docs/notes/conv.md). With
//           AVX-512 the common windows skip both passes (Note [Pooling rows in zmm]).
//   pixels  (channels innermost in x: channels-last) per output pixel: the window's
//           k x k channel runs are reduced in registers, 64 channels (8 vectors) at a
//           time, then 8, then one.
// The naive per-window loops these replaced ran NCHW 3x3 / 2 pooling of 8x64x56x56 far
// below the copy ceiling and NHWC several times faster, so the Channels-last table
// credited NHWC pooling with a speed-up that was our code's, not the machine's
// (docs/notes/conv.md has the before and after). max propagates NaN, as PyTorch's
// max_pool2d: a NaN in the window gives NaN (the scalar x > acc || x != x, the vectors
// vec::max_nan: max_ps and an OR of the unordered compare).
namespace {
struct PoolShape {
  int64_t N, C, H, W, k, s, pad, OH, OW;
};

template <bool kMax>
inline float pool_comb(float acc, float v) {
  return kMax ? (v > acc || v != v ? v : acc) : acc + v;  // a NaN, once in acc, stays
}
template <bool kMax>
constexpr float pool_init() {
  return kMax ? -std::numeric_limits<float>::infinity() : 0.0f;
}

// [lo, hi) of the input rows (or columns) that window o covers.
inline void pool_window(int64_t o, int64_t s, int64_t pad, int64_t k, int64_t n, int64_t& lo, int64_t& hi) {
  lo = std::max<int64_t>(o * s - pad, 0);
  hi = std::min<int64_t>(o * s - pad + k, n);
}

#ifdef SB_HAVE_AVX2
using F8 = vec::Vec<float>;

template <bool kMax>
inline __m256 pool_comb8(__m256 acc, __m256 v) {
  return kMax ? F8::max_nan(acc, v) : F8::add(acc, v);
}
#endif

// f(i) for i = 0, 8, 16, .. while a whole vector fits in n (>= 8), then f(n - 8) when
// n is not a multiple of 8: the ragged end as one more vector overlapping the one before,
// so f must write the same values twice harmlessly (pure functions of i).
template <typename F>
inline void for_each_vec8_overlapped(int64_t n, const F& f) {
  for (int64_t i = 0; i + 8 <= n; i += 8) f(i);
  if (n % 8) f(n - 8);
}

// r[w] = reduce over rows i in [0, nrows) of x[i * xh + w * xw], w in [0, W).
template <bool kMax>
void pool_vertical(float* r, const float* x, int64_t xh, int64_t xw, int64_t nrows, int64_t W, bool avx2) {
  int64_t w = 0;
#ifdef SB_HAVE_AVX2
  if (avx2 && xw == 1 && W >= 8) {
    for_each_vec8_overlapped(W, [&](int64_t w8) {
      __m256 acc = F8::set1(pool_init<kMax>());
      if (nrows == 3) {  // the common 3x3 window, unrolled
        acc = pool_comb8<kMax>(acc, F8::load(x + w8));
        acc = pool_comb8<kMax>(acc, F8::load(x + xh + w8));
        acc = pool_comb8<kMax>(acc, F8::load(x + 2 * xh + w8));
      } else {
        for (int64_t i = 0; i < nrows; ++i) acc = pool_comb8<kMax>(acc, F8::load(x + i * xh + w8));
      }
      F8::store(r + w8, acc);
    });
    w = W;
  }
#else
  (void)avx2;
#endif
  for (; w < W; ++w) {
    float acc = pool_init<kMax>();
    for (int64_t i = 0; i < nrows; ++i) acc = pool_comb<kMax>(acc, x[i * xh + w * xw]);
    r[w] = acc;
  }
}

// Whether a row goes through the 8-wide horizontal pass.
inline bool pool_h_vec(bool avx2, int64_t ow_, const PoolShape& g) { return avx2 && ow_ == 1 && g.s <= 2 && g.OW >= 8; }

// Stride 2: ph[0 .. rlen/2) = the even elements of r, ph[rlen/2 ..) = the odd ones.
inline void pool_split_phases(float* ph, const float* r, int64_t rlen) {
#ifdef SB_HAVE_AVX2
  const int64_t half = rlen / 2;
  for (int64_t i = 0; i < half; i += 8) {
    const __m256 a = F8::load(r + 2 * i), b = F8::load(r + 2 * i + 8);
    F8::store(ph + i, detail::even8_f32(a, b));
    F8::store(ph + half + i, detail::odd8_f32(a, b));
  }
#else
  (void)ph, (void)r, (void)rlen;
#endif
}

// One output row: o[ow * ow_] = scale x reduce over j < k of r[ow * s + j], ow in [0, OW).
// r holds the padded row (index 0 = input column -pad) and identity elements past its
// end; ph its stride-2 phases (pool_split_phases) when pool_h_vec and s == 2.
template <bool kMax>
void pool_horizontal(float* o, int64_t ow_, const float* r, int64_t rlen, const float* ph, const PoolShape& g,
                     float scale, bool avx2) {
  const int64_t k = g.k, s = g.s, OW = g.OW;
  int64_t ow = 0;
#ifdef SB_HAVE_AVX2
  if (pool_h_vec(avx2, ow_, g)) {
    const float* p[2] = {r, r};
    if (s == 2) p[0] = ph, p[1] = ph + rlen / 2;
    const __m256 sc = F8::set1(scale);
    for_each_vec8_overlapped(OW, [&](int64_t o8) {
      __m256 acc = F8::set1(pool_init<kMax>());
      if (k == 3 && s == 2) {  // the common 3x3 / 2 window, unrolled: even, odd, even + 1
        acc = pool_comb8<kMax>(acc, F8::load(p[0] + o8));
        acc = pool_comb8<kMax>(acc, F8::load(p[1] + o8));
        acc = pool_comb8<kMax>(acc, F8::load(p[0] + o8 + 1));
      } else {
        for (int64_t ph0 = 0; ph0 < s; ++ph0)  // taps j = ph0, ph0 + s, ...: phase ph0 at offsets 0, 1, ...
          for (int64_t j = ph0, q = o8; j < k; j += s, ++q) acc = pool_comb8<kMax>(acc, F8::load(p[ph0] + q));
      }
      F8::store(o + o8, kMax ? acc : F8::mul(acc, sc));
    });
    ow = OW;
  }
#else
  (void)rlen, (void)ph, (void)avx2;
#endif
  for (; ow < OW; ++ow) {
    float acc = pool_init<kMax>();
    for (int64_t j = 0; j < k; ++j) acc = pool_comb<kMax>(acc, r[ow * s + j]);
    o[ow * ow_] = kMax ? acc : acc * scale;
  }
}

// Output rows per batch of the planes loop (Note [Pooling kernels]): each pass over a
// batch reads rows that the previous pass stored a batch earlier, long out of the store
// buffer; row by row was slower (docs/notes/conv.md).
constexpr int64_t kPoolRowBatch = 16;

// Note [Pooling kernels], planes: the (n, c) planes [b, e).
template <bool kMax>
void pool_planes(float* out, const int64_t* os, const float* x, const int64_t* xs, const PoolShape& g, int64_t b,
                 int64_t e, bool avx2) {
  const int64_t Wp = g.W + 2 * g.pad;
  const int64_t rlen = (Wp + 15) / 16 * 16 + 16;  // room for the 16-float loads past the end
  const int64_t nb = std::min(g.OH, kPoolRowBatch);
  float* const rows = reinterpret_cast<float*>(tile_scratch(static_cast<size_t>(2 * nb * rlen) * sizeof(float)));
  float* const phases = rows + nb * rlen;
  std::fill(rows, rows + nb * rlen, pool_init<kMax>());  // the pads stay; [pad, pad + W) is rewritten per row
  const float scale = 1.0f / static_cast<float>(g.k * g.k);
  const bool split = pool_h_vec(avx2, os[3], g) && g.s == 2;
  for (int64_t nc = b; nc < e; ++nc) {
    const int64_t n = nc / g.C, c = nc % g.C;
    const float* xpl = x + n * xs[0] + c * xs[1];
    float* opl = out + n * os[0] + c * os[1];
    for (int64_t oh0 = 0; oh0 < g.OH; oh0 += nb) {
      const int64_t m = std::min(nb, g.OH - oh0);
      for (int64_t i = 0; i < m; ++i) {
        int64_t h0, h1;
        pool_window(oh0 + i, g.s, g.pad, g.k, g.H, h0, h1);
        pool_vertical<kMax>(rows + i * rlen + g.pad, xpl + h0 * xs[2], xs[2], xs[3], h1 - h0, g.W, avx2);
      }
      if (split)
        for (int64_t i = 0; i < m; ++i) pool_split_phases(phases + i * rlen, rows + i * rlen, rlen);
      for (int64_t i = 0; i < m; ++i)
        pool_horizontal<kMax>(opl + (oh0 + i) * os[2], os[3], rows + i * rlen, rlen, phases + i * rlen, g, scale, avx2);
    }
  }
}

#if defined(SB_HAVE_AVX2) && defined(SB_HAVE_AVX512)
// Note [Pooling rows in zmm]
// With AVX-512, rows of x with unit stride, and a 3x3 / 2, 2x2 / 2 or 3x3 / 1 window (the
// stride and window template arguments, so that the vectors stay in registers), the
// planes order takes 16 outputs of a row at a time straight from x, in registers: each
// of the window's rows loaded as two or three zmm of columns (masked:
// pad columns and those past the row's end read as the identity, and a masked lane
// never faults), reduced down the window's rows, then across the taps. Stride 2: the
// even and odd columns (two vpermt2ps) are taps 0 and 1, the even ones moved one lane
// along (valignd, the third vector's first column coming in) tap 2; stride 1: tap j is
// the columns moved j lanes along (vpermt2ps). No row buffer and no phase split, about
// a third of the AVX2 passes' instructions per output (docs/notes/conv.md). max is
// NaN-propagating as the other loops: an ordered compare into a mask, then a masked max
// that keeps the new element where it is NaN (acc stays NaN through maxps's rule). The
// pixels order stays 8-wide: in zmm it was slower on Zen 4 (docs/notes/conv.md). The
// design's tuning decides (CpuTuning::pool_rows_zmm, SB_TUNING pool512): on Zen 5 these
// rows took longer than the AVX2 passes, and its row takes the passes.
#define SB_POOL512 __attribute__((target("avx2,fma,avx512f,avx512vl,avx512dq")))
#define SB_POOL512_INLINE __attribute__((target("avx2,fma,avx512f,avx512vl,avx512dq"), always_inline))

template <bool kMax>
SB_POOL512_INLINE inline __m512 pool_comb16(__m512 acc, __m512 v) {
  if constexpr (kMax) return _mm512_mask_max_ps(v, _mm512_cmp_ps_mask(v, v, _CMP_ORD_Q), v, acc);
  else return _mm512_add_ps(acc, v);
}

// The lanes of 16 columns from c that lie in [0, W).
inline unsigned pool_lanes16(int64_t c, int64_t W) {
  const int64_t lo = std::max<int64_t>(0, -c), hi = std::min<int64_t>(16, W - c);
  if (hi <= lo) return 0;
  return (hi == 16 ? 0xFFFFu : (1u << hi) - 1) & ~((1u << lo) - 1);
}

template <bool kMax, int kS, int kK>
SB_POOL512 void pool_planes512(float* out, const int64_t* os, const float* x, const int64_t* xs, const PoolShape& g,
                               int64_t b, int64_t e) {
  constexpr int kNv = kS == 2 && kK == 3 ? 3 : 2;  // column vectors a chunk reads
  // the geometry in locals: the vector stores may alias anything, and would reload it
  const int64_t C = g.C, H = g.H, OH = g.OH, OW = g.OW, pad = g.pad, nchunk = (OW + 15) / 16;
  const int64_t xn = xs[0], xc = xs[1], xh = xs[2], on = os[0], oc = os[1], oh_ = os[2], ow_ = os[3];
  // per chunk (at most 64: pool_planes512_for takes OW <= 1024): its first column and the
  // lanes of its vectors inside the row
  int64_t c0[64];
  __mmask16 lanes[64][kNv];
  for (int64_t q = 0; q < nchunk; ++q) {
    c0[q] = q * 16 * kS - pad;
    for (int v = 0; v < kNv; ++v) lanes[q][v] = static_cast<__mmask16>(pool_lanes16(c0[q] + 16 * v, g.W));
    if (kNv == 3) lanes[q][2] &= 1;  // only the 33rd column
  }
  const __m512 id = _mm512_set1_ps(pool_init<kMax>());
  const __m512 sc = _mm512_set1_ps(1.0f / static_cast<float>(kK * kK));
  const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m512i even = _mm512_add_epi32(iota, iota), odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
  const __m512i one = _mm512_add_epi32(iota, _mm512_set1_epi32(1)), two = _mm512_add_epi32(iota, _mm512_set1_epi32(2));
  alignas(64) float t[16];
  for (int64_t nc = b; nc < e; ++nc) {
    const int64_t n = nc / C, c = nc % C;
    const float* xpl = x + n * xn + c * xc;
    float* opl = out + n * on + c * oc;
    for (int64_t oh = 0; oh < OH; ++oh) {
      const int64_t h0 = std::max<int64_t>(oh * kS - pad, 0), h1 = std::min<int64_t>(oh * kS - pad + kK, H);
      const float* xrow = xpl + h0 * xh;
      float* orow = opl + oh * oh_;
      for (int64_t q = 0; q < nchunk; ++q) {
        __mmask16 m[kNv];
        for (int v = 0; v < kNv; ++v) m[v] = lanes[q][v];
        const float* xr = xrow + c0[q];
        __m512 a[kNv];
        for (int v = 0; v < kNv; ++v) a[v] = _mm512_mask_loadu_ps(id, m[v], xr + 16 * v);
        for (int64_t h = h0 + 1; h < h1; ++h) {
          xr += xh;
          for (int v = 0; v < kNv; ++v) a[v] = pool_comb16<kMax>(a[v], _mm512_mask_loadu_ps(id, m[v], xr + 16 * v));
        }
        __m512 r;
        if constexpr (kS == 2) {
          const __m512 ev = _mm512_permutex2var_ps(a[0], even, a[1]);
          r = pool_comb16<kMax>(ev, _mm512_permutex2var_ps(a[0], odd, a[1]));
          if constexpr (kK == 3) {  // the even columns one lane along, the 33rd coming in
            const __m512i ev1 = _mm512_maskz_alignr_epi32(0xFFFF, _mm512_castps_si512(a[2]), _mm512_castps_si512(ev), 1);
            r = pool_comb16<kMax>(r, _mm512_castsi512_ps(ev1));
          }
        } else {
          r = pool_comb16<kMax>(a[0], _mm512_permutex2var_ps(a[0], one, a[1]));
          r = pool_comb16<kMax>(r, _mm512_permutex2var_ps(a[0], two, a[1]));
        }
        if (!kMax) r = _mm512_mul_ps(r, sc);
        const int64_t o0 = q * 16, mo = std::min<int64_t>(16, OW - o0);
        if (ow_ == 1 && mo == 16) {
          _mm512_storeu_ps(orow + o0, r);
        } else if (ow_ == 1) {
          _mm512_mask_storeu_ps(orow + o0, static_cast<__mmask16>((1u << mo) - 1), r);
        } else {
          _mm512_store_ps(t, r);
          for (int64_t i = 0; i < mo; ++i) orow[(o0 + i) * ow_] = t[i];
        }
      }
    }
  }
}

// The zmm rows' kernel for this window, or nullptr (Note [Pooling rows in zmm]).
template <bool kMax>
auto pool_planes512_for(const int64_t* xs, const PoolShape& g)
    -> void (*)(float*, const int64_t*, const float*, const int64_t*, const PoolShape&, int64_t, int64_t) {
  if (!use_avx512() || !cpu_tuning().pool_rows_zmm || xs[3] != 1 || g.OW > 1024) return nullptr;
  if (g.s == 2 && g.k == 3) return pool_planes512<kMax, 2, 3>;
  if (g.s == 2 && g.k == 2) return pool_planes512<kMax, 2, 2>;
  if (g.s == 1 && g.k == 3) return pool_planes512<kMax, 1, 3>;
  return nullptr;
}
#endif

#ifdef SB_HAVE_AVX2
// V vectors of channels [c, c + 8V) of one output pixel; x points at channel c of the
// window's first input pixel.
template <bool kMax, int V>
inline void pool_pixel_chunk(float* o, int64_t oc, const float* x, int64_t xh, int64_t xw, int64_t nh, int64_t nw,
                             float scale) {
  __m256 acc[V];
  for (int v = 0; v < V; ++v) acc[v] = F8::set1(pool_init<kMax>());
  for (int64_t i = 0; i < nh; ++i)
    for (int64_t j = 0; j < nw; ++j) {
      const float* p = x + i * xh + j * xw;
      for (int v = 0; v < V; ++v) acc[v] = pool_comb8<kMax>(acc[v], F8::load(p + 8 * v));
    }
  for (int v = 0; v < V; ++v) {
    const __m256 y = kMax ? acc[v] : F8::mul(acc[v], F8::set1(scale));
    if (oc == 1) {
      F8::store(o + 8 * v, y);
    } else {
      alignas(32) float t[8];
      F8::store(t, y);
      for (int q = 0; q < 8; ++q) o[(8 * v + q) * oc] = t[q];
    }
  }
}
#endif

// Note [Pooling kernels], pixels: the (n, oh) output rows [b, e).
template <bool kMax>
void pool_pixels(float* out, const int64_t* os, const float* x, const int64_t* xs, const PoolShape& g, int64_t b,
                 int64_t e, bool avx2) {
  const float scale = 1.0f / static_cast<float>(g.k * g.k);
  const bool vec = avx2 && xs[1] == 1;
  (void)vec;
  for (int64_t nh = b; nh < e; ++nh) {
    const int64_t n = nh / g.OH, oh = nh % g.OH;
    int64_t h0, h1;
    pool_window(oh, g.s, g.pad, g.k, g.H, h0, h1);
    for (int64_t ow = 0; ow < g.OW; ++ow) {
      int64_t w0, w1;
      pool_window(ow, g.s, g.pad, g.k, g.W, w0, w1);
      float* o = out + n * os[0] + oh * os[2] + ow * os[3];
      const float* xw0 = x + n * xs[0] + h0 * xs[2] + w0 * xs[3];
      int64_t c = 0;
#ifdef SB_HAVE_AVX2
      if (vec) {
        for (; c + 64 <= g.C; c += 64)
          pool_pixel_chunk<kMax, 8>(o + c * os[1], os[1], xw0 + c, xs[2], xs[3], h1 - h0, w1 - w0, scale);
        for (; c + 8 <= g.C; c += 8)
          pool_pixel_chunk<kMax, 1>(o + c * os[1], os[1], xw0 + c, xs[2], xs[3], h1 - h0, w1 - w0, scale);
      }
#endif
      for (; c < g.C; ++c) {
        float acc = pool_init<kMax>();
        for (int64_t ih = 0; ih < h1 - h0; ++ih)
          for (int64_t iw = 0; iw < w1 - w0; ++iw) acc = pool_comb<kMax>(acc, xw0[c * xs[1] + ih * xs[2] + iw * xs[3]]);
        o[c * os[1]] = kMax ? acc : acc * scale;
      }
    }
  }
}

// The checks both styles share; returns the geometry.
PoolShape pool_shape(const Tensor& x, const Pool2dParams& p, const char* op) {
  SB_CHECK(x.defined() && x.dim() == 4, op, ": expected a 4-D input [N, C, H, W], got sizes ",
           x.defined() ? x.sizes() : Shape{});
  SB_CHECK(x.dtype() == DType::Float32, op, ": expected float32, got ", x.dtype());
  const int64_t k = p.kernel, s = p.stride > 0 ? p.stride : p.kernel, pad = p.padding;
  SB_CHECK(k >= 1 && p.stride >= 0 && pad >= 0 && pad <= k / 2, op,
           ": expected kernel >= 1, stride >= 0, 0 <= padding <= kernel/2, got kernel ", k, " stride ", p.stride,
           " padding ", pad);
  const int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
  SB_CHECK(k <= H + 2 * pad && k <= W + 2 * pad, op, ": kernel ", k, " larger than the padded input ", H + 2 * pad,
           "x", W + 2 * pad);
  return {N, C, H, W, k, s, pad, (H + 2 * pad - k) / s + 1, (W + 2 * pad - k) / s + 1};
}

// Channels innermost in x (a channels-last layout): the pixels order; else planes.
bool pool_channels_inner(const Tensor& x) {
  return x.stride(1) == 1 && x.stride(3) != 1 && x.size(1) > 1;
}

template <bool kMax>
void pool_run(Tensor& out, const Tensor& x, const PoolShape& g, const char* name) {
  if (x.device().is_cuda()) {  // after every check: Note [CUDA pooling] in conv.cu
#ifdef SB_WITH_CUDA
    (void)name;
    cuda::pool2d(kMax, out, x, g.k, g.s, g.pad);
    return;
#else
    SB_CHECK(false, name, ": expected a CPU tensor, got ", x.device(), " (this build has no CUDA)");
#endif
  }
  if (out.numel() == 0) return;
  const float* xp = x.data<float>();
  float* op = out.data<float>();
  const int64_t xs[4] = {x.stride(0), x.stride(1), x.stride(2), x.stride(3)};
  const int64_t os[4] = {out.stride(0), out.stride(1), out.stride(2), out.stride(3)};
  const bool avx2 = use_avx2();
  if (pool_channels_inner(x)) {
    const int64_t grain = std::max<int64_t>(1, kGrainSize / std::max<int64_t>(1, g.OW * g.C * g.k * g.k));
    parallel_for(0, g.N * g.OH, grain, [&](int64_t b, int64_t e) { pool_pixels<kMax>(op, os, xp, xs, g, b, e, avx2); });
  } else {
    const int64_t grain = std::max<int64_t>(1, kGrainSize / std::max<int64_t>(1, g.H * g.W));
#if defined(SB_HAVE_AVX2) && defined(SB_HAVE_AVX512)
    if (const auto rows512 = pool_planes512_for<kMax>(xs, g)) {
      parallel_for(0, g.N * g.C, grain, [&](int64_t b, int64_t e) { rows512(op, os, xp, xs, g, b, e); });
      return;
    }
#endif
    parallel_for(0, g.N * g.C, grain, [&](int64_t b, int64_t e) { pool_planes<kMax>(op, os, xp, xs, g, b, e, avx2); });
  }
}

template <bool kMax>
Tensor pool2d(const Tensor& x, const Pool2dParams& p, const char* op) {
  const PoolShape g = pool_shape(x, p, op);
  Tensor out = empty({g.N, g.C, g.OH, g.OW}, x.dtype(), x.device(), x.suggest_memory_format());
  pool_run<kMax>(out, x, g, op);
  return out;
}

template <bool kMax>
Tensor& pool2d_out(Tensor& out, const Tensor& x, const Pool2dParams& p, const char* op) {
  const PoolShape g = pool_shape(x, p, op);
  SB_CHECK(out.defined(), op, ": out is undefined");
  SB_CHECK(out.device() == x.device(), op, ": out on ", out.device(), ", input on ", x.device());
  SB_CHECK(out.dtype() == DType::Float32, op, ": out must be float32, got ", out.dtype());
  const Shape want{g.N, g.C, g.OH, g.OW};
  SB_CHECK(out.sizes() == want, op, ": out has sizes ", out.sizes(), ", expected ", want);
  SB_CHECK(has_internal_overlap(out) != MemOverlap::Yes, op, ": out has overlapping elements (strides ",
           out.strides(), ")");
  check_disjoint(op, out, x, "the input");
  pool_run<kMax>(out, x, g, op);
  return out;
}
}  // namespace

Tensor max_pool2d(const Tensor& x, const Pool2dParams& p) { return pool2d<true>(x, p, "max_pool2d"); }
Tensor avg_pool2d(const Tensor& x, const Pool2dParams& p) { return pool2d<false>(x, p, "avg_pool2d"); }
Tensor& max_pool2d_out(Tensor& out, const Tensor& x, const Pool2dParams& p) {
  return pool2d_out<true>(out, x, p, "max_pool2d_out");
}
Tensor& avg_pool2d_out(Tensor& out, const Tensor& x, const Pool2dParams& p) {
  return pool2d_out<false>(out, x, p, "avg_pool2d_out");
}

}  // namespace sb
