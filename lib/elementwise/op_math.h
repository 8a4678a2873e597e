// op_math.h — the elementwise ops' arithmetic: BinaryFn<OP> and UnaryFn<OP> on one
// element (int32 wrapping included) and on one register of float or double lanes,
// written once against vec.h's lane operations (Note [One vector layer]), and their
// 512-bit twins for the bfloat16 rows (zmm_of: Note [bfloat16 rows in zmm]). Internal to
// elementwise.cpp, its only includer (the definitions sit in an anonymous namespace, one
// copy per program).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "core/vec.h"
#include "elementwise/strips.h"
#include "stridebench/elementwise.h"

namespace sb {
namespace {

using namespace ew;  // acc_t (elementwise/strips.h)

// int32 add/sub/mul/neg wrap around (two's complement), as PyTorch's do in practice.
inline int32_t wrap(uint32_t v) { return static_cast<int32_t>(v); }

// Each functor: operator() on one element of an arithmetic type, and (AVX2 builds) on
// one register of float or double lanes.
template <BinaryOp OP>
struct BinaryFn {
  template <typename A>
  std::enable_if_t<std::is_arithmetic_v<A>, A> operator()(A x, A y) const {
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
  // one register of float lanes (float32, float16, bfloat16 data) or double lanes
  template <typename V>
  std::enable_if_t<!std::is_arithmetic_v<V>, V> operator()(V x, V y) const {
    using L = vec::LanesOf<V>;
    if constexpr (OP == BinaryOp::Add) return L::add(x, y);
    if constexpr (OP == BinaryOp::Sub) return L::sub(x, y);
    if constexpr (OP == BinaryOp::Mul) return L::mul(x, y);
    if constexpr (OP == BinaryOp::Div) return L::div(x, y);
    if constexpr (OP == BinaryOp::Maximum) return L::maximum(x, y);
    if constexpr (OP == BinaryOp::Minimum) return L::minimum(x, y);
    return x;
  }
#endif
};

// x OP s with the scalar s fixed (tensor-scalar ops).
template <BinaryOp OP, typename A>
struct BinaryScalarFn {
  A s;
  template <typename X>
  std::enable_if_t<std::is_arithmetic_v<X>, X> operator()(X x) const {
    return BinaryFn<OP>{}(x, static_cast<X>(s));
  }
#ifdef SB_HAVE_AVX2
  template <typename V>
  std::enable_if_t<!std::is_arithmetic_v<V>, V> operator()(V x) const {
    return BinaryFn<OP>{}(x, vec::LanesOf<V>::set1(s));
  }
#endif
};

template <UnaryOp OP>
struct UnaryFn {
  template <typename A>
  std::enable_if_t<std::is_arithmetic_v<A>, A> operator()(A x) const {
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
  template <typename V>
  std::enable_if_t<!std::is_arithmetic_v<V>, V> operator()(V x) const {
    using L = vec::LanesOf<V>;
    if constexpr (OP == UnaryOp::Neg) return L::neg(x);
    if constexpr (OP == UnaryOp::Abs) return L::abs(x);
    if constexpr (OP == UnaryOp::Relu) return L::relu(x);  // NaN: returns x
    if constexpr (OP == UnaryOp::Exp) return L::exp(x);
    if constexpr (OP == UnaryOp::Sqrt) return L::sqrt(x);
    return x;
  }
#endif
};

#ifdef SB_HAVE_AVX512
// The 512-bit twins of the functors' register forms (Note [bfloat16 rows in zmm] in
// strips.h): the same lane arithmetic on 16 float lanes, found by zmm_of. Their target
// is AVX-512F; only loops compiled for it (and checked for it at run time) call them.
// The all-ones masked forms: GCC 12 warns (-Wmaybe-uninitialized) on the plain ones.
#define SB_ZMM __attribute__((target("avx512f"), always_inline))
template <BinaryOp OP>
struct ZmmBinary {
  SB_ZMM __m512 operator()(__m512 x, __m512 y) const {
    if constexpr (OP == BinaryOp::Add) return _mm512_add_ps(x, y);
    if constexpr (OP == BinaryOp::Sub) return _mm512_sub_ps(x, y);
    if constexpr (OP == BinaryOp::Mul) return _mm512_mul_ps(x, y);
    if constexpr (OP == BinaryOp::Div) return _mm512_div_ps(x, y);
    // as F32Lanes::maximum/minimum: max_ps/min_ps, x + y (a NaN) where either is NaN
    if constexpr (OP == BinaryOp::Maximum)
      return _mm512_mask_add_ps(_mm512_maskz_max_ps(0xFFFF, x, y), _mm512_cmp_ps_mask(x, y, _CMP_UNORD_Q), x, y);
    if constexpr (OP == BinaryOp::Minimum)
      return _mm512_mask_add_ps(_mm512_maskz_min_ps(0xFFFF, x, y), _mm512_cmp_ps_mask(x, y, _CMP_UNORD_Q), x, y);
    return x;
  }
};
template <BinaryOp OP>
struct ZmmBinaryScalar {
  float s;
  SB_ZMM __m512 operator()(__m512 x) const { return ZmmBinary<OP>{}(x, _mm512_set1_ps(s)); }
};
template <UnaryOp OP>
struct ZmmUnary {
  // The same ops on 32 bfloat16 lanes of bits (Note [bfloat16 sign ops on bits] in strips.h).
  static constexpr bool kBits16 = OP == UnaryOp::Relu || OP == UnaryOp::Neg || OP == UnaryOp::Abs;
  __attribute__((target("avx512f,avx512bw"), always_inline)) __m512i bits16(__m512i v) const {
    const __m512i sign = _mm512_set1_epi16(static_cast<short>(0x8000));
    __m512i r = v;
    if constexpr (OP == UnaryOp::Neg) r = _mm512_xor_si512(v, sign);
    if constexpr (OP == UnaryOp::Abs) r = _mm512_maskz_andnot_epi32(0xFFFF, sign, v);
    // relu keeps +0 .. +NaN, -0 and the negative NaNs: v - 1 >= -128 as int16
    if constexpr (OP == UnaryOp::Relu) {
      const __m512i v1 = _mm512_sub_epi16(v, _mm512_set1_epi16(1));
      r = _mm512_maskz_mov_epi16(_mm512_cmpgt_epi16_mask(v1, _mm512_set1_epi16(-129)), v);
    }
    // a NaN (|v| > 0x7F80, i.e. 2v > 0xFF00 unsigned) gets its quiet bit
    const __m512i twice = _mm512_add_epi16(v, v);
    const __mmask32 nan = _mm512_cmpgt_epu16_mask(twice, _mm512_set1_epi16(static_cast<short>(0xFF00)));
    return _mm512_mask_mov_epi16(r, nan, _mm512_or_si512(r, _mm512_set1_epi16(0x40)));
  }
  SB_ZMM __m512 operator()(__m512 x) const {
    if constexpr (OP == UnaryOp::Neg || OP == UnaryOp::Abs) {  // the sign bit flipped or cleared
      const __m512i sign = _mm512_set1_epi32(static_cast<int>(0x80000000u)), v = _mm512_castps_si512(x);
      return _mm512_castsi512_ps(OP == UnaryOp::Neg ? _mm512_xor_si512(v, sign) : _mm512_maskz_andnot_epi32(0xFFFF, sign, v));
    }
    // max(0, x) as F32Lanes::relu (NaN stays)
    if constexpr (OP == UnaryOp::Relu) return _mm512_mask_max_ps(x, 0xFFFF, _mm512_setzero_ps(), x);
    if constexpr (OP == UnaryOp::Sqrt) return _mm512_maskz_sqrt_ps(0xFFFF, x);
    if constexpr (OP == UnaryOp::Exp) {  // Note [Vector exp], on each half
      const __m512d d = _mm512_castps_pd(x);
      const __m256d z = _mm256_setzero_pd();
      const __m256 lo = vec::F32Lanes::exp(_mm256_castpd_ps(_mm512_mask_extractf64x4_pd(z, 0xF, d, 0)));
      const __m256 hi = vec::F32Lanes::exp(_mm256_castpd_ps(_mm512_mask_extractf64x4_pd(z, 0xF, d, 1)));
      return _mm512_castpd_ps(
          _mm512_maskz_insertf64x4(0xFF, _mm512_maskz_insertf64x4(0xFF, _mm512_setzero_pd(), _mm256_castps_pd(lo), 0),
                                   _mm256_castps_pd(hi), 1));
    }
    return x;
  }
};
#undef SB_ZMM
template <BinaryOp OP>
ZmmBinary<OP> zmm_of(const BinaryFn<OP>&) {
  return {};
}
template <BinaryOp OP, typename A>
std::conditional_t<std::is_floating_point_v<A>, ZmmBinaryScalar<OP>, NoZmm> zmm_of(const BinaryScalarFn<OP, A>& f) {
  if constexpr (std::is_floating_point_v<A>) return {static_cast<float>(f.s)};
  else return {};
}
template <UnaryOp OP>
ZmmUnary<OP> zmm_of(const UnaryFn<OP>&) {
  return {};
}
#endif

}  // namespace
}  // namespace sb
