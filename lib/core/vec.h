// vec.h — the one vector layer of the CPU kernels: one register of T, over the scalar
// build, AVX2 (+FMA, F16C) and AVX-512VL masks.
//
// Note [One vector layer]
// Vec<T> (T = float, double, Half, BFloat16) holds one 256-bit register of T's lanes,
// computed in acc type: float lanes for float, Half and BFloat16 (F16C converts half on
// load and store, integer shifts and a round to nearest even bfloat16, both exact as
// their scalar types), double lanes for double. It names, in one place:
//   load, store, stream (non-temporal; kStreamAlign bytes of alignment), load_part (the
//   first m < kW elements, never reading past them: a masked load for float and double,
//   the first element repeated for Half and BFloat16, which have no 16-bit masked load), set1, zero,
//   add, sub, mul, div, fma, sqrt, neg, abs, relu, exp (Note [Vector exp]), maximum and
//   minimum (PyTorch's NaN rule, the elementwise ops), max_nan (NaN-propagating running
//   max: the reductions and pooling), hsum and hmax (in double);
//   masked_load, masked_store and gather_even (the even lanes of a stride-2 run) where the
//   CPU has AVX-512VL (k-masks; the AVX2 vmaskmovps store is microcoded on AMD), and
//   scatter_even8 (a stride-2 store of 8 floats) with AVX-512F, behind
//   __attribute__((target)) so the AVX2 build carries them and sb::use_avx512() picks them
//   at run time. Scalar<T, A> is the same interface on one element accumulated in A, the
//   path of the scalar build and of sb::set_simd_level(Scalar); Simd<T> is Vec<T> in the
//   reductions' trait interface.
// Vec<T, 512> (Note [512-bit vectors]) is the zmm register of float, Half and BFloat16
// lanes: loads, stores and streams with their conversions, and for float the masked
// arithmetic of normalize's fused rows. Bits256 is 32 bytes
// of any type (fill patterns, packed 16-bit results).
// LanesOf<V> names the lane operations of a register type. Users: the elementwise ops'
// arithmetic (elementwise/op_math.h), the reductions (reduce_kernels.h), the elementwise
// strips (elementwise/strips.h: dense loops, masked tails, streaming stores, stride-2
// strips, gathers and scatters), normalize's row kernels (Note [Row-kernel lanes]),
// pooling's window loops
// (conv/pool.cpp), the copy's dtype conversions and fills (copy/copy.cpp), the
// channels-last depthwise conv and the im2col panel rows (conv/conv_depthwise.cpp,
// conv_gemm.cpp). Run-time dispatch between AVX-512 and AVX2 stays in the kernels'
// callers (use_avx512(), use_avx2()); this layer only names the instructions. The GEMM,
// direct conv, int8 and transpose micro-kernels work on fixed register blocks and
// shuffles that a one-register type does not express, and keep their intrinsics.
#pragma once
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <utility>

#ifdef SB_HAVE_AVX2
#include <immintrin.h>
#endif

#include "stridebench/bfloat16.h"
#include "stridebench/half.h"

namespace sb::vec {

// a NaN in a stays; a NaN in x is taken (PyTorch's max propagates NaN)
template <typename S>
inline S nanmax(S a, S x) {
  return (x > a || x != x) ? x : a;
}

template <typename A, typename T>
inline A to_acc(T v) {  // Half and BFloat16 through float
  if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) return static_cast<A>(static_cast<float>(v));
  else return static_cast<A>(v);
}

// One element of T accumulated in A: the scalar path with Vec's interface.
template <typename T_, typename A_>
struct Scalar {
  using T = T_;
  using A = A_;
  using Acc = A_;
  using R = A_;
  static constexpr int W = 1;
  static R load(const T* p) { return to_acc<A>(*p); }
  static R loadacc(const Acc* p) { return *p; }
  static void storeacc(Acc* p, R v) { *p = v; }
  static R zero() { return R(0); }
  static R set1(double v) { return static_cast<R>(v); }
  static R lowest() { return static_cast<R>(-INFINITY); }
  static R add(R a, R b) { return a + b; }
  static R sub(R a, R b) { return a - b; }
  static R fmadd(R a, R b, R c) { return a * b + c; }
  static R max_nan(R a, R x) { return nanmax(a, x); }
  static A hsum(R a) { return a; }
  static A hmax(R a) { return a; }
};

#ifdef SB_HAVE_AVX2
// The helpers that stand in hot loops as their intrinsics would (Note [Row-kernel lanes]).
#define SB_VEC_INLINE __attribute__((always_inline))

// load_part's masks: 8 - m int32 lanes off the end of the ones (m doubles: 2m lanes).
alignas(64) constexpr int32_t kPartMask[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};

// The float-lane operations shared by Vec<float> and Vec<Half>.
struct F32Lanes {
  using V = __m256;
  using Acc = float;
  static constexpr int kW = 8;
  SB_VEC_INLINE static V zero() { return _mm256_setzero_ps(); }
  template <typename U>
  static V set1(U v) { return _mm256_set1_ps(static_cast<float>(v)); }
  SB_VEC_INLINE static V set1(float v) { return _mm256_set1_ps(v); }
  static V lowest() { return _mm256_set1_ps(-INFINITY); }
  SB_VEC_INLINE static V add(V a, V b) { return _mm256_add_ps(a, b); }
  SB_VEC_INLINE static V sub(V a, V b) { return _mm256_sub_ps(a, b); }
  SB_VEC_INLINE static V mul(V a, V b) { return _mm256_mul_ps(a, b); }
  SB_VEC_INLINE static V fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  SB_VEC_INLINE static V div(V a, V b) { return _mm256_div_ps(a, b); }
  SB_VEC_INLINE static V sqrt(V a) { return _mm256_sqrt_ps(a); }
  static V neg(V a) { return _mm256_xor_ps(a, _mm256_set1_ps(-0.0f)); }
  static V abs(V a) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), a); }
  // max(0, x); max_ps returns its second operand when either is NaN: NaN stays NaN
  static V relu(V a) { return _mm256_max_ps(_mm256_setzero_ps(), a); }
  // PyTorch's maximum/minimum: a NaN in either operand gives NaN (x + y carries it);
  // otherwise max_ps/min_ps
  static V maximum(V x, V y) {
    return _mm256_blendv_ps(_mm256_max_ps(x, y), _mm256_add_ps(x, y), _mm256_cmp_ps(x, y, _CMP_UNORD_Q));
  }
  static V minimum(V x, V y) {
    return _mm256_blendv_ps(_mm256_min_ps(x, y), _mm256_add_ps(x, y), _mm256_cmp_ps(x, y, _CMP_UNORD_Q));
  }
  static V exp(V x);  // Note [Vector exp]
  // max_ps returns its second operand when either is NaN: a NaN already in a stays; a NaN
  // in x is forced in by OR-ing the all-ones unordered mask (a NaN pattern).
  static V max_nan(V a, V x) { return _mm256_or_ps(_mm256_max_ps(x, a), _mm256_cmp_ps(x, x, _CMP_UNORD_Q)); }
  // in double, pairwise over the lanes in order (a short dependency chain; adding the two
  // halves as vectors first was slower on a 512 x 256 row mean: docs/notes/planner.md)
  static double hsum(V v) {
    alignas(32) float t[8];
    _mm256_store_ps(t, v);
    return ((double(t[0]) + t[1]) + (double(t[2]) + t[3])) + ((double(t[4]) + t[5]) + (double(t[6]) + t[7]));
  }
  // folded by halves in registers (max_nan both ways keeps a NaN of either half): the
  // lanes stored and compared one by one took 1.27x the time of a 512 x 256 row max
  // (docs/notes/copy-reduce.md)
  static double hmax(V v) {
    v = max_nan(v, _mm256_permute2f128_ps(v, v, 1));
    v = max_nan(v, _mm256_permute_ps(v, 0x4E));
    v = max_nan(v, _mm256_permute_ps(v, 0xB1));
    return static_cast<double>(_mm256_cvtss_f32(v));
  }
  // lane r of the result: the lanes of v[r] (r < 4) summed in double, the four at once
  static __m256d hsum4(const V* v) {
    __m256d s[4];
    for (int r = 0; r < 4; ++r)
      s[r] = _mm256_add_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(v[r])), _mm256_cvtps_pd(_mm256_extractf128_ps(v[r], 1)));
    return hsum4_pd(s);
  }
  static __m256d hsum4_pd(const __m256d* v) {  // the same over double lanes
    const __m256d t01 = _mm256_hadd_pd(v[0], v[1]), t23 = _mm256_hadd_pd(v[2], v[3]);  // [0, 1, 0, 1], [2, 3, 2, 3]
    return _mm256_add_pd(_mm256_permute2f128_pd(t01, t23, 0x20), _mm256_permute2f128_pd(t01, t23, 0x31));
  }
  // Note [Row-kernel lanes]
  // What normalize's row kernels (elementwise/normalize_rows.h) add to the lane
  // operations. A lane mask is a V of all-ones or all-zeros lanes (AVX2 has no
  // k-registers): the ordered, quiet compares make it, and_mask combines, all() tests
  // every lane, blend takes b where it is set. rsqrt is the hardware's ~12-bit estimate;
  // fnma is c - a b. hsum8 gives the 8 horizontal sums of a[0..8) as one vector (one
  // hadd tree): the statistics of 8 rows side by side.
  // Those kernels were tuned as written with intrinsics, and compile to the same
  // instructions on this layer (registers renamed at most) because every operation they
  // use is always_inline, as an intrinsic is: the plain arithmetic, loads and stores of
  // F32Lanes, Vec<float> and Vec<double> too. A plain member, or the converting template
  // set1 (plain or always_inline), moved GCC's scheduling and register choices in them,
  // the AVX-512VL builds included; so set1 has an exact overload for the lane type,
  // always_inline, beside the template, which stays plain (docs/notes/elementwise.md:
  // what else moved, and its timing).
  SB_VEC_INLINE static V cmp_ge(V a, V b) { return _mm256_cmp_ps(a, b, _CMP_GE_OQ); }
  SB_VEC_INLINE static V cmp_le(V a, V b) { return _mm256_cmp_ps(a, b, _CMP_LE_OQ); }
  SB_VEC_INLINE static V and_mask(V a, V b) { return _mm256_and_ps(a, b); }
  SB_VEC_INLINE static bool all(V m) { return _mm256_movemask_ps(m) == 0xFF; }
  SB_VEC_INLINE static V blend(V a, V b, V m) { return _mm256_blendv_ps(a, b, m); }
  SB_VEC_INLINE static V rsqrt(V a) { return _mm256_rsqrt_ps(a); }
  SB_VEC_INLINE static V fnma(V a, V b, V c) { return _mm256_fnmadd_ps(a, b, c); }
  SB_VEC_INLINE static V hsum8(const V* a) {
    const V t0 = _mm256_hadd_ps(a[0], a[1]), t1 = _mm256_hadd_ps(a[2], a[3]);
    const V t2 = _mm256_hadd_ps(a[4], a[5]), t3 = _mm256_hadd_ps(a[6], a[7]);
    const V u0 = _mm256_hadd_ps(t0, t1), u1 = _mm256_hadd_ps(t2, t3);
    return _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20), _mm256_permute2f128_ps(u0, u1, 0x31));
  }
};

// Vec<T, Bits>: Bits = 256 (the AVX2 register, the default) or 512 (AVX-512F, below).
template <typename T, int Bits = 256> struct Vec;

// 32 bytes of any element type as one register: fill patterns, packed 16-bit results.
struct Bits256 {
  using V = __m256i;
  static V load(const void* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
  SB_VEC_INLINE static V load_aligned(const void* p) {  // p 32-byte aligned
    return _mm256_load_si256(reinterpret_cast<const __m256i*>(p));
  }
  static void store(void* p, V v) { _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), v); }
  static void stream(void* p, V v) { _mm256_stream_si256(reinterpret_cast<__m256i*>(p), v); }  // p 32-byte aligned
};

template <> struct Vec<float> : F32Lanes {
  SB_VEC_INLINE static V load(const float* p) { return _mm256_loadu_ps(p); }
  SB_VEC_INLINE static void store(float* p, V v) { _mm256_storeu_ps(p, v); }
  static constexpr int kStreamAlign = 32;  // bytes: stream() needs p aligned so
  SB_VEC_INLINE static void stream(float* p, V v) { _mm256_stream_ps(p, v); }
  static V load_part(const float* p, int64_t m) {  // p[0 .. m), m < kW; the other lanes 0
    return _mm256_maskload_ps(p, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kPartMask + 8 - m)));
  }
  // Note [Row-kernel lanes]: aligned forms (p 32-byte aligned), a broadcast from memory,
  // and the AVX2 masked loads and stores with a mask built once: part_mask(m) sets the
  // first m <= kW lanes, as_mask turns it into a lane mask for blend.
  using PartMask = __m256i;
  SB_VEC_INLINE static V load_aligned(const float* p) { return _mm256_load_ps(p); }
  SB_VEC_INLINE static void store_aligned(float* p, V v) { _mm256_store_ps(p, v); }
  SB_VEC_INLINE static V broadcast(const float* p) { return _mm256_broadcast_ss(p); }
  template <typename I>  // int or int64_t, as the caller counts
  SB_VEC_INLINE static PartMask part_mask(I m) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kPartMask + 8 - m));
  }
  SB_VEC_INLINE static V maskload(const float* p, PartMask m) { return _mm256_maskload_ps(p, m); }
  SB_VEC_INLINE static void maskstore(float* p, PartMask m, V v) { _mm256_maskstore_ps(p, m, v); }
  SB_VEC_INLINE static V as_mask(PartMask m) { return _mm256_castsi256_ps(m); }
  // ((p[0] + p[4]) + (p[2] + p[6])) + ((p[1] + p[5]) + (p[3] + p[7])): the sum of the
  // first 8 elements, pairwise (exact for a constant row)
  SB_VEC_INLINE static float sum8_pairwise(const float* p) {
    __m128 h = _mm_add_ps(_mm_loadu_ps(p), _mm_loadu_ps(p + 4));
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    h = _mm_add_ss(h, _mm_shuffle_ps(h, h, 1));
    return _mm_cvtss_f32(h);
  }
#ifdef SB_HAVE_AVX512
  // f[0], f[2], .. f[14] = p[0 .. 8): the even lanes of 16 floats written, the odd ones
  // masked off and untouched in memory (a stride-2 output, elementwise/strips.h)
  __attribute__((target("avx512f"), always_inline)) static void scatter_even8(float* f, const float* p) {
    const __m512i idx = _mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
    const __m512 v = _mm512_maskz_loadu_ps(0x00FF, p);  // maskz forms: GCC 12 warns on the undefined-lanes ones
    _mm512_mask_storeu_ps(f, 0x5555, _mm512_maskz_permutexvar_ps(0x5555, idx, v));
  }
  __attribute__((target("avx512f,avx512vl"), always_inline)) static V masked_load(const float* p, unsigned m) {
    return _mm256_maskz_loadu_ps(static_cast<__mmask8>(m), p);
  }
  __attribute__((target("avx512f,avx512vl"), always_inline)) static void masked_store(float* p, unsigned m, V v) {
    _mm256_mask_storeu_ps(p, static_cast<__mmask8>(m), v);
  }
  // p[0], p[2], .. p[2r - 2], r <= 8: the even lanes of 16 floats, packed (lanes from r on 0)
  __attribute__((target("avx512f,avx512vl"), always_inline)) static V gather_even(const float* p, int r) {
    const __m512 v = _mm512_maskz_loadu_ps(static_cast<__mmask16>(0x5555u & ((1u << (2 * r)) - 1)), p);
    return _mm256_castsi256_ps(_mm512_maskz_cvtepi64_epi32(0xFF, _mm512_castps_si512(v)));
  }
#endif
};

template <> struct Vec<Half> : F32Lanes {
  static V load(const Half* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
  static void store(Half* p, V v) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
  }
  static constexpr int kStreamAlign = 16;
  static void stream(Half* p, V v) {
    _mm_stream_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
  }
  static V load_part(const Half* p, int64_t m) {  // p[0] in the lanes from m on
    Half t[kW];
    for (int k = 0; k < kW; ++k) t[k] = p[k < m ? k : 0];
    return load(t);
  }
};

// bfloat16 lanes widen exactly (the 16 bits shifted up) and narrow by round to nearest
// even in integer operations, a NaN to a quiet NaN of its sign and upper payload (Note
// [bfloat16 NaN and subnormals] in bfloat16.h): the bits of BFloat16::from_float,
// subnormals included.
// Note [bfloat16 pairs of vectors]: a 256-bit load holds 16 bfloat16; unpacking it
// against zero gives two float vectors at one instruction each (lo: elements 0-3 and
// 8-11, hi: 4-7 and 12-15, by 128-bit lane), and packing the two rounded vectors (per
// lane) puts every element back in its place, so a dense loop over 16 elements needs no
// permute. load2 / store2 / stream2 serve the dense loops (elementwise/strips.h); the
// 8-lane forms the tails and the strided paths.
template <> struct Vec<BFloat16> : F32Lanes {
  static V widen(__m128i h) { return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16)); }
  // each 32-bit lane: its float rounded to bfloat16, in the low 16 bits
  static __m256i round16(V v) {
    const __m256i x = _mm256_castps_si256(v);
    const __m256i hi = _mm256_srli_epi32(x, 16);
    const __m256i bias = _mm256_add_epi32(_mm256_and_si256(hi, _mm256_set1_epi32(1)), _mm256_set1_epi32(0x7fff));
    const __m256i r = _mm256_srli_epi32(_mm256_add_epi32(x, bias), 16);
    const __m256i qnan = _mm256_or_si256(hi, _mm256_set1_epi32(0x40));
    return _mm256_blendv_epi8(r, qnan, _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q)));
  }
  static __m128i narrow(V v) {
    const __m256i r = round16(v);
    return _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
  }
  static V load(const BFloat16* p) { return widen(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
  static void store(BFloat16* p, V v) { _mm_storeu_si128(reinterpret_cast<__m128i*>(p), narrow(v)); }
  static constexpr int kStreamAlign = 16;
  static void stream(BFloat16* p, V v) { _mm_stream_si128(reinterpret_cast<__m128i*>(p), narrow(v)); }
  static V load_part(const BFloat16* p, int64_t m) {  // p[0] in the lanes from m on
    BFloat16 t[kW];
    for (int k = 0; k < kW; ++k) t[k] = p[k < m ? k : 0];
    return load(t);
  }
  // Note [bfloat16 pairs of vectors]
  static constexpr int kW2 = 16;
  static void load2(const BFloat16* p, V& lo, V& hi) {
    const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)), z = _mm256_setzero_si256();
    lo = _mm256_castsi256_ps(_mm256_unpacklo_epi16(z, x));
    hi = _mm256_castsi256_ps(_mm256_unpackhi_epi16(z, x));
  }
  static __m256i narrow2(V lo, V hi) { return _mm256_packus_epi32(round16(lo), round16(hi)); }
  // the 16 bfloat16 of a (elements 0-7) then b (8-15), in memory order: one pack, one permute
  __attribute__((always_inline)) static __m256i narrow16(V a, V b) {
    return _mm256_permute4x64_epi64(_mm256_packus_epi32(round16(a), round16(b)), 0xD8);
  }
  static void store2(BFloat16* p, V lo, V hi) { _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), narrow2(lo, hi)); }
  // narrow2 by AVX512_BF16's vcvtneps2bf16 (its ymm form, AVX-512VL): one instruction
  // per 8 values where round16 takes eight; subnormals flushed (Note [bfloat16 NaN and
  // subnormals]). The two halves' 64-bit quarters interleaved put every element back in
  // place. For callers compiled for that target (Note [bfloat16 rows by vcvtneps2bf16]).
  __attribute__((target("avx512f,avx512vl,avx512bf16"), always_inline)) static __m256i narrow2_ne(V lo, V hi) {
    const __m128i l = (__m128i)_mm256_cvtneps_pbh(lo), h = (__m128i)_mm256_cvtneps_pbh(hi);
    return _mm256_set_m128i(_mm_unpackhi_epi64(l, h), _mm_unpacklo_epi64(l, h));
  }
  static void stream2(BFloat16* p, V lo, V hi) {  // p 16-byte aligned (kStreamAlign)
    const __m256i r = narrow2(lo, hi);
    _mm_stream_si128(reinterpret_cast<__m128i*>(p), _mm256_castsi256_si128(r));
    _mm_stream_si128(reinterpret_cast<__m128i*>(p + 8), _mm256_extracti128_si256(r, 1));
  }
};

template <> struct Vec<double> {
  using V = __m256d;
  using Acc = double;
  static constexpr int kW = 4;
  SB_VEC_INLINE static V load(const double* p) { return _mm256_loadu_pd(p); }
  SB_VEC_INLINE static void store(double* p, V v) { _mm256_storeu_pd(p, v); }
  static constexpr int kStreamAlign = 32;
  SB_VEC_INLINE static void stream(double* p, V v) { _mm256_stream_pd(p, v); }
  static V load_part(const double* p, int64_t m) {
    return _mm256_maskload_pd(p, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kPartMask + 8 - 2 * m)));
  }
  // Note [Row-kernel lanes]: aligned forms (32 bytes), and float lanes to and from
  // double: widen_lo/hi the 4 low/high floats of f, narrow2 two vectors into 8 floats,
  // store_narrow 4 floats at p (16-byte aligned).
  SB_VEC_INLINE static V load_aligned(const double* p) { return _mm256_load_pd(p); }
  SB_VEC_INLINE static void store_aligned(double* p, V v) { _mm256_store_pd(p, v); }
  SB_VEC_INLINE static V widen_lo(__m256 f) { return _mm256_cvtps_pd(_mm256_castps256_ps128(f)); }
  SB_VEC_INLINE static V widen_hi(__m256 f) { return _mm256_cvtps_pd(_mm256_extractf128_ps(f, 1)); }
  SB_VEC_INLINE static __m256 narrow2(V lo, V hi) { return _mm256_set_m128(_mm256_cvtpd_ps(hi), _mm256_cvtpd_ps(lo)); }
  SB_VEC_INLINE static void store_narrow(float* p, V v) { _mm_store_ps(p, _mm256_cvtpd_ps(v)); }
  SB_VEC_INLINE static V zero() { return _mm256_setzero_pd(); }
  template <typename U>
  static V set1(U v) { return _mm256_set1_pd(static_cast<double>(v)); }
  SB_VEC_INLINE static V set1(double v) { return _mm256_set1_pd(v); }
  static V lowest() { return _mm256_set1_pd(-INFINITY); }
  SB_VEC_INLINE static V add(V a, V b) { return _mm256_add_pd(a, b); }
  SB_VEC_INLINE static V sub(V a, V b) { return _mm256_sub_pd(a, b); }
  SB_VEC_INLINE static V mul(V a, V b) { return _mm256_mul_pd(a, b); }
  SB_VEC_INLINE static V fma(V a, V b, V c) { return _mm256_fmadd_pd(a, b, c); }
  SB_VEC_INLINE static V div(V a, V b) { return _mm256_div_pd(a, b); }
  SB_VEC_INLINE static V sqrt(V a) { return _mm256_sqrt_pd(a); }
  static V neg(V a) { return _mm256_xor_pd(a, _mm256_set1_pd(-0.0)); }
  static V abs(V a) { return _mm256_andnot_pd(_mm256_set1_pd(-0.0), a); }
  static V relu(V a) { return _mm256_max_pd(_mm256_setzero_pd(), a); }
  static V maximum(V x, V y) {
    return _mm256_blendv_pd(_mm256_max_pd(x, y), _mm256_add_pd(x, y), _mm256_cmp_pd(x, y, _CMP_UNORD_Q));
  }
  static V minimum(V x, V y) {
    return _mm256_blendv_pd(_mm256_min_pd(x, y), _mm256_add_pd(x, y), _mm256_cmp_pd(x, y, _CMP_UNORD_Q));
  }
  static V exp(V x) {  // std::exp per lane: float64 has no polynomial of its own here
    alignas(32) double v[4];
    _mm256_store_pd(v, x);
    for (double& e : v) e = std::exp(e);
    return _mm256_load_pd(v);
  }
  static V max_nan(V a, V x) { return _mm256_or_pd(_mm256_max_pd(x, a), _mm256_cmp_pd(x, x, _CMP_UNORD_Q)); }
  static double hsum(V v) {
    alignas(32) double t[4];
    _mm256_store_pd(t, v);
    return (t[0] + t[1]) + (t[2] + t[3]);
  }
  static double hmax(V v) {  // folded in registers, as F32Lanes::hmax
    v = max_nan(v, _mm256_permute2f128_pd(v, v, 1));
    v = max_nan(v, _mm256_permute_pd(v, 0x5));
    return _mm256_cvtsd_f64(v);
  }
  static __m256d hsum4(const V* v) { return F32Lanes::hsum4_pd(v); }  // F32Lanes::hsum4's
#ifdef SB_HAVE_AVX512
  __attribute__((target("avx512f,avx512vl"), always_inline)) static V masked_load(const double* p, unsigned m) {
    return _mm256_maskz_loadu_pd(static_cast<__mmask8>(m), p);
  }
  __attribute__((target("avx512f,avx512vl"), always_inline)) static void masked_store(double* p, unsigned m, V v) {
    _mm256_mask_storeu_pd(p, static_cast<__mmask8>(m), v);
  }
  // p[0], p[2], .. p[2r - 2], r <= 4: two ymm halves, even lanes merged and ordered
  __attribute__((target("avx512f,avx512vl"), always_inline)) static V gather_even(const double* p, int r) {
    const unsigned m = 0x55u & ((1u << (2 * r)) - 1);
    const __m256d lo = _mm256_maskz_loadu_pd(static_cast<__mmask8>(m & 0xF), p);
    const __m256d hi = _mm256_maskz_loadu_pd(static_cast<__mmask8>(m >> 4), p + 4);
    return _mm256_permute4x64_pd(_mm256_unpacklo_pd(lo, hi), 0xD8);  // lo0 hi0 lo2 hi2 -> lo0 lo2 hi0 hi2
  }
#endif
};

#ifdef SB_HAVE_AVX512
// Note [512-bit vectors]
// Vec<T, 512>: one zmm register of 16 float lanes for float, Half and BFloat16, behind
// target attributes (AVX-512F; the narrowing to bfloat16 AVX512_BF16's vcvtneps2bf16),
// so the AVX2 build carries them and the caller's own target attribute and run-time
// check (use_avx512(), use_avx512_bf16()) pick them. always_inline: a caller without
// the target cannot call them, and a caller with it gets the instructions in place.
// The masked forms (maskz) stand where GCC 12 warns (-Wmaybe-uninitialized) on the
// plain intrinsics' undefined source lanes.
#define SB_VEC512 __attribute__((target("avx512f"), always_inline))
template <> struct Vec<float, 512> {
  using V = __m512;
  using Mask = __mmask16;  // lane i: bit i
  static constexpr int kW = 16;
  SB_VEC512 static V load(const float* p) { return _mm512_loadu_ps(p); }
  SB_VEC512 static void store(float* p, V v) { _mm512_storeu_ps(p, v); }
  SB_VEC512 static void stream(float* p, V v) { _mm512_stream_ps(p, v); }  // p 64-byte aligned
  // the arithmetic of normalize's fused rows (Note [Row-kernel lanes]); masked forms:
  // lanes off in m are 0 (maskz) or untouched in memory (mask_store), never faulting
  SB_VEC512 static V zero() { return _mm512_setzero_ps(); }
  SB_VEC512 static V set1(float v) { return _mm512_set1_ps(v); }
  SB_VEC512 static V add(V a, V b) { return _mm512_add_ps(a, b); }
  SB_VEC512 static V sub(V a, V b) { return _mm512_sub_ps(a, b); }
  SB_VEC512 static V mul(V a, V b) { return _mm512_mul_ps(a, b); }
  SB_VEC512 static V fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  SB_VEC512 static V maskz_load(Mask m, const float* p) { return _mm512_maskz_loadu_ps(m, p); }
  SB_VEC512 static void mask_store(float* p, Mask m, V v) { _mm512_mask_storeu_ps(p, m, v); }
  SB_VEC512 static V maskz_sub(Mask m, V a, V b) { return _mm512_maskz_sub_ps(m, a, b); }
  SB_VEC512 static V maskz_mov(Mask m, V a) { return _mm512_maskz_mov_ps(m, a); }
  // a[0], a[2], .. a[14], b[0], b[2], .. b[14]: the even lanes of 32 floats
  SB_VEC512 static V even_lanes(V a, V b) {
    return _mm512_permutex2var_ps(a, _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30), b);
  }
};
// The two 8-float halves of v added, as one 256-bit vector (the fused rows' sums folded
// for their horizontal adds). A free function of internal linkage, not always_inline:
// as a member of Vec<float, 512>, always_inline or not, it moved GCC's scheduling in
// the rows from memory (Note [Row-kernel lanes]). The masked extracts with a zero
// source: GCC 12's unmasked forms start from an undefined vector and draw
// -Wmaybe-uninitialized.
__attribute__((target("avx2,fma,avx512f,avx512vl"))) static inline __m256 fold_halves(__m512 v) {
  const __m512d d = _mm512_castps_pd(v);
  return _mm256_add_ps(_mm256_castpd_ps(_mm512_mask_extractf64x4_pd(_mm256_setzero_pd(), 0xF, d, 0)),
                       _mm256_castpd_ps(_mm512_mask_extractf64x4_pd(_mm256_setzero_pd(), 0xF, d, 1)));
}
template <> struct Vec<Half, 512> {
  using V = __m512;
  static constexpr int kW = 16;
  SB_VEC512 static V load(const Half* p) { return _mm512_maskz_cvtph_ps(0xFFFF, Bits256::load(p)); }
  SB_VEC512 static __m256i narrow(V v) { return _mm512_maskz_cvtps_ph(0xFFFF, v, _MM_FROUND_TO_NEAREST_INT); }
  SB_VEC512 static void store(Half* p, V v) { Bits256::store(p, narrow(v)); }
  SB_VEC512 static void stream(Half* p, V v) { Bits256::stream(p, narrow(v)); }  // p 32-byte aligned
};
template <> struct Vec<BFloat16, 512> {
  using V = __m512;
  static constexpr int kW = 16;
  SB_VEC512 static V load(const BFloat16* p) {  // exact: the 16 bits shifted up
    return _mm512_castsi512_ps(_mm512_maskz_slli_epi32(0xFFFF, _mm512_maskz_cvtepu16_epi32(0xFFFF, Bits256::load(p)), 16));
  }
  // vcvtneps2bf16: round to nearest even, subnormals flushed (Note [bfloat16 NaN and subnormals])
  __attribute__((target("avx512f,avx512bf16"), always_inline)) static __m256i narrow(V v) {
    return (__m256i)_mm512_cvtneps_pbh(v);
  }
  __attribute__((target("avx512f,avx512bf16"), always_inline)) static void store(BFloat16* p, V v) {
    Bits256::store(p, narrow(v));
  }
  __attribute__((target("avx512f,avx512bf16"), always_inline)) static void stream(BFloat16* p, V v) {
    Bits256::stream(p, narrow(v));
  }
};
#undef SB_VEC512
#endif

// Note [Vector exp]
// exp(x) for 8 floats: n = round(x / ln2), r = x - n ln2 (two-constant Cody-Waite),
// e^r by Cephes' degree-7 polynomial (FMA), times 2^n built in two halves so that
// results down to the smallest subnormal round once. Max error about 1-2 ulp (the
// elementwise tests measure it). Above 89 it is +inf, below -104 zero, NaN stays NaN.
inline F32Lanes::V F32Lanes::exp(V x) {
  const __m256 hi = _mm256_set1_ps(89.0f), lo = _mm256_set1_ps(-104.0f);
  const __m256 xc = _mm256_min_ps(_mm256_max_ps(x, lo), hi);
  const __m256 fx = _mm256_round_ps(_mm256_mul_ps(xc, _mm256_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(fx, _mm256_set1_ps(0.693359375f), xc);
  r = _mm256_fnmadd_ps(fx, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  __m256 y = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), r);
  y = _mm256_add_ps(y, _mm256_set1_ps(1.0f));
  const __m256i n = _mm256_cvtps_epi32(fx);  // in [-150, 128]
  const __m256i n1 = _mm256_srai_epi32(n, 1), n2 = _mm256_sub_epi32(n, n1);
  const __m256i bias = _mm256_set1_epi32(127);
  y = _mm256_mul_ps(y, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23)));
  y = _mm256_mul_ps(y, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23)));
  y = _mm256_blendv_ps(y, _mm256_set1_ps(INFINITY), _mm256_cmp_ps(x, hi, _CMP_GT_OQ));
  y = _mm256_blendv_ps(y, _mm256_setzero_ps(), _mm256_cmp_ps(x, lo, _CMP_LT_OQ));
  return _mm256_blendv_ps(y, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));  // NaN in, NaN out
}

// The lane operations of a register type: LanesOf<__m256> is F32Lanes (float, float16
// and bfloat16 data), LanesOf<__m256d> is Vec<double>. Code written once over a
// register V (the elementwise ops' functors) names its operations through it.
// (Chosen by overloads: a template specialized on __m256 itself would drop its
// may_alias attribute, which GCC warns about.)
F32Lanes lanes_of(__m256);
Vec<double> lanes_of(__m256d);
template <typename V> using LanesOf = decltype(lanes_of(std::declval<V>()));

// Vec<T> in the interface of the reductions' traits (Scalar's): T's register, double
// results, Acc lanes for the vertical buffers.
template <typename T_>
struct Simd {
  using T = T_;
  using L = Vec<T_>;
  using A = double;
  using Acc = typename L::Acc;
  using R = typename L::V;
  static constexpr int W = L::kW;
  static R load(const T* p) { return L::load(p); }
  static R loadacc(const Acc* p) { return Vec<Acc>::load(p); }
  static void storeacc(Acc* p, R v) { Vec<Acc>::store(p, v); }
  static R zero() { return L::zero(); }
  static R set1(double v) { return L::set1(v); }
  static R lowest() { return L::lowest(); }
  static R add(R a, R b) { return L::add(a, b); }
  static R sub(R a, R b) { return L::sub(a, b); }
  static R fmadd(R a, R b, R c) { return L::fma(a, b, c); }
  static R max_nan(R a, R x) { return L::max_nan(a, x); }
  static double hsum(R a) { return L::hsum(a); }
  static double hmax(R a) { return L::hmax(a); }
  static __m256d hsum4(const R* a) { return L::hsum4(a); }
};
#undef SB_VEC_INLINE
#endif

}  // namespace sb::vec
