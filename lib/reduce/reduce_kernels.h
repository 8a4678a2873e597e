// reduce_kernels.h — the CPU reductions' ops and inner kernels, included by reduce.cpp
// only (one translation unit: the drivers instantiate every kernel here). The ops
// (OpSum, OpMax, OpVar and its moments), the cascaded accumulators, and the kernels over
// one run (h_kernel: unit or fixed stride along the reduced dim); the kernels over whole
// rows (short rows four at a time, var in one read) are in reduce_rows.h, those over a
// block of rows (the kept dim unit-stride) in reduce_columns.h. The plan and the drivers that call them are in
// reduce.cpp; the file comment there says which path takes which layout.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#ifdef SB_HAVE_AVX2
#include <immintrin.h>
#endif

#include "core/prefetch.h"
#include "core/transpose_tile.h"
#include "core/vec.h"

// An unnamed namespace in a header: this one has a single includer, and internal
// linkage keeps the inliner's choices (and so the code) exactly those of one file.
namespace sb {
namespace {

constexpr int64_t kFlushElems = 4096;  // elements per float32 accumulator run (horizontal)
constexpr int64_t kFlushRows = 1024;   // rows per float32 buffer run (vertical)
constexpr int64_t kGroupRuns = 64;     // buffer runs per group (vertical; Note [Cascaded accumulation])
constexpr int64_t kColumns = 8192;     // elements: width of one vertical task (Note [Vertical rows per pass])
constexpr int kVRows = 8;              // input rows per buffer pass (vertical; v_var_kernel's trees take 8)

// How a reduction's sums take their unit-stride runs in h_kernel, chosen once per
// reduction (the CPU level and the design's row read there, not per run): bfloat16 runs
// widened by the AVX2 loop, by dot products (Note [bfloat16 sums by dot products], by
// the input's bytes) or in zmm (Note [bfloat16 long sums in zmm]); float32 runs in zmm
// where the row says so (Note [float32 sums in zmm]); float32 runs of every other
// element in zmm on every AVX-512 core (Note [Stride-2 float runs in zmm]).
enum class Bf16Runs { Widen, Dot, Zmm };
struct RunKernels {
  Bf16Runs bf16 = Bf16Runs::Widen;
  bool f32_zmm = false;
  bool f32_stride2_zmm = false;
};
inline RunKernels run_kernels(int64_t input_bytes) {
  RunKernels k;
  k.bf16 = use_bf16_dot_runs(input_bytes) ? Bf16Runs::Dot : use_avx512() ? Bf16Runs::Zmm : Bf16Runs::Widen;
  k.f32_zmm = use_avx512() && cpu_tuning().sum_runs_zmm;
  k.f32_stride2_zmm = use_avx512();
  return k;
}
constexpr int64_t kRowBatch = 64;      // row offsets generated at a time

using vec::nanmax;
using vec::to_acc;

// ---------------------------------------------------------------- vector traits
// The reductions' registers (Note [One vector layer], core/vec.h): T the element type, A
// the final accumulator (double, or int64 for int32 sums), Acc the type of vertical
// buffers, R the register, W the lanes. vec::Scalar is the scalar path (W = 1),
// vec::Simd<T> one AVX2 register of T's accumulation lanes.

// ---------------------------------------------------------------- reduction ops
// N accumulators per kept element; step on registers, sstep on scalars of type S.

struct OpSum {
  static constexpr int N = 1;
  static constexpr bool kChan = false;
  template <class V> static void init(typename V::R* a) { a[0] = V::zero(); }
  template <class V> static void step(typename V::R* a, typename V::R x, typename V::R) { a[0] = V::add(a[0], x); }
  template <class V> static void vcombine(typename V::R* a, const typename V::R* b) { a[0] = V::add(a[0], b[0]); }
  template <class V> static void hred(typename V::A* o, const typename V::R* a) { o[0] = V::hsum(a[0]); }
  template <class S> static void sinit(S* a) { a[0] = S(0); }
  template <class S> static void sstep(S* a, S x, S) { a[0] += x; }
  template <class S> static void scombine(S* a, const S* b) { a[0] += b[0]; }
};

struct OpMax {
  static constexpr int N = 1;
  static constexpr bool kChan = false;
  template <class V> static void init(typename V::R* a) { a[0] = V::lowest(); }
  template <class V> static void step(typename V::R* a, typename V::R x, typename V::R) { a[0] = V::max_nan(a[0], x); }
  template <class V> static void vcombine(typename V::R* a, const typename V::R* b) { a[0] = V::max_nan(a[0], b[0]); }
  template <class V> static void hred(typename V::A* o, const typename V::R* a) { o[0] = V::hmax(a[0]); }
  template <class S> static void sinit(S* a) { a[0] = static_cast<S>(-INFINITY); }
  template <class S> static void sstep(S* a, S x, S) { a[0] = nanmax(a[0], x); }
  template <class S> static void scombine(S* a, const S* b) { a[0] = nanmax(a[0], b[0]); }
};

// Deviations from a mean m: a[0] = sum (x - m)^2, a[1] = sum (x - m) (var's second pass
// over one block of a kept element's range: Note [One read for var]).
struct OpSqDev {
  static constexpr int N = 2;
  template <class V> static void init(typename V::R* a) { a[0] = a[1] = V::zero(); }
  template <class V> static void step(typename V::R* a, typename V::R x, typename V::R m) {
    const typename V::R d = V::sub(x, m);
    a[0] = V::fmadd(d, d, a[0]);
    a[1] = V::add(a[1], d);
  }
  template <class V> static void vcombine(typename V::R* a, const typename V::R* b) {
    a[0] = V::add(a[0], b[0]);
    a[1] = V::add(a[1], b[1]);
  }
  template <class V> static void hred(typename V::A* o, const typename V::R* a) {
    o[0] = V::hsum(a[0]);
    o[1] = V::hsum(a[1]);
  }
  template <class S> static void sinit(S* a) { a[0] = a[1] = S(0); }
  template <class S> static void sstep(S* a, S x, S m) {
    const S d = x - m;
    a[0] += d * d;
    a[1] += d;
  }
  template <class S> static void scombine(S* a, const S* b) {
    a[0] += b[0];
    a[1] += b[1];
  }
};

// Note [One read for var]
// The corrected two-pass algorithm (a sum pass for the means, then sum((x - m)^2) and
// sum(x - m) around them) reads a DRAM-sized x twice. Here x is read from memory once
// and the moments are merged as (count, mean, M2) triples by
// Chan et al.'s formula (mean += d nb / n, M2 += M2b + d^2 na nb / n, d = meanb - meana),
// in double outside the kernels:
//  - horizontal, one unit-stride run per kept element (h_var_run): blocks of
//    kVarRunBlock elements, each in one pass of sums shifted by the previous block's
//    mean, kept where a guard trusts them, else two passes from L1 (below): a second
//    pass, or a first pass that also re-reads L1, slows the memory stream;
//  - horizontal, other ranges (several reduced dims, strided): blocks of kVarBlock
//    elements, each two-pass while it is in L1/L2 (the sum, then OpSqDev);
//    in both, the deviations are taken around one centre per block rounded to the
//    accumulator type (the shift, or the block's mean), shared by the vector lanes and
//    the scalar tail;
//  - vertical (kept columns unit-stride): per column task, y = x - c with c the task's
//    first row (so the float32 lanes hold deviations of the order of the std, not values
//    far from 0), each pass of kVRows rows gives its block mean and M2 from registers,
//    merged into float32 running (mean, M2) buffers with weights common to all columns
//    (v_var_kernel); every kFlushRows rows the run goes into the double triples.
// Accuracy is that of the two-pass algorithm per block (at most twice it for the
// one-pass blocks, by their guard); the merges add errors of the order of the
// accumulator's epsilon (tests: reduce_test, rtol 1e-5 against float64 on data centred
// at 1e4, with an outlier first row; runs of ramps, steps and non-finite values).
// Figures: docs/notes/copy-reduce.md.
constexpr int64_t kVarBlock = 4096;  // elements per two-pass block (horizontal)

struct OpVar {
  static constexpr int N = 3;  // count, mean, M2 (sum of squared deviations from the mean)
  static constexpr bool kChan = true;
  template <class S> static void sinit(S* a) { a[0] = a[1] = a[2] = S(0); }
  template <class S> static void scombine(S* a, const S* b) {
    if (b[0] == 0) return;
    if (a[0] == 0) {
      a[0] = b[0], a[1] = b[1], a[2] = b[2];
      return;
    }
    const S n = a[0] + b[0], d = b[1] - a[1];
    a[1] += d * (b[0] / n);
    a[2] += b[2] + d * d * (a[0] * b[0] / n);
    a[0] = n;
  }
};

// Merges into acc (an OpVar triple) a block of nb elements whose deviations from centre
// sum to s1 and whose squared deviations sum to s2 (the corrected two-pass formula; M2 is
// clamped at 0 against rounding, and a NaN stays a NaN).
template <typename A>
void merge_block(A* acc, A nb, A centre, A s2, A s1) {
  const A d = s1 / nb, m2 = s2 - s1 * d;
  const A blk[3] = {nb, centre + d, m2 < 0 ? A(0) : m2};
  OpVar::scombine(acc, blk);
}

// ---------------------------------------------------------------- inner kernels

// Note [Cascaded accumulation]
// Every horizontal reduction accumulates in blocks, whatever the strides: at most
// kFlushElems elements per block, in independent chains (4 of W vector lanes on the
// unit-stride path, 16 scalars on the stepped, expanded and scalar paths), and the blocks
// of one kept element are combined pairwise, as a binary counter of partial results
// (Cascade), pieces shorter than a block (short rows of a multi-dim range) each a leaf
// (a push costs two combines, amortized). The rounding error of a sum then grows with
// log2 of the block count, not with the element count, on every path: a mean over an
// expanded dim of 4 M float64 elements stays within a few ulp, as PyTorch's cascade sum
// does. The vertical kernel accumulates kFlushRows rows per block in its column buffers
// (8 rows summed in registers per pass) and combines the blocks in groups of kGroupRuns.
template <class Op, typename A>
class Cascade {
 public:
  // part: Op's reduction of one block or one shorter piece
  void add(const A* part) {
    A carry[N];
    std::copy(part, part + N, carry);
    int l = 0;
    for (; used_ >> l & 1; ++l) {  // partial results of equal rank pair up
      Op::scombine(level_[l], carry);
      std::copy(level_[l], level_[l] + N, carry);
      used_ &= ~(uint64_t{1} << l);
    }
    std::copy(carry, carry + N, level_[l]);
    used_ |= uint64_t{1} << l;
  }
  // combines the total into out, the smallest partial results first
  void finish(A* out) const {
    uint64_t u = used_;
    if (u == 0) return;
    A total[N];
    std::copy(level_[__builtin_ctzll(u)], level_[__builtin_ctzll(u)] + N, total);
    for (u &= u - 1; u; u &= u - 1) Op::scombine(total, level_[__builtin_ctzll(u)]);
    Op::scombine(out, total);
  }

 private:
  static constexpr int N = Op::N, kLevels = 64;
  A level_[kLevels][N];
  uint64_t used_ = 0;
};

// Adds to sink the reduction of p[0], p[s], …, p[(n-1)s] around mean m, a block of at
// most kFlushElems elements at a time (Note [Cascaded accumulation]).
// A sink that combines each part straight into out: for a range of one block or less.
template <class Op, typename A>
struct DirectSink {
  A* out;
  void add(const A* part) { Op::scombine(out, part); }
};

#ifdef SB_HAVE_AVX512
// Note [bfloat16 sums by dot products], a unit-stride run of any length (h_kernel's
// OpSum): blocks of kFlushElems elements, four chains of 16 float lanes, 128 elements
// a step, the block's end through one masked load a chain; each block's lanes summed in
// double into the sink.
#define SB_HDP __attribute__((target("avx2,fma,avx512f,avx512vl,avx512bw,avx512bf16")))
template <class Sink>
SB_HDP void h_sum_run_dp(const BFloat16* p, int64_t n, Sink& sink) {
  const __m512bh one = (__m512bh)_mm512_set1_epi16(0x3F80);  // bfloat16 1.0
  for (int64_t i = 0; i < n;) {
    const int64_t end = std::min(n, i + kFlushElems);
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (; i + 128 <= end; i += 128) {
      a0 = _mm512_dpbf16_ps(a0, (__m512bh)_mm512_loadu_si512(p + i), one);
      a1 = _mm512_dpbf16_ps(a1, (__m512bh)_mm512_loadu_si512(p + i + 32), one);
      a2 = _mm512_dpbf16_ps(a2, (__m512bh)_mm512_loadu_si512(p + i + 64), one);
      a3 = _mm512_dpbf16_ps(a3, (__m512bh)_mm512_loadu_si512(p + i + 96), one);
    }
    auto step = [&](__m512 a) SB_HDP {  // the next <= 32 elements, zeros past end
      const int64_t c = std::min<int64_t>(32, end - i);
      const __mmask32 m = c == 32 ? ~__mmask32(0) : (__mmask32(1) << c) - 1;
      a = _mm512_dpbf16_ps(a, (__m512bh)_mm512_maskz_loadu_epi16(m, p + i), one);
      i += c;
      return a;
    };
    if (i < end) a0 = step(a0);
    if (i < end) a1 = step(a1);
    if (i < end) a2 = step(a2);
    if (i < end) a3 = step(a3);
    const __m512 t = _mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3));
    const double part = vec::F32Lanes::hsum(vec::fold_halves(t));
    sink.add(&part);
  }
}

// Note [bfloat16 long sums in zmm]: where the long runs do not take the dot products
// (the design's row keeps them off for the input's size, or the CPU lacks AVX512_BF16)
// but the level is AVX512, a bfloat16 unit-stride run is summed 64 elements a step in
// zmm: two 512-bit loads, each split into its even elements (shifted up into the high
// halves of the float lanes) and its odd ones (the high halves masked), four chains,
// where the AVX2 loop widens 8 elements per load by vpmovzxwd and a shift. Per element
// a third of the instructions, and per 64-byte line two loads instead of four: from
// DRAM the widening loop read below float32's rate on the same core. Each step
// prefetches its two lines 2 KiB ahead, as Note [bfloat16 zmm rows prefetch]'s loops do:
// rows back to back then stream on through each row's end, where the loop's exit and
// the row's horizontal sum held the loads up. Blocks of
// kFlushElems as the other runs, the lanes of a block summed in double into the sink;
// the block's end through 16-bit masked loads whose other words read as zero. Exact
// widening, float32 adds in another order than the AVX2 loop's (the same tolerance);
// subnormals are kept, unlike the dot products'.
template <class Sink>
__attribute__((target("avx2,fma,avx512f,avx512vl,avx512bw"))) void h_sum_run_zmm(const BFloat16* p, int64_t n,
                                                                                Sink& sink) {
  // maskz shifts under a full mask: GCC 12 warns of the plain shift's undefined source
  const __m512i hi = _mm512_set1_epi32(static_cast<int>(0xFFFF0000u));
  for (int64_t i = 0; i < n;) {
    const int64_t end = std::min(n, i + kFlushElems);
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (; i + 64 <= end; i += 64) {
      _mm_prefetch(reinterpret_cast<const char*>(p + i) + kPrefetch16Ahead, _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(p + i) + kPrefetch16Ahead + 64, _MM_HINT_T0);
      const __m512i r0 = _mm512_loadu_si512(p + i), r1 = _mm512_loadu_si512(p + i + 32);
      a0 = _mm512_add_ps(a0, _mm512_castsi512_ps(_mm512_maskz_slli_epi32(0xFFFF, r0, 16)));
      a1 = _mm512_add_ps(a1, _mm512_castsi512_ps(_mm512_and_si512(r0, hi)));
      a2 = _mm512_add_ps(a2, _mm512_castsi512_ps(_mm512_maskz_slli_epi32(0xFFFF, r1, 16)));
      a3 = _mm512_add_ps(a3, _mm512_castsi512_ps(_mm512_and_si512(r1, hi)));
    }
    while (i < end) {  // the block's last < 64 elements, 32 at a time
      const int64_t c = std::min<int64_t>(32, end - i);
      const __mmask32 m = c == 32 ? ~__mmask32(0) : (__mmask32(1) << c) - 1;
      const __m512i r = _mm512_maskz_loadu_epi16(m, p + i);
      a0 = _mm512_add_ps(a0, _mm512_castsi512_ps(_mm512_maskz_slli_epi32(0xFFFF, r, 16)));
      a1 = _mm512_add_ps(a1, _mm512_castsi512_ps(_mm512_and_si512(r, hi)));
      i += c;
    }
    const __m512 t = _mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3));
    const double part = vec::F32Lanes::hsum(vec::fold_halves(t));
    sink.add(&part);
  }
}
#undef SB_HDP

// Note [float32 sums in zmm]
// A unit-stride float32 sum (h_kernel's OpSum, s = 1) loads 16 lanes at a time into four
// zmm chains where CpuTuning::sum_runs_zmm says so (Zen 5's row): a core with full-width
// 512-bit loads keeps more of a long row's lines in flight from memory with one load a
// line than with two. The blocks and their order are h_kernel's (kFlushElems elements a
// block, the chains added pairwise, the lanes folded in float and summed in double), so
// the rounding is of the same kind, one level deeper; a block's last < 64 elements go 16
// at a time under a mask. Off in the rows of designs where it is not measured
// (docs/notes/copy-reduce.md, "float32 sums in zmm").
template <class Sink>
__attribute__((target("avx2,fma,avx512f,avx512vl"))) void h_sum_run_zmm(const float* p, int64_t n, Sink& sink) {
  for (int64_t i = 0; i < n;) {
    const int64_t end = std::min(n, i + kFlushElems);
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (; i + 64 <= end; i += 64) {
      a0 = _mm512_add_ps(a0, _mm512_loadu_ps(p + i));
      a1 = _mm512_add_ps(a1, _mm512_loadu_ps(p + i + 16));
      a2 = _mm512_add_ps(a2, _mm512_loadu_ps(p + i + 32));
      a3 = _mm512_add_ps(a3, _mm512_loadu_ps(p + i + 48));
    }
    for (; i < end; i += 16) {
      const int64_t c = std::min<int64_t>(16, end - i);
      const __mmask16 m = c == 16 ? __mmask16(0xFFFF) : static_cast<__mmask16>((1u << c) - 1);
      a0 = _mm512_add_ps(a0, _mm512_maskz_loadu_ps(m, p + i));
    }
    const __m512 t = _mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3));
    const double part = vec::F32Lanes::hsum(vec::fold_halves(t));
    sink.add(&part);
  }
}

// Note [Stride-2 float runs in zmm]
// On an AVX-512 core a float32 run of every other element (Note [Stride-2 float runs]:
// x[..., ::2] reduced along its last dim) takes 16 elements a step, the even lanes of
// two 512-bit loads by one vpermt2ps, in four chains; the AVX2 loop takes 8 from two
// loads by two shuffles, and the run's last W + 1 elements went to one scalar chain in
// double, the longest part of a short row's time. The run's end (at most 16 elements)
// goes through loads masked to stop at its last element (2n - 2), nothing past it read,
// and an op masked to its lanes (sum, deviations: the others add nothing; max: the
// chain kept). Blocks of kFlushElems as h_kernel's, each block's chains combined
// pairwise and its lanes folded (in double for the sums, by max_nan for max): the same
// kind of rounding as the AVX2 loop's, in another order. Every AVX-512 core.
#define SB_HS2 __attribute__((target("avx2,fma,avx512f,avx512vl")))
template <class Op> struct Stride2Zmm;
template <> struct Stride2Zmm<OpSum> {
  static constexpr int N = 1;
  SB_HS2 static void init(__m512* a) { a[0] = _mm512_setzero_ps(); }
  SB_HS2 static void step(__m512* a, __m512 x, __m512) { a[0] = _mm512_add_ps(a[0], x); }
  SB_HS2 static void step_mask(__m512* a, __mmask16 k, __m512 x, __m512) { a[0] = _mm512_mask_add_ps(a[0], k, a[0], x); }
  SB_HS2 static void combine(__m512* a, const __m512* b) { a[0] = _mm512_add_ps(a[0], b[0]); }
  SB_HS2 static void hred(double* o, const __m512* a) { o[0] = vec::F32Lanes::hsum(vec::fold_halves(a[0])); }
};
template <> struct Stride2Zmm<OpMax> {
  static constexpr int N = 1;
  // a NaN of x taken as it comes; a NaN already in a stays (maxps returns its second operand)
  SB_HS2 static __m512 max_nan(__m512 a, __m512 x) {
    return _mm512_mask_mov_ps(_mm512_maskz_max_ps(0xFFFF, x, a), _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), x);
  }
  SB_HS2 static void init(__m512* a) { a[0] = _mm512_set1_ps(-INFINITY); }
  SB_HS2 static void step(__m512* a, __m512 x, __m512) { a[0] = max_nan(a[0], x); }
  SB_HS2 static void step_mask(__m512* a, __mmask16 k, __m512 x, __m512) {
    a[0] = _mm512_mask_mov_ps(a[0], k, max_nan(a[0], x));
  }
  SB_HS2 static void combine(__m512* a, const __m512* b) { a[0] = max_nan(a[0], b[0]); }
  SB_HS2 static void hred(double* o, const __m512* a) {
    const __m512d d = _mm512_castps_pd(a[0]);
    const __m256 lo = _mm256_castpd_ps(_mm512_mask_extractf64x4_pd(_mm256_setzero_pd(), 0xF, d, 0));
    const __m256 hi = _mm256_castpd_ps(_mm512_mask_extractf64x4_pd(_mm256_setzero_pd(), 0xF, d, 1));
    o[0] = vec::F32Lanes::hmax(vec::F32Lanes::max_nan(lo, hi));  // a NaN of either half kept
  }
};
template <> struct Stride2Zmm<OpSqDev> {
  static constexpr int N = 2;
  SB_HS2 static void init(__m512* a) { a[0] = a[1] = _mm512_setzero_ps(); }
  SB_HS2 static void step(__m512* a, __m512 x, __m512 m) {
    const __m512 d = _mm512_sub_ps(x, m);
    a[0] = _mm512_fmadd_ps(d, d, a[0]);
    a[1] = _mm512_add_ps(a[1], d);
  }
  SB_HS2 static void step_mask(__m512* a, __mmask16 k, __m512 x, __m512 m) {
    const __m512 d = _mm512_maskz_sub_ps(k, x, m);
    a[0] = _mm512_fmadd_ps(d, d, a[0]);
    a[1] = _mm512_add_ps(a[1], d);
  }
  SB_HS2 static void combine(__m512* a, const __m512* b) {
    a[0] = _mm512_add_ps(a[0], b[0]);
    a[1] = _mm512_add_ps(a[1], b[1]);
  }
  SB_HS2 static void hred(double* o, const __m512* a) {
    o[0] = vec::F32Lanes::hsum(vec::fold_halves(a[0]));
    o[1] = vec::F32Lanes::hsum(vec::fold_halves(a[1]));
  }
};
// elements 0 .. 15 of a run of every other float at q (floats q[0 .. 31])
__attribute__((target("avx2,fma,avx512f,avx512vl"), always_inline)) inline __m512 load_stride2_zmm(const float* q) {
  return vec::Vec<float, 512>::even_lanes(_mm512_loadu_ps(q), _mm512_loadu_ps(q + 16));
}
// elements 0 .. c - 1 (1 <= c <= 16) of such a run, the other lanes zero: loads masked to
// its floats q[0 .. 2c - 2], so nothing past the run's last element is read
__attribute__((target("avx2,fma,avx512f,avx512vl"), always_inline)) inline __m512 load_stride2_zmm(const float* q,
                                                                                                  int c) {
  const int f = 2 * c - 1;
  const __mmask16 lo = static_cast<__mmask16>(f >= 16 ? 0xFFFF : (1u << f) - 1);
  const __mmask16 hi = static_cast<__mmask16>(f > 16 ? (1u << (f - 16)) - 1 : 0);
  return vec::Vec<float, 512>::even_lanes(_mm512_maskz_loadu_ps(lo, q), _mm512_maskz_loadu_ps(hi, q + 16));
}
template <class Op, class Sink>
SB_HS2 void h_run_stride2_zmm(const float* p, int64_t n, double m, Sink& sink) {
  using Z = Stride2Zmm<Op>;
  constexpr int N = Z::N;
  const __m512 mv = _mm512_set1_ps(static_cast<float>(m));
  const auto load = [p](int64_t j) SB_HS2 { return load_stride2_zmm(p + 2 * j); };  // elements j .. j + 15
  const int64_t nv = n - 1;  // whole steps end before the run's last element: 2j + 31 <= 2n - 2
  for (int64_t i = 0; i < n;) {
    const int64_t end = std::min(n, i + kFlushElems), vend = std::min(end, nv);
    __m512 a0[N], a1[N], a2[N], a3[N];
    Z::init(a0), Z::init(a1), Z::init(a2), Z::init(a3);
    for (; i + 64 <= vend; i += 64) {
      Z::step(a0, load(i), mv);
      Z::step(a1, load(i + 16), mv);
      Z::step(a2, load(i + 32), mv);
      Z::step(a3, load(i + 48), mv);
    }
    for (; i + 16 <= vend; i += 16) Z::step(a0, load(i), mv);
    if (i < end) {  // c <= 16 elements
      const int c = static_cast<int>(end - i);
      Z::step_mask(a1, static_cast<__mmask16>(c == 16 ? 0xFFFF : (1u << c) - 1), load_stride2_zmm(p + 2 * i, c), mv);
      i = end;
    }
    Z::combine(a0, a1);
    Z::combine(a2, a3);
    Z::combine(a0, a2);
    double part[N];
    Z::hred(part, a0);
    sink.add(part);
  }
}
#undef SB_HS2
#endif

// W elements of a float32 or float64 row at p from element j, KS apart (1, or 2: the
// even lanes of two loads, Notes [Stride-2 float runs] and [Stride-2 kept columns]); the
// second load ends at element 2j + 2W - 1.
template <class V, int KS>
__attribute__((always_inline)) inline typename V::R vload_step(const typename V::T* p, int64_t j) {
  if constexpr (KS == 1) {
    return V::load(p + j);
  } else {
#ifdef SB_HAVE_AVX2
    if constexpr (std::is_same_v<typename V::T, float> && V::W == 8)
      return detail::even8_f32(_mm256_loadu_ps(p + 2 * j), _mm256_loadu_ps(p + 2 * j + 8));
    else if constexpr (std::is_same_v<typename V::T, double> && V::W == 4)
      return detail::even4_f64(_mm256_loadu_pd(p + 2 * j), _mm256_loadu_pd(p + 2 * j + 4));
    else
#endif
      static_assert(KS == 1, "stride-2 loads: float32 and float64 vectors only");
  }
}

template <class V, class Op, class Sink>
void h_kernel(const typename V::T* p, int64_t n, int64_t s, double m, Sink& sink, [[maybe_unused]] RunKernels runs) {
  using A = typename V::A;
  using R = typename V::R;
  constexpr int W = V::W, N = Op::N;
  int64_t i = 0;
#ifdef SB_HAVE_AVX512
  if constexpr (std::is_same_v<Op, OpSum> && std::is_same_v<typename V::T, BFloat16> && W > 1)
    if (s == 1 && runs.bf16 != Bf16Runs::Widen)
      return runs.bf16 == Bf16Runs::Dot ? h_sum_run_dp(p, n, sink)    // Note [bfloat16 sums by dot products]
                                   : h_sum_run_zmm(p, n, sink);  // Note [bfloat16 long sums in zmm]
  if constexpr (std::is_same_v<Op, OpSum> && std::is_same_v<typename V::T, float> && W > 1)
    if (s == 1 && n >= 64 && runs.f32_zmm)
      return h_sum_run_zmm(p, n, sink);  // Note [float32 sums in zmm]
  if constexpr (std::is_same_v<typename V::T, float> && W > 1 &&
                (std::is_same_v<Op, OpSum> || std::is_same_v<Op, OpMax> || std::is_same_v<Op, OpSqDev>))
    if (s == 2 && runs.f32_stride2_zmm) return h_run_stride2_zmm<Op>(p, n, m, sink);  // Note [Stride-2 float runs in zmm]
#endif
  // Note [Stride-2 float runs]: a float32 or float64 run of every other element
  // (x[..., ::2] reduced along its last dim) takes the unit-stride loop with each
  // vector's 8 (4) elements the even lanes of two loads (a shuffle or unpack, and a
  // permute), where the scalar chains below took several times as long; the loads stop
  // at the run's last element (2n - 2), so the last up to W + 1 elements go to the
  // scalar tail
  constexpr bool kFloat = std::is_same_v<typename V::T, float> && W == 8;
  constexpr bool kDouble = std::is_same_v<typename V::T, double> && W == 4;
  const bool even = (kFloat || kDouble) && s == 2;
  if ((s == 1 || even) && W > 1) {
    const R mv = V::set1(m);
    const int64_t nv = even ? n - 1 : n;  // elements the vector loop may reach
    const auto load = [&](int64_t k) {
      if constexpr (kFloat || kDouble)
        if (even) return vload_step<V, 2>(p, k);
      return V::load(p + k);
    };
    while (nv - i >= W) {  // runs of at most kFlushElems in the register type
      const int64_t end = i + std::min<int64_t>((nv - i) / W * W, kFlushElems);
      R a0[N], a1[N], a2[N], a3[N];
      Op::template init<V>(a0);
      Op::template init<V>(a1);
      Op::template init<V>(a2);
      Op::template init<V>(a3);
      for (; i + 4 * W <= end; i += 4 * W) {
        Op::template step<V>(a0, load(i), mv);
        Op::template step<V>(a1, load(i + W), mv);
        Op::template step<V>(a2, load(i + 2 * W), mv);
        Op::template step<V>(a3, load(i + 3 * W), mv);
      }
      for (; i + W <= end; i += W) Op::template step<V>(a0, load(i), mv);
      Op::template vcombine<V>(a0, a1);
      Op::template vcombine<V>(a2, a3);
      Op::template vcombine<V>(a0, a2);
      A part[N];
      Op::template hred<V>(part, a0);
      sink.add(part);
    }
  }
  // stepped or expanded runs, the scalar path and the unit-stride tail: kChains scalar
  // chains per block, as many as the vector path has lanes x chains for float64
  constexpr int kChains = 16;
  const A ma = static_cast<A>(m);
  if (n - i < 2 * kChains) {  // a vector path's tail, or a short run: one chain
    if (i == n) return;
    A t[N];
    Op::sinit(t);
    for (; i < n; ++i) Op::sstep(t, to_acc<A>(p[i * s]), ma);
    return sink.add(t);
  }
  while (i < n) {
    const int64_t end = std::min(n, i + kFlushElems);
    A t[kChains][N];
    for (auto& c : t) Op::sinit(c);
    for (; i + kChains <= end; i += kChains)
      for (int h = 0; h < kChains; ++h) Op::sstep(t[h], to_acc<A>(p[(i + h) * s]), ma);
    for (int h = 0; i < end; ++i, ++h) Op::sstep(t[h], to_acc<A>(p[i * s]), ma);
    for (int w = kChains / 2; w >= 1; w /= 2)  // pairwise over the chains
      for (int h = 0; h < w; ++h) Op::scombine(t[h], t[h + w]);
    sink.add(t[0]);
  }
}

// The first centre of a unit-stride run of n >= 1 elements (Note [One read for var]):
// the mean of its first 8 elements (a pairwise sum times 1/8, exact for a constant
// run), or its first element.
template <class V>
typename V::Acc run_centre(const typename V::T* p, int64_t n) {
  using Acc = typename V::Acc;
  auto at = [&](int64_t i) { return to_acc<Acc>(p[i]); };
  return n >= 8 ? static_cast<Acc>(((at(0) + at(1)) + (at(2) + at(3))) + ((at(4) + at(5)) + (at(6) + at(7)))) *
                      static_cast<Acc>(0.125)
                : at(0);
}

}  // namespace
}  // namespace sb
