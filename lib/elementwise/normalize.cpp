// normalize.cpp — normalize(x, dim, eps): (x - mean) / sqrt(var + eps) along one dim
// (CPU; CUDA via lib/cuda), in-place, out= and out-of-place, on the shared strided
// iterator with one strip element per row. Cost: x read three times per dense row
// (twice from L1/L2) or twice per strided row (an outer dim), the output written once.
#include "stridebench/elementwise.h"

#include <algorithm>
#include <limits>
#include <atomic>
#include <cmath>

#include "stridebench/cpu_features.h"
#include "elementwise/strips.h"
#include "elementwise/iterator.h"
#include "core/transpose_tile.h"
#include "copy/copy.h"

#ifdef SB_HAVE_AVX2
#include <immintrin.h>
#endif
#ifdef SB_WITH_CUDA
#include "cuda/cuda_backend.h"
#endif

namespace sb {

namespace {

using namespace ew;

// ---------------------------------------------------------------- row kernels


// Mean and 1/sqrt(var + eps) of n elements at x (stride stride_bytes), in double.
// Note [Normalize row statistics]: two passes, the mean, then S = sum(x - m) and
// Q = sum((x - m)^2) with m the mean rounded to the accumulation type; var = (Q - S^2/n)/n
// is exact in that shift, so the rounding of m costs nothing. On the AVX2 path float32
// and float16 rows accumulate in float32 lanes (two vectors per sum), flushed into double
// every kStatFlush elements as the reductions do (docs/notes/copy-reduce.md, Accuracy):
// a 64-element row costs ~20 vector ops, against ~60 with every 8 floats widened to two
// double vectors; float64 rows accumulate in double vectors.
constexpr int64_t kStatFlush = 1024;
constexpr int kMaxStatRows = 8;  // rows per row_stats_block

#ifdef SB_HAVE_AVX2
// sum(x) of a dense row, in the lanes of acc_t<T>, flushed to double every kStatFlush.
// The mean of a dense row: x0 + sum(x - x0) / n, x0 = xt[0] (Note [Short normalize rows]).
template <typename T>
double dense_mean(const T* xt, int64_t n) {
  using A = acc_t<T>;
  using IO = Vec<T>;
  using SV = Vec<A>;
  constexpr int W = IO::kW;
  const A x0 = A(xt[0]);
  const typename SV::V x0v = SV::set1(x0);
  double sum = 0;
  for (int64_t c = 0; c < n; c += kStatFlush) {
    const int64_t ce = std::min(n, c + kStatFlush);
    typename SV::V s0 = SV::zero(), s1 = SV::zero();
    int64_t j = c;
    for (; j + 2 * W <= ce; j += 2 * W) {
      s0 = SV::add(s0, SV::sub(IO::load(xt + j), x0v));
      s1 = SV::add(s1, SV::sub(IO::load(xt + j + W), x0v));
    }
    if (j + W <= ce) { s0 = SV::add(s0, SV::sub(IO::load(xt + j), x0v)); j += W; }
    sum += SV::hsum(SV::add(s0, s1));
    for (; j < ce; ++j) sum += static_cast<double>(A(xt[j]) - x0);
  }
  return static_cast<double>(x0) + sum / static_cast<double>(n);
}

// S = sum(x - m) and Q = sum((x - m)^2) of a dense row.
template <typename T>
void dense_centered(const T* xt, int64_t n, acc_t<T> m, double* ss_out, double* sq_out) {
  using A = acc_t<T>;
  using IO = Vec<T>;
  using SV = Vec<A>;
  constexpr int W = IO::kW;
  const typename SV::V mv = SV::set1(m);  // not IO::set1: for float16 that would round m to half
  double ss = 0, sq = 0;
  for (int64_t c = 0; c < n; c += kStatFlush) {
    const int64_t ce = std::min(n, c + kStatFlush);
    typename SV::V d0 = SV::zero(), d1 = SV::zero(), q0 = SV::zero(), q1 = SV::zero();
    int64_t j = c;
    for (; j + 2 * W <= ce; j += 2 * W) {
      const auto a = SV::sub(IO::load(xt + j), mv), b = SV::sub(IO::load(xt + j + W), mv);
      d0 = SV::add(d0, a);
      d1 = SV::add(d1, b);
      q0 = SV::fma(a, a, q0);
      q1 = SV::fma(b, b, q1);
    }
    if (j + W <= ce) {
      const auto a = SV::sub(IO::load(xt + j), mv);
      d0 = SV::add(d0, a);
      q0 = SV::fma(a, a, q0);
      j += W;
    }
    ss += SV::hsum(SV::add(d0, d1));
    sq += SV::hsum(SV::add(q0, q1));
    for (; j < ce; ++j) {
      const double d = static_cast<double>(A(xt[j]) - m);
      ss += d;
      sq += d * d;
    }
  }
  *ss_out = ss;
  *sq_out = sq;
}
#endif

#ifdef SB_HAVE_AVX2
// [sum(a[0]), ..., sum(a[7])]: the 8 horizontal sums as one vector.
inline __m256 hsum8_ps(const __m256* a) {
  const __m256 t0 = _mm256_hadd_ps(a[0], a[1]), t1 = _mm256_hadd_ps(a[2], a[3]);
  const __m256 t2 = _mm256_hadd_ps(a[4], a[5]), t3 = _mm256_hadd_ps(a[6], a[7]);
  const __m256 u0 = _mm256_hadd_ps(t0, t1), u1 = _mm256_hadd_ps(t2, t3);
  return _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20), _mm256_permute2f128_ps(u0, u1, 0x31));
}

// Note [Normalize rsqrt] (below): the lanes whose variance the float path keeps (normal
// and finite), and 1/sqrt(var) as rsqrt's 12 bits and one Newton step. Shared by the
// rows kernel and the fused groups.
inline __m256 normal_var_ps(__m256 var) {
  return _mm256_and_ps(_mm256_cmp_ps(var, _mm256_set1_ps(std::numeric_limits<float>::min()), _CMP_GE_OQ),
                       _mm256_cmp_ps(var, _mm256_set1_ps(std::numeric_limits<float>::max()), _CMP_LE_OQ));
}
inline __m256 rsqrt_newton_ps(__m256 var) {
  const __m256 r = _mm256_rsqrt_ps(var);
  return _mm256_mul_ps(r, _mm256_fnmadd_ps(_mm256_mul_ps(_mm256_set1_ps(0.5f), var), _mm256_mul_ps(r, r),
                                           _mm256_set1_ps(1.5f)));
}

// Note [One statistics pass] (below): the 8 rows' mean and q = sum((x - mean)^2) from one
// pass; false when a row's result is not to be trusted (then mean and q are unset).
template <bool InOrder>
__attribute__((always_inline)) inline bool one_pass_stats(const float* const (&xs)[8], int64_t nv, int64_t rem,
                                                          __m256i mask, int64_t n, float* mean, __m256* q_out) {
  __m256 c[8], s[8], q[8];
  for (int k = 0; k < 8; ++k) c[k] = _mm256_loadu_ps(xs[k]);
  alignas(32) float cs[8];
  const __m256 cv = _mm256_mul_ps(hsum8_ps(c), _mm256_set1_ps(0.125f));
  _mm256_store_ps(cs, cv);
  for (int k = 0; k < 8; ++k) {
    c[k] = _mm256_set1_ps(cs[k]);
    s[k] = _mm256_setzero_ps();
    q[k] = _mm256_setzero_ps();
  }
  if constexpr (InOrder) {  // Note [Normalize rows in address order]
    for (int k = 0; k < 8; ++k)
      for (int64_t v = 0; v < nv; ++v) {
        const __m256 d = _mm256_sub_ps(_mm256_loadu_ps(xs[k] + 8 * v), c[k]);
        s[k] = _mm256_add_ps(s[k], d);
        q[k] = _mm256_fmadd_ps(d, d, q[k]);
      }
  } else {
    for (int64_t v = 0; v < nv; ++v)
      for (int k = 0; k < 8; ++k) {
        const __m256 d = _mm256_sub_ps(_mm256_loadu_ps(xs[k] + 8 * v), c[k]);
        s[k] = _mm256_add_ps(s[k], d);
        q[k] = _mm256_fmadd_ps(d, d, q[k]);
      }
  }
  if (rem)  // masked lanes: c - c
    for (int k = 0; k < 8; ++k) {
      const __m256 d = _mm256_sub_ps(
          _mm256_blendv_ps(c[k], _mm256_maskload_ps(xs[k] + 8 * nv, mask), _mm256_castsi256_ps(mask)), c[k]);
      s[k] = _mm256_add_ps(s[k], d);
      q[k] = _mm256_fmadd_ps(d, d, q[k]);
    }
  const __m256 sv = hsum8_ps(s), qv = hsum8_ps(q);
  const __m256 m1 = _mm256_div_ps(sv, _mm256_set1_ps(static_cast<float>(n)));
  const __m256 t = _mm256_mul_ps(sv, m1);  // S^2 / n >= 0
  const __m256 ok = _mm256_and_ps(_mm256_cmp_ps(_mm256_add_ps(t, t), qv, _CMP_LE_OQ),
                                  _mm256_cmp_ps(qv, _mm256_set1_ps(std::numeric_limits<float>::max()), _CMP_LE_OQ));
  if (_mm256_movemask_ps(ok) != 0xFF) return false;
  _mm256_store_ps(mean, _mm256_add_ps(cv, m1));
  *q_out = _mm256_sub_ps(qv, t);
  return true;
}

// Note [Short normalize rows]: float32 rows of n <= kStatFlush elements, dense in x and
// out, nr <= 8 at a time (row k at x + k * xr, out + k * orow). Every pass walks the 8 rows
// side by side (8 independent accumulator chains; rows from memory one after another,
// Note [Normalize rows in address order]), the 8 horizontal sums come out of one
// hadd tree, and mean, 1/sqrt(var + eps) are computed for the 8 rows in two vectors. The
// mean is x0 + sum(x - x0) / n with x0 the row's first element, so the float32 sums are of
// deviations, not of values far from 0 (a constant row gets its mean exactly: (x - m) is
// 0, not a rounding error that 1/sqrt(eps) blows up). The variance is sum((x - m)^2) / n
// around the float32 mean m (no S^2/n correction: it is of the order of m's rounding
// squared). Elements past n % 8 are masked off.
// NT: the output rows are written with streaming stores (Note [Streaming normalize
// outputs]); the caller guarantees n % 8 == 0 and 32-byte aligned output rows.
// The body, compiled into each of the two entries below.
//
// Note [One statistics pass]: with OnePass, rows of n >= 8 first try S = sum(x - c) and
// Q = sum((x - c)^2) in one pass, c = the mean of the row's first 8 elements (a pairwise
// sum times 1/8: exact for a constant row), and q = Q - S * S/n, mean = c + S/n. That
// saves a load and a subtract per 8 elements of the FP-add-bound loops. Its error is
// Q's rounding amplified by Q/q = 1 + (mean - c)^2 / var, at most 1 + n/8 since c is
// the mean of 8 of the row's own elements. The group keeps it only when every row has
// 2 S * S/n <= Q (amplification <= 2, the two-pass error's order) and a finite Q;
// otherwise (a sorted row, NaN, inf, a shift that overflows) the group takes the two
// exact passes. Groups of Gaussian rows pass about 96% of the time
// (docs/notes/elementwise.md). Only the AVX-512VL build takes it: its 16 accumulators
// and 8 shifts fit in ymm0-31.
template <bool NT, bool OnePass, bool InOrder>
__attribute__((always_inline)) inline void normalize_rows8_body(const char* x, int64_t xr, char* out, int64_t orow,
                                                                int nr, int64_t n, double eps) {
  const int64_t nv = n / 8, rem = n % 8;
  alignas(32) static const int32_t kIdx[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
  const __m256i mask = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kIdx + 8 - rem));
  const float* xs[8];
  for (int k = 0; k < 8; ++k) xs[k] = reinterpret_cast<const float*>(x + std::min(k, nr - 1) * xr);
  alignas(32) float mean[8];
  __m256 q;
  if (OnePass && nv > 0 && one_pass_stats<InOrder>(xs, nv, rem, mask, n, mean, &q)) {
    // mean and q from one pass
  } else {  // two exact passes
    __m256 acc[8], x0[8];
    for (int k = 0; k < 8; ++k) {
      acc[k] = _mm256_setzero_ps();
      x0[k] = _mm256_broadcast_ss(xs[k]);
    }
    if constexpr (InOrder) {
      for (int k = 0; k < 8; ++k)
        for (int64_t v = 0; v < nv; ++v) acc[k] = _mm256_add_ps(acc[k], _mm256_sub_ps(_mm256_loadu_ps(xs[k] + 8 * v), x0[k]));
    } else {
      for (int64_t v = 0; v < nv; ++v)
        for (int k = 0; k < 8; ++k) acc[k] = _mm256_add_ps(acc[k], _mm256_sub_ps(_mm256_loadu_ps(xs[k] + 8 * v), x0[k]));
    }
    if (rem)  // masked lanes: x0 - x0
      for (int k = 0; k < 8; ++k)
        acc[k] = _mm256_add_ps(acc[k], _mm256_sub_ps(_mm256_blendv_ps(x0[k], _mm256_maskload_ps(xs[k] + 8 * nv, mask),
                                                                      _mm256_castsi256_ps(mask)), x0[k]));
    alignas(32) float first[8];
    for (int k = 0; k < 8; ++k) first[k] = *xs[k];
    _mm256_store_ps(mean, _mm256_add_ps(_mm256_load_ps(first),
                                        _mm256_div_ps(hsum8_ps(acc), _mm256_set1_ps(static_cast<float>(n)))));
    for (int k = 0; k < 8; ++k) acc[k] = _mm256_setzero_ps();
    for (int64_t v = 0; v < nv; ++v)
      for (int k = 0; k < 8; ++k) {
        const __m256 d = _mm256_sub_ps(_mm256_loadu_ps(xs[k] + 8 * v), _mm256_set1_ps(mean[k]));
        acc[k] = _mm256_fmadd_ps(d, d, acc[k]);
      }
    if (rem)
      for (int k = 0; k < 8; ++k) {  // masked lanes load 0: blend them to the mean so they add 0
        const __m256 xv = _mm256_blendv_ps(_mm256_set1_ps(mean[k]), _mm256_maskload_ps(xs[k] + 8 * nv, mask),
                                           _mm256_castsi256_ps(mask));
        const __m256 d = _mm256_sub_ps(xv, _mm256_set1_ps(mean[k]));
        acc[k] = _mm256_fmadd_ps(d, d, acc[k]);
      }
    q = hsum8_ps(acc);
  }
  // Note [Normalize rsqrt]: 1/sqrt(q/n + eps) in float, rsqrt's 12 bits and one Newton
  // step r(1.5 - v r^2 / 2) (~23 bits), where double sqrt and div took two long-latency
  // ops per 4 rows (10% of a 64-float row's time). A variance that is 0, subnormal,
  // infinite or NaN (eps = 0, or sums that overflow float) takes the double path, whose
  // results for those (inf, a finite 1/sqrt, 0, NaN) the Newton step would not keep.
  const __m256 var = _mm256_fmadd_ps(q, _mm256_set1_ps(1.0f / static_cast<float>(n)), _mm256_set1_ps(static_cast<float>(eps)));
  alignas(32) float rstd[8];
  if (_mm256_movemask_ps(normal_var_ps(var)) == 0xFF) {
    _mm256_store_ps(rstd, rsqrt_newton_ps(var));
  } else {
    const __m256d rn = _mm256_set1_pd(1.0 / static_cast<double>(n)), ev = _mm256_set1_pd(eps), one = _mm256_set1_pd(1.0);
    const __m256d r0 = _mm256_div_pd(one, _mm256_sqrt_pd(_mm256_fmadd_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(q)), rn, ev)));
    const __m256d r1 = _mm256_div_pd(one, _mm256_sqrt_pd(_mm256_fmadd_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(q, 1)), rn, ev)));
    _mm256_store_ps(rstd, _mm256_set_m128(_mm256_cvtpd_ps(r1), _mm256_cvtpd_ps(r0)));
  }
  for (int k = 0; k < nr; ++k) {
    const __m256 mv = _mm256_set1_ps(mean[k]), rv = _mm256_set1_ps(rstd[k]);
    float* o = reinterpret_cast<float*>(out + k * orow);
    for (int64_t v = 0; v < nv; ++v) {
      const __m256 y = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(xs[k] + 8 * v), mv), rv);
      if constexpr (NT) _mm256_stream_ps(o + 8 * v, y);
      else _mm256_storeu_ps(o + 8 * v, y);
    }
    if (rem)
      _mm256_maskstore_ps(o + 8 * nv, mask, _mm256_mul_ps(_mm256_sub_ps(_mm256_maskload_ps(xs[k] + 8 * nv, mask), mv), rv));
  }
}

// Note [Normalize rows with 32 registers]: each pass keeps 8 accumulators and 8 per-row
// constants (x0, then the mean) live, one more than the 16 ymm registers of AVX2, so
// GCC spilled inside the inner loops (92 stack accesses in the AVX2 build of this kernel).
// Where the CPU has AVX-512VL the same source is compiled with it (EVEX encodings reach
// ymm16-31) and taken at run time; the instructions otherwise stay 256-bit.
template <bool NT, bool InOrder = false>
void normalize_rows8_f32_avx2(const char* x, int64_t xr, char* out, int64_t orow, int nr, int64_t n, double eps) {
  normalize_rows8_body<NT, false, InOrder>(x, xr, out, orow, nr, n, eps);
}
#ifdef SB_HAVE_AVX512
template <bool NT, bool InOrder = false>
__attribute__((target("avx512f,avx512vl"))) void normalize_rows8_f32_vl(const char* x, int64_t xr, char* out,
                                                                          int64_t orow, int nr, int64_t n, double eps) {
  normalize_rows8_body<NT, true, InOrder>(x, xr, out, orow, nr, n, eps);
}
#endif

// The rows kernel of Note [Short normalize rows]; vl: the AVX-512VL build (use_avx512());
// InOrder: its statistics passes walk the rows one after another (Note [Normalize rows
// in address order]), else side by side.
template <bool NT = false, bool InOrder = false>
inline void normalize_rows8_f32(bool vl, const char* x, int64_t xr, char* out, int64_t orow, int nr, int64_t n,
                                double eps) {
#ifdef SB_HAVE_AVX512
  if (vl) return normalize_rows8_f32_vl<NT, InOrder>(x, xr, out, orow, nr, n, eps);
#endif
  (void)vl;
  normalize_rows8_f32_avx2<NT, InOrder>(x, xr, out, orow, nr, n, eps);
}

#ifdef SB_HAVE_AVX512
// Note [Fused normalize groups]: float32 rows of 16 <= n <= kFusedMaxN elements, dense
// in x and out, in groups of 8 (Note [Short normalize rows]) on AVX-512. The rows kernel
// above runs a group's statistics pass, then the chain that turns its sums into
// constants (horizontal sums, division, guard, rsqrt), then its write pass; at 64-element
// rows the core waited on that chain and on each pass's own pipes (FP adds for the sums,
// loads and stores for the write) about half the time. Here pass g sums group g
// (Note [One statistics pass]: the same shift, sums and guard) and, row by row in the
// same loop, writes group g - 2, whose constants were computed a pass earlier; 16 floats
// per vector, the row tails masked. The write is (x + (-mean)) * rstd, bit for bit the
// rows kernel's (x - mean) * rstd. A group whose guard or variance check fails goes to
// the rows kernel whole (its two exact passes, the double rsqrt path) right away.
// Three groups are in flight: above 256 elements they outgrow L1 and the rows kernel is
// faster. It is taken only where x fits the caches (at most copy.h's
// nt_threshold_bytes(), the rule that decides streaming): with the loads coming from DRAM
// it took 1.3-1.7x the rows kernel's time, and rows from memory take Note [Normalize rows
// in address order] instead (docs/notes/elementwise.md). Stepped rows (a sliced
// x) are packed into a 32 KiB buffer, as many rows at a time as it holds, and take the
// same loop from there.
//
// Note [Fused groups and 4K aliasing]: a load whose address matches an older, still
// pending store in its low 12 bits waits for that store (the core compares those bits
// first). When out sits 4-256 bytes past x modulo 4 KiB, each store of the write to
// out[v] matches the loads of x a vector or a few later, and the fused loop ran up to
// 1.7x its time at offset 0; at 48-128 bytes that made it slower than the rows kernel,
// which the offset barely moves (docs/notes/elementwise.md). Those calls take the rows
// kernel. In place (offset 0) and every other offset keep the fused loop; with different
// row strides in x and out the offset of the first rows decides.
constexpr int64_t kFusedMinN = 16, kFusedMaxN = 256;

constexpr uintptr_t kAliasLo = 32, kAliasHi = 128;  // bytes; Note [Fused groups and 4K aliasing]

// Note [Fused groups and 4K aliasing]: whether stores to out would hold up loads from x.
inline bool stores_alias_loads(const char* out, const char* x) {
  const uintptr_t d = (reinterpret_cast<uintptr_t>(out) - reinterpret_cast<uintptr_t>(x)) & 4095;
  return d > kAliasLo && d <= kAliasHi;
}

#define SB_ZMM __attribute__((target("avx2,fma,avx512f,avx512vl")))

// The two 8-float halves of v added. The masked extracts with a zero source: GCC 12's
// unmasked forms start from an undefined vector and draw -Wmaybe-uninitialized.
SB_ZMM inline __m256 fold16_ps(__m512 v) {
  const __m512d d = _mm512_castps_pd(v);
  return _mm256_add_ps(_mm256_castpd_ps(_mm512_mask_extractf64x4_pd(_mm256_setzero_pd(), 0xF, d, 0)),
                       _mm256_castpd_ps(_mm512_mask_extractf64x4_pd(_mm256_setzero_pd(), 0xF, d, 1)));
}

// The per-group constants of the pipeline, in slots by group parity: the shifts of a
// group's statistics pass, and -mean and 1/std for its write pass.
struct FusedSlots {
  alignas(32) float shift[2][8];
  alignas(32) float negmean[2][8];
  alignas(32) float rstd[2][8];
};

// One pass over the 8 rows at xs (sums of x - shift into s and q, STATS) and the 8 rows
// at xw -> ow (the write with negmean and rstd, WRITE), row k of both at a time. Rows one
// after another, not side by side: each row's sums are one short chain (the rows' chains
// overlap out of order), and only one row's pointers and constants are live, where 8
// rows side by side spilled GCC's row pointers and scales in the fused loop.
// NTW: the write's whole vectors with streaming stores (64-byte aligned out rows).
template <bool STATS, bool WRITE, bool NTW = false>
SB_ZMM __attribute__((always_inline)) inline void fused_loop(const float* shift, const float* negmean, const float* rstd,
                                                             __m512 (&s)[8], __m512 (&q)[8], const char* xs,
                                                             const char* xw, char* ow, int64_t xr, int64_t orow,
                                                             int64_t n) {
  const int64_t nf = n / 16;
  const __mmask16 tm = static_cast<__mmask16>((1u << (n % 16)) - 1);
#pragma GCC unroll 8
  for (int k = 0; k < 8; ++k) {
    const float* xk = reinterpret_cast<const float*>(xs + k * xr);
    const float* wk = reinterpret_cast<const float*>(xw + k * xr);
    float* ok = reinterpret_cast<float*>(ow + k * orow);
    __m512 sk = _mm512_setzero_ps(), qk = _mm512_setzero_ps(), ck, mk, rk;
    if constexpr (STATS) ck = _mm512_set1_ps(shift[k]);
    if constexpr (WRITE) {
      mk = _mm512_set1_ps(negmean[k]);
      rk = _mm512_set1_ps(rstd[k]);
    }
    for (int64_t v = 0; v < nf; ++v) {
      if constexpr (STATS) {
        const __m512 d = _mm512_sub_ps(_mm512_loadu_ps(xk + 16 * v), ck);
        sk = _mm512_add_ps(sk, d);
        qk = _mm512_fmadd_ps(d, d, qk);
      }
      if constexpr (WRITE) {
        const __m512 y = _mm512_mul_ps(_mm512_add_ps(_mm512_loadu_ps(wk + 16 * v), mk), rk);
        if constexpr (NTW) _mm512_stream_ps(ok + 16 * v, y);
        else _mm512_storeu_ps(ok + 16 * v, y);
      }
    }
    if (tm) {  // the row tails
      if constexpr (STATS) {
        const __m512 d = _mm512_maskz_sub_ps(tm, _mm512_maskz_loadu_ps(tm, xk + 16 * nf), ck);
        sk = _mm512_add_ps(sk, d);
        qk = _mm512_fmadd_ps(d, d, qk);
      }
      if constexpr (WRITE)
        _mm512_mask_storeu_ps(ok + 16 * nf, tm, _mm512_mul_ps(_mm512_add_ps(_mm512_maskz_loadu_ps(tm, wk + 16 * nf), mk), rk));
    }
    s[k] = sk;
    q[k] = qk;
  }
}

// The shift of Note [One statistics pass]: the mean of each row's first 8 elements.
SB_ZMM __attribute__((always_inline)) inline void fused_shift(float* shift, const char* xs, int64_t xr) {
  __m256 c[8];
#pragma GCC unroll 8
  for (int k = 0; k < 8; ++k) c[k] = _mm256_loadu_ps(reinterpret_cast<const float*>(xs + k * xr));
  _mm256_store_ps(shift, _mm256_mul_ps(hsum8_ps(c), _mm256_set1_ps(0.125f)));
}

// The group's -mean and 1/std from its sums, as one_pass_stats and Note [Normalize
// rsqrt] compute them; false when the guard or the variance check fails.
SB_ZMM __attribute__((always_inline)) inline bool fused_finish(const float* shift, float* negmean, float* rstd,
                                                               const __m512 (&s)[8], const __m512 (&q)[8], int64_t n,
                                                               float eps) {
  __m256 s8[8], q8[8];
#pragma GCC unroll 8
  for (int k = 0; k < 8; ++k) {
    s8[k] = fold16_ps(s[k]);
    q8[k] = fold16_ps(q[k]);
  }
  const __m256 sv = hsum8_ps(s8), qv = hsum8_ps(q8);
  const __m256 m1 = _mm256_div_ps(sv, _mm256_set1_ps(static_cast<float>(n)));
  const __m256 t = _mm256_mul_ps(sv, m1);
  const __m256 var =
      _mm256_fmadd_ps(_mm256_sub_ps(qv, t), _mm256_set1_ps(1.0f / static_cast<float>(n)), _mm256_set1_ps(eps));
  const __m256 ok = _mm256_and_ps(
      _mm256_and_ps(_mm256_cmp_ps(_mm256_add_ps(t, t), qv, _CMP_LE_OQ),
                    _mm256_cmp_ps(qv, _mm256_set1_ps(std::numeric_limits<float>::max()), _CMP_LE_OQ)),
      normal_var_ps(var));
  if (_mm256_movemask_ps(ok) != 0xFF) return false;
  _mm256_store_ps(rstd, rsqrt_newton_ps(var));
  _mm256_store_ps(negmean, _mm256_sub_ps(_mm256_setzero_ps(), _mm256_add_ps(_mm256_load_ps(shift), m1)));
  return true;
}

// buf[j] = f[2j], j < n: a float row at a stride of 2 elements packed for the fused
// groups, 16 elements per two loads and a permute. The loads stop at the row's last
// element, f[2n - 2] (masked, fault-suppressing loads past it): pack_strided's AVX2 loop
// leaves its last 8 elements to scalar copies, a quarter of a 64-element row.
SB_ZMM inline void pack_stride2_f32(float* buf, const float* f, int64_t n) {
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  int64_t j = 0;
  for (; j + 16 <= n; j += 16)
    _mm512_storeu_ps(buf + j, _mm512_permutex2var_ps(_mm512_loadu_ps(f + 2 * j), even,
                                                     _mm512_maskz_loadu_ps(0x7FFF, f + 2 * j + 16)));
  if (j < n) {
    const int64_t c = 2 * (n - j) - 1;  // elements f[2j] .. f[2n - 2]
    const __mmask16 lo = static_cast<__mmask16>(c >= 16 ? 0xFFFF : (1u << c) - 1);
    const __mmask16 hi = static_cast<__mmask16>(c > 16 ? (1u << (c - 16)) - 1 : 0);
    _mm512_mask_storeu_ps(buf + j, static_cast<__mmask16>((1u << (n - j)) - 1),
                          _mm512_permutex2var_ps(_mm512_maskz_loadu_ps(lo, f + 2 * j), even,
                                                 _mm512_maskz_loadu_ps(hi, f + 2 * j + 16)));
  }
}

// rows rows of Note [Fused normalize groups]; plain stores (the caller streams elsewhere).
SB_ZMM void normalize_groups_f32(const char* x, int64_t xr, char* out, int64_t orow, int64_t rows, int64_t n,
                                 double eps) {
  FusedSlots st;
  const float e = static_cast<float>(eps);
  const int64_t ng = rows / 8;
  bool pending[2] = {false, false};  // slot g & 1 holds the constants of group g, not yet written
  __m512 s[8], q[8];
  if (ng > 0) fused_shift(st.shift[0], x, xr);
  for (int64_t g = 0; g < ng + 2; ++g) {
    const int p = static_cast<int>(g & 1);
    const char* xs = x + g * 8 * xr;
    const bool sums = g < ng, write = g >= 2 && pending[p];
    const char* xw = x + (g - 2) * 8 * xr;
    char* ow = out + (g - 2) * 8 * orow;
    if (sums && write) fused_loop<true, true>(st.shift[p], st.negmean[p], st.rstd[p], s, q, xs, xw, ow, xr, orow, n);
    else if (sums) fused_loop<true, false>(st.shift[p], nullptr, nullptr, s, q, xs, nullptr, nullptr, xr, orow, n);
    else if (write) fused_loop<false, true>(nullptr, st.negmean[p], st.rstd[p], s, q, nullptr, xw, ow, xr, orow, n);
    pending[p] = false;
    if (!sums) continue;
    if (g + 1 < ng) fused_shift(st.shift[p ^ 1], xs + 8 * xr, xr);
    if (fused_finish(st.shift[p], st.negmean[p], st.rstd[p], s, q, n, e)) pending[p] = true;
    // guard failed: the exact passes, inlined: as a call, whose clobbers reach every zmm
    // register, it had GCC keep the loop's state on the stack (3% of the time)
    else normalize_rows8_body<false, true, false>(xs, xr, out + g * 8 * orow, orow, 8, n, eps);
  }
  if (ng * 8 < rows)
    normalize_rows8_f32_vl<false>(x + ng * 8 * xr, xr, out + ng * 8 * orow, orow, static_cast<int>(rows - ng * 8), n, eps);
}

// Note [Normalize rows in address order]: rows that come from memory (x larger than
// nt_threshold_bytes()) are read in address order, one row after another, in every pass,
// and each pass that reads memory is kept short. The rows kernel walks 8 rows side by
// side, its loads 4 * n bytes apart in turn; the hardware prefetcher follows one stream,
// not 8 interleaved ones, and from DRAM that walk took up to 2.9x the time of an in-place
// scale over the same bytes. In address order the demand stream is one the prefetcher
// follows, as long as the write passes (which read from L1 and load nothing new) stay
// short: a stream that pauses restarts slowly. So, on AVX-512:
//  - kFusedMinN <= n <= kFusedMaxN: groups of 8 rows (normalize_groups_in_order_f32), the
//    statistics loop of Note [Fused normalize groups] (one chain per row; the rows'
//    chains overlap out of order), the group's constants, then its write (8 KiB at most);
//  - n > kFusedMaxN: one row at a time (normalize_rows_in_order_f32), one statistics
//    pass and the write: a group of 8 such rows made the write pass 8-32 KiB long, and
//    the long-row path (mean, centered sums, write, 8 rows at a time) read each row
//    three times with two pauses;
// both streaming where out rows are 64-byte aligned and n % 16 == 0 (above kStatFlush an
// output to stream that is not takes the long-row path, which streams at any offset).
// Elsewhere (AVX2 up to kStatFlush, n < 16, unaligned streaming rows) the rows kernel
// walks its statistics passes in row order too. In the caches every kernel keeps its
// side-by-side walk, 1.1-1.5x faster there. Software prefetches of the next groups were
// slower (docs/notes/elementwise.md).
template <bool NT>
SB_ZMM void normalize_groups_in_order_f32(const char* x, int64_t xr, char* out, int64_t orow, int64_t rows, int64_t n,
                                          double eps) {
  FusedSlots st;
  const float e = static_cast<float>(eps);
  const int64_t ng = rows / 8;
  __m512 s[8], q[8];
  for (int64_t g = 0; g < ng; ++g) {
    const char* xs = x + g * 8 * xr;
    char* os = out + g * 8 * orow;
    fused_shift(st.shift[0], xs, xr);
    fused_loop<true, false>(st.shift[0], nullptr, nullptr, s, q, xs, nullptr, nullptr, xr, orow, n);
    if (fused_finish(st.shift[0], st.negmean[0], st.rstd[0], s, q, n, e))
      fused_loop<false, true, NT>(nullptr, st.negmean[0], st.rstd[0], s, q, nullptr, xs, os, xr, orow, n);
    else  // guard failed: the exact passes
      normalize_rows8_f32_vl<NT, true>(xs, xr, os, orow, 8, n, eps);
  }
  if (ng * 8 < rows)
    normalize_rows8_f32_vl<NT, true>(x + ng * 8 * xr, xr, out + ng * 8 * orow, orow, static_cast<int>(rows - ng * 8), n,
                                     eps);
  if (NT) _mm_sfence();
}

// Rows of n > kFusedMaxN from memory, one at a time (Note [Normalize rows in address
// order]): its statistics (two chains of S and Q; the shift of Note [One statistics
// pass], a pairwise sum of the first 8 elements; rows longer than kStatFlush flush each
// chunk's sums into double, as the reductions do), its constants, its write. A row whose
// guard or variance check fails takes the exact passes: the rows kernel's up to
// kStatFlush, dense_mean and dense_centered above it (row_stats_block's).
template <bool NT>
SB_ZMM void normalize_rows_in_order_f32(const char* x, int64_t xr, char* out, int64_t orow, int64_t rows, int64_t n,
                                        double eps) {
  constexpr int64_t kFlushV = kStatFlush / 16;  // vectors per flush
  const int64_t nf = n / 16;
  const __mmask16 tm = static_cast<__mmask16>((1u << (n % 16)) - 1);
  const float e = static_cast<float>(eps);
  for (int64_t r = 0; r < rows; ++r) {
    const float* xk = reinterpret_cast<const float*>(x + r * xr);
    float* ok = reinterpret_cast<float*>(out + r * orow);
    __m128 h = _mm_add_ps(_mm_loadu_ps(xk), _mm_loadu_ps(xk + 4));  // pairwise: exact for a constant row
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    h = _mm_add_ss(h, _mm_shuffle_ps(h, h, 1));
    const float c = _mm_cvtss_f32(h) * 0.125f;
    const __m512 cv = _mm512_set1_ps(c);
    __m512 s0 = _mm512_setzero_ps(), s1 = s0, q0 = s0, q1 = s0;
    double sd = 0, qd = 0;  // the flushed chunks
    for (int64_t c0 = 0; c0 < nf; c0 += kFlushV) {
      const int64_t ce = std::min(nf, c0 + kFlushV);
      int64_t v = c0;
      for (; v + 2 <= ce; v += 2) {
        const __m512 d0 = _mm512_sub_ps(_mm512_loadu_ps(xk + 16 * v), cv);
        const __m512 d1 = _mm512_sub_ps(_mm512_loadu_ps(xk + 16 * v + 16), cv);
        s0 = _mm512_add_ps(s0, d0);
        s1 = _mm512_add_ps(s1, d1);
        q0 = _mm512_fmadd_ps(d0, d0, q0);
        q1 = _mm512_fmadd_ps(d1, d1, q1);
      }
      if (v < ce) {
        const __m512 d = _mm512_sub_ps(_mm512_loadu_ps(xk + 16 * v), cv);
        s0 = _mm512_add_ps(s0, d);
        q0 = _mm512_fmadd_ps(d, d, q0);
      }
      if (ce < nf) {
        sd += Vec<float>::hsum(fold16_ps(_mm512_add_ps(s0, s1)));
        qd += Vec<float>::hsum(fold16_ps(_mm512_add_ps(q0, q1)));
        s0 = s1 = q0 = q1 = _mm512_setzero_ps();
      }
    }
    if (tm) {
      const __m512 d = _mm512_maskz_sub_ps(tm, _mm512_maskz_loadu_ps(tm, xk + 16 * nf), cv);
      s0 = _mm512_add_ps(s0, d);
      q0 = _mm512_fmadd_ps(d, d, q0);
    }
    __m512 st = _mm512_add_ps(s0, s1), qt = _mm512_add_ps(q0, q1);
    if (n > kStatFlush) {  // all the row's sums in lane 0
      st = _mm512_maskz_mov_ps(1, _mm512_set1_ps(static_cast<float>(sd + Vec<float>::hsum(fold16_ps(st)))));
      qt = _mm512_maskz_mov_ps(1, _mm512_set1_ps(static_cast<float>(qd + Vec<float>::hsum(fold16_ps(qt)))));
    }
    // fused_finish over 8 copies of the row: its constants in every lane
    alignas(32) float cs[8], nm[8], rs[8];
    _mm256_store_ps(cs, _mm256_set1_ps(c));
    __m512 sr[8], qr[8];
    for (int k = 0; k < 8; ++k) {
      sr[k] = st;
      qr[k] = qt;
    }
    if (!fused_finish(cs, nm, rs, sr, qr, n, e)) {  // the exact passes
      if (n <= kStatFlush) {
        normalize_rows8_f32_vl<NT, true>(x + r * xr, xr, out + r * orow, orow, 1, n, eps);
        continue;
      }
      const double mean = dense_mean<float>(xk, n);
      double ss, sq;
      dense_centered<float>(xk, n, static_cast<float>(mean), &ss, &sq);
      const double var = std::max((sq - ss * ss / static_cast<double>(n)) / static_cast<double>(n), 0.0);
      nm[0] = -static_cast<float>(mean);
      rs[0] = static_cast<float>(1.0 / std::sqrt(var + eps));
    }
    const __m512 mk = _mm512_set1_ps(nm[0]);
    const __m512 rk = _mm512_set1_ps(rs[0]);
    for (int64_t v = 0; v < nf; ++v) {
      const __m512 y = _mm512_mul_ps(_mm512_add_ps(_mm512_loadu_ps(xk + 16 * v), mk), rk);
      if constexpr (NT) _mm512_stream_ps(ok + 16 * v, y);
      else _mm512_storeu_ps(ok + 16 * v, y);
    }
    if (tm) _mm512_mask_storeu_ps(ok + 16 * nf, tm, _mm512_mul_ps(_mm512_add_ps(_mm512_maskz_loadu_ps(tm, xk + 16 * nf), mk), rk));
  }
  if (NT) _mm_sfence();
}
#undef SB_ZMM
#endif
#endif

#ifdef SB_HAVE_AVX2
// Note [Normalize across adjacent rows]: float32 rows that lie next to each other (row k
// at x + 4k: normalizing an outer dim, a transposed or a channels-last input), kk <= 64 of
// them, element i of every row at x + i * xsd. The 64 rows are 8 vectors wide: pass 1
// sums them down i, pass 2 sums (x - mean)^2, pass 3 writes; the kk x n block stays in L1
// between passes when n <= 128 (48 KiB L1d here), in L2 after. Sums go from the float
// lanes to double every kStatFlush elements. out is row k = out + k * ocs, element i at
// + i * osd; vector stores when ocs is 4 bytes, else through a lane buffer.
// NV vectors of rows (kk = 8 NV, or 8 NV - 8 < kk < 8 NV with MASKED): compile-time
// bounds keep the NV accumulators in registers.
template <int NV, bool MASKED>
void normalize_cols_f32(const char* x, int64_t xsd, char* out, int64_t ocs, int64_t osd, int kk, int64_t n,
                        double eps) {
  alignas(32) static const int32_t kIdx[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
  const __m256i mask = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kIdx + 8 - (kk % 8 ? kk % 8 : 8)));
  auto load = [&](const float* p, int v) {
    return MASKED && v == NV - 1 ? _mm256_maskload_ps(p + 8 * v, mask) : _mm256_loadu_ps(p + 8 * v);
  };
  alignas(32) double sum[8 * NV] = {}, sq[8 * NV] = {};
  alignas(32) float mean[8 * NV], rstd[8 * NV];
  auto flush = [&](const __m256* acc, double* d) {
    for (int v = 0; v < NV; ++v) {
      _mm256_store_pd(d + 8 * v, _mm256_add_pd(_mm256_load_pd(d + 8 * v), _mm256_cvtps_pd(_mm256_castps256_ps128(acc[v]))));
      _mm256_store_pd(d + 8 * v + 4,
                      _mm256_add_pd(_mm256_load_pd(d + 8 * v + 4), _mm256_cvtps_pd(_mm256_extractf128_ps(acc[v], 1))));
    }
  };
  __m256 acc[NV], x0[NV];  // pass 1 sums x - x0, x0 = element 0 of each row (as Note [Short normalize rows])
  for (int v = 0; v < NV; ++v) x0[v] = load(reinterpret_cast<const float*>(x), v);
  for (int64_t c = 0; c < n; c += kStatFlush) {
    const int64_t ce = std::min(n, c + kStatFlush);
    for (int v = 0; v < NV; ++v) acc[v] = _mm256_setzero_ps();
    for (int64_t i = c; i < ce; ++i) {
      const float* xi = reinterpret_cast<const float*>(x + i * xsd);
      for (int v = 0; v < NV; ++v) acc[v] = _mm256_add_ps(acc[v], _mm256_sub_ps(load(xi, v), x0[v]));
    }
    flush(acc, sum);
  }
  alignas(32) float first[8 * NV];
  for (int v = 0; v < NV; ++v) _mm256_store_ps(first + 8 * v, x0[v]);
  for (int k = 0; k < 8 * NV; ++k) mean[k] = static_cast<float>(first[k] + sum[k] / static_cast<double>(n));
  __m256 mv[NV];
  for (int v = 0; v < NV; ++v) mv[v] = _mm256_load_ps(mean + 8 * v);
  for (int64_t c = 0; c < n; c += kStatFlush) {
    const int64_t ce = std::min(n, c + kStatFlush);
    for (int v = 0; v < NV; ++v) acc[v] = _mm256_setzero_ps();
    for (int64_t i = c; i < ce; ++i) {
      const float* xi = reinterpret_cast<const float*>(x + i * xsd);
      for (int v = 0; v < NV; ++v) {
        const __m256 d = _mm256_sub_ps(load(xi, v), mv[v]);
        acc[v] = _mm256_fmadd_ps(d, d, acc[v]);
      }
    }
    flush(acc, sq);
  }
  // masked lanes loaded 0 and subtracted their mean 0: their rstd is never stored
  const __m256d rn = _mm256_set1_pd(1.0 / static_cast<double>(n)), ev = _mm256_set1_pd(eps), one = _mm256_set1_pd(1.0);
  for (int k = 0; k < 8 * NV; k += 4)
    _mm_store_ps(rstd + k, _mm256_cvtpd_ps(_mm256_div_pd(one, _mm256_sqrt_pd(_mm256_fmadd_pd(_mm256_load_pd(sq + k), rn, ev)))));
  __m256 rv[NV];
  for (int v = 0; v < NV; ++v) rv[v] = _mm256_load_ps(rstd + 8 * v);
  int64_t i0 = 0;
  if (ocs != 4 && osd == 4) {  // out rows dense along i: 8 i's x 8 rows, transposed in registers
    for (; i0 + 8 <= n; i0 += 8)
      for (int v = 0; v < NV; ++v) {
        __m256 y[8];
        for (int r = 0; r < 8; ++r)
          y[r] = _mm256_mul_ps(_mm256_sub_ps(load(reinterpret_cast<const float*>(x + (i0 + r) * xsd), v), mv[v]), rv[v]);
        detail::transpose8(y[0], y[1], y[2], y[3], y[4], y[5], y[6], y[7]);  // y[l]: row 8v + l, i0..i0+7
        const int m = std::min(8, kk - 8 * v);
        for (int l = 0; l < m; ++l) _mm256_storeu_ps(reinterpret_cast<float*>(out + (8 * v + l) * ocs) + i0, y[l]);
      }
  }
  for (int64_t i = i0; i < n; ++i) {
    const float* xi = reinterpret_cast<const float*>(x + i * xsd);
    char* oi = out + i * osd;
    for (int v = 0; v < NV; ++v) {
      const __m256 y = _mm256_mul_ps(_mm256_sub_ps(load(xi, v), mv[v]), rv[v]);
      if (ocs == 4) {
        float* o = reinterpret_cast<float*>(oi) + 8 * v;
        if (MASKED && v == NV - 1) _mm256_maskstore_ps(o, mask, y); else _mm256_storeu_ps(o, y);
      } else {
        alignas(32) float t[8];
        _mm256_store_ps(t, y);
        const int m = std::min(8, kk - 8 * v);
        for (int l = 0; l < m; ++l) std::memcpy(oi + (8 * v + l) * ocs, t + l, 4);
      }
    }
  }
}

template <int NV>
void normalize_cols_nv(const char* x, int64_t xsd, char* out, int64_t ocs, int64_t osd, int kk, int64_t n, double eps) {
  if (kk % 8) normalize_cols_f32<NV, true>(x, xsd, out, ocs, osd, kk, n, eps);
  else normalize_cols_f32<NV, false>(x, xsd, out, ocs, osd, kk, n, eps);
}

inline void normalize_cols64_f32(const char* x, int64_t xsd, char* out, int64_t ocs, int64_t osd, int kk, int64_t n,
                                 double eps) {
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
#endif

// Mean and 1/sqrt(var + eps) of nr rows of n elements: row k at x + k * row_bytes, its
// elements stride_bytes apart. Rows are taken a block at a time, each pass over every row
// of the block before the next pass: a 64-element row is mostly latency (two dependent
// vector sums, their horizontal adds, a division, a square root), and this puts the
// independent rows' chains next to each other (docs/notes/elementwise.md, Normalize).
template <typename T>
void row_stats_block(bool avx, const char* x, int64_t row_bytes, int nr, int64_t stride_bytes, int64_t n, double eps,
                     double* mean, double* rstd) {
  using A = acc_t<T>;
  const bool dense = stride_bytes == static_cast<int64_t>(sizeof(T));
#ifdef SB_HAVE_AVX2
  if constexpr (kHasVec<T>) {
    if (avx && dense) {
      double ss[kMaxStatRows], sq[kMaxStatRows];
      A ma[kMaxStatRows];
      for (int k = 0; k < nr; ++k) mean[k] = dense_mean(reinterpret_cast<const T*>(x + k * row_bytes), n);
      for (int k = 0; k < nr; ++k) ma[k] = static_cast<A>(mean[k]);
      for (int k = 0; k < nr; ++k) dense_centered(reinterpret_cast<const T*>(x + k * row_bytes), n, ma[k], ss + k, sq + k);
      for (int k = 0; k < nr; ++k) {
        const double var = std::max((sq[k] - ss[k] * ss[k] / static_cast<double>(n)) / static_cast<double>(n), 0.0);
        rstd[k] = 1.0 / std::sqrt(var + eps);
      }
      return;
    }
  }
#else
  (void)avx;
  (void)dense;
#endif
  for (int k = 0; k < nr; ++k) {
    const char* xr = x + k * row_bytes;
    double sum = 0, sq = 0;  // mean = x0 + sum(x - x0) / n, as the vector paths
    const double x0 = static_cast<double>(A(at<T>(xr, 0, stride_bytes)));
    for (int64_t j = 0; j < n; ++j) sum += static_cast<double>(A(at<T>(xr, j, stride_bytes))) - x0;
    mean[k] = x0 + sum / static_cast<double>(n);
    for (int64_t j = 0; j < n; ++j) {
      const double d = static_cast<double>(A(at<T>(xr, j, stride_bytes))) - mean[k];
      sq += d * d;
    }
    rstd[k] = 1.0 / std::sqrt(sq / static_cast<double>(n) + eps);
  }
}

// out = (x - mean) * rstd in the accumulation type of T.
template <typename A>
struct NormWrite {
  A m, rs;
  A operator()(A v) const { return static_cast<A>((v - m) * rs); }
#ifdef SB_HAVE_AVX2
  __m256 operator()(__m256 v) const {
    return _mm256_mul_ps(_mm256_sub_ps(v, _mm256_set1_ps(static_cast<float>(m))), _mm256_set1_ps(static_cast<float>(rs)));
  }
  __m256d operator()(__m256d v) const {
    return _mm256_mul_pd(_mm256_sub_pd(v, _mm256_set1_pd(static_cast<double>(m))), _mm256_set1_pd(static_cast<double>(rs)));
  }
#endif
};

#ifdef SB_HAVE_AVX2
// Dense float32 rows from memory, out = p[0], x = p[1] (Note [Normalize rows in address
// order]); nt: the caller may stream the output. false (nothing written) where there is
// no in-order kernel for them: rows longer than kStatFlush without AVX-512, or with an
// output to stream that the 16-float streams cannot (normalize_strip's long-row path
// streams at any offset). Not inlined into normalize_strip, whose other paths GCC
// compiles differently when it grows.
__attribute__((noinline)) bool normalize_rows_from_memory_f32(bool vl, bool nt, char* const* p, const int64_t* s,
                                                             int64_t rows, int64_t n, double eps) {
  // as normalize_strip's nt8: 8-float streaming stores need 32-byte aligned output rows
  const bool nt8 = nt && n % 8 == 0 && s[0] % 32 == 0 && reinterpret_cast<uintptr_t>(p[0]) % 32 == 0;
#ifdef SB_HAVE_AVX512
  if (vl && n >= kFusedMinN && (rows >= 8 || n > kFusedMaxN)) {
    const bool nt16 = nt8 && n % 16 == 0 && s[0] % 64 == 0 && reinterpret_cast<uintptr_t>(p[0]) % 64 == 0;
    const bool groups = n <= kFusedMaxN;
    if (nt16) {
      if (groups) normalize_groups_in_order_f32<true>(p[1], s[1], p[0], s[0], rows, n, eps);
      else normalize_rows_in_order_f32<true>(p[1], s[1], p[0], s[0], rows, n, eps);
      g_last_nt.store(true, std::memory_order_relaxed);
      return true;
    }
    if (n > kStatFlush ? !nt : !nt8) {
      if (groups) normalize_groups_in_order_f32<false>(p[1], s[1], p[0], s[0], rows, n, eps);
      else normalize_rows_in_order_f32<false>(p[1], s[1], p[0], s[0], rows, n, eps);
      return true;
    }
  }
#endif
  if (n > kStatFlush) return false;
  for (int64_t r0 = 0; r0 < rows; r0 += 8) {
    const int nr = static_cast<int>(std::min<int64_t>(8, rows - r0));
    char* const o = p[0] + r0 * s[0];
    const char* const xg = p[1] + r0 * s[1];
    if (nt8) normalize_rows8_f32<true, true>(vl, xg, s[1], o, s[0], nr, n, eps);
    else normalize_rows8_f32<false, true>(vl, xg, s[1], o, s[0], nr, n, eps);
  }
  if (nt8) g_last_nt.store(true, std::memory_order_relaxed);
  return true;
}
#endif

// One strip of rows: row r of operand i starts at p[i] + r * s[i] and runs n elements
// with stride xsd (x) / osd (out) bytes.
//  - dense rows (xsd == element size): per row, two passes for the stats (the row is in
//    L1/L2 for the second) and one vectorised write pass.
//  - strided rows (normalizing an outer dim): kCols rows side by side, so every pass
//    reads kCols contiguous elements of each of the n lines of x. One pass of shifted
//    sums (shift = the row's first value, in double: no cancellation to speak of), one
//    write pass: x is read twice from memory, out written once. Walking 16 rows at a
//    power-of-two stride three times instead ran 40x slower (cache-set conflicts).
// resident: x fits the caches by the rule that decides streaming (Note [Fused normalize
// groups]).
template <typename T>
void normalize_strip(bool avx, bool nt, bool resident, char* const* p, const int64_t* s, int64_t rows, int64_t n,
                     int64_t xsd, int64_t osd, double eps) {
  using A = acc_t<T>;
  constexpr int64_t es = sizeof(T);
#ifdef SB_HAVE_AVX2
  if constexpr (std::is_same_v<T, float>) {
    // Streaming rows of 8-float vectors need every output row 32-byte aligned; rows
    // that are not take plain stores (no partial lines: Note [Streaming strips]).
    const bool nt8 = nt && osd == es && n % 8 == 0 && s[0] % 32 == 0 && reinterpret_cast<uintptr_t>(p[0]) % 32 == 0;
    const bool vl = avx && use_avx512();  // Note [Normalize rows with 32 registers]
#ifdef SB_HAVE_AVX512
    if (vl && resident && !nt8 && xsd == es && osd == es && n >= kFusedMinN && n <= kFusedMaxN && rows >= 16 &&
        !stores_alias_loads(p[0], p[1])) {
      normalize_groups_f32(p[1], s[1], p[0], s[0], rows, n, eps);  // Note [Fused normalize groups]
      return;
    }
#endif
    if (avx && !resident && xsd == es && osd == es && normalize_rows_from_memory_f32(vl, nt, p, s, rows, n, eps))
      return;  // Note [Normalize rows in address order]
    if (avx && xsd == es && osd == es && n <= kStatFlush) {  // Note [Short normalize rows]
      for (int64_t r0 = 0; r0 < rows; r0 += 8) {
        const int nr = static_cast<int>(std::min<int64_t>(8, rows - r0));
        if (nt8) normalize_rows8_f32<true>(vl, p[1] + r0 * s[1], s[1], p[0] + r0 * s[0], s[0], nr, n, eps);
        else normalize_rows8_f32(vl, p[1] + r0 * s[1], s[1], p[0] + r0 * s[0], s[0], nr, n, eps);
      }
      if (nt8) g_last_nt.store(true, std::memory_order_relaxed);
      return;
    }
    if (avx && s[1] == es && xsd != es) {  // Note [Normalize across adjacent rows]
      for (int64_t r0 = 0; r0 < rows; r0 += 64)
        normalize_cols64_f32(p[1] + r0 * s[1], xsd, p[0] + r0 * s[0], s[0], osd,
                             static_cast<int>(std::min<int64_t>(64, rows - r0)), n, eps);
      return;
    }
    if (avx && n <= kStatFlush) {  // rows apart and strided (a stepped slice): pack 8 rows
      alignas(64) float buf[8 * kStatFlush];
#ifdef SB_HAVE_AVX512
      if (vl && resident && !nt8 && n >= kFusedMinN && n <= kFusedMaxN && rows >= 16) {
        // Note [Fused normalize groups] over packed rows, as many as buf holds (>= 32):
        // straight into dense out rows, else (strided out rows, or out rows whose stores
        // would alias the loads from buf) in place in buf and copied out
        const int64_t chunk = 8 * kStatFlush / n;
        char* const b = reinterpret_cast<char*>(buf);
        for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
          const int64_t nr = std::min(chunk, rows - r0);
          for (int64_t k = 0; k < nr; ++k) {
            if (xsd == 2 * es) pack_stride2_f32(buf + k * n, reinterpret_cast<const float*>(p[1] + (r0 + k) * s[1]), n);
            else pack_strided(buf + k * n, p[1] + (r0 + k) * s[1], xsd, n);
          }
          char* const o = p[0] + r0 * s[0];
          if (osd == es && !stores_alias_loads(o, b)) {
            normalize_groups_f32(b, n * es, o, s[0], nr, n, eps);
            continue;
          }
          normalize_groups_f32(b, n * es, b, n * es, nr, n, eps);
          for (int64_t k = 0; k < nr; ++k) {
            if (osd == es) std::memcpy(o + k * s[0], buf + k * n, static_cast<size_t>(n * es));
            else unpack_strided(o + k * s[0], osd, buf + k * n, n);
          }
        }
        return;
      }
#endif
      for (int64_t r0 = 0; r0 < rows; r0 += 8) {
        const int nr = static_cast<int>(std::min<int64_t>(8, rows - r0));
        for (int k = 0; k < nr; ++k) pack_strided(buf + k * n, p[1] + (r0 + k) * s[1], xsd, n);
        if (nt8) {
          normalize_rows8_f32<true>(vl, reinterpret_cast<const char*>(buf), n * es, p[0] + r0 * s[0], s[0], nr, n, eps);
        } else if (osd == es) {
          normalize_rows8_f32(vl, reinterpret_cast<const char*>(buf), n * es, p[0] + r0 * s[0], s[0], nr, n, eps);
        } else {
          normalize_rows8_f32(vl, reinterpret_cast<const char*>(buf), n * es, reinterpret_cast<char*>(buf), n * es, nr, n, eps);
          for (int k = 0; k < nr; ++k) unpack_strided(p[0] + (r0 + k) * s[0], osd, buf + k * n, n);
        }
      }
      if (nt8) g_last_nt.store(true, std::memory_order_relaxed);
      return;
    }
  }
#endif
  if (xsd == es) {
    for (int64_t r0 = 0; r0 < rows; r0 += kMaxStatRows) {
      const int nr = static_cast<int>(std::min<int64_t>(kMaxStatRows, rows - r0));
      double mean[kMaxStatRows], rstd[kMaxStatRows];
      row_stats_block<T>(avx, p[1] + r0 * s[1], s[1], nr, xsd, n, eps, mean, rstd);
      for (int k = 0; k < nr; ++k) {
        const NormWrite<A> f{static_cast<A>(mean[k]), static_cast<A>(rstd[k])};
        char* q[2] = {p[0] + (r0 + k) * s[0], p[1] + (r0 + k) * s[1]};
        const int64_t st[2] = {osd, xsd};
        unary_strip<T>(avx, nt && osd == es, q, st, n, f);
      }
    }
    if (avx && nt && osd == es) g_last_nt.store(true, std::memory_order_relaxed);
    return;
  }
  constexpr int kCols = 256;
  for (int64_t r0 = 0; r0 < rows; r0 += kCols) {
    const int kk = static_cast<int>(std::min<int64_t>(kCols, rows - r0));
    char* ob = p[0] + r0 * s[0];
    const char* xb = p[1] + r0 * s[1];
    double shift[kCols], sum[kCols] = {}, sq[kCols] = {};
    A m[kCols], rs[kCols];
    for (int k = 0; k < kk; ++k) shift[k] = static_cast<double>(A(at<T>(xb, k, s[1])));
    for (int64_t i = 0; i < n; ++i) {
      const char* xi = xb + i * xsd;
      for (int k = 0; k < kk; ++k) {
        const double v = static_cast<double>(A(at<T>(xi, k, s[1]))) - shift[k];
        sum[k] += v;
        sq[k] += v * v;
      }
    }
    for (int k = 0; k < kk; ++k) {
      const double mu = sum[k] / static_cast<double>(n);
      const double var = std::max(sq[k] / static_cast<double>(n) - mu * mu, 0.0);
      m[k] = static_cast<A>(shift[k] + mu);
      rs[k] = static_cast<A>(1.0 / std::sqrt(var + eps));
    }
    const bool dense = s[0] == es && s[1] == es;
    for (int64_t i = 0; i < n; ++i) {
      const char* xi = xb + i * xsd;
      char* oi = ob + i * osd;
      if (dense) {
        const T* xt = reinterpret_cast<const T*>(xi);
        T* ot = reinterpret_cast<T*>(oi);
        for (int k = 0; k < kk; ++k) ot[k] = T((A(xt[k]) - m[k]) * rs[k]);
      } else {
        for (int k = 0; k < kk; ++k)
          *reinterpret_cast<T*>(oi + k * s[0]) = T((A(at<T>(xi, k, s[1])) - m[k]) * rs[k]);
      }
    }
  }
}

// ---------------------------------------------------------------- the op

// Note [Streaming normalize outputs]: normalize writes its output with streaming stores
// on the same terms as the other elementwise ops (Note [Streaming elementwise outputs]):
// an output above copy.h's nt_threshold_bytes() that is not x itself (in place never
// streams), in the rows it writes whole: rows dense along `dim`, through the short-row
// kernel when n % 8 == 0 and every row starts 32-byte aligned, else through unary_strip's
// streaming loop (its heads and tails streamed element by element). The paths across
// adjacent rows (x strided along dim) keep plain stores. Without streaming, out= and
// out-of-place paid the read-for-ownership of every output line (docs/notes/elementwise.md).
// The call-wide rule is may_stream's; which rows stream is decided per strip.

void run_normalize(const Tensor& out, const Tensor& x, int64_t dim, double eps) {
  if (out.numel() == 0) return;
  if (!out.device().is_cpu()) {
#ifdef SB_WITH_CUDA
    return cuda::normalize(out, x, dim, eps);
#else
    return no_cuda("normalize", out.device());
#endif
  }
  // Iterate over the rows (x with `dim` selected away); each strip element is one row.
  const Tensor x1 = x.dim() == 0 ? x.reshape({1}) : x;
  const Tensor o1 = out.dim() == 0 ? out.as_strided({1}, {1}) : out;
  const int64_t d = x.dim() == 0 ? 0 : dim;
  const int64_t n = x1.size(d);
  const int64_t xsd = x1.stride(d) * static_cast<int64_t>(x1.element_size());
  const int64_t osd = o1.stride(d) * static_cast<int64_t>(o1.element_size());
  // no Tiled path: the kernels read row elements at p[1] + i * xsd, beyond the strip
  const StridedIter it = StridedIter::from_tensors({o1.select(d, 0), x1.select(d, 0)}, /*tiles=*/false);
  const bool avx = use_avx2();
  const bool nt = may_stream(avx, out, {&x});
  const bool resident = x.numel() * static_cast<int64_t>(x.element_size()) <= nt_threshold_bytes();
  g_last_nt.store(false, std::memory_order_relaxed);  // the strips that stream set it
  const int64_t grain = std::max<int64_t>(1, kGrainSize / n);
  SB_DISPATCH_FLOATING(out.dtype(), "normalize", {
    it.for_each([=](char* const* p, const int64_t* s, int64_t rows) {
      normalize_strip<scalar_t>(avx, nt, resident, p, s, rows, n, xsd, osd, eps);
    }, grain, nt);
  });
}

Tensor& normalize_out_named(const char* name, Tensor& out, const Tensor& x, int64_t dim, double eps) {
  SB_CHECK(x.defined(), name, ": undefined input tensor");
  check_dtype(name, x.dtype(), true);
  dim = wrap_dim(dim, x.dim(), name);
  SB_CHECK(eps >= 0, name, ": eps must be >= 0, got ", eps);
  if (check_out(name, out, x.sizes(), x.dtype(), x.device(), {&x})) return normalize_out_named(name, out, x.clone(), dim, eps);
  run_normalize(out, x, dim, eps);
  return out;
}

}  // namespace

Tensor normalize(const Tensor& x, int64_t dim, double eps) {
  SB_CHECK(x.defined(), "normalize: undefined input tensor");
  check_dtype("normalize", x.dtype(), true);
  dim = wrap_dim(dim, x.dim(), "normalize");
  SB_CHECK(eps >= 0, "normalize: eps must be >= 0, got ", eps);
  Tensor out = new_output(x.sizes(), {&x});
  run_normalize(out, x, dim, eps);
  return out;
}

Tensor& normalize_out(Tensor& out, const Tensor& x, int64_t dim, double eps) {
  return normalize_out_named("normalize_out", out, x, dim, eps);
}

Tensor& Tensor::normalize_(int64_t dim, double eps) { return normalize_out_named("normalize_", *this, *this, dim, eps); }

}  // namespace sb
