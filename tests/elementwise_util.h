// elementwise_util.h — what elementwise_test.cpp and normalize_test.cpp share: random
// values per dtype, broadcast and normalize references, tolerances per dtype, and the
// loop over every SIMD level and thread count.
#pragma once
#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "stridebench/cpu_features.h"
#include "stridebench/parallel.h"
#include "test_util.h"

namespace sb::ewtest {

// Random values in a useful range for dtype: [-2, 2) for floats, integers in [-50, 50)
// for int32, independent in every dim (the Expanded layout's own values: layout_values).
// Values are rounded to the dtype, so the float64 reference sees what the kernel sees.
inline Tensor values(const Shape& sz, uint64_t seed, DType dt, bool positive = false) {
  std::vector<double> v = rand(sz, seed, DType::Float64).to_vector();
  for (double& x : v) x = dt == DType::Int32 ? std::floor(100 * x - 50) : positive ? 0.125 + 4 * x : 4 * x - 2;
  return from_vector(v, sz).to(dt);
}

// The values of t (row-major over its sizes) seen through the broadcast sizes `to`.
inline std::vector<double> broadcast_values(const Tensor& t, const Shape& to) {
  const std::vector<double> v = t.to_vector();
  const int64_t n = checked_numel(to, "test");
  std::vector<double> r(n);
  const size_t lead = to.size() - t.sizes().size();
  Shape idx(to.size(), 0);  // the index of element i
  for (int64_t i = 0; i < n; ++i, test::next_index(idx, to)) {
    int64_t flat = 0;
    for (size_t d = 0; d < t.sizes().size(); ++d) flat = flat * t.sizes()[d] + (t.sizes()[d] == 1 ? 0 : idx[lead + d]);
    r[i] = v[flat];
  }
  return r;
}

// Round a float64 reference to what the dtype can hold (int32 wraps as the kernels do).
inline std::vector<double> round_to(std::vector<double> v, DType dt) {
  if (dt == DType::Int32)
    for (double& x : v) x = static_cast<double>(static_cast<int32_t>(static_cast<uint32_t>(static_cast<int64_t>(x))));
  return v;
}

inline double atol(DType dt) { return test::default_atol(dt); }
// A tolerance of float64, float32 and float16 results; bfloat16's is float16's times 8,
// the ratio of their units of rounding (2^-8 and 2^-11).
inline double by_dtype(DType dt, double f64, double f32, double f16) {
  return dt == DType::Float64 ? f64 : dt == DType::Float32 ? f32 : dt == DType::BFloat16 ? 8 * f16 : f16;
}
inline double rtol(DType dt, bool transcendental = false) {
  return dt == DType::Float32 && transcendental ? 2e-6 : test::default_rtol(dt);
}

// Population mean/variance along dim, in float64. inv_sd: each element's 1 / sqrt(var + eps).
inline std::vector<double> ref_normalize(const Tensor& xv, int64_t dim, double eps, std::vector<double>* inv_sd = nullptr) {
  const std::vector<double> x = xv.to_vector();
  std::vector<double> r(x.size());
  if (inv_sd) inv_sd->assign(x.size(), 1 / std::sqrt(eps));
  const Shape& sz = xv.sizes();
  if (sz.empty()) return std::vector<double>(x.size(), 0.0);
  int64_t inner = 1;
  for (size_t d = static_cast<size_t>(dim) + 1; d < sz.size(); ++d) inner *= sz[d];
  const int64_t n = sz[dim], outer = n * inner != 0 ? static_cast<int64_t>(x.size()) / (n * inner) : 0;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t in = 0; in < inner; ++in) {
      // mean = x0 + sum(x - x0) / n: exact for a constant row (the Expanded layout's values have
      // some), whose output (x - m) / sqrt(eps) would otherwise be the reference's own
      // rounding error times 316
      const double x0 = x[o * n * inner + in];
      double m = 0, v = 0;
      for (int64_t i = 0; i < n; ++i) m += x[(o * n + i) * inner + in] - x0;
      m = x0 + m / static_cast<double>(n);
      for (int64_t i = 0; i < n; ++i) v += (x[(o * n + i) * inner + in] - m) * (x[(o * n + i) * inner + in] - m);
      v /= static_cast<double>(n);
      for (int64_t i = 0; i < n; ++i) r[(o * n + i) * inner + in] = (x[(o * n + i) * inner + in] - m) / std::sqrt(v + eps);
      if (inv_sd)
        for (int64_t i = 0; i < n; ++i) (*inv_sd)[(o * n + i) * inner + in] = 1 / std::sqrt(v + eps);
    }
  return r;
}

// Runs `body` under each SIMD level and thread count.
inline void for_each_config(const std::function<void(const std::string&)>& body) {
  // AVX512: the strided-output stores (Note [Masked stores]); every other kernel is AVX2 there
  for (SimdLevel simd : {SimdLevel::AVX512, SimdLevel::AVX2, SimdLevel::Scalar}) {
    if (simd > compiled_simd_level()) continue;
    for (int threads : {1, 2}) {
      set_simd_level(simd);
      set_num_threads(threads);
      body(std::string(simd_level_name(simd)) + ", " + std::to_string(threads) + " threads");
    }
  }
  set_simd_level(compiled_simd_level());
  set_num_threads(2);
}

// Random shapes: small ones of 0-4 dims with sizes 0, 1, odd, not multiples of 8,
// and every few trials one over kGrainSize elements so that 2 threads really split.
inline Shape trial_shape(std::mt19937_64& rng, int trial) {
  if (trial % 5 == 4) return {2, 3, 67, 97};  // 38994 elements
  return test::random_shape(rng, static_cast<int>(rng() % 5), 11);
}

// b's shape: a with random dims set to 1, some leading dims dropped.
inline Shape broadcast_partner(std::mt19937_64& rng, const Shape& a) {
  Shape b = a;
  for (auto& s : b)
    if (rng() % 3 == 0) s = 1;
  const size_t drop = b.empty() ? 0 : rng() % (b.size() + 1);
  return Shape(b.begin() + static_cast<int64_t>(drop), b.end());
}

}  // namespace sb::ewtest
