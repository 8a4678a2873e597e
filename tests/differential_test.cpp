// differential_test.cpp — a differential property test of the strided ops against an
// independent float64 reference.
//
// Every operand, the output included, is a seeded random chain of view ops over a
// buffer of its own (narrow, view, stepped slice, permute, expand): any dim order
// (transposed, channels-last, shuffled), inner strides 0, 1, 2, 3, 5 and larger, gaps
// between dims, offsets. Each case runs every elementwise op in its three styles
// (out-of-place, out=, in-place), tensor-scalar ops, normalize along a random dim (three
// styles), the reductions (out-of-place and out=), and copy_ / contiguous / clone / to,
// at every SIMD level the CPU has and on 1 and 2 threads. Outputs are poisoned first;
// every element of an output view must match the reference computed by plain loops in
// float64 (long double for statistics), and every element of its buffer outside the view
// must keep its bits. The output-stride x input-stride combinations are swept explicitly
// as well as at random.
//
// A bounded run is part of `meson test`; SB_DIFFERENTIAL_CASES=N runs N random cases
// (default 2000) and SB_DIFFERENTIAL_SEED=S starts from another seed.
//
// The same cases run on cuda:0 (Differential.Cuda*: every buffer on the device, the
// reference and the bit-for-bit check of each buffer on the host through copies), in a
// CUDA build where a device is present; they skip with a message elsewhere.
// SB_DIFFERENTIAL_CUDA_CASES=N sets their count (default 2000; fewer under memcheck).
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <numeric>
#include <optional>
#include <random>
#include <string>

#include "stridebench/cpu_features.h"
#include "stridebench/parallel.h"
#include "copy/copy.h"
#include "core/test_hooks.h"
#include "stridebench/elementwise.h"
#include "stridebench/reduce.h"
#include "cases/layout.h"
#include "test_util.h"

namespace sb {
namespace {

using Rng = std::mt19937_64;

// Where the operands of the running case live (Note [Device-parameterized tests] in
// test_util.h): every buffer is made there; OnDevice sets it for one test.
Device g_device = Device::cpu();
struct OnDevice {
  explicit OnDevice(Device d) { g_device = d; }
  ~OnDevice() { g_device = Device::cpu(); }
  OnDevice(const OnDevice&) = delete;
  OnDevice& operator=(const OnDevice&) = delete;
};

int64_t pick(Rng& rng, int64_t lo, int64_t hi) { return lo + static_cast<int64_t>(rng() % static_cast<uint64_t>(hi - lo + 1)); }

int64_t env_int(const char* name, int64_t fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtoll(v, nullptr, 10) : fallback;
}

std::string str(const Shape& s) { return ::testing::PrintToString(s); }

// f(k, offset) for every index of sizes in row-major order k, offset = base + index . strides.
template <typename F>
void for_each_offset(const Shape& sizes, const Shape& strides, int64_t base, const F& f) {
  const int64_t nd = static_cast<int64_t>(sizes.size()), n = checked_numel(sizes, "differential");
  Shape idx(static_cast<size_t>(nd), 0);
  int64_t off = base;
  for (int64_t k = 0; k < n; ++k) {
    f(k, off);
    for (int64_t d = nd - 1; d >= 0; --d) {  // odometer, last dim fastest
      if (++idx[d] < sizes[d]) {
        off += strides[d];
        break;
      }
      off -= (sizes[d] - 1) * strides[d];
      idx[d] = 0;
    }
  }
}

// ---------------------------------------------------------------- operands

// A random placement (Note [One layout builder] in cases/layout.h) for sizes; the
// innermost dim's step is `inner` when given.
cases::Placement random_placement(Rng& rng, const Shape& sizes, bool input, std::optional<int64_t> inner = std::nullopt) {
  const int64_t nd = static_cast<int64_t>(sizes.size());
  cases::Placement l = cases::dense(sizes);
  const int64_t kind = pick(rng, 0, 9);
  if (nd == 4 && kind < 3) l.order = {0, 2, 3, 1};  // channels-last
  else if (nd >= 2 && kind < 5) std::swap(l.order[nd - 1], l.order[nd - 2]);  // transposed
  else if (kind < 7) std::shuffle(l.order.begin(), l.order.end(), rng);
  static const int64_t kSteps[] = {1, 1, 1, 1, 2, 2, 3, 5, 8, 17};
  for (int64_t j = 0; j < nd; ++j) {
    const int64_t d = l.order[j];
    if (input && pick(rng, 0, 7) == 0) {
      l.step[d] = 0;  // expanded
      continue;
    }
    l.step[d] = kSteps[pick(rng, 0, 9)];
    if (j + 1 < nd && pick(rng, 0, 3) == 0) l.step[d] = 1;
    l.start[d] = pick(rng, 0, 2);
    l.pad[d] = pick(rng, 0, 3) == 0 ? pick(rng, 1, 3) : 0;
  }
  if (inner && nd > 0) {  // the swept stride: identity order, the last dim at `inner`
    std::iota(l.order.begin(), l.order.end(), 0);
    l.step[nd - 1] = *inner;
    l.start[nd - 1] = pick(rng, 0, 1);
  }
  l.offset = pick(rng, 0, 3);
  // steps and gaps multiply across dims: keep the buffer within 16x the view (at least
  // 4096 elements) by making outer dims dense first
  const int64_t budget = std::max<int64_t>(4096, 16 * checked_numel(sizes, "differential"));
  for (int64_t j = 0; j < nd; ++j) {
    int64_t span = 1;
    for (int64_t k = 0; k < nd; ++k) {
      const int64_t d = l.order[k];
      span *= l.step[d] == 0 || sizes[d] == 0 ? 1 : l.start[d] + (sizes[d] - 1) * l.step[d] + 1 + l.pad[d];
    }
    if (span <= budget) break;
    const int64_t d = l.order[j];
    if (l.step[d] != 0 && !(inner && d == nd - 1)) l.step[d] = 1, l.start[d] = 0, l.pad[d] = 0;
  }
  return l;
}

// An operand: the view under test, the 1-D buffer it lives in, and which buffer
// elements the view covers.
struct Operand {
  Tensor view, buffer;
  std::vector<char> inside;
};

// The view in a fresh buffer on the case's device (cases::place), and which buffer
// elements it covers.
Operand place_operand(const Shape& sizes, const cases::Placement& l, DType dt) {
  const cases::Placed p = cases::place(sizes, l, dt, g_device);
  Operand o{p.view, p.buffer, {}};
  o.inside.assign(static_cast<size_t>(o.buffer.numel()), 0);
  for_each_offset(sizes, o.view.strides(), o.view.storage_offset(),
                  [&](int64_t, int64_t off) { o.inside[static_cast<size_t>(off)] = 1; });
  return o;
}

// Random values of dt: [-2, 2) for floats ([0.25, 4) where `positive`), integers in
// [-50, 50) for int32; rounded to dt, so the reference sees what the kernel sees.
void fill_values(const Tensor& buffer, Rng& rng, bool positive) {
  const DType dt = buffer.dtype();
  std::vector<double> v(static_cast<size_t>(buffer.numel()));
  std::uniform_real_distribution<double> u(0, 1);
  for (double& x : v) {
    const double r = u(rng);
    x = dt == DType::Int32 ? std::floor(100 * r - 50) : positive ? 0.25 + 3.75 * r : 4 * r - 2;
  }
  Tensor(buffer).copy_(from_vector(v, buffer.sizes()).to(dt));
}

Operand input(Rng& rng, const Shape& sizes, DType dt, bool positive, std::optional<int64_t> inner = std::nullopt) {
  Operand o = place_operand(sizes, random_placement(rng, sizes, /*input=*/true, inner), dt);
  fill_values(o.buffer, rng, positive);
  return o;
}

Operand output(Rng& rng, const Shape& sizes, DType dt, std::optional<int64_t> inner = std::nullopt) {
  Operand o = place_operand(sizes, random_placement(rng, sizes, /*input=*/false, inner), dt);
  test::poison(o.buffer);
  return o;
}

// The buffer's bytes (a device buffer through a host copy), to check that nothing
// outside a view changed.
std::vector<unsigned char> bytes_of(const Tensor& buffer) {
  const Tensor h = buffer.device().is_cpu() ? buffer : buffer.to(Device::cpu());
  std::vector<unsigned char> b(h.nbytes());
  std::memcpy(b.data(), h.data_ptr(), b.size());
  return b;
}

::testing::AssertionResult outside_untouched(const Operand& o, const std::vector<unsigned char>& before) {
  const size_t es = o.buffer.element_size();
  const std::vector<unsigned char> bytes = bytes_of(o.buffer);
  const unsigned char* now = bytes.data();
  for (size_t i = 0; i < o.inside.size(); ++i)
    if (!o.inside[i] && !std::equal(now + i * es, now + (i + 1) * es, before.data() + i * es))
      return ::testing::AssertionFailure() << "buffer element " << i << " outside the view (sizes " << str(o.view.sizes())
                                           << ", strides " << str(o.view.strides()) << ", offset "
                                           << o.view.storage_offset() << ") changed";
  return ::testing::AssertionSuccess();
}

// v (row-major over `from`) read at every index of `to`, broadcasting from the right.
std::vector<double> broadcast(const std::vector<double>& v, const Shape& from, const Shape& to) {
  // the row-major strides of `from`, 0 where it broadcasts, aligned to `to`
  Shape st(to.size(), 0);
  const size_t lead = to.size() - from.size();
  int64_t z = 1;
  for (size_t d = from.size(); d-- > 0;) {
    st[lead + d] = from[d] == 1 ? 0 : z;
    z *= from[d];
  }
  std::vector<double> r(static_cast<size_t>(checked_numel(to, "differential")));
  for_each_offset(to, st, 0, [&](int64_t k, int64_t src) { r[static_cast<size_t>(k)] = v[static_cast<size_t>(src)]; });
  return r;
}

// ---------------------------------------------------------------- the reference

const BinaryOp kBinary[] = {BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul, BinaryOp::Div, BinaryOp::Maximum, BinaryOp::Minimum};
const UnaryOp kUnary[] = {UnaryOp::Neg, UnaryOp::Abs, UnaryOp::Relu, UnaryOp::Exp, UnaryOp::Sqrt};

using test::ref_binary;
using test::ref_unary;

bool floating_only(BinaryOp op) { return op == BinaryOp::Div; }
bool floating_only(UnaryOp op) { return op == UnaryOp::Exp || op == UnaryOp::Sqrt; }

double atol(DType dt) { return test::default_atol(dt); }
double rtol(DType dt) { return dt == DType::Float32 ? 2e-6 + test::default_rtol(dt) : test::default_rtol(dt); }

// ---------------------------------------------------------------- modes

// Every SIMD level this CPU has (AVX-512, AVX2, scalar), 1 and 2 threads; a level the
// CPU lacks is reported once by available_modes.
// On a CUDA device one pass: the host's SIMD level and threads do not reach its kernels.
const std::vector<test::Modes>& modes() {
  static const std::vector<test::Modes> m = test::all_kernel_modes();
  static const std::vector<test::Modes> one = {{2, compiled_simd_level()}};
  return g_device.is_cuda() ? one : m;
}

std::string mode_name(const test::Modes& m) {
  if (g_device.is_cuda()) return g_device.str();
  return std::string(simd_level_name(m.simd)) + ", " + std::to_string(m.threads) + " threads";
}

// Streaming stores at every size for one scope (copy.h's threshold), so the
// non-temporal paths of small cases run too.
struct StreamAll {
  explicit StreamAll(bool on) : on_(on) {
    if (on_) set_nt_threshold_bytes(0);
  }
  ~StreamAll() {
    if (on_) set_nt_threshold_bytes(-1);
  }
  bool on_;
};

// ---------------------------------------------------------------- elementwise cases

// One binary case: a op b in the three styles; b may be broadcast by shape as well as
// by stride. `inner`: the swept inner steps of out, a and b (none: random layouts).
::testing::AssertionResult binary_case(Rng& rng, BinaryOp op, DType dt, const Shape& sizes, const Shape& bsizes,
                                       const std::optional<std::array<int64_t, 3>>& inner = std::nullopt) {
  const bool positive = op == BinaryOp::Div;
  Operand a = input(rng, sizes, dt, false, inner ? std::optional<int64_t>((*inner)[1]) : std::nullopt);
  Operand b = input(rng, bsizes, dt, positive, inner ? std::optional<int64_t>((*inner)[2]) : std::nullopt);
  const std::vector<double> av = test::naive_values(a.view), bv = broadcast(test::naive_values(b.view), bsizes, sizes);
  std::vector<double> want(av.size());
  for (size_t i = 0; i < av.size(); ++i) want[i] = ref_binary(op, av[i], bv[i]);
  if (dt == DType::Int32)
    for (double& x : want) x = static_cast<double>(static_cast<int32_t>(static_cast<int64_t>(x)));
  const std::string what = std::string(binary_op_name(op)) + " " + dtype_name(dt) + " sizes " + str(sizes) + " b " +
                           str(bsizes) + ", a " + str(a.view.strides()) + ", b " + str(b.view.strides());
  const std::vector<unsigned char> a_before = bytes_of(a.buffer), b_before = bytes_of(b.buffer);
  for (const test::Modes& m : modes()) {
    test::ModeGuard guard(m);
    const std::string where = what + ", " + mode_name(m);
    // out-of-place
    const Tensor r = binary(op, a.view, b.view);
    if (r.sizes() != sizes) return ::testing::AssertionFailure() << where << ": out-of-place sizes " << str(r.sizes());
    if (auto ok = test::all_close(r, want, atol(dt), rtol(dt)); !ok) return ok << " " << where << ", out-of-place";
    // out=
    Operand o = output(rng, sizes, dt, inner ? std::optional<int64_t>((*inner)[0]) : std::nullopt);
    const std::vector<unsigned char> o_before = bytes_of(o.buffer);
    binary_out(op, o.view, a.view, b.view);
    if (auto ok = test::all_close(o.view, want, atol(dt), rtol(dt)); !ok)
      return ok << " " << where << ", out= (strides " << str(o.view.strides()) << ")";
    if (auto ok = outside_untouched(o, o_before); !ok) return ok << " " << where << ", out=";
    if (bytes_of(a.buffer) != a_before || bytes_of(b.buffer) != b_before)
      return ::testing::AssertionFailure() << where << ": an input changed";
    // in place: a copy of a's layout as the output (a itself is reused by the other modes)
    bool expanded = false;
    for (int64_t d = 0; d < a.view.dim(); ++d) expanded |= a.view.strides()[d] == 0 && sizes[d] > 1;
    if (!expanded) {
      Operand x = place_operand(sizes, random_placement(rng, sizes, false, inner ? std::optional<int64_t>((*inner)[0]) : std::nullopt), dt);
      test::poison(x.buffer);
      x.view.copy_(a.view);
      const std::vector<unsigned char> x_before = bytes_of(x.buffer);
      switch (op) {
        case BinaryOp::Add: x.view.add_(b.view); break;
        case BinaryOp::Sub: x.view.sub_(b.view); break;
        case BinaryOp::Mul: x.view.mul_(b.view); break;
        case BinaryOp::Div: x.view.div_(b.view); break;
        case BinaryOp::Maximum: x.view.maximum_(b.view); break;
        case BinaryOp::Minimum: x.view.minimum_(b.view); break;
      }
      if (auto ok = test::all_close(x.view, want, atol(dt), rtol(dt)); !ok)
        return ok << " " << where << ", in place (strides " << str(x.view.strides()) << ")";
      if (auto ok = outside_untouched(x, x_before); !ok) return ok << " " << where << ", in place";
    }
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult unary_case(Rng& rng, UnaryOp op, DType dt, const Shape& sizes) {
  Operand a = input(rng, sizes, dt, op == UnaryOp::Sqrt);
  const std::vector<double> av = test::naive_values(a.view);
  std::vector<double> want(av.size());
  for (size_t i = 0; i < av.size(); ++i) want[i] = ref_unary(op, av[i]);
  const std::string what = std::string(unary_op_name(op)) + " " + dtype_name(dt) + " sizes " + str(sizes) + ", a " +
                           str(a.view.strides());
  for (const test::Modes& m : modes()) {
    test::ModeGuard guard(m);
    const std::string where = what + ", " + mode_name(m);
    if (auto ok = test::all_close(unary(op, a.view), want, atol(dt), rtol(dt)); !ok) return ok << " " << where << ", out-of-place";
    Operand o = output(rng, sizes, dt);
    const std::vector<unsigned char> before = bytes_of(o.buffer);
    unary_out(op, o.view, a.view);
    if (auto ok = test::all_close(o.view, want, atol(dt), rtol(dt)); !ok)
      return ok << " " << where << ", out= (strides " << str(o.view.strides()) << ")";
    if (auto ok = outside_untouched(o, before); !ok) return ok << " " << where << ", out=";
    // in place
    Operand x = output(rng, sizes, dt);
    x.view.copy_(a.view);
    const std::vector<unsigned char> x_before = bytes_of(x.buffer);
    switch (op) {
      case UnaryOp::Neg: x.view.neg_(); break;
      case UnaryOp::Abs: x.view.abs_(); break;
      case UnaryOp::Relu: x.view.relu_(); break;
      case UnaryOp::Exp: x.view.exp_(); break;
      case UnaryOp::Sqrt: x.view.sqrt_(); break;
    }
    if (auto ok = test::all_close(x.view, want, atol(dt), rtol(dt)); !ok)
      return ok << " " << where << ", in place (strides " << str(x.view.strides()) << ")";
    if (auto ok = outside_untouched(x, x_before); !ok) return ok << " " << where << ", in place";
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult scalar_case(Rng& rng, BinaryOp op, DType dt, const Shape& sizes) {
  Operand a = input(rng, sizes, dt, false);
  const double s = dt == DType::Int32 ? static_cast<double>(pick(rng, -5, 5) | 1) : 0.375 + static_cast<double>(pick(rng, 0, 7));
  const std::vector<double> av = test::naive_values(a.view);
  std::vector<double> want(av.size());
  for (size_t i = 0; i < av.size(); ++i) want[i] = ref_binary(op, av[i], s);
  const std::string what = std::string(binary_op_name(op)) + " scalar " + std::to_string(s) + " " + dtype_name(dt) +
                           " sizes " + str(sizes) + ", a " + str(a.view.strides());
  for (const test::Modes& m : modes()) {
    test::ModeGuard guard(m);
    const std::string where = what + ", " + mode_name(m);
    if (auto ok = test::all_close(binary(op, a.view, s), want, atol(dt), rtol(dt)); !ok) return ok << " " << where;
    Operand o = output(rng, sizes, dt);
    const std::vector<unsigned char> before = bytes_of(o.buffer);
    binary_out(op, o.view, a.view, s);
    if (auto ok = test::all_close(o.view, want, atol(dt), rtol(dt)); !ok)
      return ok << " " << where << ", out= (strides " << str(o.view.strides()) << ")";
    if (auto ok = outside_untouched(o, before); !ok) return ok << " " << where << ", out=";
  }
  return ::testing::AssertionSuccess();
}

// ---------------------------------------------------------------- normalize

// normalize(x, dim, eps) in its three styles: every row along dim against two passes in
// long double over the values the kernel sees. An error in x - mean reaches the output
// divided by the row's sqrt(var + eps), so each element's absolute tolerance grows with
// that factor where it is above 1/2 (rows of a few values, an expanded dim: var 0).
::testing::AssertionResult normalize_case(Rng& rng, DType dt, const Shape& sizes) {
  const int64_t nd = static_cast<int64_t>(sizes.size());
  const int64_t dim = nd == 0 ? 0 : pick(rng, 0, nd - 1) - (pick(rng, 0, 1) ? nd : 0);
  const int64_t d = nd == 0 ? 0 : (dim + nd) % nd;
  const double eps = pick(rng, 0, 1) ? 1e-5 : 0.5;
  Operand a = input(rng, sizes, dt, false);
  const std::vector<double> av = test::naive_values(a.view);
  // row-major strides with dim's set to 0: the row each element belongs to
  Shape rst(static_cast<size_t>(nd), 0);
  for (int64_t k = nd - 1, z = 1; k >= 0; --k)
    if (k != d) {
      rst[k] = z;
      z *= sizes[k];
    }
  const int64_t n = nd == 0 ? 1 : sizes[d], nrows = n == 0 ? 0 : static_cast<int64_t>(av.size()) / n;
  std::vector<int64_t> row(av.size());
  for_each_offset(sizes, rst, 0, [&](int64_t f, int64_t r) { row[static_cast<size_t>(f)] = r; });
  std::vector<long double> s(static_cast<size_t>(nrows), 0), m2(static_cast<size_t>(nrows), 0);
  for (size_t f = 0; f < av.size(); ++f) s[row[f]] += av[f];
  for (size_t f = 0; f < av.size(); ++f) {
    const long double dev = av[f] - s[row[f]] / n;
    m2[row[f]] += dev * dev;
  }
  std::vector<double> want(av.size()), at(av.size());
  // per dtype: the output's own rounding (bfloat16 2^-9, float16 2^-12 of |y| <= 3) with
  // room for float32 statistics; float32 and float64 a few ulp of the same
  const double a0 = dt == DType::BFloat16 ? 1e-2 : dt == DType::Float16 ? 2e-3 : dt == DType::Float32 ? 1e-5 : 1e-12;
  for (size_t f = 0; f < av.size(); ++f) {
    const long double inv_sd = 1 / std::sqrt(m2[row[f]] / n + static_cast<long double>(eps));
    want[f] = static_cast<double>((av[f] - s[row[f]] / n) * inv_sd);
    at[f] = a0 * std::max(1.0, 2 * static_cast<double>(inv_sd));
  }
  const double rt = dt == DType::BFloat16 ? 8e-3 : dt == DType::Float16 ? 2e-3 : dt == DType::Float32 ? 1e-5 : 1e-12;
  const std::string what = std::string("normalize dim ") + std::to_string(dim) + " eps " + std::to_string(eps) + " " +
                           dtype_name(dt) + " sizes " + str(sizes) + ", x " + str(a.view.strides());
  const std::vector<unsigned char> a_before = bytes_of(a.buffer);
  for (const test::Modes& m : modes()) {
    test::ModeGuard guard(m);
    const std::string where = what + ", " + mode_name(m);
    if (auto ok = test::all_close(normalize(a.view, dim, eps), want, at, rt); !ok) return ok << " " << where << ", out-of-place";
    Operand o = output(rng, sizes, dt);
    const std::vector<unsigned char> before = bytes_of(o.buffer);
    normalize_out(o.view, a.view, dim, eps);
    if (auto ok = test::all_close(o.view, want, at, rt); !ok)
      return ok << " " << where << ", out= (strides " << str(o.view.strides()) << ")";
    if (auto ok = outside_untouched(o, before); !ok) return ok << " " << where << ", out=";
    if (bytes_of(a.buffer) != a_before) return ::testing::AssertionFailure() << where << ": the input changed";
    bool expanded = false;
    for (int64_t k = 0; k < nd; ++k) expanded |= a.view.strides()[k] == 0 && sizes[k] > 1;
    if (expanded) continue;  // in place needs an output of its own (PyTorch refuses it too)
    Operand x = output(rng, sizes, dt);
    x.view.copy_(a.view);
    const std::vector<unsigned char> x_before = bytes_of(x.buffer);
    x.view.normalize_(dim, eps);
    if (auto ok = test::all_close(x.view, want, at, rt); !ok)
      return ok << " " << where << ", in place (strides " << str(x.view.strides()) << ")";
    if (auto ok = outside_untouched(x, x_before); !ok) return ok << " " << where << ", in place";
  }
  return ::testing::AssertionSuccess();
}

// ---------------------------------------------------------------- reductions

::testing::AssertionResult reduce_case(Rng& rng, ReduceOp op, DType dt, const Shape& sizes, const Shape& dims,
                                       bool keepdim, int64_t correction) {
  Operand x = input(rng, sizes, dt, /*positive=*/true);  // >= 0: sums without cancellation
  const int64_t nd = static_cast<int64_t>(sizes.size());
  std::vector<bool> red(nd, dims.empty());
  for (int64_t d : dims) red[d < 0 ? d + nd : d] = true;
  Shape rsizes, kept;
  int64_t n = 1;
  for (int64_t d = 0; d < nd; ++d) {
    if (red[d]) n *= sizes[d];
    else kept.push_back(sizes[d]);
    if (!red[d]) rsizes.push_back(sizes[d]);
    else if (keepdim) rsizes.push_back(1);
  }
  // the reference: long double over the kept index of every element
  const std::vector<double> v = test::naive_values(x.view);
  const int64_t nout = checked_numel(kept, "differential");
  std::vector<long double> s(static_cast<size_t>(nout), 0), m2(static_cast<size_t>(nout), 0);
  std::vector<double> mx(static_cast<size_t>(nout), -INFINITY);
  Shape ost(static_cast<size_t>(nd), 0);  // the kept index's row-major strides, 0 on reduced dims
  for (int64_t d = nd - 1, z = 1; d >= 0; --d)
    if (!red[d]) {
      ost[d] = z;
      z *= sizes[d];
    }
  std::vector<int64_t> oi(v.size());
  for_each_offset(sizes, ost, 0, [&](int64_t f, int64_t o) {
    oi[f] = o;
    s[o] += v[f];
    mx[o] = std::max(mx[o], v[f]);
  });
  for (size_t f = 0; f < v.size(); ++f) {
    const long double dev = v[f] - s[oi[f]] / n;
    m2[oi[f]] += dev * dev;
  }
  std::vector<double> want(static_cast<size_t>(nout));
  for (int64_t o = 0; o < nout; ++o) {
    switch (op) {
      case ReduceOp::Sum: want[o] = static_cast<double>(s[o]); break;
      case ReduceOp::Mean: want[o] = static_cast<double>(s[o] / n); break;
      case ReduceOp::Max: want[o] = mx[o]; break;
      case ReduceOp::Var:
      case ReduceOp::Std: {
        const double var = n == 0 ? NAN : static_cast<double>(m2[o] / std::max<int64_t>(0, n - correction));
        want[o] = op == ReduceOp::Std ? std::sqrt(var) : var;
      }
    }
  }
  const double at = atol(dt) * (op == ReduceOp::Sum ? std::max<int64_t>(n, 1) : 1);
  const std::string what = "reduce op " + std::to_string(static_cast<int>(op)) + " " + dtype_name(dt) + " sizes " +
                           str(sizes) + " strides " + str(x.view.strides()) + " dims " + str(dims) + " keepdim " +
                           (keepdim ? "true" : "false") + " correction " + std::to_string(correction);
  for (const test::Modes& m : modes()) {
    test::ModeGuard guard(m);
    const std::string where = what + ", " + mode_name(m);
    Tensor r;
    switch (op) {
      case ReduceOp::Sum: r = sum(x.view, dims, keepdim); break;
      case ReduceOp::Mean: r = mean(x.view, dims, keepdim); break;
      case ReduceOp::Max: r = max(x.view, dims, keepdim); break;
      case ReduceOp::Var: r = var(x.view, dims, correction, keepdim); break;
      case ReduceOp::Std: r = std(x.view, dims, correction, keepdim); break;
    }
    if (r.sizes() != rsizes) return ::testing::AssertionFailure() << where << ": sizes " << str(r.sizes());
    if (auto ok = test::all_close(r, want, at, rtol(dt)); !ok) return ok << " " << where << ", out-of-place";
    Operand o = output(rng, rsizes, dt);
    const std::vector<unsigned char> before = bytes_of(o.buffer);
    switch (op) {
      case ReduceOp::Sum: sum_out(o.view, x.view, dims, keepdim); break;
      case ReduceOp::Mean: mean_out(o.view, x.view, dims, keepdim); break;
      case ReduceOp::Max: max_out(o.view, x.view, dims, keepdim); break;
      case ReduceOp::Var: var_out(o.view, x.view, dims, correction, keepdim); break;
      case ReduceOp::Std: std_out(o.view, x.view, dims, correction, keepdim); break;
    }
    if (auto ok = test::all_close(o.view, want, at, rtol(dt)); !ok)
      return ok << " " << where << ", out= (strides " << str(o.view.strides()) << ")";
    if (auto ok = outside_untouched(o, before); !ok) return ok << " " << where << ", out=";
  }
  return ::testing::AssertionSuccess();
}

// ---------------------------------------------------------------- copies

::testing::AssertionResult copy_case(Rng& rng, DType src_dt, DType dst_dt, const Shape& sizes) {
  Operand a = input(rng, sizes, src_dt, false);
  const std::vector<double> av = test::naive_values(a.view);
  std::vector<double> want = av;
  if (dst_dt == DType::Int32)
    for (double& x : want) x = std::trunc(x);
  const double tol = std::max(atol(src_dt), atol(dst_dt));
  const std::string what = std::string("copy ") + dtype_name(src_dt) + " -> " + dtype_name(dst_dt) + " sizes " +
                           str(sizes) + ", src " + str(a.view.strides());
  for (const test::Modes& m : modes()) {
    test::ModeGuard guard(m);
    const std::string where = what + ", " + mode_name(m);
    Operand o = output(rng, sizes, dst_dt);
    const std::vector<unsigned char> before = bytes_of(o.buffer);
    o.view.copy_(a.view);
    if (auto ok = test::all_close(o.view, want, tol, tol); !ok)
      return ok << " " << where << ", copy_ (dst strides " << str(o.view.strides()) << ")";
    if (auto ok = outside_untouched(o, before); !ok) return ok << " " << where << ", copy_";
    if (src_dt == dst_dt) {
      const Tensor c = a.view.contiguous();
      if (!c.is_contiguous()) return ::testing::AssertionFailure() << where << ": contiguous() is not contiguous";
      if (auto ok = test::all_close(c, av, 0, 0); !ok) return ok << " " << where << ", contiguous()";
      if (auto ok = test::all_close(a.view.clone(), av, 0, 0); !ok) return ok << " " << where << ", clone()";
      if (sizes.size() == 4) {
        const Tensor cl = a.view.contiguous(MemoryFormat::ChannelsLast);
        if (!cl.is_contiguous(MemoryFormat::ChannelsLast))
          return ::testing::AssertionFailure() << where << ": contiguous(ChannelsLast) is not channels-last";
        if (auto ok = test::all_close(cl, av, 0, 0); !ok) return ok << " " << where << ", contiguous(ChannelsLast)";
      }
    } else if (auto ok = test::all_close(a.view.to(dst_dt), want, tol, tol); !ok) {
      return ok << " " << where << ", to()";
    }
  }
  return ::testing::AssertionSuccess();
}

// ---------------------------------------------------------------- drivers

Shape random_sizes(Rng& rng) {
  const int nd = static_cast<int>(pick(rng, 0, 4));
  Shape s(nd);
  for (auto& x : s) {
    const int64_t k = pick(rng, 0, 19);
    x = k == 0 ? 0 : k < 4 ? 1 : k < 16 ? pick(rng, 2, 12) : pick(rng, 13, 70);
  }
  while (checked_numel(s, "differential") > 8000) *std::max_element(s.begin(), s.end()) /= 2;
  return s;
}

// b's sizes: some of a's dims set to 1, some leading dims dropped.
Shape broadcast_partner(Rng& rng, const Shape& a) {
  if (pick(rng, 0, 2) != 0) return a;
  Shape b = a;
  for (auto& s : b)
    if (pick(rng, 0, 2) == 0) s = 1;
  const size_t drop = b.empty() ? 0 : static_cast<size_t>(pick(rng, 0, static_cast<int64_t>(b.size())));
  return Shape(b.begin() + static_cast<int64_t>(drop), b.end());
}

Shape random_dims(Rng& rng, int64_t nd) {
  Shape dims;
  for (int64_t d = 0; d < nd; ++d)
    if (pick(rng, 0, 1)) dims.push_back(pick(rng, 0, 1) ? d : d - nd);
  return dims;
}

const DType kDTypes[] = {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16, DType::Int32};
constexpr int64_t kLastDType = static_cast<int64_t>(std::size(kDTypes)) - 1;

// The output-stride x input-stride sweep: inner steps 1, 2, 3, 5 for the output and
// 0, 1, 2, 3, 5 for each input, over 1-D and 2-D shapes whose row lengths sit at the
// vector widths' edges, every binary op in turn, float32 and float64 (the dtypes with
// AVX-512 paths) and int32.
void output_stride_times_input_stride_sweep() {
  Rng rng(env_int("SB_DIFFERENTIAL_SEED", 1));
  const int64_t out_steps[] = {1, 2, 3, 5}, in_steps[] = {0, 1, 2, 3, 5};
  const int64_t lengths[] = {1, 3, 7, 8, 9, 16, 17, 31, 33, 67};
  int op_index = 0;
  for (int64_t so : out_steps)
    for (int64_t sa : in_steps)
      for (int64_t sb : in_steps)
        for (DType dt : {DType::Float32, DType::Float64, DType::Int32}) {
          const int64_t n = lengths[pick(rng, 0, 9)];
          const Shape sizes = pick(rng, 0, 1) ? Shape{n} : Shape{pick(rng, 2, 3), n};
          BinaryOp op = kBinary[op_index++ % 6];
          if (dt == DType::Int32 && op == BinaryOp::Div) op = BinaryOp::Mul;
          const StreamAll stream(pick(rng, 0, 3) == 0);
          ASSERT_TRUE(binary_case(rng, op, dt, sizes, sizes, std::array<int64_t, 3>{so, sa, sb}))
              << "inner steps out " << so << ", a " << sa << ", b " << sb;
        }
}

// Random cases: each draws sizes, layouts, a dtype and one op of each kind.
void random_view_chains(int64_t cases) {
  const uint64_t seed = static_cast<uint64_t>(env_int("SB_DIFFERENTIAL_SEED", 1));
  for (int64_t c = 0; c < cases; ++c) {
    Rng rng(seed * 1000003 + static_cast<uint64_t>(c));
    Shape sizes = random_sizes(rng);
    if (c % 20 == 19) {  // above kGrainSize elements, so that 2 threads split the work
      sizes = {2, 3, 67, 97};
      std::shuffle(sizes.begin(), sizes.end(), rng);
    }
    const DType dt = kDTypes[pick(rng, 0, kLastDType)];
    const StreamAll stream(pick(rng, 0, 4) == 0);
    const std::string label = "case " + std::to_string(c) + " (SB_DIFFERENTIAL_SEED=" + std::to_string(seed) + ")";
    BinaryOp bop = kBinary[pick(rng, 0, 5)];
    if (dt == DType::Int32 && floating_only(bop)) bop = BinaryOp::Sub;
    ASSERT_TRUE(binary_case(rng, bop, dt, sizes, broadcast_partner(rng, sizes))) << label;
    UnaryOp uop = kUnary[pick(rng, 0, 4)];
    if (dt == DType::Int32 && floating_only(uop)) uop = UnaryOp::Abs;
    ASSERT_TRUE(unary_case(rng, uop, dt, sizes)) << label;
    BinaryOp sop = kBinary[pick(rng, 0, 5)];
    if (dt == DType::Int32 && floating_only(sop)) sop = BinaryOp::Maximum;
    ASSERT_TRUE(scalar_case(rng, sop, dt, sizes)) << label;
    ASSERT_TRUE(normalize_case(rng, dt == DType::Int32 ? DType::Float32 : dt, sizes)) << label;
    const int64_t nd = static_cast<int64_t>(sizes.size());
    const Shape dims = random_dims(rng, nd);
    bool empty_reduced = false;
    for (int64_t d = 0; d < nd; ++d)
      if (sizes[d] == 0 && (dims.empty() || std::find(dims.begin(), dims.end(), d) != dims.end() ||
                            std::find(dims.begin(), dims.end(), d - nd) != dims.end()))
        empty_reduced = true;
    ReduceOp rop = static_cast<ReduceOp>(pick(rng, 0, 4));
    if (dt == DType::Int32 && rop != ReduceOp::Max) rop = ReduceOp::Sum;
    if (rop == ReduceOp::Max && empty_reduced) rop = ReduceOp::Sum;
    if (dt != DType::Float16 || rop == ReduceOp::Max) {  // float16 sums of up to 39000 values overflow 65504
      ASSERT_TRUE(reduce_case(rng, rop, dt, sizes, dims, pick(rng, 0, 1), pick(rng, 0, 1))) << label;
    }
    ASSERT_TRUE(copy_case(rng, dt, pick(rng, 0, 2) == 0 ? kDTypes[pick(rng, 0, kLastDType)] : dt, sizes)) << label;
  }
}

TEST(Differential, OutputStrideTimesInputStrideSweep) { output_stride_times_input_stride_sweep(); }

TEST(Differential, RandomViewChainsEveryOpStyleAndLevel) { random_view_chains(env_int("SB_DIFFERENTIAL_CASES", 2000)); }

TEST(Differential, CudaOutputStrideTimesInputStrideSweep) {
  SB_SKIP_WITHOUT_DEVICE(Device::cuda(0));
  const OnDevice on(Device::cuda(0));
  output_stride_times_input_stride_sweep();
}

TEST(Differential, CudaRandomViewChainsEveryOpStyle) {
  SB_SKIP_WITHOUT_DEVICE(Device::cuda(0));
  const OnDevice on(Device::cuda(0));
  random_view_chains(env_int("SB_DIFFERENTIAL_CUDA_CASES", 2000));
}

}  // namespace
}  // namespace sb
