// test_util.cpp — see test_util.h.
#include "test_util.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <sstream>

#ifdef SB_WITH_CUDA
#include "cuda/cuda_backend.h"
#endif

namespace sb::test {

std::vector<Layout> all_layouts() {
  return {Layout::Contiguous, Layout::Transposed, Layout::Sliced, Layout::Expanded, Layout::ChannelsLast,
          Layout::Offset};
}

Tensor with_layout(const Tensor& values, Layout layout) {
  cases::Placement p = cases::placement(layout, values.sizes());
  if (layout == Layout::Sliced) p.offset = 1;
  return with_placement(values, p);
}

Tensor with_placement(const Tensor& values, const cases::Placement& p) {
  const Shape& sz = values.sizes();
  const cases::Placed placed = cases::place(sz, p, values.dtype(), values.device());
  poison(placed.buffer);
  // write through the view narrowed to one index along each broadcast dim
  Tensor src = values, dst = placed.view;
  for (int64_t d : cases::broadcast_dims(p)) {
    src = src.narrow(d, 0, 1);
    dst = dst.narrow(d, 0, 1);
  }
  dst.copy_(src);
  return placed.view;
}

std::vector<double> layout_values(const std::vector<double>& v, const Shape& sizes, Layout layout) {
  if (layout != Layout::Expanded) return v;
  const std::vector<int64_t> bdims = cases::broadcast_dims(cases::placement(layout, sizes));
  if (bdims.empty()) return v;
  const Shape strides = contiguous_strides(sizes);
  std::vector<double> r(v.size());
  Shape idx(sizes.size(), 0);  // the index of element i
  for (size_t i = 0; i < r.size(); ++i, next_index(idx, sizes)) {
    int64_t from = static_cast<int64_t>(i);
    for (int64_t d : bdims) from -= idx[d] * strides[d];
    r[i] = v[static_cast<size_t>(from)];
  }
  return r;
}

Tensor layout_values(const Tensor& values, Layout layout) {
  return from_vector(layout_values(values.to_vector(), values.sizes(), layout), values.sizes()).to(values.dtype());
}

void poison(const Tensor& t) {
  if (!t.defined() || t.storage()->nbytes() == 0) return;
  void* p = t.storage()->data();
  const size_t nb = t.storage()->nbytes();
  if (!t.device().is_cpu()) {  // poison through a host buffer
    Tensor host = empty({static_cast<int64_t>(nb / t.element_size())}, t.dtype());
    poison(host);
    Tensor flat = t.as_strided({host.numel()}, {1}, 0);
    flat.copy_(host);
    return;
  }
  switch (t.dtype()) {
    case DType::Float32: {
      float* f = static_cast<float*>(p);
      for (size_t i = 0; i < nb / 4; ++i) f[i] = std::nanf("");
      break;
    }
    case DType::Float64: {
      double* f = static_cast<double*>(p);
      for (size_t i = 0; i < nb / 8; ++i) f[i] = std::nan("");
      break;
    }
    case DType::Float16: {
      uint16_t* f = static_cast<uint16_t*>(p);
      for (size_t i = 0; i < nb / 2; ++i) f[i] = 0x7e00;
      break;
    }
    case DType::BFloat16: {
      uint16_t* f = static_cast<uint16_t*>(p);
      for (size_t i = 0; i < nb / 2; ++i) f[i] = 0x7fc0;
      break;
    }
    default: std::memset(p, 0x5A, nb);
  }
}

Shape random_shape(std::mt19937_64& rng, int ndim, int64_t max_size, bool allow_zero) {
  Shape s(ndim);
  for (auto& x : s) {
    const int r = static_cast<int>(rng() % 10);
    if (r == 0 && allow_zero) x = 0;
    else if (r <= 2) x = 1;
    else x = 1 + static_cast<int64_t>(rng() % static_cast<uint64_t>(max_size));
  }
  return s;
}

std::vector<Modes> available_modes(std::initializer_list<Modes> want) {
  std::vector<Modes> out;
  for (const Modes& m : want) {
    if (m.simd <= compiled_simd_level()) {
      out.push_back(m);
      continue;
    }
    static bool said[3] = {};
    if (!said[static_cast<int>(m.simd)]) {
      said[static_cast<int>(m.simd)] = true;
      std::fprintf(stderr, "note: SIMD level %s is not available in this build on this CPU: its kernels are not tested here\n",
                   simd_level_name(m.simd));
    }
  }
  return out;
}

namespace {
class FakeCudaAllocator : public Allocator {
 public:
  void* allocate(size_t n) override { return n ? caching_cpu_allocator()->allocate(n) : nullptr; }
  void deallocate(void* p, size_t n) override { if (p) caching_cpu_allocator()->deallocate(p, n); }
  AllocatorStats stats() const override { return {}; }
  void reset_peak_stats() override {}
  void empty_cache() override {}
  const char* name() const override { return "fake-cuda"; }
  Device device() const override { return Device::cuda(0); }
};
}  // namespace

SystemAllocatorScope::SystemAllocatorScope(Device dev, bool on) : dev_(dev), on_(on) {
  if (!on_) return;
  if (dev_.is_cpu()) {
    prev_ = static_cast<int>(cpu_allocator_kind());
    set_cpu_allocator(AllocatorKind::System);
  }
#ifdef SB_WITH_CUDA
  else {
    prev_ = static_cast<int>(cuda::allocator_kind());
    cuda::set_allocator(cuda::CudaAllocatorKind::Direct);
  }
#endif
}

SystemAllocatorScope::~SystemAllocatorScope() {
  if (!on_) return;
  if (dev_.is_cpu()) set_cpu_allocator(static_cast<AllocatorKind>(prev_));
#ifdef SB_WITH_CUDA
  else cuda::set_allocator(static_cast<cuda::CudaAllocatorKind>(prev_));
#endif
}

Tf32Scope::Tf32Scope(Device dev, bool on) : cuda_(dev.is_cuda()) {
#ifdef SB_WITH_CUDA
  if (cuda_) {
    prev_ = cuda::allow_tf32();
    cuda::set_allow_tf32(on);
  }
#else
  (void)on;
#endif
}

Tf32Scope::~Tf32Scope() {
#ifdef SB_WITH_CUDA
  if (cuda_) cuda::set_allow_tf32(prev_);
#endif
}

void expect_msg(const std::function<void()>& f, const std::string& part) {
  try {
    f();
    ADD_FAILURE() << "no throw, expected: " << part;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

Tensor fake_cuda(const Shape& sizes) {
  static FakeCudaAllocator al;
  return Tensor(std::make_shared<Storage>(checked_numel(sizes, "fake_cuda") * 4, &al), sizes, contiguous_strides(sizes), 0,
                DType::Float32);
}

Shape unravel(int64_t flat, const Shape& sizes) {
  Shape idx(sizes.size());
  for (int64_t d = static_cast<int64_t>(sizes.size()) - 1; d >= 0; --d) {
    idx[d] = sizes[d] ? flat % sizes[d] : 0;
    flat = sizes[d] ? flat / sizes[d] : 0;
  }
  return idx;
}

namespace {
double read_as_double(const char* p, DType dt) {
  switch (dt) {
    case DType::Float32: { float v; std::memcpy(&v, p, 4); return v; }
    case DType::Float64: { double v; std::memcpy(&v, p, 8); return v; }
    case DType::Float16: { uint16_t h; std::memcpy(&h, p, 2); return Half::to_float(h); }
    case DType::Int8: return static_cast<int8_t>(*p);
    case DType::Int32: { int32_t v; std::memcpy(&v, p, 4); return v; }
    case DType::Int64: { int64_t v; std::memcpy(&v, p, 8); return static_cast<double>(v); }
    case DType::BFloat16: {  // the upper half of a float32, read without the library's type
      uint16_t h;
      std::memcpy(&h, p, 2);
      const uint32_t x = static_cast<uint32_t>(h) << 16;
      float f;
      std::memcpy(&f, &x, 4);
      return f;
    }
  }
  return NAN;
}
}  // namespace

std::vector<double> naive_values(const Tensor& t) {
  if (!t.device().is_cpu()) return naive_values(t.to(Device::cpu()));
  const int64_t n = t.numel(), nd = t.dim();
  std::vector<double> r(static_cast<size_t>(n));
  if (n == 0) return r;
  const char* base = static_cast<const char*>(t.data_ptr());
  const int64_t es = static_cast<int64_t>(t.element_size());
  Shape idx(static_cast<size_t>(nd), 0);
  int64_t off = 0;  // elements from element [0, ..., 0]
  for (int64_t i = 0; i < n; ++i) {
    r[static_cast<size_t>(i)] = read_as_double(base + off * es, t.dtype());
    for (int64_t d = nd - 1; d >= 0; --d) {  // odometer, last dim fastest
      if (++idx[d] < t.sizes()[d]) {
        off += t.strides()[d];
        break;
      }
      off -= (t.sizes()[d] - 1) * t.strides()[d];
      idx[d] = 0;
    }
  }
  return r;
}

namespace {
template <typename Atol>
::testing::AssertionResult all_close_impl(const Tensor& actual, const std::vector<double>& expected, const Atol& atol,
                                          double rtol) {
  if (static_cast<size_t>(actual.numel()) != expected.size())
    return ::testing::AssertionFailure() << "element count " << actual.numel() << " != expected "
                                         << expected.size() << " for " << actual.str();
  const std::vector<double> got = naive_values(actual);
  for (size_t i = 0; i < expected.size(); ++i) {
    const double e = expected[i], a = got[i];
    const bool ok = (std::isnan(e) && std::isnan(a)) || (std::isinf(e) && a == e) ||
                    std::fabs(a - e) <= atol(i) + rtol * std::fabs(e);
    if (!ok) {
      std::ostringstream os;
      os << "mismatch at index " << unravel(static_cast<int64_t>(i), actual.sizes()) << " (flat " << i
         << "): expected " << e << ", actual " << a << " (atol " << atol(i) << ", rtol " << rtol << ") in "
         << actual.str();
      return ::testing::AssertionFailure() << os.str();
    }
  }
  return ::testing::AssertionSuccess();
}
}  // namespace

::testing::AssertionResult all_close(const Tensor& actual, const std::vector<double>& expected, double atol,
                                     double rtol) {
  return all_close_impl(actual, expected, [atol](size_t) { return atol; }, rtol);
}

::testing::AssertionResult all_close(const Tensor& actual, const std::vector<double>& expected,
                                     const std::vector<double>& atol, double rtol) {
  if (atol.size() != expected.size())
    return ::testing::AssertionFailure() << atol.size() << " tolerances for " << expected.size() << " elements";
  return all_close_impl(actual, expected, [&atol](size_t i) { return atol[i]; }, rtol);
}

// float16 and bfloat16: two units in the last place at 1 (2^-9 and 2^-6); bfloat16's is
// PyTorch's own rtol for it (torch.testing)
double default_atol(DType t) {
  switch (t) {
    case DType::Float64: return 1e-12;
    case DType::Float32: return 1e-5;
    case DType::Float16: return 2e-3;
    case DType::BFloat16: return 1.6e-2;
    default: return 0;
  }
}
double default_rtol(DType t) {
  switch (t) {
    case DType::Float64: return 1e-12;
    case DType::Float32: return 1e-5;
    case DType::Float16: return 2e-3;
    case DType::BFloat16: return 1.6e-2;
    default: return 0;
  }
}

double round_to_bf16(double x) {
  const float f = static_cast<float>(x);  // as the library converts: through float
  if (std::isnan(f) || std::isinf(f) || f == 0.0f) return f;
  int e = 0;
  std::frexp(f, &e);                                     // |f| = m * 2^e, m in [0.5, 1)
  const double q = std::ldexp(1.0, std::max(e - 8, -133));  // 8 significant bits; subnormals below 2^-126
  const double r = std::nearbyint(static_cast<double>(f) / q) * q;  // ties to even (the default rounding)
  return static_cast<float>(r);                           // past the largest bfloat16: infinity
}

double ref_binary(BinaryOp op, double x, double y) {
  switch (op) {
    case BinaryOp::Add: return x + y;
    case BinaryOp::Sub: return x - y;
    case BinaryOp::Mul: return x * y;
    case BinaryOp::Div: return x / y;
    case BinaryOp::Maximum: return std::isnan(x) || std::isnan(y) ? NAN : std::max(x, y);
    case BinaryOp::Minimum: return std::isnan(x) || std::isnan(y) ? NAN : std::min(x, y);
  }
  return NAN;
}

double ref_unary(UnaryOp op, double x) {
  switch (op) {
    case UnaryOp::Neg: return -x;
    case UnaryOp::Abs: return std::fabs(x);
    case UnaryOp::Relu: return x < 0 ? 0 : x;
    case UnaryOp::Exp: return std::exp(x);
    case UnaryOp::Sqrt: return std::sqrt(x);
  }
  return NAN;
}

// ---- tests with the device as a parameter

std::vector<Device> test_devices() {
#ifdef SB_WITH_CUDA
  return {Device::cpu(), Device::cuda(0)};
#else
  return {Device::cpu()};
#endif
}

std::string device_param_name(const ::testing::TestParamInfo<Device>& info) {
  return info.param.is_cuda() ? "cuda" + std::to_string(info.param.index) : "cpu";
}

bool device_present(Device d) {
  if (!d.is_cuda()) return true;
#ifdef SB_WITH_CUDA
  return cuda::is_available() && d.index < cuda::device_count();
#else
  return false;
#endif
}

std::vector<double> random_values(const Shape& sizes, uint64_t seed, DType dt, double lo, double hi, bool expandable) {
  const int64_t n = checked_numel(sizes, "random_values");
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  std::vector<double> v(static_cast<size_t>(n));
  for (double& x : v) {
    x = u(rng);
    if (!is_floating(dt)) x = std::floor(x);
  }
  return expandable ? layout_values(v, sizes, Layout::Expanded) : v;
}

std::vector<double> stored(const std::vector<double>& v, const Shape& sizes, DType dt) {
  if (dt == DType::BFloat16) {  // independent of the library's conversion, which tensor_test checks
    std::vector<double> r(v.size());
    for (size_t i = 0; i < v.size(); ++i) r[i] = round_to_bf16(v[i]);
    return r;
  }
  return host_tensor(v, sizes, dt).to_vector();
}

Tensor host_tensor(const std::vector<double>& v, const Shape& sizes, DType dt) {
  return from_vector(v, sizes).to(dt);
}

Tensor on_device(Device dev, const std::vector<double>& v, const Shape& sizes, DType dt, Layout layout) {
  return with_layout(host_tensor(v, sizes, dt).to(dev), layout);
}

std::string shape_str(const Shape& s) { return detail::str_cat(s); }

Tensor poisoned_on(Device dev, const Shape& sizes, DType dt, Layout layout) {
  if (layout == Layout::Expanded) layout = Layout::Contiguous;
  cases::Placement p = cases::placement(layout, sizes);
  if (layout == Layout::Sliced) p.offset = 1;  // as with_layout
  const cases::Placed placed = cases::place(sizes, p, dt, dev);
  poison(placed.buffer);
  return placed.view;
}

std::vector<Shape> mixed_shapes(uint64_t seed, int count) {
  std::mt19937_64 rng(seed);
  std::vector<Shape> out = {{0}, {1}, {7}, {3, 5}, {2, 3, 4, 5}, {1, 1, 1}, {33, 65}, {4, 16, 8, 8}};
  for (int i = 0; i < count; ++i) out.push_back(random_shape(rng, 1 + static_cast<int>(rng() % 4), 24));
  return out;
}

}  // namespace sb::test
