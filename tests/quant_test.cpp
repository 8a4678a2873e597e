// quant_test.cpp — Linear / Mlp in every precision and the int8 core (lib/quant/):
// int32 accumulators EXACTLY equal to an int64 reference (including the worst case for
// vpmaddubsw saturation), the quantization rules, each precision's output against a
// float64 reference of what it computes, weight bytes, calibration, bad inputs;
// 1 and 2 threads, AVX2 and scalar, non-contiguous inputs.
#include "stridebench/quant.h"

#include <algorithm>
#include <cmath>
#include <functional>

#include "stridebench/cpu_features.h"
#include "stridebench/parallel.h"
#include "test_util.h"
#ifdef SB_WITH_CUDA
#include "cuda/cuda_backend.h"
#endif

namespace sb {
namespace {

using test::Layout;
using test::expect_msg;

using test::Modes;
using test::ModeGuard;
const std::vector<Modes> kModes = test::gemm_kernel_modes();

Tensor scaled(const Tensor& t, double s) {
  std::vector<float> v;
  for (double e : t.to_vector()) v.push_back(static_cast<float>(e * s));
  return from_vector<float>(v, t.sizes());
}

// y = x W^T + b (+relu) in float64, W given as float64 values.
std::vector<double> ref_linear(const std::vector<double>& x, const std::vector<double>& w, const std::vector<double>& b,
                               int64_t M, int64_t K, int64_t N, bool relu) {
  std::vector<double> y(static_cast<size_t>(M * N));
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double s = b.empty() ? 0.0 : b[n];
      for (int64_t k = 0; k < K; ++k) s += x[m * K + k] * w[n * K + k];
      y[m * N + n] = relu ? std::max(s, 0.0) : s;
    }
  return y;
}

// The float64 reference of exactly what precision p computes for y = x W^T + b (+relu):
// f32 with the float weights; f16 with the float16-rounded weights (and x rounded too
// when round_x: the CUDA layer's tensor cores take both operands in float16); bf16 with
// both rounded to bfloat16 (test::round_to_bf16, on every device); int8 with
// the dequantized integer product (acc - zp*row_sum) * sx * sw + b from the exact
// integers, the activation range taken from range_src (x itself when dynamic).
std::vector<double> precision_ref(Precision p, const Tensor& vx, const Tensor& w, const std::vector<double>& vb,
                                  const Tensor& range_src, bool relu, bool round_x) {
  const int64_t M = vx.size(0), K = vx.size(1), N = w.size(0);
  if (p == Precision::F32) return ref_linear(vx.to_vector(), w.to_vector(), vb, M, K, N, relu);
  if (p == Precision::F16)
    return ref_linear((round_x ? vx.to(DType::Float16) : vx).to_vector(), w.to(DType::Float16).to_vector(), vb, M, K,
                      N, relu);
  if (p == Precision::BF16)
    return ref_linear(test::stored(vx.to_vector(), vx.sizes(), DType::BFloat16),
                      test::stored(w.to_vector(), w.sizes(), DType::BFloat16), vb, M, K, N, relu);
  float lo = 0, hi = 0;
  for (double v : range_src.to_vector()) {
    lo = std::min(lo, float(v));
    hi = std::max(hi, float(v));
  }
  const ActQParams q = act_qparams(lo, hi);
  const std::vector<double> xq = quantize_activations(vx, q).to_vector();
  const QuantizedWeight qw = quantize_weight(w);
  const std::vector<double> wq = unpack_weight(qw).to_vector(), sw = qw.scale.to_vector();
  std::vector<double> ref(static_cast<size_t>(M * N), 0);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double acc = 0, rs = 0;
      for (int64_t k = 0; k < K; ++k) {
        acc += xq[m * K + k] * wq[n * K + k];
        rs += wq[n * K + k];
      }
      const double v = double(q.scale) * sw[n] * (acc - q.zero_point * rs) + (vb.empty() ? 0.0 : vb[n]);
      ref[m * N + n] = relu ? std::max(v, 0.0) : v;
    }
  return ref;
}

TEST(Int8, AccumulatorsExactIncludingSaturationWorstCase) {
  std::mt19937_64 rng(8);
  for (int trial = 0; trial < 20; ++trial) {
    const int64_t M = rng() % 23, N = 1 + rng() % 40, K = trial == 0 ? 1000 : 1 + rng() % 300;
    // weights that quantize to +-127 (and mixed), activations 0..127 (worst case: all 127)
    Tensor w = randn({N, K}, rng());
    if (trial < 3) w = full({N, K}, trial == 1 ? -1.0 : 1.0);
    const QuantizedWeight qw = quantize_weight(w);
    std::vector<uint8_t> a(static_cast<size_t>(std::max<int64_t>(M, 1) * (K + 3)));
    for (auto& v : a) v = trial < 3 ? 127 : static_cast<uint8_t>(rng() % 128);
    const std::vector<double> wq = unpack_weight(qw).to_vector();
    for (const Modes& m : kModes) {
      ModeGuard g(m);
      std::vector<int32_t> acc(static_cast<size_t>(M * N), 0x5A5A5A5A);
      int8_gemm_s32(M, a.data(), K + 3, qw, acc.data());
      for (int64_t i = 0; i < M; ++i)
        for (int64_t n = 0; n < N; ++n) {
          int64_t s = 0;
          for (int64_t k = 0; k < K; ++k) s += static_cast<int64_t>(a[i * (K + 3) + k]) * static_cast<int64_t>(wq[n * K + k]);
          ASSERT_EQ(acc[i * N + n], s) << "trial " << trial << " at (" << i << ", " << n << ") threads " << m.threads
                                       << " simd " << int(m.simd);
        }
    }
  }
}

TEST(Int8, QuantizationRules) {
  const Tensor w = test::with_layout(randn({37, 53}, 3), Layout::Transposed);
  const QuantizedWeight qw = quantize_weight(w);
  const std::vector<double> wv = w.to_vector(), wq = unpack_weight(qw).to_vector();
  const std::vector<double> sc = qw.scale.to_vector(), rs = qw.row_sum.to_vector();
  for (int64_t n = 0; n < 37; ++n) {
    double amax = 0, sum = 0;
    for (int64_t k = 0; k < 53; ++k) amax = std::max(amax, std::fabs(wv[n * 53 + k]));
    EXPECT_NEAR(sc[n], amax / 127, 1e-6 * amax);
    for (int64_t k = 0; k < 53; ++k) {
      EXPECT_LE(std::fabs(wq[n * 53 + k]), 127);
      EXPECT_LE(std::fabs(wq[n * 53 + k] * sc[n] - wv[n * 53 + k]), sc[n] * 0.5 + 1e-6);
      sum += wq[n * 53 + k];
    }
    EXPECT_EQ(rs[n], sum);
  }
  const ActQParams q = act_qparams(-1.5f, 2.5f);
  EXPECT_FLOAT_EQ(q.scale, 4.0f / 127);
  EXPECT_EQ(q.zero_point, static_cast<int>(std::nearbyint(1.5 / (4.0 / 127))));
  const Tensor xq = quantize_activations(from_vector<float>({-1.5f, 0.0f, 2.5f, 100.0f, -100.0f}, {1, 5}), q);
  const std::vector<double> v = xq.to_vector();
  EXPECT_EQ(v[0], 0);
  EXPECT_EQ(v[1], q.zero_point);
  EXPECT_EQ(v[2], 127);
  EXPECT_EQ(v[3], 127);  // clamped
  EXPECT_EQ(v[4], 0);
  const ActQParams z = act_qparams(0.0f, 0.0f);
  EXPECT_EQ(z.scale, 1.0f);
  EXPECT_EQ(z.zero_point, 0);
}

// Each precision against precision_ref, every kernel mode, x in three layouts.
TEST(Linear, EveryPrecisionMatchesItsReference) {
  std::mt19937_64 rng(12);
  for (int trial = 0; trial < 10; ++trial) {
    const int64_t M = trial == 0 ? 0 : 1 + rng() % 30, K = 1 + rng() % 200, N = 1 + rng() % 50;
    const bool relu = trial % 2, with_bias = trial % 3 != 0;
    const Tensor vx = randn({M, K}, rng()), w = randn({N, K}, rng());
    const Tensor b = with_bias ? randn({N}, rng()) : Tensor();
    const std::vector<double> vb = with_bias ? b.to_vector() : std::vector<double>();
    for (Precision p : {Precision::F32, Precision::F16, Precision::BF16, Precision::Int8Dynamic, Precision::Int8Static}) {
      Linear lin(test::with_layout(w, Layout::Transposed), b, p);
      if (p == Precision::Int8Static) lin.observe(scaled(randn({7, K}, 99), 2.0));  // wider than x
      const Tensor range_src = p == Precision::Int8Dynamic ? vx : scaled(randn({7, K}, 99), 2.0);
      const std::vector<double> ref = precision_ref(p, vx, w, vb, range_src, relu, false);
      for (const Modes& m : kModes) {
        ModeGuard g(m);
        for (Layout l : {Layout::Contiguous, Layout::Transposed, Layout::Sliced}) {
          const Tensor y = lin.forward(test::with_layout(vx, l), relu);
          ASSERT_EQ(y.sizes(), (Shape{M, N}));
          const bool int8 = p == Precision::Int8Dynamic || p == Precision::Int8Static;
          ASSERT_TRUE(test::all_close(y, ref, 2e-6 * (K + 1) * (int8 ? 10 : 1), 1e-5))
              << precision_name(p) << " trial " << trial << " " << test::layout_name(l) << ", "
              << simd_level_name(m.simd) << ", " << m.threads << " threads";
        }
      }
    }
  }
}

// Note [Fused relu and NaN]: a NaN bias element gives a NaN output column through the
// relu in every precision, at every SIMD level (the float32 GEMM's epilogues, the
// bfloat16 GEMM's, the int8 dequantizing epilogue); y starts as the layer computes it,
// so a zeroed NaN shows. Linear.EveryPrecisionMatchesItsReference covers the rest.
void expect_relu_keeps_nan(const Device& dev) {
  for (int64_t K : {int64_t{50}, int64_t{1024}}) {
    const int64_t M = 9, N = 21;
    const Tensor vx = randn({M, K}, 71), w = randn({N, K}, 72);
    Tensor b = randn({N}, 73);
    b.data<float>()[4] = NAN;
    const std::vector<double> vb = b.to_vector();
    const Tensor calib = scaled(randn({7, K}, 99), 2.0);
    for (Precision p : {Precision::F32, Precision::F16, Precision::BF16, Precision::Int8Dynamic, Precision::Int8Static}) {
      Linear lin(w.to(dev), b.to(dev), p);
      if (p == Precision::Int8Static) lin.observe(calib.to(dev));
      const std::vector<double> ref = precision_ref(p, vx, w, vb, p == Precision::Int8Dynamic ? vx : calib, true,
                                                    /*round_x=*/dev.is_cuda());
      ASSERT_TRUE(std::isnan(ref[4]));
      ASSERT_TRUE(std::any_of(ref.begin(), ref.end(), [](double v) { return v == 0.0; }));
      const bool int8 = p == Precision::Int8Dynamic || p == Precision::Int8Static;
      for (const Modes& m : dev.is_cuda() ? std::vector<Modes>{kModes.front()} : kModes) {
        ModeGuard g(m);
        const Tensor y = lin.forward(vx.to(dev), true);
        ASSERT_TRUE(test::all_close(y, ref, 2e-6 * (K + 1) * (int8 ? 10 : 1), 1e-5))
            << precision_name(p) << " K " << K << " on " << dev << ", " << simd_level_name(m.simd) << ", "
            << m.threads << " threads";
      }
    }
  }
}

TEST(Linear, FusedReluPropagatesNaN) { expect_relu_keeps_nan(Device::cpu()); }

// The run-time activation quantizer (vectorised for unit-stride rows) against
// quantize_activations (scalar quant1) on the values where they could part: ties at
// exactly half a quantum (scale 1: round half to even), values far outside the
// calibrated range, +-inf and NaN (quantized to 0), K with a tail past the 8-wide steps
// and M with a partial 4-row panel.
TEST(Linear, Int8ActivationQuantizerEdgeValues) {
  const int64_t M = 9, K = 37, N = 20;
  const Tensor w = randn({N, K}, 5);
  Linear lin(w, Tensor(), Precision::Int8Static);
  std::vector<float> calib(static_cast<size_t>(2 * K), 0.0f);
  calib[K] = 127.0f;
  lin.observe(from_vector<float>(calib, {2, K}));  // range [0, 127]: scale 1, zero point 0
  const ActQParams q = act_qparams(0.0f, 127.0f);
  ASSERT_EQ(q.scale, 1.0f);
  std::mt19937_64 rng(21);
  const float specials[] = {0.5f, 1.5f, 2.5f, 126.5f, 127.5f, -0.5f, 1e30f, -1e30f, INFINITY, -INFINITY, NAN, 300.0f, -300.0f};
  std::vector<float> xv(static_cast<size_t>(M * K));
  for (size_t i = 0; i < xv.size(); ++i)
    xv[i] = i % 3 == 0 ? specials[rng() % 13] : static_cast<float>(static_cast<int>(rng() % 300) - 100) / 2.0f;
  const Tensor x = from_vector<float>(xv, {M, K});
  const std::vector<double> xq = quantize_activations(x, q).to_vector();
  const QuantizedWeight qw = quantize_weight(w);
  const std::vector<double> wq = unpack_weight(qw).to_vector(), sw = qw.scale.to_vector();
  std::vector<double> ref(static_cast<size_t>(M * N));
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double acc = 0;
      for (int64_t k = 0; k < K; ++k) acc += xq[m * K + k] * wq[n * K + k];
      ref[m * N + n] = sw[n] * acc;
    }
  for (const Modes& m : kModes) {
    ModeGuard g(m);
    for (Layout l : {Layout::Contiguous, Layout::Transposed}) {
      const Tensor y = lin.forward(test::with_layout(x, l));
      ASSERT_TRUE(test::all_close(y, ref, 1e-5 * K, 1e-6)) << test::layout_name(l) << " threads " << m.threads;
    }
  }
}

TEST(Linear, WeightBytesAndErrorOrdering) {
  const int64_t K = 256, N = 64;
  const Tensor w = randn({N, K}, 1), b = randn({N}, 2), x = randn({32, K}, 3);
  Linear f32(w, b, Precision::F32), f16(w, b, Precision::F16), bf16(w, b, Precision::BF16),
      dyn(w, b, Precision::Int8Dynamic);
  EXPECT_EQ(f32.weight_bytes(), static_cast<size_t>(N * K * 4));
  EXPECT_EQ(f16.weight_bytes(), static_cast<size_t>(N * K * 2));
  EXPECT_EQ(bf16.weight_bytes(), static_cast<size_t>(N * K * 2));
  EXPECT_EQ(dyn.weight_bytes(), static_cast<size_t>(N * K + 8 * N));
  const Tensor ref = f32.forward(x);
  const double e16 = relative_error(f16.forward(x), ref), ebf = relative_error(bf16.forward(x), ref),
               e8 = relative_error(dyn.forward(x), ref);
  EXPECT_GT(e16, 0.0);
  EXPECT_LT(e16, 2e-3);
  EXPECT_GT(ebf, e16);  // 8 significant bits, and x rounded too
  EXPECT_LT(ebf, 1e-2);
  EXPECT_GT(e8, e16);
  EXPECT_LT(e8, 0.05);
  EXPECT_EQ(relative_error(ref, ref), 0.0);
}

// Three layers on `dev`: f32 against a float64 reference, the other precisions within
// their error of the f32 model, int8 static refusing to run before calibration.
void mlp_every_precision(Device dev) {
  std::vector<Tensor> ws = {scaled(randn({48, 40}, 1), 0.2), scaled(randn({32, 48}, 2), 0.2), scaled(randn({10, 32}, 3), 0.2)};
  std::vector<Tensor> bs = {randn({48}, 4), randn({32}, 5), randn({10}, 6)};
  const Tensor x = randn({20, 40}, 7);
  std::vector<double> h = x.to_vector();  // float64 reference of the fp32 MLP
  int64_t K = 40;
  for (int i = 0; i < 3; ++i) {
    h = ref_linear(h, ws[i].to_vector(), bs[i].to_vector(), 20, K, ws[i].size(0), i < 2);
    K = ws[i].size(0);
  }
  for (Tensor& t : ws) t = t.to(dev);
  for (Tensor& t : bs) t = t.to(dev);
  const Tensor xd = x.to(dev);
  Mlp f32(ws, bs, Precision::F32);
  EXPECT_TRUE(test::all_close(f32.forward(xd), h, 1e-4, 1e-5));
  const Tensor ref = f32.forward(xd);
  for (Precision p : {Precision::F16, Precision::BF16, Precision::Int8Dynamic, Precision::Int8Static}) {
    Mlp m(ws, bs, p);
    if (p == Precision::Int8Static) {
      EXPECT_THROW(m.forward(xd), Error);  // not calibrated yet
      m.calibrate(randn({64, 40}, 11).to(dev));
    }
    const double e = relative_error(m.forward(xd), ref);
    EXPECT_LT(e, p == Precision::F16 ? 2e-3 : p == Precision::BF16 ? 1e-2 : 0.08) << precision_name(p);
    EXPECT_GT(e, 0.0) << precision_name(p);
  }
  EXPECT_EQ(Mlp(ws, bs, Precision::F16).weight_bytes() * 2, f32.weight_bytes());
  EXPECT_EQ(Mlp(ws, bs, Precision::BF16).weight_bytes() * 2, f32.weight_bytes());
}

TEST(Mlp, ThreeLayersEveryPrecision) { mlp_every_precision(Device::cpu()); }

// A freed NaN tensor [M, N] of dt on dev: the caching allocator hands its block to
// forward()'s fresh output, so an element it leaves unwritten reads NaN.
void poison_cache(Device dev, int64_t M, int64_t N, DType dt = DType::Float32) {
  Tensor p = full({M, N}, NAN, dt, dev);
  (void)p;
}

// Note [16-bit activations]: an F16 or BF16 layer given x in its own dtype returns y in
// it. The float64 reference takes x, W and the bias as that dtype stores them; y lies
// within one rounding of it (half an ulp: 2^-11 float16, 2^-8 bfloat16) plus the float32
// sum's error. x contiguous, transposed and sliced, the output's block poisoned first,
// every kernel mode on the CPU; on CUDA the benchmark's K takes cuBLASLt's epilogue.
void sixteen_bit_activations(Device dev) {
  std::mt19937_64 rng(41);
  const std::vector<Modes> modes = dev.is_cuda() ? std::vector<Modes>{kModes.front()} : kModes;
  for (int trial = 0; trial < 8; ++trial) {
    const int64_t M = trial == 0 ? 0 : 1 + rng() % 30, K = trial == 1 ? 1024 : 1 + rng() % 200, N = 1 + rng() % 50;
    const bool relu = trial % 2, with_bias = trial % 3 != 0;
    const Tensor vx = randn({M, K}, rng()), w = randn({N, K}, rng());
    const Tensor b = with_bias ? randn({N}, rng()) : Tensor();
    for (Precision p : {Precision::F16, Precision::BF16}) {
      const DType dt = p == Precision::F16 ? DType::Float16 : DType::BFloat16;
      const double half_ulp = std::ldexp(1.0, p == Precision::F16 ? -11 : -8);
      const std::vector<double> ref =
          ref_linear(test::stored(vx.to_vector(), vx.sizes(), dt), test::stored(w.to_vector(), w.sizes(), dt),
                     with_bias ? test::stored(b.to_vector(), b.sizes(), dt) : std::vector<double>(), M, K, N, relu);
      const Linear lin(test::with_layout(w.to(dev), Layout::Transposed), with_bias ? b.to(dev) : Tensor(), p);
      for (const Modes& m : modes) {
        ModeGuard g(m);
        for (Layout l : {Layout::Contiguous, Layout::Transposed, Layout::Sliced}) {
          const Tensor x = test::with_layout(vx.to(dt).to(dev), l);
          poison_cache(dev, M, N, dt);
#ifdef SB_WITH_CUDA
          if (dev.is_cuda()) cuda::reset_linear_path_counts();
#endif
          const Tensor y = lin.forward(x, relu);
          ASSERT_EQ(y.dtype(), dt);
          ASSERT_EQ(y.device(), dev);
          ASSERT_EQ(y.sizes(), (Shape{M, N}));
          ASSERT_TRUE(test::all_close(y, ref, 2e-6 * (K + 1), half_ulp))
              << precision_name(p) << " trial " << trial << " M " << M << " K " << K << " N " << N << " "
              << test::layout_name(l) << " on " << dev << ", " << simd_level_name(m.simd) << ", " << m.threads
              << " threads";
#ifdef SB_WITH_CUDA
          if (dev.is_cuda() && trial == 1) {  // Note [Linear epilogue in cuBLASLt]
            EXPECT_EQ(cuda::linear_path_counts().lt_epilogue, 1) << precision_name(p) << " " << test::layout_name(l);
          }
#endif
        }
      }
    }
  }
}

// An Mlp given a 16-bit x keeps that dtype through its hidden layers and output, within
// the error of rounding x, the weights, the biases and every activation of the f32
// model to that dtype.
void mlp_sixteen_bit(Device dev) {
  std::vector<Tensor> ws = {scaled(randn({48, 40}, 1), 0.2), scaled(randn({32, 48}, 2), 0.2), scaled(randn({10, 32}, 3), 0.2)};
  std::vector<Tensor> bs = {randn({48}, 4), randn({32}, 5), randn({10}, 6)};
  for (Tensor& t : ws) t = t.to(dev);
  for (Tensor& t : bs) t = t.to(dev);
  const Tensor x = randn({20, 40}, 7).to(dev);
  const Tensor ref = Mlp(ws, bs, Precision::F32).forward(x);
  for (Precision p : {Precision::F16, Precision::BF16}) {
    const DType dt = p == Precision::F16 ? DType::Float16 : DType::BFloat16;
    const Tensor y = Mlp(ws, bs, p).forward(x.to(dt));
    ASSERT_EQ(y.dtype(), dt);
    const double e = relative_error(y, ref);
    EXPECT_LT(e, p == Precision::F16 ? 1.5e-3 : 1e-2) << precision_name(p) << " on " << dev;
    EXPECT_GT(e, 0.0) << precision_name(p) << " on " << dev;
  }
}

TEST(Linear, SixteenBitActivationsGiveSixteenBitOutputs) { sixteen_bit_activations(Device::cpu()); }
TEST(Mlp, SixteenBitActivations) { mlp_sixteen_bit(Device::cpu()); }

TEST(Linear, BadInputs) {
  const Tensor w = randn({4, 6}, 1);
  Linear lin(w, Tensor(), Precision::Int8Dynamic);
  expect_msg([&] { lin.forward(randn({3, 5}, 1)); }, "input has 5 features");
  expect_msg([&] { lin.forward(randn({3, 6}, 1, DType::Float64)); }, "float32");
  expect_msg([&] { lin.forward(randn({6}, 1)); }, "2-D");
  expect_msg([&] { Linear(w, randn({3}, 1), Precision::F32); }, "bias must be 1-D of size 4");
  expect_msg([&] { Linear(randn({4, 6, 1}, 1), Tensor(), Precision::F32); }, "2-D");
  expect_msg([&] { Linear(w, Tensor(), Precision::Int8Static).forward(randn({2, 6}, 1)); }, "before calibration");
  expect_msg([&] { Mlp({w, w, w}, {Tensor(), Tensor(), Tensor()}, Precision::F32); }, "do not follow");
  // Note [16-bit activations]: a layer takes float32 or its own 16-bit dtype
  const Tensor x = randn({3, 6}, 1);
  expect_msg([&] { Linear(w, Tensor(), Precision::F16).forward(x.to(DType::BFloat16)); },
             "Linear: a f16 layer takes a float32 or float16 input, got bfloat16");
  expect_msg([&] { Linear(w, Tensor(), Precision::BF16).forward(x.to(DType::Float16)); },
             "Linear: a bf16 layer takes a float32 or bfloat16 input, got float16");
  expect_msg([&] { Linear(w, Tensor(), Precision::F32).forward(x.to(DType::BFloat16)); },
             "Linear: a f32 layer takes a float32 input, got bfloat16");
  expect_msg([&] { lin.forward(x.to(DType::Float16)); }, "Linear: a int8_dynamic layer takes a float32 input, got float16");
}

#ifdef SB_WITH_CUDA
// ---------------------------------------------------------------- the CUDA Linear (lib/quant/quant.cu)

// Each precision on cuda0 against precision_ref (F16 rounding x too), x contiguous,
// transposed and sliced on the device. The int8 reference quantizes x with the host's
// act_qparams and quant1: the device's range, parameters and rounding must equal them.
TEST(CudaLinear, EveryPrecisionMatchesItsReference) {
  const Device dev = Device::cuda(0);
  SB_SKIP_WITHOUT_DEVICE(dev);
  std::mt19937_64 rng(31);
  for (int trial = 0; trial < 10; ++trial) {
    const int64_t M = trial == 0 ? 0 : 1 + rng() % 40, K = trial == 1 ? 1024 : 1 + rng() % 200, N = 1 + rng() % 50;
    const bool relu = trial % 2, with_bias = trial % 3 != 0;
    const Tensor vx = randn({M, K}, rng()), w = randn({N, K}, rng());
    const Tensor b = with_bias ? randn({N}, rng()) : Tensor();
    const std::vector<double> vb = with_bias ? b.to_vector() : std::vector<double>();
    const Tensor calib = scaled(randn({7, K}, 99), 2.0);  // wider than x
    for (Precision p : {Precision::F32, Precision::F16, Precision::BF16, Precision::Int8Dynamic, Precision::Int8Static}) {
      Linear lin(test::with_layout(w.to(dev), Layout::Transposed), with_bias ? b.to(dev) : Tensor(), p);
      ASSERT_EQ(lin.device(), dev);
      if (p == Precision::Int8Static) lin.observe(calib.to(dev));
      const std::vector<double> ref =
          precision_ref(p, vx, w, vb, p == Precision::Int8Dynamic ? vx : calib, relu, /*round_x=*/true);
      for (Layout l : {Layout::Contiguous, Layout::Transposed, Layout::Sliced}) {
        const Tensor x = test::with_layout(vx.to(dev), l);
        poison_cache(dev, M, N);
        cuda::reset_linear_path_counts();
        const Tensor y = lin.forward(x, relu);
        if (trial == 1 && (p == Precision::F32 || p == Precision::F16 || p == Precision::BF16)) {  // the benchmark's K: Note [Linear epilogue in cuBLASLt]
          EXPECT_EQ(cuda::linear_path_counts().lt_epilogue, 1) << precision_name(p) << " " << test::layout_name(l);
        }
        ASSERT_EQ(y.device(), dev);
        ASSERT_EQ(y.sizes(), (Shape{M, N}));
        const bool int8 = p == Precision::Int8Dynamic || p == Precision::Int8Static;
        ASSERT_TRUE(test::all_close(y, ref, 2e-6 * (K + 1) * (int8 ? 10 : 1), 1e-5))
            << precision_name(p) << " trial " << trial << " M " << M << " K " << K << " N " << N << " "
            << test::layout_name(l);
      }
    }
  }
}

TEST(CudaLinear, FusedReluPropagatesNaN) {
  SB_SKIP_WITHOUT_DEVICE(Device::cuda(0));
  expect_relu_keeps_nan(Device::cuda(0));
}

// The device's int8 path equals the CPU's: the same quantized activations and integer
// products, so one layer's outputs agree to float rounding, dynamic and static; an input
// with NaN, +-inf and values far outside the calibrated range quantizes as the CPU's.
TEST(CudaLinear, Int8MatchesTheCpuLayer) {
  const Device dev = Device::cuda(0);
  SB_SKIP_WITHOUT_DEVICE(dev);
  const int64_t M = 33, K = 301, N = 45;
  const Tensor w = randn({N, K}, 3), b = randn({N}, 4);
  std::vector<double> xv = randn({M, K}, 5).to_vector();
  for (size_t i = 0; i < xv.size(); i += 97) xv[i] = (i / 97) % 3 == 0 ? NAN : (i / 97) % 3 == 1 ? 1e30 : -INFINITY;
  const Tensor x_special = test::host_tensor(xv, {M, K}, DType::Float32), x_plain = randn({M, K}, 6);
  for (Precision p : {Precision::Int8Dynamic, Precision::Int8Static}) {
    Linear cpu(w, b, p), gpu(w.to(dev), b.to(dev), p);
    if (p == Precision::Int8Static) {
      cpu.observe(randn({8, K}, 7));
      gpu.observe(randn({8, K}, 7).to(dev));
    }
    for (int special = 0; special < 2; ++special) {
      if (p == Precision::Int8Dynamic && special) continue;  // an infinite range: every scale is inf
      const Tensor& x = special ? x_special : x_plain;
      const Tensor yc = cpu.forward(x, true);
      poison_cache(dev, M, N);
      const Tensor yg = gpu.forward(x.to(dev), true);
      EXPECT_TRUE(test::all_close(yg, yc.to_vector(), 1e-5, 1e-5)) << precision_name(p);
    }
  }
  EXPECT_EQ(Linear(w.to(dev), b.to(dev), Precision::Int8Dynamic).weight_bytes(),
            static_cast<size_t>(48 * 304 + 8 * N));  // out' x in' int8, scale and row sum
}

TEST(CudaLinear, MlpEveryPrecision) {
  SB_SKIP_WITHOUT_DEVICE(Device::cuda(0));
  mlp_every_precision(Device::cuda(0));
}

TEST(CudaLinear, SixteenBitActivationsGiveSixteenBitOutputs) {
  SB_SKIP_WITHOUT_DEVICE(Device::cuda(0));
  sixteen_bit_activations(Device::cuda(0));
}

TEST(CudaLinear, MlpSixteenBitActivations) {
  SB_SKIP_WITHOUT_DEVICE(Device::cuda(0));
  mlp_sixteen_bit(Device::cuda(0));
}

TEST(CudaLinear, BadInputsNameTheDevices) {
  const Device dev = Device::cuda(0);
  SB_SKIP_WITHOUT_DEVICE(dev);
  const Tensor w = randn({4, 6}, 1);
  for (Precision p : {Precision::F32, Precision::Int8Dynamic}) {
    Linear lin(w.to(dev), Tensor(), p);
    expect_msg([&] { lin.forward(randn({3, 6}, 1)); }, "expected the input on cuda:0");
    expect_msg([&] { lin.forward(randn({3, 5}, 1).to(dev)); }, "input has 5 features");
  }
  expect_msg([&] { Linear(w.to(dev), randn({4}, 1), Precision::F32); }, "expected a float32 bias on cuda:0");
  expect_msg([&] { Linear(w, randn({4}, 1).to(dev), Precision::F16); }, "got float32 on cuda:0");
}
#endif  // SB_WITH_CUDA

}  // namespace
}  // namespace sb
