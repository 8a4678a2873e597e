// elementwise.cpp — binary, unary and normalize ops (CPU), in three styles, on the shared
// strided iterator (lib/ops/iterator.h); CUDA tensors go to lib/cuda after the same checks.
//
// Each public op: checks (one per precondition, before any work) -> broadcast inputs
// with expand() -> allocate the output (out-of-place: PyTorch's layout rule,
// output_strides_like) -> StridedIter -> a 1-D strip kernel per (op, dtype).
// Strip kernels: AVX2+FMA(+F16C for float16) when sb::use_avx2() and the output strip is
// dense (stride == element size), strided inputs packed into L1 chunks first (Note
// [Packed strided inputs]); a scalar loop otherwise, always compiled. float16 is stored as half and computed in float32.
// exp: float32/float16 AVX2 uses a Cephes-style polynomial with range reduction
// (<= 2 ulp, tests/elementwise_test.cpp checks every 997th float in [-104, 89]); the
// scalar path and float64 call std::exp per element (about 5-10 ns each: compute-bound,
// several times slower than memory for large tensors).
// Cost: one read per input element, one write per output element; normalize reads x
// three times per dense row (twice from L1/L2) or twice per strided row (an outer dim),
// and writes once.
#include "ops/elementwise.h"
#include "ops/test_hooks.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "core/cpu_features.h"
#include "ops/copy.h"
#include "ops/iterator.h"
#include "ops/transpose_tile.h"

#ifdef SB_HAVE_AVX2
#include <immintrin.h>
#endif
#ifdef SB_WITH_CUDA
#include "cuda/cuda_backend.h"
#endif

namespace sb {

const char* binary_op_name(BinaryOp op) {
  switch (op) {
    case BinaryOp::Add: return "add";
    case BinaryOp::Sub: return "sub";
    case BinaryOp::Mul: return "mul";
    case BinaryOp::Div: return "div";
    case BinaryOp::Maximum: return "maximum";
    case BinaryOp::Minimum: return "minimum";
  }
  return "?";
}

const char* unary_op_name(UnaryOp op) {
  switch (op) {
    case UnaryOp::Neg: return "neg";
    case UnaryOp::Abs: return "abs";
    case UnaryOp::Relu: return "relu";
    case UnaryOp::Exp: return "exp";
    case UnaryOp::Sqrt: return "sqrt";
  }
  return "?";
}

namespace {

// ---------------------------------------------------------------- element ops

template <typename T> struct AccOf { using type = T; };
template <> struct AccOf<Half> { using type = float; };
template <typename T> using acc_t = typename AccOf<T>::type;

// int32 add/sub/mul/neg wrap around (two's complement), as PyTorch's do in practice.
inline int32_t wrap(uint32_t v) { return static_cast<int32_t>(v); }

template <BinaryOp OP>
struct Bin {
  template <typename A>
  A operator()(A x, A y) const {
    if constexpr (std::is_same_v<A, int32_t>) {
      const auto ux = static_cast<uint32_t>(x), uy = static_cast<uint32_t>(y);
      if constexpr (OP == BinaryOp::Add) return wrap(ux + uy);
      if constexpr (OP == BinaryOp::Sub) return wrap(ux - uy);
      if constexpr (OP == BinaryOp::Mul) return wrap(ux * uy);
      if constexpr (OP == BinaryOp::Div) return 0;  // rejected before any kernel runs
    } else {
      if constexpr (OP == BinaryOp::Add) return x + y;
      if constexpr (OP == BinaryOp::Sub) return x - y;
      if constexpr (OP == BinaryOp::Mul) return x * y;
      if constexpr (OP == BinaryOp::Div) return x / y;
      // NaN propagates (PyTorch); otherwise the same choice as vmaxps/vminps
      if constexpr (OP == BinaryOp::Maximum) return x != x ? x : y != y ? y : (x > y ? x : y);
      if constexpr (OP == BinaryOp::Minimum) return x != x ? x : y != y ? y : (x < y ? x : y);
    }
    if constexpr (OP == BinaryOp::Maximum) return x > y ? x : y;
    if constexpr (OP == BinaryOp::Minimum) return x < y ? x : y;
    return x;
  }
#ifdef SB_HAVE_AVX2
  __m256 operator()(__m256 x, __m256 y) const {
    if constexpr (OP == BinaryOp::Add) return _mm256_add_ps(x, y);
    if constexpr (OP == BinaryOp::Sub) return _mm256_sub_ps(x, y);
    if constexpr (OP == BinaryOp::Mul) return _mm256_mul_ps(x, y);
    if constexpr (OP == BinaryOp::Div) return _mm256_div_ps(x, y);
    if constexpr (OP == BinaryOp::Maximum)
      return _mm256_blendv_ps(_mm256_max_ps(x, y), _mm256_add_ps(x, y), _mm256_cmp_ps(x, y, _CMP_UNORD_Q));
    if constexpr (OP == BinaryOp::Minimum)
      return _mm256_blendv_ps(_mm256_min_ps(x, y), _mm256_add_ps(x, y), _mm256_cmp_ps(x, y, _CMP_UNORD_Q));
    return x;
  }
  __m256d operator()(__m256d x, __m256d y) const {
    if constexpr (OP == BinaryOp::Add) return _mm256_add_pd(x, y);
    if constexpr (OP == BinaryOp::Sub) return _mm256_sub_pd(x, y);
    if constexpr (OP == BinaryOp::Mul) return _mm256_mul_pd(x, y);
    if constexpr (OP == BinaryOp::Div) return _mm256_div_pd(x, y);
    if constexpr (OP == BinaryOp::Maximum)
      return _mm256_blendv_pd(_mm256_max_pd(x, y), _mm256_add_pd(x, y), _mm256_cmp_pd(x, y, _CMP_UNORD_Q));
    if constexpr (OP == BinaryOp::Minimum)
      return _mm256_blendv_pd(_mm256_min_pd(x, y), _mm256_add_pd(x, y), _mm256_cmp_pd(x, y, _CMP_UNORD_Q));
    return x;
  }
#endif
};

// x OP s with the scalar s fixed (tensor-scalar ops).
template <BinaryOp OP, typename A>
struct BinScalar {
  A s;
  A operator()(A x) const { return Bin<OP>{}(x, s); }
#ifdef SB_HAVE_AVX2
  __m256 operator()(__m256 x) const { return Bin<OP>{}(x, _mm256_set1_ps(static_cast<float>(s))); }
  __m256d operator()(__m256d x) const { return Bin<OP>{}(x, _mm256_set1_pd(static_cast<double>(s))); }
#endif
};

#ifdef SB_HAVE_AVX2
// exp(x) for 8 floats: n = round(x / ln2), r = x - n ln2 (two-constant Cody-Waite),
// e^r by Cephes' degree-7 polynomial (FMA), times 2^n built in two halves so that
// results down to the smallest subnormal round once. Max error about 1-2 ulp.
inline __m256 exp8(__m256 x) {
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
  y = _mm256_blendv_ps(y, _mm256_set1_ps(std::numeric_limits<float>::infinity()), _mm256_cmp_ps(x, hi, _CMP_GT_OQ));
  y = _mm256_blendv_ps(y, _mm256_setzero_ps(), _mm256_cmp_ps(x, lo, _CMP_LT_OQ));
  return _mm256_blendv_ps(y, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));  // NaN in, NaN out
}
#endif

template <UnaryOp OP>
struct Un {
  template <typename A>
  A operator()(A x) const {
    if constexpr (std::is_same_v<A, int32_t>) {
      if constexpr (OP == UnaryOp::Neg) return wrap(0u - static_cast<uint32_t>(x));
      if constexpr (OP == UnaryOp::Abs) return x < 0 ? wrap(0u - static_cast<uint32_t>(x)) : x;
      if constexpr (OP == UnaryOp::Relu) return x < 0 ? 0 : x;
      return x;  // exp/sqrt rejected before any kernel runs
    } else {
      if constexpr (OP == UnaryOp::Neg) return -x;
      if constexpr (OP == UnaryOp::Abs) return std::fabs(x);
      if constexpr (OP == UnaryOp::Relu) return x < 0 ? A(0) : x;  // NaN stays NaN, as PyTorch
      if constexpr (OP == UnaryOp::Exp) return std::exp(x);
      if constexpr (OP == UnaryOp::Sqrt) return std::sqrt(x);
    }
    return x;
  }
#ifdef SB_HAVE_AVX2
  __m256 operator()(__m256 x) const {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    if constexpr (OP == UnaryOp::Neg) return _mm256_xor_ps(x, sign);
    if constexpr (OP == UnaryOp::Abs) return _mm256_andnot_ps(sign, x);
    if constexpr (OP == UnaryOp::Relu) return _mm256_max_ps(_mm256_setzero_ps(), x);  // NaN: returns x
    if constexpr (OP == UnaryOp::Exp) return exp8(x);
    if constexpr (OP == UnaryOp::Sqrt) return _mm256_sqrt_ps(x);
    return x;
  }
  __m256d operator()(__m256d x) const {
    const __m256d sign = _mm256_set1_pd(-0.0);
    if constexpr (OP == UnaryOp::Neg) return _mm256_xor_pd(x, sign);
    if constexpr (OP == UnaryOp::Abs) return _mm256_andnot_pd(sign, x);
    if constexpr (OP == UnaryOp::Relu) return _mm256_max_pd(_mm256_setzero_pd(), x);
    if constexpr (OP == UnaryOp::Sqrt) return _mm256_sqrt_pd(x);
    if constexpr (OP == UnaryOp::Exp) {  // float64 exp: std::exp per lane
      alignas(32) double v[4];
      _mm256_store_pd(v, x);
      for (double& e : v) e = std::exp(e);
      return _mm256_load_pd(v);
    }
    return x;
  }
#endif
};

// ---------------------------------------------------------------- vector I/O

template <typename T> constexpr bool kHasVec = std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, Half>;

#ifdef SB_HAVE_AVX2
template <typename T> struct VecIO;
// load_part's masks: 8 - m int32 lanes off the end of the ones (m doubles: 2m lanes).
alignas(64) constexpr int32_t kPartMask[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
template <> struct VecIO<float> {
  using V = __m256;
  static constexpr int kW = 8;
  static V load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, V v) { _mm256_storeu_ps(p, v); }
  static constexpr int kStreamAlign = 32;  // bytes: stream() needs p aligned so
  static void stream(float* p, V v) { _mm256_stream_ps(p, v); }
  static V set1(float v) { return _mm256_set1_ps(v); }
  static V load_part(const float* p, int m) {  // p[0 .. m), m < kW; the other lanes 0
    return _mm256_maskload_ps(p, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kPartMask + 8 - m)));
  }
};
template <> struct VecIO<double> {
  using V = __m256d;
  static constexpr int kW = 4;
  static V load(const double* p) { return _mm256_loadu_pd(p); }
  static void store(double* p, V v) { _mm256_storeu_pd(p, v); }
  static constexpr int kStreamAlign = 32;
  static void stream(double* p, V v) { _mm256_stream_pd(p, v); }
  static V set1(double v) { return _mm256_set1_pd(v); }
  static V load_part(const double* p, int m) {
    return _mm256_maskload_pd(p, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kPartMask + 8 - 2 * m)));
  }
};
template <> struct VecIO<Half> {  // F16C: 8 halves <-> 8 floats, round to nearest even
  using V = __m256;
  static constexpr int kW = 8;
  static V load(const Half* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
  static void store(Half* p, V v) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
  }
  static constexpr int kStreamAlign = 16;
  static void stream(Half* p, V v) {
    _mm_stream_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
  }
  static V set1(Half v) { return _mm256_set1_ps(static_cast<float>(v)); }
};

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
// stream slower than plain stores (docs/notes/elementwise.md), so those keep plain stores.
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
// write (Note [Streaming strips]). Half has no 16-bit movnti and
// stores plainly.
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

// The first m (< W) elements of p as a vector, the other lanes unspecified but harmless
// (0 from a masked load for float and double; a copy of p[0] for Half, whose 16-bit
// elements have no masked load): never read past p[m - 1].
template <typename T>
inline typename VecIO<T>::V load_part(const T* p, int64_t m) {
  if constexpr (std::is_same_v<T, Half>) {
    T t[VecIO<T>::kW];
    for (int k = 0; k < VecIO<T>::kW; ++k) t[k] = p[k < m ? k : 0];
    return VecIO<T>::load(t);
  } else {
    return VecIO<T>::load_part(p, static_cast<int>(m));
  }
}

// o[j] = f(a[j], b[j]) for j in [j0, j0 + m), m < W: masked loads, one vector op, a
// short copy out (put_part). Not a W-wide buffer filled element by element and loaded
// as a vector: that is a store-forwarding stall per strip, which cost short rows half
// their time (docs/notes/elementwise.md).
template <typename T, bool AS, bool BS, bool NT = false, typename F>
void part2(T* o, const T* a, const T* b, int64_t j0, int64_t m, const F& f) {
  using IO = VecIO<T>;
  alignas(32) T to[IO::kW];
  IO::store(to, f(AS ? IO::set1(a[0]) : load_part(a + j0, m), BS ? IO::set1(b[0]) : load_part(b + j0, m)));
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
void vloop2(T* o, const T* a, const T* b, int64_t n, const F& f) {
  using IO = VecIO<T>;
  constexpr int W = IO::kW;
  const typename IO::V va = IO::set1(a[0]), vb = IO::set1(b[0]);
  int64_t j = 0;
  if constexpr (NT) {
    j = head_to_align(o, IO::kStreamAlign, n);
    if (j) part2<T, AS, BS, NT>(o, a, b, 0, j, f);
#pragma GCC unroll 4  // Note [Unrolled vector loops]
    for (; j + W <= n; j += W) IO::stream(o + j, f(AS ? va : IO::load(a + j), BS ? vb : IO::load(b + j)));
  } else {
#pragma GCC unroll 4  // Note [Unrolled vector loops]
    for (; j + W <= n; j += W) IO::store(o + j, f(AS ? va : IO::load(a + j), BS ? vb : IO::load(b + j)));
  }
  if (j < n) part2<T, AS, BS, NT>(o, a, b, j, n - j, f);
}

template <typename T, bool AS, bool NT = false, typename F>
void part1(T* o, const T* a, int64_t j0, int64_t m, const F& f) {
  using IO = VecIO<T>;
  alignas(32) T to[IO::kW];
  IO::store(to, f(AS ? IO::set1(a[0]) : load_part(a + j0, m)));
  put_part<T, NT>(o + j0, to, m);
}

template <typename T, bool AS, bool NT = false, typename F>
void vloop1(T* o, const T* a, int64_t n, const F& f) {
  using IO = VecIO<T>;
  constexpr int W = IO::kW;
  const typename IO::V va = IO::set1(a[0]);
  int64_t j = 0;
  if constexpr (NT) {
    j = head_to_align(o, IO::kStreamAlign, n);
    if (j) part1<T, AS, NT>(o, a, 0, j, f);
#pragma GCC unroll 4  // Note [Unrolled vector loops]
    for (; j + W <= n; j += W) IO::stream(o + j, f(AS ? va : IO::load(a + j)));
  } else {
#pragma GCC unroll 4  // Note [Unrolled vector loops]
    for (; j + W <= n; j += W) IO::store(o + j, f(AS ? va : IO::load(a + j)));
  }
  if (j < n) part1<T, AS, NT>(o, a, j, n - j, f);
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
        _mm256_storeu_ps(buf + j, detail::even8_f32(_mm256_loadu_ps(f + 2 * j), _mm256_loadu_ps(f + 2 * j + 8)));
      }
    }
  }
  for (; j < n; ++j) std::memcpy(buf + j, p + j * stride_bytes, sizeof(T));
}

#ifdef SB_HAVE_AVX512
// f[2j] = buf[j] for 8-element groups: one AVX-512 store per 8 results, the odd lanes
// masked off by a k-mask (untouched in memory). Returns the elements done.
__attribute__((target("avx512f"))) int64_t unpack_stride2_avx512(float* f, const float* buf, int64_t n) {
  const __m512i idx = _mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {  // the maskz forms: GCC 12 warns on the undefined-lanes ones
    const __m512 v = _mm512_maskz_loadu_ps(0x00FF, buf + j);
    _mm512_mask_storeu_ps(f + 2 * j, 0x5555, _mm512_maskz_permutexvar_ps(0x5555, idx, v));
  }
  return j;
}
#endif

// Note [Masked stores]: writing every other float must leave the lanes in between
// untouched, which takes masked stores. The AVX2 vmaskmovps store is microcoded on AMD,
// slower than a scalar loop (docs/notes/elementwise.md). So: AVX-512 k-masks where the
// CPU has our AVX512 level (every CPU with VNNI, Intel or AMD), scalar stores otherwise.
template <typename T>
void unpack_strided(char* p, int64_t stride_bytes, const T* buf, int64_t n) {
  int64_t j = 0;
#ifdef SB_HAVE_AVX512
  if constexpr (std::is_same_v<T, float>)
    if (stride_bytes == 8 && use_avx512()) j = unpack_stride2_avx512(reinterpret_cast<float*>(p), buf, n);
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
template <typename T> struct Masked;  // k-masked loads and stores of one ymm (Note [Masked stores])
template <> struct Masked<float> {
  using V = __m256;
  static constexpr int kW = 8;
  __attribute__((target("avx512f,avx512vl"), always_inline)) static V load(const float* p, unsigned m) {
    return _mm256_maskz_loadu_ps(static_cast<__mmask8>(m), p);
  }
  __attribute__((target("avx512f,avx512vl"), always_inline)) static void store(float* p, unsigned m, V v) {
    _mm256_mask_storeu_ps(p, static_cast<__mmask8>(m), v);
  }
};
template <> struct Masked<double> {
  using V = __m256d;
  static constexpr int kW = 4;
  __attribute__((target("avx512f,avx512vl"), always_inline)) static V load(const double* p, unsigned m) {
    return _mm256_maskz_loadu_pd(static_cast<__mmask8>(m), p);
  }
  __attribute__((target("avx512f,avx512vl"), always_inline)) static void store(double* p, unsigned m, V v) {
    _mm256_mask_storeu_pd(p, static_cast<__mmask8>(m), v);
  }
};

// A stride-2 strip's view of Masked: the strip elements per vector and the even-lane mask.
template <typename T> struct Stride2 : Masked<T> {
  static constexpr int kElems = Masked<T>::kW / 2;
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
  if constexpr (N == 1) S::store(o + k, m, f(AS ? va : S::load(a + k, m)));
  else S::store(o + k, m, f(AS ? va : S::load(a + k, m), BS ? vb : S::load(b + k, m)));
}

// o[2j] = f(a[2j] (, b[2j])) for j < n, operands at stride 2 (AS / BS: a stride-0
// scalar); N: 1 (unary, b unused) or 2. The last vector's mask is cut to the strip's end.
template <typename T, int N, bool AS, bool BS, typename F>
__attribute__((target("avx512f,avx512vl"))) void stride2_loop(T* o, const T* a, const T* b, int64_t n, const F& f) {
  using S = Stride2<T>;
  constexpr int64_t E = S::kElems;
  const typename S::V va = VecIO<T>::set1(a[0]), vb = VecIO<T>::set1(N == 2 ? b[0] : T(0));
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

template <typename T> struct Gather2;  // the even lanes of a stride-2 run, packed into one ymm
template <> struct Gather2<float> {
  // p[0], p[2], .. p[2r - 2], r <= 8: the even lanes of 16 floats, packed (the lanes from r on are zero)
  __attribute__((target("avx512f,avx512vl"), always_inline)) static __m256 two(const float* p, int r) {
    const __m512 v = _mm512_maskz_loadu_ps(static_cast<__mmask16>(0x5555u & ((1u << (2 * r)) - 1)), p);
    return _mm256_castsi256_ps(_mm512_maskz_cvtepi64_epi32(0xFF, _mm512_castps_si512(v)));  // maskz: as unpack_stride2_avx512
  }
};
template <> struct Gather2<double> {
  __attribute__((target("avx512f,avx512vl"), always_inline)) static __m256d two(const double* p, int r) {
    const unsigned m = 0x55u & ((1u << (2 * r)) - 1);  // two ymm halves, even lanes merged and ordered
    const __m256d lo = _mm256_maskz_loadu_pd(static_cast<__mmask8>(m & 0xF), p);
    const __m256d hi = _mm256_maskz_loadu_pd(static_cast<__mmask8>(m >> 4), p + 4);
    return _mm256_permute4x64_pd(_mm256_unpacklo_pd(lo, hi), 0xD8);  // lo0 hi0 lo2 hi2 -> lo0 lo2 hi0 hi2
  }
};

template <typename T, Operand K>
__attribute__((target("avx512f,avx512vl"), always_inline)) inline typename Masked<T>::V gather2_operand(
    const T* p, int64_t j, int r, typename Masked<T>::V scalar) {
  if constexpr (K == Operand::Scalar) return scalar;
  else if constexpr (K == Operand::Dense) return Masked<T>::load(p + j, (1u << r) - 1);
  else return Gather2<T>::two(p + 2 * j, r);
}

// f at elements j .. j + r - 1 of a (and b), r <= W. A function, not a
// lambda, for the reason stride2_vec gives.
template <typename T, int N, Operand KA, Operand KB, typename F>
__attribute__((target("avx512f,avx512vl"), always_inline)) inline typename Masked<T>::V gather2_vec(
    const T* a, const T* b, int64_t j, int r, typename Masked<T>::V va, typename Masked<T>::V vb,
    const F& f) {
  if constexpr (N == 1) return f(gather2_operand<T, KA>(a, j, r, va));
  else return f(gather2_operand<T, KA>(a, j, r, va), gather2_operand<T, KB>(b, j, r, vb));
}

// The first r (< W) lanes of v to o: a masked store, or (NT) streamed element by element.
template <typename T, bool NT>
__attribute__((target("avx512f,avx512vl"), always_inline)) inline void gather2_part(T* o, int r, typename Masked<T>::V v) {
  if constexpr (NT) {
    alignas(32) T t[Masked<T>::kW];
    VecIO<T>::store(t, v);
    put_part<T, true>(o, t, r);
  } else {
    Masked<T>::store(o, (1u << r) - 1, v);
  }
}

// o[j] = f(a[j * KA] (, b[j * KB])) for j < n, o dense; N: 1 (unary, b unused) or 2;
// NT: streaming stores (Note [Streaming elementwise outputs]), the elements before the
// first aligned vector and the tail streamed one by one (Note [Streaming strips]).
template <typename T, int N, Operand KA, Operand KB, bool NT, typename F>
__attribute__((target("avx512f,avx512vl"))) void gather2_loop(T* o, const T* a, const T* b, int64_t n, const F& f) {
  using M = Masked<T>;
  constexpr int64_t W = M::kW;
  const typename M::V va = VecIO<T>::set1(a[0]), vb = VecIO<T>::set1(N == 2 ? b[0] : T(0));
  int64_t j = 0;
  if constexpr (NT) {
    j = head_to_align(o, VecIO<T>::kStreamAlign, n);
    if (j) gather2_part<T, NT>(o, static_cast<int>(j), gather2_vec<T, N, KA, KB>(a, b, 0, static_cast<int>(j), va, vb, f));
#pragma GCC unroll 4  // Note [Unrolled vector loops]
    for (; j + W <= n; j += W) VecIO<T>::stream(o + j, gather2_vec<T, N, KA, KB>(a, b, j, W, va, vb, f));
  } else {
#pragma GCC unroll 4  // Note [Unrolled vector loops]
    for (; j + W <= n; j += W) VecIO<T>::store(o + j, gather2_vec<T, N, KA, KB>(a, b, j, W, va, vb, f));
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
void strip2(bool avx, bool nt, char* const* p, const int64_t* s, int64_t n, const F& f) {
  using A = acc_t<T>;
  constexpr int64_t es = sizeof(T);
  T* o = reinterpret_cast<T*>(p[0]);
  const T* a = reinterpret_cast<const T*>(p[1]);
  const T* b = reinterpret_cast<const T*>(p[2]);
#ifdef SB_HAVE_AVX2
  if constexpr (kHasVec<T>) {
    if (avx && s[0] == es) {
      if (s[1] == es && s[2] == es)
        return nt ? vloop2<T, false, false, true>(o, a, b, n, f) : vloop2<T, false, false>(o, a, b, n, f);
      if (s[1] == es && s[2] == 0)
        return nt ? vloop2<T, false, true, true>(o, a, b, n, f) : vloop2<T, false, true>(o, a, b, n, f);
      if (s[1] == 0 && s[2] == es)
        return nt ? vloop2<T, true, false, true>(o, a, b, n, f) : vloop2<T, true, false>(o, a, b, n, f);
#ifdef SB_HAVE_AVX512
      if constexpr (!std::is_same_v<T, Half>)
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
          if (s[1] == 0) vloop2<T, true, false>(o + j0, ca, cb, m, f);
          else if (s[2] == 0) vloop2<T, false, true>(o + j0, ca, cb, m, f);
          else vloop2<T, false, false>(o + j0, ca, cb, m, f);
        }
        return;
      }
    }
#ifdef SB_HAVE_AVX512
    if constexpr (!std::is_same_v<T, Half>)
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
        if (s[1] == 0 && s[2] == 0) vloop2<T, true, true>(bo, ca, cb, m, f);
        else if (s[1] == 0) vloop2<T, true, false>(bo, ca, cb, m, f);
        else if (s[2] == 0) vloop2<T, false, true>(bo, ca, cb, m, f);
        else vloop2<T, false, false>(bo, ca, cb, m, f);
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
void strip1(bool avx, bool nt, char* const* p, const int64_t* s, int64_t n, const F& f) {
  using A = acc_t<T>;
  constexpr int64_t es = sizeof(T);
  T* o = reinterpret_cast<T*>(p[0]);
  const T* a = reinterpret_cast<const T*>(p[1]);
#ifdef SB_HAVE_AVX2
  if constexpr (kHasVec<T>) {
    if (avx && s[0] == es) {
      if (s[1] == es) return nt ? vloop1<T, false, true>(o, a, n, f) : vloop1<T, false>(o, a, n, f);
      if (s[1] == 0) return nt ? vloop1<T, true, true>(o, a, n, f) : vloop1<T, true>(o, a, n, f);
#ifdef SB_HAVE_AVX512
      if constexpr (!std::is_same_v<T, Half>)
        if (s[1] == 2 * es && use_avx512())  // Note [Gathered stride-2 inputs]
          return gather2<T, 1, Operand::Two, Operand::Two>(nt, o, a, a, n, f);
#endif
      T ba[kPackChunk];  // a strided input: Note [Packed strided inputs]
      for (int64_t j0 = 0; j0 < n; j0 += kPackChunk) {
        const int64_t m = std::min(kPackChunk, n - j0);
        vloop1<T, false>(o + j0, chunk_operand(ba, p[1], s[1], j0, m), m, f);
      }
      return;
    }
#ifdef SB_HAVE_AVX512
    if constexpr (!std::is_same_v<T, Half>)
      if (avx && s[0] == 2 * es && (s[1] == 2 * es || s[1] == 0) && use_avx512()) {
        // Note [Stride-2 strips]
        return s[1] == 0 ? stride2_loop<T, 1, true, false>(o, a, a, n, f) : stride2_loop<T, 1, false, false>(o, a, a, n, f);
      }
#endif
    if (avx && s[0] != 0) {  // a strided output: compute a chunk into bo, then store it
      T ba[kPackChunk], bo[kPackChunk];
      for (int64_t j0 = 0; j0 < n; j0 += kPackChunk) {
        const int64_t m = std::min(kPackChunk, n - j0);
        if (s[1] == 0) vloop1<T, true>(bo, reinterpret_cast<const T*>(p[1]), m, f);
        else vloop1<T, false>(bo, chunk_operand(ba, p[1], s[1], j0, m), m, f);
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

// ---------------------------------------------------------------- normalize kernel

// Whether the last elementwise call streamed its output (last_elementwise_used_nt()).
// normalize's strips store true when they streamed (Note [Streaming normalize outputs]).
std::atomic<bool> g_last_nt{false};

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
inline double hsum_pd(__m256d v) {
  alignas(32) double t[4];
  _mm256_store_pd(t, v);
  return (t[0] + t[1]) + (t[2] + t[3]);
}
inline double hsum_ps_as_pd(__m256 v) {
  return hsum_pd(_mm256_add_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(v)), _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1))));
}
#endif

#ifdef SB_HAVE_AVX2
template <typename T> struct StatVec;  // the accumulation vectors of row_stats_block
template <> struct StatVec<float> {
  using V = __m256;
  static constexpr int kW = 8;
  static V zero() { return _mm256_setzero_ps(); }
  static V set1(float v) { return _mm256_set1_ps(v); }
  static V add(V a, V b) { return _mm256_add_ps(a, b); }
  static V sub(V a, V b) { return _mm256_sub_ps(a, b); }
  static V fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static double hsum(V v) { return hsum_ps_as_pd(v); }
};
template <> struct StatVec<double> {
  using V = __m256d;
  static constexpr int kW = 4;
  static V zero() { return _mm256_setzero_pd(); }
  static V set1(double v) { return _mm256_set1_pd(v); }
  static V add(V a, V b) { return _mm256_add_pd(a, b); }
  static V sub(V a, V b) { return _mm256_sub_pd(a, b); }
  static V fma(V a, V b, V c) { return _mm256_fmadd_pd(a, b, c); }
  static double hsum(V v) { return hsum_pd(v); }
};

// sum(x) of a dense row, in the lanes of acc_t<T>, flushed to double every kStatFlush.
// The mean of a dense row: x0 + sum(x - x0) / n, x0 = xt[0] (Note [Short normalize rows]).
template <typename T>
double dense_mean(const T* xt, int64_t n) {
  using A = acc_t<T>;
  using IO = VecIO<T>;
  using SV = StatVec<A>;
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
  using IO = VecIO<T>;
  using SV = StatVec<A>;
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

// Note [Short normalize rows]: float32 rows of n <= kStatFlush elements, dense in x and
// out, nr <= 8 at a time (row k at x + k * xr, out + k * orow). Every pass walks the 8 rows
// side by side (8 independent accumulator chains), the 8 horizontal sums come out of one
// hadd tree, and mean, 1/sqrt(var + eps) are computed for the 8 rows in two vectors. The
// mean is x0 + sum(x - x0) / n with x0 the row's first element, so the float32 sums are of
// deviations, not of values far from 0 (a constant row gets its mean exactly: (x - m) is
// 0, not a rounding error that 1/sqrt(eps) blows up). The variance is sum((x - m)^2) / n
// around the float32 mean m (no S^2/n correction: it is of the order of m's rounding
// squared). Elements past n % 8 are masked off.
// NT: the output rows are written with streaming stores (Note [Streaming normalize
// outputs]); the caller guarantees n % 8 == 0 and 32-byte aligned output rows.
template <bool NT = false>
inline void normalize_rows8_f32(const char* x, int64_t xr, char* out, int64_t orow, int nr, int64_t n, double eps) {
  const int64_t nv = n / 8, rem = n % 8;
  alignas(32) static const int32_t kIdx[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
  const __m256i mask = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kIdx + 8 - rem));
  const float* xs[8];
  for (int k = 0; k < 8; ++k) xs[k] = reinterpret_cast<const float*>(x + std::min(k, nr - 1) * xr);
  __m256 acc[8], x0[8];
  for (int k = 0; k < 8; ++k) {
    acc[k] = _mm256_setzero_ps();
    x0[k] = _mm256_broadcast_ss(xs[k]);
  }
  for (int64_t v = 0; v < nv; ++v)
    for (int k = 0; k < 8; ++k) acc[k] = _mm256_add_ps(acc[k], _mm256_sub_ps(_mm256_loadu_ps(xs[k] + 8 * v), x0[k]));
  if (rem)  // masked lanes: x0 - x0
    for (int k = 0; k < 8; ++k)
      acc[k] = _mm256_add_ps(acc[k], _mm256_sub_ps(_mm256_blendv_ps(x0[k], _mm256_maskload_ps(xs[k] + 8 * nv, mask),
                                                                    _mm256_castsi256_ps(mask)), x0[k]));
  alignas(32) float mean[8], first[8];
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
  const __m256 q = hsum8_ps(acc);
  const __m256d rn = _mm256_set1_pd(1.0 / static_cast<double>(n)), ev = _mm256_set1_pd(eps), one = _mm256_set1_pd(1.0);
  const __m256d r0 = _mm256_div_pd(one, _mm256_sqrt_pd(_mm256_fmadd_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(q)), rn, ev)));
  const __m256d r1 = _mm256_div_pd(one, _mm256_sqrt_pd(_mm256_fmadd_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(q, 1)), rn, ev)));
  alignas(32) float rstd[8];
  _mm256_store_ps(rstd, _mm256_set_m128(_mm256_cvtpd_ps(r1), _mm256_cvtpd_ps(r0)));
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

// One strip of rows: row r of operand i starts at p[i] + r * s[i] and runs n elements
// with stride xsd (x) / osd (out) bytes.
//  - dense rows (xsd == element size): per row, two passes for the stats (the row is in
//    L1/L2 for the second) and one vectorised write pass.
//  - strided rows (normalizing an outer dim): kCols rows side by side, so every pass
//    reads kCols contiguous elements of each of the n lines of x. One pass of shifted
//    sums (shift = the row's first value, in double: no cancellation to speak of), one
//    write pass: x is read twice from memory, out written once. Walking 16 rows at a
//    power-of-two stride three times instead ran 40x slower (cache-set conflicts).
template <typename T>
void normalize_strip(bool avx, bool nt, char* const* p, const int64_t* s, int64_t rows, int64_t n, int64_t xsd,
                     int64_t osd, double eps) {
  using A = acc_t<T>;
  constexpr int64_t es = sizeof(T);
#ifdef SB_HAVE_AVX2
  if constexpr (std::is_same_v<T, float>) {
    // Streaming rows of 8-float vectors need every output row 32-byte aligned; rows
    // that are not take plain stores (no partial lines: Note [Streaming strips]).
    const bool nt8 = nt && osd == es && n % 8 == 0 && s[0] % 32 == 0 && reinterpret_cast<uintptr_t>(p[0]) % 32 == 0;
    if (avx && xsd == es && osd == es && n <= kStatFlush) {  // Note [Short normalize rows]
      for (int64_t r0 = 0; r0 < rows; r0 += 8) {
        const int nr = static_cast<int>(std::min<int64_t>(8, rows - r0));
        if (nt8) normalize_rows8_f32<true>(p[1] + r0 * s[1], s[1], p[0] + r0 * s[0], s[0], nr, n, eps);
        else normalize_rows8_f32(p[1] + r0 * s[1], s[1], p[0] + r0 * s[0], s[0], nr, n, eps);
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
      alignas(32) float buf[8 * kStatFlush];
      for (int64_t r0 = 0; r0 < rows; r0 += 8) {
        const int nr = static_cast<int>(std::min<int64_t>(8, rows - r0));
        for (int k = 0; k < nr; ++k) pack_strided(buf + k * n, p[1] + (r0 + k) * s[1], xsd, n);
        if (nt8) {
          normalize_rows8_f32<true>(reinterpret_cast<const char*>(buf), n * es, p[0] + r0 * s[0], s[0], nr, n, eps);
        } else if (osd == es) {
          normalize_rows8_f32(reinterpret_cast<const char*>(buf), n * es, p[0] + r0 * s[0], s[0], nr, n, eps);
        } else {
          normalize_rows8_f32(reinterpret_cast<const char*>(buf), n * es, reinterpret_cast<char*>(buf), n * es, nr, n, eps);
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
        strip1<T>(avx, nt && osd == es, q, st, n, f);
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

// ---------------------------------------------------------------- dispatch helpers

#define SB_BINARY_OP_CASES(OPV, ...)                                  \
  switch (OPV) {                                                      \
    case BinaryOp::Add: { constexpr BinaryOp OP = BinaryOp::Add; __VA_ARGS__; break; }         \
    case BinaryOp::Sub: { constexpr BinaryOp OP = BinaryOp::Sub; __VA_ARGS__; break; }         \
    case BinaryOp::Mul: { constexpr BinaryOp OP = BinaryOp::Mul; __VA_ARGS__; break; }         \
    case BinaryOp::Div: { constexpr BinaryOp OP = BinaryOp::Div; __VA_ARGS__; break; }         \
    case BinaryOp::Maximum: { constexpr BinaryOp OP = BinaryOp::Maximum; __VA_ARGS__; break; } \
    case BinaryOp::Minimum: { constexpr BinaryOp OP = BinaryOp::Minimum; __VA_ARGS__; break; } \
  }

#define SB_UNARY_OP_CASES(OPV, ...)                                                \
  switch (OPV) {                                                                   \
    case UnaryOp::Neg: { constexpr UnaryOp OP = UnaryOp::Neg; __VA_ARGS__; break; }   \
    case UnaryOp::Abs: { constexpr UnaryOp OP = UnaryOp::Abs; __VA_ARGS__; break; }   \
    case UnaryOp::Relu: { constexpr UnaryOp OP = UnaryOp::Relu; __VA_ARGS__; break; } \
    case UnaryOp::Exp: { constexpr UnaryOp OP = UnaryOp::Exp; __VA_ARGS__; break; }   \
    case UnaryOp::Sqrt: { constexpr UnaryOp OP = UnaryOp::Sqrt; __VA_ARGS__; break; } \
  }

// The dtypes elementwise ops compute on; the caller has checked the dtype.
#define SB_DISPATCH_EW(DTYPE, ...)                                 \
  switch (DTYPE) {                                                 \
    SB_DTYPE_CASE(::sb::DType::Float32, float, __VA_ARGS__)        \
    SB_DTYPE_CASE(::sb::DType::Float64, double, __VA_ARGS__)       \
    SB_DTYPE_CASE(::sb::DType::Float16, ::sb::Half, __VA_ARGS__)   \
    SB_DTYPE_CASE(::sb::DType::Int32, int32_t, __VA_ARGS__)        \
    default: SB_INTERNAL_ASSERT(false, "unchecked dtype ", DTYPE); \
  }

void check_dtype(const char* name, DType dt, bool floating_only) {
  const bool ok = dt == DType::Float32 || dt == DType::Float64 || dt == DType::Float16 || dt == DType::Int32;
  SB_CHECK(ok, name, ": dtype ", dt, " is not supported (float32, float64, float16 or int32)");
  SB_CHECK(!floating_only || is_floating(dt), name, ": dtype ", dt,
           " is not supported: this op needs a floating dtype (PyTorch would promote integers to float; "
           "stridebench has no type promotion: convert with .to(DType::Float32) first)");
}

// Checks out against the result's sizes, dtype and device and the overlap rules (Note
// [Overlap from strides]): an input that shares elements with out other than exactly
// (a.add_(a)) is an error. Returns true when an input's overlap with out could not be
// decided within the search bound; the caller then computes from copies of its inputs.
bool check_out(const char* name, const Tensor& out, const Shape& sizes, DType dt, Device dev,
               const std::vector<const Tensor*>& inputs) {
  SB_CHECK(out.defined(), name, ": undefined output tensor");
  SB_CHECK(out.dtype() == dt, name, ": output dtype ", out.dtype(), " does not match the result dtype ", dt);
  SB_CHECK(out.device() == dev, name, ": output is on ", out.device(), " but the inputs are on ", dev);
  SB_CHECK(out.sizes() == sizes, name, ": output sizes ", out.sizes(), " do not match the result sizes ", sizes,
           " (stridebench does not resize outputs)");
  // is_contiguous() first: O(ndim), no allocation (the overlap test sorts the strides)
  SB_CHECK(out.is_contiguous() || has_internal_overlap(out) != MemOverlap::Yes, name, ": the output (sizes ", out.sizes(), ", strides ",
           out.strides(), ") has several elements at one memory location (an expanded tensor); clone() it first");
  bool undecided = false;
  for (const Tensor* in : inputs) {
    const MemOverlapStatus ov = get_overlap_status(out, *in);
    SB_CHECK(ov != MemOverlapStatus::Partial, name, ": an input (sizes ", in->sizes(), ", strides ", in->strides(),
             ", offset ", in->storage_offset(), ") shares elements with the output (sizes ", out.sizes(), ", strides ",
             out.strides(), ", offset ", out.storage_offset(), ") at other positions; clone() the input first");
    undecided |= ov == MemOverlapStatus::TooHard;
  }
  return undecided;
}

void check_inputs(const char* name, const Tensor& a, const Tensor& b) {
  SB_CHECK(a.defined() && b.defined(), name, ": undefined input tensor");
  SB_CHECK(a.dtype() == b.dtype(), name, ": dtype mismatch: ", a.dtype(), " and ", b.dtype(),
           " (stridebench has no type promotion)");
  SB_CHECK(a.device() == b.device(), name, ": expected both inputs on one device, got ", a.device(), " and ",
           b.device());
}

[[maybe_unused]] void no_cuda(const char* name, Device d) {
  SB_CHECK(false, name, ": tensor on ", d, " needs CUDA, and stridebench was built without it");
}

// ---------------------------------------------------------------- the three bodies (checks done)

// Note [Row blocks]: the strip kernels as the iterator's row-block callable. K is a
// callable (p, s, n) for one strip (strip1 / strip2 with the op bound); the block form
// runs `rows` strips s1 apart in a tight loop, so a strip costs a call of K (its stride
// dispatch, its vector loop) and no longer also the iterator's odometer and pointer
// bookkeeping, which perf put at a third of x + b over 20-float rows.
//
// Note [One iterator instance]: every elementwise op hands the iterator the same type,
// StripKernel, a function pointer to row_block<N, K> and K's address, so StridedIter's
// for_each / run_range / run_tiles / run_groups are compiled once for all of them, and
// each (op, dtype) has one copy of its strip kernel (the stride dispatch and every
// vector loop). With K passed as its own type, the iterator was instantiated for each
// of the 68 (op, dtype) kernels and inlined a copy of the strip kernel at each of its
// seven call sites (Contiguous, run_range's two, run_tiles' four): functions of up to
// 125 KB, and 10 CPU-minutes to compile this file in the sanitizer build, whose
// register-liveness passes grow faster than function size (-ftime-report). The price
// is one indirect call per strip or row block (the same target every time). row_block
// is `flatten`ed: strip1 / strip2 and their loops inline into it (still one copy per
// (op, dtype)), where they were three calls deep, so the transposed add (a call per
// 2 KiB piece of grouped staging) is no slower than with an iterator per kernel
// (docs/notes/elementwise.md).
using RowBlockFn = void (*)(const void* k, char* const* p, const int64_t* s, int64_t n, int64_t rows, const int64_t* s1);

struct StripKernel {
  RowBlockFn fn;
  const void* k;
  void operator()(char* const* p, const int64_t* s, int64_t n) const { fn(k, p, s, n, 1, s); }
  void operator()(char* const* p, const int64_t* s, int64_t n, int64_t rows, const int64_t* s1) const {
    fn(k, p, s, n, rows, s1);
  }
};

// Note [Periodic rows]: a row block whose output rows lie end to end (s1 = n elements)
// and whose inputs are each dense the same way, a scalar (stride 0 both ways), or one row
// read again for every output row (stride 1 along the strip, 0 across rows: x + b with b a
// bias row, or a per-channel bias on a channels-last tensor, rows of C) is one dense run
// of n * rows elements in which the repeated rows are periodic. As rows, short ones pay
// per row for the strip's stride dispatch and for a partial vector at each end (masked,
// or element by element when streaming: Note [Streaming strips]). Here each repeated row
// is copied, repeated, into an L1 buffer of kPeriodicChunk + 128 bytes, and the
// kernel's dense loop runs over chunks of kPeriodicChunk outputs, reading the buffer from
// (position mod n). Chunks end on 64-byte boundaries of the output, so only the block's
// own two ends are partial vectors. The chunks go through row_block itself with rows = 1
// (fn), so this function is compiled once per (operand count, dtype), not per op.
// Only rows under 128 bytes: longer rows already run at the memory rate as rows, and the
// periodic form was slower there (docs/notes/elementwise.md).
constexpr int64_t kPeriodicChunk = 1024;     // outputs per kernel call: a multiple of 64 bytes for every dtype
constexpr int64_t kPeriodicRowBytes = 128;   // rows shorter than this take the periodic form

template <int N, typename T>
__attribute__((noinline)) bool periodic_rows(RowBlockFn fn, const void* kp, char* const* p, const int64_t* s, int64_t n,
                                             int64_t rows, const int64_t* s1) {
  constexpr int64_t es = sizeof(T);
  const int64_t total = n * rows;
  if (total < 4 * kPeriodicChunk || s[0] != es || s1[0] != n * es) return false;
  enum class Kind : uint8_t { Dense, Scalar, Periodic };
  Kind kind[N];
  int periodic = 0;
  for (int i = 1; i < N; ++i) {
    if (s[i] == es && s1[i] == n * es) {
      kind[i] = Kind::Dense;
    } else if (s[i] == 0 && s1[i] == 0) {
      kind[i] = Kind::Scalar;
    } else if (s[i] == es && s1[i] == 0) {
      kind[i] = Kind::Periodic;
      ++periodic;
    } else {
      return false;
    }
  }
  if (periodic == 0) return false;
  constexpr int64_t kLen = kPeriodicChunk + kPeriodicRowBytes / es;  // enough for a chunk from any phase
  alignas(64) unsigned char raw[N - 1][kLen * es];                    // at most 2 x 8.1 KiB (float64)
  int64_t st[N];
  st[0] = es;
  for (int i = 1; i < N; ++i) {
    st[i] = kind[i] == Kind::Scalar ? 0 : es;
    if (kind[i] != Kind::Periodic) continue;
    std::memcpy(raw[i - 1], p[i], n * es);  // the row, then doubled until the buffer is full
    for (int64_t have = n; have < kLen; have *= 2)
      std::memcpy(raw[i - 1] + have * es, raw[i - 1], std::min(have, kLen - have) * es);
  }
  const int64_t lead = static_cast<int64_t>(reinterpret_cast<uintptr_t>(p[0]) % 64) / es;
  char* q[N];
  int64_t pos = 0, phase = 0;  // phase: pos mod n
  for (int64_t len = std::min(total, kPeriodicChunk - lead); pos < total;
       len = std::min(total - pos, kPeriodicChunk)) {
    q[0] = p[0] + pos * es;
    for (int i = 1; i < N; ++i)
      q[i] = kind[i] == Kind::Dense    ? p[i] + pos * es
             : kind[i] == Kind::Scalar ? p[i]
                                       : reinterpret_cast<char*>(raw[i - 1] + phase * es);
    fn(kp, static_cast<char* const*>(q), st, len, 1, st);
    pos += len;
    phase = (phase + len) % n;
  }
  return true;
}

template <int N, typename T, typename K>  // N: operands, the output first; T: their dtype
__attribute__((flatten)) void row_block(const void* kp, char* const* p, const int64_t* s, int64_t n, int64_t rows, const int64_t* s1) {
  if (rows > 1 && n * static_cast<int64_t>(sizeof(T)) < kPeriodicRowBytes &&
      periodic_rows<N, T>(&row_block<N, T, K>, kp, p, s, n, rows, s1))
    return;
  const K& k = *static_cast<const K*>(kp);
  char* q[N];
  for (int i = 0; i < N; ++i) q[i] = p[i];
  for (int64_t r = 0;;) {
    k(static_cast<char* const*>(q), s, n);
    if (++r == rows) return;
    for (int i = 0; i < N; ++i) q[i] += s1[i];
  }
}

// k must outlive the for_each it is passed to.
template <int N, typename T, typename K>
StripKernel strip_kernel(const K& k) {
  return StripKernel{&row_block<N, T, K>, &k};
}

// Note [Streaming elementwise outputs]: a dense output (the Contiguous path, or Tiled
// with dense-block tiles) above the streaming threshold that no input shares, on the
// vector path of a dtype that has one.
// The rule both share: the vector path of a dtype that has one, an output above the
// threshold, and no input that is the output (in place never streams).
bool may_stream(bool avx, const Tensor& out, std::initializer_list<const Tensor*> ins) {
  const DType dt = out.dtype();  // the dtypes with vector loops (kHasVec)
  bool nt = avx && (dt == DType::Float32 || dt == DType::Float64 || dt == DType::Float16) &&
            out.numel() * static_cast<int64_t>(out.element_size()) > nt_threshold_bytes();
  for (const Tensor* t : ins) nt = nt && t->data_ptr() != out.data_ptr();
  return nt;
}

bool stream_output(bool avx, const StridedIter& it, const Tensor& out, std::initializer_list<const Tensor*> ins) {
  const bool nt = may_stream(avx, out, ins) &&
                  (it.path() == StridedIter::Path::Contiguous || it.tiles_write_dense_blocks() ||
                   it.strips_write_dense_output());
  g_last_nt.store(nt, std::memory_order_relaxed);
  return nt;
}

}  // namespace

bool last_elementwise_used_nt() { return g_last_nt.load(std::memory_order_relaxed); }

namespace {

void run_binary(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b) {
  if (out.numel() == 0) return;
  if (!out.device().is_cpu()) {
#ifdef SB_WITH_CUDA
    return cuda::binary(op, out, a, b);
#else
    return no_cuda(binary_op_name(op), out.device());
#endif
  }
  const StridedIter it = StridedIter::of({&out, &a, &b});
  const bool avx = use_avx2();
  const bool nt = stream_output(avx, it, out, {&a, &b});
  SB_DISPATCH_EW(out.dtype(), SB_BINARY_OP_CASES(op, {
    const auto k = [avx, nt](char* const* p, const int64_t* s, int64_t n) { strip2<scalar_t>(avx, nt, p, s, n, Bin<OP>{}); };
    it.for_each(strip_kernel<3, scalar_t>(k), kGrainSize, nt);
  }));
}

void run_binary_scalar(BinaryOp op, const Tensor& out, const Tensor& a, double b) {
  if (out.numel() == 0) return;
  if (!out.device().is_cpu()) {
#ifdef SB_WITH_CUDA
    return cuda::binary_scalar(op, out, a, b);
#else
    return no_cuda(binary_op_name(op), out.device());
#endif
  }
  const StridedIter it = StridedIter::of({&out, &a});
  const bool avx = use_avx2();
  const bool nt = stream_output(avx, it, out, {&a});
  SB_DISPATCH_EW(out.dtype(), SB_BINARY_OP_CASES(op, {
    using A = acc_t<scalar_t>;
    const BinScalar<OP, A> f{static_cast<A>(b)};
    const auto k = [avx, nt, f](char* const* p, const int64_t* s, int64_t n) { strip1<scalar_t>(avx, nt, p, s, n, f); };
    it.for_each(strip_kernel<2, scalar_t>(k), kGrainSize, nt);
  }));
}

void run_unary(UnaryOp op, const Tensor& out, const Tensor& a) {
  if (out.numel() == 0) return;
  if (!out.device().is_cpu()) {
#ifdef SB_WITH_CUDA
    return cuda::unary(op, out, a);
#else
    return no_cuda(unary_op_name(op), out.device());
#endif
  }
  const StridedIter it = StridedIter::of({&out, &a});
  const bool avx = use_avx2();
  const bool nt = stream_output(avx, it, out, {&a});
  SB_DISPATCH_EW(out.dtype(), SB_UNARY_OP_CASES(op, {
    const auto k = [avx, nt](char* const* p, const int64_t* s, int64_t n) { strip1<scalar_t>(avx, nt, p, s, n, Un<OP>{}); };
    it.for_each(strip_kernel<2, scalar_t>(k), kGrainSize, nt);
  }));
}

// Note [Streaming normalize outputs]: normalize writes its output with streaming stores
// on the same terms as the other elementwise ops (Note [Streaming elementwise outputs]):
// an output above copy.h's nt_threshold_bytes() that is not x itself (in place never
// streams), in the rows it writes whole: rows dense along `dim`, through the short-row
// kernel when n % 8 == 0 and every row starts 32-byte aligned, else through strip1's
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
  g_last_nt.store(false, std::memory_order_relaxed);  // the strips that stream set it
  const int64_t grain = std::max<int64_t>(1, kGrainSize / n);
  SB_DISPATCH_FLOATING(out.dtype(), "normalize", {
    it.for_each([=](char* const* p, const int64_t* s, int64_t rows) {
      normalize_strip<scalar_t>(avx, nt, p, s, rows, n, xsd, osd, eps);
    }, grain, nt);
  });
}

void check_int_scalar(const char* name, DType dt, double b) {
  if (dt != DType::Int32) return;
  SB_CHECK(std::trunc(b) == b && b >= std::numeric_limits<int32_t>::min() && b <= std::numeric_limits<int32_t>::max(),
           name, ": scalar ", b, " is not an int32 value, and an int32 tensor needs one (no type promotion)");
}

}  // namespace

// ---------------------------------------------------------------- public entry points

namespace {
Tensor& binary_out_named(const char* name, BinaryOp op, Tensor& out, const Tensor& a, const Tensor& b) {
  check_inputs(name, a, b);
  check_dtype(name, a.dtype(), op == BinaryOp::Div);
  const Shape sizes = broadcast_shapes(a.sizes(), b.sizes(), name);
  if (check_out(name, out, sizes, a.dtype(), a.device(), {&a, &b}))
    return binary_out_named(name, op, out, a.clone(), b.clone());
  if (a.sizes() == sizes && b.sizes() == sizes) {  // nothing to broadcast: no expanded copies (per-call cost)
    run_binary(op, out, a, b);
  } else {
    run_binary(op, out, a.expand(sizes), b.expand(sizes));
  }
  return out;
}

Tensor& binary_scalar_out_named(const char* name, BinaryOp op, Tensor& out, const Tensor& a, double b) {
  SB_CHECK(a.defined(), name, ": undefined input tensor");
  check_dtype(name, a.dtype(), op == BinaryOp::Div);
  check_int_scalar(name, a.dtype(), b);
  if (check_out(name, out, a.sizes(), a.dtype(), a.device(), {&a}))
    return binary_scalar_out_named(name, op, out, a.clone(), b);
  run_binary_scalar(op, out, a, b);
  return out;
}

Tensor& unary_out_named(const char* name, UnaryOp op, Tensor& out, const Tensor& a) {
  SB_CHECK(a.defined(), name, ": undefined input tensor");
  check_dtype(name, a.dtype(), op == UnaryOp::Exp || op == UnaryOp::Sqrt);
  if (check_out(name, out, a.sizes(), a.dtype(), a.device(), {&a})) return unary_out_named(name, op, out, a.clone());
  run_unary(op, out, a);
  return out;
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

// The output of an op over `inputs` (already of `sizes`), laid out as PyTorch lays it.
Tensor new_output(const Shape& sizes, const std::vector<const Tensor*>& inputs) {
  std::vector<const Shape*> st;
  for (const Tensor* t : inputs) st.push_back(&t->strides());
  return empty_strided(sizes, output_strides_like(sizes, st), inputs[0]->dtype(), inputs[0]->device());
}
}  // namespace

Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b) {
  const char* name = binary_op_name(op);
  check_inputs(name, a, b);
  check_dtype(name, a.dtype(), op == BinaryOp::Div);
  const Shape sizes = broadcast_shapes(a.sizes(), b.sizes(), name);
  const Tensor ea = a.expand(sizes), eb = b.expand(sizes);
  Tensor out = new_output(sizes, {&ea, &eb});
  run_binary(op, out, ea, eb);
  return out;
}

Tensor& binary_out(BinaryOp op, Tensor& out, const Tensor& a, const Tensor& b) {
  return binary_out_named(binary_op_name(op), op, out, a, b);
}

Tensor binary(BinaryOp op, const Tensor& a, double b) {
  const char* name = binary_op_name(op);
  SB_CHECK(a.defined(), name, ": undefined input tensor");
  check_dtype(name, a.dtype(), op == BinaryOp::Div);
  check_int_scalar(name, a.dtype(), b);
  Tensor out = new_output(a.sizes(), {&a});
  run_binary_scalar(op, out, a, b);
  return out;
}

Tensor& binary_out(BinaryOp op, Tensor& out, const Tensor& a, double b) {
  return binary_scalar_out_named(binary_op_name(op), op, out, a, b);
}

Tensor unary(UnaryOp op, const Tensor& a) {
  const char* name = unary_op_name(op);
  SB_CHECK(a.defined(), name, ": undefined input tensor");
  check_dtype(name, a.dtype(), op == UnaryOp::Exp || op == UnaryOp::Sqrt);
  Tensor out = new_output(a.sizes(), {&a});
  run_unary(op, out, a);
  return out;
}

Tensor& unary_out(UnaryOp op, Tensor& out, const Tensor& a) { return unary_out_named(unary_op_name(op), op, out, a); }

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

#define SB_DEFINE_BINARY(name, OPV)                                                                         \
  Tensor name(const Tensor& a, const Tensor& b) { return binary(OPV, a, b); }                               \
  Tensor& name##_out(Tensor& out, const Tensor& a, const Tensor& b) {                                       \
    return binary_out_named(#name "_out", OPV, out, a, b);                                                  \
  }                                                                                                         \
  Tensor name(const Tensor& a, double b) { return binary(OPV, a, b); }                                      \
  Tensor& name##_out(Tensor& out, const Tensor& a, double b) {                                              \
    return binary_scalar_out_named(#name "_out", OPV, out, a, b);                                           \
  }
SB_DEFINE_BINARY(add, BinaryOp::Add)
SB_DEFINE_BINARY(sub, BinaryOp::Sub)
SB_DEFINE_BINARY(mul, BinaryOp::Mul)
SB_DEFINE_BINARY(div, BinaryOp::Div)
SB_DEFINE_BINARY(maximum, BinaryOp::Maximum)
SB_DEFINE_BINARY(minimum, BinaryOp::Minimum)
#undef SB_DEFINE_BINARY

#define SB_DEFINE_UNARY(name, OPV)                                   \
  Tensor name(const Tensor& a) { return unary(OPV, a); }             \
  Tensor& name##_out(Tensor& out, const Tensor& a) { return unary_out_named(#name "_out", OPV, out, a); }
SB_DEFINE_UNARY(neg, UnaryOp::Neg)
SB_DEFINE_UNARY(abs, UnaryOp::Abs)
SB_DEFINE_UNARY(relu, UnaryOp::Relu)
SB_DEFINE_UNARY(exp, UnaryOp::Exp)
SB_DEFINE_UNARY(sqrt, UnaryOp::Sqrt)
#undef SB_DEFINE_UNARY

// ---------------------------------------------------------------- in-place Tensor methods

#define SB_DEFINE_INPLACE_BINARY(name, OPV)                                                           \
  Tensor& Tensor::name##_(const Tensor& other) { return binary_out_named(#name "_", OPV, *this, *this, other); } \
  Tensor& Tensor::name##_(double other) { return binary_scalar_out_named(#name "_", OPV, *this, *this, other); }
SB_DEFINE_INPLACE_BINARY(add, BinaryOp::Add)
SB_DEFINE_INPLACE_BINARY(sub, BinaryOp::Sub)
SB_DEFINE_INPLACE_BINARY(mul, BinaryOp::Mul)
SB_DEFINE_INPLACE_BINARY(div, BinaryOp::Div)
#undef SB_DEFINE_INPLACE_BINARY

Tensor& Tensor::maximum_(const Tensor& other) { return binary_out_named("maximum_", BinaryOp::Maximum, *this, *this, other); }
Tensor& Tensor::minimum_(const Tensor& other) { return binary_out_named("minimum_", BinaryOp::Minimum, *this, *this, other); }
Tensor& Tensor::neg_() { return unary_out_named("neg_", UnaryOp::Neg, *this, *this); }
Tensor& Tensor::abs_() { return unary_out_named("abs_", UnaryOp::Abs, *this, *this); }
Tensor& Tensor::relu_() { return unary_out_named("relu_", UnaryOp::Relu, *this, *this); }
Tensor& Tensor::exp_() { return unary_out_named("exp_", UnaryOp::Exp, *this, *this); }
Tensor& Tensor::sqrt_() { return unary_out_named("sqrt_", UnaryOp::Sqrt, *this, *this); }
Tensor& Tensor::normalize_(int64_t dim, double eps) { return normalize_out_named("normalize_", *this, *this, dim, eps); }

}  // namespace sb
