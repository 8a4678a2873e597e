// transpose_tile.h — the one AVX2 tile transpose, shared by the copy's Tiled path
// (lib/copy/copy.cpp) and the strided iterator's staging of a transposed input
// (lib/elementwise/iterator.cpp), and the stride-2 even/odd split (even8_f32, odd8_f32).
// Internal header: not part of the public API.
//
// transpose_tile(dst, ld, src, sB, na, nb): dst[i*ld + j] = src[i + j*sB] for an
// na x nb tile (i: the source's unit-stride dim, j: its sB-strided dim; strides in
// elements). 4-byte elements go through 8x8 in-register transposes (unpack / shuffle /
// permute2f128: 24 shuffles per 64 elements), 8-byte elements through 4x4 ones
// (unpack / permute2f128: 8 per 16), 2-byte elements (transpose_tile_u16) through 8x8
// ones of 128-bit rows; the ragged edges are scalar. Micro-tiles walk i
// innermost, so each group of 8 (4) source rows is read start to end once and whole
// cache lines of the source are used while they are in L1.
// Cost: one read and one write per element, at L1/L2 speed; callers keep dst in L1/L2
// (a tile buffer) and pay the memory traffic of src only.
//
// stream_band_f32(dst, ld, src, sB, na, nh): the same mapping for a band 16 x nh wide
// along j (16 nh source rows) and na (a multiple of 8) along i, straight to memory.
// For each group of 8 i's and each 16-row half: two 8x8 transposes (16 loads), then 8
// destination rows each get one whole 64-byte line by two consecutive 32-byte
// streaming stores; the nh lines of a destination row are written close together
// (nh = 2: 128 contiguous bytes per row and visit). No buffer and no
// read-for-ownership; dst rows must be 64-byte aligned (the caller checks). The 16 nh
// source rows are read start to end: sequential streams the hardware prefetchers
// follow (32 measured best: 16 leaves the writes 64 bytes per row visit, 48 and 64
// outrun the prefetchers; on the AMD EPYC VM 16 rows, nh = 1, are best: copy.cpp Note
// [Transpose bands]). No fence (as stream_copy). nh == 1 and 2 (the copy's full bands)
// run compile-time instances with the h loop unrolled (stream_band_f32_n<2>), faster
// than the run-time loop at 1 and 2 threads (docs/notes/copy-reduce.md, the 2-thread
// transpose).
//
// stream_band_u16(dst, ld, src, sB, na): the 2-byte band, 32 source rows high, so that
// each dst row again gets one whole 64-byte line per visit.
//
// stream_copy(d, s, n): n bytes from s to d with non-temporal 32-byte stores, whole
// 64-byte lines only (plain stores for the head up to the first line boundary and the
// tail after the last whole line: Note [Whole lines only]); no fence: the caller issues
// _mm_sfence once per thread after its last streaming store. Used for the copy's
// memcpy/rows paths and the iterator's streamed output tiles.
//
// Note [Whole lines only]: a streaming store that leaves part of its 64-byte line
// unwritten sends the line out partial, and where the rest of the line is written later
// (by the next tile of a transpose whose dst rows are not line-aligned) every such line
// costs a partial write to memory: such transposes took several times the plain-store
// time (docs/notes/copy-reduce.md, "Streaming stores in whole lines"). So stream_copy,
// the copy's tile rows and its blocks stream whole lines only, and the partial lines at
// a run's ends go through plain stores.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstring>

#ifdef SB_HAVE_AVX2
#include <immintrin.h>
#endif

namespace sb::detail {

#ifdef SB_HAVE_AVX2
// The even (0, 2, .., 14) and odd (1, 3, .., 15) elements of the 16 floats a:b, in order:
// one shuffle and one permute each (the stride-2 input staging in elementwise.cpp, the
// stride-2 pooling phases in pool.cpp).
inline __m256 even8_f32(__m256 a, __m256 b) {
  const __m256 t = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0));  // a0 a2 b0 b2 | a4 a6 b4 b6
  return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(t), _MM_SHUFFLE(3, 1, 2, 0)));
}
// The even elements (0, 2, 4, 6) of the 8 doubles a:b, in order (the reductions'
// stride-2 kept columns, reduce_columns.h).
inline __m256d even4_f64(__m256d a, __m256d b) {
  return _mm256_permute4x64_pd(_mm256_unpacklo_pd(a, b), _MM_SHUFFLE(3, 1, 2, 0));  // a0 b0 a2 b2 -> a0 a2 b0 b2
}
inline __m256 odd8_f32(__m256 a, __m256 b) {
  const __m256 t = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(3, 1, 3, 1));
  return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(t), _MM_SHUFFLE(3, 1, 2, 0)));
}
// The even 2-byte elements (0, 2, .., 30) of the 32 in a:b, in order: the low halves of
// their 32-bit words packed, one lane permute (the copy's and the elementwise strips'
// stride-2 gathers).
inline __m256i even16_u16(__m256i a, __m256i b) {
  const __m256i lo = _mm256_set1_epi32(0xFFFF);
  const __m256i t = _mm256_packus_epi32(_mm256_and_si256(a, lo), _mm256_and_si256(b, lo));
  return _mm256_permute4x64_epi64(t, _MM_SHUFFLE(3, 1, 2, 0));
}

// 8x8 float transpose: rows r0..r7 (8 consecutive A elements each, one per B index)
// become 8 rows along B.
inline void transpose8(__m256& r0, __m256& r1, __m256& r2, __m256& r3, __m256& r4, __m256& r5, __m256& r6,
                       __m256& r7) {
  const __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1);
  const __m256 t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3);
  const __m256 t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5);
  const __m256 t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
  const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
  const __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
  const __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
  const __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
  r0 = _mm256_permute2f128_ps(u0, u4, 0x20);
  r1 = _mm256_permute2f128_ps(u1, u5, 0x20);
  r2 = _mm256_permute2f128_ps(u2, u6, 0x20);
  r3 = _mm256_permute2f128_ps(u3, u7, 0x20);
  r4 = _mm256_permute2f128_ps(u0, u4, 0x31);
  r5 = _mm256_permute2f128_ps(u1, u5, 0x31);
  r6 = _mm256_permute2f128_ps(u2, u6, 0x31);
  r7 = _mm256_permute2f128_ps(u3, u7, 0x31);
}

// 4x4 double transpose in registers: rows r0..r3 become 4 rows along B (the strided
// iterator's transposed-row blocks, elementwise/strips.h; transpose_tile_f64 below
// interleaves the same shuffles with its stores).
__attribute__((always_inline)) inline void transpose4(__m256d& r0, __m256d& r1, __m256d& r2, __m256d& r3) {
  const __m256d t0 = _mm256_unpacklo_pd(r0, r1), t1 = _mm256_unpackhi_pd(r0, r1);
  const __m256d t2 = _mm256_unpacklo_pd(r2, r3), t3 = _mm256_unpackhi_pd(r2, r3);
  r0 = _mm256_permute2f128_pd(t0, t2, 0x20);
  r1 = _mm256_permute2f128_pd(t1, t3, 0x20);
  r2 = _mm256_permute2f128_pd(t0, t2, 0x31);
  r3 = _mm256_permute2f128_pd(t1, t3, 0x31);
}

// One 8x8 micro-tile: d[i*ld + j] = s[i + j*sB], i, j < 8 (plain stores).
__attribute__((always_inline)) inline void tile8x8_f32(float* d, int64_t ld, const float* s, int64_t sB) {
  __m256 r0 = _mm256_loadu_ps(s), r1 = _mm256_loadu_ps(s + sB), r2 = _mm256_loadu_ps(s + 2 * sB),
         r3 = _mm256_loadu_ps(s + 3 * sB), r4 = _mm256_loadu_ps(s + 4 * sB), r5 = _mm256_loadu_ps(s + 5 * sB),
         r6 = _mm256_loadu_ps(s + 6 * sB), r7 = _mm256_loadu_ps(s + 7 * sB);
  transpose8(r0, r1, r2, r3, r4, r5, r6, r7);
  _mm256_storeu_ps(d, r0);
  _mm256_storeu_ps(d + ld, r1);
  _mm256_storeu_ps(d + 2 * ld, r2);
  _mm256_storeu_ps(d + 3 * ld, r3);
  _mm256_storeu_ps(d + 4 * ld, r4);
  _mm256_storeu_ps(d + 5 * ld, r5);
  _mm256_storeu_ps(d + 6 * ld, r6);
  _mm256_storeu_ps(d + 7 * ld, r7);
}

// The ragged edges of the tile functions below: dst[i*ld + j] = src[i + j*sB] for i in
// [i0, i1), j in [j0, j1), element by element.
template <typename T>
inline void transpose_scalar(T* dst, int64_t ld, const T* src, int64_t sB, int64_t i0, int64_t i1, int64_t j0,
                             int64_t j1) {
  for (int64_t i = i0; i < i1; ++i)
    for (int64_t j = j0; j < j1; ++j) dst[i * ld + j] = src[i + j * sB];
}

// 4-byte elements (float, int32: bit patterns only).
// Rows of 8 by 8x8 tiles, then a band of 4 by 4x4 tiles (the 12-row panels of the wide
// GEMM tile and the 6-row ones of AVX2 have one), the rest element by element.
inline void transpose_tile_f32(float* dst, int64_t ld, const float* src, int64_t sB, int64_t na, int64_t nb) {
  int64_t j = 0;
  for (; j + 8 <= nb; j += 8) {
    const float* s = src + j * sB;
    int64_t i = 0;
    for (; i + 8 <= na; i += 8) tile8x8_f32(dst + i * ld + j, ld, s + i, sB);
    transpose_scalar(dst, ld, src, sB, i, na, j, j + 8);
  }
  if (j + 4 <= nb) {
    const float* s = src + j * sB;
    int64_t i = 0;
    for (; i + 4 <= na; i += 4) {
      __m128 r0 = _mm_loadu_ps(s + i), r1 = _mm_loadu_ps(s + sB + i), r2 = _mm_loadu_ps(s + 2 * sB + i),
             r3 = _mm_loadu_ps(s + 3 * sB + i);
      _MM_TRANSPOSE4_PS(r0, r1, r2, r3);
      float* d = dst + i * ld + j;
      _mm_storeu_ps(d, r0);
      _mm_storeu_ps(d + ld, r1);
      _mm_storeu_ps(d + 2 * ld, r2);
      _mm_storeu_ps(d + 3 * ld, r3);
    }
    transpose_scalar(dst, ld, src, sB, i, na, j, j + 4);
    j += 4;
  }
  transpose_scalar(dst, ld, src, sB, 0, na, j, nb);
}

// 8-byte elements (double, int64: bit patterns only).
inline void transpose_tile_f64(double* dst, int64_t ld, const double* src, int64_t sB, int64_t na, int64_t nb) {
  int64_t j = 0;
  for (; j + 4 <= nb; j += 4) {
    const double* s = src + j * sB;
    int64_t i = 0;
    for (; i + 4 <= na; i += 4) {
      const __m256d r0 = _mm256_loadu_pd(s + i), r1 = _mm256_loadu_pd(s + sB + i),
                    r2 = _mm256_loadu_pd(s + 2 * sB + i), r3 = _mm256_loadu_pd(s + 3 * sB + i);
      const __m256d t0 = _mm256_unpacklo_pd(r0, r1), t1 = _mm256_unpackhi_pd(r0, r1);
      const __m256d t2 = _mm256_unpacklo_pd(r2, r3), t3 = _mm256_unpackhi_pd(r2, r3);
      double* d = dst + i * ld + j;
      _mm256_storeu_pd(d, _mm256_permute2f128_pd(t0, t2, 0x20));
      _mm256_storeu_pd(d + ld, _mm256_permute2f128_pd(t1, t3, 0x20));
      _mm256_storeu_pd(d + 2 * ld, _mm256_permute2f128_pd(t0, t2, 0x31));
      _mm256_storeu_pd(d + 3 * ld, _mm256_permute2f128_pd(t1, t3, 0x31));
    }
    transpose_scalar(dst, ld, src, sB, i, na, j, j + 4);
  }
  transpose_scalar(dst, ld, src, sB, 0, na, j, nb);
}

// Two 8-element rows of 2-byte elements in one register: a in the low 128-bit lane, b
// in the high one. stream_band_u16 runs two 8x8 transposes side by side, one per lane
// (the epi16/epi32/epi64 unpacks work lane by lane). transpose_tile_u16 keeps 8 source
// rows (of 256 bits: tile16x8_u16, then 128): 16 rows side by side, a power-of-two
// stride apart, overfill an 8-way L1 set (a 4096^2 bfloat16 transpose ran slower with
// them).
__attribute__((always_inline)) inline __m256i load_pair_u16(const uint16_t* a, const uint16_t* b) {
  return _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a))),
                                 _mm_loadu_si128(reinterpret_cast<const __m128i*>(b)), 1);
}

// In each 128-bit lane, the 8x8 transpose of 2-byte elements: r[k] lane element m ->
// r[m] lane element k (unpack epi16 / epi32 / epi64: 24 per 128 elements).
__attribute__((always_inline)) inline void transpose8_u16_lanes(__m256i (&r)[8]) {
  const __m256i t0 = _mm256_unpacklo_epi16(r[0], r[1]), t1 = _mm256_unpackhi_epi16(r[0], r[1]);
  const __m256i t2 = _mm256_unpacklo_epi16(r[2], r[3]), t3 = _mm256_unpackhi_epi16(r[2], r[3]);
  const __m256i t4 = _mm256_unpacklo_epi16(r[4], r[5]), t5 = _mm256_unpackhi_epi16(r[4], r[5]);
  const __m256i t6 = _mm256_unpacklo_epi16(r[6], r[7]), t7 = _mm256_unpackhi_epi16(r[6], r[7]);
  const __m256i u0 = _mm256_unpacklo_epi32(t0, t2), u1 = _mm256_unpackhi_epi32(t0, t2);
  const __m256i u2 = _mm256_unpacklo_epi32(t1, t3), u3 = _mm256_unpackhi_epi32(t1, t3);
  const __m256i u4 = _mm256_unpacklo_epi32(t4, t6), u5 = _mm256_unpackhi_epi32(t4, t6);
  const __m256i u6 = _mm256_unpacklo_epi32(t5, t7), u7 = _mm256_unpackhi_epi32(t5, t7);
  r[0] = _mm256_unpacklo_epi64(u0, u4);
  r[1] = _mm256_unpackhi_epi64(u0, u4);
  r[2] = _mm256_unpacklo_epi64(u1, u5);
  r[3] = _mm256_unpackhi_epi64(u1, u5);
  r[4] = _mm256_unpacklo_epi64(u2, u6);
  r[5] = _mm256_unpackhi_epi64(u2, u6);
  r[6] = _mm256_unpacklo_epi64(u3, u7);
  r[7] = _mm256_unpackhi_epi64(u3, u7);
}

// One 8x8 micro-tile of 2-byte elements: d[i*ld + j] = s[i + j*sB], i, j < 8, 128-bit
// rows (unpack epi16 / epi32 / epi64: 24 per 64 elements).
__attribute__((always_inline)) inline void tile8x8_u16(uint16_t* d, int64_t ld, const uint16_t* s, int64_t sB) {
  const auto ld8 = [&](int k) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + k * sB)); };
  const __m128i r0 = ld8(0), r1 = ld8(1), r2 = ld8(2), r3 = ld8(3), r4 = ld8(4), r5 = ld8(5), r6 = ld8(6), r7 = ld8(7);
  const __m128i t0 = _mm_unpacklo_epi16(r0, r1), t1 = _mm_unpackhi_epi16(r0, r1);
  const __m128i t2 = _mm_unpacklo_epi16(r2, r3), t3 = _mm_unpackhi_epi16(r2, r3);
  const __m128i t4 = _mm_unpacklo_epi16(r4, r5), t5 = _mm_unpackhi_epi16(r4, r5);
  const __m128i t6 = _mm_unpacklo_epi16(r6, r7), t7 = _mm_unpackhi_epi16(r6, r7);
  const __m128i u0 = _mm_unpacklo_epi32(t0, t2), u1 = _mm_unpackhi_epi32(t0, t2);
  const __m128i u2 = _mm_unpacklo_epi32(t1, t3), u3 = _mm_unpackhi_epi32(t1, t3);
  const __m128i u4 = _mm_unpacklo_epi32(t4, t6), u5 = _mm_unpackhi_epi32(t4, t6);
  const __m128i u6 = _mm_unpacklo_epi32(t5, t7), u7 = _mm_unpackhi_epi32(t5, t7);
  const auto st8 = [&](int k, __m128i v) { _mm_storeu_si128(reinterpret_cast<__m128i*>(d + k * ld), v); };
  st8(0, _mm_unpacklo_epi64(u0, u4));
  st8(1, _mm_unpackhi_epi64(u0, u4));
  st8(2, _mm_unpacklo_epi64(u1, u5));
  st8(3, _mm_unpackhi_epi64(u1, u5));
  st8(4, _mm_unpacklo_epi64(u2, u6));
  st8(5, _mm_unpackhi_epi64(u2, u6));
  st8(6, _mm_unpacklo_epi64(u3, u7));
  st8(7, _mm_unpackhi_epi64(u3, u7));
}

// Two 8x8 micro-tiles of 2-byte elements side by side along i: d[i*ld + j] = s[i + j*sB],
// i < 16, j < 8. 8 source rows of 256 bits through transpose8_u16_lanes (half
// tile8x8_u16's unpacks per element): lane 0 of result k is dst row k, lane 1 dst row
// 8 + k.
__attribute__((always_inline)) inline void tile16x8_u16(uint16_t* d, int64_t ld, const uint16_t* s, int64_t sB) {
  __m256i r[8];
  for (int k = 0; k < 8; ++k) r[k] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + k * sB));
  transpose8_u16_lanes(r);
  for (int k = 0; k < 8; ++k) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + k * ld), _mm256_castsi256_si128(r[k]));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + (8 + k) * ld), _mm256_extracti128_si256(r[k], 1));
  }
}

// 2-byte elements (float16, bfloat16: bit patterns only): 16x8 and 8x8 micro-tiles,
// the ragged edges scalar.
inline void transpose_tile_u16(uint16_t* dst, int64_t ld, const uint16_t* src, int64_t sB, int64_t na, int64_t nb) {
  int64_t j = 0;
  for (; j + 8 <= nb; j += 8) {
    const uint16_t* s = src + j * sB;
    int64_t i = 0;
    for (; i + 16 <= na; i += 16) tile16x8_u16(dst + i * ld + j, ld, s + i, sB);
    for (; i + 8 <= na; i += 8) tile8x8_u16(dst + i * ld + j, ld, s + i, sB);
    transpose_scalar(dst, ld, src, sB, i, na, j, j + 8);
  }
  transpose_scalar(dst, ld, src, sB, 0, na, j, nb);
}

// stream_band_u16(dst, ld, src, sB, na): a band of 32 source rows of 2-byte elements,
// dst[i*ld + j] = src[i + j*sB] for i < na (a multiple of 8), j < 32, straight to memory
// (Note [Transpose bands] for 2-byte elements). Per 8 columns: rows j and j + 16 share a
// register, so two lane-wise 8x8 transposes give each dst row its columns 0-7 | 16-23
// and 8-15 | 24-31; two lane permutes make them one whole 64-byte line, written by two
// 32-byte streaming stores. dst rows must be 64-byte aligned (the caller checks).
inline void stream_band_u16(uint16_t* dst, int64_t ld, const uint16_t* src, int64_t sB, int64_t na) {
  for (int64_t i = 0; i < na; i += 8) {
    const uint16_t* s = src + i;
    __m256i a[8], b[8];
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) a[k] = load_pair_u16(s + k * sB, s + (k + 16) * sB);
    transpose8_u16_lanes(a);
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) b[k] = load_pair_u16(s + (k + 8) * sB, s + (k + 24) * sB);
    transpose8_u16_lanes(b);
    uint16_t* d = dst + i * ld;
#pragma GCC unroll 8
    for (int m = 0; m < 8; ++m) {
      _mm256_stream_si256(reinterpret_cast<__m256i*>(d + m * ld), _mm256_permute2x128_si256(a[m], b[m], 0x20));
      _mm256_stream_si256(reinterpret_cast<__m256i*>(d + m * ld + 16), _mm256_permute2x128_si256(a[m], b[m], 0x31));
    }
  }
}

// NH > 0: the number of 16-row halves fixed at compile time (the h loop unrolled); 0: nh.
template <int NH>
inline void stream_band_f32_n(float* dst, int64_t ld, const float* src, int64_t sB, int64_t na, int64_t nh) {
  if (NH > 0) nh = NH;
  for (int64_t i = 0; i + 8 <= na; i += 8) {
    for (int64_t h = 0; h < nh; ++h) {
      const float* s0 = src + i + 16 * h * sB;
      const float* s8 = s0 + 8 * sB;
      __m256 a0 = _mm256_loadu_ps(s0), a1 = _mm256_loadu_ps(s0 + sB), a2 = _mm256_loadu_ps(s0 + 2 * sB),
             a3 = _mm256_loadu_ps(s0 + 3 * sB), a4 = _mm256_loadu_ps(s0 + 4 * sB), a5 = _mm256_loadu_ps(s0 + 5 * sB),
             a6 = _mm256_loadu_ps(s0 + 6 * sB), a7 = _mm256_loadu_ps(s0 + 7 * sB);
      transpose8(a0, a1, a2, a3, a4, a5, a6, a7);
      __m256 b0 = _mm256_loadu_ps(s8), b1 = _mm256_loadu_ps(s8 + sB), b2 = _mm256_loadu_ps(s8 + 2 * sB),
             b3 = _mm256_loadu_ps(s8 + 3 * sB), b4 = _mm256_loadu_ps(s8 + 4 * sB), b5 = _mm256_loadu_ps(s8 + 5 * sB),
             b6 = _mm256_loadu_ps(s8 + 6 * sB), b7 = _mm256_loadu_ps(s8 + 7 * sB);
      transpose8(b0, b1, b2, b3, b4, b5, b6, b7);
      float* d = dst + i * ld + 16 * h;
      _mm256_stream_ps(d, a0);
      _mm256_stream_ps(d + 8, b0);
      _mm256_stream_ps(d + ld, a1);
      _mm256_stream_ps(d + ld + 8, b1);
      _mm256_stream_ps(d + 2 * ld, a2);
      _mm256_stream_ps(d + 2 * ld + 8, b2);
      _mm256_stream_ps(d + 3 * ld, a3);
      _mm256_stream_ps(d + 3 * ld + 8, b3);
      _mm256_stream_ps(d + 4 * ld, a4);
      _mm256_stream_ps(d + 4 * ld + 8, b4);
      _mm256_stream_ps(d + 5 * ld, a5);
      _mm256_stream_ps(d + 5 * ld + 8, b5);
      _mm256_stream_ps(d + 6 * ld, a6);
      _mm256_stream_ps(d + 6 * ld + 8, b6);
      _mm256_stream_ps(d + 7 * ld, a7);
      _mm256_stream_ps(d + 7 * ld + 8, b7);
    }
  }
}

inline void stream_band_f32(float* dst, int64_t ld, const float* src, int64_t sB, int64_t na, int64_t nh) {
  if (nh == 1) return stream_band_f32_n<1>(dst, ld, src, sB, na, nh);
  if (nh == 2) return stream_band_f32_n<2>(dst, ld, src, sB, na, nh);
  stream_band_f32_n<0>(dst, ld, src, sB, na, nh);
}

inline void stream_copy(char* d, const char* s, int64_t n) {
  const int64_t head = std::min<int64_t>(n, (64 - static_cast<int64_t>(reinterpret_cast<uintptr_t>(d) & 63)) & 63);
  std::memcpy(d, s, static_cast<size_t>(head));
  int64_t i = head;
  for (; i + 128 <= n; i += 128) {
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i));
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i + 32));
    const __m256i c = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i + 64));
    const __m256i e = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i + 96));
    _mm256_stream_si256(reinterpret_cast<__m256i*>(d + i), a);
    _mm256_stream_si256(reinterpret_cast<__m256i*>(d + i + 32), b);
    _mm256_stream_si256(reinterpret_cast<__m256i*>(d + i + 64), c);
    _mm256_stream_si256(reinterpret_cast<__m256i*>(d + i + 96), e);
  }
  for (; i + 64 <= n; i += 64) {
    _mm256_stream_si256(reinterpret_cast<__m256i*>(d + i), _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i)));
    _mm256_stream_si256(reinterpret_cast<__m256i*>(d + i + 32),
                        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i + 32)));
  }
  std::memcpy(d + i, s + i, static_cast<size_t>(n - i));
}

#ifdef SB_HAVE_AVX512
// Note [zmm 2-byte tiles]
// A 2-byte tile through 128-bit rows stores 8 elements a dst row (tile16x8_u16): as many
// stores per element as the 4-byte tiles, so a bfloat16 transpose took as long as a
// float32 one of the same shape. With AVX-512 each zmm holds four 8-element source rows
// j, j+8, j+16, j+24 (one per 128-bit lane); the epi16/epi32/epi64 unpacks work lane by
// lane, so eight such registers transpose to eight dst rows of 32 elements, a whole
// 64-byte line each (24 unpacks and 8 stores per 256 elements). The callers walk A
// fastest, so the 32 source rows of a B tile are read start to end while each dst line
// is written once (docs/notes/copy-reduce.md, zmm 2-byte tiles). Taken where the
// design's tuning says so (cpu_tuning().zmm16, Note [Tuning by microarchitecture]):
// Zen 5, Zen 4 (which splits 512-bit shuffles in halves and still gains) and Sapphire
// Rapids, each measured faster.
// Filling a buffer through zmm tiles (the pipelined blocks', the buffered tiles') is a
// flag of its own (zmm16_fill): on Zen 4 the 4096² bf16 transpose took longer with the
// blocks so filled; Zen 5 (blocks) and Sapphire Rapids (buffered tiles) take it.
__attribute__((target("avx512f,avx512bw"), always_inline)) inline __m512i load4_u16(const uint16_t* s, int64_t step) {
  __m512i z = _mm512_castsi128_si512(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s)));
  z = _mm512_inserti32x4(z, _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + step)), 1);
  z = _mm512_inserti32x4(z, _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 2 * step)), 2);
  return _mm512_inserti32x4(z, _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 3 * step)), 3);
}
template <bool NT>
__attribute__((target("avx512f,avx512bw"), always_inline)) inline void store_line(uint16_t* d, __m512i v) {
  if constexpr (NT) _mm512_stream_si512(reinterpret_cast<__m512i*>(d), v);
  else _mm512_storeu_si512(d, v);
}
// The epi32/epi64 unpacks in their all-ones masked forms: GCC 12 warns
// (-Wmaybe-uninitialized) on the plain ones.
__attribute__((target("avx512f,avx512bw"), always_inline)) inline void transpose8_u16_lanes512(__m512i (&r)[8]) {
  const __m512i t0 = _mm512_unpacklo_epi16(r[0], r[1]), t1 = _mm512_unpackhi_epi16(r[0], r[1]);
  const __m512i t2 = _mm512_unpacklo_epi16(r[2], r[3]), t3 = _mm512_unpackhi_epi16(r[2], r[3]);
  const __m512i t4 = _mm512_unpacklo_epi16(r[4], r[5]), t5 = _mm512_unpackhi_epi16(r[4], r[5]);
  const __m512i t6 = _mm512_unpacklo_epi16(r[6], r[7]), t7 = _mm512_unpackhi_epi16(r[6], r[7]);
  const __m512i u0 = _mm512_maskz_unpacklo_epi32(0xFFFF, t0, t2), u1 = _mm512_maskz_unpackhi_epi32(0xFFFF, t0, t2);
  const __m512i u2 = _mm512_maskz_unpacklo_epi32(0xFFFF, t1, t3), u3 = _mm512_maskz_unpackhi_epi32(0xFFFF, t1, t3);
  const __m512i u4 = _mm512_maskz_unpacklo_epi32(0xFFFF, t4, t6), u5 = _mm512_maskz_unpackhi_epi32(0xFFFF, t4, t6);
  const __m512i u6 = _mm512_maskz_unpacklo_epi32(0xFFFF, t5, t7), u7 = _mm512_maskz_unpackhi_epi32(0xFFFF, t5, t7);
  r[0] = _mm512_maskz_unpacklo_epi64(0xFF, u0, u4);
  r[1] = _mm512_maskz_unpackhi_epi64(0xFF, u0, u4);
  r[2] = _mm512_maskz_unpacklo_epi64(0xFF, u1, u5);
  r[3] = _mm512_maskz_unpackhi_epi64(0xFF, u1, u5);
  r[4] = _mm512_maskz_unpacklo_epi64(0xFF, u2, u6);
  r[5] = _mm512_maskz_unpackhi_epi64(0xFF, u2, u6);
  r[6] = _mm512_maskz_unpacklo_epi64(0xFF, u3, u7);
  r[7] = _mm512_maskz_unpackhi_epi64(0xFF, u3, u7);
}
// The 16 x 32 tile at s (source rows j < 32 sB apart, elements i < 16 of each) as 16 dst
// rows of 32 elements, r[m] for element m.
__attribute__((target("avx512f,avx512bw"), always_inline)) inline void tile16x32_u16(__m512i (&r)[16],
                                                                                     const uint16_t* s, int64_t sB) {
  __m512i a[8], q[8];
#pragma GCC unroll 8
  for (int k = 0; k < 8; ++k) a[k] = load4_u16(s + k * sB, 8 * sB);
#pragma GCC unroll 8
  for (int k = 0; k < 8; ++k) q[k] = load4_u16(s + 8 + k * sB, 8 * sB);
  transpose8_u16_lanes512(a);
  transpose8_u16_lanes512(q);
#pragma GCC unroll 8
  for (int m = 0; m < 8; ++m) {
    r[m] = a[m];
    r[8 + m] = q[m];
  }
}
// d[i*ld + j] = s[i + j*sB] for i < na (rounded down to 16), j < 32, in 16 x 32 tiles
// along i; returns the i it stopped at.
// NT: streaming stores (d and ld * 2 multiples of 64 bytes: each store a whole line).
template <bool NT = false>
__attribute__((noinline, target("avx512f,avx512bw"))) int64_t tile_run16x32_u16(uint16_t* d, int64_t ld,
                                                                              const uint16_t* s, int64_t sB,
                                                                              int64_t na) {
  int64_t i = 0;
  for (; i + 16 <= na; i += 16) {
    __m512i r[16];
    tile16x32_u16(r, s + i, sB);
#pragma GCC unroll 16
    for (int m = 0; m < 16; ++m) store_line<NT>(d + (i + m) * ld, r[m]);
  }
  return i;
}

// Note [Staged 2-byte tile runs]
// A streaming 2-byte tile run writes one 64-byte line per dst row visit, and those
// stores ran at half the rate of two adjacent lines per visit (Note [Pipelined transpose
// blocks] says the same of 4-byte rows); reading 32 source rows half a line at a time,
// rows a power of two apart, lost each line from L1 between its two halves. So where
// the design's tuning says so (cpu_tuning().zmm16_stage) a run takes 64 source rows:
// 64 x 64 elements are copied first, two whole lines a row, into a stage of 8 KiB in
// L1, and each of the 64 dst rows then gets 128 contiguous bytes, its two lines written
// one after the other. Measured on the Sapphire Rapids-class VM (docs/notes/copy-reduce.md,
// "Staged 2-byte tile runs"); the Zen rows keep the 32-row runs until measured.
// d[i*ld + j] = s[i + j*sB] for i < na (rounded down to 64), j < 64; returns the i it
// stopped at. NT as tile_run16x32_u16.
template <bool NT = false>
__attribute__((noinline, target("avx512f,avx512bw"))) int64_t tile_run64x64_u16(uint16_t* d, int64_t ld,
                                                                              const uint16_t* s, int64_t sB,
                                                                              int64_t na) {
  alignas(64) uint16_t stage[64 * 64];
  int64_t i = 0;
  for (; i + 64 <= na; i += 64) {
#pragma GCC unroll 16
    for (int k = 0; k < 64; ++k) {
      const uint16_t* row = s + i + k * sB;
      _mm512_store_si512(stage + 64 * k, _mm512_loadu_si512(row));
      _mm512_store_si512(stage + 64 * k + 32, _mm512_loadu_si512(row + 32));
    }
    for (int h = 0; h < 64; h += 16) {
      __m512i lo[16], hi[16];
      tile16x32_u16(lo, stage + h, 64);
      tile16x32_u16(hi, stage + 32 * 64 + h, 64);
      uint16_t* dh = d + (i + h) * ld;
#pragma GCC unroll 16
      for (int m = 0; m < 16; ++m) {
        store_line<NT>(dh + m * ld, lo[m]);
        store_line<NT>(dh + m * ld + 32, hi[m]);
      }
    }
  }
  return i;
}
#endif

// A buffered 2-byte tile: b[i*ldb + j] = s[i + j*sB] for i < na, j < nb. Where zmm (the
// design fills buffers through the zmm tiles: CpuTuning::zmm16_fill, Note [zmm 2-byte
// tiles]) its whole 16 x 32 tiles go that way, the rest through the 128-bit rows (the
// copy's buffered tiles, Note [Tiles of 2- and 8-byte elements]).
__attribute__((noinline)) inline void fill_tile_u16(uint16_t* b, int64_t ldb, const uint16_t* s, int64_t sB, int64_t na,
                                                    int64_t nb, bool zmm) {
  int64_t nb32 = 0;  // columns done through the zmm tiles
#ifdef SB_HAVE_AVX512
  const int64_t na16 = na / 16 * 16;
  if (zmm && na16 > 0) {
    nb32 = nb / 32 * 32;
    for (int64_t j = 0; j < nb32; j += 32) tile_run16x32_u16(b + j, ldb, s + j * sB, sB, na16);
    if (na16 < na) transpose_tile_u16(b + na16 * ldb, ldb, s + na16, sB, na - na16, nb32);  // the last rows
  }
#endif
  (void)zmm;
  if (nb32 < nb) transpose_tile_u16(b + nb32, ldb, s + nb32 * sB, sB, na, nb - nb32);
}
#endif

}  // namespace sb::detail
