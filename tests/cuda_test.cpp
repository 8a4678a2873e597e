// cuda_test.cpp — every CUDA op against a float64 reference computed on the host, on
// random shapes and in every layout (test_util's with_layout, built on the device),
// outputs poisoned first; the copy paths, the allocators (statistics, the OOM path)
// and cuBLAS matmul. Tests that need a GPU skip at run time, with a message, when
// sb::cuda::is_available() is false; the argument checks that fail before touching a
// device run everywhere.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>

#include "cuda/cuda_backend.h"
#include "test_util.h"

namespace sb {
namespace {

using test::all_close;
using test::Layout;

#define SB_REQUIRE_CUDA()                                                                   \
  do {                                                                                      \
    if (!cuda::is_available()) GTEST_SKIP() << "no CUDA device (cudaGetDeviceCount found none)"; \
  } while (0)

const Device kGpu = Device::cuda(0);

std::string str(const Shape& s) { return detail::str_cat(s); }  // gtest messages cannot find sb's operator<<

// Row-major values in [lo, hi) (integers for integer dtypes); constant along dim 0
// when `expandable` (so the Expanded layout can hold them).
std::vector<double> make_values(const Shape& sizes, uint64_t seed, DType dt, double lo, double hi, bool expandable) {
  const int64_t n = checked_numel(sizes, "make_values");
  const int64_t row = sizes.empty() || sizes[0] == 0 ? n : n / sizes[0];
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    if (expandable && row > 0 && i >= row) {
      v[i] = v[i % row];
      continue;
    }
    double x = u(rng);
    if (!is_floating(dt)) x = std::floor(x);
    v[i] = x;
  }
  return v;
}

Tensor cpu_tensor(const std::vector<double>& v, const Shape& sizes, DType dt) {
  return from_vector(v, sizes).to(dt);
}

// The values, as the dtype stores them (float16 rounding included).
std::vector<double> stored(const std::vector<double>& v, const Shape& sizes, DType dt) {
  return cpu_tensor(v, sizes, dt).to_vector();
}

// On the GPU, in `layout`.
Tensor gpu_tensor(const std::vector<double>& v, const Shape& sizes, DType dt, Layout layout) {
  return test::with_layout(cpu_tensor(v, sizes, dt).to(kGpu), layout);
}

// A poisoned output on the GPU; Expanded (unwritable) becomes Contiguous.
Tensor gpu_out(const Shape& sizes, DType dt, Layout layout) {
  if (layout == Layout::Expanded) layout = Layout::Contiguous;
  Tensor t = test::with_layout(zeros(sizes, dt).to(kGpu), layout);
  test::poison(t);
  return t;
}

double tol_a(DType dt) { return test::default_atol(dt); }
double tol_r(DType dt) { return test::default_rtol(dt); }

std::vector<Shape> shapes(uint64_t seed, int count) {
  std::mt19937_64 rng(seed);
  std::vector<Shape> out = {{0}, {1}, {7}, {3, 5}, {2, 3, 4, 5}, {1, 1, 1}, {33, 65}, {4, 16, 8, 8}};
  for (int i = 0; i < count; ++i) out.push_back(test::random_shape(rng, 1 + static_cast<int>(rng() % 4), 24));
  return out;
}

const DType kMathTypes[] = {DType::Float32, DType::Float64, DType::Float16, DType::Int32};

// ---------------------------------------------------------------- without a device

TEST(CudaNoDevice, ClearErrors) {
  if (cuda::is_available()) GTEST_SKIP() << "a CUDA device is present: this test covers its absence";
  EXPECT_EQ(cuda::device_count(), 0);
  try {
    empty({4}, DType::Float32, kGpu);
    FAIL() << "expected sb::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no CUDA device"), std::string::npos) << e.what();
  }
  EXPECT_THROW(cuda::pinned_empty({4}), Error);
  EXPECT_THROW(cuda::device_info(0), Error);
}

TEST(CudaArgs, RejectsHostTensorsBeforeAnyWork) {
  Tensor a = zeros({2, 3}), b = zeros({2, 3}), out = zeros({2, 3});
  try {
    cuda::binary(BinaryOp::Add, out, a, b);
    FAIL() << "expected sb::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("add (CUDA): expected CUDA tensors, got one on cpu"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(cuda::unary(UnaryOp::Relu, out, a), Error);
  EXPECT_THROW(cuda::reduce(ReduceOp::Sum, zeros({1, 3}), a, {0}, 1), Error);
  EXPECT_THROW(cuda::matmul(zeros({2, 2}), a, zeros({3, 2})), Error);
  EXPECT_THROW(cuda::fill(a, 1.0), Error);
  EXPECT_THROW(cuda::copy(a, b), Error);  // neither on a GPU
  EXPECT_EQ(a.to_vector(), std::vector<double>(6, 0.0));
}

// ---------------------------------------------------------------- copies

TEST(CudaCopy, RoundTripEveryLayoutAndDtype) {
  SB_REQUIRE_CUDA();
  for (DType dt : {DType::Float32, DType::Float64, DType::Float16, DType::Int8, DType::Int32, DType::Int64}) {
    for (const Shape& s : shapes(11, 6)) {
      for (Layout l : test::all_layouts()) {
        const std::vector<double> v = make_values(s, 3, dt, -100, 100, l == Layout::Expanded);
        Tensor g = gpu_tensor(v, s, dt, l);
        ASSERT_TRUE(g.device().is_cuda());
        EXPECT_TRUE(all_close(g.to(Device::cpu()), stored(v, s, dt), 0, 0))
            << dtype_name(dt) << " " << test::layout_name(l) << " " << str(s);
        // Straight from a host tensor in the layout into a poisoned device tensor in another.
        Tensor h = test::with_layout(cpu_tensor(v, s, dt), l);
        Tensor d = gpu_out(s, dt, Layout::Transposed);
        d.copy_(h);
        EXPECT_TRUE(all_close(d, stored(v, s, dt), 0, 0)) << "H2D " << test::layout_name(l) << " " << str(s);
        Tensor back = test::with_layout(zeros(s, dt), Layout::Sliced);
        back.copy_(g);
        EXPECT_TRUE(all_close(back, stored(v, s, dt), 0, 0)) << "D2H " << test::layout_name(l) << " " << str(s);
      }
    }
  }
}

TEST(CudaCopy, ConvertsDtypesOnEveryPath) {
  SB_REQUIRE_CUDA();
  const DType all[] = {DType::Float32, DType::Float64, DType::Float16, DType::Int8, DType::Int32, DType::Int64};
  for (DType from : all) {
    for (DType to : all) {
      const Shape s = {3, 17, 5};
      const std::vector<double> v = make_values(s, 5, DType::Float64, -100, 100, false);
      const Tensor src_cpu = cpu_tensor(v, s, from);
      const std::vector<double> ref = src_cpu.to(to).to_vector();  // the CPU conversion
      for (Layout l : {Layout::Contiguous, Layout::Transposed, Layout::Sliced}) {
        Tensor src = test::with_layout(src_cpu.to(kGpu), l);
        Tensor d2d = gpu_out(s, to, Layout::Contiguous);
        d2d.copy_(src);
        EXPECT_TRUE(all_close(d2d, ref, 0, 0)) << from << " -> " << to << " d2d " << test::layout_name(l);
        Tensor d2h = test::with_layout(zeros(s, to), Layout::Transposed);
        d2h.copy_(src);
        EXPECT_TRUE(all_close(d2h, ref, 0, 0)) << from << " -> " << to << " d2h " << test::layout_name(l);
        Tensor h2d = gpu_out(s, to, l);
        h2d.copy_(test::with_layout(src_cpu, l));
        EXPECT_TRUE(all_close(h2d, ref, 0, 0)) << from << " -> " << to << " h2d " << test::layout_name(l);
      }
    }
  }
}

TEST(CudaCopy, TransposesTakeTheTiledKernel) {
  SB_REQUIRE_CUDA();
  for (DType dt : {DType::Float32, DType::Float16, DType::Float64, DType::Int8}) {
    for (Shape s : {Shape{2, 3, 5, 7}, Shape{1, 64, 32, 32}, Shape{3, 33, 17, 65}, Shape{2, 5, 1, 40}}) {
      const std::vector<double> v = make_values(s, 9, dt, -50, 50, false);
      Tensor g = cpu_tensor(v, s, dt).to(kGpu);
      cuda::reset_copy_path_counts();
      Tensor nhwc = g.contiguous(MemoryFormat::ChannelsLast);
      ASSERT_TRUE(nhwc.is_contiguous(MemoryFormat::ChannelsLast));
      EXPECT_TRUE(all_close(nhwc, stored(v, s, dt), 0, 0)) << "NCHW -> NHWC " << str(s);
      Tensor nchw = nhwc.contiguous();
      EXPECT_TRUE(all_close(nchw, stored(v, s, dt), 0, 0)) << "NHWC -> NCHW " << str(s);
      const bool tiled = s[1] >= 4 && s[2] * s[3] >= 4;
      if (tiled) {
        EXPECT_EQ(cuda::copy_path_counts().transpose, 2) << str(s);
      }
      // A 2-D transpose of the last two dims.
      Tensor t = g.transpose(2, 3).contiguous();
      std::vector<double> ref(v.size());
      const std::vector<double> sv = stored(v, s, dt);
      const Shape ts = {s[0], s[1], s[3], s[2]};
      for (int64_t i = 0; i < static_cast<int64_t>(v.size()); ++i) {
        const Shape id = test::unravel(i, ts);
        ref[i] = sv[((id[0] * s[1] + id[1]) * s[2] + id[3]) * s[3] + id[2]];
      }
      EXPECT_TRUE(all_close(t, ref, 0, 0)) << "transpose " << str(s);
    }
  }
}

TEST(CudaCopy, FillWritesOnlyTheView) {
  SB_REQUIRE_CUDA();
  for (DType dt : {DType::Float32, DType::Float16, DType::Int32, DType::Float64}) {
    Tensor buf = zeros({6, 9}, dt, kGpu);
    buf.slice(1, 1, std::nullopt, 2).fill_(3.0);
    std::vector<double> ref(54, 0.0);
    for (int i = 0; i < 6; ++i)
      for (int j = 1; j < 9; j += 2) ref[i * 9 + j] = 3.0;
    EXPECT_TRUE(all_close(buf, ref, 0, 0)) << dt;
    Tensor t = empty({5, 4}, dt, kGpu).t();
    t.fill_(-2.5);
    EXPECT_TRUE(all_close(t, std::vector<double>(20, is_floating(dt) ? -2.5 : -2.0), 0, 0)) << dt;
  }
}

TEST(CudaCopy, PinnedAndAsync) {
  SB_REQUIRE_CUDA();
  const Shape s = {257, 31};
  Tensor p = cuda::pinned_empty(s);
  EXPECT_TRUE(cuda::is_pinned(p));
  EXPECT_TRUE(p.device().is_cpu());
  EXPECT_FALSE(cuda::is_pinned(zeros(s)));
  const std::vector<double> v = make_values(s, 4, DType::Float32, -1, 1, false);
  p.copy_(cpu_tensor(v, s, DType::Float32));
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  cuda::reset_copy_path_counts();
  Tensor g = cuda::to_async(p, kGpu, stream);
  Tensor back = cuda::to_async(g, Device::cpu(), stream);
  EXPECT_EQ(cuda::copy_path_counts().memcpy, 2);
  EXPECT_EQ(cuda::copy_path_counts().staged, 0);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  EXPECT_TRUE(cuda::is_pinned(back));
  EXPECT_TRUE(all_close(back, stored(v, s, DType::Float32), 0, 0));
  // A pageable or strided source falls back to a synchronous copy.
  Tensor t = cuda::to_async(cpu_tensor(v, s, DType::Float32).t(), kGpu, stream);
  EXPECT_EQ(cuda::copy_path_counts().staged, 1);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  EXPECT_TRUE(all_close(t.t(), stored(v, s, DType::Float32), 0, 0));
  ASSERT_EQ(cudaStreamDestroy(stream), cudaSuccess);
}

// ---------------------------------------------------------------- elementwise

double ref_binary(BinaryOp op, double a, double b, DType dt) {
  switch (op) {
    case BinaryOp::Add: return a + b;
    case BinaryOp::Sub: return a - b;
    case BinaryOp::Mul: return a * b;
    case BinaryOp::Div: return is_floating(dt) ? a / b : std::trunc(a / b);
    case BinaryOp::Maximum: return std::max(a, b);
    case BinaryOp::Minimum: return std::min(a, b);
  }
  return 0;
}

TEST(CudaElementwise, BinaryEveryOpDtypeLayout) {
  SB_REQUIRE_CUDA();
  const BinaryOp ops[] = {BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul, BinaryOp::Div, BinaryOp::Maximum,
                          BinaryOp::Minimum};
  for (BinaryOp op : ops) {
    for (DType dt : kMathTypes) {
      for (const Shape& s : shapes(21, 3)) {
        for (Layout la : test::all_layouts()) {
          const Layout lb = test::all_layouts()[(static_cast<int>(la) + 1) % 6];
          const bool idiv = op == BinaryOp::Div;
          const double lo = is_floating(dt) ? -1 : -100, hi = is_floating(dt) ? 1 : 100;
          const auto va = stored(make_values(s, 1, dt, lo, hi, la == Layout::Expanded), s, dt);
          const auto vb = stored(make_values(s, 2, dt, idiv ? (is_floating(dt) ? 0.5 : 1) : lo,
                                             idiv ? (is_floating(dt) ? 1.5 : 20) : hi, lb == Layout::Expanded),
                                 s, dt);
          Tensor a = gpu_tensor(va, s, dt, la), b = gpu_tensor(vb, s, dt, lb);
          Tensor out = gpu_out(s, dt, la);
          cuda::binary(op, out, a, b);
          std::vector<double> ref(va.size());
          for (size_t i = 0; i < ref.size(); ++i) ref[i] = ref_binary(op, va[i], vb[i], dt);
          EXPECT_TRUE(all_close(out, ref, tol_a(dt), tol_r(dt)))
              << static_cast<int>(op) << " " << dt << " " << test::layout_name(la) << "/" << test::layout_name(lb);
          // tensor-scalar
          Tensor out2 = gpu_out(s, dt, lb);
          const double sc = idiv ? 3.0 : -0.75;
          cuda::binary_scalar(op, out2, a, sc);
          const double scv = is_floating(dt) ? sc : std::trunc(sc);
          for (size_t i = 0; i < ref.size(); ++i) ref[i] = ref_binary(op, va[i], scv, dt);
          EXPECT_TRUE(all_close(out2, ref, tol_a(dt), tol_r(dt)))
              << "scalar " << static_cast<int>(op) << " " << dt << " " << test::layout_name(la);
        }
      }
    }
  }
}

TEST(CudaElementwise, BroadcastInPlaceAndPaths) {
  SB_REQUIRE_CUDA();
  const Shape s = {37, 129};
  const auto va = stored(make_values(s, 7, DType::Float32, -1, 1, false), s, DType::Float32);
  const auto vr = stored(make_values({129}, 8, DType::Float32, -1, 1, false), {129}, DType::Float32);
  Tensor a = cpu_tensor(va, s, DType::Float32).to(kGpu);
  Tensor row = cpu_tensor(vr, {129}, DType::Float32).to(kGpu);
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
  Tensor out = gpu_out(s, DType::Float32, Layout::Offset);
  cuda::unary(UnaryOp::Neg, out, off);
  EXPECT_EQ(cuda::elementwise_path_counts().strided, 2);
  for (auto& x : ref) x = -x;
  EXPECT_TRUE(all_close(out, ref, 1e-6, 1e-6));
}

double ref_unary(UnaryOp op, double a, DType dt) {
  double r = 0;
  switch (op) {
    case UnaryOp::Neg: r = -a; break;
    case UnaryOp::Abs: r = std::fabs(a); break;
    case UnaryOp::Relu: r = a < 0 ? 0 : a; break;
    case UnaryOp::Exp: r = std::exp(a); break;
    case UnaryOp::Sqrt: r = std::sqrt(a); break;
  }
  return is_floating(dt) ? r : std::trunc(r);
}

TEST(CudaElementwise, UnaryEveryOpDtypeLayout) {
  SB_REQUIRE_CUDA();
  for (UnaryOp op : {UnaryOp::Neg, UnaryOp::Abs, UnaryOp::Relu, UnaryOp::Exp, UnaryOp::Sqrt}) {
    for (DType dt : kMathTypes) {
      for (const Shape& s : shapes(31, 3)) {
        for (Layout l : test::all_layouts()) {
          const bool pos = op == UnaryOp::Sqrt || (!is_floating(dt) && op == UnaryOp::Exp);
          const double lo = pos ? 0 : (is_floating(dt) ? -2 : -100), hi = pos ? 10 : (is_floating(dt) ? 2 : 100);
          const auto va = stored(make_values(s, 5, dt, lo, hi, l == Layout::Expanded), s, dt);
          Tensor a = gpu_tensor(va, s, dt, l);
          Tensor out = gpu_out(s, dt, l);
          cuda::unary(op, out, a);
          std::vector<double> ref(va.size());
          for (size_t i = 0; i < ref.size(); ++i) ref[i] = ref_unary(op, va[i], dt);
          EXPECT_TRUE(all_close(out, ref, tol_a(dt), tol_r(dt)))
              << static_cast<int>(op) << " " << dt << " " << test::layout_name(l) << " " << str(s);
        }
      }
    }
  }
}

TEST(CudaElementwise, NormalizeEveryDimDtypeLayout) {
  SB_REQUIRE_CUDA();
  for (DType dt : {DType::Float32, DType::Float64, DType::Float16}) {
    for (const Shape& s : shapes(41, 4)) {
      if (s.empty()) continue;
      for (int64_t dim = 0; dim < static_cast<int64_t>(s.size()); ++dim) {
        for (Layout l : test::all_layouts()) {
          const auto vx = stored(make_values(s, 6, dt, -3, 3, l == Layout::Expanded), s, dt);
          Tensor x = gpu_tensor(vx, s, dt, l);
          Tensor out = gpu_out(s, dt, l);
          cuda::normalize(out, x, dim, 1e-5);
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
          const double tol = dt == DType::Float16 ? 1e-2 : (dt == DType::Float32 ? 1e-4 : 1e-10);
          EXPECT_TRUE(all_close(out, ref, tol, tol)) << dt << " dim " << dim << " " << test::layout_name(l) << " " << str(s);
        }
      }
    }
  }
}

// ---------------------------------------------------------------- reductions

TEST(CudaReduce, EveryOpDtypeDimsLayout) {
  SB_REQUIRE_CUDA();
  const ReduceOp ops[] = {ReduceOp::Sum, ReduceOp::Mean, ReduceOp::Max, ReduceOp::Var, ReduceOp::Std};
  std::mt19937_64 rng(77);
  for (ReduceOp op : ops) {
    for (DType dt : kMathTypes) {
      if (!is_floating(dt) && op != ReduceOp::Sum && op != ReduceOp::Max) continue;
      for (const Shape& s : shapes(51, 3)) {
        for (Layout l : test::all_layouts()) {
          Shape dims;
          for (int64_t d = 0; d < static_cast<int64_t>(s.size()); ++d)
            if (rng() % 2) dims.push_back(d);
          if (dims.empty() && !s.empty()) dims.push_back(static_cast<int64_t>(rng() % s.size()));
          Shape keep = s;
          int64_t R = 1;
          for (int64_t d : dims) {
            R *= s[d];
            keep[d] = 1;
          }
          if (op == ReduceOp::Max && R == 0) continue;  // an error, tested below
          const auto vx = stored(make_values(s, 8, dt, is_floating(dt) ? -1 : -50, is_floating(dt) ? 1 : 50,
                                             l == Layout::Expanded),
                                 s, dt);
          Tensor x = gpu_tensor(vx, s, dt, l);
          Tensor out = gpu_out(keep, dt, Layout::Contiguous);
          cuda::reduce(op, out, x, dims, 1);
          // reference: accumulate each element into its output
          const int64_t O = checked_numel(keep, "ref");
          std::vector<double> sum(O, 0.0), mx(O, -INFINITY), sq(O, 0.0);
          auto out_index = [&](int64_t i) {
            Shape id = test::unravel(i, s);
            int64_t o = 0;
            for (size_t d = 0; d < s.size(); ++d) o = o * keep[d] + (keep[d] == 1 ? 0 : id[d]);
            return o;
          };
          for (int64_t i = 0; i < static_cast<int64_t>(vx.size()); ++i) {
            sum[out_index(i)] += vx[i];
            mx[out_index(i)] = std::max(mx[out_index(i)], vx[i]);
          }
          for (int64_t i = 0; i < static_cast<int64_t>(vx.size()); ++i) {
            const double d = vx[i] - sum[out_index(i)] / R;
            sq[out_index(i)] += d * d;
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
          const double tol = dt == DType::Float16 ? 5e-3 : (dt == DType::Float32 ? 1e-5 : (dt == DType::Int32 ? 0 : 1e-12));
          EXPECT_TRUE(all_close(out, ref, tol, tol))
              << static_cast<int>(op) << " " << dt << " " << test::layout_name(l) << " sizes " << str(s) << " dims " << str(dims);
        }
      }
    }
  }
}

TEST(CudaReduce, LargeInnerOuterAndErrors) {
  SB_REQUIRE_CUDA();
  // 1 output of 2^20 + 3 elements: split over many blocks, then the finalize kernel.
  for (Shape s : {Shape{(1 << 20) + 3}, Shape{5000, 3}, Shape{3, 70001}}) {
    const auto v = stored(make_values(s, 12, DType::Float32, -1, 1, false), s, DType::Float32);
    Tensor x = cpu_tensor(v, s, DType::Float32).to(kGpu);
    const Shape dims = {0};
    Shape keep = s;
    keep[0] = 1;
    Tensor out = gpu_out(keep, DType::Float32, Layout::Contiguous);
    cuda::reduce(ReduceOp::Var, out, x, dims, 0);
    const int64_t inner = s.size() > 1 ? s[1] : 1;
    std::vector<double> ref(inner);
    for (int64_t j = 0; j < inner; ++j) {
      double m = 0, q = 0;
      for (int64_t i = 0; i < s[0]; ++i) m += v[i * inner + j];
      m /= s[0];
      for (int64_t i = 0; i < s[0]; ++i) q += (v[i * inner + j] - m) * (v[i * inner + j] - m);
      ref[j] = q / s[0];
    }
    EXPECT_TRUE(all_close(out, ref, 1e-6, 1e-5)) << str(s);
  }
  Tensor e = empty({0, 3}, DType::Float32, kGpu);
  try {
    cuda::reduce(ReduceOp::Max, empty({1, 3}, DType::Float32, kGpu), e, {0}, 1);
    FAIL() << "expected sb::Error";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("max of an empty set"), std::string::npos) << err.what();
  }
  EXPECT_THROW(cuda::reduce(ReduceOp::Sum, empty({2, 3}, DType::Float32, kGpu), empty({2, 3}, DType::Float32, kGpu),
                            {0}, 1),
               Error);  // out not in keepdim form
}

// ---------------------------------------------------------------- matmul

std::vector<double> ref_matmul(const std::vector<double>& a, const std::vector<double>& b, int64_t B, int64_t Ba,
                               int64_t Bb, int64_t M, int64_t K, int64_t N) {
  std::vector<double> c(static_cast<size_t>(B * M * N), 0.0);
  for (int64_t z = 0; z < B; ++z)
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double s = 0;
        for (int64_t k = 0; k < K; ++k)
          s += a[((Ba == 1 ? 0 : z) * M + i) * K + k] * b[((Bb == 1 ? 0 : z) * K + k) * N + j];
        c[(z * M + i) * N + j] = s;
      }
  return c;
}

enum class MatLayout { RowMajor, Transposed, RowStrided, Stepped };

// A (rows, cols) matrix (or batch of them) on the GPU holding v, in `ml`.
Tensor gpu_matrix(const std::vector<double>& v, const Shape& s, DType dt, MatLayout ml) {
  Tensor g = cpu_tensor(v, s, dt).to(kGpu);
  const int64_t n = static_cast<int64_t>(s.size());
  switch (ml) {
    case MatLayout::RowMajor: return g;
    case MatLayout::Transposed: return g.transpose(n - 2, n - 1).contiguous().transpose(n - 2, n - 1);
    case MatLayout::RowStrided: {  // a narrow() of a wider buffer: row stride > cols
      Shape w = s;
      w[n - 1] += 5;
      Tensor buf = zeros(w, dt, kGpu);
      Tensor view = buf.narrow(n - 1, 2, s[n - 1]);
      view.copy_(g);
      return view;
    }
    case MatLayout::Stepped: return test::with_layout(g, Layout::Sliced);
  }
  return g;
}

TEST(CudaMatmul, LayoutsDtypesBatches) {
  SB_REQUIRE_CUDA();
  struct Case { int64_t B, Ba, Bb, M, K, N; };
  const Case cases[] = {{1, 1, 1, 1, 1, 1}, {1, 1, 1, 17, 33, 9}, {1, 1, 1, 64, 64, 64}, {3, 3, 3, 5, 7, 11},
                        {4, 1, 4, 8, 3, 6}, {2, 2, 1, 31, 16, 2}, {1, 1, 1, 4, 0, 3}};
  const MatLayout mls[] = {MatLayout::RowMajor, MatLayout::Transposed, MatLayout::RowStrided, MatLayout::Stepped};
  for (DType dt : {DType::Float32, DType::Float64, DType::Float16}) {
    for (const Case& c : cases) {
      const bool batched = c.B > 1 || c.Ba > 1;
      for (MatLayout la : mls) {
        for (MatLayout lb : mls) {
          const Shape sa = batched ? Shape{c.Ba, c.M, c.K} : Shape{c.M, c.K};
          const Shape sb = batched ? Shape{c.Bb, c.K, c.N} : Shape{c.K, c.N};
          const Shape so = batched ? Shape{c.B, c.M, c.N} : Shape{c.M, c.N};
          const auto va = stored(make_values(sa, 1, dt, -1, 1, false), sa, dt);
          const auto vb = stored(make_values(sb, 2, dt, -1, 1, false), sb, dt);
          Tensor a = gpu_matrix(va, sa, dt, la), b = gpu_matrix(vb, sb, dt, lb);
          if (batched && c.Ba == 1) a = a.expand({c.B, c.M, c.K});
          if (batched && c.Bb == 1) b = b.expand({c.B, c.K, c.N});
          Tensor out = gpu_out(so, dt, Layout::Contiguous);
          cuda::reset_matmul_operand_copies();
          cuda::matmul(out, a, b);
          // a stepped view is neither row- nor column-major unless one of its dims is 1
          const int64_t copies = (la == MatLayout::Stepped && c.M > 1 && c.K > 1) +
                                 (lb == MatLayout::Stepped && c.K > 1 && c.N > 1);
          EXPECT_EQ(cuda::matmul_operand_copies(), copies) << "layouts " << int(la) << "/" << int(lb);
          const double tol = dt == DType::Float16 ? 1e-2 : (dt == DType::Float32 ? 1e-5 : 1e-12);
          EXPECT_TRUE(all_close(out, ref_matmul(va, vb, c.B, c.Ba, c.Bb, c.M, c.K, c.N), tol, tol))
              << dt << " B" << c.B << " M" << c.M << " K" << c.K << " N" << c.N << " layouts " << int(la) << "/"
              << int(lb);
        }
      }
      // A column-major out.
      const Shape sa = {c.M, c.K}, sb = {c.K, c.N};
      const auto va = stored(make_values(sa, 3, dt, -1, 1, false), sa, dt);
      const auto vb = stored(make_values(sb, 4, dt, -1, 1, false), sb, dt);
      Tensor out = empty({c.N, c.M}, dt, kGpu).t();
      test::poison(out);
      cuda::matmul(out, gpu_matrix(va, sa, dt, MatLayout::RowMajor), gpu_matrix(vb, sb, dt, MatLayout::Transposed));
      const double tol = dt == DType::Float16 ? 1e-2 : (dt == DType::Float32 ? 1e-5 : 1e-12);
      EXPECT_TRUE(all_close(out, ref_matmul(va, vb, 1, 1, 1, c.M, c.K, c.N), tol, tol)) << "column-major out " << dt;
    }
  }
}

TEST(CudaMatmul, Tf32AndInt8Linear) {
  SB_REQUIRE_CUDA();
  const int64_t M = 64, K = 128, N = 48;
  const auto va = stored(make_values({M, K}, 1, DType::Float32, -1, 1, false), {M, K}, DType::Float32);
  const auto vw = stored(make_values({N, K}, 2, DType::Float32, -1, 1, false), {N, K}, DType::Float32);
  std::vector<double> vwt(static_cast<size_t>(K * N));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; ++k) vwt[k * N + n] = vw[n * K + k];
  const auto ref = ref_matmul(va, vwt, 1, 1, 1, M, K, N);
  cuda::set_allow_tf32(true);
  Tensor out = gpu_out({M, N}, DType::Float32, Layout::Contiguous);
  cuda::linear(out, cpu_tensor(va, {M, K}, DType::Float32).to(kGpu), cpu_tensor(vw, {N, K}, DType::Float32).to(kGpu));
  cuda::set_allow_tf32(false);
  EXPECT_TRUE(all_close(out, ref, 2e-2, 2e-2));  // TF32: 10-bit mantissa inputs
  // int8: exact int32 accumulation.
  const auto ia = make_values({M, K}, 5, DType::Int8, -127, 128, false);
  const auto iw = make_values({N, K}, 6, DType::Int8, -127, 128, false);
  std::vector<double> iwt(static_cast<size_t>(K * N));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; ++k) iwt[k * N + n] = iw[n * K + k];
  Tensor iout = gpu_out({M, N}, DType::Int32, Layout::Contiguous);
  cuda::linear(iout, cpu_tensor(ia, {M, K}, DType::Int8).to(kGpu), cpu_tensor(iw, {N, K}, DType::Int8).to(kGpu));
  EXPECT_TRUE(all_close(iout, ref_matmul(ia, iwt, 1, 1, 1, M, K, N), 0, 0));
}

TEST(CudaMatmul, BadInputs) {
  SB_REQUIRE_CUDA();
  Tensor a = zeros({3, 4}, DType::Float32, kGpu), b = zeros({5, 6}, DType::Float32, kGpu);
  Tensor out = zeros({3, 6}, DType::Float32, kGpu);
  try {
    cuda::matmul(out, a, b);
    FAIL() << "expected sb::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("inner sizes differ: a [3, 4], b [5, 6]"), std::string::npos) << e.what();
  }
  EXPECT_THROW(cuda::matmul(zeros({3, 6}, DType::Float64, kGpu), a, zeros({4, 6}, DType::Float32, kGpu)), Error);
  EXPECT_THROW(cuda::matmul(zeros({3, 6}, DType::Float32, kGpu), a, zeros({4, 6}, DType::Float16, kGpu)), Error);
  EXPECT_THROW(cuda::matmul(zeros({3, 6}, DType::Int32, kGpu), a.to(DType::Int32), zeros({4, 6}, DType::Int32, kGpu)),
               Error);
  EXPECT_THROW(cuda::matmul(zeros({1, 6}, DType::Float32, kGpu).expand({3, 6}), a, zeros({4, 6}, DType::Float32, kGpu)),
               Error);
}

// ---------------------------------------------------------------- allocators

TEST(CudaAllocator, StatisticsAfterSequences) {
  SB_REQUIRE_CUDA();
  Allocator* al = cuda::caching_allocator(0);
  ASSERT_EQ(cuda::allocator(0), al) << "caching is the default";
  al->empty_cache();
  const AllocatorStats s0 = al->stats();
  {
    Tensor a = empty({1000}, DType::Float32, kGpu);  // 4000 -> 4096
    Tensor b = empty({3}, DType::Float16, kGpu);     // 6 -> 512
    AllocatorStats s = al->stats();
    EXPECT_EQ(s.allocated_bytes - s0.allocated_bytes, 4096 + 512);
    EXPECT_EQ(s.requested_bytes - s0.requested_bytes, 4006);
    EXPECT_LE(s.allocated_bytes, s.reserved_bytes);
    EXPECT_EQ(s.allocation_count - s0.allocation_count, 2);
  }
  AllocatorStats s1 = al->stats();
  EXPECT_EQ(s1.allocated_bytes, s0.allocated_bytes);
  {
    Tensor c = empty({1000}, DType::Float32, kGpu);  // reuses the cached block
    EXPECT_EQ(al->stats().cache_hits - s1.cache_hits, 1);
    EXPECT_EQ(al->stats().system_allocs, s1.system_allocs);
  }
  al->empty_cache();  // no tensor is alive here: every segment is whole and free
  EXPECT_EQ(al->stats().allocated_bytes, 0);
  EXPECT_EQ(al->stats().reserved_bytes, 0);
  {  // the direct allocator, selected at run time
    cuda::AllocatorGuard g(cuda::CudaAllocatorKind::Direct);
    Allocator* d = cuda::allocator(0);
    EXPECT_EQ(d, cuda::direct_allocator(0));
    const AllocatorStats d0 = d->stats();
    Tensor x = zeros({100}, DType::Float32, kGpu);
    Tensor y = x.clone();
    EXPECT_EQ(d->stats().system_allocs - d0.system_allocs, 2);
    EXPECT_EQ(d->stats().allocated_bytes - d0.allocated_bytes, 800);
    EXPECT_TRUE(all_close(y, std::vector<double>(100, 0.0), 0, 0));
  }
  EXPECT_EQ(cuda::allocator(0), al);
}

TEST(CudaAllocator, ImpossibleRequestThrowsAndLeavesAllocatorUsable) {
  SB_REQUIRE_CUDA();
  Allocator* al = cuda::caching_allocator(0);
  const AllocatorStats before = al->stats();
  const int64_t pib = int64_t{1} << 50;
  try {
    empty({pib / 4}, DType::Float32, kGpu);
    FAIL() << "expected sb::Error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("out of memory"), std::string::npos) << msg;
    EXPECT_NE(msg.find(std::to_string(pib)), std::string::npos) << msg;
  }
  const AllocatorStats after = al->stats();
  EXPECT_EQ(after.allocated_bytes, before.allocated_bytes);
  EXPECT_EQ(after.allocation_count, before.allocation_count);
  Tensor t = full({1024}, 2.0, DType::Float32, kGpu);
  EXPECT_TRUE(all_close(t, std::vector<double>(1024, 2.0), 0, 0));
  cuda::AllocatorGuard g(cuda::CudaAllocatorKind::Direct);
  EXPECT_THROW(empty({pib / 4}, DType::Float32, kGpu), Error);
  Tensor u = full({16}, 1.0, DType::Float32, kGpu);
  EXPECT_TRUE(all_close(u, std::vector<double>(16, 1.0), 0, 0));
}

TEST(CudaDevice, InfoIsFilled) {
  SB_REQUIRE_CUDA();
  const cuda::DeviceInfo info = cuda::device_info(0);
  EXPECT_FALSE(info.name.empty());
  EXPECT_GT(info.total_memory, 0);
  EXPECT_GT(info.sm_count, 0);
  EXPECT_GT(info.runtime_version, 0);
  EXPECT_GE(info.driver_version, info.runtime_version / 1000 * 1000);
}

}  // namespace
}  // namespace sb
