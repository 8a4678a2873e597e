// op_math.h — the elementwise ops' arithmetic: BinaryFn<OP> and UnaryFn<OP> on one
// element and on one AVX2 register (float32 lanes for float32/float16/bfloat16, double
// lanes, int32 lanes), and exp's polynomial. Internal to elementwise.cpp, its only
// includer (the definitions sit in an anonymous namespace, one copy per program).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "stridebench/elementwise.h"
#include "elementwise/strips.h"

#ifdef SB_HAVE_AVX2
#include <immintrin.h>
#endif

namespace sb {
namespace {

using namespace ew;  // acc_t (elementwise/strips.h)



// int32 add/sub/mul/neg wrap around (two's complement), as PyTorch's do in practice.
inline int32_t wrap(uint32_t v) { return static_cast<int32_t>(v); }

template <BinaryOp OP>
struct BinaryFn {
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
struct BinaryScalarFn {
  A s;
  A operator()(A x) const { return BinaryFn<OP>{}(x, s); }
#ifdef SB_HAVE_AVX2
  __m256 operator()(__m256 x) const { return BinaryFn<OP>{}(x, _mm256_set1_ps(static_cast<float>(s))); }
  __m256d operator()(__m256d x) const { return BinaryFn<OP>{}(x, _mm256_set1_pd(static_cast<double>(s))); }
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
struct UnaryFn {
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

}  // namespace
}  // namespace sb
