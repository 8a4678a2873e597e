// normalize_cols.cpp — normalize's float32 rows that lie next to each other (row k at
// x + 4k: an outer dim, a transposed or a channels-last input), 64 rows side by side per
// block (Note [Normalize across adjacent rows], Note [Adjacent rows in one pass]).
// normalize.cpp's strip hands them here through normalize_adjacent_rows_f32.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <limits>
#include <numeric>
#include <vector>

#include "elementwise/normalize_rows.h"
#include "core/test_hooks.h"
#include "core/transpose_tile.h"

namespace sb {

namespace ew {

namespace {

// blocks of adjacent rows the one-pass guard sent to the three passes, and those whose
// write pass read a packed copy (test_hooks.h)
std::atomic<int64_t> g_cols_fallbacks{0}, g_cols_packed{0};

#ifdef SB_HAVE_AVX2
// Note [Normalize across adjacent rows]: float32 rows that lie next to each other (row k
// at x + 4k: normalizing an outer dim, a transposed or a channels-last input), kk <= 64 of
// them, element i of every row at x + i * xsd. The 64 rows are 8 vectors wide: pass 1
// sums them down i, pass 2 sums (x - mean)^2, pass 3 writes; the kk x n block stays in L1
// between passes when n <= 128 (48 KiB L1d here), in L2 after. Sums go from the float
// lanes to double every kStatFlush elements. out is row k = out + k * ocs, element i at
// + i * osd; vector stores when ocs is 4 bytes, else through a lane buffer.
// NV vectors of rows (kk = 8 NV, or 8 NV - 8 < kk < 8 NV with MASKED): compile-time
// bounds keep the NV accumulators in registers. With AVX-512 the statistics take one
// pass instead (Note [Adjacent rows in one pass]).
//
// The write pass (cols_write_f32), from the rows' float mean and rstd: where out rows are
// dense along i and apart (a transposed or channels-last input into a contiguous out),
// 8 rows x 8 elements a time transposed in registers, the 8 rows' whole length before
// the next 8 rows, so that each out line is written whole before the writes touch the
// other rows' lines (across all kk rows per 8 elements, out rows a multiple of 4 KiB
// apart would hold kk lines of one L1 set between a line's two halves).
template <int NV, bool MASKED>
void cols_write_f32(const char* x, int64_t xsd, char* out, int64_t ocs, int64_t osd, int kk, int64_t n,
                    const float* mean, const float* rstd) {
  const VF::PartMask mask = VF::part_mask(kk % 8 ? kk % 8 : 8);
  auto load = [&](const float* p, int v) {
    return MASKED && v == NV - 1 ? VF::maskload(p + 8 * v, mask) : VF::load(p + 8 * v);
  };
  VF::V mv[NV], rv[NV];
  for (int v = 0; v < NV; ++v) {
    mv[v] = VF::load_aligned(mean + 8 * v);
    rv[v] = VF::load_aligned(rstd + 8 * v);
  }
  int64_t i0 = 0;
  if (ocs != 4 && osd == 4) {  // out rows dense along i: 8 i's x 8 rows, transposed in registers
    const int64_t n8 = n / 8 * 8;
    for (int v = 0; v < NV; ++v) {
      const int m = std::min(8, kk - 8 * v);
      for (i0 = 0; i0 < n8; i0 += 8) {
        VF::V y[8];
        for (int r = 0; r < 8; ++r)
          y[r] = VF::mul(VF::sub(load(reinterpret_cast<const float*>(x + (i0 + r) * xsd), v), mv[v]), rv[v]);
        detail::transpose8(y[0], y[1], y[2], y[3], y[4], y[5], y[6], y[7]);  // y[l]: row 8v + l, i0..i0+7
        for (int l = 0; l < m; ++l) VF::store(reinterpret_cast<float*>(out + (8 * v + l) * ocs) + i0, y[l]);
      }
    }
    i0 = n8;
  }
  for (int64_t i = i0; i < n; ++i) {
    const float* xi = reinterpret_cast<const float*>(x + i * xsd);
    char* oi = out + i * osd;
    for (int v = 0; v < NV; ++v) {
      const VF::V y = VF::mul(VF::sub(load(xi, v), mv[v]), rv[v]);
      if (ocs == 4) {
        float* o = reinterpret_cast<float*>(oi) + 8 * v;
        if (MASKED && v == NV - 1) VF::maskstore(o, mask, y); else VF::store(o, y);
      } else {
        alignas(32) float t[8];
        VF::store_aligned(t, y);
        const int m = std::min(8, kk - 8 * v);
        for (int l = 0; l < m; ++l) std::memcpy(oi + (8 * v + l) * ocs, t + l, 4);
      }
    }
  }
}

template <int NV, bool MASKED>
void normalize_cols_f32(const char* x, int64_t xsd, char* out, int64_t ocs, int64_t osd, int kk, int64_t n,
                        double eps) {
  const VF::PartMask mask = VF::part_mask(kk % 8 ? kk % 8 : 8);
  auto load = [&](const float* p, int v) {
    return MASKED && v == NV - 1 ? VF::maskload(p + 8 * v, mask) : VF::load(p + 8 * v);
  };
  alignas(32) double sum[8 * NV] = {}, sq[8 * NV] = {};
  alignas(32) float mean[8 * NV], rstd[8 * NV];
  auto flush = [&](const VF::V* acc, double* d) {
    for (int v = 0; v < NV; ++v) {
      VD::store_aligned(d + 8 * v, VD::add(VD::load_aligned(d + 8 * v), VD::widen_lo(acc[v])));
      VD::store_aligned(d + 8 * v + 4, VD::add(VD::load_aligned(d + 8 * v + 4), VD::widen_hi(acc[v])));
    }
  };
  // kU accumulators a vector of rows, element i into acc[i % kU]: with one, a pass over
  // 16 rows (NV = 2) waited on two add or FMA chains, one step an element
  // (Note [Normalize across adjacent rows])
  constexpr int kU = NV >= 8 ? 1 : NV >= 4 ? 2 : 4;
  VF::V acc[kU][NV], x0[NV];  // pass 1 sums x - x0, x0 = element 0 of each row (as Note [Short normalize rows])
  for (int v = 0; v < NV; ++v) x0[v] = load(reinterpret_cast<const float*>(x), v);
  // one statistics pass: acc = step(acc, element, v) over the n elements, flushed to d
  const auto stat_pass = [&](double* d, auto step) {
    for (int64_t c = 0; c < n; c += kStatFlush) {
      const int64_t ce = std::min(n, c + kStatFlush);
      for (int u = 0; u < kU; ++u)
        for (int v = 0; v < NV; ++v) acc[u][v] = VF::zero();
      int64_t i = c;
      for (; i + kU <= ce; i += kU)
        for (int u = 0; u < kU; ++u) {
          const float* xi = reinterpret_cast<const float*>(x + (i + u) * xsd);
          for (int v = 0; v < NV; ++v) acc[u][v] = step(acc[u][v], load(xi, v), v);
        }
      for (; i < ce; ++i) {
        const float* xi = reinterpret_cast<const float*>(x + i * xsd);
        for (int v = 0; v < NV; ++v) acc[0][v] = step(acc[0][v], load(xi, v), v);
      }
      for (int u = 0; u < kU; ++u) flush(acc[u], d);
    }
  };
  stat_pass(sum, [&](VF::V a, VF::V e, int v) { return VF::add(a, VF::sub(e, x0[v])); });
  alignas(32) float first[8 * NV];
  for (int v = 0; v < NV; ++v) VF::store_aligned(first + 8 * v, x0[v]);
  for (int k = 0; k < 8 * NV; ++k) mean[k] = static_cast<float>(first[k] + sum[k] / static_cast<double>(n));
  VF::V mv[NV];
  for (int v = 0; v < NV; ++v) mv[v] = VF::load_aligned(mean + 8 * v);
  stat_pass(sq, [&](VF::V a, VF::V e, int v) {
    const VF::V dv = VF::sub(e, mv[v]);
    return VF::fma(dv, dv, a);
  });
  // masked lanes loaded 0 and subtracted their mean 0: their rstd is never stored
  const VD::V rn = VD::set1(1.0 / static_cast<double>(n)), ev = VD::set1(eps), one = VD::set1(1.0);
  for (int k = 0; k < 8 * NV; k += 4)
    VD::store_narrow(rstd + k, VD::div(one, VD::sqrt(VD::fma(VD::load_aligned(sq + k), rn, ev))));
  cols_write_f32<NV, MASKED>(x, xsd, out, ocs, osd, kk, n, mean, rstd);
}

// Note [Adjacent rows packed where their strides alias]
// A block's element i of its kk rows (w bytes: the rows' vectors) lies at x + i * xsd. Where
// xsd is a multiple of a larger power of two g, those pieces start at only 4096 / g
// offsets within a page, so they reach a w / g share of the sets of a physically indexed
// cache: a 1024 x 1024 float32 normalized along dim 0 (xsd 4 KiB) reached a sixteenth of
// the L2, and the block fell out of it between the statistics pass and the write, which
// read x from the L3 again. Where the block outgrows half of that share (n > L2 / 2g: page
// frames are placed at random, so the share fills before it is full), the block goes
// through a per-thread buffer, one contiguous run of w bytes an element: on AVX-512 the
// one statistics pass stores each vector it loads there and the write pass reads it
// (one more store per load); the three passes (AVX2, and the blocks the one-pass guard
// refuses) copy the block there first and run on the copy. Blocks over half the L2 keep
// reading x (docs/notes/elementwise.md, "Adjacent rows packed where their strides
// alias"). pack_block: the buffer for n elements of w bytes, or nullptr where x serves.
float* pack_block(int64_t xsd, int64_t n, int64_t w) {
  const int64_t l2 = cpu_caches().l2 > 0 ? cpu_caches().l2 : int64_t{1} << 20;
  const int64_t g = std::gcd(xsd, int64_t{4096});
  if (g <= w || n <= l2 / (2 * g) || n * w > l2 / 2) return nullptr;
  // a buffer of its own, not tile_scratch: normalize_strided16 holds its widened x there
  // while these kernels run on it
  static thread_local std::vector<float> buf;
  const size_t floats = static_cast<size_t>(n * w / 4 + 16);
  if (buf.size() < floats) buf.resize(floats);
  float* const p = buf.data();
  return p + (16 - reinterpret_cast<uintptr_t>(p) / 4 % 16) % 16;  // 64-byte aligned
}

template <int NV>
void normalize_cols_nv(const char* x, int64_t xsd, char* out, int64_t ocs, int64_t osd, int kk, int64_t n, double eps) {
  if (kk % 8) normalize_cols_f32<NV, true>(x, xsd, out, ocs, osd, kk, n, eps);
  else normalize_cols_f32<NV, false>(x, xsd, out, ocs, osd, kk, n, eps);
}

inline void normalize_cols64_f32(const char* x, int64_t xsd, char* out, int64_t ocs, int64_t osd, int kk, int64_t n,
                                 double eps) {
  const int64_t w = 32 * ((kk + 7) / 8);  // Note [Adjacent rows packed where their strides alias]
  if (float* const pack = pack_block(xsd, n, w)) {
    for (int64_t i = 0; i < n; ++i) std::memcpy(reinterpret_cast<char*>(pack) + i * w, x + i * xsd, 4 * static_cast<size_t>(kk));
    g_cols_packed.fetch_add(1, std::memory_order_relaxed);
    x = reinterpret_cast<const char*>(pack);
    xsd = w;
  }
  switch ((kk + 7) / 8) {
    case 1: return normalize_cols_nv<1>(x, xsd, out, ocs, osd, kk, n, eps);
    case 2: return normalize_cols_nv<2>(x, xsd, out, ocs, osd, kk, n, eps);
    case 3: return normalize_cols_nv<3>(x, xsd, out, ocs, osd, kk, n, eps);
    case 4: return normalize_cols_nv<4>(x, xsd, out, ocs, osd, kk, n, eps);
    case 5: return normalize_cols_nv<5>(x, xsd, out, ocs, osd, kk, n, eps);
    case 6: return normalize_cols_nv<6>(x, xsd, out, ocs, osd, kk, n, eps);
    case 7: return normalize_cols_nv<7>(x, xsd, out, ocs, osd, kk, n, eps);
    default: return normalize_cols_nv<8>(x, xsd, out, ocs, osd, kk, n, eps);
  }
}

#ifdef SB_HAVE_AVX512
#define SB_ZMM_COLS __attribute__((target("avx2,fma,avx512f,avx512vl")))
// Note [Adjacent rows in one pass]: with AVX-512, the kk <= 64 adjacent rows of Note
// [Normalize across adjacent rows] take one statistics pass where the data allow it:
// S = sum(x - c) and Q = sum((x - c)^2), 16 rows a zmm register, flushed to double every
// kStatFlush elements; then in double lanes mean = c + S/n and var = (Q - S^2/n)/n, and
// 1/sqrt(var + eps) by Note [Normalize rsqrt]. The shift c is x0 + the mean of x - x0
// over the first 16 elements (x0: element 0): x0 alone lies more than one standard
// deviation from the mean in a third of Gaussian rows, and a constant row's c is its
// own value, so its deviations are 0 (a mean of the 16 values themselves is not, and
// its squares overflowed for a row of 3e38). The shift costs precision only where the
// mean lies far from c: the guard 2 S^2/n <= Q (|mean - c| within one standard
// deviation, as fused_finish's) and a finite Q keep the error of a second pass's; a
// block with a row that fails either goes through the three passes
// (normalize_cols64_f32, their results for such rows), so rows the shift does not suit
// (sorted, or their first 16 elements apart from the rest) pay one pass more. The write
// pass is the three passes' own (cols_write_f32). Two passes of 8-lane loads and vector
// work become one of 16 lanes, and the per-row finish vector work.

// cols_write_f32 for kk <= 64 rows, its NV and MASKED chosen at run time
inline void cols_write_any(const char* x, int64_t xsd, char* out, int64_t ocs, int64_t osd, int kk, int64_t n,
                           const float* mean, const float* rstd) {
  using W = void (*)(const char*, int64_t, char*, int64_t, int64_t, int, int64_t, const float*, const float*);
  static constexpr W kWrite[2][8] = {
      {cols_write_f32<1, false>, cols_write_f32<2, false>, cols_write_f32<3, false>, cols_write_f32<4, false>,
       cols_write_f32<5, false>, cols_write_f32<6, false>, cols_write_f32<7, false>, cols_write_f32<8, false>},
      {cols_write_f32<1, true>, cols_write_f32<2, true>, cols_write_f32<3, true>, cols_write_f32<4, true>,
       cols_write_f32<5, true>, cols_write_f32<6, true>, cols_write_f32<7, true>, cols_write_f32<8, true>}};
  kWrite[kk % 8 != 0][(kk + 7) / 8 - 1](x, xsd, out, ocs, osd, kk, n, mean, rstd);
}

// 16 rows a register, NZ registers; the last one's lanes from kk on (off in last) load 0
template <int NZ>
SB_ZMM_COLS __attribute__((always_inline)) inline VZ::V load_rows(const float* p, int v, VZ::Mask last) {
  return v == NZ - 1 ? VZ::maskz_load(last, p + 16 * v) : VZ::load(p + 16 * v);
}

// one element of every row into the sums: d = x - c, s += d, q += d^2
template <int NZ>
SB_ZMM_COLS __attribute__((always_inline)) inline void step_rows(VZ::V (&s)[NZ], VZ::V (&q)[NZ], const VZ::V (&c)[NZ],
                                                                 const float* xi, VZ::Mask last, float* pk = nullptr) {
  for (int v = 0; v < NZ; ++v) {
    const VZ::V e = load_rows<NZ>(xi, v, last);
    if (pk) VZ::store(pk + 16 * v, e);
    const VZ::V d = VZ::sub(e, c[v]);
    s[v] = VZ::add(s[v], d);
    q[v] = VZ::fma(d, d, q[v]);
  }
}

// d[0 .. 16) += the 16 float lanes of v (= where first), widened a half at a time
// (masked extracts: GCC 12 warns on the plain ones' undefined source, as fold_halves says)
SB_ZMM_COLS __attribute__((always_inline)) inline void flush16(double* d, __m512 v, bool first) {
  const __m512d vd = _mm512_castps_pd(v);
  const __m256 lo = _mm256_castpd_ps(_mm512_mask_extractf64x4_pd(_mm256_setzero_pd(), 0xF, vd, 0));
  const __m256 hi = _mm256_castpd_ps(_mm512_mask_extractf64x4_pd(_mm256_setzero_pd(), 0xF, vd, 1));
  const __m512d z = _mm512_setzero_pd();
  _mm512_store_pd(d, _mm512_add_pd(first ? z : _mm512_load_pd(d), _mm512_maskz_cvtps_pd(0xFF, lo)));
  _mm512_store_pd(d + 8, _mm512_add_pd(first ? z : _mm512_load_pd(d + 8), _mm512_maskz_cvtps_pd(0xFF, hi)));
}

// r[0 .. 8) = 1/sqrt(q/n + eps) from q = n var in double lanes: Note [Normalize rsqrt]'s
// float rsqrt and Newton step where every variance is a normal float, else double sqrt
// and div (rn = 1/n, ev = eps)
SB_ZMM_COLS __attribute__((always_inline)) inline void finish_rstd8(float* r, __m512d q, __m512d rn, __m512d ev) {
  const __m512d var = _mm512_fmadd_pd(q, rn, ev);
  const VF::V vf = _mm512_maskz_cvtpd_ps(0xFF, var);
  if (VF::all(normal_var_ps(vf))) {
    VF::store_aligned(r, rsqrt_newton_ps(vf));
    return;
  }
  VF::store_aligned(r, _mm512_maskz_cvtpd_ps(0xFF, _mm512_div_pd(_mm512_set1_pd(1.0), _mm512_maskz_sqrt_pd(0xFF, var))));
}

// NZ zmm registers of rows (kk <= 16 NZ; the last one's lanes from kk on load 0).
template <int NZ, bool PACK>
SB_ZMM_COLS bool normalize_cols_zmm(const char* x, int64_t xsd, char* out, int64_t ocs, int64_t osd, int kk,
                                    int64_t n, double eps, float* pack) {
  if (n < 1) return false;  // never: tells GCC that the sums are written before they are read
  const VZ::Mask last = static_cast<VZ::Mask>(kk - 16 * (NZ - 1) >= 16 ? 0xFFFF : (1u << (kk - 16 * (NZ - 1))) - 1);
  // kU accumulators a vector of rows, element i into [i % kU]: 3 operations an element
  // and vector against an add's latency (as the three passes' kU)
  constexpr int kU = NZ >= 4 ? 1 : NZ >= 2 ? 2 : 4;
  alignas(64) double sum[16 * NZ], sq[16 * NZ];
  VZ::V c[NZ], s[kU][NZ], q[kU][NZ];
  // the shift: x0 + the mean of x - x0 over the first m elements, m = 16 or the largest
  // power of two <= n (x0: element 0; a constant row's shift is x0 itself, exactly)
  const int m = n >= 16 ? 16 : n >= 8 ? 8 : n >= 4 ? 4 : n >= 2 ? 2 : 1;
  const VZ::V rm = VZ::set1(1.0f / static_cast<float>(m));
  VZ::V x0[NZ];
  for (int v = 0; v < NZ; ++v) {
    x0[v] = load_rows<NZ>(reinterpret_cast<const float*>(x), v, last);
    c[v] = VZ::zero();
  }
  for (int i = 1; i < m; ++i)
    for (int v = 0; v < NZ; ++v)
      c[v] = VZ::add(c[v], VZ::sub(load_rows<NZ>(reinterpret_cast<const float*>(x + i * xsd), v, last), x0[v]));
  for (int v = 0; v < NZ; ++v) c[v] = VZ::fma(c[v], rm, x0[v]);
  for (int64_t c0 = 0; c0 < n; c0 += kStatFlush) {  // s over x - c, q over its squares
    const int64_t ce = std::min(n, c0 + kStatFlush);
    for (int u = 0; u < kU; ++u)
      for (int v = 0; v < NZ; ++v) s[u][v] = q[u][v] = VZ::zero();
    int64_t i = c0;
    for (; i + kU <= ce; i += kU)
      for (int u = 0; u < kU; ++u)
        step_rows<NZ>(s[u], q[u], c, reinterpret_cast<const float*>(x + (i + u) * xsd), last,
                      PACK ? pack + (i + u) * 16 * NZ : nullptr);
    for (; i < ce; ++i)
      step_rows<NZ>(s[0], q[0], c, reinterpret_cast<const float*>(x + i * xsd), last, PACK ? pack + i * 16 * NZ : nullptr);
    for (int v = 0; v < NZ; ++v) {
      for (int u = 1; u < kU; ++u) {
        s[0][v] = VZ::add(s[0][v], s[u][v]);
        q[0][v] = VZ::add(q[0][v], q[u][v]);
      }
      flush16(sum + 16 * v, s[0][v], c0 == 0);
      flush16(sq + 16 * v, q[0][v], c0 == 0);
    }
  }
  // mean and 1/std in double lanes; lanes from kk on summed zeros and pass the guard
  alignas(64) float shift[16 * NZ], mean[16 * NZ], rstd[16 * NZ];
  for (int v = 0; v < NZ; ++v) VZ::store(shift + 16 * v, c[v]);
  const __m512d rn = _mm512_set1_pd(1.0 / static_cast<double>(n)), ev = _mm512_set1_pd(eps);
  const __m512d big = _mm512_set1_pd(std::numeric_limits<double>::max());
  for (int k = 0; k < 16 * NZ; k += 8) {
    const __m512d sk = _mm512_load_pd(sum + k), qk = _mm512_load_pd(sq + k);
    const __m512d m1 = _mm512_mul_pd(sk, rn), t = _mm512_mul_pd(sk, m1);
    const __mmask8 ok = _mm512_cmp_pd_mask(_mm512_add_pd(t, t), qk, _CMP_LE_OQ) & _mm512_cmp_pd_mask(qk, big, _CMP_LE_OQ);
    if (ok != 0xFF) return false;
    _mm256_store_ps(mean + k, _mm512_maskz_cvtpd_ps(0xFF, _mm512_add_pd(_mm512_maskz_cvtps_pd(0xFF, _mm256_load_ps(shift + k)), m1)));
    finish_rstd8(rstd + k, _mm512_sub_pd(qk, t), rn, ev);
  }
  if (PACK) cols_write_any(reinterpret_cast<const char*>(pack), 64 * NZ, out, ocs, osd, kk, n, mean, rstd);
  else cols_write_any(x, xsd, out, ocs, osd, kk, n, mean, rstd);
  return true;
}

// kk <= 64 adjacent rows in one statistics pass; false, with nothing written, where a
// row fails the guard (Note [Adjacent rows in one pass]); pack: Note [Adjacent rows
// packed where their strides alias], or nullptr
SB_ZMM_COLS inline bool normalize_cols64_zmm(const char* x, int64_t xsd, char* out, int64_t ocs, int64_t osd, int kk,
                                             int64_t n, double eps, float* pack) {
  switch ((kk + 15) / 16) {
    case 1: return pack ? normalize_cols_zmm<1, true>(x, xsd, out, ocs, osd, kk, n, eps, pack) : normalize_cols_zmm<1, false>(x, xsd, out, ocs, osd, kk, n, eps, nullptr);
    case 2: return pack ? normalize_cols_zmm<2, true>(x, xsd, out, ocs, osd, kk, n, eps, pack) : normalize_cols_zmm<2, false>(x, xsd, out, ocs, osd, kk, n, eps, nullptr);
    case 3: return pack ? normalize_cols_zmm<3, true>(x, xsd, out, ocs, osd, kk, n, eps, pack) : normalize_cols_zmm<3, false>(x, xsd, out, ocs, osd, kk, n, eps, nullptr);
    default: return pack ? normalize_cols_zmm<4, true>(x, xsd, out, ocs, osd, kk, n, eps, pack) : normalize_cols_zmm<4, false>(x, xsd, out, ocs, osd, kk, n, eps, nullptr);
  }
}
#undef SB_ZMM_COLS
#endif
#endif

}  // namespace

#ifdef SB_HAVE_AVX2
void normalize_adjacent_rows_f32(bool vl, char* const* p, const int64_t* s, int64_t rows, int64_t n, int64_t xsd,
                                 int64_t osd, double eps) {
  for (int64_t r0 = 0; r0 < rows; r0 += 64) {
    const int kk = static_cast<int>(std::min<int64_t>(64, rows - r0));
#ifdef SB_HAVE_AVX512
    if (vl) {  // Note [Adjacent rows in one pass]
      float* const pack = pack_block(xsd, n, 64 * ((kk + 15) / 16));  // Note [Adjacent rows packed where their strides alias]
      if (normalize_cols64_zmm(p[1] + r0 * s[1], xsd, p[0] + r0 * s[0], s[0], osd, kk, n, eps, pack)) {
        if (pack) g_cols_packed.fetch_add(1, std::memory_order_relaxed);
        continue;
      }
      g_cols_fallbacks.fetch_add(1, std::memory_order_relaxed);
    }
#else
    (void)vl;
#endif
    normalize_cols64_f32(p[1] + r0 * s[1], xsd, p[0] + r0 * s[0], s[0], osd, kk, n, eps);
  }
}
#endif

}  // namespace ew

int64_t normalize_cols_fallbacks() { return ew::g_cols_fallbacks.load(std::memory_order_relaxed); }
int64_t normalize_cols_packed() { return ew::g_cols_packed.load(std::memory_order_relaxed); }

}  // namespace sb
#undef SB_ZMM
