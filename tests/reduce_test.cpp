// reduce_test.cpp — sum, mean, max, var, std (lib/reduce/) against naive float64
// loops: random shapes and dim sets (negative, empty = all), keepdim, every input
// layout, out= into poisoned outputs of several layouts, 1 and 2 threads, AVX2 and
// scalar, shapes large enough for the split, vertical and flush paths, a large-mean
// var, NaN propagation, and the bad inputs.
#include "stridebench/reduce.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <optional>

#include "stridebench/cpu_features.h"
#include "stridebench/parallel.h"
#include "cases/reduce.h"
#include "test_util.h"

#ifdef SB_WITH_CUDA
#include "cuda/cuda_backend.h"
#endif

namespace sb {
namespace {

using test::all_close;
using test::Layout;

// The reference: float64 (long double for the deviations) over the row-major values.
std::vector<double> reference(ReduceOp op, const Tensor& x, const std::vector<bool>& red, int64_t corr) {
  const std::vector<double> v = x.to_vector();
  const Shape& sz = x.sizes();
  Shape kept;
  for (size_t i = 0; i < sz.size(); ++i)
    if (!red[i]) kept.push_back(sz[i]);
  int64_t nout = 1, n = 1;
  for (size_t i = 0; i < sz.size(); ++i) (red[i] ? n : nout) *= sz[i];
  // out index of every input element (row-major over the kept dims), by odometer
  std::vector<int64_t> oi(v.size());
  Shape idx(sz.size(), 0);
  for (size_t i = 0; i < v.size(); ++i, test::next_index(idx, sz)) {
    int64_t o = 0;
    for (size_t d = 0; d < sz.size(); ++d)
      if (!red[d]) o = o * sz[d] + idx[d];
    oi[i] = o;
  }
  std::vector<long double> s(nout, 0), m2(nout, 0);
  std::vector<double> mx(nout, -INFINITY);
  for (size_t i = 0; i < v.size(); ++i) {
    const int64_t o = oi[i];
    s[o] += v[i];
    if (std::isnan(v[i]) || v[i] > mx[o]) mx[o] = std::isnan(mx[o]) ? mx[o] : v[i];
  }
  for (size_t i = 0; i < v.size(); ++i) {
    const int64_t o = oi[i];
    const long double d = v[i] - s[o] / n;
    m2[o] += d * d;
  }
  std::vector<double> r(nout);
  for (int64_t o = 0; o < nout; ++o) {
    switch (op) {
      case ReduceOp::Sum:
        r[o] = x.dtype() == DType::Int32 ? static_cast<int32_t>(static_cast<int64_t>(s[o])) : static_cast<double>(s[o]);
        break;
      case ReduceOp::Mean: r[o] = static_cast<double>(s[o] / n); break;
      case ReduceOp::Max: r[o] = mx[o]; break;
      case ReduceOp::Var:
      case ReduceOp::Std: {
        const double var = n == 0 ? NAN : static_cast<double>(m2[o]) / std::max<double>(0.0, double(n - corr));
        r[o] = op == ReduceOp::Std ? std::sqrt(var) : var;
      }
    }
  }
  return r;
}

Tensor run_op(ReduceOp op, const Tensor& x, const Shape& dims, int64_t corr, bool keepdim) {
  switch (op) {
    case ReduceOp::Sum: return sum(x, dims, keepdim);
    case ReduceOp::Mean: return mean(x, dims, keepdim);
    case ReduceOp::Max: return max(x, dims, keepdim);
    case ReduceOp::Var: return var(x, dims, corr, keepdim);
    case ReduceOp::Std: return std(x, dims, corr, keepdim);
  }
  return {};
}

void run_out(ReduceOp op, Tensor& out, const Tensor& x, const Shape& dims, int64_t corr, bool keepdim) {
  switch (op) {
    case ReduceOp::Sum: sum_out(out, x, dims, keepdim); break;
    case ReduceOp::Mean: mean_out(out, x, dims, keepdim); break;
    case ReduceOp::Max: max_out(out, x, dims, keepdim); break;
    case ReduceOp::Var: var_out(out, x, dims, corr, keepdim); break;
    case ReduceOp::Std: std_out(out, x, dims, corr, keepdim); break;
  }
}

// Random values of dtype dt in [0, scale), integers in [-1000, 1000], independent in
// every dim (the Expanded layout holds test::layout_values of them).
Tensor make_values(const Shape& sz, uint64_t seed, DType dt, double scale = 1.0) {
  Tensor r = rand(sz, seed, DType::Float64);
  std::vector<double> v = r.to_vector();
  for (double& e : v) e = dt == DType::Int32 ? std::floor(e * 2001.0) - 1000.0 : e * scale;
  return from_vector(v, sz).to(dt);
}

struct Scope {  // restores threads and SIMD level
  int threads = get_num_threads();
  SimdLevel level = simd_level();
  ~Scope() {
    set_num_threads(threads);
    set_simd_level(level);
  }
};

std::vector<bool> reduced_mask(int64_t nd, const Shape& dims) {
  std::vector<bool> red(nd, dims.empty());
  for (int64_t d : dims) red[d < 0 ? d + nd : d] = true;
  return red;
}

// Every op x layout x threads x SIMD level x (functional, out=) for one case.
// thorough: every correction and three out= layouts; else correction 1 and one.
void check_case(const Tensor& vals, const Shape& dims, bool keepdim, const std::vector<Layout>& layouts,
                const std::string& label, bool thorough = true) {
  Scope scope;
  const DType dt = vals.dtype();
  const int64_t nd = vals.dim();
  const std::vector<bool> red = nd == 0 ? std::vector<bool>{} : reduced_mask(nd, dims);
  std::vector<ReduceOp> ops = {ReduceOp::Sum, ReduceOp::Max};
  if (is_floating(dt)) ops.insert(ops.end(), {ReduceOp::Mean, ReduceOp::Var, ReduceOp::Std});
  bool has_zero = false;
  for (int64_t i = 0; i < nd; ++i) has_zero = has_zero || (red[i] && vals.sizes()[i] == 0);
  // AVX-512 where the build and CPU have it, for the dtypes that have kernels there
  // (Note [Short rows in zmm]: float, float16, bfloat16)
  std::vector<SimdLevel> levels = {SimdLevel::AVX2, SimdLevel::Scalar};
  if (compiled_simd_level() == SimdLevel::AVX512 &&
      (dt == DType::Float32 || dt == DType::Float16 || dt == DType::BFloat16))
    levels.insert(levels.begin(), SimdLevel::AVX512);
  for (ReduceOp op : ops) {
    if (op == ReduceOp::Max && has_zero) continue;  // an error, tested below
    const bool vs = op == ReduceOp::Var || op == ReduceOp::Std;
    for (int64_t corr : !vs ? std::vector<int64_t>{0} : thorough ? std::vector<int64_t>{1, 0, 2} : std::vector<int64_t>{1}) {
      const std::vector<double> refs[2] = {reference(op, vals, red, corr),  // [1]: the Expanded layout's values
                                           reference(op, test::layout_values(vals, Layout::Expanded), red, corr)};
      const double atol = test::default_atol(dt), rtol = test::default_rtol(dt);  // values >= 0: no cancellation
      for (Layout l : layouts) {
        const std::vector<double>& ref = refs[l == Layout::Expanded];
        const Tensor x = test::with_layout(vals, l);
        for (int threads : {1, 2})
          for (SimdLevel level : levels) {
            set_num_threads(threads);
            set_simd_level(level);
            const std::string where = label + " " + reduce_op_name(op) + " corr " + std::to_string(corr) + " " +
                                      test::layout_name(l) + " threads " + std::to_string(threads) + " " +
                                      simd_level_name(simd_level()) + " keepdim " + std::to_string(keepdim);
            const Tensor r = run_op(op, x, dims, corr, keepdim);
            ASSERT_EQ(r.dtype(), dt) << where;
            ASSERT_TRUE(test::all_close(r, ref, atol, rtol)) << where;
            // out= into poisoned outputs of several layouts
            const std::vector<Layout> outs = thorough ? std::vector<Layout>{Layout::Contiguous, Layout::Transposed,
                                                                            Layout::Offset}
                                                      : std::vector<Layout>{Layout::Transposed};
            for (Layout ol : outs) {
              Tensor out = test::with_layout(zeros(r.sizes(), dt), ol);
              test::poison(out);
              run_out(op, out, x, dims, corr, keepdim);
              ASSERT_TRUE(test::all_close(out, ref, atol, rtol)) << where << " out= " << test::layout_name(ol);
            }
          }
      }
    }
  }
}

Shape random_dims(std::mt19937_64& rng, int64_t nd) {
  Shape dims;
  if (nd == 0) return rng() % 2 ? Shape{} : Shape{rng() % 2 ? 0 : -1};
  for (int64_t d = 0; d < nd; ++d)
    if (rng() % 2) dims.push_back(rng() % 2 ? d : d - nd);  // negative dims too
  std::shuffle(dims.begin(), dims.end(), rng);
  return dims;  // may be empty: all dims
}

TEST(Reduce, RandomShapesDimsLayoutsMatchFloat64) {
  std::mt19937_64 rng(11);
  for (int trial = 0; trial < 40; ++trial) {
    const int nd = static_cast<int>(rng() % 5);
    const Shape sz = test::random_shape(rng, nd, 9);
    const Shape dims = random_dims(rng, nd);
    const bool keepdim = rng() % 2;
    for (DType dt : {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16, DType::Int32}) {
      const Tensor vals = make_values(sz, rng(), dt);
      check_case(vals, dims, keepdim, test::all_layouts(),
                 "trial " + std::to_string(trial) + " sizes " + ::testing::PrintToString(sz) + " dims " +
                     ::testing::PrintToString(dims) + " " + dtype_name(dt));
      if (HasFatalFailure()) return;
    }
  }
}

// Shapes that take the vertical kernel, the split over the reduced range (few kept
// elements), the float32 flushes (> kFlushElems / kFlushRows), column tails, and 4-D
// channels-last inputs.
TEST(Reduce, LargeShapesTakeEveryPath) {
  struct Case {
    Shape sz, dims;
  };
  const std::vector<Case> cases = {
      {{2, 70001}, {1}},        // horizontal, few kept: split per thread; flushes
      {{2, 70001}, {}},         // all dims
      {{3, 1500, 37}, {1}},     // vertical, rows > kFlushRows, column tail (37)
      {{300, 517}, {0}},        // vertical, one task: split per thread
      {{10, 2, 8300}, {0, 1}},  // vertical, several column tasks (8300 > kColumns = 8192)
      {{23, 8193}, {0}},        // vertical, 23 rows = 2 full passes of kVRows (8) + 7; a 1-column task
      {{5, 7, 33, 41}, {1}},    // channels-last input: C reduced, 4-D
      {{5, 7, 33, 41}, {2, 3}},
      {{5, 7, 33, 41}, {0, 2, 3}},
  };
  uint64_t seed = 100;
  for (const Case& c : cases)
    for (DType dt : {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16, DType::Int32}) {
      const Tensor vals = make_values(c.sz, ++seed, dt, dt == DType::Float16 ? 0.2 : 1.0);  // f16 sums < 65504
      check_case(vals, c.dims, seed % 2, test::all_layouts(),
                 "sizes " + ::testing::PrintToString(c.sz) + " dims " + ::testing::PrintToString(c.dims) + " " +
                     dtype_name(dt),
                 false);
      if (HasFatalFailure()) return;
    }
}

// sum, max and var of x over each of dim_sets against float64, at every kernel mode,
// keepdim or not, into a fresh result and into a poisoned transposed out=.
void check_sum_max_var(const Tensor& x, const std::vector<Shape>& dim_sets) {
  const DType dt = x.dtype();
  for (const Shape& dims : dim_sets) {
    const std::vector<bool> red = reduced_mask(x.dim(), dims);
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Max, ReduceOp::Var}) {
      const std::vector<double> ref = reference(op, x, red, 1);
      for (const test::Modes& m : test::all_kernel_modes())
        for (bool keepdim : {false, true}) {
          test::ModeGuard guard(m);
          const std::string where = std::string(reduce_op_name(op)) + " " + dtype_name(dt) + " sizes " +
                                    ::testing::PrintToString(x.sizes()) + " strides " +
                                    ::testing::PrintToString(x.strides()) + " dims " + ::testing::PrintToString(dims) +
                                    " threads " + std::to_string(m.threads) + " " + simd_level_name(m.simd) +
                                    " keepdim " + std::to_string(keepdim);
          const Tensor r = run_op(op, x, dims, 1, keepdim);
          ASSERT_TRUE(all_close(r, ref, test::default_atol(dt), test::default_rtol(dt))) << where;
          Tensor out = test::with_layout(zeros(r.sizes(), dt), Layout::Transposed);
          test::poison(out);
          run_out(op, out, x, dims, 1, keepdim);
          ASSERT_TRUE(all_close(out, ref, test::default_atol(dt), test::default_rtol(dt))) << where << " out=";
        }
    }
  }
}

// Inputs whose dims the planner cannot merge (each stepped, or cut short): three and
// more reduced dims outside the innermost (the horizontal driver's walk over them, in
// one run and in the split over threads), three and more kept dims (the vertical
// driver's outer kept dims, write_out's walk), results through out='s strides too; at
// every SIMD level on 1 and 2 threads.
TEST(Reduce, DimsThatDoNotMergeAnywhere) {
  Scope scope;
  struct Case {
    Shape base;  // stepped by 2 in the dims of `steps`, the last dim cut to `last`
    std::vector<int64_t> steps;
    int64_t last;
    std::vector<Shape> dim_sets;
  };
  const std::vector<Case> cases = {
      // every dim stepped: 3x4x5x6x7, the innermost stride 2
      {{6, 8, 10, 12, 14}, {0, 1, 2, 3, 4}, 7, {{}, {0, 1, 2}, {0, 2, 4}, {1, 2, 3, 4}, {0, 1, 3}, {4}, {0, 1, 2, 3}}},
      // unit-stride rows of 7 in rows of 9: 3x4x5x6x7
      {{6, 8, 10, 6, 9}, {0, 1, 2}, 7, {{}, {0, 1, 2, 3}, {1, 2, 3, 4}, {0, 2, 4}, {3, 4}, {0, 1, 2}, {1, 3}, {0, 2}}},
      // 720 K elements in five dims that do not merge: the reduced range split over threads
      {{6, 6, 80, 40, 64}, {0, 1, 2}, 50, {{}, {0, 1, 2, 3}}},
  };
  for (const Case& c : cases)
    for (DType dt : {DType::Float32, DType::BFloat16}) {
      Tensor x = make_values(c.base, 77, dt);
      for (int64_t d : c.steps) x = x.slice(d, 0, std::nullopt, 2);
      x = x.narrow(4, 0, c.last);
      check_sum_max_var(x, c.dim_sets);
    }
}

// Note [Stride-2 kept columns]: x[..., ::2] reduced over outer dims, its kept row every
// other element: the vertical kernel's even-lane vectors and their scalar tail, for
// kept rows around the vector widths (4 doubles, 8 floats: 7 to 17, 33) and long ones
// (1000: several vertical tasks on 2 threads), reduced rows from 3 to 16; and over the
// stepped dim itself, Note [Stride-2 float runs] (float32 and float64). Every SIMD
// level, 1 and 2 threads, into a fresh result and a transposed out=.
TEST(Reduce, StrideTwoRowsAndColumnsAgainstReference) {
  Scope scope;
  for (DType dt : {DType::Float32, DType::Float64}) {
    for (int64_t l : {1, 2, 7, 8, 9, 15, 16, 17, 31, 32, 33, 47, 48, 49, 64, 65, 1000}) {
      const Tensor x = make_values({3, 5, 2 * l}, 101, dt).slice(2, 0, std::nullopt, 2);
      check_sum_max_var(x, {{0}, {1}, {0, 1}, {2}, {1, 2}, {0, 1, 2}});
      if (HasFatalFailure()) return;
    }
    const Tensor x4 = make_values({2, 16, 6, 74}, 103, dt).slice(3, 0, std::nullopt, 2);  // 2x16x6x37
    check_sum_max_var(x4, {{1}, {2}, {1, 2}, {0, 1}});
    if (HasFatalFailure()) return;
  }
}

// Note [Stride-2 float runs in zmm]: float32 rows of every other element reduced along
// themselves, every length around the 16-element step, the 64-element loop and the
// block of kFlushElems, each row's last element the storage's last float (the masked
// loads stop there); rows four at a time and one alone (Note [Stride-2 rows four at a
// time]); a NaN in the vector part of one row and in the masked tail of another, a row
// of negative values, one of -inf alone (max), an infinity, values far from 0 (var).
// Every mode, 1 and 2 threads, into a fresh result and a poisoned stepped out=.
TEST(Reduce, StrideTwoRunsEveryLength) {
  Scope scope;
  std::vector<int64_t> lengths;
  for (int64_t l = 1; l <= 70; ++l) lengths.push_back(l);
  for (int64_t l : {127, 128, 129, 255, 256, 257, 4095, 4096, 4097, 4111, 8200}) lengths.push_back(l);
  for (int64_t l : lengths) {
    const int64_t rows = 5;
    std::vector<double> v = make_values({rows, 2 * l - 1}, 301 + l, DType::Float64, 4.0).to_vector();
    for (double& e : v) e += 1e3;  // var: deviations small against the values
    auto at = [&](int64_t r, int64_t j) -> double& { return v[r * (2 * l - 1) + 2 * j]; };
    for (int64_t j = 0; j < l; ++j) at(0, j) = -at(0, j);  // row 0: below the zeros of lanes off the row
    if (l >= 20) at(1, 3) = NAN;                           // row 1: in the vector part
    at(2, l - 1) = NAN;                                    // row 2: the run's last element
    for (int64_t j = 0; j < l; ++j) at(3, j) = -INFINITY;  // row 3: max of -inf alone
    at(4, l / 2) = INFINITY;                               // row 4 (past the four): an infinity
    const Tensor x = from_vector(v, {rows, 2 * l - 1}).to(DType::Float32).slice(1, 0, std::nullopt, 2);
    ASSERT_EQ(x.strides()[1], 2);
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Mean, ReduceOp::Max, ReduceOp::Var}) {
      const std::vector<double> ref = reference(op, x, {false, true}, 1);
      for (const test::Modes& m : test::all_kernel_modes()) {
        test::ModeGuard guard(m);
        const std::string where = std::string(reduce_op_name(op)) + " length " + std::to_string(l) + " threads " +
                                  std::to_string(m.threads) + " " + simd_level_name(m.simd);
        const Tensor r = run_op(op, x, {1}, 1, false);
        Tensor out = empty({2 * rows}, DType::Float32).slice(0, 1, 2 * rows, 2);
        test::poison(out);
        run_out(op, out, x, {1}, 1, false);
        for (const Tensor* t : {&r, static_cast<const Tensor*>(&out)})
          for (int64_t k = 0; k < rows; ++k) {
            const double got = t->get({k}), want = ref[k];
            if (std::isnan(want)) {
              ASSERT_TRUE(std::isnan(got)) << where << " row " << k << (t == &out ? " out=" : "");
            } else {
              ASSERT_TRUE(got == want || std::abs(got - want) <= test::default_atol(DType::Float32) +
                                                                    test::default_rtol(DType::Float32) * std::abs(want))
                  << where << " row " << k << ": " << got << " against " << want << (t == &out ? " out=" : "");
            }
          }
      }
    }
  }
}

// Note [Stride-2 kept columns in zmm]: the column sums of x[:, ::2] over dim 0 are
// v_kernel's bit for bit at the AVX-512 level, in the registers' kernel (rows in order)
// and in v_kernel's passes, every width around the 16-column step and the registers'
// 256, rows past one pass of kVRows, short of the next and past a batch of kRowBatch; a NaN in a vector column and in
// the masked last column reaches those columns' maxes only.
TEST(Reduce, StrideTwoColumnsInZmmAsTheAvx2Kernel) {
  Scope scope;
  if (test::available_modes({{1, SimdLevel::AVX512}}).empty()) GTEST_SKIP() << "no AVX-512 level";
  set_num_threads(1);
  test::TuningScope tuning_scope;
  std::vector<int64_t> widths;
  for (int64_t l = 1; l <= 70; ++l) widths.push_back(l);
  for (int64_t l : {127, 128, 129, 240, 255, 256, 257, 300}) widths.push_back(l);
  // the registers' kernel (Note [Narrow columns in registers]) and v_kernel's passes, with
  // the unit-stride runs' zmm sums off and on: width 1 merges into one unit-stride run,
  // which Note [float32 sums in zmm] sums in another order by design, so it is compared
  // with that field off only
  for (bool in_order : {false, true})
    for (bool runs_zmm : {false, true}) {
      for (int64_t l : widths)
        for (int64_t rows : {3, 8, 13, 70}) {
          if (runs_zmm && l == 1) continue;
          tuning_scope.tuning().rows_in_order = in_order;
          tuning_scope.tuning().sum_runs_zmm = runs_zmm;
          tuning_scope.set();
          std::vector<double> v = randn({rows, 2 * l - 1}, 700 + l, DType::Float64).to_vector();
          const Tensor x = from_vector(v, {rows, 2 * l - 1}).to(DType::Float32).slice(1, 0, std::nullopt, 2);
          set_simd_level(SimdLevel::AVX2);
          const std::vector<double> want = sum(x, {0}).to_vector();
          set_simd_level(SimdLevel::AVX512);
          const std::vector<double> got = sum(x, {0}).to_vector();
          for (int64_t j = 0; j < l; ++j)
            ASSERT_EQ(got[j], want[j]) << "sum over dim 0, width " << l << ", rows " << rows << ", column " << j
                                       << ", rows in order " << in_order << ", runs in zmm " << runs_zmm;
          v[(rows - 1) * (2 * l - 1) + 2 * (l - 1)] = NAN;  // the last column
          if (l > 16) v[1 * (2 * l - 1) + 2 * 3] = NAN;    // column 3
          const Tensor y = from_vector(v, {rows, 2 * l - 1}).to(DType::Float32).slice(1, 0, std::nullopt, 2);
          const std::vector<double> mx = max(y, {0}).to_vector();
          for (int64_t j = 0; j < l; ++j)
            ASSERT_EQ(std::isnan(mx[j]), j == l - 1 || (l > 16 && j == 3)) << "max over dim 0, width " << l << ", column " << j;
        }
    }
}

// Note [Kept dims merged by x alone]: kept dims that x's strides merge and out's do not
// (a transposed x over dim 1, a channels-last x over dim 2 or 3, into a dense result and
// a transposed out=): the kernels walk one merged run, the write the unmerged dims. Every
// SIMD level, 1 and 2 threads.
TEST(Reduce, KeptDimsMergedByXAlone) {
  Scope scope;
  struct Case {
    Shape sizes;
    Layout layout;
    std::vector<Shape> dim_sets;
  };
  const std::vector<Case> cases = {
      {{3, 5, 24, 20}, Layout::Transposed, {{1}, {0, 1}, {0}}},
      {{2, 16, 12, 10}, Layout::ChannelsLast, {{2}, {3}, {0, 2}}},
      {{4, 40, 60}, Layout::Transposed, {{0}}},
  };
  for (const Case& c : cases)
    for (DType dt : {DType::Float32, DType::BFloat16})
      check_sum_max_var(test::with_layout(make_values(c.sizes, 91, dt), c.layout), c.dim_sets);
}

// 1e4 + randn: a one-pass E[x^2] - E[x]^2 in float32 would lose every digit. 3000 x 37
// over dim 0 takes the vertical kernel's vector columns, its 8-row register blocks and
// its float32 runs (> kFlushRows); with its first row 60 std away from the rest, the
// shift the vertical kernel takes from that row is far from the mean, where shifted
// one-pass sums (S2 - S1^2 / n around the shift) would cancel 3600x (Note [One read for
// var]: the triples merged by Chan's formula do not).
TEST(Reduce, VarianceStableForLargeMean) {
  Scope scope;
  for (DType dt : {DType::Float32, DType::Float64}) {
    for (const Shape& sz : {Shape{3, 50001}, Shape{20001, 5}, Shape{3000, 37}, Shape{3001, 37}}) {
      std::vector<double> v = randn(sz, 5, DType::Float64).to_vector();
      for (double& e : v) e += 1e4;
      if (sz[0] == 3001)  // the outlier first row
        for (int64_t j = 0; j < sz[1]; ++j) v[j] += 60;
      const Tensor x = from_vector(v, sz).to(dt);
      for (const Shape& dims : {Shape{0}, Shape{1}, Shape{}}) {
        const std::vector<bool> red = reduced_mask(2, dims);
        for (ReduceOp op : {ReduceOp::Var, ReduceOp::Std}) {
          const std::vector<double> ref = reference(op, x, red, 1);
          for (int threads : {1, 2})
            for (SimdLevel level : {SimdLevel::AVX2, SimdLevel::Scalar}) {
              set_num_threads(threads);
              set_simd_level(level);
              const Tensor r = op == ReduceOp::Var ? var(x, dims) : std(x, dims);
              EXPECT_TRUE(test::all_close(r, ref, 0, dt == DType::Float32 ? 1e-5 : 1e-12))
                  << reduce_op_name(op) << " " << dtype_name(dt) << " sizes " << ::testing::PrintToString(sz) << " dims "
                  << ::testing::PrintToString(dims) << " threads " << threads << " " << simd_level_name(level);
            }
        }
      }
    }
  }
}

// Issue #45, Deliver 4: var and std on every path of Note [One read for var] with the
// first element far from the mean (where sums shifted by it would cancel by
// 1 + ((x0 - mean) / sd)^2): several reduced dims and strided ranges (blocks of kVarBlock
// elements, two-pass each), a transposed x reduced along its strided dim, the vertical
// kernel over dim 0, a unit-stride run; Gaussian data around 1e4 with x[0] of each
// reduced range 300 sd away; float32 and float64, every SIMD level, 1 and 2 threads,
// against float64 two-pass (reference()).
TEST(Reduce, VarFirstElementFarFromTheMeanOnEveryPath) {
  Scope scope;
  struct Case {
    Shape sizes, dims;
    bool transposed;  // x a transpose(0, 1) view of its buffer
  };
  const Case cases[] = {{{6, 700, 9}, {0, 1}, false},  {{6, 700, 9}, {1, 2}, false}, {{5000, 6}, {0}, false},
                        {{6, 5000}, {1}, false},       {{40, 3000}, {1}, true},     {{3, 40, 50}, {0, 2}, false},
                        {{9, 4100}, {}, false}};
  for (DType dt : {DType::Float32, DType::Float64})
    for (const Case& c : cases) {
      std::vector<double> v = randn(c.sizes, 77, DType::Float64).to_vector();
      for (double& e : v) e += 1e4;
      // the first element of every reduced range: x[0] of the whole tensor is the first of
      // the first range; every range starts at some element, so move each kept index's
      // first element (all reduced indices 0) away from the mean
      const std::vector<bool> red = reduced_mask(static_cast<int64_t>(c.sizes.size()), c.dims);
      const int64_t n = checked_numel(c.sizes, "test");
      for (int64_t i = 0; i < n; ++i) {
        int64_t rem = i;
        bool first = true;
        for (int64_t d = static_cast<int64_t>(c.sizes.size()) - 1; d >= 0; --d) {
          const int64_t idx = rem % c.sizes[d];
          rem /= c.sizes[d];
          if (red[d] && idx != 0) first = false;
        }
        if (first) v[i] += 300.0;
      }
      Tensor x = from_vector(v, c.sizes).to(dt);
      if (c.transposed) x = x.transpose(0, 1).contiguous().transpose(0, 1);
      for (ReduceOp op : {ReduceOp::Var, ReduceOp::Std}) {
        const std::vector<double> ref = reference(op, x, red, 1);
        for (int threads : {1, 2})
          for (SimdLevel level : {SimdLevel::AVX512, SimdLevel::AVX2, SimdLevel::Scalar}) {
            if (level > compiled_simd_level()) continue;
            set_num_threads(threads);
            set_simd_level(level);
            const Tensor r = op == ReduceOp::Var ? var(x, c.dims) : std(x, c.dims);
            EXPECT_TRUE(test::all_close(r, ref, 0, dt == DType::Float32 ? 1e-5 : 1e-12))
                << reduce_op_name(op) << " " << dtype_name(dt) << " sizes " << ::testing::PrintToString(c.sizes)
                << " dims " << ::testing::PrintToString(c.dims) << (c.transposed ? " transposed" : "") << " threads "
                << threads << " " << simd_level_name(level);
          }
      }
    }
}

// Note [One read for var], a unit-stride run: var and std along the last dim of rows
// that straddle the blocks (5 < 8 elements, 2047-2049 around one block, 6145 over four),
// each block in one pass of sums shifted by the previous block's mean (the first block:
// the mean of its first 8 elements), kept where the guard trusts them, else the block's
// two passes. Row patterns: Gaussian around 1e4 (the one-pass sums throughout); the same
// with its first 8 elements 60 std away (the first shift far from the block's mean:
// the guard sends that block to two passes);
// a ramp (every block fails the guard); a slow drift over the blocks (each shift a
// block's mean away); a step of 300 std at the second block (its shift, the first
// block's mean, 300 std from its own: that block fails the guard and takes two passes,
// the third is shifted by the second's mean); a constant row (variance exactly 0); +inf
// in the third block and a NaN in the second (NaN); float32, float64 and float16, every
// SIMD level, 1 and 2 threads, against float64.
TEST(Reduce, VarBlocksOfOneRunAgainstReference) {
  Scope scope;
  for (DType dt : {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16}) {
    for (int64_t n : {5, 2047, 2048, 2049, 6145}) {
      const int64_t rows = 8;
      std::vector<double> v = randn({rows, n}, static_cast<uint64_t>(n), DType::Float64).to_vector();
      const double base = is_reduced_float(dt) ? 100.0 : 1e4;
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t j = 0; j < n; ++j) {
          double& e = v[r * n + j];
          switch (r) {
            case 0: e += base; break;                                        // Gaussian
            case 1: e += base + (j < 8 ? 60.0 : 0.0); break;                   // far first shift
            case 2: e = base + static_cast<double>(j) / 8; break;              // ramp
            case 3: e += base + 3.0 * static_cast<double>(j) / 2048; break;    // drift
            case 4: e = base + 0.25; break;                                    // constant
            case 5: e += base; if (j == std::min<int64_t>(n - 1, 4500)) e = INFINITY; break;
            case 6: e += base; if (j == std::min<int64_t>(n - 1, 2100)) e = NAN; break;
            case 7: e += base + (j >= 2048 ? 300.0 : 0.0); break;             // step
          }
        }
      const Tensor x = from_vector(v, {rows, n}).to(dt);
      for (ReduceOp op : {ReduceOp::Var, ReduceOp::Std}) {
        const std::vector<double> ref = reference(op, x, reduced_mask(2, {1}), 1);
        // float16 and bfloat16: the result's rounding (bfloat16's unit is 8 times float16's)
        const double rt = dt == DType::Float64 ? 1e-12 : dt == DType::Float32 ? 1e-5 : dt == DType::Float16 ? 1e-3 : 8e-3;
        for (const test::Modes& m : test::all_kernel_modes()) {
          test::ModeGuard g(m);
          const Tensor r = run_op(op, x, {1}, 1, false);
          const std::string what = std::string(reduce_op_name(op)) + " " + dtype_name(dt) + ", n " +
                                   std::to_string(n) + ", " + simd_level_name(m.simd) + ", " +
                                   std::to_string(m.threads) + " threads";
          EXPECT_TRUE(test::all_close(r, ref, 0, rt)) << what;
          EXPECT_EQ(r.get({4}), 0.0) << what << ": a constant row";
        }
      }
    }
  }
}

// Note [Cascaded accumulation]: sums and means along stepped, expanded and short
// multi-dim ranges accumulate in blocks combined pairwise, as the dense path does, so
// the mean of n copies of c stays within a few ulp of c however the n copies are laid
// out (one element after another, 4 M float64 values drift by 3e-11 relative). The
// reference is c itself; the dense run is measured beside each case.
TEST(Reduce, SumsAccumulateInBlocksWhateverTheStrides) {
  const double c = 0.1 + 1.0 / 3.0;
  const int64_t n = 4000000;
  const Tensor dense = full({n}, c, DType::Float64);
  const Tensor buf = full({2 * n}, c, DType::Float64);
  struct Case {
    const char* name;
    Tensor x;
  };
  const std::vector<Case> cases = {
      {"dense", dense},
      {"expanded (stride 0)", full({}, c, DType::Float64).expand({n})},
      {"stepped (stride 2)", buf.slice(0, 0, std::nullopt, 2)},
      {"rows of 2, stepped", buf.view({n / 2, 4}).slice(1, 0, std::nullopt, 2)},
      {"unit-stride rows of 2", buf.view({n / 2, 4}).narrow(1, 0, 2)},
  };
  // the reductions have no AVX-512 path of their own: AVX2 on 1 and 2 threads, scalar
  for (const test::Modes& m : test::available_modes({{1, SimdLevel::AVX2}, {2, SimdLevel::AVX2}, {1, SimdLevel::Scalar}})) {
    test::ModeGuard g(m);
    for (const Case& cs : cases) {
      const std::string what = std::string(cs.name) + ", " + simd_level_name(m.simd) + ", " + std::to_string(m.threads) + " threads";
      const double got = mean(cs.x).item();
      EXPECT_LE(std::fabs(got - c) / c, 8 * std::numeric_limits<double>::epsilon()) << what << ": mean " << got;
      const double total = sum(cs.x).item(), want = c * static_cast<double>(cs.x.numel());
      EXPECT_LE(std::fabs(total - want) / want, 8 * std::numeric_limits<double>::epsilon()) << what << ": sum";
    }
    // columns (the vertical kernel): 1 M rows of 8, dense, expanded and stepped; blocks of
    // kFlushRows rows in groups of kGroupRuns (combined one after another: 194 ulp at 4 M rows)
    const std::vector<Case> columns = {
        {"columns, dense", full({n / 4, 8}, c, DType::Float64)},
        {"columns, expanded rows", full({8}, c, DType::Float64).expand({n / 4, 8})},
        {"columns, stepped rows", full({n / 4, 16}, c, DType::Float64).slice(1, 0, std::nullopt, 2)},
    };
    for (const Case& cs : columns) {
      const Tensor r = mean(cs.x, {0});
      for (int64_t j = 0; j < 8; ++j)
        EXPECT_LE(std::fabs(r.get({j}) - c) / c, 64 * std::numeric_limits<double>::epsilon())
            << cs.name << ", " << simd_level_name(m.simd) << ", " << m.threads << " threads, column " << j;
    }
  }
}

// The modes of the short-row kernels: AVX-512 (Note [Short rows in zmm]) and AVX2, 1
// and 2 threads, as available.
std::vector<test::Modes> short_row_modes() {
  return test::available_modes({{1, SimdLevel::AVX512}, {2, SimdLevel::AVX512}, {1, SimdLevel::AVX2}, {2, SimdLevel::AVX2}});
}

// Note [Short rows four at a time]: sums over unit-stride rows of 8-1024 elements, four
// rows at a time and the rest one by one. Row counts that leave 0-3 rows over and split
// over 2 threads; lengths around the vector steps (8 lanes, 16 per pair of registers,
// bfloat16's 16-element loads) with and without a scalar tail, at the path's limit and
// past it; rows starting off any alignment (the Offset layout) and a kept range of two
// dims that do not coalesce (a slice of the middle dim), so that a group of four crosses
// from one outer index to the next. A NaN or an infinity in a vector part or a tail
// reaches its own row's sum and max only.
TEST(Reduce, ShortRowsFourAtATime) {
  uint64_t seed = 500;
  for (DType dt : {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16})
    for (int64_t n : {7, 8, 9, 16, 17, 23, 32, 45, 100, 256, 1024, 1025})
      for (int64_t k : {1, 4, 7, 13}) {
        const std::string what = std::string(dtype_name(dt)) + " rows " + std::to_string(k) + " x " + std::to_string(n);
        check_case(make_values({k, n}, ++seed, dt, dt == DType::Float16 ? 0.2 : 1.0), {-1}, false,
                   {Layout::Contiguous, Layout::Offset}, what, false);
        if (HasFatalFailure()) return;
        // kept dims (4, 3) with strides (6 (n + 5), n + 5): no coalescing
        const Tensor big = make_values({4, 6, n + 5}, ++seed, dt, dt == DType::Float16 ? 0.2 : 1.0);
        const Tensor x = big.slice(1, 1, 4).slice(2, 0, n);
        const std::vector<double> ref = reference(ReduceOp::Sum, x, {false, false, true}, 0);
        for (const test::Modes& m : short_row_modes()) {
          test::ModeGuard g(m);
          Tensor out = empty({4, 3}, dt).transpose(0, 1).transpose(0, 1);
          test::poison(out);
          sum_out(out, x, {2});
          ASSERT_TRUE(test::all_close(out, ref, test::default_atol(dt), test::default_rtol(dt)))
              << what << ", a slice of the middle dim, " << m.threads << " threads";
        }
      }
  Scope scope;
  // var: rows of 1e4 + randn, rows 1 and 6 with their first 8 elements 300 std away (the
  // centre far from the mean: h_var_run's guard sends those rows to two passes, a shifted
  // one-pass sum would lose 5 digits in float32), rows 3 constant (variance exactly 0);
  // float32 and float16 rows with Note [Short var rows in zmm] off and on (it applies at
  // the AVX512 level), tails of 9, 4 and 8 past the 32-element steps
  test::TuningScope tuning_scope;
  CpuTuning& tuning = tuning_scope.tuning();
  for (bool var_zmm : {false, true})
  for (DType dt : {DType::Float32, DType::Float64, DType::Float16})
    for (int64_t n : {9, 100, 1000}) {
      tuning.var_rows_zmm = var_zmm;
      set_cpu_tuning(&tuning);
      std::vector<double> v = randn({8, n}, 91, DType::Float64).to_vector();
      for (int64_t r = 0; r < 8; ++r)
        for (int64_t i = 0; i < n; ++i) {
          double& e = v[r * n + i];
          e = r == 3 ? 1e4 : e + 1e4 + ((r == 1 || r == 6) && i < 8 ? 300.0 : 0.0);
        }
      const Tensor x = from_vector(v, {8, n}).to(dt);
      for (ReduceOp op : {ReduceOp::Var, ReduceOp::Std}) {
        const std::vector<double> ref = reference(op, x, {false, true}, 1);
        for (const test::Modes& m : short_row_modes()) {
          test::ModeGuard g(m);
          const Tensor r = op == ReduceOp::Var ? var(x, {1}) : std(x, {1});
          const std::string what = std::string(reduce_op_name(op)) + " " + dtype_name(dt) + " rows of " +
                                   std::to_string(n) + ", " + simd_level_name(m.simd) + ", " +
                                   std::to_string(m.threads) + " threads, var_rows_zmm " + (var_zmm ? "on" : "off");
          // float16 results round to 2^-11 of themselves; the float32 arithmetic behind both stays within 1e-5
          EXPECT_TRUE(test::all_close(r, ref, 0, dt == DType::Float64 ? 1e-12 : dt == DType::Float16 ? 1e-3 : 1e-5))
              << what;
          EXPECT_EQ(r.get({3}), 0.0) << what << ": the constant row";
        }
      }
    }
  // bfloat16 rows whose sums are exact in float (-1 and 64 alternating, so every lane's
  // deviations and squares are exact): var is the float64 one rounded once, bit for bit.
  // Any stray bits in a lane (the odd elements' mask) move it by a percent.
  for (int64_t n : {64, 100, 1000}) {
    std::vector<double> v(8 * n);
    for (int64_t i = 0; i < 8 * n; ++i) v[i] = (i % n) % 2 ? 64.0 : -1.0;
    const Tensor x = from_vector(v, {8, n}).to(DType::BFloat16);
    const std::vector<double> ref = reference(ReduceOp::Var, x, {false, true}, 1);
    for (const test::Modes& m : short_row_modes()) {
      test::ModeGuard g(m);
      const Tensor r = var(x, {1});
      for (int64_t k = 0; k < 8; ++k)
        EXPECT_EQ(r.get({k}), static_cast<double>(BFloat16(static_cast<float>(ref[k]))))
            << "bf16 var, rows of " << n << ", row " << k << ", " << m.threads << " threads";
    }
  }
  // bfloat16 rows with subnormal elements (Note [bfloat16 sums by dot products]): where
  // the sum takes vdpbf16ps they read as zero, so the sum may differ from float64's by
  // 2^-126 per element and no more; rows of 1 + subnormals sum to n exactly on any path
  for (int64_t n : {40, 256}) {
    std::vector<double> v(8 * n);
    for (int64_t i = 0; i < 8 * n; ++i) v[i] = std::ldexp(1.0 + (i % 7) / 8.0, -127 - static_cast<int>(i % 5));
    for (int64_t i = 4 * n; i < 8 * n; i += 2) v[i] = 1.0;  // rows 4-7: ones and subnormals alternating
    const Tensor x = from_vector(v, {8, n}).to(DType::BFloat16);
    const std::vector<double> ref = reference(ReduceOp::Sum, x, {false, true}, 0);
    for (const test::Modes& m : short_row_modes()) {
      test::ModeGuard g(m);
      const Tensor r = sum(x, {1});
      for (int64_t k = 0; k < 8; ++k) {
        const double got = r.get({k});
        if (k < 4) EXPECT_LE(std::abs(got - ref[k]), n * std::ldexp(1.0, -126)) << "bf16 subnormal row " << k << " of " << n;
        else EXPECT_EQ(got, static_cast<double>(n / 2)) << "bf16 row " << k << " of " << n;
      }
    }
  }
  // negative rows with tails of every length below a step: a lane off the row must not
  // count as 0 in a max (nor a NaN or an infinity elsewhere in the row)
  for (DType dt : {DType::Float32, DType::Float16, DType::BFloat16})
    for (int64_t n : {8, 17, 31, 33, 45, 63, 100}) {
      std::vector<double> v = rand({8, n}, 700 + n, DType::Float64).to_vector();
      for (double& e : v) e = -1.0 - e;
      const Tensor x = from_vector(v, {8, n}).to(dt);
      const std::vector<double> ref = reference(ReduceOp::Max, x, {false, true}, 0);
      for (const test::Modes& m : short_row_modes()) {
        test::ModeGuard g(m);
        EXPECT_TRUE(test::all_close(max(x, {1}), ref, 0, 0))
            << dtype_name(dt) << " max of negative rows of " << n << ", " << simd_level_name(m.simd);
      }
    }
  for (const test::Modes& mode : short_row_modes())
    for (DType dt : {DType::Float32, DType::BFloat16}) {
      test::ModeGuard g(mode);
      const std::string what = std::string(dtype_name(dt)) + ", " + simd_level_name(mode.simd);
      std::vector<double> v(8 * 45, 1.0);
      v[2 * 45 + 44] = NAN;        // row 2, in the tail
      v[3 * 45 + 3] = INFINITY;    // row 3, in the vector part
      v[5 * 45 + 20] = -INFINITY;  // row 5
      v[6 * 45 + 10] = NAN;        // row 6, in the vector part
      const Tensor r = sum(from_vector(v, {8, 45}).to(dt), {1});
      for (int64_t i = 0; i < 8; ++i) {
        const double got = r.get({i});
        if (i == 2 || i == 6) EXPECT_TRUE(std::isnan(got)) << what << " row " << i;
        else if (i == 3) EXPECT_EQ(got, INFINITY) << what;
        else if (i == 5) EXPECT_EQ(got, -INFINITY) << what;
        else EXPECT_EQ(got, 45.0) << what << " row " << i;
      }
      const Tensor mx = max(from_vector(v, {8, 45}).to(dt), {1});
      for (int64_t i = 0; i < 8; ++i) {
        const double got = mx.get({i});
        if (i == 2 || i == 6) EXPECT_TRUE(std::isnan(got)) << what << " max, row " << i;
        else if (i == 3) EXPECT_EQ(got, INFINITY) << what << " max";
        else EXPECT_EQ(got, 1.0) << what << " max, row " << i;
      }
    }
}

// Notes [bfloat16 sums by dot products], [bfloat16 long sums in zmm] and [bfloat16
// column sums by dot products]: the bf16 sums of unit-stride runs (a whole tensor, rows
// past the short-row length) and of columns, lengths around every step of those loops
// (32-element loads, 64 and 128 a step of the four chains, kFlushElems blocks; 32-column
// blocks, 8 rows a pass, an odd row), misaligned by one element, with the long runs'
// dot products on (where the CPU has them) and off (zmm at the AVX512 level, else the
// widening loop). Small integers make every float sum exact, so each path must give the
// float64 sum itself.
TEST(Reduce, BFloat16SumsEveryLengthOfEachLoop) {
  auto values = [](int64_t n) {
    std::vector<double> v(n + 1);
    for (int64_t i = 0; i <= n; ++i) v[i] = static_cast<double>((i * 5) % 7) - 3.0;
    return v;
  };
  auto exact = [](const std::vector<double>& v, int64_t b, int64_t e, int64_t step) {
    double t = 0;
    for (int64_t i = b; i < e; i += step) t += v[i];
    return t;
  };
  test::TuningScope tuning_scope;
  CpuTuning& tuning = tuning_scope.tuning();
  for (const test::Modes& m : short_row_modes())
  for (bool dot_runs : {true, false}) {
    test::ModeGuard g(m);
    tuning.bf16_dot_runs = dot_runs;
    set_cpu_tuning(&tuning);
    const std::string mode = std::string(simd_level_name(m.simd)) + ", " + std::to_string(m.threads) + " threads, " +
                             (dot_runs ? "dot" : "no dot") + " runs";
    for (int64_t n : {1, 31, 32, 33, 63, 64, 65, 100, 127, 128, 129, 1023, 1025, 1100, 1151, 4095, 4096, 4097, 4193, 4223,
                      10000, 12401}) {
      const std::vector<double> v = values(n);
      const Tensor x = from_vector(v, {n + 1}).to(DType::BFloat16).slice(0, 1, n + 1);  // off 64-byte alignment
      EXPECT_EQ(sum(x).to(DType::Float32).item(), exact(v, 1, n + 1, 1)) << "bf16 sum of " << n << ", " << mode;
      if (n > 1024) {  // rows past the short-row kernel
        const Tensor rows = from_vector(values(3 * n), {3 * n + 1}).to(DType::BFloat16).slice(0, 1, 3 * n + 1).view({3, n});
        const std::vector<double> w = values(3 * n);
        const Tensor r = sum(rows, {1});
        for (int64_t k = 0; k < 3; ++k)
          EXPECT_EQ(r.get({k}), exact(w, 1 + k * n, 1 + (k + 1) * n, 1)) << "bf16 row " << k << " of " << n << ", " << mode;
      }
    }
    for (int64_t rows : {1, 2, 7, 9, 37})
      for (int64_t cols : {1, 31, 32, 33, 100, 127, 129}) {
        const std::vector<double> v = values(rows * cols);
        const Tensor x = from_vector(v, {rows * cols + 1}).to(DType::BFloat16).slice(0, 1, rows * cols + 1).view({rows, cols});
        const Tensor r = sum(x, {0});
        for (int64_t j = 0; j < cols; ++j)
          EXPECT_EQ(r.get({j}), exact(v, 1 + j, 1 + rows * cols, cols))
              << "bf16 column " << j << " of " << rows << " x " << cols << ", " << mode;
      }
  }
}

// Note [float32 sums in zmm]: float32 sums of unit-stride runs, the zmm loop off and on,
// at every length around its 64-element steps, its 16-element masked tail and its blocks
// of kFlushElems, off 64-byte alignment. Values whose sums are exact in float32 must
// come back bit for bit (an element lost or read twice moves them); random rows into a
// stepped, poisoned out match float64 to float32's tolerance; a NaN in the masked tail
// reaches its own row only.
TEST(Reduce, Float32SumsInZmmEveryLengthOfEachLoop) {
  auto values = [](int64_t n) {
    std::vector<double> v(n);
    for (int64_t i = 0; i < n; ++i) v[i] = static_cast<double>((i * 5) % 7) - 3.0;
    return v;
  };
  test::TuningScope tuning_scope;
  CpuTuning& tuning = tuning_scope.tuning();
  uint64_t seed = 900;
  for (const test::Modes& m : short_row_modes())
    for (bool zmm : {false, true}) {
      test::ModeGuard g(m);
      tuning.sum_runs_zmm = zmm;
      set_cpu_tuning(&tuning);
      const std::string mode = std::string(simd_level_name(m.simd)) + ", " + std::to_string(m.threads) + " threads, sum_runs_zmm " +
                               (zmm ? "on" : "off");
      for (int64_t n : {64, 65, 79, 80, 127, 128, 129, 1025, 1100, 4095, 4096, 4097, 4111, 4159, 8209, 12401}) {
        const std::vector<double> v = values(3 * n + 1);
        const Tensor flat = from_vector(v, {3 * n + 1}).to(DType::Float32).slice(0, 1, 3 * n + 1);  // off alignment
        double whole = 0;
        for (int64_t i = 1; i <= 3 * n; ++i) whole += v[i];
        EXPECT_EQ(sum(flat).item(), whole) << "f32 sum of " << 3 * n << ", " << mode;
        const Tensor rows = flat.view({3, n});
        Tensor out = empty({6}, DType::Float32).slice(0, 0, 6, 2);
        test::poison(out);
        sum_out(out, rows, {1});
        for (int64_t k = 0; k < 3; ++k) {
          double want = 0;
          for (int64_t i = 1 + k * n; i < 1 + (k + 1) * n; ++i) want += v[i];
          EXPECT_EQ(out.get({k}), want) << "f32 row " << k << " of " << n << ", " << mode;
        }
        const Tensor x = make_values({5, n}, ++seed, DType::Float32, 1.0);
        const std::vector<double> ref = reference(ReduceOp::Sum, x, {false, true}, 0);
        Tensor o = empty({10}, DType::Float32).slice(0, 1, 10, 2);
        test::poison(o);
        sum_out(o, x, {1});
        EXPECT_TRUE(test::all_close(o, ref, test::default_atol(DType::Float32), test::default_rtol(DType::Float32)))
            << "random rows of " << n << ", " << mode;
        if (n % 64 != 0) {  // a NaN in the masked tail of row 1
          Tensor y = rows.clone();
          y.select(0, 1).narrow(0, n - 1, 1).fill_(std::nan(""));
          const Tensor r = sum(y, {1});
          EXPECT_TRUE(std::isnan(r.get({1}))) << "NaN in the tail of " << n << ", " << mode;
          EXPECT_FALSE(std::isnan(r.get({0})) || std::isnan(r.get({2}))) << "NaN in row 1 of " << n << ", " << mode;
        }
      }
    }
}

// Note [Short rows in address order]: float32 and float16 short rows summed one after
// the other, at every length around the 64-element steps and the 16-element masked
// tail, on both sides of kInOrderRowBytes (float32 rows of 256, float16 of 512) and up
// to kShortRow, rows off 64-byte alignment, 4 to 7 rows (whole groups of four and the
// rows left over), the order off and on. Values whose sums are exact in float32 must
// come back bit for bit (an element lost, read twice or taken from the next row moves
// them); random rows into a stepped, poisoned out match float64 to the dtype's
// tolerance; a NaN in a row's masked tail reaches that row only.
TEST(Reduce, ShortRowSumsInAddressOrderEveryLength) {
  test::TuningScope tuning_scope;
  CpuTuning& tuning = tuning_scope.tuning();
  uint64_t seed = 1300;
  for (bool in_order : {false, true})
    for (const test::Modes& m : short_row_modes()) {
      test::ModeGuard g(m);
      tuning.rows_in_order = in_order;
      tuning_scope.set();
      const std::string mode = std::string(simd_level_name(m.simd)) + ", " + std::to_string(m.threads) +
                               " threads, rows_in_order " + (in_order ? "on" : "off");
      for (DType dt : {DType::Float32, DType::Float16})
        for (int64_t n : {255, 256, 257, 271, 300, 319, 320, 383, 511, 512, 513, 527, 575, 576, 1000, 1023, 1024})
          for (int64_t k : {4, 5, 7}) {
            const std::string what = std::string(dtype_name(dt)) + " " + std::to_string(k) + " rows of " +
                                     std::to_string(n) + ", " + mode;
            // small integers: every partial sum exact in float32 (|sum| < 2^11)
            std::vector<double> v(k * n + 1);
            for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>((i * 5) % 7) - 3.0;
            const Tensor rows = from_vector(v, {k * n + 1}).to(dt).slice(0, 1, k * n + 1).view({k, n});
            Tensor out = empty({2 * k}, dt).slice(0, 1, 2 * k, 2);
            test::poison(out);
            sum_out(out, rows, {1});
            for (int64_t r = 0; r < k; ++r) {
              double want = 0;
              for (int64_t i = 1 + r * n; i < 1 + (r + 1) * n; ++i) want += v[i];
              EXPECT_EQ(out.get({r}), want) << what << ", row " << r;
            }
            const Tensor x = make_values({k, n}, ++seed, dt, dt == DType::Float16 ? 0.2 : 1.0);
            const std::vector<double> ref = reference(ReduceOp::Sum, x, {false, true}, 0);
            Tensor o = empty({2 * k}, dt).slice(0, 0, 2 * k, 2);
            test::poison(o);
            sum_out(o, x, {1});
            EXPECT_TRUE(test::all_close(o, ref, test::default_atol(dt), test::default_rtol(dt))) << what << ", random";
            if (n % 16 != 0) {  // a NaN as the last element of row 1, in the masked tail
              Tensor y = rows.clone();
              y.select(0, 1).narrow(0, n - 1, 1).fill_(std::nan(""));
              const Tensor s = sum(y, {1});
              for (int64_t r = 0; r < k; ++r)
                EXPECT_EQ(std::isnan(s.get({r})), r == 1) << what << ", NaN in row 1's tail, row " << r;
            }
            if (HasFailure()) return;
          }
    }
}

// Note [Narrow columns in registers]: float32 and bfloat16 column sums of 1 to 256
// columns in zmm accumulators, and float32 ones of up to 2048 through buf, rows in
// order: every count of registers (columns around each 16 and 32, the masked last
// register), widths around the 64-column steps and kBufColumns, row counts around the
// 64-row batch and past a 1024-row flush, rows end to end, stepped (x[::2]) and over two
// reduced dims that do not merge (the Walker's offsets against one dim's product), into
// a stepped, poisoned out; bf16 past 256 columns and float32 past 2048 take the rows side
// by side either way. In order against float64 and against the
// rows side by side: float32 bit for bit (each column adds its rows in the same order
// into one float), bfloat16 to its tolerance (the dot products add rows in pairs).
// Small integers whose column sums are exact in float32: the exact sum, rounded once.
TEST(Reduce, NarrowColumnSumsInRegistersEveryWidth) {
  test::TuningScope tuning_scope;
  CpuTuning& tuning = tuning_scope.tuning();
  uint64_t seed = 1400;
  for (const test::Modes& m : short_row_modes()) {
    test::ModeGuard g(m);
    const std::string mode = std::string(simd_level_name(m.simd)) + ", " + std::to_string(m.threads) + " threads";
    for (DType dt : {DType::Float32, DType::BFloat16})
      for (int64_t L : {1, 15, 16, 17, 31, 32, 33, 48, 100, 200, 224, 225, 239, 240, 241, 255, 256, 257, 300, 511,
                        512, 1000, 2047, 2048, 2049})
        for (int64_t R : {1, 63, 64, 65, 1100}) {
          if (R == 1100 && L > 257 && L != 512) continue;  // the flush once past the registers
          const std::string what = std::to_string(R) + " " + dtype_name(dt) + " rows of " + std::to_string(L) +
                                   " columns, " + mode;
          const Tensor big = make_values({2 * R, L}, ++seed, dt, 1.0);
          const Tensor dense = big.slice(0, 0, R), stepped = big.slice(0, 0, 2 * R, 2);
          // [2, R/2+.., L] from a [4, .., L] buffer: the two reduced dims do not merge
          const Tensor two = make_values({4, (R + 1) / 2, L}, ++seed, dt, 1.0).slice(0, 0, 4, 2);
          for (const Tensor& x : {dense, stepped, two}) {
            Shape dims;
            for (int64_t d = 0; d + 1 < x.dim(); ++d) dims.push_back(d);
            Tensor got[2];
            for (bool in_order : {false, true}) {
              tuning.rows_in_order = in_order;
              tuning.buf_columns_in_order = in_order;
              tuning_scope.set();
              got[in_order] = empty({2 * L}, dt).slice(0, 1, 2 * L, 2);
              test::poison(got[in_order]);
              sum_out(got[in_order], x, dims);
            }
            std::vector<bool> red(static_cast<size_t>(x.dim()), true);
            red.back() = false;
            const std::vector<double> ref = reference(ReduceOp::Sum, x, red, 0);
            const std::string where = what + ", " + std::to_string(x.dim()) + "-D, strides " + test::shape_str(x.strides());
            EXPECT_TRUE(test::all_close(got[1], ref, test::default_atol(dt), test::default_rtol(dt))) << where;
            if (dt == DType::Float32) {
              for (int64_t j = 0; j < L; ++j)
                ASSERT_EQ(got[1].get({j}), got[0].get({j})) << where << ", column " << j << ": in order against v_kernel";
            } else {
              ASSERT_TRUE(test::all_close(got[1], got[0].to_vector(), test::default_atol(dt), test::default_rtol(dt)))
                  << where << ": in order against side by side";
            }
          }
          std::vector<double> v(R * L);  // float32: -3..3; bfloat16: -1..1 (its inputs exact)
          for (size_t i = 0; i < v.size(); ++i)
            v[i] = dt == DType::Float32 ? static_cast<double>((i * 5) % 7) - 3.0 : static_cast<double>((i * 5) % 3) - 1.0;
          tuning.rows_in_order = true;
          tuning.buf_columns_in_order = true;
          tuning_scope.set();
          const Tensor s = sum(from_vector(v, {R, L}).to(dt), {0});
          for (int64_t j = 0; j < L; ++j) {
            double want = 0;
            for (int64_t r = 0; r < R; ++r) want += v[r * L + j];
            ASSERT_EQ(s.get({j}), dt == DType::Float32 ? want : test::round_to_bf16(want)) << what << ", exact column " << j;
          }
        }
  }
}

// Note [bfloat16 moments by dot products]: bf16 var of short rows from sums around 0
// where every row of a group of four allows it (rows around 0, rows of |x|: a mean 0.8
// standard deviations from 0), else through run_centre; every row must match float64
// to bf16's tolerance, at every level.
TEST(Reduce, BFloat16VarAroundZeroOrItsCentre) {
  // rows 0-3 (one group) around 0 or |x|; the other groups each hold a row the sums
  // around 0 cannot take: 100 + 3 randn (5, 14), 2^20 but one 2^20 + 2^13 (6), a NaN
  // (9), an infinity (10)
  for (int64_t n : {20, 45, 64, 256, 1000}) {
    std::vector<double> v = randn({16, n}, 900 + n, DType::Float64).to_vector();
    for (int64_t r = 0; r < 16; ++r)
      for (int64_t i = 0; i < n; ++i) {
        double& e = v[r * n + i];
        if (r == 1 || r == 2 || r == 13) e = std::fabs(e);
        if (r == 5 || r == 14) e = 100.0 + 3.0 * e;
        if (r == 6) e = i == 5 ? 1048576.0 + 8192.0 : 1048576.0;
        if (r == 9 && i == n / 2) e = NAN;
        if (r == 10 && i == n - 1) e = INFINITY;
      }
    const Tensor x = from_vector(v, {16, n}).to(DType::BFloat16);
    const std::vector<double> ref = reference(ReduceOp::Var, x, {false, true}, 1);
    for (const test::Modes& m : short_row_modes()) {
      test::ModeGuard g(m);
      const Tensor r = var(x, {1});
      for (int64_t k = 0; k < 16; ++k) {
        const double got = r.get({k});
        const std::string what = "bf16 var row " + std::to_string(k) + " of " + std::to_string(n) + ", " +
                                 simd_level_name(m.simd) + ", " + std::to_string(m.threads) + " threads";
        if (k == 9 || k == 10) EXPECT_TRUE(std::isnan(got)) << what << ": " << got;
        else EXPECT_NEAR(got, ref[k], 8e-3 * ref[k]) << what;
      }
    }
  }
}

// Note [bfloat16 moments by dot products] in h_var_run's blocks (kVarRunBlock elements):
// rows longer than the short-row path, each block around 0 or not. Row 0 around 0, its
// last element 30; row 1 100 + 3 randn (every block shifted); row 2 around 0 but its
// third block at 100 + 3 randn, and from kDpRetry blocks on around 0 by dot products
// again (the longest rows); row 3 a NaN in its third block (its second where it has
// two), row 4 an infinity in its last; row 5 |randn| (mean 0.8, within the bound). Rows
// and one row as a single run; lengths with and without a partial last block, whose
// tail (8, 17 elements) goes through the masked step.
TEST(Reduce, BFloat16VarOfLongRunsBlockByBlock) {
  for (int64_t n : {int64_t(4096), int64_t(5000), int64_t(2048 * 36 + 17)}) {
    std::vector<double> v = randn({6, n}, 950 + n, DType::Float64).to_vector();
    for (int64_t r = 0; r < 6; ++r)
      for (int64_t i = 0; i < n; ++i) {
        double& e = v[r * n + i];
        const int64_t block = i / 2048;
        if (r == 1 || (r == 2 && block == 2)) e = 100.0 + 3.0 * e;
        if (r == 3 && i == std::min<int64_t>(2 * 2048 + 5, n - 3)) e = NAN;
        if (r == 4 && i == n - 1) e = INFINITY;
        if (r == 5) e = std::fabs(e);
        if (r == 0 && i == n - 1) e = 30.0;  // a tenth of the row's variance in its last element
      }
    const Tensor x = from_vector(v, {6, n}).to(DType::BFloat16);
    const std::vector<double> ref = reference(ReduceOp::Var, x, {false, true}, 1);
    const std::vector<double> whole = reference(ReduceOp::Var, x.slice(0, 0, 1).reshape({n}), {true}, 1);
    for (const test::Modes& m : short_row_modes()) {
      test::ModeGuard g(m);
      const std::string mode = std::string(simd_level_name(m.simd)) + ", " + std::to_string(m.threads) + " threads";
      const Tensor r = var(x, {1});
      for (int64_t k = 0; k < 6; ++k) {
        const double got = r.get({k});
        const std::string what = "bf16 var row " + std::to_string(k) + " of " + std::to_string(n) + ", " + mode;
        if (k == 3 || k == 4) EXPECT_TRUE(std::isnan(got)) << what << ": " << got;
        else EXPECT_NEAR(got, ref[k], 8e-3 * ref[k]) << what;
      }
      const double one = var(x.slice(0, 0, 1).reshape({n})).get({});
      EXPECT_NEAR(one, whole[0], 8e-3 * whole[0]) << "bf16 var of one run of " << n << ", " << mode;
    }
  }
}

TEST(Reduce, NanPropagatesThroughMaxSumAndVar) {
  Scope scope;
  for (DType dt : {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16}) {
    const Shape sz = {7, 301};
    const double tol = dt == DType::BFloat16 ? 8e-3 : 1e-3;  // the result's rounding
    std::vector<double> v = rand(sz, 3, DType::Float64).to_vector();
    v[2 * 301 + 17] = NAN;   // row 2, inside the SIMD body
    v[5 * 301 + 300] = NAN;  // row 5, the scalar tail
    v[6 * 301 + 0] = NAN;    // row 6, first element
    const Tensor x = from_vector(v, sz).to(dt);
    for (const Shape& dims : {Shape{1}, Shape{0}, Shape{}})
      for (ReduceOp op : {ReduceOp::Max, ReduceOp::Sum, ReduceOp::Var, ReduceOp::Std}) {
        const std::vector<double> ref = reference(op, x, reduced_mask(2, dims), 0);
        for (Layout l : test::all_layouts())
          for (SimdLevel level : {SimdLevel::AVX2, SimdLevel::Scalar}) {
            set_simd_level(level);
            if (l == Layout::Expanded) continue;  // the NaNs are in rows other than row 0
            const Tensor r = run_op(op, test::with_layout(x, l), dims, 0, false);
            EXPECT_TRUE(test::all_close(r, ref, tol, tol))
                << reduce_op_name(op) << " " << dtype_name(dt) << " " << test::layout_name(l) << " dims "
                << ::testing::PrintToString(dims) << " " << simd_level_name(level);
          }
      }
  }
}

TEST(Reduce, EmptyAndDegenerateReductions) {
  const Tensor x = zeros({3, 0, 4});
  EXPECT_TRUE(test::all_close(sum(x, {1}), std::vector<double>(12, 0.0), 0, 0));
  EXPECT_TRUE(test::all_close(mean(x, {1}), std::vector<double>(12, NAN), 0, 0));
  EXPECT_TRUE(test::all_close(var(x, {1}), std::vector<double>(12, NAN), 0, 0));
  EXPECT_EQ(max(x, {2}).sizes(), (Shape{3, 0}));
  const Tensor one = full({4, 1}, 2.5);
  EXPECT_TRUE(test::all_close(var(one, {1}), std::vector<double>(4, NAN), 0, 0));  // N - 1 = 0: 0/0
  EXPECT_TRUE(test::all_close(var(one, {1}, 0), std::vector<double>(4, 0.0), 0, 0));
  const Tensor s = full({}, 3.0);
  EXPECT_EQ(sum(s).item(), 3.0);
  EXPECT_EQ(sum(s, {-1}, true).dim(), 0);
  EXPECT_EQ(max(s, {0}).item(), 3.0);
}

template <typename F>
void expect_error(const F& f, const std::vector<std::string>& parts) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one mentioning " << ::testing::PrintToString(parts);
  } catch (const Error& e) {
    for (const std::string& p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
  }
}

TEST(Reduce, BadInputsAreRejectedBeforeAnyWork) {
  const Tensor x = rand({2, 3, 4}, 1);
  expect_error([&] { sum(x, {3}); }, {"sum", "out of range", "3"});
  expect_error([&] { max(x, {-4}); }, {"max", "out of range"});
  expect_error([&] { mean(x, {1, -2}); }, {"mean", "more than once", "1"});
  expect_error([&] { var(x, {0, 0}); }, {"var", "more than once"});
  const Tensor xi = zeros({2, 3}, DType::Int32);
  expect_error([&] { mean(xi); }, {"mean", "floating", "int32"});
  expect_error([&] { var(xi, {0}); }, {"var", "floating", "int32"});
  expect_error([&] { std(xi, {0}); }, {"std", "floating", "int32"});
  expect_error([&] { sum(zeros({2}, DType::Int8)); }, {"sum", "int8", "not supported"});
  expect_error([&] { max(zeros({2, 0}), {1}); }, {"max", "size 0", "dim 1"});
  expect_error([&] { sum(Tensor()); }, {"sum", "undefined"});
  // out= with the wrong sizes, dtype, or overlapping the input: out is left as it was
  Tensor bad_shape = empty({2, 3});
  test::poison(bad_shape);
  expect_error([&] { sum_out(bad_shape, x, {1}); }, {"sum_out", "[2, 3]", "[2, 4]"});
  expect_error([&] { sum_out(bad_shape, x, {1}, true); }, {"sum_out", "[2, 1, 4]", "keepdim true"});
  EXPECT_TRUE(test::all_close(bad_shape, std::vector<double>(6, NAN), 0, 0));
  Tensor bad_dtype = empty({2, 4}, DType::Float64);
  expect_error([&] { mean_out(bad_dtype, x, {1}); }, {"mean_out", "float64", "float32"});
  Tensor undefined;
  expect_error([&] { std_out(undefined, x, {1}); }, {"std_out", "undefined"});
  Tensor alias = x.select(1, 0);  // [2, 4] inside x's storage
  expect_error([&] { max_out(alias, x, {1}); }, {"max_out", "overlaps"});
  Tensor expanded = zeros({1, 4}).expand({2, 4});
  expect_error([&] { var_out(expanded, x, {1}); }, {"var_out", "single memory location"});
}

// ---------------------------------------------------------------- on every device
// (Note [Device-parameterized tests] in test_util.h)

class ReduceOnDevice : public ::testing::TestWithParam<Device> {};

// op's out= form into out in keepdim form.
void reduce_keepdim_out(ReduceOp op, Tensor out, const Tensor& x, const Shape& dims, int64_t correction) {
  switch (op) {
    case ReduceOp::Sum: sum_out(out, x, dims, true); break;
    case ReduceOp::Mean: mean_out(out, x, dims, true); break;
    case ReduceOp::Max: max_out(out, x, dims, true); break;
    case ReduceOp::Var: var_out(out, x, dims, correction, true); break;
    case ReduceOp::Std: std_out(out, x, dims, correction, true); break;
  }
}

// op over dims of a random x (layout l) on dev, poisoned keepdim out, against float64
// loops over the stored values.
void expect_reduction(const Tensor& out, ReduceOp op, DType dt, const std::vector<double>& vx, const Shape& s,
                      const Shape& dims, const std::string& what);
// Each op of ops over the same x (made once).
void expect_reduce_matches(const Device& dev, std::initializer_list<ReduceOp> ops, DType dt, const Shape& s, Layout l,
                           const Shape& dims, uint64_t seed) {
  Shape keep = s;
  for (int64_t d : dims) keep[d] = 1;
  const auto vx = test::stored(test::random_values(s, seed, dt, is_floating(dt) ? -1 : -50, is_floating(dt) ? 1 : 50,
                                                   l == Layout::Expanded),
                               s, dt);
  Tensor x = test::on_device(dev, vx, s, dt, l);
  for (ReduceOp op : ops) {
    Tensor out = test::poisoned_on(dev, keep, dt, Layout::Contiguous);
    reduce_keepdim_out(op, out, x, dims, 1);
    expect_reduction(out, op, dt, vx, s, dims,
                     std::string(reduce_op_name(op)) + " " + dtype_name(dt) + " " + test::layout_name(l) + " sizes " +
                         test::shape_str(s) + " dims " + test::shape_str(dims));
  }
}
void expect_reduce_matches(const Device& dev, ReduceOp op, DType dt, const Shape& s, Layout l, const Shape& dims,
                           uint64_t seed) {
  expect_reduce_matches(dev, {op}, dt, s, l, dims, seed);
}

// out (row-major over the kept dims) against float64 loops over vx, the values of x
// (row-major over s), reduced over dims (correction 1).
void expect_reduction(const Tensor& out, ReduceOp op, DType dt, const std::vector<double>& vx, const Shape& s,
                      const Shape& dims, const std::string& what) {
  Shape keep = s;
  int64_t R = 1;
  for (int64_t d : dims) {
    R *= s[d];
    keep[d] = 1;
  }
  // reference: accumulate each element into its output
  const int64_t O = checked_numel(keep, "ref");
  std::vector<double> sum(O, 0.0), mx(O, -INFINITY), sq(O, 0.0), l1(O, 0.0);
  // oi[i]: the output of element i (row-major over s), by an odometer over s
  const int nd = static_cast<int>(s.size());
  std::vector<int64_t> ost(nd), id(nd, 0), oi(vx.size());
  for (int64_t d = nd - 1, acc = 1; d >= 0; acc *= keep[d], --d) ost[d] = keep[d] == 1 ? 0 : acc;
  for (int64_t i = 0, o = 0; i < static_cast<int64_t>(vx.size()); ++i) {
    oi[i] = o;
    for (int d = nd - 1; d >= 0; --d) {
      o += ost[d];
      if (++id[d] < s[d]) break;
      o -= ost[d] * s[d];
      id[d] = 0;
    }
  }
  for (int64_t i = 0; i < static_cast<int64_t>(vx.size()); ++i) {
    sum[oi[i]] += vx[i];
    l1[oi[i]] += std::fabs(vx[i]);
    mx[oi[i]] = std::max(mx[oi[i]], vx[i]);
  }
  for (int64_t i = 0; i < static_cast<int64_t>(vx.size()); ++i) {
    const double d = vx[i] - sum[oi[i]] / R;
    sq[oi[i]] += d * d;
  }
  std::vector<double> ref(O);
  for (int64_t o = 0; o < O; ++o) {
    switch (op) {
      case ReduceOp::Sum: ref[o] = sum[o]; break;
      case ReduceOp::Mean: ref[o] = sum[o] / R; break;
      case ReduceOp::Max: ref[o] = mx[o]; break;
      case ReduceOp::Var: ref[o] = sq[o] / std::max<int64_t>(0, R - 1); break;
      case ReduceOp::Std: ref[o] = std::sqrt(sq[o] / std::max<int64_t>(0, R - 1)); break;
    }
  }
  const double tol = dt == DType::Float16    ? 5e-3
                     : dt == DType::BFloat16 ? test::default_rtol(dt)
                     : dt == DType::Float32  ? 1e-5
                     : dt == DType::Int32    ? 0
                                             : 1e-12;
  // A float32 sum (the CPU accumulates float32 in blocks, as PyTorch) of values that
  // cancel errs by up to about log2(R) * eps * sum|x|, more than 1e-5 once R is in the
  // thousands: the absolute tolerance of Sum and Mean grows with that bound.
  double atol = tol;
  if (dt == DType::Float32 && (op == ReduceOp::Sum || op == ReduceOp::Mean)) {
    const double l1max = O > 0 ? *std::max_element(l1.begin(), l1.end()) : 0.0;
    atol = std::max(tol, std::log2(static_cast<double>(R) + 1) * std::ldexp(1.0, -24) * l1max /
                             (op == ReduceOp::Mean ? static_cast<double>(std::max<int64_t>(R, 1)) : 1.0));
  }
  EXPECT_TRUE(all_close(out, ref, atol, tol)) << what;
}

TEST_P(ReduceOnDevice, EveryOpDtypeDimsLayout) {
  const Device dev = GetParam();
  SB_SKIP_WITHOUT_DEVICE(dev);
  const ReduceOp ops[] = {ReduceOp::Sum, ReduceOp::Mean, ReduceOp::Max, ReduceOp::Var, ReduceOp::Std};
  std::mt19937_64 rng(77);
  for (ReduceOp op : ops) {
    for (DType dt : test::kMathTypes) {
      if (!is_floating(dt) && op != ReduceOp::Sum && op != ReduceOp::Max) continue;
      for (const Shape& s : test::mixed_shapes(51, 3)) {
        for (Layout l : test::all_layouts()) {
          Shape dims;
          for (int64_t d = 0; d < static_cast<int64_t>(s.size()); ++d)
            if (rng() % 2) dims.push_back(d);
          if (dims.empty() && !s.empty()) dims.push_back(static_cast<int64_t>(rng() % s.size()));
          int64_t R = 1;
          for (int64_t d : dims) R *= s[d];
          if (op == ReduceOp::Max && R == 0) continue;  // an error, tested below
          expect_reduce_matches(dev, op, dt, s, l, dims, 8);
        }
      }
    }
  }
}

// Sizes that take the GPU's column kernel (>= 1024 outputs along the storage, >= 256
// rows), its block kernel on contiguous rows (16-byte loads after a scalar head, odd
// lengths for the tail) and on strided ones, each with reduced dims that coalesce to
// one stride and with ones that do not (Note [Linear reduced dims] in reduce.cu), and
// its warp-per-row kernel (5000 and 2600 unit-stride rows: more than 16 per SM on any
// GPU of up to 162 SMs; rows of 37 and 1029 elements start off 16-byte boundaries;
// Note [Rows per warp]).
TEST_P(ReduceOnDevice, ColumnAndBlockPathsEveryLayout) {
  const Device dev = GetParam();
  SB_SKIP_WITHOUT_DEVICE(dev);
  struct Case {
    Shape s, dims;
  };
  const Case cases[] = {{{300, 1030}, {0}}, {{1030, 300}, {1}}, {{300, 37}, {1}}, {{3, 1301, 7}, {1}},
                        {{40, 50, 37}, {0, 2}}, {{2, 3000}, {1}}, {{5000, 37}, {1}}, {{2, 1300, 1029}, {2}},
                        {{2600, 64}, {1}}};
  for (const Case& c : cases) {
    for (Layout l : test::all_layouts()) {
      expect_reduce_matches(dev, {ReduceOp::Sum, ReduceOp::Max, ReduceOp::Var, ReduceOp::Std}, DType::Float32, c.s, l,
                            c.dims, 31);
      expect_reduce_matches(dev, ReduceOp::Sum, DType::Int32, c.s, l, c.dims, 35);
      expect_reduce_matches(dev, ReduceOp::Sum, DType::Float16, c.s, l, c.dims, 32);
      expect_reduce_matches(dev, ReduceOp::Var, DType::BFloat16, c.s, l, c.dims, 34);
      expect_reduce_matches(dev, ReduceOp::Mean, DType::Float64, c.s, l, c.dims, 33);
    }
  }
}

TEST_P(ReduceOnDevice, LargeInnerOuterAndErrors) {
  const Device dev = GetParam();
  SB_SKIP_WITHOUT_DEVICE(dev);
  // 1 output of 2^20 + 3 elements: split over many blocks, the last of which finishes it.
  for (Shape s : {Shape{(1 << 20) + 3}, Shape{5000, 3}, Shape{3, 70001}}) {
    const auto v = test::stored(test::random_values(s, 12, DType::Float32, -1, 1, false), s, DType::Float32);
    Tensor x = test::host_tensor(v, s, DType::Float32).to(dev);
    const Shape dims = {0};
    Shape keep = s;
    keep[0] = 1;
    Tensor out = test::poisoned_on(dev, keep, DType::Float32, Layout::Contiguous);
    reduce_keepdim_out(ReduceOp::Var, out, x, dims, 0);
    const int64_t inner = s.size() > 1 ? s[1] : 1;
    std::vector<double> ref(inner);
    for (int64_t j = 0; j < inner; ++j) {
      double m = 0, q = 0;
      for (int64_t i = 0; i < s[0]; ++i) m += v[i * inner + j];
      m /= s[0];
      for (int64_t i = 0; i < s[0]; ++i) q += (v[i * inner + j] - m) * (v[i * inner + j] - m);
      ref[j] = q / s[0];
    }
    EXPECT_TRUE(all_close(out, ref, 1e-6, 1e-5)) << test::shape_str(s);
  }
  Tensor e = empty({0, 3}, DType::Float32, dev);
  try {
    reduce_keepdim_out(ReduceOp::Max, empty({1, 3}, DType::Float32, dev), e, {0}, 1);
    FAIL() << "expected sb::Error";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("max has no identity"), std::string::npos) << err.what();
  }
  EXPECT_THROW(reduce_keepdim_out(ReduceOp::Sum, empty({2, 3}, DType::Float32, dev), empty({2, 3}, DType::Float32, dev),
                            {0}, 1),
               Error);  // out not in keepdim form
}

// The family's case table (Note [Case tables], cases/reduce.h): every reduction the
// benchmarks time (std too), on small odd R x C sizes in both layouts, every dtype the
// op takes, on every device, against float64 loops over the input's own values.
TEST_P(ReduceOnDevice, EveryCaseOfTheTable) {
  const Device dev = GetParam();
  SB_SKIP_WITHOUT_DEVICE(dev);
  const Shape sizes[] = {{1, 1}, {7, 13}, {64, 48}, {33, 1}, {1, 300}, {257, 9}};
  uint64_t seed = 1;
  for (const cases::ReduceCase& c :
       cases::reduce_cases({ReduceOp::Sum, ReduceOp::Mean, ReduceOp::Max, ReduceOp::Var, ReduceOp::Std})) {
    for (DType dt : test::kMathTypes) {
      if (!is_floating(dt) && c.op != ReduceOp::Sum && c.op != ReduceOp::Max) continue;
      for (const Shape& s : sizes) {
        const double lo = is_floating(dt) ? -1 : -50, hi = is_floating(dt) ? 1 : 50;
        const Tensor x = test::with_placement(test::host_tensor(test::random_values(s, seed++, dt, lo, hi), s, dt).to(dev),
                                              cases::reduce_placement(c, s));
        const Tensor y = cases::reduce_call(c, x);
        EXPECT_EQ(y.device(), dev);
        ASSERT_EQ(y.sizes(), Shape({c.inner ? s[0] : s[1]}));
        expect_reduction(y, c.op, dt, test::naive_values(x), s, {c.inner ? 1 : 0},
                         std::string(reduce_op_name(c.op)) + " " + layout_name(c.layout) + " dim:" +
                             cases::dim_name(c) + " " + dtype_name(dt) + " " + test::shape_str(s));
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, ReduceOnDevice, ::testing::ValuesIn(test::test_devices()), test::device_param_name);

#ifdef SB_WITH_CUDA
TEST(CudaReduce, BackendRejectsHostTensorsBeforeAnyWork) {
  Tensor a = zeros({2, 3}), out = full({1, 3}, 7.0);
  test::expect_msg([&] { cuda::reduce(ReduceOp::Sum, out, a, {0}, 1); }, "expected CUDA tensors, got one on cpu");
  EXPECT_EQ(out.to_vector(), std::vector<double>(3, 7.0));
}

// Note [Column pairs]: sums over an outer dim of 2-byte outputs on aligned words take
// the pairs kernel, every op, both 2-byte dtypes: 1040 outputs (the last block partly
// empty), 1000 rows (a ragged unroll in each split). Where the pairs do not line up
// (1041 outputs; x one element into its buffer; rows 1041 elements apart) and for
// float32, the element column kernel runs. A NaN at an even and at an odd column of a
// max reaches those outputs alone (the low and high halves of a word).
TEST(CudaReduce, TwoByteOuterColumnsTakePairs) {
  const Device dev = Device::cuda(0);
  SB_SKIP_WITHOUT_DEVICE(dev);
  const Shape s = {1000, 1040};
  for (const DType dt : {DType::Float16, DType::BFloat16}) {
    for (const ReduceOp op : {ReduceOp::Sum, ReduceOp::Mean, ReduceOp::Max, ReduceOp::Var, ReduceOp::Std}) {
      cuda::reset_reduce_path_counts();
      expect_reduce_matches(dev, op, dt, s, Layout::Contiguous, {0}, 61);
      EXPECT_EQ(cuda::reduce_path_counts().column_pairs, 1) << reduce_op_name(op) << " " << dtype_name(dt);
      EXPECT_EQ(cuda::reduce_path_counts().column, 0) << reduce_op_name(op) << " " << dtype_name(dt);
    }
  }
  cuda::reset_reduce_path_counts();
  expect_reduce_matches(dev, ReduceOp::Sum, DType::BFloat16, {1000, 1041}, Layout::Contiguous, {0}, 62);
  expect_reduce_matches(dev, ReduceOp::Sum, DType::Float32, s, Layout::Contiguous, {0}, 63);
  EXPECT_EQ(cuda::reduce_path_counts().column, 2);
  const DType bf = DType::BFloat16;
  const auto vx = test::stored(test::random_values(s, 64, bf, -1, 1, false), s, bf);
  // x as rows `row` elements apart from element `start` of a zeroed buffer
  auto sum_strided = [&](int64_t row, int64_t start, const char* what) {
    const int64_t n = 999 * row + 1040 + start;
    const Tensor buf = test::on_device(dev, std::vector<double>(n, 0.0), {n}, bf, Layout::Contiguous);
    Tensor x = buf.as_strided(s, {row, 1}, start);
    x.copy_(test::on_device(dev, vx, s, bf, Layout::Contiguous));
    Tensor out = test::poisoned_on(dev, {1, 1040}, bf, Layout::Contiguous);
    reduce_keepdim_out(ReduceOp::Sum, out, x, {0}, 1);
    expect_reduction(out, ReduceOp::Sum, bf, vx, s, {0}, what);
  };
  sum_strided(1040, 1, "bf16 sum, x one element in: words split across outputs");
  sum_strided(1041, 0, "bf16 sum, rows 1041 apart: every other row starts mid-word");
  EXPECT_EQ(cuda::reduce_path_counts().column, 4);
  EXPECT_EQ(cuda::reduce_path_counts().column_pairs, 0);
  std::vector<double> vn = vx;  // NaN at (700, 13) and (300, 14)
  vn[700 * 1040 + 13] = NAN;
  vn[300 * 1040 + 14] = NAN;
  const Tensor xn = test::on_device(dev, vn, s, bf, Layout::Contiguous);
  Tensor mx = test::poisoned_on(dev, {1, 1040}, bf, Layout::Contiguous);
  reduce_keepdim_out(ReduceOp::Max, mx, xn, {0}, 1);
  const std::vector<double> got = test::naive_values(mx);
  for (int64_t j = 0; j < 1040; ++j) EXPECT_EQ(std::isnan(got[j]), j == 13 || j == 14) << "column " << j;
  EXPECT_EQ(cuda::reduce_path_counts().column_pairs, 1);
}

// Note [Last split finishes]: reductions split over several blocks (the column kernels
// where the outputs are few, the block kernel's long rows) write their outputs from the
// last split's block, with no finalize launch, and leave the counters at zero: each
// reduction runs twice into a poisoned out, contiguous and stepped, and must match both
// times (a counter left at its split count would leave the second out poisoned). Every
// op the dtype takes; the column kernel (float32, int32, 3000 rows: at least two splits
// on any device) and its pairs (bf16); the block kernel on one row of 2^20 + 3 and on
// three of 70001; and the one-split launches of var, whose first pass writes the means
// itself (a column kernel of 1250 blocks, 40000 rows; rows of 5000 in the block kernel).
// Each output is also the finalize launch's, bit for bit (set_reduce_last_split: the
// split cases then launch it, the one-split ones need none).
TEST(CudaReduce, SplitsFinishInTheirLastBlock) {
  const Device dev = Device::cuda(0);
  SB_SKIP_WITHOUT_DEVICE(dev);
  struct Case {
    Shape s, dims;
    DType dt;
    bool split;  // more than one split
  };
  const Case cases[] = {{{3000, 1030}, {0}, DType::Float32, true},  {{3000, 1030}, {0}, DType::Int32, true},
                        {{3000, 1040}, {0}, DType::BFloat16, true}, {{(1 << 20) + 3}, {0}, DType::Float32, true},
                        {{3, 70001}, {1}, DType::Float64, true},    {{300, 40000}, {0}, DType::Float32, false},
                        {{50, 5000}, {1}, DType::Float32, false}};
  uint64_t seed = 70;
  for (const Case& c : cases) {
    Shape keep = c.s;
    for (int64_t d : c.dims) keep[d] = 1;
    const bool fp = is_floating(c.dt);
    const auto vx = test::stored(test::random_values(c.s, seed++, c.dt, fp ? -1 : -50, fp ? 1 : 50, false), c.s, c.dt);
    const Tensor x = test::on_device(dev, vx, c.s, c.dt, Layout::Contiguous);
    for (const ReduceOp op : {ReduceOp::Sum, ReduceOp::Mean, ReduceOp::Max, ReduceOp::Var, ReduceOp::Std}) {
      if (!fp && op != ReduceOp::Sum && op != ReduceOp::Max) continue;
      const std::string what = std::string(reduce_op_name(op)) + " " + dtype_name(c.dt) + " sizes " +
                               test::shape_str(c.s) + " dims " + test::shape_str(c.dims);
      std::vector<double> fused;
      for (const Layout ol : {Layout::Contiguous, Layout::Sliced}) {
        cuda::reset_reduce_path_counts();
        for (int rep = 0; rep < 2; ++rep) {
          Tensor out = test::poisoned_on(dev, keep, c.dt, ol);
          reduce_keepdim_out(op, out, x, c.dims, 1);
          expect_reduction(out, op, c.dt, vx, c.s, c.dims,
                           what + " out " + test::layout_name(ol) + " call " + std::to_string(rep + 1));
          fused = test::naive_values(out);
        }
        EXPECT_EQ(cuda::reduce_path_counts().finalize, 0) << what;
      }
      cuda::set_reduce_last_split(false);
      cuda::reset_reduce_path_counts();
      Tensor out = test::poisoned_on(dev, keep, c.dt, Layout::Contiguous);
      reduce_keepdim_out(op, out, x, c.dims, 1);
      cuda::set_reduce_last_split(true);
      EXPECT_EQ(cuda::reduce_path_counts().finalize > 0, c.split) << what;
      const std::vector<double> finalized = test::naive_values(out);
      ASSERT_EQ(finalized.size(), fused.size()) << what;
      for (size_t i = 0; i < fused.size(); ++i)
        EXPECT_TRUE(fused[i] == finalized[i] || (std::isnan(fused[i]) && std::isnan(finalized[i])))
            << what << ": output " << i << " " << fused[i] << " by the last split, " << finalized[i]
            << " by the finalize launch";
    }
  }
}
#endif  // SB_WITH_CUDA

}  // namespace
}  // namespace sb
