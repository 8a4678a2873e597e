// normalize_test.cpp — normalize (lib/elementwise/normalize*.cpp) against float64 and
// long double references: every dim, layout, style and dtype; rows built to break
// one-pass statistics on every path; degenerate variances; the one-pass statistics and
// their fallback; fused groups; rows from memory; streaming outputs; every device.
#include <cmath>
#include <cstring>
#include <functional>
#include <numeric>

#include "core/test_hooks.h"
#include "copy/copy.h"
#include "elementwise_util.h"
#include "stridebench/cpu_features.h"
#include "stridebench/elementwise.h"
#include "stridebench/parallel.h"
#include "test_util.h"

namespace sb {
namespace {

using test::all_close;
using test::Layout;
using namespace ewtest;

// Issue #45, Deliver 4: normalize along the last dim, on every path a row can take
// (Note [Short normalize rows] with Note [One statistics pass]'s guard, Note [Fused
// normalize groups], Note [Normalize rows in address order] for x beyond the streaming
// threshold, Note [Normalize across adjacent rows] for a transposed x, Note [16-bit
// normalize rows through float32]), with rows built to break one-pass statistics: the
// first element 200 sd from the rest (a sum shifted by it cancels by 1 + ((x0 - mean) /
// sd)^2), the first 8 elements 60 sd away (the shift of Note [One statistics pass] is
// their mean), the last element far away, and Gaussian rows around 300 (a large mean).
// Against two passes in long double over the dtype's own values; every SIMD level and
// thread count.
TEST(Elementwise, NormalizeRowsFarFromTheirMeanOnEveryPath) {
  struct Case {
    int64_t rows, n;
    bool big;  // beyond the streaming threshold: float32 only
  };
  const Case cases[] = {{24, 16, false}, {24, 64, false}, {24, 256, false}, {16, 1000, false},
                        {8, 3000, false}, {12288, 128, true}, {640, 3000, true}};
  for_each_config([&](const std::string& cfg) {
    for (const Case& c : cases)
      for (DType dt : {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16}) {
        if (c.big && dt != DType::Float32) continue;
        std::vector<double> v = randn({c.rows, c.n}, static_cast<uint64_t>(c.rows * 7 + c.n), DType::Float64).to_vector();
        const bool narrow = dt == DType::Float16 || dt == DType::BFloat16;
        const double mu = narrow ? 3.0 : 300.0, far = narrow ? 40.0 : 200.0;
        for (int64_t r = 0; r < c.rows; ++r) {
          double* row = v.data() + r * c.n;
          for (int64_t i = 0; i < c.n; ++i) row[i] += mu;
          if (r % 4 == 0) row[0] = mu + far;
          if (r % 4 == 1)
            for (int64_t i = 0; i < std::min<int64_t>(8, c.n); ++i) row[i] += 60.0;
          if (r % 4 == 2) row[c.n - 1] = mu - far;
        }
        const Tensor xv = from_vector(v, {c.rows, c.n}).to(dt);
        const std::vector<double> xs = xv.to_vector();
        std::vector<double> ref(xs.size());
        for (int64_t r = 0; r < c.rows; ++r) {
          const double* row = xs.data() + r * c.n;
          long double m = 0, q = 0;
          for (int64_t i = 0; i < c.n; ++i) m += row[i];
          m /= c.n;
          for (int64_t i = 0; i < c.n; ++i) q += (row[i] - m) * (row[i] - m);
          const long double rs = 1.0L / std::sqrt(q / c.n + 1e-5L);
          for (int64_t i = 0; i < c.n; ++i) ref[r * c.n + i] = static_cast<double>((row[i] - m) * rs);
        }
        const double at = by_dtype(dt, 1e-13, 1e-4, 1e-2), rt = by_dtype(dt, 1e-13, 1e-5, 4e-3);
        for (Layout lx : {Layout::Contiguous, Layout::Transposed}) {
          if (c.big && lx == Layout::Transposed && c.n > 1000) continue;  // the slow adjacent-row walk at 7.7 MB
          const Tensor x = test::with_layout(xv, lx);
          Tensor out = zeros({c.rows, c.n}, dt);
          test::poison(out);
          normalize_out(out, x, -1, 1e-5);
          ASSERT_TRUE(test::all_close(out, ref, at, rt))
              << cfg << ", " << dtype_name(dt) << ", " << c.rows << " x " << c.n << ", x " << test::layout_name(lx);
          const Tensor y = normalize(x, 1, 1e-5);  // out-of-place: its own output layout
          ASSERT_TRUE(test::all_close(y, ref, at, rt))
              << cfg << ", out-of-place, " << dtype_name(dt) << ", " << c.rows << " x " << c.n << ", x "
              << test::layout_name(lx);
        }
      }
  });
}

// Issue #45, defect 5: normalizing along an outer dim (columns of a [rows, 52] tensor)
// when the first element of every column lies 200 standard deviations from the column's
// mean. Statistics from sums shifted by that element cancel (the variance's relative
// error grows with 1 + ((x0 - mean) / sd)^2, 4e4 here); the reference is two-pass in
// long double. float64 to 1e-13 (a correct result errs by a few ulp of |x| / sd); the
// other dtypes to their usual tolerance. Out contiguous and transposed, every SIMD level
// and thread count.
TEST(Elementwise, NormalizeOuterDimFirstElementFarFromMean) {
  for_each_config([](const std::string& cfg) {
    for (int64_t rows : {2000, 31851}) {
      const int64_t cols = 52;
      std::vector<double> v = randn({rows, cols}, static_cast<uint64_t>(rows), DType::Float64).to_vector();
      for (int64_t c = 0; c < cols; ++c) {
        const double mu = 10.0 * c, sd = 1.0 + c / 4.0;
        for (int64_t i = 0; i < rows; ++i) v[i * cols + c] = mu + sd * v[i * cols + c];
        v[c] = mu + 200.0 * sd;  // row 0
      }
      for (DType dt : {DType::Float64, DType::Float32, DType::Float16, DType::BFloat16}) {
        // bfloat16 at 31851: 16 rows side by side past Note [16-bit strided rows through
        // float32]'s buffers (the generic path); 2000 fit them
        if (rows > 2000 && dt != DType::Float64 && dt != DType::BFloat16) continue;
        const Tensor xv = from_vector(v, {rows, cols}).to(dt);
        const std::vector<double> xs = xv.to_vector();
        std::vector<double> ref(xs.size());
        for (int64_t c = 0; c < cols; ++c) {
          long double m = 0, q = 0;
          for (int64_t i = 0; i < rows; ++i) m += xs[i * cols + c];
          m /= rows;
          for (int64_t i = 0; i < rows; ++i) q += (xs[i * cols + c] - m) * (xs[i * cols + c] - m);
          const long double rs = 1.0L / std::sqrt(q / rows + 1e-5L);
          for (int64_t i = 0; i < rows; ++i) ref[i * cols + c] = static_cast<double>((xs[i * cols + c] - m) * rs);
        }
        const double at = by_dtype(dt, 1e-13, 1e-4, 1e-2), rt = by_dtype(dt, 1e-13, 1e-5, 4e-3);
        for (Layout lo : {Layout::Contiguous, Layout::Transposed}) {
          Tensor out = test::with_layout(zeros({rows, cols}, dt), lo);
          test::poison(out);
          normalize_out(out, xv, 0, 1e-5);
          ASSERT_TRUE(test::all_close(out, ref, at, rt))
              << cfg << ", " << dtype_name(dt) << ", " << rows << " x " << cols << ", out " << test::layout_name(lo);
        }
      }
    }
  });
}

// Note [Normalize across adjacent rows]: the kernel is compiled once per block width
// (NV = 1..8 vectors of rows, masked where kk % 8 != 0) and writes through three store
// paths (out rows dense along i: the 8x8 register transposes and their tail; out dense
// across the rows: vector stores, the last one masked; otherwise the lane buffer). Every
// kk from 1 to 72 (one and two blocks of 64), n below and above the transposes' 8-step,
// each store path, into a poisoned out, against float64, at every SIMD level and thread
// count.
TEST(Elementwise, NormalizeAdjacentRowsEveryBlockWidth) {
  for_each_config([](const std::string& cfg) {
    for (int64_t n : {5, 21}) {
      for (int64_t kk = 1; kk <= 72; ++kk) {
        const Tensor xv = values({n, kk}, static_cast<uint64_t>(100 * n + kk), DType::Float32);
        const std::vector<double> ref = ref_normalize(xv, 0, 1e-5);
        for (Layout lo : {Layout::Contiguous, Layout::Transposed, Layout::Sliced}) {
          Tensor out = test::with_layout(zeros({n, kk}, DType::Float32), lo);
          test::poison(out);
          normalize_out(out, xv, 0, 1e-5);
          ASSERT_TRUE(all_close(out, ref, 1e-4, 1e-5))
              << cfg << ", " << n << " x " << kk << " over dim 0, out " << test::layout_name(lo);
        }
      }
    }
  });
}

// Note [Adjacent rows packed where their strides alias]: normalizing dim 0 of an n x C
// float32 whose rows lie a multiple of 2 or 4 KiB apart (C = 1024 and 1536, and 1000
// columns of a 1024-column buffer: ragged last blocks of 40 rows), n past the packing
// threshold of this machine's L2 and, for 4 KiB, within it: the blocks go through the
// packed copy exactly where the note says (the one-pass blocks on AVX-512, the three
// passes on AVX2 and for a block whose row fails the one-pass guard, a step in column 3;
// the count of packed blocks checked), into a poisoned contiguous and a transposed out
// and in place, against float64, at every SIMD level and thread count.
TEST(Elementwise, NormalizeAdjacentRowsAliasedStridesPacked) {
  const int64_t l2 = cpu_caches().l2 > 0 ? cpu_caches().l2 : int64_t{1} << 20;
  struct Case {
    int64_t cols, width;  // columns normalized, and the buffer's row length (floats)
    int64_t n;
    bool step;            // column 3 a step the guard refuses
  };
  const std::vector<Case> cases = {{1024, 1024, l2 / 8192 + 37, false}, {1000, 1024, l2 / 8192 + 5, false},
                                   {1536, 1536, l2 / 4096 + 11, false}, {1024, 1024, l2 / 8192 - 9, false},
                                   {1024, 1024, l2 / 8192 + 70, true}};
  for_each_config([&](const std::string& cfg) {
    for (const Case& c : cases) {
      std::mt19937_64 rng(static_cast<uint64_t>(c.cols * 7 + c.n));
      std::normal_distribution<double> g(0.0, 1.0);
      std::vector<double> v(static_cast<size_t>(c.n * c.width));
      for (double& e : v) e = 3.0 + g(rng);
      if (c.step)
        for (int64_t i = 0; i < 16; ++i) v[i * c.width + 3] = 1e4 + g(rng);
      const Tensor x = from_vector(v, {c.n, c.width}).to(DType::Float32).narrow(1, 0, c.cols);
      std::vector<double> inv_sd;
      const std::vector<double> ref = ref_normalize(x.contiguous(), 0, 1e-5, &inv_sd);
      std::vector<double> at(ref.size());
      for (size_t i = 0; i < at.size(); ++i) at[i] = 1e-4 * std::max(1.0, 1.2 * inv_sd[i]);
      const int64_t g_bytes = std::gcd(c.width * 4, int64_t{4096});
      const bool pack = simd_level() >= SimdLevel::AVX2 && c.n > l2 / (2 * g_bytes) && c.n * 256 <= l2 / 2;
      const int64_t packed = (c.cols + 63) / 64;  // blocks
      const std::string what = cfg + ", " + std::to_string(c.n) + " x " + std::to_string(c.cols) + " of " +
                               std::to_string(c.width) + (c.step ? ", a step row" : "");
      for (int style = 0; style < 3; ++style) {
        Tensor out;
        const int64_t before = normalize_cols_packed();
        if (style == 2) {
          out = from_vector(v, {c.n, c.width}).to(DType::Float32).narrow(1, 0, c.cols);
          out.normalize_(0, 1e-5);
        } else {
          out = test::with_layout(zeros({c.n, c.cols}), style == 0 ? Layout::Contiguous : Layout::Transposed);
          test::poison(out);
          normalize_out(out, x, 0, 1e-5);
        }
        // 2 threads may split a block of 64 rows in two
        const int64_t got = normalize_cols_packed() - before;
        if (pack) ASSERT_TRUE(got >= packed && got <= packed + get_num_threads() - 1) << what << ", style " << style << ": " << got << " packed blocks, " << packed << " expected";
        else ASSERT_EQ(got, 0) << what << ", style " << style << ": packed blocks";
        ASSERT_TRUE(test::all_close(out, ref, at, 1e-4)) << what << ", style " << style;
      }
    }
  });
}

// Note [Adjacent rows in one pass]: kk adjacent rows (normalizing dim 0 of n x kk) whose
// rows all pass the guard (offset Gaussian columns) take one statistics pass; a block
// with one row that fails it (a step: its first 16 elements far from the rest, n >= 64;
// at n = 13 the first 6, which the guard lets through) goes through the three passes. In a long row the step makes the shifted sums cancel (the
// shift is 500 standard deviations from the mean at n = 8192), so a row let through the
// guard reads wrong. The failing row at lane 0, 9 and kk - 1 of a block (the guard's
// lanes), n short and across flushes (kStatFlush = 1024); beside them a column of 3e38,
// whose shift must not overflow (it reads exactly 0).
TEST(Elementwise, NormalizeAdjacentRowsOnePassAndItsFallback) {
  for_each_config([](const std::string& cfg) {
    for (int64_t n : {13, 64, 1030, 8192}) {
      for (int64_t kk : {16, 40, 64}) {
        for (int64_t bad : {int64_t{-1}, int64_t{0}, int64_t{9}, kk - 1}) {
          std::mt19937_64 rng(static_cast<uint64_t>(n * 100 + kk + bad));
          std::normal_distribution<double> g(0.0, 1.0);
          std::vector<double> v(static_cast<size_t>(n * kk));
          for (double& e : v) e = 200.0 + g(rng);
          if (bad >= 0)
            for (int64_t i = 0; i < n; ++i) v[i * kk + bad] = i < std::min<int64_t>(16, n / 2) ? 1e4 + g(rng) : g(rng);  // a step
          const int64_t huge = bad == 5 ? 6 : 5;
          for (int64_t i = 0; i < n; ++i) v[i * kk + huge] = 3e38;
          const Tensor x = from_vector(v, {n, kk}).to(DType::Float32);
          std::vector<double> inv_sd;
          const std::vector<double> ref = ref_normalize(x, 0, 1e-5, &inv_sd);
          std::vector<double> at(ref.size());
          for (size_t i = 0; i < at.size(); ++i) at[i] = 1e-4 * std::max(1.0, 1.2 * inv_sd[i]);
          const std::string what = cfg + ", " + std::to_string(n) + " x " + std::to_string(kk) + ", step row " +
                                   std::to_string(bad);
          // the block with the step row falls back, from n = 64 on, on the one-pass path
          const int64_t falls = bad >= 0 && n >= 64 && simd_level() == SimdLevel::AVX512 ? 1 : 0;
          for (Layout lo : {Layout::Contiguous, Layout::Transposed}) {
            Tensor out = test::with_layout(zeros({n, kk}), lo);
            test::poison(out);
            const int64_t before = normalize_cols_fallbacks();
            normalize_out(out, x, 0, 1e-5);
            ASSERT_EQ(normalize_cols_fallbacks() - before, falls) << what << ": blocks sent to the three passes";
            ASSERT_TRUE(test::all_close(out, ref, at, 1e-4)) << what << ", out " << test::layout_name(lo);
            const std::vector<double> got = test::naive_values(out);
            for (int64_t i = 0; i < n; ++i) ASSERT_EQ(got[i * kk + huge], 0.0) << what << ": the 3e38 row, element " << i;
          }
        }
      }
    }
  });
}

TEST(Elementwise, NormalizeEveryDimLayoutStyleDtype) {
  for_each_config([](const std::string& cfg) {
    std::mt19937_64 rng(24);
    for (int trial = 0; trial < 14; ++trial) {
      const Shape sz = trial % 7 == 6 ? Shape{2, 300, 77} : trial_shape(rng, trial);
      const int64_t nd = static_cast<int64_t>(sz.size());
      const int64_t dim = nd ? static_cast<int64_t>(rng() % nd) - (trial % 2 ? nd : 0) : 0;  // negative dims too
      const double eps = trial % 3 == 0 ? 0.0 + 1e-5 : 0.5;
      for (DType dt : {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16}) {
        const Tensor xv = values(sz, rng(), dt);
        const std::vector<double> refs[2] = {ref_normalize(xv, nd ? (dim + nd) % nd : 0, eps),  // [1]: Expanded
                                             ref_normalize(test::layout_values(xv, Layout::Expanded),
                                                           nd ? (dim + nd) % nd : 0, eps)};
        // (x - mean) is computed in float for float16/float32: error grows with 1/std
        const double at = by_dtype(dt, 1e-10, 1e-4, 1e-2);
        const double rt = by_dtype(dt, 1e-10, 1e-5, 4e-3);
        for (Layout l : test::all_layouts()) {
          const std::vector<double>& ref = refs[l == Layout::Expanded];
          const std::string what = cfg + ", normalize dim " + std::to_string(dim) + ", " + dtype_name(dt) + ", " +
                                   test::layout_name(l) + ", sizes " + ::testing::PrintToString(sz);
          const Tensor x = test::with_layout(xv, l);
          ASSERT_TRUE(test::all_close(normalize(x, dim, eps), ref, at, rt)) << what << " (out-of-place)";
          Tensor out = test::with_layout(zeros(sz, dt), l == Layout::Expanded ? Layout::ChannelsLast : l);
          test::poison(out);
          normalize_out(out, x, dim, eps);
          ASSERT_TRUE(test::all_close(out, ref, at, rt)) << what << " (out=)";
          if (l == Layout::Expanded) continue;
          Tensor xi = test::with_layout(xv, l);
          xi.normalize_(dim, eps);
          ASSERT_TRUE(test::all_close(xi, ref, at, rt)) << what << " (in-place)";
        }
      }
    }
  });
}

// Rows longer than the kernels' float32 flush interval (1024) along the dense and the
// outer dims, values centred far from 0 (mean 50, uniform over +-2: std ~1.2 in long
// rows), and out= into a layout other than x's (a transposed x written into a contiguous
// out goes through the 8x8 register transposes of Note [Normalize across adjacent rows];
// into a slice, through the element stores; 16-bit rows not dense along dim, through
// Note [16-bit strided rows through float32]). The tolerances are for a row std of 1.2; a
// short row (2-6 values) can have a std near 0.01, and the float32 error of x - mean
// (about 50 * 2^-24) is divided by it, so each element's atol grows as 1.2 / its row's
// sqrt(var + eps) where that is above 1.
TEST(Elementwise, NormalizeLongRowsOffsetValuesMixedOutLayouts) {
  for_each_config([](const std::string& cfg) {
    std::mt19937_64 rng(31);
    for (const Shape& sz : {Shape{3, 2500}, Shape{2500, 19}, Shape{2, 1100, 9}, Shape{4, 6, 70, 5}}) {
      for (int64_t dim = 0; dim < static_cast<int64_t>(sz.size()); ++dim) {
        for (DType dt : {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16}) {
          std::vector<double> v = values(sz, rng(), DType::Float64).to_vector();
          for (double& e : v) e += 50;
          const Tensor xv = from_vector(v, sz).to(dt);
          std::vector<double> inv_sd;
          const std::vector<double> ref = ref_normalize(xv, dim, 1e-5, &inv_sd);
          // float32: (x - mean) in float with |mean| = 50: about 50 * 2^-24 / std
          const double at0 = by_dtype(dt, 1e-10, 1e-4, 2e-2);
          std::vector<double> at(ref.size());
          for (size_t i = 0; i < at.size(); ++i) at[i] = at0 * std::max(1.0, 1.2 * inv_sd[i]);
          const double rt = by_dtype(dt, 1e-10, 1e-5, 4e-3);
          for (Layout lx : {Layout::Contiguous, Layout::Transposed, Layout::Sliced, Layout::ChannelsLast}) {
            const Tensor x = test::with_layout(xv, lx);
            for (Layout lo : {Layout::Contiguous, Layout::Transposed, Layout::Sliced, Layout::ChannelsLast}) {
              Tensor out = test::with_layout(zeros(sz, dt), lo);
              test::poison(out);
              normalize_out(out, x, dim, 1e-5);
              ASSERT_TRUE(test::all_close(out, ref, at, rt))
                  << cfg << ", normalize dim " << dim << ", " << dtype_name(dt) << ", x " << test::layout_name(lx)
                  << ", out " << test::layout_name(lo) << ", sizes " << ::testing::PrintToString(sz);
            }
          }
        }
      }
    }
  });
}

// Note [Normalize rsqrt]: a group of 8 short rows with a zero variance (a constant row,
// eps = 0) takes the double path; the group's other rows must still be right, and the
// constant row reads as on every other path, 0 * inf = NaN, at every SIMD level. The
// same rows side by side (a transposed x) take the adjacent rows' finish.
TEST(Elementwise, NormalizeDegenerateVarianceRowsBesideNormalOnes) {
  for_each_config([](const std::string& cfg) {
    for (int64_t n : {64, 13})
    for (bool adjacent : {false, true}) {  // rows one after another, or side by side (Note [Adjacent rows in one pass])
      std::vector<double> v = values({8, n}, 7, DType::Float64).to_vector();
      for (int64_t j = 0; j < n; ++j) v[5 * n + j] = 3.0;  // constant
      const Tensor x = from_vector(v, {8, n}).to(DType::Float32);
      const std::vector<double> xs = x.to_vector();
      Tensor out = zeros({8, n});
      test::poison(out);
      if (adjacent) normalize_out(out, x.t().contiguous().t(), -1, 0.0);
      else normalize_out(out, x, -1, 0.0);
      const std::string cfg_n = cfg + (adjacent ? ", adjacent rows" : "");
      const std::vector<double> got = test::naive_values(out);
      for (int64_t r = 0; r < 8; ++r) {
        double m = 0, q = 0;
        for (int64_t j = 0; j < n; ++j) m += xs[r * n + j];
        m /= n;
        for (int64_t j = 0; j < n; ++j) q += (xs[r * n + j] - m) * (xs[r * n + j] - m);
        for (int64_t j = 0; j < n; ++j) {
          const double y = got[r * n + j];
          if (r == 5) {
            EXPECT_TRUE(std::isnan(y)) << cfg_n << " constant row, n " << n << ": " << y;
          } else {
            const double ref = (xs[r * n + j] - m) / std::sqrt(q / n);
            EXPECT_NEAR(y, ref, 1e-4 * std::max(1.0, std::fabs(ref))) << cfg_n << " row " << r << " j " << j << " n " << n;
          }
        }
      }
    }
  });
}

// Note [One statistics pass]: groups of 8 short float32 rows whose rows all pass the
// guard (offset Gaussian rows) take one statistics pass; a group with one row that does
// not (a ramp, 8 outliers first in a long row, a constant row of 3e38 whose shift
// overflows) takes the two exact passes for all 8. Without the guard the constant row
// comes out NaN instead of 0.
TEST(Elementwise, NormalizeOneStatisticsPassAndItsFallback) {
  for_each_config([](const std::string& cfg) {
    for (int64_t n : {8, 13, 64, 1024}) {
      std::mt19937_64 rng(static_cast<uint64_t>(n));
      std::normal_distribution<double> g(0.0, 1.0);
      std::vector<double> v(static_cast<size_t>(24 * n));
      for (int64_t r = 0; r < 24; ++r)
        for (int64_t j = 0; j < n; ++j) v[r * n + j] = 200.0 + g(rng);  // group 0 and 2: Gaussian
      for (int64_t j = 0; j < n; ++j) {
        v[8 * n + j] = j < 8 ? 100.0 : 0.01 * g(rng);  // outliers first
        v[9 * n + j] = 200.0 + static_cast<double>(j);  // sorted
        v[10 * n + j] = 3e38;                           // constant: 8 x 3e38 overflows float
      }
      const Tensor x = from_vector(v, {24, n}).to(DType::Float32);
      std::vector<double> inv_sd;
      const std::vector<double> ref = ref_normalize(x, 1, 1e-5, &inv_sd);
      std::vector<double> at(ref.size());
      for (size_t i = 0; i < at.size(); ++i) at[i] = 1e-4 * std::max(1.0, 1.2 * inv_sd[i]);
      Tensor out = zeros({24, n});
      test::poison(out);
      normalize_out(out, x, -1, 1e-5);
      EXPECT_TRUE(test::all_close(out, ref, at, 1e-4)) << cfg << ", n " << n;
    }
  });
}

// A dense float32 tensor of rows x n, poisoned, whose first element lies 2 KiB past x's
// modulo 4 KiB: outside Note [Fused groups and 4K aliasing]'s window whatever addresses
// the allocator hands out, so a call that should take the fused groups does.
Tensor dense_out_apart_from(const Tensor& x, int64_t rows, int64_t n) {
  Tensor buf = empty({rows * n + 1024}, DType::Float32);
  test::poison(buf);
  const auto xa = reinterpret_cast<uintptr_t>(x.data_ptr()), b = reinterpret_cast<uintptr_t>(buf.data_ptr());
  const auto off = static_cast<int64_t>(((xa + 2048 - b) & 4095) / 4);
  return buf.slice(0, off, off + rows * n).view({rows, n});
}

// Note [Fused normalize groups]: float32 rows of 16-256 elements in runs of 16 or more
// rows are normalized two groups of 8 at a time (the statistics of one while the other
// is written), with masked row tails. Rows of Gaussian values around 200; in some groups
// a row that fails the one-pass guard (sorted) or overflows the shift (a constant 3e38,
// whose output must be 0): those groups go to the rows kernel and the pipeline restarts
// after them, at the first group, in the middle and at the last full group; 16 rows
// have none. A constant row in a group that passes must come out exactly 0. x and out
// rows lie apart (padded views, with different paddings), so the kernel must keep x's
// and out's row strides apart; out's padding must keep its poison (no masked tail may
// write past a row). The same rows as stepped slices (stride 2 and 3) are packed before
// the fused groups; the elements between the steps must keep their poison. n = 15 and
// 257 (the rows kernel) sit beside the fused sizes. threshold: the streaming threshold
// for the call (-1: the default).
void normalize_group_cases(int64_t threshold) {
  set_nt_threshold_bytes(threshold);
  for_each_config([threshold](const std::string& cfg) {
    for (int64_t n : {15, 16, 17, 31, 64, 100, 128, 256, 257, 1024, 1025, 3000, 4096}) {
      for (int64_t rows : {16, 24, 31, 64}) {
        std::mt19937_64 rng(static_cast<uint64_t>(n * 1000 + rows));
        std::normal_distribution<double> g(0.0, 1.0);
        std::vector<double> v(static_cast<size_t>(rows * n));
        for (double& e : v) e = 200.0 + g(rng);
        if (rows != 16)
          for (int64_t r : {int64_t{3}, rows >= 64 ? int64_t{17} : int64_t{3}, (rows / 8) * 8 - 2})
            for (int64_t j = 0; j < n; ++j) v[r * n + j] = 200.0 + static_cast<double>(j);  // sorted
        for (int64_t j = 0; j < n; ++j) v[9 * n + j] = 7.25;                              // constant
        if (rows >= 64)
          for (int64_t j = 0; j < n; ++j) v[33 * n + j] = 3e38;  // 8 x 3e38 overflows the shift
        const Tensor xv = from_vector(v, {rows, n}).to(DType::Float32);
        std::vector<double> inv_sd;
        const std::vector<double> ref = ref_normalize(xv, 1, 1e-5, &inv_sd);
        std::vector<double> at(ref.size());
        for (size_t i = 0; i < at.size(); ++i) at[i] = 1e-4 * std::max(1.0, 1.2 * inv_sd[i]);
        const std::string what = cfg + ", n " + std::to_string(n) + ", rows " + std::to_string(rows);

        Tensor xwide = zeros({rows, n + 3});
        Tensor x = xwide.narrow(1, 1, n);
        x.copy_(xv);
        Tensor owide = zeros({rows, n + 7});
        test::poison(owide);
        Tensor out = owide.narrow(1, 2, n);
        normalize_out(out, x, -1, 1e-5);
        ASSERT_TRUE(test::all_close(out, ref, at, 1e-4)) << what << " (out= padded)";
        const std::vector<double> ow = test::naive_values(owide);
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t j = 0; j < n + 7; ++j) {
            const double e = ow[r * (n + 7) + j];
            if (j < 2 || j >= n + 2) {
              ASSERT_TRUE(std::isnan(e)) << what << ": padding written, row " << r << " col " << j;
            } else if (r == 9 || r == 33) {
              ASSERT_EQ(e, 0.0) << what << ": constant row " << r << ", col " << j - 2;
            }
          }
        x.normalize_(-1, 1e-5);
        ASSERT_TRUE(test::all_close(x, ref, at, 1e-4)) << what << " (in place, padded)";
        ASSERT_TRUE(test::all_close(normalize(xv, -1, 1e-5), ref, at, 1e-4)) << what << " (out-of-place)";
        // stepped rows (packed first: stride 2 by its own loop with masked loads at the
        // row's end, stride 3 by the generic pack), out= dense and in place through the
        // steps; the elements between the steps belong to no one here and must stay
        for (int64_t step : {2, 3}) {
          Tensor swide = zeros({rows, n * step});
          test::poison(swide);
          Tensor xs = swide.slice(1, 0, n * step, step);
          xs.copy_(xv);
          const std::string ws = what + ", step " + std::to_string(step);
          Tensor o2 = dense_out_apart_from(xs, rows, n);
          normalize_out(o2, xs, -1, 1e-5);
          ASSERT_TRUE(test::all_close(o2, ref, at, 1e-4)) << ws << " (out= from stepped rows)";
          // Note [Stride-2 fused rows]: the fused groups' float32 arithmetic on the same values as
          // the dense rows', bit for bit, where both take them (rows in the caches: the default
          // streaming threshold; both outs apart from their x, as an out the allocator placed
          // 32-128 bytes past x mod 4 KiB sends the dense rows to the rows kernel)
          const bool bits = step == 2 && n >= 16 && n <= 256 && threshold < 0 && simd_level() >= SimdLevel::AVX512;
          std::vector<double> dense;
          if (bits) {
            Tensor d = dense_out_apart_from(xv, rows, n);
            normalize_out(d, xv, -1, 1e-5);
            dense = test::naive_values(d);
          }
          auto same_bits = [&](const Tensor& t, const char* how) {
            const std::vector<double> got = test::naive_values(t);
            for (size_t i = 0; i < dense.size(); ++i)
              ASSERT_EQ(std::memcmp(&dense[i], &got[i], sizeof(double)), 0)
                  << ws << " (" << how << "): element " << i << " " << got[i] << " against the dense rows' " << dense[i];
          };
          same_bits(o2, "out=");
          if (::testing::Test::HasFatalFailure()) return;
          xs.normalize_(-1, 1e-5);
          ASSERT_TRUE(test::all_close(xs, ref, at, 1e-4)) << ws << " (in place, stepped)";
          same_bits(xs, "in place");
          if (::testing::Test::HasFatalFailure()) return;
          const std::vector<double> sw = test::naive_values(swide);
          for (int64_t i = 0; i < rows * n * step; ++i) {
            if (i % step != 0) {
              ASSERT_TRUE(std::isnan(sw[i])) << ws << ": element between the steps written, " << i;
            }
          }
        }
      }
    }
  });
  set_nt_threshold_bytes(-1);
}

TEST(Elementwise, NormalizeFusedGroupsAgainstReference) { normalize_group_cases(-1); }

// Note [16-bit fused groups]: float16 and bfloat16 rows of 16-256 elements in runs of 16
// or more rows take the fused loop on their own bytes, widened as loaded and rounded as
// stored. Rows of Gaussian values around 3, with sorted rows whose one-pass guard fails
// (their groups and the rows after the last whole group go through a float32 buffer), a
// constant row (exactly 0 out) and, in bfloat16, a row of 3e38 (the shift overflows).
// x and out rows lie apart with different paddings that must keep their poison (the
// 16-bit masked tails); out= at byte offsets from x that do and do not take the fused
// loop (Note [Fused groups and 4K aliasing]); in place. Against the float64 reference,
// and bit for bit against the float32 rows normalized in place and rounded: the same
// arithmetic and the same one rounding on every path. n = 15 and 257 sit beside.
// threshold: the streaming threshold for the call (-1: the default; 0: x comes from
// memory, Note [16-bit rows from memory]: the in-order groups, out-of-place streaming
// where n % 32 == 0, in place and the padded out= with plain stores; their bits are
// those of the float32 rows from memory, normalized in place and rounded, up to n = 256:
// longer float32 rows from memory go one at a time, 16-bit ones through the buffer's
// rows kernel, to the same tolerance but not the same bits).
void normalize_16bit_group_cases(int64_t threshold) {
  set_nt_threshold_bytes(threshold);
  for_each_config([threshold](const std::string& cfg) {
    for (DType dt : {DType::Float16, DType::BFloat16})
      for (int64_t n : {15, 16, 17, 31, 64, 100, 256, 257})
        for (int64_t rows : {16, 24, 31, 64}) {
          std::mt19937_64 rng(static_cast<uint64_t>(n * 1000 + rows));
          std::normal_distribution<double> g(0.0, 1.0);
          std::vector<double> v(static_cast<size_t>(rows * n));
          for (double& e : v) e = 3.0 + g(rng);
          if (rows != 16)
            for (int64_t r : {int64_t{3}, (rows / 8) * 8 - 2})
              for (int64_t j = 0; j < n; ++j) v[r * n + j] = 3.0 + static_cast<double>(j) / 8;  // sorted
          for (int64_t j = 0; j < n; ++j) v[9 * n + j] = 7.25;  // constant
          if (rows >= 64 && dt == DType::BFloat16)
            for (int64_t j = 0; j < n; ++j) v[33 * n + j] = 3e38;
          const Tensor xv = from_vector(v, {rows, n}).to(dt);
          std::vector<double> inv_sd;
          const std::vector<double> ref = ref_normalize(xv, 1, 1e-5, &inv_sd);
          std::vector<double> at(ref.size());
          for (size_t i = 0; i < at.size(); ++i) at[i] = by_dtype(dt, 0, 1e-3, 1e-2) * std::max(1.0, inv_sd[i]);
          const double rt = by_dtype(dt, 0, 1e-3, 4e-3);
          Tensor x32 = xv.to(DType::Float32);
          x32.normalize_(-1, 1e-5);
          const std::vector<double> exact = x32.to(dt).to_vector();
          const std::string what = cfg + ", " + dtype_name(dt) + ", n " + std::to_string(n) + ", rows " +
                                   std::to_string(rows);
          auto check = [&](const Tensor& out, const std::string& how) {
            ASSERT_TRUE(test::all_close(out, ref, at, rt)) << what << " (" << how << ")";
            const std::vector<double> got = out.to_vector();
            for (size_t i = 0; i < got.size() && (threshold != 0 || n <= 256); ++i)
              ASSERT_EQ(got[i], exact[i]) << what << " (" << how << "): element " << i
                                          << " differs from the float32 rows rounded";
            for (int64_t j = 0; j < n; ++j) ASSERT_EQ(got[9 * n + j], 0.0) << what << " (" << how << "): constant row";
          };
          Tensor xwide = zeros({rows, n + 3}, dt);
          Tensor x = xwide.narrow(1, 1, n);
          x.copy_(xv);
          // out's rows padded; out at 0 and 64 bytes past x (mod 4 KiB), and elsewhere
          for (int64_t shift : {int64_t{-1}, int64_t{0}, int64_t{32}}) {
            const int64_t ow_n = n + 7;
            Tensor obuf = empty({rows * ow_n + 2048 + 8}, dt);
            test::poison(obuf);
            int64_t off = 2;
            if (shift >= 0) {  // out's first element `shift` elements past x's, mod 4 KiB
              const auto xa = reinterpret_cast<uintptr_t>(x.data_ptr()), ob = reinterpret_cast<uintptr_t>(obuf.data_ptr());
              off = static_cast<int64_t>(((xa - ob) & 4095) / 2) + shift;
            }
            Tensor out = obuf.slice(0, off, off + rows * ow_n).view({rows, ow_n}).narrow(1, 0, n);
            normalize_out(out, x, -1, 1e-5);
            check(out, "out= padded, shift " + std::to_string(shift));
            const std::vector<double> after = obuf.to_vector();
            const int64_t first = off;
            for (int64_t i = 0; i < static_cast<int64_t>(after.size()); ++i) {
              const int64_t rel = i - first;
              const bool inside = rel >= 0 && rel < rows * ow_n && rel % ow_n < n;
              if (!inside) {
                ASSERT_TRUE(std::isnan(after[i])) << what << ": cell " << i << " outside out written";
              }
            }
          }
          x.normalize_(-1, 1e-5);
          check(x, "in place, padded");
          check(normalize(xv, -1, 1e-5), "out-of-place");
        }
  });
  set_nt_threshold_bytes(-1);
}

TEST(Elementwise, NormalizeSixteenBitFusedGroups) { normalize_16bit_group_cases(-1); }
TEST(Elementwise, NormalizeSixteenBitRowsFromMemory) { normalize_16bit_group_cases(0); }

// Note [Normalize rows in address order]: the same cases with the streaming threshold at
// 0, so that x counts as coming from memory: on AVX-512 the in-order groups for
// 16 <= n <= 256 and the rows one at a time above (the guard's failures to the exact
// passes: the rows kernel's up to 1024, dense_mean and dense_centered above; streaming
// stores for the out-of-place outputs whose rows are 64-byte aligned with n % 16 == 0,
// plain ones for the padded out= rows, and the long-row path for out= rows above 1024
// that would stream unaligned); on AVX2 the rows kernel's in-order passes up to 1024.
TEST(Elementwise, NormalizeRowsFromMemoryAgainstReference) { normalize_group_cases(0); }

// Note [Streaming normalize outputs]: with the streaming threshold at 0, normalize
// streams rows it writes whole: float32 rows through the short-row kernel when n % 8 == 0
// and every output row starts 32-byte aligned (the window's offset a multiple of 8
// elements), float32 rows longer than 1024 and float64/float16 rows through unary_strip's
// streaming loop at any offset, except 16-bit rows of 16-256 elements on AVX-512, which
// stream whole 64-byte aligned rows only (Note [16-bit rows from memory]). Rows whose x
// is strided along dim with adjacent rows (a transposed x) and in-place calls keep plain
// stores. The output is a window of a
// poisoned buffer whose cells around it must stay poisoned; values against the float64
// reference; enough rows for 2 threads to split.
TEST(Elementwise, NormalizeStreamingOutputsAgainstReference) {
  set_nt_threshold_bytes(0);
  for_each_config([](const std::string& cfg) {
    std::mt19937_64 rng(19);
    const bool vec = simd_level() >= SimdLevel::AVX2;
    struct Case {
      DType dt;
      int64_t rows, n, off;
      Layout lx;  // x's layout (Transposed: x.t() of an n x rows tensor, normalized along its dim 1)
      bool want;  // streams, given the vector path
    };
    const std::vector<Case> cases = {
        {DType::Float32, 700, 64, 0, Layout::Contiguous, true},    // short rows, aligned
        {DType::Float32, 700, 64, 8, Layout::Contiguous, true},    // 32-byte aligned window
        {DType::Float32, 700, 64, 3, Layout::Contiguous, false},   // misaligned rows: plain stores
        {DType::Float32, 700, 60, 0, Layout::Contiguous, false},   // n % 8 != 0: plain stores
        {DType::Float32, 700, 64, 0, Layout::Sliced, true},        // packed stepped rows, aligned out
        {DType::Float32, 700, 64, 5, Layout::Sliced, false},
        {DType::Float32, 700, 64, 0, Layout::Transposed, false},   // adjacent rows: plain stores
        {DType::Float32, 23, 3001, 5, Layout::Contiguous, true},   // long rows: unary_strip at any offset
        {DType::Float64, 700, 61, 3, Layout::Contiguous, true},
        {DType::Float16, 700, 64, 7, Layout::Contiguous, true},
        {DType::BFloat16, 700, 64, 3, Layout::Contiguous, true},
        {DType::BFloat16, 700, 64, 0, Layout::Contiguous, true},
        {DType::BFloat16, 700, 64, 0, Layout::Sliced, false},     // stepped rows of 16-bit: plain stores, as float16
    };
    for (const Case& c : cases) {
      const Shape sz{c.rows, c.n};
      const Tensor xv = values(sz, rng(), c.dt);
      Tensor x = xv;
      if (c.lx == Layout::Sliced) {  // every other column of a 2n-wide tensor
        Tensor wide = zeros({c.rows, 2 * c.n}, c.dt);
        x = wide.slice(1, 0, std::nullopt, 2);
        x.copy_(xv);
      } else if (c.lx == Layout::Transposed) {
        x = xv.t().contiguous().t();
      }
      const std::vector<double> ref = ref_normalize(xv, 1, 1e-5);
      const double at = by_dtype(c.dt, 1e-10, 1e-4, 1e-2);
      const double rt = by_dtype(c.dt, 1e-10, 1e-5, 4e-3);
      const std::string what = cfg + ", " + dtype_name(c.dt) + ", " + std::to_string(c.rows) + " x " +
                               std::to_string(c.n) + ", x " + test::layout_name(c.lx) + ", offset " +
                               std::to_string(c.off);
      // Note [16-bit rows from memory]: on AVX-512 (bfloat16: with AVX512_BF16) these rows
      // stream only whole 64-byte aligned rows; misaligned ones take plain stores
      bool want = c.want;
      const bool narrow = c.dt == DType::Float16 || c.dt == DType::BFloat16;
      if (narrow && c.lx == Layout::Contiguous && simd_level() == SimdLevel::AVX512 &&
          (c.dt == DType::Float16 || cpu_has_avx512_bf16()))
        want = want && c.off % 32 == 0 && c.n % 32 == 0;
      const int64_t numel = c.rows * c.n;
      Tensor buf = empty({numel + c.off + 9}, c.dt);
      test::poison(buf);
      const std::vector<double> before = buf.to_vector();
      Tensor out = buf.slice(0, c.off, c.off + numel).view(sz);
      normalize_out(out, x, -1, 1e-5);
      ASSERT_EQ(last_elementwise_used_nt(), vec && want) << what;
      ASSERT_TRUE(test::all_close(out, ref, at, rt)) << what;
      const std::vector<double> after = buf.to_vector();
      for (int64_t i = 0; i < c.off; ++i) ASSERT_TRUE(std::memcmp(&after[i], &before[i], 8) == 0) << what << " cell " << i;
      for (int64_t i = c.off + numel; i < numel + c.off + 9; ++i)
        ASSERT_TRUE(std::memcmp(&after[i], &before[i], 8) == 0) << what << " cell " << i;
      if (c.lx == Layout::Contiguous && c.off == 0) {
        const Tensor r = normalize(x, -1, 1e-5);  // out-of-place: a fresh dense output
        ASSERT_EQ(last_elementwise_used_nt(), vec && want) << what << " (out-of-place)";
        ASSERT_TRUE(test::all_close(r, ref, at, rt)) << what << " (out-of-place)";
      }
      Tensor xi = x.clone();
      xi.normalize_(-1, 1e-5);
      ASSERT_FALSE(last_elementwise_used_nt()) << what << " (normalize_ in place must not stream)";
      ASSERT_TRUE(test::all_close(xi, ref, at, rt)) << what << " (in place)";
    }
  });
  set_nt_threshold_bytes(-1);
  const Tensor s = values({4, 64}, 3, DType::Float32);  // at the default threshold: no streaming
  (void)normalize(s, -1);
  EXPECT_FALSE(last_elementwise_used_nt());
}

// ---------------------------------------------------------------- on every device
// (Note [Device-parameterized tests] in test_util.h)

class NormalizeOnDevice : public ::testing::TestWithParam<Device> {};

TEST_P(NormalizeOnDevice, EveryDimDtypeLayout) {
  const Device dev = GetParam();
  SB_SKIP_WITHOUT_DEVICE(dev);
  for (DType dt : {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16}) {
    for (const Shape& s : test::mixed_shapes(41, 4)) {
      if (s.empty()) continue;
      for (int64_t dim = 0; dim < static_cast<int64_t>(s.size()); ++dim) {
        for (Layout l : test::all_layouts()) {
          const auto vx = test::stored(test::random_values(s, 6, dt, -3, 3, l == Layout::Expanded), s, dt);
          Tensor x = test::on_device(dev, vx, s, dt, l);
          Tensor out = test::poisoned_on(dev, s, dt, l);
          normalize_out(out, x, dim, 1e-5);
          // reference: for every row along dim
          std::vector<double> ref(vx.size());
          const int64_t n = static_cast<int64_t>(vx.size()), len = s[dim];
          int64_t inner = 1;
          for (size_t d = dim + 1; d < s.size(); ++d) inner *= s[d];
          for (int64_t i = 0; i < n; ++i) {
            const int64_t base = (i / (inner * len)) * inner * len + i % inner;
            double m = 0, q = 0;
            for (int64_t k = 0; k < len; ++k) m += vx[base + k * inner];
            m /= len;
            for (int64_t k = 0; k < len; ++k) q += (vx[base + k * inner] - m) * (vx[base + k * inner] - m);
            ref[i] = (vx[i] - m) / std::sqrt(q / len + 1e-5);
          }
          const double tol = by_dtype(dt, 1e-10, 1e-4, 1e-2);
          EXPECT_TRUE(all_close(out, ref, tol, tol)) << dt << " dim " << dim << " " << test::layout_name(l) << " " << test::shape_str(s);
        }
      }
    }
  }
}

// A 0-D tensor is one row of one element on every device: (x - x) / sqrt(0 + eps) is 0,
// and NaN where eps = 0 (0 * inf, as a constant row's), along dim 0 or -1, in every style.
TEST_P(NormalizeOnDevice, ZeroDimTensorIsOneRowOfOneElement) {
  const Device dev = GetParam();
  SB_SKIP_WITHOUT_DEVICE(dev);
  for (DType dt : {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16}) {
    for (int64_t dim : {0, -1}) {
      const std::string what = std::string(dtype_name(dt)) + " dim " + std::to_string(dim);
      const Tensor x = test::on_device(dev, {1.5}, {}, dt, Layout::Contiguous);
      EXPECT_TRUE(all_close(normalize(x, dim, 1e-5), {0.0}, 0, 0)) << what << " (out-of-place)";
      EXPECT_TRUE(all_close(normalize(x, dim, 0.0), {std::nan("")}, 0, 0)) << what << " (eps 0)";
      Tensor out = test::poisoned_on(dev, {}, dt, Layout::Contiguous);
      normalize_out(out, x, dim, 1e-5);
      EXPECT_TRUE(all_close(out, {0.0}, 0, 0)) << what << " (out=)";
      Tensor xi = test::on_device(dev, {-2.0}, {}, dt, Layout::Contiguous);
      xi.normalize_(dim, 0.5);
      EXPECT_TRUE(all_close(xi, {0.0}, 0, 0)) << what << " (in place)";
      EXPECT_TRUE(all_close(x, {1.5}, 0, 0)) << what << ": the input changed";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, NormalizeOnDevice, ::testing::ValuesIn(test::test_devices()),
                         test::device_param_name);

}  // namespace
}  // namespace sb
