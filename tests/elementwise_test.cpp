// elementwise_test.cpp — lib/elementwise/ against float64 naive references: every
// op, every input layout (test_util's with_layout), broadcasting, the three styles
// (out-of-place, out=, in-place), outputs poisoned first, 1 and 2 threads, the AVX2
// and scalar paths, float32/float64/float16/int32; the AVX2 exp's ulp error; the
// out-of-place layout rule; bad inputs and the overlap rules.
#include "stridebench/elementwise.h"
#include "core/test_hooks.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <optional>
#include <utility>

#include "stridebench/cpu_features.h"
#include "stridebench/parallel.h"
#include "copy/copy.h"
#include "cases/elementwise.h"
#include "cases/layout.h"
#include "elementwise_util.h"
#include "test_util.h"

#ifdef SB_WITH_CUDA
#include "cuda/cuda_backend.h"
#endif

namespace sb {
namespace {

using test::all_close;
using test::Layout;
using cases::Style;

const std::vector<BinaryOp> kBinaryOps = {BinaryOp::Add,     BinaryOp::Sub,    BinaryOp::Mul,
                                          BinaryOp::Div,     BinaryOp::Maximum, BinaryOp::Minimum};
const std::vector<UnaryOp> kUnaryOps = {UnaryOp::Neg, UnaryOp::Abs, UnaryOp::Relu, UnaryOp::Exp, UnaryOp::Sqrt};
const std::vector<DType> kDTypes = {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16, DType::Int32};

using test::ref_binary;
using test::ref_unary;
using namespace ewtest;

bool supported(BinaryOp op, DType dt) { return !(op == BinaryOp::Div && dt == DType::Int32); }
bool supported(UnaryOp op, DType dt) { return dt != DType::Int32 || (op != UnaryOp::Exp && op != UnaryOp::Sqrt); }

TEST(Elementwise, BinaryEveryLayoutStyleDtypeAgainstReference) {
  for_each_config([](const std::string& cfg) {
    std::mt19937_64 rng(21);
    for (int trial = 0; trial < 10; ++trial) {
      const Shape sa = trial_shape(rng, trial);
      const Shape sb = trial % 3 == 0 ? sa : broadcast_partner(rng, sa);
      const bool swap = trial % 4 == 1;  // sometimes a is the broadcast one
      const Shape& sx = swap ? sb : sa;
      const Shape& sy = swap ? sa : sb;
      const Shape so = broadcast_shapes(sx, sy, "test");
      const bool big = checked_numel(so, "test") > 10000;
      for (DType dt : kDTypes) {
        const Tensor xv = values(sx, rng(), dt), yv = values(sy, rng(), dt, /*positive=*/true);
        // each operand's values broadcast to so, as its layout holds them ([1]: Expanded)
        const std::vector<double> xb[2] = {broadcast_values(xv, so),
                                           broadcast_values(test::layout_values(xv, Layout::Expanded), so)};
        const std::vector<double> yb[2] = {broadcast_values(yv, so),
                                           broadcast_values(test::layout_values(yv, Layout::Expanded), so)};
        for (BinaryOp op : kBinaryOps) {
          if (!supported(op, dt)) continue;
          for (Layout lx : test::all_layouts()) {
            for (Layout ly : test::all_layouts()) {
              if (big && ((lx != ly && ly != Layout::Contiguous) || (op != BinaryOp::Add && op != BinaryOp::Maximum)))
                continue;  // keep big cases few
              const std::vector<double>& xs = xb[lx == Layout::Expanded];
              const std::vector<double>& ys = yb[ly == Layout::Expanded];
              std::vector<double> ref(xs.size());
              for (size_t i = 0; i < ref.size(); ++i) ref[i] = ref_binary(op, xs[i], ys[i]);
              ref = round_to(ref, dt);
              const std::string what = cfg + ", " + binary_op_name(op) + ", " + dtype_name(dt) + ", " +
                                       test::layout_name(lx) + " x " + test::layout_name(ly) + ", trial " +
                                       std::to_string(trial);
              const Tensor x = test::with_layout(xv, lx), y = test::with_layout(yv, ly);
              // out-of-place
              const Tensor r = binary(op, x, y);
              ASSERT_TRUE(test::all_close(r, ref, atol(dt), rtol(dt))) << what << " (out-of-place)";
              // out= into a poisoned output of a varying layout
              const Layout lo = test::all_layouts()[(trial + static_cast<int>(ly)) % 6];
              Tensor out = test::with_layout(zeros(so, dt), lo == Layout::Expanded ? Layout::Sliced : lo);
              test::poison(out);
              binary_out(op, out, x, y);
              ASSERT_TRUE(test::all_close(out, ref, atol(dt), rtol(dt))) << what << " (out=)";
              // in-place, when the broadcast shape is x's own
              if (so == sx && lx != Layout::Expanded) {
                Tensor xi = test::with_layout(xv, lx);
                switch (op) {
                  case BinaryOp::Add: xi.add_(y); break;
                  case BinaryOp::Sub: xi.sub_(y); break;
                  case BinaryOp::Mul: xi.mul_(y); break;
                  case BinaryOp::Div: xi.div_(y); break;
                  case BinaryOp::Maximum: xi.maximum_(y); break;
                  case BinaryOp::Minimum: xi.minimum_(y); break;
                }
                ASSERT_TRUE(test::all_close(xi, ref, atol(dt), rtol(dt))) << what << " (in-place)";
              }
            }
          }
        }
      }
    }
  });
}

TEST(Elementwise, BinaryScalarEveryLayoutStyleDtype) {
  for_each_config([](const std::string& cfg) {
    std::mt19937_64 rng(22);
    for (int trial = 0; trial < 10; ++trial) {
      const Shape sz = trial_shape(rng, trial);
      for (DType dt : kDTypes) {
        const double s = dt == DType::Int32 ? -7.0 : 0.375;
        const Tensor xv = values(sz, rng(), dt);
        const std::vector<double> xr = xv.to_vector();
        const bool big = xv.numel() > 10000;
        for (BinaryOp op : kBinaryOps) {
          if (!supported(op, dt) || (big && op != BinaryOp::Add && op != BinaryOp::Div)) continue;
          for (Layout l : test::all_layouts()) {
            const std::vector<double> xl = test::layout_values(xr, sz, l);
            std::vector<double> ref(xl.size());
            for (size_t i = 0; i < ref.size(); ++i) ref[i] = ref_binary(op, xl[i], s);
            ref = round_to(ref, dt);
            const std::string what = cfg + ", " + binary_op_name(op) + " scalar, " + dtype_name(dt) + ", " +
                                     test::layout_name(l) + ", trial " + std::to_string(trial);
            const Tensor x = test::with_layout(xv, l);
            ASSERT_TRUE(test::all_close(binary(op, x, s), ref, atol(dt), rtol(dt))) << what << " (out-of-place)";
            Tensor out = test::with_layout(zeros(sz, dt), l == Layout::Expanded ? Layout::Offset : l);
            test::poison(out);
            binary_out(op, out, x, s);
            ASSERT_TRUE(test::all_close(out, ref, atol(dt), rtol(dt))) << what << " (out=)";
            if (l == Layout::Expanded) continue;
            Tensor xi = test::with_layout(xv, l);
            switch (op) {
              case BinaryOp::Add: xi.add_(s); break;
              case BinaryOp::Sub: xi.sub_(s); break;
              case BinaryOp::Mul: xi.mul_(s); break;
              case BinaryOp::Div: xi.div_(s); break;
              default: binary_out(op, xi, xi, s);
            }
            ASSERT_TRUE(test::all_close(xi, ref, atol(dt), rtol(dt))) << what << " (in-place)";
          }
        }
      }
    }
  });
}

TEST(Elementwise, UnaryEveryLayoutStyleDtype) {
  for_each_config([](const std::string& cfg) {
    std::mt19937_64 rng(23);
    for (int trial = 0; trial < 10; ++trial) {
      const Shape sz = trial_shape(rng, trial);
      for (DType dt : kDTypes) {
        const Tensor xv = values(sz, rng(), dt);
        const std::vector<double> xr = xv.to_vector();
        const bool big = xv.numel() > 10000;
        for (UnaryOp op : kUnaryOps) {
          if (!supported(op, dt) || (big && op != UnaryOp::Relu && op != UnaryOp::Exp)) continue;
          const double rt = rtol(dt, op == UnaryOp::Exp || op == UnaryOp::Sqrt);
          for (Layout l : test::all_layouts()) {
            const std::vector<double> xl = test::layout_values(xr, sz, l);
            std::vector<double> ref(xl.size());
            for (size_t i = 0; i < ref.size(); ++i) ref[i] = ref_unary(op, xl[i]);
            ref = round_to(ref, dt);
            const std::string what = cfg + ", " + unary_op_name(op) + ", " + dtype_name(dt) + ", " +
                                     test::layout_name(l) + ", trial " + std::to_string(trial);
            const Tensor x = test::with_layout(xv, l);
            ASSERT_TRUE(test::all_close(unary(op, x), ref, atol(dt), rt)) << what << " (out-of-place)";
            Tensor out = test::with_layout(zeros(sz, dt), l == Layout::Expanded ? Layout::Transposed : l);
            test::poison(out);
            unary_out(op, out, x);
            ASSERT_TRUE(test::all_close(out, ref, atol(dt), rt)) << what << " (out=)";
            if (l == Layout::Expanded) continue;
            Tensor xi = test::with_layout(xv, l);
            switch (op) {
              case UnaryOp::Neg: xi.neg_(); break;
              case UnaryOp::Abs: xi.abs_(); break;
              case UnaryOp::Relu: xi.relu_(); break;
              case UnaryOp::Exp: xi.exp_(); break;
              case UnaryOp::Sqrt: xi.sqrt_(); break;
            }
            ASSERT_TRUE(test::all_close(xi, ref, atol(dt), rt)) << what << " (in-place)";
          }
        }
      }
    }
  });
}

// Writing through a stepped slice (in place, or out= into a slice) must leave the
// elements between the slice's elements as they were: they belong to someone else.
// Every element of the base storage outside the view is compared before and after.
TEST(Elementwise, WritesThroughASliceLeaveTheGapsAlone) {
  for_each_config([](const std::string& cfg) {
    std::mt19937_64 rng(41);
    for (const Shape& sz : {Shape{3, 37}, Shape{2, 5, 130}, Shape{1100}}) {
      for (int64_t step : {2, 3}) {
        for (DType dt : {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16}) {
          Shape bsz = sz;
          bsz.back() *= step;
          const std::vector<std::pair<std::string, std::function<void(Tensor&)>>> writes = {
              {"relu_", [](Tensor& v) { v.relu_(); }},
              {"add_(tensor)", [&](Tensor& v) { v.add_(values(v.sizes(), 5, dt)); }},
              {"mul_(scalar)", [](Tensor& v) { v.mul_(1.5); }},
              {"normalize_(-1)", [](Tensor& v) { v.normalize_(-1); }},
              {"exp_out", [&](Tensor& v) { exp_out(v, values(v.sizes(), 6, dt)); }},
              {"sub_out", [&](Tensor& v) { sub_out(v, values(v.sizes(), 7, dt), values({v.sizes().back()}, 8, dt)); }},
          };
          for (const auto& [name, write] : writes) {
            Tensor base = values(bsz, rng(), dt);
            const std::vector<double> before = base.to_vector();
            Tensor view = base.slice(-1, 0, std::nullopt, step);
            write(view);
            const std::vector<double> after = base.to_vector();
            const int64_t last = bsz.back();
            for (size_t i = 0; i < after.size(); ++i) {
              if (static_cast<int64_t>(i) % last % step == 0) continue;  // an element of the view
              ASSERT_EQ(std::memcmp(&before[i], &after[i], sizeof(double)), 0)
                  << cfg << ", " << name << ", " << dtype_name(dt) << ", step " << step << ", base sizes "
                  << ::testing::PrintToString(bsz) << ": element " << i << " outside the view changed from "
                  << before[i] << " to " << after[i];
            }
          }
        }
      }
    }
  });
}

// The lengths and buffer edges that both stride-2 tests below walk: lengths around the
// vector widths and the thread split; a view that starts at element 0 or 1 of its buffer,
// which ends with the view's last element (tail 0) or 3 elements later.
constexpr int64_t kStrideTwoLengths[] = {1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 33, 1000, 40001};
struct BufferEdge {
  int64_t start, tail;
};
constexpr BufferEdge kBufferEdges[] = {{0, 0}, {1, 0}, {0, 3}, {1, 3}};

// Note [Stride-2 strips]: outputs that are every other element of their storage, with
// inputs of the same stride or stride 0 (one coalesced stride-2 strip), at every length
// around the vector width and the thread split. The view starts at element 0 or 1 of a
// buffer that ends with its last element (a read past it shows under the sanitizer
// build) or 3 elements later. Its values must match the reference and every other
// element of the buffer must keep its bits, in place (x.relu_(), x.add_(y[::2]),
// x.mul_(s)) and through out= (y[::2] - z, z - y[::2] with z a stride-0 tensor, exp;
// the view poisoned first).
TEST(Elementwise, StrideTwoOutputsAgainstReferenceAtVectorEdges) {
  for_each_config([](const std::string& cfg) {
    std::mt19937_64 rng(43);
    for (int64_t n : kStrideTwoLengths)
      for (const BufferEdge& edge : kBufferEdges)
        for (DType dt : kDTypes) {
          const int64_t start = edge.start, tail = edge.tail;
          const int64_t m = start + 2 * n - 1 + tail;  // tail 0: the view's last element is the buffer's last
          const Tensor ys = values({1, m}, rng(), dt).reshape({m}).slice(0, start, start + 2 * n - 1, 2);
          const Tensor z0 = values({1}, rng(), dt, /*positive=*/true).expand({n});  // stride 0
          const std::vector<double> yr = ys.to_vector();
          const double z = z0.to_vector()[0];
          const std::string what =
              cfg + ", " + dtype_name(dt) + ", n " + std::to_string(n) + ", start " + std::to_string(start) + ", tail " +
              std::to_string(tail);
          const auto check = [&](const char* op, const std::function<double(double, double)>& ref,
                                 const std::function<void(Tensor&)>& run, bool out_style, bool transcendental = false) {
            Tensor base = values({1, m}, rng(), dt).reshape({m});
            Tensor view = base.slice(0, start, start + 2 * n - 1, 2);
            const std::vector<double> xr = view.to_vector();
            std::vector<double> want(n);
            for (int64_t i = 0; i < n; ++i) want[i] = ref(xr[i], yr[i]);
            if (out_style) test::poison(view);
            const std::vector<double> before = base.to_vector();
            run(view);
            ASSERT_TRUE(test::all_close(view, round_to(want, dt), atol(dt), rtol(dt, transcendental))) << what << " " << op;
            const std::vector<double> after = base.to_vector();
            for (int64_t i = 0; i < m; ++i)
              if (i < start || (i - start) % 2 == 1 || i >= start + 2 * n - 1) {
                ASSERT_EQ(std::memcmp(&before[i], &after[i], sizeof(double)), 0) << what << " " << op << ": element " << i
                                                                                  << " outside the view changed";
              }
          };
          const double sc = dt == DType::Int32 ? 3.0 : 0.75;
          check("x.relu_()", [](double x, double) { return x < 0 ? 0 : x; }, [](Tensor& v) { v.relu_(); }, false);
          check("x.add_(y[::2])", [](double x, double y) { return x + y; }, [&](Tensor& v) { v.add_(ys); }, false);
          check("x.mul_(s)", [&](double x, double) { return x * sc; }, [&](Tensor& v) { v.mul_(sc); }, false);
          check("sub_out(x, y[::2], z)", [&](double, double y) { return y - z; }, [&](Tensor& v) { sub_out(v, ys, z0); },
                true);
          check("sub_out(x, z, y[::2])", [&](double, double y) { return z - y; }, [&](Tensor& v) { sub_out(v, z0, ys); },
                true);
          const Tensor w0 = values({1}, rng(), dt).expand({n});  // both inputs stride 0
          const double w = w0.to_vector()[0];
          check("sub_out(x, z, w)", [&](double, double) { return z - w; }, [&](Tensor& v) { sub_out(v, z0, w0); }, true);
          check("maximum_out(x, w, z)", [&](double, double) { return std::max(w, z); },
                [&](Tensor& v) { maximum_out(v, w0, z0); }, true);
          if (dt != DType::Int32)
            check("exp_out(x, y[::2])", [](double, double y) { return std::exp(y); }, [&](Tensor& v) { exp_out(v, ys); },
                  true, /*transcendental=*/true);
        }
  });
}

// A stepped output row whose inputs are both broadcast along it (a column and a
// scalar): every element of the row gets the column's value, on every SIMD level.
TEST(Elementwise, BroadcastColumnIntoSteppedOutput) {
  for_each_config([](const std::string& cfg) {
    for (DType dt : {DType::Float32, DType::Float64}) {
      const Tensor col = from_vector<double>({10, 20}, {2, 1}).to(dt);
      const Tensor one = full({}, 1.0, dt);
      const auto check = [&](const char* op, const std::function<void(Tensor&)>& run, double r0, double r1) {
        Tensor base = zeros({2, 12}, dt);
        Tensor out = base.slice(1, 0, std::nullopt, 2);
        test::poison(base);
        base.slice(1, 1, std::nullopt, 2).fill_(0);  // the gaps: must stay 0
        run(out);
        std::vector<double> want(12);
        for (int64_t j = 0; j < 6; ++j) want[j] = r0, want[6 + j] = r1;
        ASSERT_TRUE(test::all_close(out, want, 0, 0)) << cfg << ", " << dtype_name(dt) << ", " << op;
        for (int64_t i = 0; i < 2; ++i)
          for (int64_t j = 1; j < 12; j += 2) ASSERT_EQ(base.get({i, j}), 0.0) << cfg << ", " << op << ": gap changed";
      };
      check("sub_out(out, col, 1)", [&](Tensor& o) { sub_out(o, col.expand({2, 6}), one); }, 9, 19);
      check("mul_out(out, 1, col)", [&](Tensor& o) { mul_out(o, one, col.expand({2, 6})); }, 10, 20);
      check("maximum_out(out, 1, col)", [&](Tensor& o) { maximum_out(o, one, col.expand({2, 6})); }, 10, 20);
    }
  });
}

// Note [Gathered stride-2 inputs]: dense outputs of stride-2 inputs, the other operand
// stride 2 too (another buffer, the other parity), dense, or stride 0, on either side of
// an asymmetric op; the same lengths and buffer edges as above. Each input view starts
// at element 0 or 1 of a buffer that ends with its last element or 3 later; the output
// is a poisoned run of a longer buffer whose elements before and after must keep their
// bits (the last vector's masked store).
TEST(Elementwise, StrideTwoInputsIntoDenseOutputsAtVectorEdges) {
  for_each_config([](const std::string& cfg) {
    std::mt19937_64 rng(47);
    for (int64_t n : kStrideTwoLengths)
      for (const BufferEdge& edge : kBufferEdges)
        for (DType dt : kDTypes) {
          const int64_t start = edge.start, tail = edge.tail;
          const auto stride2 = [&](int64_t s) {  // n elements at stride 2 from element s of a tight buffer
            const int64_t m = s + 2 * n - 1 + tail;
            return values({1, m}, rng(), dt).reshape({m}).slice(0, s, s + 2 * n - 1, 2);
          };
          const Tensor ya = stride2(start), yb = stride2(1 - start);
          const Tensor d = values({n}, rng(), dt);
          const Tensor z0 = values({1}, rng(), dt, /*positive=*/true).expand({n});
          const std::vector<double> ar = ya.to_vector(), br = yb.to_vector(), dr = d.to_vector();
          const double z = z0.to_vector()[0];
          const std::string what = cfg + ", " + dtype_name(dt) + ", n " + std::to_string(n) + ", start " +
                                   std::to_string(start) + ", tail " + std::to_string(tail);
          const auto check = [&](const char* op, const std::function<double(int64_t)>& ref,
                                 const std::function<void(Tensor&)>& run, bool transcendental = false) {
            const int64_t lead = 1 + start, m = lead + n + 5;
            Tensor base = values({m}, rng(), dt);
            Tensor out = base.slice(0, lead, lead + n);
            std::vector<double> want(n);
            for (int64_t i = 0; i < n; ++i) want[i] = ref(i);
            test::poison(out);
            const std::vector<double> before = base.to_vector();
            run(out);
            ASSERT_TRUE(test::all_close(out, round_to(want, dt), atol(dt), rtol(dt, transcendental))) << what << " " << op;
            const std::vector<double> after = base.to_vector();
            for (int64_t i = 0; i < m; ++i)
              if (i < lead || i >= lead + n) {
                ASSERT_EQ(std::memcmp(&before[i], &after[i], sizeof(double)), 0) << what << " " << op << ": element " << i
                                                                                  << " outside the output changed";
              }
          };
          check("relu_out(o, y[::2])", [&](int64_t i) { return ar[i] < 0 ? 0 : ar[i]; },
                [&](Tensor& o) { relu_out(o, ya); });
          check("sub_out(o, y[::2], w[1::2])", [&](int64_t i) { return ar[i] - br[i]; },
                [&](Tensor& o) { sub_out(o, ya, yb); });
          check("sub_out(o, y[::2], d)", [&](int64_t i) { return ar[i] - dr[i]; }, [&](Tensor& o) { sub_out(o, ya, d); });
          check("sub_out(o, d, y[::2])", [&](int64_t i) { return dr[i] - ar[i]; }, [&](Tensor& o) { sub_out(o, d, ya); });
          check("sub_out(o, y[::2], z)", [&](int64_t i) { return ar[i] - z; }, [&](Tensor& o) { sub_out(o, ya, z0); });
          check("sub_out(o, z, y[::2])", [&](int64_t i) { return z - ar[i]; }, [&](Tensor& o) { sub_out(o, z0, ya); });
          check("o.copy_(maximum(y[::2], d))", [&](int64_t i) { return std::max(ar[i], dr[i]); },
                [&](Tensor& o) { o.copy_(maximum(ya, d)); });
          if (dt != DType::Int32)
            check("exp_out(o, y[::2])", [&](int64_t i) { return std::exp(ar[i]); }, [&](Tensor& o) { exp_out(o, ya); },
                  /*transcendental=*/true);
        }
  });
}

// Every 997th float in [-104, 89] plus the edges: the AVX2 exp within 2 ulp of the
// correctly rounded result (std::exp in double, rounded to float).
TEST(Elementwise, Avx2ExpIsWithinTwoUlp) {
  if (compiled_simd_level() < SimdLevel::AVX2) GTEST_SKIP() << "built without AVX2";
  std::vector<float> xs;
  auto bits = [](float f) {
    int32_t b;
    std::memcpy(&b, &f, 4);
    return b;
  };
  auto from_bits = [](uint32_t b) {
    float f;
    std::memcpy(&f, &b, 4);
    return f;
  };
  // every 997th float of each sign (subnormal inputs included), then the integers' neighbours
  for (uint32_t m = 0; m <= static_cast<uint32_t>(bits(104.0f)); m += 997) xs.push_back(-from_bits(m));
  for (uint32_t m = 0; m <= static_cast<uint32_t>(bits(89.0f)); m += 997) xs.push_back(from_bits(m));
  for (int k = -103; k <= 88; ++k)
    for (float d : {-1e-3f, 0.0f, 0.5f, 1e-3f}) xs.push_back(static_cast<float>(k) + d);
  const int64_t n = static_cast<int64_t>(xs.size());
  ASSERT_GT(n, 100000);
  set_simd_level(SimdLevel::AVX2);
  const Tensor r = exp(from_vector(xs));
  const float* p = r.data<float>();
  int32_t worst = 0;
  float worst_x = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float want = static_cast<float>(std::exp(static_cast<double>(xs[i])));
    const int32_t d = std::abs(bits(p[i]) - bits(want));
    if (d > worst) {
      worst = d;
      worst_x = xs[i];
    }
  }
  EXPECT_LE(worst, 2) << "worst at x = " << worst_x;
  const Tensor e = exp(from_vector<float>({-INFINITY, INFINITY, NAN, 100.0f, -110.0f, 0.0f, -0.0f, 88.72f, -103.0f}));
  const std::vector<double> got = e.to_vector();
  EXPECT_EQ(got[0], 0.0);
  EXPECT_TRUE(std::isinf(got[1]) && got[1] > 0);
  EXPECT_TRUE(std::isnan(got[2]));
  EXPECT_TRUE(std::isinf(got[3]));
  EXPECT_EQ(got[4], 0.0);
  EXPECT_EQ(got[5], 1.0);
  EXPECT_EQ(got[6], 1.0);
  EXPECT_EQ(static_cast<float>(got[7]), static_cast<float>(std::exp(static_cast<double>(88.72f))));
  EXPECT_EQ(static_cast<float>(got[8]), static_cast<float>(std::exp(-103.0)));
}

TEST(Elementwise, NanPropagatesThroughMaximumMinimumRelu) {
  for_each_config([](const std::string& cfg) {
    for (DType dt : {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16}) {
      const Tensor a = from_vector<double>({NAN, 1, NAN, -2, 3, 4, 5, 6, 7, NAN}).to(dt);
      const Tensor b = from_vector<double>({1, NAN, NAN, -3, 2, 9, 5, 1, 8, 0}).to(dt);
      const std::vector<double> mx = maximum(a, b).to_vector(), mn = minimum(a, b).to_vector(),
                                rl = relu(a).to_vector();
      for (int i : {0, 1, 2, 9}) EXPECT_TRUE(std::isnan(mx[i]) && std::isnan(mn[i])) << cfg << " " << i;
      EXPECT_EQ(mx[3], -2);
      EXPECT_EQ(mn[3], -3);
      EXPECT_TRUE(std::isnan(rl[0]) && rl[3] == 0) << cfg;
    }
  });
}

// The same rules along rows long enough for every dense loop (the 32-element zmm steps
// of Note [bfloat16 rows in zmm], the 16-element pairs, 8-wide vectors, the tail): NaN
// in either operand at scattered places, signed zeros, negative and positive values.
TEST(Elementwise, NanPropagatesAlongLongRows) {
  for_each_config([](const std::string& cfg) {
    for (DType dt : {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16}) {
      const int64_t n = 101;
      std::vector<double> av(n), bv(n);
      for (int64_t i = 0; i < n; ++i) {
        av[i] = i % 7 == 3 ? NAN : i % 11 == 0 ? -0.0 : (i % 3 == 0 ? -1.0 : 1.0) * (0.25 * i + 0.5);
        bv[i] = i % 5 == 1 ? NAN : (i % 4 == 0 ? 1.0 : -1.0) * (0.5 * i - 9.0);
      }
      const Tensor a = from_vector<double>(av).to(dt), b = from_vector<double>(bv).to(dt);
      const std::vector<double> ar = a.to_vector(), br = b.to_vector();
      const std::vector<double> mx = maximum(a, b).to_vector(), mn = minimum(a, b).to_vector(),
                                rl = relu(a).to_vector(), ms = maximum(a, 2.0).to_vector();
      for (int64_t i = 0; i < n; ++i) {
        const bool nan = std::isnan(ar[i]) || std::isnan(br[i]);
        const std::string at = cfg + ", " + dtype_name(dt) + ", element " + std::to_string(i);
        if (nan) {
          EXPECT_TRUE(std::isnan(mx[i]) && std::isnan(mn[i])) << at;
        } else {
          EXPECT_EQ(mx[i], std::max(ar[i], br[i])) << at;
          EXPECT_EQ(mn[i], std::min(ar[i], br[i])) << at;
        }
        if (std::isnan(ar[i])) {
          EXPECT_TRUE(std::isnan(rl[i]) && std::isnan(ms[i])) << at;
        } else {
          EXPECT_EQ(rl[i], ar[i] < 0 ? 0.0 : ar[i]) << at;
          EXPECT_EQ(ms[i], std::max(ar[i], 2.0)) << at;
        }
      }
    }
  });
}

// The iterator's Tiled path: one operand transposed (staged through the AVX2 or the
// scalar tile transpose, 2-byte elements through the zmm tiles where the tuning fills
// 2-byte buffers that way: a second pass with zmm16_fill on), out-of-place (either
// operand order), out= and in-place; ragged sizes around the 8x8 micro-tiles, the 16 x
// 32 zmm tiles and the tile edges, misaligned outputs, every dtype, both SIMD levels, 1
// and 2 threads.
TEST(Elementwise, TransposedOperandAgainstReference) {
  test::TuningScope tuning_scope;
  for (bool zmm_fill : {false, true}) {
  tuning_scope.tuning().zmm16 = tuning_scope.tuning().zmm16_fill = zmm_fill;
  tuning_scope.set();
  for_each_config([&](const std::string& config) {
    const std::string cfg = config + (zmm_fill ? ", 2-byte tiles through zmm" : "");
    std::mt19937_64 rng(5);
    for (const Shape& sz : {Shape{9, 8}, Shape{67, 97}, Shape{261, 300}, Shape{3, 33, 70}}) {
      for (DType dt : kDTypes) {
        if (zmm_fill && dtype_size(dt) != 2) continue;
        const Tensor xv = values(sz, rng(), dt), yv = values(sz, rng(), dt, /*positive=*/true);
        const std::vector<double> xr = xv.to_vector(), yr = yv.to_vector();
        for (BinaryOp op : {BinaryOp::Add, BinaryOp::Sub, BinaryOp::Maximum}) {
          std::vector<double> ref(xr.size());
          for (size_t i = 0; i < ref.size(); ++i) ref[i] = ref_binary(op, xr[i], yr[i]);
          ref = round_to(ref, dt);
          const std::string what = cfg + ", " + binary_op_name(op) + ", " + dtype_name(dt) + ", " + std::to_string(sz[0]) + "x" + std::to_string(sz[1]);
          const Tensor xt = test::with_layout(xv, Layout::Transposed), y = test::with_layout(yv, Layout::Offset);
          ASSERT_TRUE(test::all_close(binary(op, xt, y), ref, atol(dt), rtol(dt))) << what << " (x.t() op y)";
          std::vector<double> ref2(xr.size());  // y op x.t(): row-major output, x staged
          for (size_t i = 0; i < ref2.size(); ++i) ref2[i] = ref_binary(op, yr[i], xr[i]);
          ASSERT_TRUE(test::all_close(binary(op, y, xt), round_to(ref2, dt), atol(dt), rtol(dt))) << what << " (y op x.t())";
          Tensor out = test::with_layout(zeros(sz, dt), Layout::Offset);  // row-major, misaligned
          test::poison(out);
          binary_out(op, out, xt, y);
          ASSERT_TRUE(test::all_close(out, ref, atol(dt), rtol(dt))) << what << " (out=)";
          Tensor yi = test::with_layout(yv, Layout::Offset);
          if (op == BinaryOp::Add) {  // in-place: y += x.t()
            yi.add_(xt);
            ASSERT_TRUE(test::all_close(yi, ref, atol(dt), rtol(dt))) << what << " (in-place)";
          }
        }
        const Tensor xt = test::with_layout(xv, Layout::Transposed);
        Tensor out = test::with_layout(zeros(sz, dt), Layout::Offset);
        test::poison(out);
        neg_out(out, xt);
        std::vector<double> nref = xr;
        for (double& v : nref) v = -v;
        ASSERT_TRUE(test::all_close(out, nref, atol(dt), rtol(dt))) << cfg << ", neg_out, " << dtype_name(dt);
      }
    }
  });
  }
}

// Note [Transposed row blocks]: cache-resident operands that run along the rows of the
// output's blocks (a transposed, permuted or stepped-and-transposed input, a transposed
// output) are transposed by the kernel in registers (float32 8x8, float64 4x4) or staged
// a few rows at a time (other dtypes, other strides). Every such input kind, alone, two
// at once and beside a stride-0 operand; row and column counts around the vector width;
// the Strided path's row blocks (dim 0 shorter than 8: no tiles); outputs poisoned;
// every dtype, SIMD level and 1 and 2 threads.
TEST(Elementwise, TransposedRowBlocksAgainstReference) {
  struct Case {
    const char* name;
    Shape sizes;  // the output's
    std::function<Tensor(const Tensor&)> view;  // a view of a fresh tensor holding values of `sizes`
  };
  // x.t() for 2-D, x.transpose(-1, -2) otherwise, each built from a buffer stored the other way
  const auto transposed = [](const Tensor& v) { return v.transpose(-1, -2).contiguous().transpose(-1, -2); };
  const auto stepped_t = [](const Tensor& v) {  // (v.t() stored with every other column): strides 2, 2n
    const int64_t r = v.sizes()[0], c = v.sizes()[1];
    Tensor buf = zeros({c, 2 * r}, v.dtype());
    Tensor view = buf.slice(1, 0, std::nullopt, 2).t();
    view.copy_(v);
    return view;
  };
  const auto permuted = [](const Tensor& v) {  // dims stored in reverse order
    return v.permute({2, 1, 0}).contiguous().permute({2, 1, 0});
  };
  const auto channels_last = [](const Tensor& v) { return v.contiguous(MemoryFormat::ChannelsLast); };
  const std::vector<Case> cases = {
      {"8x8 transposed", {8, 8}, transposed},
      {"7x9 transposed", {7, 9}, transposed},
      {"37x61 transposed", {37, 61}, transposed},
      {"3x64x64 transposed", {3, 64, 64}, transposed},
      {"2x19x45 transposed", {2, 19, 45}, transposed},
      {"100x5 transposed (no tiles: rows of 5)", {100, 5}, transposed},
      {"5x100 transposed", {5, 100}, transposed},
      {"4x300 transposed (no tiles: 4 rows)", {4, 300}, transposed},
      {"41x23 stepped and transposed", {41, 23}, stepped_t},
      {"9x10x17 permuted", {9, 10, 17}, permuted},
      {"16x3x24 permuted", {16, 3, 24}, permuted},
      // Note [Staged part rows]: rows too long for 8 a stage step, 16 at a time and a tail
      {"19x1100 transposed", {19, 1100}, transposed},
      {"2x21x30x40 channels-last", {2, 21, 30, 40}, channels_last},
      {"1x16x24x24 channels-last", {1, 16, 24, 24}, channels_last},
  };
  for_each_config([&](const std::string& cfg) {
    std::mt19937_64 rng(17);
    for (const Case& c : cases)
      for (DType dt : kDTypes) {
        const Tensor xv = values(c.sizes, rng(), dt), yv = values(c.sizes, rng(), dt, /*positive=*/true);
        const std::vector<double> xr = xv.to_vector(), yr = yv.to_vector();
        const Tensor xt = c.view(xv), yt = c.view(yv);
        const Tensor s = full({1}, 3, dt).expand(c.sizes);  // stride 0 everywhere
        const std::string what = cfg + ", " + c.name + ", " + dtype_name(dt);
        for (BinaryOp op : {BinaryOp::Sub, BinaryOp::Maximum}) {
          std::vector<double> r1(xr.size()), r2(xr.size()), r3(xr.size()), r4(xr.size());
          for (size_t i = 0; i < xr.size(); ++i) {
            r1[i] = ref_binary(op, xr[i], yr[i]);
            r2[i] = ref_binary(op, yr[i], xr[i]);
            r3[i] = ref_binary(op, xr[i], 3);
          }
          r1 = round_to(r1, dt), r2 = round_to(r2, dt), r3 = round_to(r3, dt);
          Tensor out = empty(c.sizes, dt);
          test::poison(out);
          binary_out(op, out, xt, yv);  // transposed, dense
          ASSERT_TRUE(all_close(out, r1, atol(dt), rtol(dt))) << what << ", " << binary_op_name(op) << " (x.t() op y)";
          test::poison(out);
          binary_out(op, out, yv, xt);  // dense, transposed
          ASSERT_TRUE(all_close(out, r2, atol(dt), rtol(dt))) << what << ", " << binary_op_name(op) << " (y op x.t())";
          test::poison(out);
          binary_out(op, out, xt, yt);  // both transposed
          ASSERT_TRUE(all_close(out, r1, atol(dt), rtol(dt))) << what << ", " << binary_op_name(op) << " (x.t() op y.t())";
          test::poison(out);
          binary_out(op, out, xt, s);  // transposed, stride 0
          ASSERT_TRUE(all_close(out, r3, atol(dt), rtol(dt))) << what << ", " << binary_op_name(op) << " (x.t() op 3)";
          Tensor ot = c.view(zeros(c.sizes, dt));  // a transposed output: the dense inputs run along its rows
          test::poison(ot);
          binary_out(op, ot, xv, yv);
          ASSERT_TRUE(all_close(ot, r1, atol(dt), rtol(dt))) << what << ", " << binary_op_name(op) << " (out.t() = x op y)";
          Tensor yi = yv.clone();  // in place: y op= x.t()
          if (op == BinaryOp::Sub) {
            yi.sub_(xt);
            ASSERT_TRUE(all_close(yi, r2, atol(dt), rtol(dt))) << what << " (y -= x.t())";
          }
        }
        std::vector<double> rr(xr.size()), rn(xr.size());
        for (size_t i = 0; i < xr.size(); ++i) {
          rr[i] = std::max(xr[i], 0.0);
          rn[i] = -xr[i];
        }
        Tensor out = empty(c.sizes, dt);
        test::poison(out);
        relu_out(out, xt);
        ASSERT_TRUE(all_close(out, rr, atol(dt), rtol(dt))) << what << " (relu of x.t())";
        test::poison(out);
        neg_out(out, xt);
        ASSERT_TRUE(all_close(out, round_to(rn, dt), atol(dt), rtol(dt))) << what << " (neg of x.t())";
        if (dt != DType::Int32) {
          std::vector<double> re(xr.size());
          for (size_t i = 0; i < xr.size(); ++i) re[i] = std::exp(xr[i]);
          test::poison(out);
          exp_out(out, xt);
          ASSERT_TRUE(all_close(out, re, atol(dt), rtol(dt, true))) << what << " (exp of x.t())";
        }
        Tensor o2 = empty(c.sizes, dt);  // the scalar form: x.t() * 2
        test::poison(o2);
        mul_out(o2, xt, 2.0);
        std::vector<double> r2x(xr.size());
        for (size_t i = 0; i < xr.size(); ++i) r2x[i] = 2 * xr[i];
        ASSERT_TRUE(all_close(o2, round_to(r2x, dt), atol(dt), rtol(dt))) << what << " (x.t() * 2)";
      }
  });
}

// Note [Transposed row blocks]: a column broadcast (x op c, c of [..., R, 1]) reaches
// the row-block kernel as an input of stride 0 along the strips and one element across
// them, and is read 8 (4) rows at a time and transposed into per-row broadcasts. Row
// counts around the vector width, both operand orders, out= into a poisoned output and
// in place; every dtype, SIMD level and 1 and 2 threads.
TEST(Elementwise, ColumnBroadcastRowBlocksAgainstReference) {
  for_each_config([](const std::string& cfg) {
    std::mt19937_64 rng(29);
    for (const Shape& sz : {Shape{64, 8}, Shape{37, 13}, Shape{7, 5}, Shape{16, 3, 9}, Shape{9, 300}}) {
      Shape cs = sz;
      cs.back() = 1;
      for (DType dt : kDTypes) {
        const Tensor x = values(sz, rng(), dt), c = values(cs, rng(), dt, /*positive=*/true);
        const std::vector<double> xr = x.to_vector(), cr = broadcast_values(c, sz);
        const std::string what = cfg + ", " + dtype_name(dt) + ", " + std::to_string(sz[0]) + "x" + std::to_string(sz.back());
        for (BinaryOp op : {BinaryOp::Sub, BinaryOp::Mul}) {
          std::vector<double> r1(xr.size()), r2(xr.size());
          for (size_t i = 0; i < xr.size(); ++i) {
            r1[i] = ref_binary(op, xr[i], cr[i]);
            r2[i] = ref_binary(op, cr[i], xr[i]);
          }
          r1 = round_to(r1, dt), r2 = round_to(r2, dt);
          Tensor out = empty(sz, dt);
          test::poison(out);
          binary_out(op, out, x, c);
          ASSERT_TRUE(all_close(out, r1, atol(dt), rtol(dt))) << what << ", " << binary_op_name(op) << " (x op c)";
          test::poison(out);
          binary_out(op, out, c, x);
          ASSERT_TRUE(all_close(out, r2, atol(dt), rtol(dt))) << what << ", " << binary_op_name(op) << " (c op x)";
          Tensor xi = x.clone();
          if (op == BinaryOp::Sub) xi.sub_(c);
          else xi.mul_(c);
          ASSERT_TRUE(all_close(xi, r1, atol(dt), rtol(dt))) << what << ", " << binary_op_name(op) << " (x op= c)";
        }
      }
    }
  });
}
// Note [Packed strided inputs]: stepped-slice inputs (steps 2 and 3) of a dense output,
// at the SIMD width's and the 512-element chunk's edges, with the slice's last element
// the last of its storage (an over-read shows under the sanitizer build).
TEST(Elementwise, SteppedSliceInputsAtChunkEdges) {
  for_each_config([](const std::string& cfg) {
    std::mt19937_64 rng(9);
    for (int64_t n : {1, 7, 8, 9, 16, 17, 511, 512, 513, 1025, 40000})
      for (int64_t step : {2, 3})
        for (DType dt : {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16, DType::Int32}) {
          // values() is constant along dim 0: make the 1-D tensors from a 1 x m one
          const int64_t m = (n - 1) * step + 1;
          const Tensor xs = values({1, m}, rng(), dt).reshape({m}).slice(0, 0, std::nullopt, step);
          const Tensor y = values({1, n}, rng(), dt, /*positive=*/true).reshape({n});
          const std::vector<double> xr = xs.to_vector(), yr = y.to_vector();
          const std::string what = cfg + ", " + dtype_name(dt) + ", n " + std::to_string(n) + ", step " +
                                   std::to_string(step);
          std::vector<double> ref(n), ref2(n), rr(n);
          for (int64_t i = 0; i < n; ++i) {
            ref[i] = ref_binary(BinaryOp::Sub, xr[i], yr[i]);
            ref2[i] = ref_binary(BinaryOp::Sub, yr[i], xr[i]);
            rr[i] = std::max(xr[i], 0.0);
          }
          Tensor out = empty({n}, dt);
          test::poison(out);
          sub_out(out, xs, y);
          ASSERT_TRUE(test::all_close(out, round_to(ref, dt), atol(dt), rtol(dt))) << what << " (x[::step] - y)";
          test::poison(out);
          sub_out(out, y, xs);
          ASSERT_TRUE(test::all_close(out, round_to(ref2, dt), atol(dt), rtol(dt))) << what << " (y - x[::step])";
          Tensor yi = y.clone();
          yi.sub_(xs);
          ASSERT_TRUE(test::all_close(yi, round_to(ref2, dt), atol(dt), rtol(dt))) << what << " (y -= x[::step])";
          test::poison(out);
          relu_out(out, xs);
          ASSERT_TRUE(test::all_close(out, rr, atol(dt), rtol(dt))) << what << " (relu)";
        }
  });
}

// Note [Streaming elementwise outputs]: with the streaming threshold at 0 every dense
// output above 0 bytes streams. Lengths around the vector width and the thread split,
// outputs starting 0-9 elements past a 64-byte boundary (the head before the first
// aligned store), a stride-0 operand, a scalar, a unary op and a channels-last pair;
// the output is a window of a poisoned buffer whose cells around it must stay poisoned.
// In-place updates must not stream; int32 (no vector loop) never streams.
TEST(Elementwise, StreamingOutputsAgainstReference) {
  set_nt_threshold_bytes(0);
  for_each_config([](const std::string& cfg) {
    std::mt19937_64 rng(17);
    const bool vec = simd_level() >= SimdLevel::AVX2;
    for (int64_t n : {1, 3, 8, 9, 15, 17, 33, 1000, 40001, 70003})
      for (DType dt : kDTypes) {
        const int64_t off = static_cast<int64_t>(rng() % 10);
        const Tensor x = values({1, n}, rng(), dt).reshape({n});
        const Tensor y = values({1, n}, rng(), dt, /*positive=*/true).reshape({n});
        const Tensor y0 = values({1}, rng(), dt, /*positive=*/true).expand({n});  // stride 0
        const std::vector<double> xr = x.to_vector(), yr = y.to_vector();
        const double y0v = y0.to_vector()[0], sc = dt == DType::Int32 ? 3.0 : 0.75;
        std::vector<double> r_add(n), r_mul0(n), r_sc(n), r_relu(n);
        for (int64_t i = 0; i < n; ++i) {
          r_add[i] = xr[i] + yr[i];
          r_mul0[i] = xr[i] * y0v;
          r_sc[i] = xr[i] - sc;
          r_relu[i] = std::max(xr[i], 0.0);
        }
        const std::string what = cfg + ", " + dtype_name(dt) + ", n " + std::to_string(n) + ", offset " +
                                 std::to_string(off);
        const bool want_nt = vec && dt != DType::Int32;
        Tensor buf = empty({n + off + 9}, dt);
        const Tensor out = buf.slice(0, off, off + n);
        auto check = [&](const char* op, const std::vector<double>& ref, const std::function<void()>& run) {
          test::poison(buf);
          const std::vector<double> before = buf.to_vector();
          run();
          ASSERT_EQ(last_elementwise_used_nt(), want_nt) << what << " " << op;
          ASSERT_TRUE(test::all_close(out, round_to(ref, dt), atol(dt), rtol(dt))) << what << " " << op;
          const std::vector<double> after = buf.to_vector();
          for (int64_t i = 0; i < off; ++i) ASSERT_TRUE(std::memcmp(&after[i], &before[i], 8) == 0) << what << " " << op;
          for (int64_t i = off + n; i < n + off + 9; ++i)
            ASSERT_TRUE(std::memcmp(&after[i], &before[i], 8) == 0) << what << " " << op << " cell " << i;
        };
        Tensor o = out;
        check("add_out", r_add, [&] { add_out(o, x, y); });
        check("mul_out (stride-0 y)", r_mul0, [&] { mul_out(o, x, y0); });
        check("sub_out (scalar)", r_sc, [&] { sub_out(o, x, sc); });
        check("relu_out", r_relu, [&] { relu_out(o, x); });
        const Tensor r = add(x, y);  // out-of-place: a fresh dense output
        ASSERT_EQ(last_elementwise_used_nt(), want_nt) << what << " add";
        ASSERT_TRUE(test::all_close(r, round_to(r_add, dt), atol(dt), rtol(dt))) << what << " add";
        Tensor xi = x.clone();
        xi.add_(y);
        ASSERT_FALSE(last_elementwise_used_nt()) << what << " add_ (in place must not stream)";
        ASSERT_TRUE(test::all_close(xi, round_to(r_add, dt), atol(dt), rtol(dt))) << what << " add_";
      }
    // a transposed operand (the Tiled path) streams when each tile's output is one dense
    // block (rows of at most kTileBytes0, adjacent), and when rows are longer only where
    // the tuning says so (Note [Streaming elementwise outputs]; both settings); 4x9
    // planes of 24x40 take three groups of Note [Grouped staging] (16, 16, 4)
    for (bool partial : {false, true})
    for (const Shape& ys : {Shape{2, 3, 12, 9}, Shape{4, 9, 24, 40}, Shape{270, 300}}) {
      test::TuningScope tuning_scope;
      tuning_scope.tuning().tiled_partial_nt = partial;
      tuning_scope.set();
      const int64_t nd = static_cast<int64_t>(ys.size());
      const Tensor yt = randn(ys, 31).transpose(nd - 2, nd - 1);
      const Tensor xt = randn(yt.sizes(), 32);
      std::vector<double> ref = xt.to_vector(), yv = yt.to_vector();
      for (size_t i = 0; i < ref.size(); ++i) ref[i] += yv[i];
      Tensor ot = empty(yt.sizes());
      test::poison(ot);
      add_out(ot, xt, yt);
      EXPECT_EQ(last_elementwise_used_nt(), vec && (nd == 4 || partial)) << cfg << " transposed operand " << yt.str()
                                                                         << ", tilent=" << partial;
      EXPECT_TRUE(test::all_close(ot, ref, atol(DType::Float32), rtol(DType::Float32))) << cfg << " " << yt.str();
      Tensor xi = xt.clone();  // in place: the same walk, plain stores
      xi.add_(yt);
      EXPECT_FALSE(last_elementwise_used_nt()) << cfg << " add_ " << yt.str();
      EXPECT_TRUE(test::all_close(xi, ref, atol(DType::Float32), rtol(DType::Float32))) << cfg << " add_ " << yt.str();
    }
    // a dense channels-last pair coalesces to one dim and streams too
    const Tensor a = values({2, 5, 7, 9}, 5, DType::Float32).contiguous(MemoryFormat::ChannelsLast);
    const Tensor b = values({2, 5, 7, 9}, 6, DType::Float32, true).contiguous(MemoryFormat::ChannelsLast);
    std::vector<double> ref = a.to_vector(), bv = b.to_vector();
    for (size_t i = 0; i < ref.size(); ++i) ref[i] *= bv[i];
    const Tensor m = mul(a, b);
    EXPECT_EQ(last_elementwise_used_nt(), vec) << cfg << " channels-last mul";
    EXPECT_TRUE(m.is_contiguous(MemoryFormat::ChannelsLast));
    EXPECT_TRUE(test::all_close(m, ref, atol(DType::Float32), rtol(DType::Float32))) << cfg << " channels-last mul";
  });
  set_nt_threshold_bytes(-1);
  // at the default threshold a small output does not stream
  const Tensor s = values({1, 100}, 3, DType::Float32);
  (void)add(s, s);
  EXPECT_FALSE(last_elementwise_used_nt());
}

// Note [Staged source read ahead]: an NHWC operand into an NCHW out of up to 64
// channels beyond the streaming threshold (forced with 0) reads each tile's staged source
// during the tile before and streams the out. Pixel counts that leave a ragged last
// tile for every element size (549 = 2 x 256 + 37 floats, 512 + 37 halves, 4 x 128 + 37
// doubles), tiles crossing from one image to the next, 2 threads splitting the tiles
// (4 x 64 x 549 elements), 8 channels (the fewest the Tiled path takes) and 65 (more than a
// tile's 64 rows of 2- and 4-byte elements: the old walk, plain stores; 8-byte tiles take
// 128); the poisoned out must match, in place too.
TEST(Elementwise, NhwcOperandIntoNchwOutReadsAheadAgainstReference) {
  set_nt_threshold_bytes(0);
  for_each_config([](const std::string& cfg) {
    const bool vec = simd_level() >= SimdLevel::AVX2;
    for (const Shape& sz : {Shape{2, 16, 9, 61}, Shape{4, 64, 9, 61}, Shape{3, 8, 5, 60}, Shape{1, 65, 9, 61}})
      for (DType dt : kDTypes) {
        const std::string what = cfg + ", " + dtype_name(dt) + ", " + test::shape_str(sz);
        const Tensor a = values(sz, 41, dt), b = values(sz, 42, dt).contiguous(MemoryFormat::ChannelsLast);
        std::vector<double> ref = a.to_vector();
        const std::vector<double> bv = b.to_vector();
        for (size_t i = 0; i < ref.size(); ++i) ref[i] += bv[i];
        ref = round_to(ref, dt);
        Tensor out = empty(sz, dt);
        test::poison(out);
        add_out(out, a, b);
        const int64_t tile_rows = dtype_size(dt) == 8 ? 128 : 64;  // more channels: partial tiles
        ASSERT_EQ(last_elementwise_used_nt(),
                  vec && is_floating(dt) && (sz[1] <= tile_rows || cpu_tuning().tiled_partial_nt)) << what;
        ASSERT_TRUE(test::all_close(out, ref, atol(dt), rtol(dt))) << what;
        Tensor ai = a.clone();
        ai.add_(b);
        ASSERT_FALSE(last_elementwise_used_nt()) << what << " add_";
        ASSERT_TRUE(test::all_close(ai, ref, atol(dt), rtol(dt))) << what << " add_";
      }
  });
  set_nt_threshold_bytes(-1);
}

// Note [bfloat16 rows in zmm], streamed: a bfloat16 output starting at each of the 32
// element positions of a 64-byte line goes through the head, the 8-element steps to the
// line boundary, the full-line streams and the tail, or stops in any of them. Lengths
// that end in each part; a binary op, a stride-0 operand, a scalar and a unary op (each
// with a 512-bit twin); the cells around the output keep their poison.
TEST(Elementwise, StreamedBfloat16RowsFromEveryLinePosition) {
  set_nt_threshold_bytes(0);
  for_each_config([](const std::string& cfg) {
    std::mt19937_64 rng(29);
    const DType dt = DType::BFloat16;
    const bool vec = simd_level() >= SimdLevel::AVX2;
    for (int64_t off = 0; off < 32; ++off)
      for (int64_t n : {5, 8, 13, 24, 31, 40, 57, 64, 95, 100, 263}) {
        const Tensor x = values({1, n}, rng(), dt).reshape({n});
        const Tensor y = values({1, n}, rng(), dt, /*positive=*/true).reshape({n});
        const Tensor y0 = values({1}, rng(), dt, /*positive=*/true).expand({n});
        const std::vector<double> xr = x.to_vector(), yr = y.to_vector();
        const double y0v = y0.to_vector()[0];
        std::vector<double> r_add(n), r_mul0(n), r_sc(n), r_relu(n);
        for (int64_t i = 0; i < n; ++i) {
          r_add[i] = xr[i] + yr[i];
          r_mul0[i] = xr[i] * y0v;
          r_sc[i] = xr[i] - 0.75;
          r_relu[i] = std::max(xr[i], 0.0);
        }
        Tensor buf = empty({off + n + 40}, dt);
        ASSERT_EQ(reinterpret_cast<uintptr_t>(buf.data_ptr()) % 64, 0u);
        Tensor out = buf.slice(0, off, off + n);
        const std::string what = cfg + ", n " + std::to_string(n) + ", offset " + std::to_string(off);
        auto check = [&](const char* op, const std::vector<double>& ref, const std::function<void()>& run) {
          test::poison(buf);
          const std::vector<double> before = buf.to_vector();
          run();
          ASSERT_EQ(last_elementwise_used_nt(), vec) << what << " " << op;
          ASSERT_TRUE(test::all_close(out, round_to(ref, dt), atol(dt), rtol(dt))) << what << " " << op;
          const std::vector<double> after = buf.to_vector();
          for (int64_t i = 0; i < static_cast<int64_t>(after.size()); ++i) {
            if (i >= off && i < off + n) continue;
            ASSERT_TRUE(std::memcmp(&after[i], &before[i], 8) == 0) << what << " " << op << " cell " << i;
          }
        };
        check("add_out", r_add, [&] { add_out(out, x, y); });
        check("mul_out (stride-0 y)", r_mul0, [&] { mul_out(out, x, y0); });
        check("sub_out (scalar)", r_sc, [&] { sub_out(out, x, 0.75); });
        check("relu_out", r_relu, [&] { relu_out(out, x); });
      }
  });
  set_nt_threshold_bytes(-1);
}

// Note [Grain in bytes]: the 2-byte loops take the design's grain16 in elements, the
// others its grain_bytes in bytes of their element type. A grain of 1000 elements (4000
// bytes: 1000 floats, 500 doubles) splits a 5000-element add over both threads mid-row
// (every level), whose results must not change.
TEST(Elementwise, GrainComesFromTheTuning) {
  struct Restore {
    ~Restore() { set_cpu_tuning(nullptr); }
  } restore;
  const int64_t grains[][2] = {{1000, 4000}, {32768, 131072}, {65536, 262144}};
  for (const auto& gr : grains) {
    const int64_t g16 = gr[0], gb = gr[1];
    CpuTuning t = cpu_tuning();
    t.grain16 = g16;
    t.grain_bytes = gb;
    set_cpu_tuning(&t);
    for_each_config([&](const std::string& cfg) {
      for (DType dt : {DType::Float16, DType::BFloat16, DType::Float32, DType::Float64}) {
        const int64_t n = 5000;
        const Tensor x = values({1, n}, 3, dt).reshape({n});
        const Tensor y = values({1, n}, 4, dt, /*positive=*/true).reshape({n});
        const std::vector<double> xr = x.to_vector(), yr = y.to_vector();
        std::vector<double> ref(n);
        for (int64_t i = 0; i < n; ++i) ref[i] = xr[i] + yr[i];
        Tensor o = empty({n}, dt);
        test::poison(o);
        add_out(o, x, y);
        const std::string what = cfg + ", " + dtype_name(dt) + ", grain16 " + std::to_string(g16) + ", grainbytes " +
                                 std::to_string(gb);
        const int64_t want = dt == DType::Float32 ? gb / 4 : dt == DType::Float64 ? gb / 8 : g16;
        EXPECT_EQ(last_elementwise_grain(), want) << what;
        ASSERT_TRUE(test::all_close(o, round_to(ref, dt), atol(dt), rtol(dt))) << what;
        const Tensor r = relu(x);
        EXPECT_EQ(last_elementwise_grain(), want) << what << " relu";
        std::vector<double> rr(n);
        for (int64_t i = 0; i < n; ++i) rr[i] = std::max(xr[i], 0.0);
        ASSERT_TRUE(test::all_close(r, rr, atol(dt), rtol(dt))) << what << " relu";
      }
    });
  }
}

// Note [bfloat16 sign ops on bits]: relu, neg and abs of every bfloat16 bit pattern
// (subnormals, both zeros, infinities, quiet and signalling NaNs of either sign), exact to
// the bit at every level: a NaN keeps its sign and payload with the quiet bit set (the
// documented narrowing), every other value is its own bits with the sign zeroed, flipped
// or cleared. Outputs out=, in place, out of place and streamed from each of 10 offsets,
// rows cut at lengths ending in every part of a 32-lane step; a stride-0 input too.
TEST(Elementwise, Bfloat16SignOpsOnEveryBitPattern) {
  auto is_nan = [](uint16_t v) { return (v & 0x7FFF) > 0x7F80; };
  auto want = [&](int op, uint16_t v) -> uint16_t {
    uint16_t r = v;
    if (op == 0) r = is_nan(v) || !(v & 0x8000) || v == 0x8000 ? v : 0;  // relu
    if (op == 1) r = static_cast<uint16_t>(v ^ 0x8000);  // neg
    if (op == 2) r = static_cast<uint16_t>(v & 0x7FFF);  // abs
    return is_nan(v) ? static_cast<uint16_t>(r | 0x40) : r;
  };
  const char* names[] = {"relu", "neg", "abs"};
  auto run_out = [](int op, Tensor& o, const Tensor& x) {
    if (op == 0) relu_out(o, x);
    if (op == 1) neg_out(o, x);
    if (op == 2) abs_out(o, x);
  };
  auto run_new = [](int op, const Tensor& x) { return op == 0 ? relu(x) : op == 1 ? neg(x) : abs(x); };
  auto run_inplace = [](int op, Tensor& x) {
    if (op == 0) x.relu_();
    if (op == 1) x.neg_();
    if (op == 2) x.abs_();
  };
  const int64_t n = 65536;
  Tensor all = empty({n}, DType::BFloat16);
  for (int64_t i = 0; i < n; ++i) all.data<BFloat16>()[i].bits = static_cast<uint16_t>(i * 40503 % 65536);  // a permutation
  auto expect_bits = [&](const std::string& what, int op, const Tensor& out, const Tensor& in) {
    const int64_t m = out.numel();
    ASSERT_TRUE(out.is_contiguous() && (in.is_contiguous() || in.stride(0) == 0));
    const BFloat16* o = out.data<BFloat16>();
    const BFloat16* x = in.data<BFloat16>();
    int bad = 0;
    for (int64_t i = 0; i < m && bad < 5; ++i) {
      const uint16_t v = x[in.stride(0) == 0 ? 0 : i].bits;
      if (o[i].bits != want(op, v)) {
        ++bad;
        ADD_FAILURE() << what << " " << names[op] << " of 0x" << std::hex << v << ": 0x" << o[i].bits << ", want 0x"
                      << want(op, v) << std::dec << " (element " << i << " of " << m << ")";
      }
    }
  };
  for (int64_t threshold : {int64_t(-1), int64_t(0)}) {
    set_nt_threshold_bytes(threshold);
    for_each_config([&](const std::string& cfg0) {
      const std::string cfg = cfg0 + (threshold == 0 ? ", streamed" : "");
      for (int op = 0; op < 3; ++op) {
        Tensor o = empty({n}, DType::BFloat16);
        test::poison(o);
        run_out(op, o, all);
        expect_bits(cfg + ", out=", op, o, all);
        expect_bits(cfg + ", new", op, run_new(op, all), all);
        Tensor x = all.clone();
        run_inplace(op, x);
        expect_bits(cfg + ", in place", op, x, all);
        std::mt19937_64 rng(7 + op);
        for (int64_t off = 0; off < 10; ++off)
          for (int64_t len : {1, 7, 31, 32, 33, 63, 64, 95, 200}) {
            const int64_t start = static_cast<int64_t>(rng() % 60000);
            const Tensor in = all.slice(0, start, start + len);
            Tensor buf = empty({len + off + 9}, DType::BFloat16);
            test::poison(buf);
            const std::vector<double> before = buf.to_vector();
            Tensor out = buf.slice(0, off, off + len);
            run_out(op, out, in);
            const std::string what = cfg + ", length " + std::to_string(len) + ", offset " + std::to_string(off);
            expect_bits(what, op, out, in);
            const std::vector<double> after = buf.to_vector();
            for (int64_t i = 0; i < len + off + 9; ++i) {
              if (i >= off && i < off + len) continue;
              ASSERT_TRUE(std::memcmp(&after[i], &before[i], 8) == 0) << what << " cell " << i;
            }
            const Tensor one = all.slice(0, start, start + 1).expand({len});  // stride 0
            Tensor o1 = empty({len}, DType::BFloat16);
            test::poison(o1);
            run_out(op, o1, one);
            expect_bits(what + ", stride-0 input", op, o1, one);
          }
      }
    });
  }
  set_nt_threshold_bytes(-1);
}

// Note [Row blocks] and Note [Streaming strips]: outputs walked as many short strips (a
// broadcast over rows, rows of a padded or stepped input, broadcasts over 4 dims where
// the rows carry into dim 2), row lengths around the vector width, enough rows that 2
// threads split mid-row, streaming forced (threshold 0) and off. The output is a window
// of a poisoned buffer whose cells around it must keep their bits; a dense output streams
// exactly where the vector path runs, an output with gaps between its rows never does.
TEST(Elementwise, ShortStripsInRowBlocksAgainstReference) {
  // The operands and their float64 references are made once per row width and dtype, and
  // every threshold and config runs the same cases on them.
  std::mt19937_64 rng(53);
  struct Case {
    const char* op;
    std::vector<double> want;  // rounded to the dtype
    std::function<void(Tensor&)> run;
  };
  for (int64_t w : {1, 3, 7, 8, 9, 20, 33, 130})
    for (DType dt : kDTypes) {
      const int64_t rows = 70001 / w + 3, n = rows * w, off = static_cast<int64_t>(rng() % 10);
      const Shape sz{rows, w};
      const Tensor x = values(sz, rng(), dt);
      const Tensor brow = values({w}, rng(), dt, /*positive=*/true);  // x + brow: stride 0 over rows
      const Tensor brow2 = values({w}, rng(), dt);                     // brow + brow2: both repeat
      const Tensor z11 = values({1, 1}, rng(), dt);                    // stride 0 both ways
      const Tensor bcol = values({rows, 1}, rng(), dt, true);        // x - bcol: stride 0 along rows
      const Tensor xpad = values({rows, w + 3}, rng(), dt).slice(1, 0, w);  // rows w + 3 apart
      const Tensor xstep = values({rows, 2 * w + 1}, rng(), dt).slice(1, 1, 2 * w + 1, 2);  // stride 2, rows 2w + 1 apart
      const Tensor gbuf0 = values({rows, w + 2}, rng(), dt);  // an output with gaps between its rows
      const std::vector<double> xr = x.to_vector(), br = broadcast_values(brow, sz), cr = broadcast_values(bcol, sz),
                                pr = xpad.to_vector(), sr = xstep.to_vector(), b2r = broadcast_values(brow2, sz);
      const double z = z11.to_vector()[0];
      const auto ref = [&](const std::function<double(int64_t)>& f) {
        std::vector<double> v(n);
        for (int64_t i = 0; i < n; ++i) v[i] = f(i);
        return round_to(v, dt);
      };
      const std::vector<Case> cases = {
          {"add_out(o, x, b[w])", ref([&](int64_t i) { return xr[i] + br[i]; }), [&](Tensor& o) { add_out(o, x, brow); }},
          {"sub_out(o, b[w], x)", ref([&](int64_t i) { return br[i] - xr[i]; }), [&](Tensor& o) { sub_out(o, brow, x); }},
          {"sub_out(o, x, b[rows, 1])", ref([&](int64_t i) { return xr[i] - cr[i]; }),
           [&](Tensor& o) { sub_out(o, x, bcol); }},
          {"add_out(o, b[w], b2[w])", ref([&](int64_t i) { return br[i] + b2r[i]; }),
           [&](Tensor& o) { add_out(o, brow.expand(sz), brow2); }},
          {"sub_out(o, b[w], z[1, 1])", ref([&](int64_t i) { return br[i] - z; }),
           [&](Tensor& o) { sub_out(o, brow.expand(sz), z11); }},
          {"relu_out(o, b2[w])", ref([&](int64_t i) { return std::max(b2r[i], 0.0); }),
           [&](Tensor& o) { relu_out(o, brow2.expand(sz)); }},
          {"relu_out(o, xpad)", ref([&](int64_t i) { return std::max(pr[i], 0.0); }), [&](Tensor& o) { relu_out(o, xpad); }},
          {"mul_out(o, xpad, b[w])", ref([&](int64_t i) { return pr[i] * br[i]; }),
           [&](Tensor& o) { mul_out(o, xpad, brow); }},
          {"sub_out(o, xstep, b[w])", ref([&](int64_t i) { return sr[i] - br[i]; }),
           [&](Tensor& o) { sub_out(o, xstep, brow); }},
          {"sub_out(o, b[w], xstep)", ref([&](int64_t i) { return br[i] - sr[i]; }),
           [&](Tensor& o) { sub_out(o, brow, xstep); }},
          {"neg_out(o, xstep)", ref([&](int64_t i) { return -sr[i]; }), [&](Tensor& o) { neg_out(o, xstep); }},
      };
      const std::vector<double> wi = cases[0].want;  // x + brow, for add_ and the gapped output
      Tensor buf = empty({n + off + 9}, dt);
      Tensor out = buf.slice(0, off, off + n).view(sz);
      const Tensor head = buf.slice(0, 0, off), tail = buf.slice(0, off + n, n + off + 9);
      for (int64_t threshold : {int64_t(0), int64_t(-1)}) {
        set_nt_threshold_bytes(threshold);
        for_each_config([&](const std::string& cfg) {
          const std::string what = cfg + ", " + dtype_name(dt) + ", rows of " + std::to_string(w) + ", offset " +
                                   std::to_string(off) + (threshold == 0 ? ", streaming forced" : "");
          const bool want_nt = threshold == 0 && simd_level() >= SimdLevel::AVX2 && dt != DType::Int32;
          for (const Case& c : cases) {
            test::poison(buf);
            const std::vector<double> head0 = head.to_vector(), tail0 = tail.to_vector();
            c.run(out);
            ASSERT_EQ(last_elementwise_used_nt(), want_nt) << what << " " << c.op;
            ASSERT_TRUE(test::all_close(out, c.want, atol(dt), rtol(dt))) << what << " " << c.op;
            const std::vector<double> head1 = head.to_vector(), tail1 = tail.to_vector();
            for (size_t i = 0; i < head0.size(); ++i)
              ASSERT_EQ(std::memcmp(&head1[i], &head0[i], 8), 0) << what << " " << c.op << ": cell " << i << " changed";
            for (size_t i = 0; i < tail0.size(); ++i)
              ASSERT_EQ(std::memcmp(&tail1[i], &tail0[i], 8), 0) << what << " " << c.op << ": cell " << off + n + i << " changed";
          }
          // in place over the rows: never streams
          Tensor xi = x.clone();
          xi.add_(brow);
          ASSERT_FALSE(last_elementwise_used_nt()) << what << " add_";
          ASSERT_TRUE(test::all_close(xi, wi, atol(dt), rtol(dt))) << what << " add_";
          // an output with gaps between its rows (rows w + 2 apart): no streaming, gaps kept
          Tensor gbuf = gbuf0.clone();
          Tensor gout = gbuf.slice(1, 0, w);
          const std::vector<double> gbefore = gbuf.to_vector();
          add_out(gout, x, brow);
          ASSERT_FALSE(last_elementwise_used_nt()) << what << " gapped out";
          ASSERT_TRUE(test::all_close(gout, wi, atol(dt), rtol(dt))) << what << " gapped out";
          const std::vector<double> gafter = gbuf.to_vector();
          for (int64_t i = 0; i < rows * (w + 2); ++i)
            if (i % (w + 2) >= w) {
              ASSERT_EQ(std::memcmp(&gafter[i], &gbefore[i], 8), 0) << what << " gap " << i;
            }
        });
        if (HasFatalFailure()) break;
      }
      set_nt_threshold_bytes(-1);
      if (HasFatalFailure()) return;
    }
  // a per-channel bias over 4 dims (rows of H*W; dim 1, C, carries into dim 2, N; on
  // channels-last x and out, rows of C: Note [Periodic rows]) and a bias over dims 1
  // and 3 of 5 (5 iteration dims: the carry runs through dims 2-4)
  for (const auto& shapes : {std::pair<Shape, Shape>{{3, 5, 7, 9}, {1, 5, 1, 1}},
                               {{2, 64, 17, 19}, {1, 64, 1, 1}},
                               {{2, 3, 4, 5, 6}, {1, 3, 1, 5, 1}},
                               {{3, 4, 5, 33, 17}, {1, 4, 1, 33, 1}}}) {
    const Shape &s4 = shapes.first, &bs = shapes.second;  // named: lambdas below capture them
    const Tensor x4 = values(s4, rng(), DType::Float32);
    const Tensor b4 = values(bs, rng(), DType::Float32);
    std::vector<double> want = x4.to_vector();
    const std::vector<double> bv = broadcast_values(b4, s4);
    for (size_t i = 0; i < want.size(); ++i) want[i] += bv[i];
    std::vector<double> wm = x4.to_vector(), wsub(want.size());
    for (size_t i = 0; i < wm.size(); ++i) wm[i] *= bv[i];
    for (size_t i = 0; i < wsub.size(); ++i) wsub[i] = want[i] - 2 * bv[i];
    const Tensor xcl = s4.size() == 4 ? x4.contiguous(MemoryFormat::ChannelsLast) : Tensor();
    for (int64_t threshold : {int64_t(0), int64_t(-1)}) {
      set_nt_threshold_bytes(threshold);
      for_each_config([&](const std::string& cfg0) {
        const std::string cfg = cfg0 + (threshold == 0 ? ", streaming forced" : "");
        Tensor o4 = empty(s4);
        test::poison(o4);
        add_out(o4, x4, b4);
        ASSERT_TRUE(test::all_close(o4, want, atol(DType::Float32), rtol(DType::Float32))) << cfg << " " << x4.str();
        if (s4.size() != 4) return;
        Tensor ocl = empty(s4, DType::Float32, Device::cpu(), MemoryFormat::ChannelsLast);
        test::poison(ocl);
        add_out(ocl, xcl, b4);
        ASSERT_TRUE(test::all_close(ocl, want, atol(DType::Float32), rtol(DType::Float32))) << cfg << " channels-last";
        const Tensor rcl = mul(b4, xcl);  // out-of-place: channels-last, as x
        ASSERT_TRUE(test::all_close(rcl, wm, atol(DType::Float32), rtol(DType::Float32))) << cfg << " channels-last mul";
        Tensor xin = xcl.clone();
        xin.sub_(b4);
        ASSERT_TRUE(test::all_close(xin, wsub, atol(DType::Float32), rtol(DType::Float32))) << cfg << " channels-last sub_";
      });
    }
    set_nt_threshold_bytes(-1);
  }
}

TEST(Elementwise, OutOfPlaceTakesTheInputsLayout) {
  Tensor cl = values({2, 3, 4, 5}, 1, DType::Float32).contiguous(MemoryFormat::ChannelsLast);
  Tensor ex = values({1, 3, 1, 1}, 2, DType::Float32).expand({2, 3, 4, 5});
  EXPECT_TRUE(add(cl, cl).is_contiguous(MemoryFormat::ChannelsLast));
  EXPECT_TRUE(add(ex, cl).is_contiguous(MemoryFormat::ChannelsLast));
  EXPECT_TRUE(relu(cl).is_contiguous(MemoryFormat::ChannelsLast));
  EXPECT_TRUE(normalize(cl, 1).is_contiguous(MemoryFormat::ChannelsLast));
  Tensor at = values({5, 4}, 3, DType::Float32).t();  // column-major 4x5: as torch, a.t() + b is column-major
  Tensor b = values({4, 5}, 4, DType::Float32);
  EXPECT_EQ(add(at, b).strides(), Shape({1, 4}));
  EXPECT_EQ(add(b, at).strides(), Shape({5, 1}));
  EXPECT_TRUE(add(ex, ex).is_contiguous());  // no dense input: contiguous
}

// The named functions and methods are macros over the generic entry points: each form
// of each name (out-of-place, out=, the scalar forms, in place) must run its own op, and
// its errors must carry its own name. float64 values (positive for sqrt) against the
// reference of the name.
TEST(Elementwise, EveryNamedFormRunsItsOp) {
  const Tensor a = values({3, 7}, 31, DType::Float64).abs_().add_(0.25);
  const Tensor b = values({3, 7}, 32, DType::Float64);
  const std::vector<double> av = a.to_vector(), bv = b.to_vector();
  const double s = -1.75;
  using Fn2 = std::function<double(double, double)>;
  using Fn1 = std::function<double(double)>;
  auto expect_values = [&](const Tensor& t, const std::vector<double>& want, const std::string& what) {
    ASSERT_TRUE(test::all_close(t, want, 0, 0)) << what;
  };
  auto apply2 = [&](const Fn2& f, bool scalar) {
    std::vector<double> r(av.size());
    for (size_t i = 0; i < r.size(); ++i) r[i] = f(av[i], scalar ? s : bv[i]);
    return r;
  };
  struct Binary {
    const char* name;
    Fn2 ref;
    Tensor (*op)(const Tensor&, const Tensor&);
    Tensor& (*op_out)(Tensor&, const Tensor&, const Tensor&);
    Tensor (*op_s)(const Tensor&, double);
    Tensor& (*op_out_s)(Tensor&, const Tensor&, double);
    Tensor& (Tensor::*inplace)(const Tensor&);
    Tensor& (Tensor::*inplace_s)(double);  // nullptr: no scalar method
  };
  const Binary binaries[] = {
      {"add", [](double x, double y) { return x + y; }, add, add_out, add, add_out, &Tensor::add_, &Tensor::add_},
      {"sub", [](double x, double y) { return x - y; }, sub, sub_out, sub, sub_out, &Tensor::sub_, &Tensor::sub_},
      {"mul", [](double x, double y) { return x * y; }, mul, mul_out, mul, mul_out, &Tensor::mul_, &Tensor::mul_},
      {"div", [](double x, double y) { return x / y; }, div, div_out, div, div_out, &Tensor::div_, &Tensor::div_},
      {"maximum", [](double x, double y) { return std::max(x, y); }, maximum, maximum_out, maximum, maximum_out,
       &Tensor::maximum_, nullptr},
      {"minimum", [](double x, double y) { return std::min(x, y); }, minimum, minimum_out, minimum, minimum_out,
       &Tensor::minimum_, nullptr},
  };
  for (const Binary& op : binaries) {
    const std::string n = op.name;
    expect_values(op.op(a, b), apply2(op.ref, false), n + "(a, b)");
    expect_values(op.op_s(a, s), apply2(op.ref, true), n + "(a, s)");
    Tensor out = empty({3, 7}, DType::Float64);
    test::poison(out);
    expect_values(op.op_out(out, a, b), apply2(op.ref, false), n + "_out(out, a, b)");
    test::poison(out);
    expect_values(op.op_out_s(out, a, s), apply2(op.ref, true), n + "_out(out, a, s)");
    Tensor x = a.clone();
    expect_values((x.*op.inplace)(b), apply2(op.ref, false), n + "_(b)");
    if (op.inplace_s) {
      x = a.clone();
      expect_values((x.*op.inplace_s)(s), apply2(op.ref, true), n + "_(s)");
    }
    Tensor bad = empty({3, 7}, DType::Float32);
    test::expect_msg([&] { op.op_out(bad, a, b); }, n + "_out: output dtype float32");
    test::expect_msg([&] { op.op_out_s(bad, a, s); }, n + "_out: output dtype float32");
  }
  struct Unary {
    const char* name;
    Fn1 ref;
    Tensor (*op)(const Tensor&);
    Tensor& (*op_out)(Tensor&, const Tensor&);
    Tensor& (Tensor::*inplace)();
  };
  const Unary unaries[] = {
      {"neg", [](double x) { return -x; }, neg, neg_out, &Tensor::neg_},
      {"abs", [](double x) { return std::abs(x); }, abs, abs_out, &Tensor::abs_},
      {"relu", [](double x) { return x > 0 ? x : 0.0; }, relu, relu_out, &Tensor::relu_},
      {"exp", [](double x) { return std::exp(x); }, exp, exp_out, &Tensor::exp_},
      {"sqrt", [](double x) { return std::sqrt(x); }, sqrt, sqrt_out, &Tensor::sqrt_},
  };
  for (const Unary& op : unaries) {
    const std::string n = op.name;
    for (const bool positive : {true, false}) {  // a, and b's mixed signs (not for sqrt)
      if (n == "sqrt" && !positive) continue;
      const Tensor in = positive ? a : b;
      const std::vector<double> iv = in.to_vector();
      std::vector<double> want(iv.size());
      for (size_t i = 0; i < want.size(); ++i) want[i] = op.ref(iv[i]);
      // exp of float64 is within an ulp of std::exp, not always equal
      auto check = [&](const Tensor& t, const std::string& what) {
        ASSERT_TRUE(test::all_close(t, want, 0, n == "exp" ? 1e-15 : 0)) << what;
      };
      check(op.op(in), n + "(x)");
      Tensor out = empty({3, 7}, DType::Float64);
      test::poison(out);
      check(op.op_out(out, in), n + "_out(out, x)");
      Tensor x = in.clone();
      check((x.*op.inplace)(), n + "_()");
    }
    Tensor bad = empty({3, 7}, DType::Float32);
    test::expect_msg([&] { op.op_out(bad, a); }, n + "_out: output dtype float32");
  }
}

TEST(Elementwise, OutOfPlaceAllocatesOnceThroughTheCurrentAllocator) {
  Tensor a = ones({1000}), b = ones({1000});
  for (AllocatorKind kind : {AllocatorKind::Caching, AllocatorKind::System}) {
    CpuAllocatorGuard guard(kind);
    const AllocatorStats before = cpu_allocator()->stats();
    Tensor r = add(a, b);
    const AllocatorStats after = cpu_allocator()->stats();
    EXPECT_EQ(after.allocation_count - before.allocation_count, 1);
    EXPECT_EQ(r.storage()->allocator(), cpu_allocator());
    a.add_(b);
    a.add_(1.0);
    a.relu_();
    EXPECT_EQ(cpu_allocator()->stats().allocation_count, after.allocation_count) << "in-place allocated";
  }
}

// ---------------------------------------------------------------- bad input

template <typename F>
void expect_error(F f, const std::vector<std::string>& parts) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one mentioning " << ::testing::PrintToString(parts);
  } catch (const Error& e) {
    for (const std::string& p : parts)
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << "message \"" << e.what() << "\" lacks \"" << p << "\"";
  }
}

TEST(ElementwiseErrors, ShapesDtypesOutputs) {
  Tensor a3 = ones({3}), a2 = ones({2});
  expect_error([&] { add(a3, a2); }, {"add", "not broadcastable", "[3]", "[2]"});  // CLAIMS.md V4
  expect_error([&] { mul(ones({2, 3}), ones({3, 2})); }, {"mul", "[2, 3]", "[3, 2]"});
  expect_error([&] { a3.add_(a2); }, {"add_", "[3]", "[2]"});
  expect_error([&] { sub(a3, ones({3}, DType::Float64)); }, {"sub", "float32", "float64"});
  Tensor out = empty({4});
  test::poison(out);
  expect_error([&] { add_out(out, a3, a3); }, {"add_out", "[4]", "[3]"});
  Tensor out64 = empty({3}, DType::Float64);
  expect_error([&] { add_out(out64, a3, a3); }, {"add_out", "float64", "float32"});
  expect_error([&] { relu_out(out64, a3); }, {"relu_out", "float64", "float32"});
  expect_error([&] { exp_out(out, a3); }, {"exp_out", "[4]", "[3]"});
  // in-place into a smaller tensor: b broadcasts to a, never the reverse
  Tensor row = ones({1, 3});
  expect_error([&] { row.add_(ones({2, 3})); }, {"add_", "[1, 3]", "[2, 3]"});
  // a failed check leaves the output as it was
  EXPECT_TRUE(std::isnan(out.to_vector()[0]));
  EXPECT_EQ(row.to_vector(), std::vector<double>({1, 1, 1}));
}

TEST(ElementwiseErrors, IntegerAndUnsupportedDtypes) {
  Tensor i = ones({4}, DType::Int32);
  expect_error([&] { div(i, i); }, {"div", "int32", "floating"});
  expect_error([&] { i.div_(2.0); }, {"div_", "int32"});
  expect_error([&] { exp(i); }, {"exp", "int32"});
  expect_error([&] { i.sqrt_(); }, {"sqrt_", "int32"});
  expect_error([&] { add(i, 0.5); }, {"add", "0.5", "int32"});
  expect_error([&] { normalize(i, 0); }, {"normalize", "int32"});
  Tensor i8 = ones({4}, DType::Int8);
  expect_error([&] { add(i8, i8); }, {"add", "int8"});
  expect_error([&] { normalize(ones({2, 3}), 2); }, {"normalize", "dimension 2"});
  // int32 results that PyTorch defines: wrap-around add, int scalar, abs
  Tensor big = full({2}, 2147483647.0, DType::Int32);
  EXPECT_EQ(add(big, 1.0).to_vector(), std::vector<double>({-2147483648.0, -2147483648.0}));
}

TEST(ElementwiseErrors, OverlapRules) {
  // writing into an expanded tensor
  Tensor row = ones({1, 4});
  Tensor ex = row.expand({3, 4});
  expect_error([&] { ex.add_(1.0); }, {"add_", "memory location"});
  expect_error([&] { ex.relu_(); }, {"relu_", "memory location"});
  expect_error([&] { add_out(ex, ones({3, 4}), ones({3, 4})); }, {"add_out", "memory location"});
  expect_error([&] { ex.normalize_(0); }, {"normalize_", "memory location"});
  // an input that shares elements with the output at other positions
  Tensor a = values({4, 4}, 5, DType::Float32);
  const std::vector<double> before = a.to_vector();
  expect_error([&] { a.add_(a.t()); }, {"add_", "shares elements with the output", "strides [1, 4]"});
  expect_error([&] { add_out(a, a.t(), a); }, {"add_out", "shares elements with the output"});
  Tensor lo = a.narrow(0, 0, 2), hi = a.narrow(0, 1, 2);
  expect_error([&] { neg_out(hi, lo); }, {"neg_out", "shares elements with the output", "offset 4"});
  EXPECT_EQ(a.to_vector(), before);  // nothing was written
  // exactly the output is fine: a.add_(a) doubles, out=a of a op b too
  a.add_(a);
  std::vector<double> twice = before;
  for (double& x : twice) x *= 2;
  EXPECT_TRUE(test::all_close(a, twice, 0, 0));
  mul_out(a, a, a);
  for (double& x : twice) x = static_cast<double>(static_cast<float>(x * x));
  EXPECT_TRUE(test::all_close(a, twice, 0, 0));
  // disjoint halves of one storage are fine
  Tensor top = a.narrow(0, 0, 2), bottom = a.narrow(0, 2, 2);
  add_out(top, bottom, bottom);
}

// Views whose elements are disjoint but whose address ranges interleave (the two
// parities of a dim, the two halves of a non-leading dim) run, as in PyTorch, and give
// the reference values; the other view's elements are left as they were.
TEST(ElementwiseErrors, InterleavedDisjointViewsRun) {
  for_each_config([](const std::string& cfg) {
    for (DType dt : {DType::Float32, DType::Float64, DType::Int32}) {
      using Split = std::pair<Tensor, Tensor>;
      const std::vector<std::pair<const char*, std::function<Split(const Tensor&)>>> splits = {
          {"parities", [](const Tensor& t) { return Split{t.slice(2, 0, std::nullopt, 2), t.slice(2, 1, std::nullopt, 2)}; }},
          {"halves of dim 1", [](const Tensor& t) { return Split{t.narrow(1, 0, 3), t.narrow(1, 3, 3)}; }},
      };
      for (const auto& entry : splits) {
        const char* split_name = entry.first;  // named: the lambda below captures them
        const auto& split = entry.second;
        const auto run = [&](const char* op, const std::function<void(Tensor&, Tensor&)>& f,
                             const std::function<double(double, double)>& ref) {
          Tensor base = values({4, 6, 10}, 17, dt);
          auto [x, y] = split(base);
          const std::vector<double> xv = test::naive_values(x), yv = test::naive_values(y);
          std::vector<double> want(xv.size());
          for (size_t i = 0; i < xv.size(); ++i) want[i] = ref(xv[i], yv[i]);
          f(x, y);
          const std::string what = cfg + ", " + dtype_name(dt) + ", " + split_name + ", " + op;
          ASSERT_TRUE(test::all_close(x, round_to(want, dt), atol(dt), rtol(dt))) << what;
          ASSERT_EQ(test::naive_values(y), yv) << what << ": the other view changed";
        };
        run("x.add_(y)", [](Tensor& x, Tensor& y) { x.add_(y); }, [](double a, double b) { return a + b; });
        run("x.mul_(y)", [](Tensor& x, Tensor& y) { x.mul_(y); }, [](double a, double b) { return a * b; });
        run("x.maximum_(y)", [](Tensor& x, Tensor& y) { x.maximum_(y); }, [](double a, double b) { return std::max(a, b); });
        run("x.copy_(y)", [](Tensor& x, Tensor& y) { x.copy_(y); }, [](double, double b) { return b; });
        run("add_out(x, x, y)", [](Tensor& x, Tensor& y) { add_out(x, x, y); }, [](double a, double b) { return a + b; });
        run("neg_out(x, y)", [](Tensor& x, Tensor& y) { neg_out(x, y); }, [](double, double b) { return -b; });
      }
    }
  });
}

// ---------------------------------------------------------------- on every device
// (Note [Device-parameterized tests] in test_util.h)

class ElementwiseOnDevice : public ::testing::TestWithParam<Device> {};

// The same float64 reference on every device. Integer tensors take integer scalars
// only, and div, exp and sqrt need a floating dtype: with no type promotion, those
// calls throw on every device before any work (docs/LIBRARY.md, "Rules worth knowing").
TEST_P(ElementwiseOnDevice, BinaryEveryOpDtypeLayout) {
  const Device dev = GetParam();
  SB_SKIP_WITHOUT_DEVICE(dev);
  const BinaryOp ops[] = {BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul, BinaryOp::Div, BinaryOp::Maximum,
                          BinaryOp::Minimum};
  for (BinaryOp op : ops) {
    for (DType dt : test::kMathTypes) {
      const bool fp = is_floating(dt), div = op == BinaryOp::Div;
      if (div && !fp) {
        Tensor a = zeros({2, 3}, dt, dev), out = full({2, 3}, 7.0, dt, dev);
        test::expect_msg([&] { binary_out(op, out, a, a); }, "floating dtype");
        test::expect_msg([&] { binary_out(op, out, a, 2.0); }, "floating dtype");
        EXPECT_TRUE(all_close(out, std::vector<double>(6, 7.0), 0, 0)) << "out untouched";
        continue;
      }
      for (const Shape& s : test::mixed_shapes(21, 3)) {
        for (Layout la : test::all_layouts()) {
          const Layout lb = test::all_layouts()[(static_cast<int>(la) + 1) % 6];
          const double lo = fp ? -1 : -100, hi = fp ? 1 : 100;
          const auto va = test::stored(test::random_values(s, 1, dt, lo, hi, la == Layout::Expanded), s, dt);
          const auto vb = test::stored(
              test::random_values(s, 2, dt, div ? 0.5 : lo, div ? 1.5 : hi, lb == Layout::Expanded), s, dt);
          Tensor a = test::on_device(dev, va, s, dt, la), b = test::on_device(dev, vb, s, dt, lb);
          Tensor out = test::poisoned_on(dev, s, dt, la);
          binary_out(op, out, a, b);
          std::vector<double> ref(va.size());
          for (size_t i = 0; i < ref.size(); ++i) ref[i] = test::ref_binary(op, va[i], vb[i]);
          EXPECT_TRUE(all_close(out, ref, test::default_atol(dt), test::default_rtol(dt)))
              << static_cast<int>(op) << " " << dt << " " << test::layout_name(la) << "/" << test::layout_name(lb);
          // tensor-scalar
          Tensor out2 = test::poisoned_on(dev, s, dt, lb);
          const double sc = div ? 3.0 : (fp ? -0.75 : -7.0);
          binary_out(op, out2, a, sc);
          for (size_t i = 0; i < ref.size(); ++i) ref[i] = test::ref_binary(op, va[i], sc);
          EXPECT_TRUE(all_close(out2, ref, test::default_atol(dt), test::default_rtol(dt)))
              << "scalar " << static_cast<int>(op) << " " << dt << " " << test::layout_name(la);
        }
      }
      if (!fp) {
        Tensor a = zeros({2, 3}, dt, dev), out = full({2, 3}, 7.0, dt, dev);
        test::expect_msg([&] { binary_out(op, out, a, -0.75); }, "is not an int32 value");
        EXPECT_TRUE(all_close(out, std::vector<double>(6, 7.0), 0, 0)) << "out untouched";
      }
    }
  }
}

TEST_P(ElementwiseOnDevice, UnaryEveryOpDtypeLayout) {
  const Device dev = GetParam();
  SB_SKIP_WITHOUT_DEVICE(dev);
  for (UnaryOp op : {UnaryOp::Neg, UnaryOp::Abs, UnaryOp::Relu, UnaryOp::Exp, UnaryOp::Sqrt}) {
    for (DType dt : test::kMathTypes) {
      const bool fp = is_floating(dt);
      if (!fp && (op == UnaryOp::Exp || op == UnaryOp::Sqrt)) {
        Tensor a = zeros({2, 3}, dt, dev), out = full({2, 3}, 7.0, dt, dev);
        test::expect_msg([&] { unary_out(op, out, a); }, "needs a floating dtype");
        EXPECT_TRUE(all_close(out, std::vector<double>(6, 7.0), 0, 0)) << "out untouched";
        continue;
      }
      for (const Shape& s : test::mixed_shapes(31, 3)) {
        for (Layout l : test::all_layouts()) {
          const double lo = op == UnaryOp::Sqrt ? 0 : (fp ? -2 : -100), hi = op == UnaryOp::Sqrt ? 10 : (fp ? 2 : 100);
          const auto va = test::stored(test::random_values(s, 5, dt, lo, hi, l == Layout::Expanded), s, dt);
          Tensor a = test::on_device(dev, va, s, dt, l);
          Tensor out = test::poisoned_on(dev, s, dt, l);
          unary_out(op, out, a);
          std::vector<double> ref(va.size());
          for (size_t i = 0; i < ref.size(); ++i) ref[i] = test::ref_unary(op, va[i]);
          EXPECT_TRUE(all_close(out, ref, test::default_atol(dt), test::default_rtol(dt)))
              << static_cast<int>(op) << " " << dt << " " << test::layout_name(l) << " " << test::shape_str(s);
        }
      }
    }
  }
}

// The family's case table (Note [Case tables] in cases/elementwise.h): every op, layout
// and style the benchmarks time, with their operands and calls, on small odd NCHW
// shapes, every dtype the op takes, on every device; outs poisoned first, results
// against float64 loops over the operands' own values (read back by plain loops). The
// out-of-place style through the system allocator runs under it (CPU: aligned_alloc;
// CUDA: cudaMalloc).
TEST_P(ElementwiseOnDevice, EveryCaseOfTheTable) {
  using cases::EwOp;
  const Device dev = GetParam();
  SB_SKIP_WITHOUT_DEVICE(dev);
  const std::vector<Shape> shapes = {{2, 3, 5, 7}, {1, 4, 3, 9}, {3, 2, 1, 17}, {2, 5, 4, 4}, {0, 3, 2, 2}};
  uint64_t seed = 1;
  for (const cases::EwCase& c :
       cases::elementwise_cases({EwOp::Add, EwOp::Mul, EwOp::Relu, EwOp::Normalize, EwOp::Loop})) {
    for (DType dt : test::kMathTypes) {
      if (c.op == EwOp::Normalize && !is_floating(dt)) continue;
      const bool fp = is_floating(dt);
      for (const Shape& s : shapes) {
        const std::string what = std::string(cases::op_name(c.op)) + " " + layout_name(c.layout) + " " +
                                 cases::style_name(c.style) + " " + dtype_name(dt) + " " + test::shape_str(s);
        cases::EwOperands t = cases::ew_operands(c, [&](Layout l, char) {
          return test::on_device(dev, test::random_values(s, seed++, dt, fp ? -2 : -100, fp ? 2 : 100), s, dt, l);
        });
        for (Tensor* o : {&t.out, &t.t1, &t.t2})
          if (o->defined()) test::poison(*o);
        const std::vector<double> va = test::naive_values(c.style == Style::Inplace ? t.target : t.a);
        const std::vector<double> vb = cases::is_binary(c.op) ? test::naive_values(t.b) : std::vector<double>();
        std::vector<double> ref(va.size());
        auto binary_ref = [&](BinaryOp op, const std::vector<double>& x) {
          std::vector<double> r(x.size());
          for (size_t i = 0; i < r.size(); ++i) r[i] = test::ref_binary(op, x[i], vb[i]);
          return test::stored(round_to(r, dt), s, dt);  // what the dtype holds
        };
        switch (c.op) {
          case EwOp::Add: ref = binary_ref(BinaryOp::Add, va); break;
          case EwOp::Mul: ref = binary_ref(BinaryOp::Mul, va); break;
          case EwOp::Relu:
            for (size_t i = 0; i < ref.size(); ++i) ref[i] = test::ref_unary(UnaryOp::Relu, va[i]);
            break;
          case EwOp::Normalize: ref = ref_normalize(from_vector(va, s), 3, 1e-5); break;
          case EwOp::Loop: {  // relu(add(mul(a, b), b)), each step stored in the dtype
            ref = binary_ref(BinaryOp::Add, binary_ref(BinaryOp::Mul, va));
            for (double& x : ref) x = test::ref_unary(UnaryOp::Relu, x);
            break;
          }
        }
        const bool norm = c.op == EwOp::Normalize;  // (x - mean) in float: error grows with 1 / std
        const double at = norm ? by_dtype(dt, 1e-10, 1e-4, 1e-2) : atol(dt);
        const double rt = norm ? by_dtype(dt, 1e-10, 1e-5, 4e-3) : rtol(dt);
        const test::SystemAllocatorScope system(dev, c.style == Style::OutofplaceSystem);
        const Tensor y = cases::ew_call(c, t);
        ASSERT_EQ(y.sizes(), s) << what;
        EXPECT_EQ(y.device(), dev) << what;
        EXPECT_TRUE(all_close(y, ref, at, rt)) << what;
        // mixed_formats: out= keeps out's format; out-of-place takes a's (the first operand)
        if (c.layout == Layout::MixedFormats && c.style != Style::Inplace) {
          EXPECT_TRUE(y.is_contiguous(cases::out_format(c))) << what << ": strides " << test::shape_str(y.strides());
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, ElementwiseOnDevice, ::testing::ValuesIn(test::test_devices()),
                         test::device_param_name);

#ifdef SB_WITH_CUDA
// ---------------------------------------------------------------- the CUDA backend's own paths

TEST(CudaElementwise, BroadcastInPlaceAndPaths) {
  const Device dev = Device::cuda(0);
  SB_SKIP_WITHOUT_DEVICE(dev);
  const Shape s = {37, 129};
  const auto va = test::stored(test::random_values(s, 7, DType::Float32, -1, 1, false), s, DType::Float32);
  const auto vr = test::stored(test::random_values({129}, 8, DType::Float32, -1, 1, false), {129}, DType::Float32);
  Tensor a = test::host_tensor(va, s, DType::Float32).to(dev);
  Tensor row = test::host_tensor(vr, {129}, DType::Float32).to(dev);
  cuda::reset_elementwise_path_counts();
  cuda::binary(BinaryOp::Mul, a, a, row.expand(s));  // in place, broadcast row
  EXPECT_EQ(cuda::elementwise_path_counts().strided, 1);
  std::vector<double> ref(va.size());
  for (size_t i = 0; i < ref.size(); ++i) ref[i] = va[i] * vr[i % 129];
  EXPECT_TRUE(all_close(a, ref, 1e-6, 1e-6));
  Tensor b = a.clone();
  cuda::binary(BinaryOp::Add, a, a, b);  // contiguous, aligned: the 16-byte path
  EXPECT_EQ(cuda::elementwise_path_counts().vectorized, 1);
  for (auto& x : ref) x *= 2;
  EXPECT_TRUE(all_close(a, ref, 1e-6, 1e-6));
  // Misaligned contiguous (offset 1 element): correct through the strided kernel.
  Tensor off = test::with_layout(a, Layout::Offset);
  Tensor out = test::poisoned_on(dev, s, DType::Float32, Layout::Offset);
  cuda::unary(UnaryOp::Neg, out, off);
  EXPECT_EQ(cuda::elementwise_path_counts().strided, 2);
  for (auto& x : ref) x = -x;
  EXPECT_TRUE(all_close(out, ref, 1e-6, 1e-6));
}

// Note [Contiguous elementwise launch]: chunks of 128 x 4 vectors, one a block, all of a
// chunk's loads before its stores, the n % V tail in block 0: sizes below one vector,
// around a chunk's edge and over many chunks with a tail, in every vector width, out of
// place and in place, the output poisoned first.
TEST(CudaElementwise, ContiguousChunksAndTails) {
  const Device dev = Device::cuda(0);
  SB_SKIP_WITHOUT_DEVICE(dev);
  for (const DType dt : {DType::Float32, DType::Float64, DType::BFloat16}) {
    const int64_t v = 16 / static_cast<int64_t>(dtype_size(dt)), chunk = 128 * 4 * v;
    const double tol = dt == DType::BFloat16 ? 1e-2 : 1e-6;
    for (const int64_t n : {int64_t{1}, v - 1, v, chunk - 1, chunk, chunk + 1, 3 * chunk + v + 1, (int64_t{1} << 20) + 3}) {
      const std::string what = std::string(dtype_name(dt)) + " n " + std::to_string(n);
      const auto va = test::stored(test::random_values({n}, 41 + n, dt, -1, 1, false), {n}, dt);
      const auto vb = test::stored(test::random_values({n}, 42 + n, dt, -1, 1, false), {n}, dt);
      const Tensor a = test::on_device(dev, va, {n}, dt, Layout::Contiguous);
      const Tensor b = test::on_device(dev, vb, {n}, dt, Layout::Contiguous);
      cuda::reset_elementwise_path_counts();
      Tensor out = test::poisoned_on(dev, {n}, dt, Layout::Contiguous);
      cuda::binary(BinaryOp::Sub, out, a, b);
      EXPECT_EQ(cuda::elementwise_path_counts().vectorized, 1) << what;
      std::vector<double> ref(va.size());
      for (size_t i = 0; i < ref.size(); ++i) ref[i] = va[i] - vb[i];
      EXPECT_TRUE(all_close(out, ref, tol, tol)) << what;
      Tensor ac = a.clone();  // in place: each element read before its own thread writes it
      cuda::unary(UnaryOp::Relu, ac, ac);
      for (size_t i = 0; i < ref.size(); ++i) ref[i] = std::max(va[i], 0.0);
      EXPECT_TRUE(all_close(ac, ref, tol, tol)) << what << " relu in place";
    }
  }
}

// Note [Tiled elementwise for mismatched layouts]: an input along out's next-to-last dim
// takes the tiled kernel (counted), in every dtype width (the 8-byte tile is 32 wide),
// with edges that fill no tile, batched (NCHW beside NHWC), broadcast along the rows,
// into a transposed out, in place on either operand, and with each of the three staged
// sets of two inputs (a, b, both); each against float64 over the stored values.
TEST(CudaElementwise, MismatchedLayoutsTakeTheTiledPath) {
  const Device dev = Device::cuda(0);
  SB_SKIP_WITHOUT_DEVICE(dev);
  for (const DType dt : {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16}) {
    const double tol = dt == DType::BFloat16 ? 1e-2 : dt == DType::Float16 ? 2e-3 : 1e-6;
    const std::string what = dtype_name(dt);
    // add: b transposed, 70 x 133 (tiles with edges)
    const Shape s = {70, 133};
    const auto va = test::stored(test::random_values(s, 21, dt, -1, 1, false), s, dt);
    const auto vb = test::stored(test::random_values(s, 22, dt, -1, 1, false), s, dt);
    const Tensor a = test::on_device(dev, va, s, dt, Layout::Contiguous);
    const Tensor b = test::on_device(dev, vb, s, dt, Layout::Transposed);
    cuda::reset_elementwise_path_counts();
    Tensor out = test::poisoned_on(dev, s, dt, Layout::Contiguous);
    cuda::binary(BinaryOp::Add, out, a, b);
    EXPECT_EQ(cuda::elementwise_path_counts().tiled, 1) << what;
    std::vector<double> ref(va.size());
    for (size_t i = 0; i < ref.size(); ++i) ref[i] = va[i] + vb[i];
    EXPECT_TRUE(all_close(out, ref, tol, tol)) << what << " add, b transposed";
    // relu out= into a transposed out: the input is the staged one, seen from out
    Tensor tout = test::poisoned_on(dev, s, dt, Layout::Transposed);
    cuda::unary(UnaryOp::Relu, tout, a);
    EXPECT_EQ(cuda::elementwise_path_counts().tiled, 2) << what;
    for (size_t i = 0; i < ref.size(); ++i) ref[i] = std::max(va[i], 0.0);
    EXPECT_TRUE(all_close(tout, ref, tol, tol)) << what << " relu into a transposed out";
    // in place on the contiguous operand (never staged)
    Tensor ac = a.clone();
    cuda::binary(BinaryOp::Mul, ac, ac, b);
    EXPECT_EQ(cuda::elementwise_path_counts().tiled, 3) << what;
    for (size_t i = 0; i < ref.size(); ++i) ref[i] = va[i] * vb[i];
    EXPECT_TRUE(all_close(ac, ref, tol, tol)) << what << " mul in place";
    // NCHW + NHWC into NHWC: batched over N
    const Shape x4 = {3, 19, 5, 7};
    const auto vx = test::stored(test::random_values(x4, 23, dt, -1, 1, false), x4, dt);
    const auto vy = test::stored(test::random_values(x4, 24, dt, -1, 1, false), x4, dt);
    const Tensor x = test::on_device(dev, vx, x4, dt, Layout::Contiguous);
    const Tensor y = test::on_device(dev, vy, x4, dt, Layout::ChannelsLast);
    Tensor o4 = test::poisoned_on(dev, x4, dt, Layout::ChannelsLast);
    cuda::binary(BinaryOp::Sub, o4, x, y);
    EXPECT_EQ(cuda::elementwise_path_counts().tiled, 4) << what;
    std::vector<double> r4(vx.size());
    for (size_t i = 0; i < r4.size(); ++i) r4[i] = vx[i] - vy[i];
    EXPECT_TRUE(all_close(o4, r4, tol, tol)) << what << " NCHW - NHWC";
    // a row broadcast beside a transposed operand: the row read straight, b staged
    const auto vr = test::stored(test::random_values({133}, 25, dt, -1, 1, false), {133}, dt);
    const Tensor row = test::on_device(dev, vr, {133}, dt, Layout::Contiguous);
    Tensor o2 = test::poisoned_on(dev, s, dt, Layout::Contiguous);
    cuda::binary(BinaryOp::Maximum, o2, row.expand(s), b);
    EXPECT_EQ(cuda::elementwise_path_counts().tiled, 5) << what;
    for (size_t i = 0; i < ref.size(); ++i) ref[i] = std::max(vr[i % 133], vb[i]);
    EXPECT_TRUE(all_close(o2, ref, tol, tol)) << what << " maximum(row, b transposed)";
    // both operands transposed into a contiguous out: two tiles
    const Tensor at = test::on_device(dev, va, s, dt, Layout::Transposed);
    Tensor o3 = test::poisoned_on(dev, s, dt, Layout::Contiguous);
    cuda::binary(BinaryOp::Sub, o3, at, b);
    EXPECT_EQ(cuda::elementwise_path_counts().tiled, 6) << what;
    for (size_t i = 0; i < ref.size(); ++i) ref[i] = va[i] - vb[i];
    EXPECT_TRUE(all_close(o3, ref, tol, tol)) << what << " a and b transposed";
    // a staged, b not, in place on b: out is the unstaged second operand
    Tensor bc = test::on_device(dev, vb, s, dt, Layout::Contiguous);
    cuda::binary(BinaryOp::Sub, bc, at, bc);
    EXPECT_EQ(cuda::elementwise_path_counts().tiled, 7) << what;
    for (size_t i = 0; i < ref.size(); ++i) ref[i] = va[i] - vb[i];
    EXPECT_TRUE(all_close(bc, ref, tol, tol)) << what << " a transposed - b, in place on b";
  }
}

// Note [Paired elementwise tiles]: a 2- or 4-byte tiled launch whose pairs of elements
// all lie on boundaries of twice the element size moves pairs; the 133-column cases above
// (odd rows of out) keep the element tile. Here: tiles with edges, an odd row count (a
// half pair along i) and an odd column count (a half pair along j) with padded pitches
// keeping the strides even, the unstaged input as pairs, a row broadcast (unstaged) and a
// column broadcast (staged, stride 0 along j), in place on the unstaged input, both
// inputs staged, NCHW beside NHWC, and a transposed input one element into its buffer
// (misaligned: the element tile). One-input launches of 2-byte elements take tiles of
// 128 rows (Note [Two-half 2-byte tiles]): a unary op on 199 rows along the staged input
// (a whole tile, then 71 rows: a pair cut in the second half) and an NCHW -> NHWC unary
// op over 260 rows (three tiles, the last of 4 rows). The padding around out stays
// poisoned.
TEST(CudaElementwise, AlignedTilesMovePairs) {
  const Device dev = Device::cuda(0);
  SB_SKIP_WITHOUT_DEVICE(dev);
  // {r, c} stored column by column, each column r + pad elements apart
  const auto transposed = [](const Shape& s, int64_t pad, int64_t offset) {
    cases::Placement p = cases::dense(s);
    p.order = {1, 0};
    p.pad = {pad, 0};
    p.offset = offset;
    return p;
  };
  // {r, c} stored row by row, each row c + pad elements apart
  const auto rows_padded = [](const Shape& s, int64_t pad) {
    cases::Placement p = cases::dense(s);
    p.pad = {0, pad};
    return p;
  };
  for (const DType dt : {DType::Float16, DType::BFloat16, DType::Float32, DType::Int32}) {
    const double tol = dt == DType::BFloat16 ? 1e-2 : dt == DType::Float16 ? 2e-3 : dt == DType::Float32 ? 1e-6 : 0;
    const double lo = dt == DType::Int32 ? -50 : -1, hi = -lo;
    const std::string what = dtype_name(dt);
    int64_t tiled = 0, pairs = 0;
    cuda::reset_elementwise_path_counts();
    // out poisoned in placement p; after the op, its values against ref, the path taken,
    // and every element of its buffer outside the view still poisoned
    const auto check = [&](const cases::Placed& out, const std::vector<double>& ref, bool paired,
                           const std::string& name) {
      ++tiled;
      pairs += paired ? 1 : 0;
      const cuda::ElementwisePathCounts n = cuda::elementwise_path_counts();
      EXPECT_EQ(n.tiled, tiled) << what << " " << name;
      EXPECT_EQ(n.tiled_pairs, pairs) << what << " " << name;
      EXPECT_TRUE(all_close(out.view, ref, tol, tol)) << what << " " << name;
      const std::vector<double> all = test::naive_values(out.buffer);
      const auto poisoned = std::count_if(all.begin(), all.end(), [&](double x) {
        return dt == DType::Int32 ? x == static_cast<double>(0x5A5A5A5A) : std::isnan(x);  // test::poison's values
      });
      EXPECT_EQ(poisoned, out.buffer.numel() - out.view.numel()) << what << " " << name << ": padding written";
    };
    const auto poisoned = [&](const Shape& s, const cases::Placement& p) {
      const cases::Placed o = cases::place(s, p, dt, dev);
      test::poison(o.buffer);
      return o;
    };
    const auto put = [&](const std::vector<double>& v, const Shape& s, const cases::Placement& p) {
      return test::with_placement(test::on_device(dev, v, s, dt, Layout::Contiguous), p);
    };
    const Shape s = {70, 134};
    const auto va = test::stored(test::random_values(s, 41, dt, lo, hi, false), s, dt);
    const auto vb = test::stored(test::random_values(s, 42, dt, lo, hi, false), s, dt);
    const Tensor a = test::on_device(dev, va, s, dt, Layout::Contiguous);
    const Tensor at = put(va, s, transposed(s, 0, 0));
    const Tensor b = put(vb, s, transposed(s, 2, 0));
    std::vector<double> ref(va.size());

    cases::Placed o = poisoned(s, rows_padded(s, 2));
    cuda::binary(BinaryOp::Add, o.view, a, b);
    for (size_t i = 0; i < ref.size(); ++i) ref[i] = va[i] + vb[i];
    check(o, ref, true, "a + b transposed");

    o = poisoned(s, transposed(s, 2, 0));  // relu out= into a transposed out: a is staged
    cuda::unary(UnaryOp::Relu, o.view, a);
    for (size_t i = 0; i < ref.size(); ++i) ref[i] = std::max(va[i], 0.0);
    check(o, ref, true, "relu into a transposed out");

    o = poisoned(s, rows_padded(s, 0));
    cuda::binary(BinaryOp::Sub, o.view, at, b);
    for (size_t i = 0; i < ref.size(); ++i) ref[i] = va[i] - vb[i];
    check(o, ref, true, "a and b transposed");

    o = poisoned(s, rows_padded(s, 4));  // in place on the unstaged second operand
    o.view.copy_(test::on_device(dev, vb, s, dt, Layout::Contiguous));
    cuda::binary(BinaryOp::Sub, o.view, at, o.view);
    check(o, ref, true, "a transposed - b, in place on b");

    const auto vr = test::stored(test::random_values({134}, 43, dt, lo, hi, false), {134}, dt);
    const Tensor row = test::on_device(dev, vr, {134}, dt, Layout::Contiguous);
    o = poisoned(s, rows_padded(s, 2));
    cuda::binary(BinaryOp::Maximum, o.view, row.expand(s), b);
    for (size_t i = 0; i < ref.size(); ++i) ref[i] = std::max(vr[i % 134], vb[i]);
    check(o, ref, true, "maximum(row, b transposed)");

    const auto vc = test::stored(test::random_values({70, 1}, 44, dt, lo, hi, false), {70, 1}, dt);
    const Tensor col = test::on_device(dev, vc, {70, 1}, dt, Layout::Contiguous);
    o = poisoned(s, rows_padded(s, 0));
    cuda::binary(BinaryOp::Mul, o.view, col.expand(s), b);
    for (size_t i = 0; i < ref.size(); ++i) ref[i] = vc[i / 134] * vb[i];
    check(o, ref, true, "column * b transposed");

    const Shape odd = {71, 133};  // half words at the last row and the last column
    const auto vx = test::stored(test::random_values(odd, 45, dt, lo, hi, false), odd, dt);
    const auto vy = test::stored(test::random_values(odd, 46, dt, lo, hi, false), odd, dt);
    const Tensor x = put(vx, odd, rows_padded(odd, 3));
    const Tensor y = put(vy, odd, transposed(odd, 1, 0));
    o = poisoned(odd, rows_padded(odd, 3));
    cuda::binary(BinaryOp::Add, o.view, x, y);
    std::vector<double> r2(vx.size());
    for (size_t i = 0; i < r2.size(); ++i) r2[i] = vx[i] + vy[i];
    check(o, r2, true, "71 x 133, padded pitches");

    const Tensor bm = put(vb, s, transposed(s, 2, 1));  // one element into its buffer
    o = poisoned(s, rows_padded(s, 2));
    cuda::binary(BinaryOp::Add, o.view, a, bm);
    for (size_t i = 0; i < ref.size(); ++i) ref[i] = va[i] + vb[i];
    check(o, ref, false, "b transposed, misaligned");

    const Shape x4 = {3, 20, 6, 8};  // NCHW - NHWC into NHWC, batched over N
    const auto v4 = test::stored(test::random_values(x4, 47, dt, lo, hi, false), x4, dt);
    const auto w4 = test::stored(test::random_values(x4, 48, dt, lo, hi, false), x4, dt);
    const Tensor n4 = test::on_device(dev, v4, x4, dt, Layout::Contiguous);
    const Tensor c4 = test::on_device(dev, w4, x4, dt, Layout::ChannelsLast);
    o = poisoned(x4, cases::placement(Layout::ChannelsLast, x4));
    cuda::binary(BinaryOp::Sub, o.view, n4, c4);
    std::vector<double> r4(v4.size());
    for (size_t i = 0; i < r4.size(); ++i) r4[i] = v4[i] - w4[i];
    check(o, r4, true, "NCHW - NHWC");

    const Shape u = {70, 199};  // out transposed: the tile's rows run along the 199
    const auto vu = test::stored(test::random_values(u, 49, dt, lo, hi, false), u, dt);
    o = poisoned(u, transposed(u, 2, 0));
    cuda::unary(UnaryOp::Neg, o.view, put(vu, u, rows_padded(u, 1)));
    std::vector<double> ru(vu.size());
    for (size_t i = 0; i < ru.size(); ++i) ru[i] = -vu[i];
    check(o, ru, true, "neg of 70 x 199 into a transposed out");

    const Shape y4 = {2, 6, 20, 13};  // NCHW -> NHWC: the tile's rows run along H x W = 260
    const auto vy4 = test::stored(test::random_values(y4, 50, dt, lo, hi, false), y4, dt);
    o = poisoned(y4, cases::placement(Layout::ChannelsLast, y4));
    cuda::unary(UnaryOp::Relu, o.view, test::on_device(dev, vy4, y4, dt, Layout::Contiguous));
    std::vector<double> ry(vy4.size());
    for (size_t i = 0; i < ry.size(); ++i) ry[i] = std::max(vy4[i], 0.0);
    check(o, ry, true, "relu of NCHW 2x6x20x13 into NHWC");
  }
}

// Tiled launches of more tiles than the device holds blocks (2 x 1001 x 1990: 1024 tiles
// of 64 x 64, ragged both ways), so that a block walks several tiles whatever the walk:
// a transposed operand added into a contiguous out, the same in place on the unstaged
// operand, and relu out= into a transposed out (its buffer's one element before the view
// stays poisoned where misaligned), each element against float64, for the paired tiles
// (2- and 4-byte) and the element tile (one element off the words).
TEST(CudaElementwise, TiledOpsOverManyTiles) {
  const Device dev = Device::cuda(0);
  SB_SKIP_WITHOUT_DEVICE(dev);
  const Shape s = {2, 1001, 1990};
  for (const DType dt : {DType::Float32, DType::BFloat16, DType::Int32}) {
    const double tol = dt == DType::BFloat16 ? 1e-2 : dt == DType::Float32 ? 1e-6 : 0;
    const double lo = dt == DType::Int32 ? -50 : -1, hi = -lo;
    const auto va = test::stored(test::random_values(s, 61, dt, lo, hi, false), s, dt);
    const auto vb = test::stored(test::random_values(s, 62, dt, lo, hi, false), s, dt);
    const Tensor a = test::on_device(dev, va, s, dt, Layout::Contiguous);
    for (const bool aligned : {true, false}) {
      const std::string what = std::string(dtype_name(dt)) + (aligned ? "" : ", misaligned");
      cases::Placement pb = cases::placement(Layout::Transposed, s);
      pb.offset = aligned ? 0 : 1;
      const Tensor b = test::with_placement(test::on_device(dev, vb, s, dt, Layout::Contiguous), pb);
      cuda::reset_elementwise_path_counts();
      std::vector<double> ref(va.size());
      Tensor out = test::poisoned_on(dev, s, dt, Layout::Contiguous);
      cuda::binary(BinaryOp::Add, out, a, b);
      for (size_t i = 0; i < ref.size(); ++i) ref[i] = va[i] + vb[i];
      EXPECT_TRUE(all_close(out, ref, tol, tol)) << what << " a + b transposed";
      Tensor ac = a.clone();  // in place on the unstaged operand
      cuda::binary(BinaryOp::Mul, ac, ac, b);
      for (size_t i = 0; i < ref.size(); ++i) ref[i] = va[i] * vb[i];
      EXPECT_TRUE(all_close(ac, ref, tol, tol)) << what << " a *= b transposed";
      const cases::Placed tout = cases::place(s, pb, dt, dev);  // out transposed: a is staged
      test::poison(tout.buffer);
      cuda::unary(UnaryOp::Relu, tout.view, a);
      for (size_t i = 0; i < ref.size(); ++i) ref[i] = std::max(va[i], 0.0);
      EXPECT_TRUE(all_close(tout.view, ref, tol, tol)) << what << " relu(a) into a transposed out";
      const std::vector<double> all = test::naive_values(tout.buffer);
      const auto kept = std::count_if(all.begin(), all.end(), [&](double x) {
        return dt == DType::Int32 ? x == static_cast<double>(0x5A5A5A5A) : std::isnan(x);  // test::poison's values
      });
      EXPECT_EQ(kept, tout.buffer.numel() - tout.view.numel()) << what << ": written outside the out";
      const cuda::ElementwisePathCounts n = cuda::elementwise_path_counts();
      EXPECT_EQ(n.tiled, 3) << what;
      EXPECT_EQ(n.tiled_pairs, aligned ? 3 : 0) << what;
    }
  }
}

// Note [Tiled kernel registers]: the tiled kernel indexes inside a tile in 32 bits, so an
// operand whose strides would overflow them there takes the strided kernel instead.
// b is a 6 x 4 transposed view with a column stride of 3 * 2^24 elements (a 64-wide tile
// would reach 63 * (3 * 2^24 + 1) > 2^31), in a 288 MiB float16 storage.
TEST(CudaElementwise, TileOffsetsBeyondAnIntTakeTheStridedPath) {
  const Device dev = Device::cuda(0);
  SB_SKIP_WITHOUT_DEVICE(dev);
  const DType dt = DType::Float16;
  const int64_t far = int64_t{3} << 24;
  const Shape s = {6, 4};
  const auto va = test::stored(test::random_values(s, 31, dt, -1, 1, false), s, dt);
  const auto vb = test::stored(test::random_values(s, 32, dt, -1, 1, false), s, dt);
  const Tensor a = test::on_device(dev, va, s, dt, Layout::Contiguous);
  const Tensor storage = zeros({3 * far + 6}, dt, dev);
  Tensor b = storage.as_strided(s, {1, far});
  b.copy_(test::on_device(dev, vb, s, dt, Layout::Contiguous));
  for (const bool wide : {true, false}) {
    // the same add with a column stride that fits: tiled, as a check that the case is one
    const Tensor bb = wide ? b : test::on_device(dev, vb, s, dt, Layout::Transposed);
    cuda::reset_elementwise_path_counts();
    Tensor out = test::poisoned_on(dev, s, dt, Layout::Contiguous);
    cuda::binary(BinaryOp::Add, out, a, bb);
    const cuda::ElementwisePathCounts n = cuda::elementwise_path_counts();
    EXPECT_EQ(n.tiled, wide ? 0 : 1) << "column stride " << bb.strides()[1];
    EXPECT_EQ(n.strided, wide ? 1 : 0) << "column stride " << bb.strides()[1];
    std::vector<double> ref(va.size());
    for (size_t i = 0; i < ref.size(); ++i) ref[i] = va[i] + vb[i];
    EXPECT_TRUE(all_close(out, ref, 2e-3, 2e-3)) << "column stride " << bb.strides()[1];
  }
}

TEST(CudaElementwise, BackendRejectsHostTensorsBeforeAnyWork) {
  Tensor a = zeros({2, 3}), b = zeros({2, 3}), out = zeros({2, 3});
  test::expect_msg([&] { cuda::binary(BinaryOp::Add, out, a, b); }, "add (CUDA): expected CUDA tensors, got one on cpu");
  EXPECT_THROW(cuda::unary(UnaryOp::Relu, out, a), Error);
  EXPECT_EQ(out.to_vector(), std::vector<double>(6, 0.0));
}
#endif  // SB_WITH_CUDA

}  // namespace
}  // namespace sb
