// strips.h — the strip kernels that elementwise.cpp and normalize.cpp share
// (internal to lib/elementwise), on vec::Vec (core/vec.h): dense vector loops, masked
// tails, streaming stores, strided inputs packed into L1 chunks, stride-2 strips, and
// unary_strip / binary_strip, the 1-D kernels every elementwise op hands the iterator
// (Note [Strided iteration]); plus the checks and the streaming rule both files apply. Definitions of the non-template
// functions are in elementwise.cpp.
#pragma once
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <type_traits>
#include <vector>

#ifdef SB_HAVE_AVX2
#include <immintrin.h>
#endif

#include "stridebench/tensor.h"
#include "copy/copy.h"
#include "core/transpose_tile.h"
#include "core/vec.h"
#include "elementwise/strips16.h"

namespace sb::ew {

// The type an element is computed in: float16 and bfloat16 in float32, the rest in their own type.
template <typename T> struct AccOf { using type = T; };
template <> struct AccOf<Half> { using type = float; };
template <> struct AccOf<BFloat16> { using type = float; };
// float16 and bfloat16: no 16-bit k-masked gathers or movnti here, so the stride-2 and
// streamed-tail paths below are for 4- and 8-byte elements only
template <typename T> constexpr bool kIs16Bit = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;
template <typename T> using acc_t = typename AccOf<T>::type;

// ---------------------------------------------------------------- vector I/O

template <typename T> constexpr bool kHasVec = std::is_same_v<T, float> || std::is_same_v<T, double> || kIs16Bit<T>;

#ifdef SB_HAVE_AVX2
using vec::Vec;  // loads, stores, streams, masked tails, stride-2 gathers (Note [One vector layer])

// Note [Streaming elementwise outputs]
// A dense output larger than the streaming threshold (copy.h nt_threshold_bytes():
// min(LLC, 2 x cores x L2)) that is not also an input goes out with non-temporal stores
// (NT = true), as the copy's does: c = a + b with plain stores moves 4 arrays (the
// read-for-ownership of c's lines), with streaming stores 3. Elements
// before the first kStreamAlign boundary and the tail are streamed one by one (put_part);
// each thread issues one sfence after its last strip (StridedIter::for_each's `fence`).
// The Tiled path (a transposed input) streams too when each tile's output is one dense
// block (whole output rows of at most kTileBytes0, rows adjacent: x + y.transpose(2, 3)
// with small H, W). Tiles of longer rows write 64 pieces of 1 KiB on 64 pages, which
// stream slower than plain stores (docs/notes/elementwise.md), so those keep plain stores,
// unless the tiles read their staged source ahead (Note [Staged source read ahead] in
// iterator.h: an NHWC operand into an NCHW out), where they stream faster.
// In-place updates never stream: their lines were just read, so there is no
// read-for-ownership to save.
//
// Note [Streaming strips]
// The Strided and Broadcast paths stream as well when the output, in the iterator's
// order, is one dense block (StridedIter::strips_write_dense_output: x + b with b a
// broadcast row or column, relu_out of a stepped or padded input): its strips write
// dense runs one after the other, as the Contiguous path's one strip does. A strip's
// head and tail must then stream as well (movnti, element by element): plain stores into
// lines that vector streams fill made short rows several times slower than not
// streaming at all (docs/notes/elementwise.md). An output with gaps between its rows
// never streams.

// o[0 .. m) = t[0 .. m), m < W, t just written by one vector store. Plain: at most two
// overlapping fixed-size moves (a memcpy of variable length is a libc call). NT: each element by a non-temporal scalar store (movnti), so a
// streamed run's head and tail do not mix plain stores into lines the vector streams
// write (Note [Streaming strips]). Half and BFloat16 have no 16-bit movnti and
// store plainly.
template <typename T, bool NT>
inline void put_part(T* o, const T* t, int64_t m) {
  if constexpr (NT && sizeof(T) == 4) {
    for (int64_t k = 0; k < m; ++k) {
      int v;
      std::memcpy(&v, t + k, 4);
      _mm_stream_si32(reinterpret_cast<int*>(o + k), v);
    }
  } else if constexpr (NT && sizeof(T) == 8) {
    for (int64_t k = 0; k < m; ++k) {
      long long v;
      std::memcpy(&v, t + k, 8);
      _mm_stream_si64(reinterpret_cast<long long*>(o + k), v);
    }
  } else {
    char* d = reinterpret_cast<char*>(o);
    const char* q = reinterpret_cast<const char*>(t);
    const int64_t nb = m * static_cast<int64_t>(sizeof(T));  // 2 .. 28 bytes
    if (nb >= 16) {
      std::memcpy(d, q, 16);
      std::memcpy(d + nb - 16, q + nb - 16, 16);
    } else if (nb >= 8) {
      std::memcpy(d, q, 8);
      std::memcpy(d + nb - 8, q + nb - 8, 8);
    } else if (nb >= 4) {
      std::memcpy(d, q, 4);
      std::memcpy(d + nb - 4, q + nb - 4, 4);
    } else if (nb >= 2) {
      std::memcpy(d, q, 2);
    }
  }
}

// o[j] = f(a[j], b[j]) for j in [j0, j0 + m), m < W: masked loads, one vector op, a
// short copy out (put_part). Not a W-wide buffer filled element by element and loaded
// as a vector: that is a store-forwarding stall per strip, which cost short rows half
// their time (docs/notes/elementwise.md).
template <typename T, bool AS, bool BS, bool NT = false, typename F>
void binary_part(T* o, const T* a, const T* b, int64_t j0, int64_t m, const F& f) {
  using L = Vec<T>;
  alignas(32) T to[L::kW];
  L::store(to, f(AS ? L::set1(a[0]) : L::load_part(a + j0, m), BS ? L::set1(b[0]) : L::load_part(b + j0, m)));
  put_part<T, NT>(o + j0, to, m);
}

// Elements of o before its first `align`-byte boundary (o is element-aligned), at most n.
template <typename T>
int64_t head_to_align(const T* o, int64_t align, int64_t n) {
  const int64_t mis = static_cast<int64_t>(reinterpret_cast<uintptr_t>(o) % static_cast<uintptr_t>(align));
  return std::min<int64_t>(n, mis ? (align - mis) / static_cast<int64_t>(sizeof(T)) : 0);
}

// Note [Unrolled vector loops]: the dense loops below are unrolled 4x (GCC does not
// unroll without being asked). On Zen 4 a loop with one vector store per iteration runs
// at one iteration per cycle or per two depending on where the linker puts it, with the
// same instructions; unrolled, the loads issue ahead of the stores and every placement
// runs at the fast rate (docs/notes/elementwise.md; bench_baseline's Note [Unrolled
// STREAM loops]).


// o[j] = f(a[j], b[j]); AS/BS: a or b is a stride-0 scalar; NT: streaming stores (Note
// [Streaming elementwise outputs]).
template <typename T, bool AS, bool BS, bool NT = false, typename F>
void binary_vloop(T* o, const T* a, const T* b, int64_t n, const F& f) {
  using L = Vec<T>;
  constexpr int W = L::kW;
  const typename L::V va = L::set1(a[0]), vb = L::set1(b[0]);
  int64_t j = 0;
  if constexpr (NT) {
    j = head_to_align(o, L::kStreamAlign, n);
    if (j) binary_part<T, AS, BS, NT>(o, a, b, 0, j, f);
  }
  if constexpr (std::is_same_v<T, BFloat16>) {  // 16 at a time: Note [bfloat16 pairs of vectors]
#ifdef SB_HAVE_AVX512
    if (use_avx512_bf16()) {
      if constexpr (NT && !std::is_same_v<decltype(zmm_of(f)), NoZmm>) j = align64_ne<AS, BS>(o, a, b, va, vb, j, n, f);
      j = binary_zmm_ne<AS, BS, NT>(o, a, b, j, n, zmm_of(f), cpu_tuning().prefetch16);  // Note [bfloat16 rows in zmm]
      j = binary_pairs_ne<AS, BS, NT>(o, a, b, va, vb, j, n, f);  // Note [bfloat16 rows by vcvtneps2bf16]
    }
#endif
    typename L::V a0 = va, a1 = va, b0 = vb, b1 = vb;
#pragma GCC unroll 2
    for (; j + L::kW2 <= n; j += L::kW2) {
      if constexpr (!AS) L::load2(a + j, a0, a1);
      if constexpr (!BS) L::load2(b + j, b0, b1);
      if constexpr (NT) L::stream2(o + j, f(a0, b0), f(a1, b1));
      else L::store2(o + j, f(a0, b0), f(a1, b1));
    }
  }
  if constexpr (std::is_same_v<T, Half>) {  // a line of each input a step, prefetched (Note [bfloat16 zmm rows prefetch])
    if (cpu_tuning().prefetch16) {
      for (; j + 4 * W <= n; j += 4 * W) {
        if constexpr (!AS) _mm_prefetch(reinterpret_cast<const char*>(a + j) + kPrefetch16Ahead, _MM_HINT_T0);
        if constexpr (!BS) _mm_prefetch(reinterpret_cast<const char*>(b + j) + kPrefetch16Ahead, _MM_HINT_T0);
#pragma GCC unroll 4
        for (int u = 0; u < 4 * W; u += W) {
          const typename L::V r = f(AS ? va : L::load(a + j + u), BS ? vb : L::load(b + j + u));
          if constexpr (NT) L::stream(o + j + u, r);
          else L::store(o + j + u, r);
        }
      }
    }
  }
  if constexpr (NT) {
#pragma GCC unroll 4  // Note [Unrolled vector loops]
    for (; j + W <= n; j += W) L::stream(o + j, f(AS ? va : L::load(a + j), BS ? vb : L::load(b + j)));
  } else {
#pragma GCC unroll 4  // Note [Unrolled vector loops]
    for (; j + W <= n; j += W) L::store(o + j, f(AS ? va : L::load(a + j), BS ? vb : L::load(b + j)));
  }
  if (j < n) binary_part<T, AS, BS, NT>(o, a, b, j, n - j, f);
}

template <typename T, bool AS, bool NT = false, typename F>
void unary_part(T* o, const T* a, int64_t j0, int64_t m, const F& f) {
  using L = Vec<T>;
  alignas(32) T to[L::kW];
  L::store(to, f(AS ? L::set1(a[0]) : L::load_part(a + j0, m)));
  put_part<T, NT>(o + j0, to, m);
}

template <typename T, bool AS, bool NT = false, typename F>
void unary_vloop(T* o, const T* a, int64_t n, const F& f) {
  using L = Vec<T>;
  constexpr int W = L::kW;
  const typename L::V va = L::set1(a[0]);
  int64_t j = 0;
  if constexpr (NT) {
    j = head_to_align(o, L::kStreamAlign, n);
    if (j) unary_part<T, AS, NT>(o, a, 0, j, f);
  }
  if constexpr (std::is_same_v<T, BFloat16>) {  // 16 at a time: Note [bfloat16 pairs of vectors]
#ifdef SB_HAVE_AVX512
    if constexpr (kOnBits16<decltype(zmm_of(f))>) {
      if (use_avx512()) j = unary_bits16<AS, NT>(o, a, j, n, zmm_of(f));  // Note [bfloat16 sign ops on bits]
    }
    if (use_avx512_bf16()) {
      if constexpr (NT && !std::is_same_v<decltype(zmm_of(f)), NoZmm>)
        j = align64_ne<AS, true>(o, a, a, va, va, j, n, [&](auto x, auto) { return f(x); });
      j = unary_zmm_ne<AS, NT>(o, a, j, n, zmm_of(f), cpu_tuning().prefetch16);  // Note [bfloat16 rows in zmm]
      j = unary_pairs_ne<AS, NT>(o, a, va, j, n, f);  // Note [bfloat16 rows by vcvtneps2bf16]
    }
#endif
    typename L::V a0 = va, a1 = va;
#pragma GCC unroll 2
    for (; j + L::kW2 <= n; j += L::kW2) {
      if constexpr (!AS) L::load2(a + j, a0, a1);
      if constexpr (NT) L::stream2(o + j, f(a0), f(a1));
      else L::store2(o + j, f(a0), f(a1));
    }
  }
  if constexpr (std::is_same_v<T, Half>) {  // a line of the input a step, prefetched (Note [bfloat16 zmm rows prefetch])
    if (cpu_tuning().prefetch16) {
      for (; j + 4 * W <= n; j += 4 * W) {
        if constexpr (!AS) _mm_prefetch(reinterpret_cast<const char*>(a + j) + kPrefetch16Ahead, _MM_HINT_T0);
#pragma GCC unroll 4
        for (int u = 0; u < 4 * W; u += W) {
          const typename L::V r = f(AS ? va : L::load(a + j + u));
          if constexpr (NT) L::stream(o + j + u, r);
          else L::store(o + j + u, r);
        }
      }
    }
  }
  if constexpr (NT) {
#pragma GCC unroll 4  // Note [Unrolled vector loops]
    for (; j + W <= n; j += W) L::stream(o + j, f(AS ? va : L::load(a + j)));
  } else {
#pragma GCC unroll 4  // Note [Unrolled vector loops]
    for (; j + W <= n; j += W) L::store(o + j, f(AS ? va : L::load(a + j)));
  }
  if (j < n) unary_part<T, AS, NT>(o, a, j, n - j, f);
}
#endif

// ---------------------------------------------------------------- strip kernels

#ifdef SB_HAVE_AVX2
// Note [Packed strided inputs]
// A dense output with a strided input (a stepped slice x[..., ::2]: stride 2 elements)
// goes in chunks of kPackChunk elements: each strided input is packed into an L1
// buffer (float stride 2: two loads and a shuffle per 8 elements; other strides a
// scalar gather), then the dense vector loop runs on the chunk. A strided output (relu_
// on a slice) is computed the same way into a third L1 buffer and then stored element by
// element (unpack_strided): a vector store would also write the elements in between,
// which belong to other tensors and maybe other threads (float stride 2: AVX-512 masked
// stores, which leave the masked-out elements untouched; Note [Masked stores]). Where
// the output and every input have stride 2 (or 0), Note [Stride-2 strips] skips the
// buffers.
constexpr int64_t kPackChunk = 512;

template <typename T>
void pack_strided(T* buf, const char* p, int64_t stride_bytes, int64_t n) {
  int64_t j = 0;
  if constexpr (std::is_same_v<T, float>) {
    if (stride_bytes == 8) {  // 16 loaded floats span 2j .. 2j+15: stay within element n-1 (2n-2)
      const float* f = reinterpret_cast<const float*>(p);
      for (; j + 9 <= n; j += 8) {
        Vec<float>::store(buf + j, detail::even8_f32(Vec<float>::load(f + 2 * j), Vec<float>::load(f + 2 * j + 8)));
      }
    }
  } else if constexpr (sizeof(T) == 2) {
    if (stride_bytes == 4) {  // 2-byte elements: the even halves of 32 loaded, 2j .. 2j+31 within 2n-2
      for (; j + 17 <= n; j += 16)
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(buf + j),
                            detail::even16_u16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 4 * j)),
                                               _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 4 * j + 32))));
    }
  }
  for (; j < n; ++j) std::memcpy(buf + j, p + j * stride_bytes, sizeof(T));
}

#ifdef SB_HAVE_AVX512
// f[2j] = buf[j] for 8-element groups: one AVX-512 store per 8 results, the odd lanes
// masked off by a k-mask (untouched in memory). Returns the elements done.
__attribute__((target("avx512f"))) inline int64_t unpack_stride2_avx512(float* f, const float* buf, int64_t n) {
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) Vec<float>::scatter_even8(f + 2 * j, buf + j);
  return j;
}

// The same for 2-byte elements, 16 at a time: zero-extended to 32-bit lanes (each
// element in the even half), the odd halves masked off by an AVX-512BW word mask.
__attribute__((target("avx512f,avx512bw"))) inline int64_t unpack_stride2_u16_avx512(uint16_t* f, const uint16_t* buf,
                                                                                     int64_t n) {
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) {
    const __m512i v = _mm512_maskz_cvtepu16_epi32(0xFFFF, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(buf + j)));
    _mm512_mask_storeu_epi16(f + 2 * j, 0x55555555u, v);
  }
  return j;
}
#endif

// Note [Masked stores]: writing every other element must leave the lanes in between
// untouched, which takes masked stores. The AVX2 vmaskmovps store is microcoded on AMD,
// slower than a scalar loop (docs/notes/elementwise.md). So: AVX-512 k-masks where the
// CPU has our AVX512 level (every CPU with VNNI, Intel or AMD), scalar stores otherwise.
template <typename T>
void unpack_strided(char* p, int64_t stride_bytes, const T* buf, int64_t n) {
  int64_t j = 0;
#ifdef SB_HAVE_AVX512
  if constexpr (std::is_same_v<T, float>)
    if (stride_bytes == 8 && use_avx512()) j = unpack_stride2_avx512(reinterpret_cast<float*>(p), buf, n);
  if constexpr (sizeof(T) == 2)
    if (stride_bytes == 4 && use_avx512())
      j = unpack_stride2_u16_avx512(reinterpret_cast<uint16_t*>(p), reinterpret_cast<const uint16_t*>(buf), n);
#endif
  for (; j < n; ++j) std::memcpy(p + j * stride_bytes, buf + j, sizeof(T));
}

#ifdef SB_HAVE_AVX512
// Note [Stride-2 strips]
// A strip whose output and every non-scalar input have a stride of 2 elements (relu_ or
// add_ on x[..., ::2], which the iterator coalesces into one long stride-2 strip) needs
// no packing: each vector load of 8 floats (4 doubles) holds 4 (2) of the strip's
// elements in its even lanes, the op runs on all lanes (odd lanes loaded as zero, the
// results there never stored), and a k-masked store writes the even lanes only, leaving
// the elements in between untouched (Note [Masked stores]). The loads are masked the
// same way, so the last vector never reads past the strip's last element. A sliced
// relu_ then costs about twice the contiguous one, what twice the cache lines cost
// (docs/notes/elementwise.md). Other strided outputs (mixed strides, stride 3, float16)
// keep the chunks.
// A stride-2 strip's view of Vec: the strip elements per vector and the even-lane mask.
template <typename T> struct Stride2 : Vec<T> {
  static constexpr int kElems = Vec<T>::kW / 2;
  static constexpr unsigned kEven = std::is_same_v<T, float> ? 0x55u : 0x5u;
};

// o[k] = f(a[k] (, b[k])) for the strip elements among the vector at storage offset k
// that mask m selects. A function, not a lambda: a lambda does not take the caller's
// target attribute, and the masked intrinsics would not inline into it.
template <typename T, int N, bool AS, bool BS, typename F>
__attribute__((target("avx512f,avx512vl"), always_inline)) inline void stride2_vec(
    T* o, const T* a, const T* b, int64_t k, unsigned m, typename Stride2<T>::V va, typename Stride2<T>::V vb,
    const F& f) {
  using S = Stride2<T>;
  if constexpr (N == 1) S::masked_store(o + k, m, f(AS ? va : S::masked_load(a + k, m)));
  else S::masked_store(o + k, m, f(AS ? va : S::masked_load(a + k, m), BS ? vb : S::masked_load(b + k, m)));
}

// o[2j] = f(a[2j] (, b[2j])) for j < n, operands at stride 2 (AS / BS: a stride-0
// scalar); N: 1 (unary, b unused) or 2. The last vector's mask is cut to the strip's end.
template <typename T, int N, bool AS, bool BS, typename F>
__attribute__((target("avx512f,avx512vl"))) void stride2_loop(T* o, const T* a, const T* b, int64_t n, const F& f) {
  using S = Stride2<T>;
  constexpr int64_t E = S::kElems;
  // the converting set1, not the lane type's exact overload: with it GCC laid out this
  // loop's tail differently (Note [Row-kernel lanes])
  const typename S::V va = Vec<T>::template set1<T>(a[0]), vb = Vec<T>::template set1<T>(N == 2 ? b[0] : T(0));
  int64_t j = 0;
#pragma GCC unroll 4  // Note [Unrolled vector loops]
  for (; j + E <= n; j += E) stride2_vec<T, N, AS, BS>(o, a, b, 2 * j, S::kEven, va, vb, f);
  if (j < n)  // 1 .. E - 1 elements left, in lanes 0, 2, ...
    stride2_vec<T, N, AS, BS>(o, a, b, 2 * j, S::kEven & ((1u << (2 * (n - j))) - 1), va, vb, f);
}

// Note [Gathered stride-2 inputs]
// A dense output whose strided inputs all have stride 2 (add out= or relu out= of
// x[..., ::2], the other operand dense or a scalar) skips the pack buffer of Note
// [Packed strided inputs] too: one k-masked zmm load takes 8 floats from the even lanes
// of 16 and a down-conversion (vpmovqd, the low half of each 64-bit lane) packs them
// into one ymm (doubles: two ymm loads, an unpack and a permute); the dense vector op
// and store follow in the same loop, with no store to and reload from an L1 buffer. The
// masks keep every load inside the strip: the last even element is the last one read
// (docs/notes/elementwise.md, stride-2 inputs).
enum class Operand { Scalar, Dense, Two };  // stride 0, stride 1, stride 2 (elements)

template <typename T, Operand K>
__attribute__((target("avx512f,avx512vl"), always_inline)) inline typename Vec<T>::V gather2_operand(
    const T* p, int64_t j, int r, typename Vec<T>::V scalar) {
  if constexpr (K == Operand::Scalar) return scalar;
  else if constexpr (K == Operand::Dense) return Vec<T>::masked_load(p + j, (1u << r) - 1);
  else return Vec<T>::gather_even(p + 2 * j, r);
}

// f at elements j .. j + r - 1 of a (and b), r <= W. A function, not a
// lambda, for the reason stride2_vec gives.
template <typename T, int N, Operand KA, Operand KB, typename F>
__attribute__((target("avx512f,avx512vl"), always_inline)) inline typename Vec<T>::V gather2_vec(
    const T* a, const T* b, int64_t j, int r, typename Vec<T>::V va, typename Vec<T>::V vb,
    const F& f) {
  if constexpr (N == 1) return f(gather2_operand<T, KA>(a, j, r, va));
  else return f(gather2_operand<T, KA>(a, j, r, va), gather2_operand<T, KB>(b, j, r, vb));
}

// The first r (< W) lanes of v to o: a masked store, or (NT) streamed element by element.
template <typename T, bool NT>
__attribute__((target("avx512f,avx512vl"), always_inline)) inline void gather2_part(T* o, int r, typename Vec<T>::V v) {
  if constexpr (NT) {
    alignas(32) T t[Vec<T>::kW];
    Vec<T>::store(t, v);
    put_part<T, true>(o, t, r);
  } else {
    Vec<T>::masked_store(o, (1u << r) - 1, v);
  }
}

// o[j] = f(a[j * KA] (, b[j * KB])) for j < n, o dense; N: 1 (unary, b unused) or 2;
// NT: streaming stores (Note [Streaming elementwise outputs]), the elements before the
// first aligned vector and the tail streamed one by one (Note [Streaming strips]).
template <typename T, int N, Operand KA, Operand KB, bool NT, typename F>
__attribute__((target("avx512f,avx512vl"))) void gather2_loop(T* o, const T* a, const T* b, int64_t n, const F& f) {
  using M = Vec<T>;
  constexpr int64_t W = M::kW;
  const typename M::V va = Vec<T>::set1(a[0]), vb = Vec<T>::set1(N == 2 ? b[0] : T(0));
  int64_t j = 0;
  if constexpr (NT) {
    j = head_to_align(o, Vec<T>::kStreamAlign, n);
    if (j) gather2_part<T, NT>(o, static_cast<int>(j), gather2_vec<T, N, KA, KB>(a, b, 0, static_cast<int>(j), va, vb, f));
#pragma GCC unroll 4  // Note [Unrolled vector loops]
    for (; j + W <= n; j += W) Vec<T>::stream(o + j, gather2_vec<T, N, KA, KB>(a, b, j, W, va, vb, f));
  } else {
#pragma GCC unroll 4  // Note [Unrolled vector loops]
    for (; j + W <= n; j += W) Vec<T>::store(o + j, gather2_vec<T, N, KA, KB>(a, b, j, W, va, vb, f));
  }
  if (j < n) {  // 1 .. W - 1 elements left
    const int r = static_cast<int>(n - j);
    gather2_part<T, NT>(o + j, r, gather2_vec<T, N, KA, KB>(a, b, j, r, va, vb, f));
  }
}

// gather2_loop with NT chosen at run time.
template <typename T, int N, Operand KA, Operand KB, typename F>
void gather2(bool nt, T* o, const T* a, const T* b, int64_t n, const F& f) {
  nt ? gather2_loop<T, N, KA, KB, true>(o, a, b, n, f) : gather2_loop<T, N, KA, KB, false>(o, a, b, n, f);
}
#endif

// Note [Transposed row blocks]
// A row block (Note [Row blocks]: `rows` strips of n elements, element (r, j) of
// operand i at p[i] + r * s1[i] + j * s[i]) may hold an input that runs along the rows
// rather than along the strips: s1[i] is one element and s[i] is wider (a transposed,
// permuted or stepped-and-transposed input, or the dense inputs of a transposed
// output). The iterator hands cache-resident tiles over this way (StridedIter's Tiled
// path when nothing is prefetched), unstaged. For float32 and float64 on the vector
// path, across_block transposes such inputs in registers, W rows at a time (W x W:
// 8x8 floats, 4x4 doubles, core/transpose_tile.h), straight into the op and W dense
// row stores: no tile buffer, so each element is read and written once. Staging the
// whole tile into a buffer first (the old cache-resident path) read and wrote every
// element of that input a second time and ran at 0.6x the contiguous rate; this form
// runs at 0.8-0.9x (a bare loop of it at 1.0x; docs/notes/elementwise.md). A column
// broadcast (x + c with c of [R, 1]: s = 0 along the strips, one element across them)
// takes the same path: each W rows' values are one vector load, transposed into W
// broadcasts, faster on rows of 8 floats than a call per row (docs/notes/elementwise.md). Other cases
// (float16, int32, the scalar path, rows wider than one element, streamed outputs) are
// staged into L1 buffers by row_block (staged_rows in elementwise.cpp).
enum class Across : uint8_t { Dense, Scalar, Rows };  // an input of a row block: s = 1, s = s1 = 0, s1 = 1 element

// Keeps q in one register stepped by an add per row: without it GCC hoists one
// pointer per row out of the column loop (W per operand), more than there are
// registers, and reloads them from the stack on every step.
template <typename P>
__attribute__((always_inline)) inline void opaque(P*& q) {
  asm("" : "+r"(q));
}

template <typename T>
__attribute__((always_inline)) inline void transpose_w(typename Vec<T>::V (&v)[Vec<T>::kW]) {
  if constexpr (std::is_same_v<T, float>) {
    detail::transpose8(v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]);
  } else {
    detail::transpose4(v[0], v[1], v[2], v[3]);
  }
}

// Element (r, j) of an input is at p + r * s1 + j * s. A Rows input's W x W block at
// column j: W vector loads along the rows, transposed (v[r]: row r's elements j ..
// j + W - 1).
template <typename T>
__attribute__((always_inline)) inline void rows_block(typename Vec<T>::V (&v)[Vec<T>::kW], const char* p, int64_t s,
                                                      int64_t j) {
  const char* q = p + j * s;
  for (int k = 0; k < Vec<T>::kW; ++k, q += s) v[k] = Vec<T>::load(reinterpret_cast<const T*>(q));
  transpose_w<T>(v);
}

// Row r's vector at column j of a Dense input (q: row r, column 0) or a Scalar one (v:
// its value), or of a Rows input (t: its transposed block).
template <typename T, Across K>
__attribute__((always_inline)) inline typename Vec<T>::V across_vec(const char* q, int64_t j, typename Vec<T>::V v,
                                                                    const typename Vec<T>::V (&t)[Vec<T>::kW], int r) {
  if constexpr (K == Across::Rows) return t[r];
  else if constexpr (K == Across::Dense) return Vec<T>::load(reinterpret_cast<const T*>(q) + j);
  else return v;
}

// W rows of a row block, the output dense along them; N: 2 (unary) or 3 (binary). The
// Dense inputs are loaded where they are used (with the W transposed vectors live, no
// more ymm registers are left), and every pointer is stepped from row to row by
// opaque() adds. The W results go into the transposed vectors, all of them before the
// first store: stored row by row, each store came before the next row's load of a
// Dense input at the same address modulo 4 KiB wherever rows lie a multiple of 4 KiB
// apart and out and that input are aligned alike (an NHWC operand into an NCHW out),
// and each such load waited on the store (4K aliasing; docs/notes/elementwise.md).
template <typename T, int N, Across KA, Across KB, typename F>
__attribute__((always_inline)) inline void across_rows(char* const* p, const int64_t* s, const int64_t* s1, int64_t n,
                                                       const F& f) {
  using L = Vec<T>;
  constexpr int W = L::kW;
  constexpr int64_t es = sizeof(T);
  char* const o = p[0];
  const char* const a = p[1];
  const char* const b = N == 3 ? p[2] : p[1];
  const int64_t o1 = s1[0], as = s[1], a1 = s1[1], bs = N == 3 ? s[2] : 0, b1 = N == 3 ? s1[2] : 0;
  const typename L::V sa = L::set1(*reinterpret_cast<const T*>(a)), sb = L::set1(*reinterpret_cast<const T*>(b));
  int64_t j = 0;
  for (; j + W <= n; j += W) {
    typename L::V ta[W], tb[W];
    if constexpr (KA == Across::Rows) rows_block<T>(ta, a, as, j);
    if constexpr (N == 3 && KB == Across::Rows) rows_block<T>(tb, b, bs, j);
    typename L::V(&y)[W] = KA == Across::Rows ? ta : tb;  // the results, in a Rows input's registers
    const char* qa = a;
    const char* qb = b;
    for (int r = 0; r < W; ++r) {
      const typename L::V x = across_vec<T, KA>(qa, j, sa, ta, r);
      if constexpr (N == 3) y[r] = f(x, across_vec<T, KB>(qb, j, sb, tb, r));
      else y[r] = f(x);
      if constexpr (KA == Across::Dense) {
        qa += a1;
        opaque(qa);
      }
      if constexpr (KB == Across::Dense) {
        qb += b1;
        opaque(qb);
      }
    }
    char* q = o + j * es;
    for (int r = 0; r < W; ++r) {
      L::store(reinterpret_cast<T*>(q), y[r]);
      q += o1;
      opaque(q);
    }
  }
  for (; j < n; ++j)  // the last n % W columns
    for (int r = 0; r < W; ++r) {
      const T x = *reinterpret_cast<const T*>(a + r * a1 + j * as);
      T* y = reinterpret_cast<T*>(o + r * o1 + j * es);
      if constexpr (N == 3) *y = f(x, *reinterpret_cast<const T*>(b + r * b1 + j * bs));
      else *y = f(x);
    }
}

// Note [Transposed row blocks]: the rows of the block done here (a multiple of W), 0
// where the fused form does not apply (the caller stages instead).
template <typename T, int N, typename F>
__attribute__((noinline)) int64_t across_block(char* const* p, const int64_t* s, int64_t n, int64_t rows,
                                               const int64_t* s1, const F& f) {
  constexpr int64_t es = sizeof(T);
  constexpr int W = Vec<T>::kW;
  if (s[0] != es || rows < W) return 0;
  Across k[3] = {Across::Dense, Across::Dense, Across::Dense};
  bool any = false;
  for (int i = 1; i < N; ++i) {
    if (s[i] == es) {
      k[i] = Across::Dense;
    } else if (s[i] == 0 && s1[i] == 0) {
      k[i] = Across::Scalar;
    } else if (s1[i] == es && s[i] % es == 0) {
      k[i] = Across::Rows;
      any = true;
    } else {
      return 0;
    }
  }
  if (!any) return 0;
  const int64_t done = rows / W * W;
  const auto each_group = [&](auto rows_fn) {
    char* q[N];
    for (int i = 0; i < N; ++i) q[i] = p[i];
    for (int64_t r = 0; r < done; r += W) {
      rows_fn(static_cast<char* const*>(q));
      for (int i = 0; i < N; ++i) q[i] += W * s1[i];
    }
    return done;
  };
  using A = Across;
  if constexpr (N == 2) {
    return each_group([&](char* const* q) { across_rows<T, 2, A::Rows, A::Rows>(q, s, s1, n, f); });
  } else {
    if (k[1] == A::Rows && k[2] == A::Dense)
      return each_group([&](char* const* q) { across_rows<T, 3, A::Rows, A::Dense>(q, s, s1, n, f); });
    if (k[1] == A::Dense && k[2] == A::Rows)
      return each_group([&](char* const* q) { across_rows<T, 3, A::Dense, A::Rows>(q, s, s1, n, f); });
    if (k[1] == A::Rows && k[2] == A::Rows)
      return each_group([&](char* const* q) { across_rows<T, 3, A::Rows, A::Rows>(q, s, s1, n, f); });
    if (k[1] == A::Rows && k[2] == A::Scalar)
      return each_group([&](char* const* q) { across_rows<T, 3, A::Rows, A::Scalar>(q, s, s1, n, f); });
    return each_group([&](char* const* q) { across_rows<T, 3, A::Scalar, A::Rows>(q, s, s1, n, f); });
  }
}

// An operand of a chunk [j0, j0 + m): dense or stride-0 as is, else packed into buf.
template <typename T>
const T* chunk_operand(T* buf, const char* p, int64_t stride_bytes, int64_t j0, int64_t m) {
  if (stride_bytes == static_cast<int64_t>(sizeof(T))) return reinterpret_cast<const T*>(p) + j0;
  if (stride_bytes == 0) return reinterpret_cast<const T*>(p);
  pack_strided(buf, p + j0 * stride_bytes, stride_bytes, m);
  return buf;
}
#endif

template <typename T>
inline const T& at(const char* p, int64_t j, int64_t stride_bytes) {
  return *reinterpret_cast<const T*>(p + j * stride_bytes);
}

// out = f(a, b) over one strip of the iterator.
template <typename T, typename F>
void binary_strip(bool avx, bool nt, char* const* p, const int64_t* s, int64_t n, const F& f) {
  using A = acc_t<T>;
  constexpr int64_t es = sizeof(T);
  T* o = reinterpret_cast<T*>(p[0]);
  const T* a = reinterpret_cast<const T*>(p[1]);
  const T* b = reinterpret_cast<const T*>(p[2]);
#ifdef SB_HAVE_AVX2
  if constexpr (kHasVec<T>) {
    if (avx && s[0] == es) {
      if (s[1] == es && s[2] == es)
        return nt ? binary_vloop<T, false, false, true>(o, a, b, n, f) : binary_vloop<T, false, false>(o, a, b, n, f);
      if (s[1] == es && s[2] == 0)
        return nt ? binary_vloop<T, false, true, true>(o, a, b, n, f) : binary_vloop<T, false, true>(o, a, b, n, f);
      if (s[1] == 0 && s[2] == es)
        return nt ? binary_vloop<T, true, false, true>(o, a, b, n, f) : binary_vloop<T, true, false>(o, a, b, n, f);
#ifdef SB_HAVE_AVX512
      if constexpr (!kIs16Bit<T>)
        if ((s[1] == 2 * es || s[2] == 2 * es) && (s[1] == 0 || s[1] == es || s[1] == 2 * es) &&
            (s[2] == 0 || s[2] == es || s[2] == 2 * es) && use_avx512()) {
          // Note [Gathered stride-2 inputs]
          constexpr Operand D = Operand::Dense, Z = Operand::Scalar, W2 = Operand::Two;
          if (s[1] != 2 * es) return s[1] == 0 ? gather2<T, 2, Z, W2>(nt, o, a, b, n, f) : gather2<T, 2, D, W2>(nt, o, a, b, n, f);
          if (s[2] != 2 * es) return s[2] == 0 ? gather2<T, 2, W2, Z>(nt, o, a, b, n, f) : gather2<T, 2, W2, D>(nt, o, a, b, n, f);
          return gather2<T, 2, W2, W2>(nt, o, a, b, n, f);
        }
#endif
      if (s[1] != 0 || s[2] != 0) {  // a strided input: Note [Packed strided inputs]
        T ba[kPackChunk], bb[kPackChunk];
        for (int64_t j0 = 0; j0 < n; j0 += kPackChunk) {
          const int64_t m = std::min(kPackChunk, n - j0);
          const T* ca = chunk_operand(ba, p[1], s[1], j0, m);
          const T* cb = chunk_operand(bb, p[2], s[2], j0, m);
          if (s[1] == 0) binary_vloop<T, true, false>(o + j0, ca, cb, m, f);
          else if (s[2] == 0) binary_vloop<T, false, true>(o + j0, ca, cb, m, f);
          else binary_vloop<T, false, false>(o + j0, ca, cb, m, f);
        }
        return;
      }
    }
#ifdef SB_HAVE_AVX512
    if constexpr (!kIs16Bit<T>)
      if (avx && s[0] == 2 * es && (s[1] == 2 * es || s[1] == 0) && (s[2] == 2 * es || s[2] == 0) && use_avx512()) {
        // Note [Stride-2 strips]: each operand is a scalar (stride 0) or a stride-2 run
        if (s[1] == 0 && s[2] == 0) return stride2_loop<T, 2, true, true>(o, a, b, n, f);
        if (s[1] == 0) return stride2_loop<T, 2, true, false>(o, a, b, n, f);
        if (s[2] == 0) return stride2_loop<T, 2, false, true>(o, a, b, n, f);
        return stride2_loop<T, 2, false, false>(o, a, b, n, f);
      }
#endif
    if (avx && s[0] != 0) {  // a strided output: compute a chunk into bo, then store it
      T ba[kPackChunk], bb[kPackChunk], bo[kPackChunk];
      for (int64_t j0 = 0; j0 < n; j0 += kPackChunk) {
        const int64_t m = std::min(kPackChunk, n - j0);
        const T* ca = chunk_operand(ba, p[1], s[1], j0, m);
        const T* cb = chunk_operand(bb, p[2], s[2], j0, m);
        if (s[1] == 0 && s[2] == 0) binary_vloop<T, true, true>(bo, ca, cb, m, f);
        else if (s[1] == 0) binary_vloop<T, true, false>(bo, ca, cb, m, f);
        else if (s[2] == 0) binary_vloop<T, false, true>(bo, ca, cb, m, f);
        else binary_vloop<T, false, false>(bo, ca, cb, m, f);
        unpack_strided(p[0] + j0 * s[0], s[0], bo, m);
      }
      return;
    }
  }
#else
  (void)avx;
#endif
  (void)nt;  // the scalar loops store plainly
  if (s[0] == es && s[1] == es && s[2] == es) {
    for (int64_t j = 0; j < n; ++j) o[j] = T(f(A(a[j]), A(b[j])));
  } else if (s[0] == es && s[1] == es && s[2] == 0) {
    const A bv = A(b[0]);
    for (int64_t j = 0; j < n; ++j) o[j] = T(f(A(a[j]), bv));
  } else {
    for (int64_t j = 0; j < n; ++j)
      *reinterpret_cast<T*>(p[0] + j * s[0]) = T(f(A(at<T>(p[1], j, s[1])), A(at<T>(p[2], j, s[2]))));
  }
}

// out = f(a) over one strip.
template <typename T, typename F>
void unary_strip(bool avx, bool nt, char* const* p, const int64_t* s, int64_t n, const F& f) {
  using A = acc_t<T>;
  constexpr int64_t es = sizeof(T);
  T* o = reinterpret_cast<T*>(p[0]);
  const T* a = reinterpret_cast<const T*>(p[1]);
#ifdef SB_HAVE_AVX2
  if constexpr (kHasVec<T>) {
    if (avx && s[0] == es) {
      if (s[1] == es) return nt ? unary_vloop<T, false, true>(o, a, n, f) : unary_vloop<T, false>(o, a, n, f);
      if (s[1] == 0) return nt ? unary_vloop<T, true, true>(o, a, n, f) : unary_vloop<T, true>(o, a, n, f);
#ifdef SB_HAVE_AVX512
      if constexpr (!kIs16Bit<T>)
        if (s[1] == 2 * es && use_avx512())  // Note [Gathered stride-2 inputs]
          return gather2<T, 1, Operand::Two, Operand::Two>(nt, o, a, a, n, f);
#endif
      T ba[kPackChunk];  // a strided input: Note [Packed strided inputs]
      for (int64_t j0 = 0; j0 < n; j0 += kPackChunk) {
        const int64_t m = std::min(kPackChunk, n - j0);
        unary_vloop<T, false>(o + j0, chunk_operand(ba, p[1], s[1], j0, m), m, f);
      }
      return;
    }
#ifdef SB_HAVE_AVX512
    if constexpr (!kIs16Bit<T>)
      if (avx && s[0] == 2 * es && (s[1] == 2 * es || s[1] == 0) && use_avx512()) {
        // Note [Stride-2 strips]
        return s[1] == 0 ? stride2_loop<T, 1, true, false>(o, a, a, n, f) : stride2_loop<T, 1, false, false>(o, a, a, n, f);
      }
#endif
    if (avx && s[0] != 0) {  // a strided output: compute a chunk into bo, then store it
      T ba[kPackChunk], bo[kPackChunk];
      for (int64_t j0 = 0; j0 < n; j0 += kPackChunk) {
        const int64_t m = std::min(kPackChunk, n - j0);
        if (s[1] == 0) unary_vloop<T, true>(bo, reinterpret_cast<const T*>(p[1]), m, f);
        else unary_vloop<T, false>(bo, chunk_operand(ba, p[1], s[1], j0, m), m, f);
        unpack_strided(p[0] + j0 * s[0], s[0], bo, m);
      }
      return;
    }
  }
#else
  (void)avx;
#endif
  (void)nt;
  if (s[0] == es && s[1] == es) {
    for (int64_t j = 0; j < n; ++j) o[j] = T(f(A(a[j])));
  } else {
    for (int64_t j = 0; j < n; ++j) *reinterpret_cast<T*>(p[0] + j * s[0]) = T(f(A(at<T>(p[1], j, s[1]))));
  }
}

// ---------------------------------------------------------------- shared checks (elementwise.cpp)

// Whether the last elementwise call streamed its output (last_elementwise_used_nt());
// normalize's strips store true when they streamed (Note [Streaming normalize outputs]).
extern std::atomic<bool> g_last_nt;

// dtype is one the elementwise ops compute on (floating_only: a floating one).
void check_dtype(const char* name, DType dt, bool floating_only);
// out against the result's sizes, dtype, device and the overlap rules; true when an
// input's overlap with out is undecided (the caller computes from copies).
bool check_out(const char* name, const Tensor& out, const Shape& sizes, DType dt, Device dev,
               const std::vector<const Tensor*>& inputs);
[[noreturn]] void no_cuda(const char* name, Device d);
// Note [Streaming elementwise outputs]: the call-wide rule.
bool may_stream(bool avx, const Tensor& out, std::initializer_list<const Tensor*> ins);
// The output of an op over `inputs` (already of `sizes`), laid out as PyTorch lays it.
Tensor new_output(const Shape& sizes, std::initializer_list<const Tensor*> inputs);

}  // namespace sb::ew
