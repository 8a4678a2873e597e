// normalize_rows.h — normalize's float32 row kernels shared by normalize.cpp (the
// strips, the rows in the caches), normalize_memory.cpp (the rows from memory, Note
// [Normalize rows in address order]), normalize_cols.cpp (rows side by side, Note
// [Normalize across adjacent rows]) and normalize_strided16.cpp (16-bit rows not dense
// along dim): the row statistics, the rows kernel of Note [Short normalize rows] and the
// pieces of Note [Fused normalize groups]. Internal to lib/elementwise. SB_ZMM (the
// AVX-512 target attribute) stays defined for the files that include this one.
#pragma once
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "stridebench/cpu_features.h"
#include "elementwise/strips.h"

#ifdef SB_HAVE_AVX2
#include <immintrin.h>
#endif

namespace sb::ew {

// Internal linkage, as when these lived in normalize.cpp alone: GCC then inlines and
// allocates registers in the fused loop as it did there (docs/notes/elementwise.md).
namespace {

#ifdef SB_HAVE_AVX2
// The row kernels' registers (core/vec.h, Note [Row-kernel lanes]).
using VF = Vec<float>;   // 8 float lanes
using VD = Vec<double>;  // 4 double lanes
#ifdef SB_HAVE_AVX512
using VZ = Vec<float, 512>;  // 16 float lanes: the fused groups and the rows in order
#endif
#endif

// ---------------------------------------------------------------- row kernels


// Mean and 1/sqrt(var + eps) of n elements at x (stride stride_bytes), in double.
// Note [Normalize row statistics]: two passes, the mean, then S = sum(x - m) and
// Q = sum((x - m)^2) with m the mean rounded to the accumulation type; var = (Q - S^2/n)/n
// is exact in that shift, so the rounding of m costs nothing, and the mean written with
// is m + S/n (the corrected two-pass algorithm): the first pass sums x - x0, which are
// large where x0 lies far from the mean, and its rounding error (of the order of n eps
// |x0 - mean|) would otherwise reach every output; S sums deviations from m, which are
// small. Guarantee: the mean and the variance to a few ulp of the row's spread, however
// far x0 lies (tests: NormalizeRowsFarFromTheirMeanOnEveryPath). On the AVX2 path float32
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
// Note [Normalize rsqrt] (below): the lanes whose variance the float path keeps (normal
// and finite), and 1/sqrt(var) as rsqrt's 12 bits and one Newton step. Shared by the
// rows kernel and the fused groups.
inline VF::V normal_var_ps(VF::V var) {
  return VF::and_mask(VF::cmp_ge(var, VF::set1(std::numeric_limits<float>::min())),
                      VF::cmp_le(var, VF::set1(std::numeric_limits<float>::max())));
}
inline VF::V rsqrt_newton_ps(VF::V var) {
  const VF::V r = VF::rsqrt(var);
  return VF::mul(r, VF::fnma(VF::mul(VF::set1(0.5f), var), VF::mul(r, r), VF::set1(1.5f)));
}

// Note [One statistics pass] (below): the 8 rows' mean and q = sum((x - mean)^2) from one
// pass; false when a row's result is not to be trusted (then mean and q are unset).
template <bool InOrder>
__attribute__((always_inline)) inline bool one_pass_stats(const float* const (&xs)[8], int64_t nv, int64_t rem,
                                                          VF::PartMask mask, int64_t n, float* mean, VF::V* q_out) {
  VF::V c[8], s[8], q[8];
  for (int k = 0; k < 8; ++k) c[k] = VF::load(xs[k]);
  alignas(32) float cs[8];
  const VF::V cv = VF::mul(VF::hsum8(c), VF::set1(0.125f));
  VF::store_aligned(cs, cv);
  for (int k = 0; k < 8; ++k) {
    c[k] = VF::set1(cs[k]);
    s[k] = VF::zero();
    q[k] = VF::zero();
  }
  if constexpr (InOrder) {  // Note [Normalize rows in address order]
    for (int k = 0; k < 8; ++k)
      for (int64_t v = 0; v < nv; ++v) {
        const VF::V d = VF::sub(VF::load(xs[k] + 8 * v), c[k]);
        s[k] = VF::add(s[k], d);
        q[k] = VF::fma(d, d, q[k]);
      }
  } else {
    for (int64_t v = 0; v < nv; ++v)
      for (int k = 0; k < 8; ++k) {
        const VF::V d = VF::sub(VF::load(xs[k] + 8 * v), c[k]);
        s[k] = VF::add(s[k], d);
        q[k] = VF::fma(d, d, q[k]);
      }
  }
  if (rem)  // masked lanes: c - c
    for (int k = 0; k < 8; ++k) {
      const VF::V d = VF::sub(VF::blend(c[k], VF::maskload(xs[k] + 8 * nv, mask), VF::as_mask(mask)), c[k]);
      s[k] = VF::add(s[k], d);
      q[k] = VF::fma(d, d, q[k]);
    }
  const VF::V sv = VF::hsum8(s), qv = VF::hsum8(q);
  const VF::V m1 = VF::div(sv, VF::set1(static_cast<float>(n)));
  const VF::V t = VF::mul(sv, m1);  // S^2 / n >= 0
  const VF::V ok =
      VF::and_mask(VF::cmp_le(VF::add(t, t), qv), VF::cmp_le(qv, VF::set1(std::numeric_limits<float>::max())));
  if (!VF::all(ok)) return false;
  VF::store_aligned(mean, VF::add(cv, m1));
  *q_out = VF::sub(qv, t);
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
// exact passes. Groups of Gaussian rows almost always pass (docs/notes/elementwise.md).
// Only the AVX-512VL build takes it: its 16 accumulators and 8 shifts fit in ymm0-31.
template <bool NT, bool OnePass, bool InOrder>
__attribute__((always_inline)) inline void normalize_rows8_body(const char* x, int64_t xr, char* out, int64_t orow,
                                                                int nr, int64_t n, double eps) {
  const int64_t nv = n / 8, rem = n % 8;
  const VF::PartMask mask = VF::part_mask(rem);
  const float* xs[8];
  for (int k = 0; k < 8; ++k) xs[k] = reinterpret_cast<const float*>(x + std::min(k, nr - 1) * xr);
  alignas(32) float mean[8];
  VF::V q;
  if (OnePass && nv > 0 && one_pass_stats<InOrder>(xs, nv, rem, mask, n, mean, &q)) {
    // mean and q from one pass
  } else {  // two exact passes
    VF::V acc[8], x0[8];
    for (int k = 0; k < 8; ++k) {
      acc[k] = VF::zero();
      x0[k] = VF::broadcast(xs[k]);
    }
    if constexpr (InOrder) {
      for (int k = 0; k < 8; ++k)
        for (int64_t v = 0; v < nv; ++v) acc[k] = VF::add(acc[k], VF::sub(VF::load(xs[k] + 8 * v), x0[k]));
    } else {
      for (int64_t v = 0; v < nv; ++v)
        for (int k = 0; k < 8; ++k) acc[k] = VF::add(acc[k], VF::sub(VF::load(xs[k] + 8 * v), x0[k]));
    }
    if (rem)  // masked lanes: x0 - x0
      for (int k = 0; k < 8; ++k)
        acc[k] = VF::add(
            acc[k], VF::sub(VF::blend(x0[k], VF::maskload(xs[k] + 8 * nv, mask), VF::as_mask(mask)), x0[k]));
    alignas(32) float first[8];
    for (int k = 0; k < 8; ++k) first[k] = *xs[k];
    VF::store_aligned(mean, VF::add(VF::load_aligned(first), VF::div(VF::hsum8(acc), VF::set1(static_cast<float>(n)))));
    for (int k = 0; k < 8; ++k) acc[k] = VF::zero();
    for (int64_t v = 0; v < nv; ++v)
      for (int k = 0; k < 8; ++k) {
        const VF::V d = VF::sub(VF::load(xs[k] + 8 * v), VF::set1(mean[k]));
        acc[k] = VF::fma(d, d, acc[k]);
      }
    if (rem)
      for (int k = 0; k < 8; ++k) {  // masked lanes load 0: blend them to the mean so they add 0
        const VF::V xv = VF::blend(VF::set1(mean[k]), VF::maskload(xs[k] + 8 * nv, mask), VF::as_mask(mask));
        const VF::V d = VF::sub(xv, VF::set1(mean[k]));
        acc[k] = VF::fma(d, d, acc[k]);
      }
    q = VF::hsum8(acc);
  }
  // Note [Normalize rsqrt]: 1/sqrt(q/n + eps) in float, rsqrt's 12 bits and one Newton
  // step r(1.5 - v r^2 / 2) (~23 bits), where double sqrt and div took two long-latency
  // ops per 4 rows, a visible share of a 64-float row's time. A variance that is 0, subnormal,
  // infinite or NaN (eps = 0, or sums that overflow float) takes the double path, whose
  // results for those (inf, a finite 1/sqrt, 0, NaN) the Newton step would not keep.
  const VF::V var = VF::fma(q, VF::set1(1.0f / static_cast<float>(n)), VF::set1(static_cast<float>(eps)));
  alignas(32) float rstd[8];
  if (VF::all(normal_var_ps(var))) {
    VF::store_aligned(rstd, rsqrt_newton_ps(var));
  } else {
    const VD::V rn = VD::set1(1.0 / static_cast<double>(n)), ev = VD::set1(eps), one = VD::set1(1.0);
    const VD::V r0 = VD::div(one, VD::sqrt(VD::fma(VD::widen_lo(q), rn, ev)));
    const VD::V r1 = VD::div(one, VD::sqrt(VD::fma(VD::widen_hi(q), rn, ev)));
    VF::store_aligned(rstd, VD::narrow2(r0, r1));
  }
  for (int k = 0; k < nr; ++k) {
    const VF::V mv = VF::set1(mean[k]), rv = VF::set1(rstd[k]);
    float* o = reinterpret_cast<float*>(out + k * orow);
    for (int64_t v = 0; v < nv; ++v) {
      const VF::V y = VF::mul(VF::sub(VF::load(xs[k] + 8 * v), mv), rv);
      if constexpr (NT) VF::stream(o + 8 * v, y);
      else VF::store(o + 8 * v, y);
    }
    if (rem)
      VF::maskstore(o + 8 * nv, mask, VF::mul(VF::sub(VF::maskload(xs[k] + 8 * nv, mask), mv), rv));
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
// row strides in x and out the offset of the first rows decides. 16-bit rows keep the
// fused loop at those offsets too: it loses a little there, less than their other kernel
// (the widening buffer and the rows kernel) costs (docs/notes/elementwise.md).
constexpr int64_t kFusedMinN = 16, kFusedMaxN = 256;

constexpr uintptr_t kAliasLo = 32, kAliasHi = 128;  // bytes; Note [Fused groups and 4K aliasing]

// Note [Fused groups and 4K aliasing]: whether stores to out would hold up loads from x.
inline bool stores_alias_loads(const char* out, const char* x) {
  const uintptr_t d = (reinterpret_cast<uintptr_t>(out) - reinterpret_cast<uintptr_t>(x)) & 4095;
  return d > kAliasLo && d <= kAliasHi;
}

#define SB_ZMM __attribute__((target("avx2,fma,avx512f,avx512vl")))

// Note [16-bit fused IO]: the fused loop's loads and stores of 16 row elements as float
// lanes: float rows as they are; float16 and bfloat16 rows widened exactly as loaded and
// rounded to nearest even as stored, bit for bit copy.h's conversions, their row tails by
// AVX-512BW's 16-bit masked moves. The bfloat16 rounding (vcvtneps2bf16, AVX512_BF16) and
// the 16-bit masked moves are inline asm, not intrinsics: an intrinsic would need those
// ISAs in the target of every function it inlines into, the fused loop and its callers,
// and the float32 rows share that code; GCC chose other registers and instructions for
// the float32 loop under the wider target, and it ran slower (docs/notes/elementwise.md).
// The callers check use_avx512() (float16) or use_avx512_bf16() (bfloat16); the AVX512
// level includes BW (Note [Run-time AVX-512]).
template <typename T> struct FusedIO;
template <> struct FusedIO<float> : VZ {};
struct FusedIO16 {
  SB_ZMM __attribute__((always_inline)) static __m256i maskz_load16(VZ::Mask m, const void* p) {
    __m256i r;
    asm("vmovdqu16 %1, %0%{%2%}%{z%}" : "=v"(r) : "m"(*static_cast<const __m256i*>(p)), "Yk"(m));
    return r;
  }
  SB_ZMM __attribute__((always_inline)) static void mask_store16(void* p, VZ::Mask m, __m256i v) {
    asm("vmovdqu16 %1, %0%{%2%}" : "+m"(*static_cast<__m256i*>(p)) : "v"(v), "Yk"(m));
  }
};
template <> struct FusedIO<Half> : FusedIO16 {
  SB_ZMM __attribute__((always_inline)) static VZ::V load(const Half* p) { return Vec<Half, 512>::load(p); }
  SB_ZMM __attribute__((always_inline)) static void store(Half* p, VZ::V v) {
    vec::Bits256::store(p, Vec<Half, 512>::narrow(v));
  }
  SB_ZMM __attribute__((always_inline)) static void stream(Half* p, VZ::V v) { vec::Bits256::stream(p, Vec<Half, 512>::narrow(v)); }
  SB_ZMM __attribute__((always_inline)) static VZ::V maskz_load(VZ::Mask m, const Half* p) {
    return _mm512_maskz_cvtph_ps(0xFFFF, maskz_load16(m, p));
  }
  SB_ZMM __attribute__((always_inline)) static void mask_store(Half* p, VZ::Mask m, VZ::V v) {
    mask_store16(p, m, Vec<Half, 512>::narrow(v));
  }
};
template <> struct FusedIO<BFloat16> : FusedIO16 {
  // 16 bfloat16 as floats: one vpermw puts element i in the high word of lane i and
  // word 16 (zero: a 256-bit load or move clears bits 256-511 of its register) in the
  // low one, where vpmovzxwd and a shift took two (inline asm: AVX512BW).
  SB_ZMM __attribute__((always_inline)) static VZ::V widen(__m256i h) {
    alignas(64) static constexpr uint16_t kHigh[32] = {16, 0,  16, 1,  16, 2,  16, 3,  16, 4,  16,
                                                       5,  16, 6,  16, 7,  16, 8,  16, 9,  16, 10,
                                                       16, 11, 16, 12, 16, 13, 16, 14, 16, 15};
    __m512i w;
    asm("vpermw %g2, %1, %0" : "=v"(w) : "v"(_mm512_load_si512(kHigh)), "v"(h));
    return _mm512_castsi512_ps(w);
  }
  SB_ZMM __attribute__((always_inline)) static __m256i narrow(VZ::V v) {
    __m256i r;
    asm("vcvtneps2bf16 %1, %0" : "=v"(r) : "v"(v));
    return r;
  }
  SB_ZMM __attribute__((always_inline)) static VZ::V load(const BFloat16* p) { return widen(vec::Bits256::load(p)); }
  SB_ZMM __attribute__((always_inline)) static void store(BFloat16* p, VZ::V v) { vec::Bits256::store(p, narrow(v)); }
  SB_ZMM __attribute__((always_inline)) static void stream(BFloat16* p, VZ::V v) { vec::Bits256::stream(p, narrow(v)); }
  SB_ZMM __attribute__((always_inline)) static VZ::V maskz_load(VZ::Mask m, const BFloat16* p) {
    return widen(maskz_load16(m, p));
  }
  SB_ZMM __attribute__((always_inline)) static void mask_store(BFloat16* p, VZ::Mask m, VZ::V v) {
    mask_store16(p, m, narrow(v));
  }
  // Note [bfloat16 writes in pairs]: the write of 32 elements, o = (w + m) * r: one
  // 512-bit load, the even elements as the low halves shifted up and the odd ones as the
  // high halves masked (2 instructions where two widenings take 4), both rounded by one
  // vcvtne2ps2bf16 (evens in the low 256 bits, odds in the high) and put back in order
  // by one vpermw, one 512-bit store (NT: streaming, o 64-byte aligned). The same
  // arithmetic and rounding per element as 16 at a time, so the same bits; the
  // statistics keep their order.
  template <bool NT = false>
  SB_ZMM __attribute__((always_inline)) static void write_pair(BFloat16* o, const BFloat16* w, VZ::V m, VZ::V r) {
    alignas(64) static constexpr uint16_t kInterleave[32] = {0, 16, 1, 17, 2,  18, 3,  19, 4,  20, 5,
                                                              21, 6, 22, 7, 23, 8, 24, 9, 25, 10, 26,
                                                              11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
    const __m512i raw = _mm512_loadu_si512(w);
    const VZ::V even = _mm512_castsi512_ps(_mm512_maskz_slli_epi32(0xFFFF, raw, 16));
    const VZ::V odd = _mm512_castsi512_ps(_mm512_and_si512(raw, _mm512_set1_epi32(static_cast<int>(0xFFFF0000u))));
    const VZ::V ye = VZ::mul(VZ::add(even, m), r), yo = VZ::mul(VZ::add(odd, m), r);
    __m512i halves, inorder;
    asm("vcvtne2ps2bf16 %2, %1, %0" : "=v"(halves) : "v"(yo), "v"(ye));
    asm("vpermw %2, %1, %0" : "=v"(inorder) : "v"(_mm512_load_si512(kInterleave)), "v"(halves));
    if constexpr (NT) _mm512_stream_si512(reinterpret_cast<__m512i*>(o), inorder);
    else _mm512_storeu_si512(o, inorder);
  }
};

// Note [Stride-2 fused rows]: float32 rows at a stride of 2 elements (x[..., ::2], the
// sliced layout) read by the fused loop where they lie, 16 elements per two loads and a
// permute, where packing them into an L1 buffer first put a whole pass of loads from
// L2 before each chunk's arithmetic. F32Pair is the element as it sits in such a row,
// 8 bytes apart, so a pointer to it steps over the elements in between. The second load
// of 16 stops at the row's last element (a fault-suppressing masked load), as
// pack_stride2_f32 does; the tails' loads keep to the row the same way. out is dense
// float rows, or stepped rows too (in place through the steps: masked stores of the
// even lanes, where the pack's pipeline had unpacked a buffer by masked stores after
// the arithmetic). The same float32 arithmetic on the same values: the bits of the dense
// rows' fused groups.
struct F32Pair {
  float v, skip;
};
template <> struct FusedIO<F32Pair> {
  SB_ZMM __attribute__((always_inline)) static VZ::V load(const F32Pair* p) {
    const float* f = reinterpret_cast<const float*>(p);
    return VZ::even_lanes(VZ::load(f), VZ::maskz_load(0x7FFF, f + 16));
  }
  // elements i < k of m's low bits (the row tails: m = 2^k - 1)
  SB_ZMM __attribute__((always_inline)) static VZ::V maskz_load(VZ::Mask m, const F32Pair* p) {
    const float* f = reinterpret_cast<const float*>(p);
    const int c = 2 * __builtin_popcount(m) - 1;  // floats f[0] .. f[2k - 2]
    const VZ::Mask lo = static_cast<VZ::Mask>(c >= 16 ? 0xFFFF : (1u << c) - 1);
    const VZ::Mask hi = static_cast<VZ::Mask>(c > 16 ? (1u << (c - 16)) - 1 : 0);
    return VZ::even_lanes(VZ::maskz_load(lo, f), VZ::maskz_load(hi, f + 16));
  }
  // out at a stride of 2 too (in place through the steps): each half of the 16 results
  // spread to the even lanes and written by a masked store, which leaves the elements
  // in between untouched (Note [Masked stores]); a tail of k results, lanes i < 2k.
  SB_ZMM __attribute__((always_inline)) static void mask_store(F32Pair* p, VZ::Mask m, VZ::V y) {
    float* f = reinterpret_cast<float*>(p);
    const int k2 = 2 * __builtin_popcount(m);
    const VZ::Mask lo = static_cast<VZ::Mask>(0x5555u & (k2 >= 16 ? 0xFFFFu : (1u << k2) - 1));
    const VZ::Mask hi = static_cast<VZ::Mask>(0x5555u & (k2 > 16 ? (1u << (k2 - 16)) - 1 : 0u));
    _mm512_mask_storeu_ps(f, lo, _mm512_maskz_permutexvar_ps(0xFFFF, spread(0), y));
    _mm512_mask_storeu_ps(f + 16, hi, _mm512_maskz_permutexvar_ps(0xFFFF, spread(8), y));
  }
  SB_ZMM __attribute__((always_inline)) static void store(F32Pair* p, VZ::V y) {
    float* f = reinterpret_cast<float*>(p);
    _mm512_mask_storeu_ps(f, 0x5555, _mm512_maskz_permutexvar_ps(0xFFFF, spread(0), y));
    _mm512_mask_storeu_ps(f + 16, 0x5555, _mm512_maskz_permutexvar_ps(0xFFFF, spread(8), y));
  }
  // lanes 2i and 2i + 1 take element from + i
  SB_ZMM __attribute__((always_inline)) static __m512i spread(int from) {
    return _mm512_add_epi32(_mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7), _mm512_set1_epi32(from));
  }
};

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
// NTW: the write's whole vectors with streaming stores (64-byte aligned out rows; the
// tails, plain masked stores).
// T: the rows' dtype; float16 and bfloat16 rows (Note [16-bit fused groups]) are widened
// as they are loaded and rounded as they are stored (FusedIO, Note [16-bit fused IO]).
// TO: out's dtype where it is not x's (F32Pair rows into float ones, Note [Stride-2
// fused rows]).
template <bool STATS, bool WRITE, bool NTW = false, typename T = float, typename TO = T>
SB_ZMM __attribute__((always_inline)) inline void fused_loop(const float* shift, const float* negmean, const float* rstd,
                                                             VZ::V (&s)[8], VZ::V (&q)[8], const char* xs,
                                                             const char* xw, char* ow, int64_t xr, int64_t orow,
                                                             int64_t n) {
  using IO = FusedIO<T>;
  using OIO = FusedIO<TO>;
  const int64_t nf = n / 16;
  const VZ::Mask tm = static_cast<VZ::Mask>((1u << (n % 16)) - 1);
#pragma GCC unroll 8
  for (int k = 0; k < 8; ++k) {
    const T* xk = reinterpret_cast<const T*>(xs + k * xr);
    const T* wk = reinterpret_cast<const T*>(xw + k * xr);
    TO* ok = reinterpret_cast<TO*>(ow + k * orow);
    VZ::V sk = VZ::zero(), qk = VZ::zero(), ck, mk, rk;
    if constexpr (STATS) ck = VZ::set1(shift[k]);
    if constexpr (WRITE) {
      mk = VZ::set1(negmean[k]);
      rk = VZ::set1(rstd[k]);
    }
    int64_t v = 0;
    if constexpr (WRITE && std::is_same_v<T, BFloat16>) {  // Note [bfloat16 writes in pairs]
      for (; v + 2 <= nf; v += 2) {
        if constexpr (STATS) {
#pragma GCC unroll 2
          for (int64_t u = v; u < v + 2; ++u) {
            const VZ::V d = VZ::sub(IO::load(xk + 16 * u), ck);
            sk = VZ::add(sk, d);
            qk = VZ::fma(d, d, qk);
          }
        }
        IO::template write_pair<NTW>(ok + 16 * v, wk + 16 * v, mk, rk);
      }
    }
    for (; v < nf; ++v) {
      if constexpr (STATS) {
        const VZ::V d = VZ::sub(IO::load(xk + 16 * v), ck);
        sk = VZ::add(sk, d);
        qk = VZ::fma(d, d, qk);
      }
      if constexpr (WRITE) {
        const VZ::V y = VZ::mul(VZ::add(IO::load(wk + 16 * v), mk), rk);
        if constexpr (NTW) OIO::stream(ok + 16 * v, y);
        else OIO::store(ok + 16 * v, y);
      }
    }
    if (tm) {  // the row tails
      if constexpr (STATS) {
        const VZ::V d = VZ::maskz_sub(tm, IO::maskz_load(tm, xk + 16 * nf), ck);
        sk = VZ::add(sk, d);
        qk = VZ::fma(d, d, qk);
      }
      if constexpr (WRITE)
        OIO::mask_store(ok + 16 * nf, tm, VZ::mul(VZ::add(IO::maskz_load(tm, wk + 16 * nf), mk), rk));
    }
    s[k] = sk;
    q[k] = qk;
  }
}

// The shift of Note [One statistics pass]: the mean of each row's first 8 elements.
template <typename T = float>
SB_ZMM __attribute__((always_inline)) inline void fused_shift(float* shift, const char* xs, int64_t xr) {
  VF::V c[8];
#pragma GCC unroll 8
  for (int k = 0; k < 8; ++k) {
    if constexpr (std::is_same_v<T, F32Pair>) {  // f[0], f[2], ..., f[14]: within a row of n >= 8
      const float* f = reinterpret_cast<const float*>(xs + k * xr);
      c[k] = detail::even8_f32(VF::load(f), VF::load(f + 8));
    } else {
      c[k] = Vec<T>::load(reinterpret_cast<const T*>(xs + k * xr));
    }
  }
  VF::store_aligned(shift, VF::mul(VF::hsum8(c), VF::set1(0.125f)));
}

// The group's -mean and 1/std from its sums, as one_pass_stats and Note [Normalize
// rsqrt] compute them; false when the guard or the variance check fails.
SB_ZMM __attribute__((always_inline)) inline bool fused_finish(const float* shift, float* negmean, float* rstd,
                                                               const VZ::V (&s)[8], const VZ::V (&q)[8], int64_t n,
                                                               float eps) {
  VF::V s8[8], q8[8];
#pragma GCC unroll 8
  for (int k = 0; k < 8; ++k) {
    s8[k] = vec::fold_halves(s[k]);
    q8[k] = vec::fold_halves(q[k]);
  }
  const VF::V sv = VF::hsum8(s8), qv = VF::hsum8(q8);
  const VF::V m1 = VF::div(sv, VF::set1(static_cast<float>(n)));
  const VF::V t = VF::mul(sv, m1);
  const VF::V var = VF::fma(VF::sub(qv, t), VF::set1(1.0f / static_cast<float>(n)), VF::set1(eps));
  const VF::V ok = VF::and_mask(
      VF::and_mask(VF::cmp_le(VF::add(t, t), qv),
                   VF::cmp_le(qv, VF::set1(std::numeric_limits<float>::max()))),
      normal_var_ps(var));
  if (!VF::all(ok)) return false;
  VF::store_aligned(rstd, rsqrt_newton_ps(var));
  VF::store_aligned(negmean, VF::sub(VF::zero(), VF::add(VF::load_aligned(shift), m1)));
  return true;
}
#endif  // SB_HAVE_AVX512
#endif  // SB_HAVE_AVX2

}  // namespace

#ifdef SB_HAVE_AVX2
// Dense float32 rows from memory (Note [Normalize rows in address order], in
// normalize_memory.cpp); false where it has no kernel for them.
bool normalize_rows_from_memory_f32(bool vl, bool nt, char* const* p, const int64_t* s, int64_t rows, int64_t n,
                                    double eps);

// float32 rows that lie next to each other in x (s[1] == 4 bytes, xsd != 4: Note
// [Normalize across adjacent rows], in normalize_cols.cpp), out = p[0], x = p[1]; vl:
// AVX-512 may take the one-pass statistics (Note [Adjacent rows in one pass]).
void normalize_adjacent_rows_f32(bool vl, char* const* p, const int64_t* s, int64_t rows, int64_t n, int64_t xsd,
                                 int64_t osd, double eps);

// float32 rows in buffers the caches hold, plain stores: normalize.cpp's strip for them,
// which Note [16-bit strided rows through float32] (normalize_strided16.cpp) runs on its
// widened rows.
void normalize_buffered_f32(bool avx, char* const* p, const int64_t* s, int64_t rows, int64_t n, int64_t xsd,
                            int64_t osd, double eps);

// Note [16-bit strided rows through float32], for T = Half and BFloat16; false where a
// block's buffers would pass 1 MiB (the caller's generic path keeps those rows).
template <typename T>
bool normalize_strided16(bool avx, char* const* p, const int64_t* s, int64_t rows, int64_t n, int64_t xsd,
                         int64_t osd, double eps);
#endif

}  // namespace sb::ew
