// reduce_columns.h — the CPU reductions' vertical kernels, over a block of rows whose
// kept dim is unit-stride (v_kernel, the bfloat16 column sums by dot products, the
// vertical var in ymm and zmm), included by reduce.cpp only, after reduce_kernels.h
// (the ops, the constants and the traits they use).
#pragma once
#include <utility>

#include "reduce/reduce_kernels.h"

// An unnamed namespace in a header, as reduce_kernels.h's: a single includer.
namespace sb {
namespace {

// Note [Prefetched 2-byte rows]
// The vertical kernel's kVRows rows are as many sequential streams. Rows of float16 and
// bfloat16 from memory advance half as many bytes per step as float32 ones, and with the
// hardware prefetchers alone a bfloat16 sum over the outer dim of a DRAM-size tensor
// read memory well below the float32 sum's rate. Such rows are prefetched kVPrefetch16
// elements (2 KiB) ahead, once per 64-byte line; float32 rows are not, where the same
// prefetch made those sums slower (docs/notes/copy-reduce.md, "Prefetched 2-byte rows").
// Where x is larger than the streaming threshold (from memory: `far`) the prefetch goes
// to L2 (prefetcht1), which keeps more lines in flight than L1's miss buffers; an x in
// the caches takes it into L1 (prefetcht0), warming the lines of the rows a few passes
// on.
constexpr int64_t kVPrefetch16 = 1024;
template <bool FAR, class T>
inline void prefetch_row16(const T* p) {
  if constexpr (FAR) __builtin_prefetch(p, 0, 2);
  else __builtin_prefetch(p, 0, 3);
}

// Note [Stride-2 kept columns]: the kept elements of a row 2 elements apart (the columns
// of x[..., ::2] summed over an outer dim) take the vertical kernel too, each vector the
// even lanes of two loads (vload_step, reduce_kernels.h), where the general path walked
// the reduced elements of one kept element at a time, 16 of them 32 KiB apart for a
// 1x16x64x64 x, and went back to the same lines for the next (docs/notes/copy-reduce.md).
// A vector's second load stops at the row's last element (vectors while j + W < L), so
// the last column or so goes to the scalar tail.
// buf[q*kColumns + j] (q < N, j < L) combined with rows base + off[r], r < nr; column j
// of row r at base + off[r] + KS j (KS 2: Note [Stride-2 kept columns]).
// FAR: x from memory (Note [Prefetched 2-byte rows]).
template <class V, class Op, bool FAR = false, int KS = 1>
void v_kernel(const typename V::T* base, const int64_t* off, int64_t nr, int64_t L, typename V::Acc* buf) {
  using R = typename V::R;
  using Acc = typename V::Acc;
  constexpr int W = V::W, N = Op::N;
  int64_t r = 0;
  for (; r < nr; r += kVRows) {
    const int64_t k = std::min<int64_t>(kVRows, nr - r);
    const typename V::T* p[kVRows];
    for (int u = 0; u < kVRows; ++u) p[u] = base + off[r + std::min<int64_t>(u, k - 1)];
    int64_t j = 0;
    for (; j + W + (KS - 1) <= L; j += W) {
      if constexpr (sizeof(typename V::T) == 2 && W > 1) {  // Note [Prefetched 2-byte rows]
        if ((j & (32 - 1)) == 0)
          for (int u = 0; u < kVRows; ++u) prefetch_row16<FAR>(p[u] + j + kVPrefetch16);
      }
      R a[N];
      for (int q = 0; q < N; ++q) a[q] = V::loadacc(buf + q * kColumns + j);
      const R m = V::zero();
      Op::template step<V>(a, vload_step<V, KS>(p[0], j), m);
      if (k == kVRows) {
        for (int u = 1; u < kVRows; ++u) Op::template step<V>(a, vload_step<V, KS>(p[u], j), m);  // unrolled: constant trip count
      } else {
        for (int u = 1; u < k; ++u) Op::template step<V>(a, vload_step<V, KS>(p[u], j), m);
      }
      for (int q = 0; q < N; ++q) V::storeacc(buf + q * kColumns + j, a[q]);
    }
    for (; j < L; ++j) {
      Acc a[N];
      for (int q = 0; q < N; ++q) a[q] = buf[q * kColumns + j];
      const Acc m = Acc(0);
      for (int u = 0; u < k; ++u) Op::sstep(a, to_acc<Acc>(p[u][KS * j]), m);
      for (int q = 0; q < N; ++q) buf[q * kColumns + j] = a[q];
    }
  }
}

#ifdef SB_HAVE_AVX512
// Note [Stride-2 kept columns in zmm]: on an AVX-512 core the float32 sums and maxes of
// Note [Stride-2 kept columns] take 16 columns a step, the even lanes of two 512-bit
// loads by one vpermt2ps (Note [Stride-2 float runs in zmm]), where v_kernel's AVX2 step
// takes 8 by two shuffles and its last 8 or so columns go to scalar loops. The last
// <= 16 columns through loads masked to stop at the row's last element and a masked op.
// Each column adds its rows in v_kernel's order into the same float accumulator, so the
// sums are v_kernel's bit for bit (a max is too, but for which NaN it keeps).
template <class Op>
__attribute__((target("avx2,fma,avx512f,avx512vl"))) void v_kernel_stride2_zmm(const float* base, const int64_t* off,
                                                                               int64_t nr, int64_t L, float* buf) {
  using Z = Stride2Zmm<Op>;
  static_assert(Z::N == 1, "sums and maxes");
  const __m512 zero = _mm512_setzero_ps();
  const int c = L % 16 ? static_cast<int>(L % 16) : 16;  // the last c columns under masks
  const int64_t jt = L - c;
  const __mmask16 km = static_cast<__mmask16>(c == 16 ? 0xFFFF : (1u << c) - 1);
  for (int64_t r = 0; r < nr; r += kVRows) {
    const int64_t k = std::min<int64_t>(kVRows, nr - r);
    const float* p[kVRows];
    for (int u = 0; u < kVRows; ++u) p[u] = base + off[r + std::min<int64_t>(u, k - 1)];
    for (int64_t j = 0; j < jt; j += 16) {
      __m512 a = _mm512_loadu_ps(buf + j);
      Z::step(&a, load_stride2_zmm(p[0] + 2 * j), zero);
      if (k == kVRows) {
        for (int u = 1; u < kVRows; ++u) Z::step(&a, load_stride2_zmm(p[u] + 2 * j), zero);  // unrolled: constant trip count
      } else {
        for (int u = 1; u < k; ++u) Z::step(&a, load_stride2_zmm(p[u] + 2 * j), zero);
      }
      _mm512_storeu_ps(buf + j, a);
    }
    __m512 a = _mm512_maskz_loadu_ps(km, buf + jt);
    for (int u = 0; u < k; ++u) Z::step_mask(&a, km, load_stride2_zmm(p[u] + 2 * jt, c), zero);
    _mm512_mask_storeu_ps(buf + jt, km, a);
  }
}

// Note [Narrow columns in registers]
// A float32 column sum of at most kRegColumns kept columns (a 512 x 256 x summed over
// dim 0) keeps its columns' accumulators in up to 16 zmm for a whole batch of rows and
// adds the rows one after the other, each row's columns in address order, where
// v_kernel reads kVRows rows side by side through its buffer. On a core whose L1
// prefetch follows one ascending stream only (Note [Short rows in address order]) rows
// that lie end to end are then one stream. Each column still adds its rows in order into
// one float accumulator that starts from buf, as v_kernel's does, so the sums are v_kernel's
// bit for bit. A bfloat16 row is 8 zmm of words at most: each register's even and odd
// words widen by a shift and a mask into 16 float accumulators, which hold a 32-column
// block's even and odd columns apart (buf's columns go in and out through two permutes
// each, once a batch); each column adds its rows in order too, as the widening v_kernel
// does, where the dot products' path (Note [bfloat16 column sums by dot products]) adds
// them in pairs. Wider float32 tasks, to kBufColumns columns, take the rows in order
// through buf in L1 instead of registers (one load, add and store of buf per input
// vector, where v_kernel's pass of kVRows rows has one per kVRows). Taken where
// CpuTuning::rows_in_order says so, the wider tasks where buf_columns_in_order says so
// too (Zen 5's row; on Sapphire Rapids the registers gained and buf lost).
constexpr int64_t kRegColumns = 256;
// KS: the kept columns' stride along a row, 1 or 2 (Note [Stride-2 kept columns in zmm]:
// each register the even lanes of two loads, the last register's loads stopping at the
// row's last element).
template <int NZ, int KS = 1>
__attribute__((target("avx2,fma,avx512f,avx512vl"))) void v_sum_columns_zmm(const float* base, const int64_t* off,
                                                                            int64_t nr, int64_t L, float* buf) {
  const int c = static_cast<int>(L - 16 * (NZ - 1));  // the last register's columns
  const __mmask16 last = static_cast<__mmask16>(c == 16 ? 0xFFFF : (1u << c) - 1);
  __m512 a[NZ];
#pragma GCC unroll 16
  for (int z = 0; z < NZ; ++z) a[z] = _mm512_maskz_loadu_ps(z == NZ - 1 ? last : __mmask16(0xFFFF), buf + 16 * z);
  for (int64_t r = 0; r < nr; ++r) {
    const float* p = base + off[r];
#pragma GCC unroll 16
    for (int z = 0; z < NZ; ++z) {
      if constexpr (KS == 1)
        a[z] = _mm512_add_ps(a[z], _mm512_maskz_loadu_ps(z == NZ - 1 ? last : __mmask16(0xFFFF), p + 16 * z));
      else
        a[z] = _mm512_add_ps(a[z], z == NZ - 1 ? load_stride2_zmm(p + 32 * z, c) : load_stride2_zmm(p + 32 * z));
    }
  }
#pragma GCC unroll 16
  for (int z = 0; z < NZ; ++z) _mm512_mask_storeu_ps(buf + 16 * z, z == NZ - 1 ? last : __mmask16(0xFFFF), a[z]);
}
// Wider float32 tasks (Note [Narrow columns in registers]): each row added into buf, 64
// columns a step; v_kernel's sums bit for bit.
constexpr int64_t kBufColumns = 2048;
__attribute__((target("avx2,fma,avx512f,avx512vl"))) inline void v_sum_columns_buf(const float* base,
                                                                                   const int64_t* off, int64_t nr,
                                                                                   int64_t L, float* buf) {
  for (int64_t r = 0; r < nr; ++r) {
    const float* p = base + off[r];
    int64_t j = 0;
    for (; j + 64 <= L; j += 64) {
      _mm512_storeu_ps(buf + j, _mm512_add_ps(_mm512_loadu_ps(buf + j), _mm512_loadu_ps(p + j)));
      _mm512_storeu_ps(buf + j + 16, _mm512_add_ps(_mm512_loadu_ps(buf + j + 16), _mm512_loadu_ps(p + j + 16)));
      _mm512_storeu_ps(buf + j + 32, _mm512_add_ps(_mm512_loadu_ps(buf + j + 32), _mm512_loadu_ps(p + j + 32)));
      _mm512_storeu_ps(buf + j + 48, _mm512_add_ps(_mm512_loadu_ps(buf + j + 48), _mm512_loadu_ps(p + j + 48)));
    }
    for (; j < L; j += 16) {
      const __mmask16 m = static_cast<__mmask16>(L - j >= 16 ? 0xFFFF : (1u << (L - j)) - 1);
      _mm512_mask_storeu_ps(buf + j, m, _mm512_add_ps(_mm512_maskz_loadu_ps(m, buf + j), _mm512_maskz_loadu_ps(m, p + j)));
    }
  }
}
using VSumColumnsFn = void (*)(const float*, const int64_t*, int64_t, int64_t, float*);
template <int KS, int... Z>
VSumColumnsFn v_sum_columns_fn(int64_t L, std::integer_sequence<int, Z...>) {
  static constexpr VSumColumnsFn fns[] = {v_sum_columns_zmm<Z + 1, KS>...};
  return fns[(L + 15) / 16 - 1];
}
// The kernel for L (1 to kRegColumns) columns KS apart (Note [Stride-2 kept columns in
// zmm]: where the rows go in order, the float32 column sums of every other element stay
// in registers too; each column adds its rows in order from buf, v_kernel's bits).
template <int KS = 1>
inline VSumColumnsFn v_sum_columns_fn(int64_t L) {
  return v_sum_columns_fn<KS>(L, std::make_integer_sequence<int, kRegColumns / 16>{});
}

// The bfloat16 columns: NZ registers of 32 words a row (the last masked to L's words).
template <int NZ>
__attribute__((target("avx2,fma,avx512f,avx512vl,avx512bw"))) void v_sum_columns_bf16_zmm(
    const BFloat16* base, const int64_t* off, int64_t nr, int64_t L, float* buf) {
  const int64_t tail = L - 32 * (NZ - 1);  // 1 to 32 columns in the last register
  const __mmask32 last = tail == 32 ? ~__mmask32(0) : (__mmask32(1) << tail) - 1;
  const __mmask16 last_lo = static_cast<__mmask16>(last), last_hi = static_cast<__mmask16>(last >> 16);
  const __m512i evens = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odds = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
  const __m512i to_lo = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
  const __m512i to_hi = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
  const __m512i high = _mm512_set1_epi32(static_cast<int>(0xFFFF0000u));
  __m512 e[NZ], o[NZ];
#pragma GCC unroll 8
  for (int z = 0; z < NZ; ++z) {  // columns 32z .. 32z + 31 of buf: evens and odds apart
    const __m512 lo = _mm512_maskz_loadu_ps(z == NZ - 1 ? last_lo : __mmask16(0xFFFF), buf + 32 * z);
    const __m512 hi = _mm512_maskz_loadu_ps(z == NZ - 1 ? last_hi : __mmask16(0xFFFF), buf + 32 * z + 16);
    e[z] = _mm512_permutex2var_ps(lo, evens, hi), o[z] = _mm512_permutex2var_ps(lo, odds, hi);
  }
  for (int64_t r = 0; r < nr; ++r) {
    const BFloat16* p = base + off[r];
#pragma GCC unroll 8
    for (int z = 0; z < NZ; ++z) {
      const __m512i w = _mm512_maskz_loadu_epi16(z == NZ - 1 ? last : ~__mmask32(0), p + 32 * z);
      e[z] = _mm512_add_ps(e[z], _mm512_castsi512_ps(_mm512_maskz_slli_epi32(0xFFFF, w, 16)));  // (masked: GCC 12 warns on the plain shift)
      o[z] = _mm512_add_ps(o[z], _mm512_castsi512_ps(_mm512_and_si512(w, high)));
    }
  }
#pragma GCC unroll 8
  for (int z = 0; z < NZ; ++z) {
    _mm512_mask_storeu_ps(buf + 32 * z, z == NZ - 1 ? last_lo : __mmask16(0xFFFF), _mm512_permutex2var_ps(e[z], to_lo, o[z]));
    _mm512_mask_storeu_ps(buf + 32 * z + 16, z == NZ - 1 ? last_hi : __mmask16(0xFFFF),
                          _mm512_permutex2var_ps(e[z], to_hi, o[z]));
  }
}
using VSumColumnsBf16Fn = void (*)(const BFloat16*, const int64_t*, int64_t, int64_t, float*);
template <int... Z>
VSumColumnsBf16Fn v_sum_columns_bf16_fn(int64_t L, std::integer_sequence<int, Z...>) {
  static constexpr VSumColumnsBf16Fn fns[] = {v_sum_columns_bf16_zmm<Z + 1>...};
  return fns[(L + 31) / 32 - 1];
}
inline VSumColumnsBf16Fn v_sum_columns_bf16_fn(int64_t L) {
  return v_sum_columns_bf16_fn(L, std::make_integer_sequence<int, kRegColumns / 32>{});
}

// Note [bfloat16 column sums by dot products]
// v_kernel's sum for bfloat16 rows on a CPU with AVX512_BF16: two rows' 32 columns
// interleaved by one unpack each way (low and high four words of each 128-bit lane)
// and added into float lanes by vdpbf16ps against ones, eight rows a pass as v_kernel's.
// The AVX2 loop widened each row's 8 columns by a shuffle of its own, which bound it.
// The accumulators hold a block's columns in the unpacks' order (lo: 0-3, 8-11, 16-19,
// 24-27; hi: the other four of each eight), so buf, in column order, goes in and out
// through two permutes each, four a block of 32 columns per pass of 8 rows. Ragged
// ends through masked loads (zero words) and stores; an odd row pairs with zeros.
// Subnormal inputs read as zero, as in Note [bfloat16 sums by dot products].
#define SB_VDP __attribute__((target("avx2,fma,avx512f,avx512vl,avx512bw,avx512bf16")))
#define SB_VDP_INLINE __attribute__((target("avx2,fma,avx512f,avx512vl,avx512bw,avx512bf16"), always_inline))
template <class K>
SB_VDP_INLINE inline void v_sum_bf16_block(const BFloat16* const* p, K k, int64_t j, __mmask32 m, float* buf) {
  const __m512bh one = (__m512bh)_mm512_set1_epi16(0x3F80);  // bfloat16 1.0
  const __m512i to_lo = _mm512_setr_epi32(0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27);
  const __m512i to_hi = _mm512_setr_epi32(4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 28, 29, 30, 31);
  const __m512i to_c0 = _mm512_setr_epi32(0, 1, 2, 3, 16, 17, 18, 19, 4, 5, 6, 7, 20, 21, 22, 23);
  const __m512i to_c1 = _mm512_setr_epi32(8, 9, 10, 11, 24, 25, 26, 27, 12, 13, 14, 15, 28, 29, 30, 31);
  const __mmask16 m0 = static_cast<__mmask16>(m), m1 = static_cast<__mmask16>(m >> 16);
  const __m512 c0 = _mm512_maskz_loadu_ps(m0, buf + j), c1 = _mm512_maskz_loadu_ps(m1, buf + j + 16);
  __m512 lo = _mm512_permutex2var_ps(c0, to_lo, c1), hi = _mm512_permutex2var_ps(c0, to_hi, c1);
  for (int u = 0; u < k; u += 2) {  // k a constant: unrolled
    const __m512i x0 = _mm512_maskz_loadu_epi16(m, p[u] + j);
    const __m512i x1 = u + 1 < k ? _mm512_maskz_loadu_epi16(m, p[u + 1] + j) : _mm512_setzero_si512();
    lo = _mm512_dpbf16_ps(lo, (__m512bh)_mm512_unpacklo_epi16(x0, x1), one);
    hi = _mm512_dpbf16_ps(hi, (__m512bh)_mm512_unpackhi_epi16(x0, x1), one);
  }
  _mm512_mask_storeu_ps(buf + j, m0, _mm512_permutex2var_ps(lo, to_c0, hi));
  _mm512_mask_storeu_ps(buf + j + 16, m1, _mm512_permutex2var_ps(lo, to_c1, hi));
}

// buf[j] (j < L) plus the rows base + off[r], r < nr (v_kernel's OpSum, bfloat16)
template <bool FAR>
SB_VDP void v_sum_bf16_dp(const BFloat16* base, const int64_t* off, int64_t nr, int64_t L, float* buf) {
  for (int64_t r = 0; r < nr; r += kVRows) {
    const int64_t k = std::min<int64_t>(kVRows, nr - r);
    const BFloat16* p[kVRows];
    for (int u = 0; u < kVRows; ++u) p[u] = base + off[r + std::min<int64_t>(u, k - 1)];
    auto pass = [&](auto kk) SB_VDP_INLINE {
      int64_t j = 0;
      for (; j + 32 <= L; j += 32) {
        // Note [Prefetched 2-byte rows]
        for (int u = 0; u < kVRows; ++u) prefetch_row16<FAR>(p[u] + j + kVPrefetch16);
        v_sum_bf16_block(p, kk, j, ~__mmask32(0), buf);
      }
      if (j < L) v_sum_bf16_block(p, kk, j, (__mmask32(1) << (L - j)) - 1, buf);
    };
    if (k == kVRows) pass(std::integral_constant<int, kVRows>{});
    else pass(static_cast<int>(k));
  }
}
#undef SB_VDP_INLINE
#undef SB_VDP
#endif

// Note [One read for var], vertical: rows base + off[r] (r < nr), columns [0, L), y = x -
// cb[j]; buf[j] and buf[kColumns + j] hold the run's mean of y and M2 over nrun rows.
//
// Note [Vertical var in trees]
// A whole pass's block sum and sum of squared deviations over kVRows rows go as balanced
// trees, 3 and 4 deep (the squares two a step: one FMA onto one product), the same
// values up to rounding order; as chains of 8 dependent adds and 8 dependent FMAs a
// column vector, the merge into buf waiting on both, the vertical var of an L2-sized x
// took several times the vertical sum's time. The last, shorter pass keeps the plain
// loops. Figures: docs/notes/copy-reduce.md.
template <class V>
void v_var_kernel(const typename V::T* base, const int64_t* off, int64_t nr, int64_t L, typename V::Acc* buf,
                  const typename V::Acc* cb, int64_t nrun) {
  using R = typename V::R;
  using Acc = typename V::Acc;
  constexpr int W = V::W;
  for (int64_t r = 0; r < nr; r += kVRows) {
    const int k = static_cast<int>(std::min<int64_t>(kVRows, nr - r));
    const typename V::T* p[kVRows];
    for (int u = 0; u < kVRows; ++u) p[u] = base + off[r + std::min(u, k - 1)];
    const double n = static_cast<double>(nrun + k);
    const double wd = k / n, cwd = static_cast<double>(nrun) * k / n, rkd = 1.0 / k;
    const R w = V::set1(wd), cw = V::set1(cwd), rk = V::set1(rkd);
    // kc: the row count, a std::integral_constant for a whole pass of kVRows rows, whose
    // sums go as balanced trees (Note [Vertical var in trees]); an int for the last pass
    auto block = [&](auto kc, int64_t j) {
      constexpr bool kWhole = !std::is_same_v<decltype(kc), int>;
      const R c = V::loadacc(cb + j);
      R y[kVRows];  // the first kc are used
      for (int u = 0; u < kVRows; ++u) y[u] = V::zero();
      for (int u = 0; u < kc; ++u) y[u] = V::sub(V::load(p[u] + j), c);
      R sum = V::zero();
      if constexpr (kWhole) {
        sum = V::add(V::add(V::add(y[0], y[1]), V::add(y[2], y[3])), V::add(V::add(y[4], y[5]), V::add(y[6], y[7])));
      } else {
        for (int u = 0; u < kc; ++u) sum = V::add(sum, y[u]);
      }
      const R mb = V::fmadd(sum, rk, V::zero());
      R q = V::zero();
      if constexpr (kWhole) {
        R e[kVRows], pr[kVRows / 2];
        for (int u = 0; u < kVRows; ++u) e[u] = V::sub(y[u], mb);
        for (int u = 0; u < kVRows / 2; ++u)
          pr[u] = V::fmadd(e[2 * u], e[2 * u], V::fmadd(e[2 * u + 1], e[2 * u + 1], V::zero()));
        q = V::add(V::add(pr[0], pr[1]), V::add(pr[2], pr[3]));
      } else {
        for (int u = 0; u < kc; ++u) {
          const R e = V::sub(y[u], mb);
          q = V::fmadd(e, e, q);
        }
      }
      const R mean = V::loadacc(buf + j), d = V::sub(mb, mean);
      V::storeacc(buf + j, V::fmadd(d, w, mean));
      V::storeacc(buf + kColumns + j, V::add(V::loadacc(buf + kColumns + j), V::fmadd(V::fmadd(d, d, V::zero()), cw, q)));
    };
    int64_t j = 0;
    if (k == kVRows) {
      for (; j + W <= L; j += W) block(std::integral_constant<int, kVRows>{}, j);
    } else {
      for (; j + W <= L; j += W) block(k, j);
    }
    for (; j < L; ++j) {
      const Acc c = cb[j];
      Acc y[kVRows], sum = 0;
      for (int u = 0; u < k; ++u) sum += (y[u] = to_acc<Acc>(p[u][j]) - c);
      const Acc mb = sum * static_cast<Acc>(rkd);
      Acc q = 0;
      for (int u = 0; u < k; ++u) q += (y[u] - mb) * (y[u] - mb);
      const Acc d = mb - buf[j];
      buf[j] += d * static_cast<Acc>(wd);
      buf[kColumns + j] += q + d * d * static_cast<Acc>(cwd);
    }
    nrun += k;
  }
}

#ifdef SB_HAVE_AVX512
// Note [Vertical var in zmm]
// v_var_kernel's passes over 16 columns a register, for float and bfloat16 where the
// level is AVX512: the same trees and float32 arithmetic per column as the 8-column
// kernel (the columns past the last whole 16 take the same scalar tail, which sums in
// row order). The kernel is bound by its float arithmetic, not the memory
// (docs/notes/copy-reduce.md, "bfloat16 columns even and odd in the vertical var"):
// half as many instructions per column take less time even where a 512-bit operation
// issues in two halves. It is v_var_kernel's body again under the AVX-512 target: the
// one template over a zmm traits type would need that target on the AVX2 instantiation
// too, where the compiler may then emit AVX-512 instructions.
#define SB_VZ __attribute__((target("avx2,fma,avx512f,avx512vl,avx512bw")))
#define SB_VZ_INLINE __attribute__((target("avx2,fma,avx512f,avx512vl,avx512bw"), always_inline))
template <typename T>
SB_VZ void v_var_kernel_zmm(const T* base, const int64_t* off, int64_t nr, int64_t L, float* buf, const float* cb,
                             int64_t nrun) {
  using Z = vec::Vec<float, 512>;
  using In = vec::Vec<T, 512>;
  using R = __m512;
  constexpr int W = 16;
  for (int64_t r = 0; r < nr; r += kVRows) {
    const int k = static_cast<int>(std::min<int64_t>(kVRows, nr - r));
    const T* p[kVRows];
    for (int u = 0; u < kVRows; ++u) p[u] = base + off[r + std::min(u, k - 1)];
    const double n = static_cast<double>(nrun + k);
    const double wd = k / n, cwd = static_cast<double>(nrun) * k / n, rkd = 1.0 / k;
    const R w = Z::set1(static_cast<float>(wd)), cw = Z::set1(static_cast<float>(cwd)),
            rk = Z::set1(static_cast<float>(rkd));
    auto block = [&](auto kc, int64_t j) SB_VZ_INLINE {
      constexpr bool kWhole = !std::is_same_v<decltype(kc), int>;
      const R c = Z::load(cb + j);
      R y[kVRows];
      for (int u = 0; u < kVRows; ++u) y[u] = Z::zero();
      for (int u = 0; u < kc; ++u) y[u] = Z::sub(In::load(p[u] + j), c);
      R sum = Z::zero();
      if constexpr (kWhole) {
        sum = Z::add(Z::add(Z::add(y[0], y[1]), Z::add(y[2], y[3])), Z::add(Z::add(y[4], y[5]), Z::add(y[6], y[7])));
      } else {
        for (int u = 0; u < kc; ++u) sum = Z::add(sum, y[u]);
      }
      const R mb = Z::fma(sum, rk, Z::zero());
      R q = Z::zero();
      if constexpr (kWhole) {
        R e[kVRows], pr[kVRows / 2];
        for (int u = 0; u < kVRows; ++u) e[u] = Z::sub(y[u], mb);
        for (int u = 0; u < kVRows / 2; ++u)
          pr[u] = Z::fma(e[2 * u], e[2 * u], Z::fma(e[2 * u + 1], e[2 * u + 1], Z::zero()));
        q = Z::add(Z::add(pr[0], pr[1]), Z::add(pr[2], pr[3]));
      } else {
        for (int u = 0; u < kc; ++u) {
          const R e = Z::sub(y[u], mb);
          q = Z::fma(e, e, q);
        }
      }
      const R mean = Z::load(buf + j), d = Z::sub(mb, mean);
      Z::store(buf + j, Z::fma(d, w, mean));
      Z::store(buf + kColumns + j, Z::add(Z::load(buf + kColumns + j), Z::fma(Z::fma(d, d, Z::zero()), cw, q)));
    };
    int64_t j = 0;
    if (k == kVRows) {
      for (; j + W <= L; j += W) block(std::integral_constant<int, kVRows>{}, j);
    } else {
      for (; j + W <= L; j += W) block(k, j);
    }
    for (; j < L; ++j) {
      const float c = cb[j];
      float y[kVRows], sum = 0;
      for (int u = 0; u < k; ++u) sum += (y[u] = to_acc<float>(p[u][j]) - c);
      const float mb = sum * static_cast<float>(rkd);
      float q = 0;
      for (int u = 0; u < k; ++u) q += (y[u] - mb) * (y[u] - mb);
      const float d = mb - buf[j];
      buf[j] += d * static_cast<float>(wd);
      buf[kColumns + j] += q + d * d * static_cast<float>(cwd);
    }
    nrun += k;
  }
}
#undef SB_VZ_INLINE
#undef SB_VZ
#endif

}  // namespace
}  // namespace sb
