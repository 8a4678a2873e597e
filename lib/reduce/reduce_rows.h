// reduce_rows.h — the CPU reductions' horizontal kernels over whole rows: short
// unit-stride rows four at a time (Note [Short rows four at a time]; in zmm, Notes [Short
// rows in zmm], [Short rows in address order], [Short var rows in zmm]; bfloat16 by dot
// products, Notes [bfloat16 sums by dot products], [bfloat16 moments by dot products]),
// and var/std of one unit-stride run in one read (h_var_run). Included by reduce.cpp
// only, after reduce_kernels.h (the ops, the run kernels and the traits they use).
#pragma once
#include "reduce/reduce_kernels.h"

// An unnamed namespace in a header, as reduce_kernels.h's: a single includer.
namespace sb {
namespace {

// Note [Short rows four at a time]
// A sum over many unit-stride rows of at most kShortRow elements (x.sum(-1) of a 512 x
// 256 x) paid per row, through h_kernel, about as much for its call, its registers and
// its horizontal sum in double as for its loads. Such rows go four at a time: two float
// accumulators a row (eight chains in all), the four rows' lanes summed in double
// together (vec's hsum4: a conversion, a transposing add, one store), then each row's
// scalar tail in double. A bfloat16 row takes 16 elements per 32-byte load (load2: a
// sum does not care which lane holds which element). The accuracy is h_kernel's: float
// lanes over one block of at most kFlushElems, then double; the lanes' order differs,
// so the last bits may. max takes the same loop with its NaN-propagating max
// (h_max_rows4) and each row's hmax. var takes h_var_run's one block per row the same way
// (h_sqdev_rows4: four rows' shifted sums in one loop, one pair of accumulators a row,
// as AVX2's 16 registers hold), each row then through h_var_run's guard and merge, a
// row the guard does not trust through h_var_run itself.
constexpr int64_t kShortRow = 1024;

#ifdef SB_HAVE_AVX2
// The vector part the short-row kernels share: f(r, c, x) for each register x of row r's
// elements (r < 4), in two chains c, and one more register f(r, 0, x) where W elements
// remain; a bfloat16 row 16 elements a load (Vec<BFloat16>::load2, Note [bfloat16
// pairs of vectors]). Returns the first element left to the scalar tail.
template <class V, class F>
int64_t rows4_vectors(const typename V::T* const* p, int64_t n, const F& f) {
  constexpr int W = V::W;
  int64_t i = 0;
  for (; i + 2 * W <= n; i += 2 * W)
    for (int r = 0; r < 4; ++r) {
      if constexpr (std::is_same_v<typename V::T, BFloat16>) {
        typename V::R lo, hi;
        vec::Vec<BFloat16>::load2(p[r] + i, lo, hi);
        f(r, 0, lo);
        f(r, 1, hi);
      } else {
        f(r, 0, V::load(p[r] + i));
        f(r, 1, V::load(p[r] + i + W));
      }
    }
  if (i + W <= n) {
    for (int r = 0; r < 4; ++r) f(r, 0, V::load(p[r] + i));
    i += W;
  }
  return i;
}

// out[r] = sum of p[r][0 .. n) (r < 4), n <= kShortRow; V a vector path (W > 1).
template <class V>
void h_sum_rows4(const typename V::T* const* p, int64_t n, double* out) {
  using R = typename V::R;
  R a[4][2];
  for (auto& c : a) c[0] = c[1] = V::zero();
  const int64_t i = rows4_vectors<V>(p, n, [&](int r, int c, R x) { a[r][c] = V::add(a[r][c], x); });
  R s[4];
  for (int r = 0; r < 4; ++r) s[r] = V::add(a[r][0], a[r][1]);
  __m256d sum = V::hsum4(s);
  if (i < n) {  // the tails, added in registers: a scalar reload of the stored sums stalls
    double t[4] = {0, 0, 0, 0};
    for (int r = 0; r < 4; ++r)
      for (int64_t j = i; j < n; ++j) t[r] += to_acc<double>(p[r][j]);
    sum = _mm256_add_pd(sum, _mm256_setr_pd(t[0], t[1], t[2], t[3]));
  }
  _mm256_storeu_pd(out, sum);
}

// Note [Short rows four at a time], max: out[r] = max of p[r][0 .. n) (r < 4), NaN if any
// element is NaN.
template <class V>
void h_max_rows4(const typename V::T* const* p, int64_t n, double* out) {
  using R = typename V::R;
  R a[4][2];
  for (auto& c : a) c[0] = c[1] = V::lowest();
  const int64_t i = rows4_vectors<V>(p, n, [&](int r, int c, R x) { a[r][c] = V::max_nan(a[r][c], x); });
  for (int r = 0; r < 4; ++r) {
    double m = V::hmax(V::max_nan(a[r][0], a[r][1]));
    for (int64_t j = i; j < n; ++j) m = nanmax<double>(m, to_acc<double>(p[r][j]));
    out[r] = m;
  }
}

// Note [Short rows four at a time], var: h_var_run's one block for four rows of n
// elements (W <= n <= kShortRow < kVarRunBlock), each around its own centre c[r]
// (run_centre): s[r] = sum(x - c[r]) and q[r] = sum((x - c[r])^2), float lanes summed in
// double together, the tails in double. The caller applies h_var_run's guard to each
// row and merges it (merge_block).
template <class V>
void h_sqdev_rows4(const typename V::T* const* p, int64_t n, const typename V::Acc* c, double* s, double* q) {
  using R = typename V::R;
  R a[4], b[4], m[4];
  for (int r = 0; r < 4; ++r) a[r] = b[r] = V::zero(), m[r] = V::set1(static_cast<double>(c[r]));
  const int64_t i = rows4_vectors<V>(p, n, [&](int r, int, R x) {
    const R d = V::sub(x, m[r]);
    b[r] = V::fmadd(d, d, b[r]);
    a[r] = V::add(a[r], d);
  });
  __m256d sv = V::hsum4(a), qv = V::hsum4(b);
  if (i < n) {  // the tails, in double, added in registers (a reload of the stores stalls)
    double ts[4] = {0, 0, 0, 0}, tq[4] = {0, 0, 0, 0};
    for (int r = 0; r < 4; ++r)
      for (int64_t j = i; j < n; ++j) {
        const double d = to_acc<double>(p[r][j]) - static_cast<double>(c[r]);
        ts[r] += d;
        tq[r] += d * d;
      }
    sv = _mm256_add_pd(sv, _mm256_setr_pd(ts[0], ts[1], ts[2], ts[3]));
    qv = _mm256_add_pd(qv, _mm256_setr_pd(tq[0], tq[1], tq[2], tq[3]));
  }
  _mm256_storeu_pd(s, sv);
  _mm256_storeu_pd(q, qv);
}
#endif

#ifdef SB_HAVE_AVX512
// Note [Short rows in zmm]
// On a CPU of the AVX512 level (use_avx512()) the short-row max of float, float16 and
// bfloat16 takes zmm registers: 32 elements of a row per step (two float registers; a
// bfloat16 row as one 64-byte load split into its even and odd elements), two chains a
// row as before. A row's last < 32 elements go 16 at a time through AVX-512's masked
// loads in element order, the lanes off the row set to -inf, so no scalar tail is left.
// The halves of each row's registers are then folded (max_nan) into one AVX2 register
// and the rest is the AVX2 kernel's (hmax). The sums and var keep the AVX2 loop, which
// the zmm one did not beat on their rows (docs/notes/copy-reduce.md, "Short rows in
// zmm"), but for bfloat16 by dot products (below). Separate functions under their own
// target, so the AVX2 kernels' code stays as it was.
#define SB_RZMM __attribute__((target("avx2,fma,f16c,avx512f,avx512vl,avx512bw")))
#define SB_RZMM_INLINE __attribute__((target("avx2,fma,f16c,avx512f,avx512vl,avx512bw"), always_inline))

template <typename T> struct RowZmm;
template <> struct RowZmm<float> {
  SB_RZMM_INLINE static void load32(const float* p, __m512& a, __m512& b) {
    a = _mm512_loadu_ps(p);
    b = _mm512_loadu_ps(p + 16);
  }
  SB_RZMM_INLINE static __m512 maskz_load16(__mmask16 m, const float* p) { return _mm512_maskz_loadu_ps(m, p); }
};
template <> struct RowZmm<Half> {
  SB_RZMM_INLINE static void load32(const Half* p, __m512& a, __m512& b) {
    a = _mm512_maskz_cvtph_ps(0xFFFF, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    b = _mm512_maskz_cvtph_ps(0xFFFF, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 16)));
  }
  SB_RZMM_INLINE static __m512 maskz_load16(__mmask16 m, const Half* p) {
    return _mm512_maskz_cvtph_ps(0xFFFF, _mm256_maskz_loadu_epi16(m, p));
  }
};
template <> struct RowZmm<BFloat16> {
  SB_RZMM_INLINE static void load32(const BFloat16* p, __m512& a, __m512& b) {  // evens, odds
    const __m512i raw = _mm512_loadu_si512(p);
    a = _mm512_castsi512_ps(_mm512_maskz_slli_epi32(0xFFFF, raw, 16));
    b = _mm512_castsi512_ps(_mm512_and_si512(raw, _mm512_set1_epi32(static_cast<int>(0xFFFF0000u))));
  }
  SB_RZMM_INLINE static __m512 maskz_load16(__mmask16 m, const BFloat16* p) {
    return _mm512_castsi512_ps(
        _mm512_maskz_slli_epi32(0xFFFF, _mm512_maskz_cvtepu16_epi32(0xFFFF, _mm256_maskz_loadu_epi16(m, p)), 16));
  }
};

SB_RZMM_INLINE inline __m512 max_nan512(__m512 a, __m512 x) {  // F32Lanes::max_nan's rule
  const __mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
  return _mm512_mask_mov_ps(_mm512_maskz_max_ps(0xFFFF, x, a), nan, x);
}
SB_RZMM_INLINE inline __m256 zmm_half(__m512 v, int h) {  // masked: see vec.h's fold_halves
  const __m512d d = _mm512_castps_pd(v);
  return _mm256_castpd_ps(h ? _mm512_mask_extractf64x4_pd(_mm256_setzero_pd(), 0xF, d, 1)
                            : _mm512_mask_extractf64x4_pd(_mm256_setzero_pd(), 0xF, d, 0));
}
SB_RZMM_INLINE inline __m256 fold_max(__m512 v) { return vec::F32Lanes::max_nan(zmm_half(v, 0), zmm_half(v, 1)); }
// Note [Four row sums in one tree]: the 16 float lanes of four rows' accumulators summed
// as one tree of unpacks and adds over all four (each add sums two rows' pairs at once),
// lane r of the result row r's sum. Folding each row to 8 lanes and summing those in
// double (F32Lanes::hsum4) took about as many instructions as the dot products of a
// 256-element row, most of them conversions and shuffles on one port. The sums of
// bfloat16 rows round to bfloat16, so the tree's last four float32 roundings do not show.
// The short rows' max takes the same tree with max_nan512 for the adds (a NaN of either
// side goes through each step). rows4_tree: its first two steps, each 128-bit lane
// holding [r0, r1, r2, r3] over that lane's four elements; the callers fold the lanes.
// (Masked forms with every lane set: GCC 12 warns on the plain unpacks.)
struct AddPs512 {
  SB_RZMM_INLINE __m512 operator()(__m512 x, __m512 y) const { return _mm512_add_ps(x, y); }
};
struct MaxNan512 {
  SB_RZMM_INLINE __m512 operator()(__m512 x, __m512 y) const { return max_nan512(x, y); }
};
template <class Op>
SB_RZMM_INLINE inline __m512 rows4_tree(__m512 r0, __m512 r1, __m512 r2, __m512 r3, Op op) {
  // per 128-bit lane, elements e0..e3 of each row: [r0 e0+e2, r1 e0+e2, r0 e1+e3, r1 e1+e3], the same of r2, r3
  const __m512 t01 = op(_mm512_maskz_unpacklo_ps(0xFFFF, r0, r1), _mm512_maskz_unpackhi_ps(0xFFFF, r0, r1));
  const __m512 t23 = op(_mm512_maskz_unpacklo_ps(0xFFFF, r2, r3), _mm512_maskz_unpackhi_ps(0xFFFF, r2, r3));
  const __m512d a = _mm512_castps_pd(t01), b = _mm512_castps_pd(t23);
  return op(_mm512_castpd_ps(_mm512_maskz_unpacklo_pd(0xFF, a, b)), _mm512_castpd_ps(_mm512_maskz_unpackhi_pd(0xFF, a, b)));
}
// f(r, c, x, m) for the registers of four rows' n elements: 32 a step (two registers,
// chains c = 0 and 1, m all lanes), then the rest 16 at a time (chain 0, m the lanes on
// the row, the others zero).
template <typename T, class F>
SB_RZMM_INLINE inline void rows4_zmm(const T* const* p, int64_t n, F&& f) {
  int64_t i = 0;
  for (; i + 32 <= n; i += 32)
    for (int r = 0; r < 4; ++r) {
      __m512 a, b;
      RowZmm<T>::load32(p[r] + i, a, b);
      f(r, 0, a, __mmask16(0xFFFF));
      f(r, 1, b, __mmask16(0xFFFF));
    }
  for (; i < n; i += 16) {
    const __mmask16 m = static_cast<__mmask16>(n - i >= 16 ? 0xFFFF : (1u << (n - i)) - 1);
    for (int r = 0; r < 4; ++r) f(r, 0, RowZmm<T>::maskz_load16(m, p[r] + i), m);
  }
}

// Note [Short rows in address order]
// On the family-26 core (Zen 5) short rows in the L2 came in at about half the rate
// when read side by side, a line of each row in turn as Note [Short rows four at a time]
// reads four, than when the same lines were read in address order: that core's L1
// prefetch follows one ascending stream and not several short ones (docs/notes/
// copy-reduce.md, "Short rows in address order"). Where the design's row says so
// (CpuTuning::rows_in_order) the float32 and float16 short rows' sums of at least
// kInOrderRowBytes read one row after the other, each in four zmm chains (64 elements a
// step: two chains a row did not keep a line a cycle coming), its last < 64 elements 16
// at a time under a mask; each row's 16 lanes are then folded to 8 in float and summed
// in double with the other three rows' (F32Lanes::hsum4), as the side-by-side kernel's
// 8 lanes are. A lane adds at most kShortRow / 64 elements in float before its fold.
// Shorter rows, whose loop set-up each row weighs more, keep the side-by-side kernel,
// and so do the maxes and the bfloat16 sums by dot products, which read no faster in
// order. Off in the rows of designs where it is not measured.
constexpr int64_t kInOrderRowBytes = 1024;
template <typename T>
SB_RZMM_INLINE inline __m512 row_sum_zmm(const T* p, int64_t n) {
  __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    __m512 x0, x1, x2, x3;
    RowZmm<T>::load32(p + i, x0, x1);
    RowZmm<T>::load32(p + i + 32, x2, x3);
    a0 = _mm512_add_ps(a0, x0), a1 = _mm512_add_ps(a1, x1), a2 = _mm512_add_ps(a2, x2), a3 = _mm512_add_ps(a3, x3);
  }
  for (; i < n; i += 16) {  // the lanes off the row load as zero
    const __mmask16 m = static_cast<__mmask16>(n - i >= 16 ? 0xFFFF : (1u << (n - i)) - 1);
    a0 = _mm512_add_ps(a0, RowZmm<T>::maskz_load16(m, p + i));
  }
  return _mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3));
}
// out[r] = sum of p[r][0 .. n) (r < 4), float32 or float16 rows one after the other (Note
// [Short rows in address order]).
template <typename T>
SB_RZMM void h_sum_rows4_in_order(const T* const* p, int64_t n, double* out) {
  __m256 s[4];
  for (int r = 0; r < 4; ++r) s[r] = vec::fold_halves(row_sum_zmm(p[r], n));
  _mm256_storeu_pd(out, vec::F32Lanes::hsum4(s));
}

// The four rows' maxes: rows(f) hands each register of the rows to f(r, c, x, m) (chain
// c of row r, lanes m on the row), as rows4_zmm does; two NaN-propagating chains a row,
// then Note [Four row sums in one tree] with max_nan512 for the adds.
template <class Rows>
SB_RZMM_INLINE inline void max_rows4(const Rows& rows, double* out) {
  const __m512 lowest = _mm512_set1_ps(-INFINITY);
  __m512 a[4][2];
  for (auto& c : a) c[0] = c[1] = lowest;
  rows([&](int r, int c, __m512 x, __mmask16 m) SB_RZMM_INLINE {
    a[r][c] = max_nan512(a[r][c], _mm512_mask_mov_ps(lowest, m, x));
  });
  const __m256 h = fold_max(rows4_tree(max_nan512(a[0][0], a[0][1]), max_nan512(a[1][0], a[1][1]),
                                       max_nan512(a[2][0], a[2][1]), max_nan512(a[3][0], a[3][1]), MaxNan512{}));
  const __m256 q = vec::F32Lanes::max_nan(h, _mm256_permute2f128_ps(h, h, 1));  // lanes 0-3: rows 0-3
  _mm256_storeu_pd(out, _mm256_cvtps_pd(_mm256_castps256_ps128(q)));
}

template <typename T>
SB_RZMM void h_max_rows4_zmm(const T* const* p, int64_t n, double* out) {
  max_rows4([&](const auto& f) SB_RZMM_INLINE { rows4_zmm(p, n, f); }, out);
}

// Note [Stride-2 rows four at a time]
// Short float32 rows of every other element (x[:, ::2].sum(-1) of a 512 x 512 x) paid
// per row, through h_kernel and Note [Stride-2 float runs in zmm], more for the call,
// the set-up and the horizontal sum in double than for their loads: the rows' ends,
// a chain of conversions and adds each, kept the loads apart. On the AVX512 level
// such rows go four at a time as Note [Short rows four at a time] takes unit-stride
// ones, each register the even lanes of two loads (load_stride2_zmm): 32 elements of a
// row a step in two chains while 2i + 63 stays before the row's last element (2n - 2),
// then 16 at a time through loads masked to stop there, the lanes off the row zero and
// left out of the op. Sums: each row's lanes folded to 8 and summed in double with the
// other three's (F32Lanes::hsum4), as the unit-stride float32 rows' are; max: the tree
// of Note [Four row sums in one tree] under max_nan512.
template <class F>
SB_RZMM_INLINE inline void rows4_stride2_zmm(const float* const* p, int64_t n, F&& f) {
  int64_t i = 0;
  for (; i + 32 < n; i += 32)
    for (int r = 0; r < 4; ++r) {
      f(r, 0, load_stride2_zmm(p[r] + 2 * i), __mmask16(0xFFFF));
      f(r, 1, load_stride2_zmm(p[r] + 2 * i + 32), __mmask16(0xFFFF));
    }
  for (; i < n; i += 16) {
    const int c = static_cast<int>(std::min<int64_t>(16, n - i));
    const __mmask16 m = static_cast<__mmask16>(c == 16 ? 0xFFFF : (1u << c) - 1);
    for (int r = 0; r < 4; ++r) f(r, 0, load_stride2_zmm(p[r] + 2 * i, c), m);
  }
}
SB_RZMM void h_sum_rows4_stride2_zmm(const float* const* p, int64_t n, double* out) {
  __m512 a[4][2];
  for (auto& c : a) c[0] = c[1] = _mm512_setzero_ps();
  rows4_stride2_zmm(p, n, [&](int r, int c, __m512 x, __mmask16) SB_RZMM_INLINE { a[r][c] = _mm512_add_ps(a[r][c], x); });
  __m256 s[4];
  for (int r = 0; r < 4; ++r) s[r] = vec::fold_halves(_mm512_add_ps(a[r][0], a[r][1]));
  _mm256_storeu_pd(out, vec::F32Lanes::hsum4(s));
}
SB_RZMM void h_max_rows4_stride2_zmm(const float* const* p, int64_t n, double* out) {
  max_rows4([&](const auto& f) SB_RZMM_INLINE { rows4_stride2_zmm(p, n, f); }, out);
}

// Note [bfloat16 sums by dot products]
// A bfloat16 sum of unit-stride rows on a CPU with AVX512_BF16 (use_avx512_bf16())
// takes vdpbf16ps against a register of ones: 32 elements of a row an instruction, each
// float lane adding its pair of elements (x * 1 is exact), where the AVX2 loop widens
// 16 elements by two unpacks and adds them by two more instructions. Short rows go four
// at a time, two chains a row as in Note [Short rows four at a time] (h_sum_rows4_dp);
// longer runs in h_kernel's blocks of kFlushElems, four chains (h_sum_run_dp), where the
// design's row takes them for the reduction's input size (use_bf16_dot_runs: on a core
// whose vdpbf16ps runs at half the FMA rate the loops without them (Note [bfloat16 long
// sums in zmm]) stream rows from memory faster, while the dot products still win in the
// caches; docs/notes/copy-reduce.md, "bfloat16 dot products on the Sapphire Rapids-class
// VM"). The last
// < 32 elements go through a masked load whose other words are zero, so no scalar
// tail. A lane sums at most kShortRow / 16 (short rows) or kFlushElems / 64 elements
// in float32 before the lanes go into double, fewer than the AVX2 loop's; a short row's
// 16 lanes are summed in float32 too (Note [Four row sums in one tree]), its result
// rounded to bfloat16 after. vdpbf16ps
// reads bfloat16 subnormals as zero (DAZ) and flushes a subnormal float32 partial sum
// (FTZ), as the bf16 GEMM on the same instruction does: the sum differs from the AVX2
// loop's by at most 2^-126 per element (Note [bfloat16 NaN and subnormals]); NaN and
// infinity propagate as in any float sum.
#define SB_RDP_INLINE __attribute__((target("avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512bf16"), always_inline))

// The four rows' sums (Note [Four row sums in one tree]), lane r row r's.
SB_RZMM_INLINE inline __m128 hsum4_zmm(__m512 r0, __m512 r1, __m512 r2, __m512 r3) {
  const __m256 h = vec::fold_halves(rows4_tree(r0, r1, r2, r3, AddPs512{}));
  return _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
}

// Note [Short var rows in zmm]: h_sqdev_rows4 in zmm, where the design's row says so
// (CpuTuning::var_rows_zmm, on a core with two full-width 512-bit FMA pipes): the same
// centres, the same one pass of S = sum(x - c) and Q = sum((x - c)^2) per row, 32
// elements a step in two chains a row (16 accumulators, 4 centres), the last < 32
// elements 16 at a time through rows4_zmm's masked loads with the lanes off the row
// masked out of x - c, and each row's lanes summed in one tree (Note [Four row sums in
// one tree]). Per 16 elements a sub, an add and an FMA on two pipes, where the AVX2 loop
// issues them for 8 on three. A lane sums at most kShortRow / 32 deviations in float32
// before its tree, against kShortRow / 16 in the AVX2 loop, whose lanes then go into
// double: the tree's four float32 roundings of S and Q are 2^-22 of them at most,
// within the caller's guard (which already allows Q twice the two-pass error). On a core
// whose 512-bit operations issue in halves, or whose row has not measured it, the AVX2
// loop (docs/notes/copy-reduce.md, "Short var rows in zmm").
template <typename T>
SB_RZMM void h_sqdev_rows4_zmm(const T* const* p, int64_t n, const float* c, double* s, double* q) {
  __m512 a[4][2], b[4][2], m[4];
  for (int r = 0; r < 4; ++r) {
    a[r][0] = a[r][1] = b[r][0] = b[r][1] = _mm512_setzero_ps();
    m[r] = _mm512_set1_ps(c[r]);
  }
  rows4_zmm(p, n, [&](int r, int k, __m512 x, __mmask16 mk) SB_RZMM_INLINE {
    const __m512 d = mk == 0xFFFF ? _mm512_sub_ps(x, m[r]) : _mm512_maskz_sub_ps(mk, x, m[r]);
    a[r][k] = _mm512_add_ps(a[r][k], d);
    b[r][k] = _mm512_fmadd_ps(d, d, b[r][k]);
  });
  _mm256_storeu_pd(s, _mm256_cvtps_pd(hsum4_zmm(_mm512_add_ps(a[0][0], a[0][1]), _mm512_add_ps(a[1][0], a[1][1]),
                                                _mm512_add_ps(a[2][0], a[2][1]), _mm512_add_ps(a[3][0], a[3][1]))));
  _mm256_storeu_pd(q, _mm256_cvtps_pd(hsum4_zmm(_mm512_add_ps(b[0][0], b[0][1]), _mm512_add_ps(b[1][0], b[1][1]),
                                                _mm512_add_ps(b[2][0], b[2][1]), _mm512_add_ps(b[3][0], b[3][1]))));
}

__attribute__((target("avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512bf16"))) void h_sum_rows4_dp(
    const BFloat16* const* p, int64_t n, double* out) {
  // named accumulators, not an array: GCC 12 kept an array of them on the stack, and
  // Zen 4 forwards a 512-bit reload from its two 256-bit stores only after a stall
  const __m512bh one = (__m512bh)_mm512_set1_epi16(0x3F80);  // bfloat16 1.0
  const BFloat16 *p0 = p[0], *p1 = p[1], *p2 = p[2], *p3 = p[3];
  __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, b0 = a0, b1 = a0, b2 = a0, b3 = a0;
  auto dp = [one](__m512 a, const BFloat16* q) SB_RDP_INLINE {
    return _mm512_dpbf16_ps(a, (__m512bh)_mm512_loadu_si512(q), one);
  };
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    a0 = dp(a0, p0 + i), b0 = dp(b0, p0 + i + 32);
    a1 = dp(a1, p1 + i), b1 = dp(b1, p1 + i + 32);
    a2 = dp(a2, p2 + i), b2 = dp(b2, p2 + i + 32);
    a3 = dp(a3, p3 + i), b3 = dp(b3, p3 + i + 32);
  }
  if (i + 32 <= n) {
    a0 = dp(a0, p0 + i), a1 = dp(a1, p1 + i), a2 = dp(a2, p2 + i), a3 = dp(a3, p3 + i);
    i += 32;
  }
  if (i < n) {  // the words past the row read as zero
    const __mmask32 m = (__mmask32(1) << (n - i)) - 1;
    auto dpm = [one, m](__m512 a, const BFloat16* q) SB_RDP_INLINE {
      return _mm512_dpbf16_ps(a, (__m512bh)_mm512_maskz_loadu_epi16(m, q), one);
    };
    b0 = dpm(b0, p0 + i), b1 = dpm(b1, p1 + i), b2 = dpm(b2, p2 + i), b3 = dpm(b3, p3 + i);
  }
  // Note [Four row sums in one tree]
  _mm256_storeu_pd(out, _mm256_cvtps_pd(hsum4_zmm(_mm512_add_ps(a0, b0), _mm512_add_ps(a1, b1), _mm512_add_ps(a2, b2),
                                                  _mm512_add_ps(a3, b3))));
}

// Note [bfloat16 moments by dot products]
// var of short bfloat16 rows with AVX512_BF16 (and of h_var_run's blocks of longer
// unit-stride runs, h_moments_run_dp, a block standing for a row): per row S = sum(x)
// (vdpbf16ps against ones) and Q = sum(x^2) (vdpbf16ps of x with itself: a bfloat16
// square is exact in float32), 32 elements an instruction each, four rows at a time, no
// centre to find first; M2 = Q - S^2 / n in double. The float32 rounding of Q and of S
// (at most 2^-24 of Q, of the sum of |x|, per add: 64 adds a lane at most, then the 4 of
// Note [Four row sums in one tree]) errs by at most 3 Q / M2 times that in M2 (|S| and
// the sum of |x| are at most sqrt(n Q)), so the
// caller takes a group of four rows this way only where every row has Q <= 16 M2 (a
// mean within 3.9 standard deviations of 0) and Q finite: M2 within 2^-12 of itself,
// below the 2^-9 of the bfloat16 result's rounding. Other groups, and rows with a NaN or
// an infinity, take the run_centre path, and the next kDpRetry groups go there without
// trying: a tensor's rows tend to be alike, and a group tried in vain costs the sums
// twice. Squares below 2^-126 and subnormal inputs read as zero (as in Note [bfloat16
// sums by dot products]): M2 differs by at most 2^-126 per element.
constexpr int kDpRetry = 32;
// S += x (against ones) and Q += x^2, 32 bfloat16 elements.
SB_RDP_INLINE inline void moments_dp_step(__m512bh one, __m512& sa, __m512& qa, __m512i x) {
  sa = _mm512_dpbf16_ps(sa, (__m512bh)x, one);
  qa = _mm512_dpbf16_ps(qa, (__m512bh)x, (__m512bh)x);
}
__attribute__((target("avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512bf16"))) void h_moments_rows4_dp(
    const BFloat16* const* p, int64_t n, double* s, double* q) {
  const __m512bh one = (__m512bh)_mm512_set1_epi16(0x3F80);  // bfloat16 1.0
  const BFloat16 *p0 = p[0], *p1 = p[1], *p2 = p[2], *p3 = p[3];
  __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0, q0 = s0, q1 = s0, q2 = s0, q3 = s0;
  auto step = [one](__m512& sa, __m512& qa, __m512i x) SB_RDP_INLINE { moments_dp_step(one, sa, qa, x); };
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    step(s0, q0, _mm512_loadu_si512(p0 + i));
    step(s1, q1, _mm512_loadu_si512(p1 + i));
    step(s2, q2, _mm512_loadu_si512(p2 + i));
    step(s3, q3, _mm512_loadu_si512(p3 + i));
  }
  if (i < n) {  // the words past the row read as zero
    const __mmask32 m = (__mmask32(1) << (n - i)) - 1;
    step(s0, q0, _mm512_maskz_loadu_epi16(m, p0 + i));
    step(s1, q1, _mm512_maskz_loadu_epi16(m, p1 + i));
    step(s2, q2, _mm512_maskz_loadu_epi16(m, p2 + i));
    step(s3, q3, _mm512_maskz_loadu_epi16(m, p3 + i));
  }
  _mm256_storeu_pd(s, _mm256_cvtps_pd(hsum4_zmm(s0, s1, s2, s3)));  // Note [Four row sums in one tree]
  _mm256_storeu_pd(q, _mm256_cvtps_pd(hsum4_zmm(q0, q1, q2, q3)));
}

// The same S and Q of one unit-stride run of n <= kVarRunBlock elements (h_var_run's
// blocks: 64 adds a lane at most, as above), two chains each. pf: each step prefetches
// its two lines 2 KiB ahead, so the blocks of back-to-back runs stream on through each
// block's end (CpuTuning::prefetch16_rows, as Note [bfloat16 zmm rows prefetch]).
__attribute__((target("avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512bf16"))) void h_moments_run_dp(
    const BFloat16* p, int64_t n, double* s, double* q, bool pf) {
  const __m512bh one = (__m512bh)_mm512_set1_epi16(0x3F80);  // bfloat16 1.0
  __m512 s0 = _mm512_setzero_ps(), s1 = s0, q0 = s0, q1 = s0;
  auto step = [one](__m512& sa, __m512& qa, __m512i x) SB_RDP_INLINE { moments_dp_step(one, sa, qa, x); };
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    if (pf) {
      _mm_prefetch(reinterpret_cast<const char*>(p + i) + kPrefetch16Ahead, _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(p + i) + kPrefetch16Ahead + 64, _MM_HINT_T0);
    }
    step(s0, q0, _mm512_loadu_si512(p + i));
    step(s1, q1, _mm512_loadu_si512(p + i + 32));
  }
  for (; i < n; i += 32) {  // the words past the run read as zero
    const __mmask32 m = n - i >= 32 ? ~__mmask32(0) : (__mmask32(1) << (n - i)) - 1;
    step(s0, q0, _mm512_maskz_loadu_epi16(m, p + i));
  }
  using vec::fold_halves;
  *s = vec::F32Lanes::hsum(fold_halves(_mm512_add_ps(s0, s1)));
  *q = vec::F32Lanes::hsum(fold_halves(_mm512_add_ps(q0, q1)));
}

#undef SB_RDP_INLINE
#undef SB_RZMM_INLINE
#undef SB_RZMM
#endif

// Note [One read for var], a unit-stride run p[0, n): blocks of kVarRunBlock elements,
// each in one pass of shifted sums S = sum(x - c), Q = sum((x - c)^2), c the previous
// block's mean rounded to Acc (the first block's: the mean of its first 8 elements, a
// pairwise sum times 1/8, exact for a constant run), and its (count, c, Q, S) merged
// into acc by merge_block, whose corrected formula takes any centre. The error is Q's
// rounding amplified by Q / M2 = 1 + (mean - c)^2 / var; a block is kept where
// 2 S^2 / nb <= Q (at most 2x, the two-pass error's order) and Q is finite, else it
// takes two passes from L1 (its mean, then the deviations around it). One pass keeps
// the memory stream going, as the reductions' sum does: summing block b while taking
// block b - 1's deviations from L1 in the same loop ran 1.26x the time of a plain sum
// over a DRAM-sized x, one pass at its time (docs/notes/copy-reduce.md).
constexpr int64_t kVarRunBlock = 2048;

template <class V>
void h_var_run(const typename V::T* p, int64_t n, typename V::A* acc, RunKernels runs) {
  using A = typename V::A;
  using Acc = typename V::Acc;
  if (n <= 0) return;
  Acc c = run_centre<V>(p, n);
#ifdef SB_HAVE_AVX512
  // Note [bfloat16 moments by dot products], a block at a time: S and Q around 0 where
  // the block allows it, else its shifted sums; after a block that does not, the next
  // kDpRetry go straight to the shifted sums
  [[maybe_unused]] const bool dp16 = std::is_same_v<typename V::T, BFloat16> && V::W > 1 && use_avx512_bf16();
  [[maybe_unused]] const bool pf = dp16 && cpu_tuning().prefetch16_rows;
  [[maybe_unused]] int dp_skip = 0;
#endif
  for (int64_t b = 0; b < n; b += kVarRunBlock) {
    const int64_t nb = std::min(kVarRunBlock, n - b);
    const typename V::T* cur = p + b;
    const A nbA = static_cast<A>(nb);
#ifdef SB_HAVE_AVX512
    if constexpr (std::is_same_v<typename V::T, BFloat16> && V::W > 1)
      if (dp16 && dp_skip-- <= 0) {
        double s1, s2;
        h_moments_run_dp(cur, nb, &s1, &s2, pf);
        if (s2 <= std::numeric_limits<A>::max() && s2 <= 16 * (s2 - s1 * (s1 / nbA))) {  // sum(x^2) <= 16 M2
          merge_block<A>(acc, nbA, A(0), s2, s1);
          c = static_cast<Acc>(s1 / nbA);  // the next block's shift, should it need one: this block's mean
          continue;
        }
        dp_skip = kDpRetry;
      }
#endif
    // the sums of (x - m)^2 and x - m over the block: h_kernel's OpSqDev (sq[0], sq[1])
    auto moments = [&](Acc m, A* sq) {
      sq[0] = sq[1] = 0;
      DirectSink<OpSqDev, A> sink{sq};
      h_kernel<V, OpSqDev>(cur, nb, 1, static_cast<double>(m), sink, runs);
    };
    A sq[2];
    moments(c, sq);
    if (!(2 * sq[1] * sq[1] / nbA <= sq[0] && sq[0] <= std::numeric_limits<A>::max())) {  // two passes: the mean first
      A sum = 0;
      DirectSink<OpSum, A> sink{&sum};
      h_kernel<V, OpSum>(cur, nb, 1, 0.0, sink, runs);
      c = static_cast<Acc>(sum / nbA);
      moments(c, sq);
    }
    merge_block<A>(acc, nbA, static_cast<A>(c), sq[0], sq[1]);
    c = static_cast<Acc>(static_cast<A>(c) + sq[1] / nbA);  // the next block's shift: this block's mean
  }
}

}  // namespace
}  // namespace sb
