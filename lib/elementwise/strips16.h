// strips16.h — the 16-bit rows' dense loops on AVX-512 that strips.h's vector loops
// call first: bfloat16 by vcvtneps2bf16 in pairs of vectors and in zmm, the sign ops on
// bits (Notes [bfloat16 rows by vcvtneps2bf16], [bfloat16 rows in zmm], [bfloat16 sign
// ops on bits]). Internal to lib/elementwise; included by strips.h only.
#pragma once
#include <cstdint>
#include <type_traits>

#ifdef SB_HAVE_AVX2
#include <immintrin.h>
#endif

#include "core/prefetch.h"
#include "core/vec.h"
#include "stridebench/cpu_features.h"

namespace sb::ew {

#ifdef SB_HAVE_AVX2
using vec::Vec;

#ifdef SB_HAVE_AVX512
// Note [bfloat16 rows by vcvtneps2bf16]
// The dense bfloat16 loops below narrow their float results by integer rounding
// (Vec<BFloat16>::narrow2: about eight instructions per eight values), which bounds
// them at cache sizes. Where the CPU has AVX512_BF16 (use_avx512_bf16()) their
// 16-element loop runs as one of these two functions instead: the same loads and the
// op's own 256-bit arithmetic (its functor inlines, its target a subset of theirs), the
// narrowing by vcvtneps2bf16 (narrow2_ne). Compiled for that target, called only after
// that check. Tails and strided paths keep narrow; the two differ only on subnormals
// (Note [bfloat16 NaN and subnormals]). Each returns the elements done, from j.
#define SB_BF16_NE __attribute__((target("avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512bf16")))
template <bool NT>
SB_BF16_NE inline void put16_ne(BFloat16* o, __m256i r) {
  if constexpr (NT) {  // o 16-byte aligned (kStreamAlign)
    _mm_stream_si128(reinterpret_cast<__m128i*>(o), _mm256_castsi256_si128(r));
    _mm_stream_si128(reinterpret_cast<__m128i*>(o + 8), _mm256_extracti128_si256(r, 1));
  } else {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(o), r);
  }
}
template <bool AS, bool BS, bool NT, typename V, typename F>
SB_BF16_NE int64_t binary_pairs_ne(BFloat16* o, const BFloat16* a, const BFloat16* b, V va, V vb, int64_t j, int64_t n,
                                   const F& f) {
  using L = Vec<BFloat16>;
  V a0 = va, a1 = va, b0 = vb, b1 = vb;
#pragma GCC unroll 2
  for (; j + L::kW2 <= n; j += L::kW2) {
    if constexpr (!AS) L::load2(a + j, a0, a1);
    if constexpr (!BS) L::load2(b + j, b0, b1);
    put16_ne<NT>(o + j, L::narrow2_ne(f(a0, b0), f(a1, b1)));
  }
  return j;
}
template <bool AS, bool NT, typename V, typename F>
SB_BF16_NE int64_t unary_pairs_ne(BFloat16* o, const BFloat16* a, V va, int64_t j, int64_t n, const F& f) {
  using L = Vec<BFloat16>;
  V a0 = va, a1 = va;
#pragma GCC unroll 2
  for (; j + L::kW2 <= n; j += L::kW2) {
    if constexpr (!AS) L::load2(a + j, a0, a1);
    put16_ne<NT>(o + j, L::narrow2_ne(f(a0), f(a1)));
  }
  return j;
}

// Note [bfloat16 rows in zmm]
// Where the op has a 512-bit twin (zmm_of(f): op_math.h's BinaryFn, BinaryScalarFn and
// UnaryFn), the dense bfloat16 loops take 32 elements a step in zmm ahead of the pairs
// above. A 64-byte load holds 32 elements in 16 dwords: a shift left by 16 gives the
// even elements as floats, a mask of the high halves the odd ones, so no widening
// shuffle (vpmovzxwd) is needed; the op runs on each half, one vcvtne2ps2bf16 rounds
// the 32 results (even ones in lanes 0-15, odd ones in 16-31) and one vpermw puts them
// back in order. Same float arithmetic and the same rounding as narrow2_ne. A streamed
// row (NT) first goes 8 elements at a time (align64_ne) until its output is 64-byte
// aligned, then streams each 32 results as one full line: through the pairs, a
// DRAM-size row was bound by their instructions on one core (docs/notes/elementwise.md).
// zmm_of of any other functor is NoZmm, and its loops start at the pairs.
// Where the tuning says so, each step prefetches its inputs' lines kPrefetch16Ahead bytes
// ahead (Note [bfloat16 zmm rows prefetch]).
//
// Note [bfloat16 zmm rows prefetch]: per byte the zmm loop does about three times the
// float32 loop's instructions (the split, the rounding, the vpermw), and from DRAM its
// loads fell behind the memory's rate on a Sapphire Rapids-class core, where the same
// bytes added as 16-bit integers kept up with float32. A prefetcht0 of each input 2 KiB
// ahead, one line a step, brings it to that rate; in the caches it is level, and past
// the row's end it fetches at most 2 KiB that are not used (docs/notes/elementwise.md).
// float16's dense loops (vcvtph2ps, no zmm twin) fell behind the same way and take the
// same prefetch, a line of each input per four vectors. The design's tuning decides
// (CpuTuning::prefetch16, SB_TUNING pf16): Sapphire Rapids' row, where it was measured;
// on Zen 4 a software prefetch slowed the bf16 sums' loop from DRAM, and on Zen 5 it
// slowed the DRAM-size bf16 adds (1.12-1.19x), so the Zen rows take none.
struct NoZmm {};
template <typename F>
NoZmm zmm_of(const F&) {
  return {};
}
// The 32 elements at p as floats: even ones (0, 2, ..., 30) in `even`, odd ones in `odd`.
SB_BF16_NE inline void split_even_odd(const BFloat16* p, __m512& even, __m512& odd) {
  const __m512i v = _mm512_loadu_si512(p);
  even = _mm512_castsi512_ps(_mm512_maskz_slli_epi32(0xFFFF, v, 16));  // masked: GCC 12 warns on the plain form
  odd = _mm512_castsi512_ps(_mm512_maskz_and_epi32(0xFFFF, v, _mm512_set1_epi32(static_cast<int>(0xFFFF0000u))));
}
// vpermw's index from (even results in words 0-15, odd ones in 16-31) to element order.
SB_BF16_NE inline __m512i interleave_halves() {
  alignas(64) static constexpr uint16_t idx[32] = {0, 16, 1, 17, 2,  18, 3,  19, 4,  20, 5,  21, 6,  22, 7,  23,
                                                   8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
  return _mm512_load_si512(idx);
}
// A streamed row's elements before o's next 64-byte boundary, 8 a step by the ymm
// functor g (o + j 16-byte aligned: kStreamAlign); AS, BS as below. Returns the elements
// done, from j; a row that ends first stops short, and the pairs go on from there.
template <bool AS, bool BS, typename V, typename G>
SB_BF16_NE int64_t align64_ne(BFloat16* o, const BFloat16* a, const BFloat16* b, V va, V vb, int64_t j, int64_t n,
                              const G& g) {
  using L = Vec<BFloat16>;
  for (; reinterpret_cast<uintptr_t>(o + j) % 64 != 0 && j + 8 <= n; j += 8) {
    const V r = g(AS ? va : L::load(a + j), BS ? vb : L::load(b + j));
    _mm_stream_si128(reinterpret_cast<__m128i*>(o + j), (__m128i)_mm256_cvtneps_pbh(r));
  }
  return j;
}
template <bool NT>
SB_BF16_NE inline void put32_ne(BFloat16* o, __m512i r) {
  if constexpr (NT) {
    _mm512_stream_si512(reinterpret_cast<__m512i*>(o), r);  // o 64-byte aligned (align64_ne)
  } else {
    _mm512_storeu_si512(o, r);
  }
}
template <bool AS, bool BS, bool NT, typename Z>
SB_BF16_NE int64_t binary_zmm_ne(BFloat16* o, const BFloat16* a, const BFloat16* b, int64_t j, int64_t n, const Z& z,
                                 bool pf) {
  if constexpr (std::is_same_v<Z, NoZmm>) {
    return j;
  } else {
    const __m512 va = _mm512_set1_ps(static_cast<float>(a[0])), vb = _mm512_set1_ps(static_cast<float>(b[0]));
    const __m512i order = interleave_halves();
#pragma GCC unroll 2
    for (; j + 32 <= n; j += 32) {
      if (pf) {
        if constexpr (!AS) _mm_prefetch(reinterpret_cast<const char*>(a + j) + kPrefetch16Ahead, _MM_HINT_T0);
        if constexpr (!BS) _mm_prefetch(reinterpret_cast<const char*>(b + j) + kPrefetch16Ahead, _MM_HINT_T0);
      }
      __m512 a0 = va, a1 = va, b0 = vb, b1 = vb;
      if constexpr (!AS) split_even_odd(a + j, a0, a1);
      if constexpr (!BS) split_even_odd(b + j, b0, b1);
      const __m512i r = (__m512i)_mm512_cvtne2ps_pbh(z(a1, b1), z(a0, b0));
      put32_ne<NT>(o + j, _mm512_permutexvar_epi16(order, r));
    }
    return j;
  }
}
template <bool AS, bool NT, typename Z>
SB_BF16_NE int64_t unary_zmm_ne(BFloat16* o, const BFloat16* a, int64_t j, int64_t n, const Z& z, bool pf) {
  if constexpr (std::is_same_v<Z, NoZmm>) {
    return j;
  } else {
    const __m512 va = _mm512_set1_ps(static_cast<float>(a[0]));
    const __m512i order = interleave_halves();
#pragma GCC unroll 2
    for (; j + 32 <= n; j += 32) {
      if constexpr (!AS)
        if (pf) _mm_prefetch(reinterpret_cast<const char*>(a + j) + kPrefetch16Ahead, _MM_HINT_T0);
      __m512 a0 = va, a1 = va;
      if constexpr (!AS) split_even_odd(a + j, a0, a1);
      const __m512i r = (__m512i)_mm512_cvtne2ps_pbh(z(a1), z(a0));
      put32_ne<NT>(o + j, _mm512_permutexvar_epi16(order, r));
    }
    return j;
  }
}

// Note [bfloat16 sign ops on bits]
// relu, neg and abs of a bfloat16 are its own bits with the sign bit zeroed (relu of a
// negative value other than -0), flipped or cleared: no widening and no rounding. Where
// the CPU has AVX-512 their dense bfloat16 rows take 32 lanes of 16 bits a step
// (bits16, op_math.h's ZmmUnary), the row's head and tail by masked loads and stores, so
// every element of a row takes the same instructions. A NaN comes out quiet (0x40 set,
// as the float path's narrowing sets it); a subnormal comes out exact, as on the scalar
// and AVX2 paths (vcvtne2ps2bf16 would flush it). A streamed row's full 64-byte lines
// stream; its head to the first line boundary and its tail take plain masked stores.
template <typename Z, typename = void>
inline constexpr bool kOnBits16 = false;
template <typename Z>
inline constexpr bool kOnBits16<Z, std::void_t<decltype(Z::kBits16)>> = Z::kBits16;
#define SB_BITS16 __attribute__((target("avx2,avx512f,avx512vl,avx512bw")))
// Elements j .. j + m of the row, m <= 32, by masked loads and stores.
template <bool AS, typename Z>
SB_BITS16 inline void bits16_part(uint16_t* d, const uint16_t* s, int64_t m, const Z& z) {
  const __mmask32 k = m >= 32 ? ~__mmask32(0) : (__mmask32(1) << m) - 1;
  const __m512i v = AS ? _mm512_set1_epi16(static_cast<short>(s[0])) : _mm512_maskz_loadu_epi16(k, s);
  _mm512_mask_storeu_epi16(d, k, z.bits16(v));
}
template <bool AS, bool NT, typename Z>
SB_BITS16 int64_t unary_bits16(BFloat16* o, const BFloat16* a, int64_t j, int64_t n, const Z& z) {
  const auto* s = reinterpret_cast<const uint16_t*>(a);
  auto* d = reinterpret_cast<uint16_t*>(o);
  const __m512i va = _mm512_set1_epi16(static_cast<short>(s[0]));
  if constexpr (NT) {  // plain stores up to the first line boundary
    const int64_t head = std::min<int64_t>(n - j, (64 - reinterpret_cast<uintptr_t>(d + j) % 64) % 64 / 2);
    if (head) bits16_part<AS>(d + j, AS ? s : s + j, head, z);
    j += head;
  }
#pragma GCC unroll 2
  for (; j + 32 <= n; j += 32) {
    const __m512i r = z.bits16(AS ? va : _mm512_loadu_si512(s + j));
    if constexpr (NT) _mm512_stream_si512(reinterpret_cast<__m512i*>(d + j), r);
    else _mm512_storeu_si512(d + j, r);
  }
  if (j < n) bits16_part<AS>(d + j, AS ? s : s + j, n - j, z);
  return n;
}
#undef SB_BITS16
#undef SB_BF16_NE
#endif
#endif  // SB_HAVE_AVX2

}  // namespace sb::ew
