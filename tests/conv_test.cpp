// conv_test.cpp — conv2d / conv2d_out and pooling (lib/ops/conv.*) against direct
// float64 loops, in NCHW and channels-last (and other) layouts, with stride, padding,
// dilation, groups, depthwise, bias and relu; poisoned outputs; 1 and 2 threads; AVX2
// and scalar; plus the allocation accounting and bad inputs.
#include "ops/conv.h"

#include <cmath>
#include <functional>

#include "core/cpu_features.h"
#include "core/parallel.h"
#include "ops/matmul.h"
#include "test_util.h"

namespace sb {
namespace {

using test::Layout;
using test::expect_msg;

std::vector<double> ref_conv(const Tensor& x, const Tensor& w, const Tensor& bias, const Conv2dParams& p, bool relu) {
  const std::vector<double> vx = x.to_vector(), vw = w.to_vector();
  const std::vector<double> vb = bias.defined() ? bias.to_vector() : std::vector<double>();
  const int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
  const int64_t O = w.size(0), Cg = w.size(1), KH = w.size(2), KW = w.size(3), Og = O / p.groups;
  const int64_t OH = (H + 2 * p.padding - p.dilation * (KH - 1) - 1) / p.stride + 1;
  const int64_t OW = (W + 2 * p.padding - p.dilation * (KW - 1) - 1) / p.stride + 1;
  std::vector<double> out(static_cast<size_t>(N * O * OH * OW));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          double s = vb.empty() ? 0.0 : vb[o];
          for (int64_t ci = 0; ci < Cg; ++ci)
            for (int64_t kh = 0; kh < KH; ++kh)
              for (int64_t kw = 0; kw < KW; ++kw) {
                const int64_t ih = oh * p.stride - p.padding + kh * p.dilation;
                const int64_t iw = ow * p.stride - p.padding + kw * p.dilation;
                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                const int64_t c = (o / Og) * Cg + ci;
                s += vx[((n * C + c) * H + ih) * W + iw] * vw[((o * Cg + ci) * KH + kh) * KW + kw];
              }
          out[((n * O + o) * OH + oh) * OW + ow] = relu ? std::max(s, 0.0) : s;
        }
  (void)C;
  return out;
}

std::vector<double> ref_pool(const Tensor& x, int64_t k, int64_t s, int64_t pad, bool is_max) {
  const std::vector<double> vx = x.to_vector();
  const int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
  const int64_t OH = (H + 2 * pad - k) / s + 1, OW = (W + 2 * pad - k) / s + 1;
  std::vector<double> out;
  for (int64_t nc = 0; nc < N * C; ++nc)
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t ow = 0; ow < OW; ++ow) {
        double acc = is_max ? -INFINITY : 0.0;
        for (int64_t i = 0; i < k; ++i)
          for (int64_t j = 0; j < k; ++j) {
            const int64_t ih = oh * s - pad + i, iw = ow * s - pad + j;
            if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
            const double v = vx[(nc * H + ih) * W + iw];
            acc = is_max ? std::max(acc, v) : acc + v;
          }
        out.push_back(is_max ? acc : acc / static_cast<double>(k * k));
      }
  return out;
}

using test::Modes;
using test::ModeGuard;
const std::vector<Modes> kModes =
    test::available_modes({{1, SimdLevel::AVX512}, {2, SimdLevel::AVX512}, {1, SimdLevel::AVX2}, {2, SimdLevel::AVX2}, {2, SimdLevel::Scalar}});

struct Case {
  int64_t N, C, H, W, O, KH, KW;
  Conv2dParams p;
  bool bias, relu;
};

void check_case(const Case& cs, uint64_t seed) {
  const Tensor vx = randn({cs.N, cs.C, cs.H, cs.W}, seed);
  const Tensor vw = randn({cs.O, cs.C / cs.p.groups, cs.KH, cs.KW}, seed + 1);
  const Tensor bias = cs.bias ? test::with_layout(randn({cs.O}, seed + 2), Layout::Sliced) : Tensor();
  const std::vector<double> ref = ref_conv(vx, vw, bias, cs.p, cs.relu);
  const int64_t K = cs.C / cs.p.groups * cs.KH * cs.KW;
  const double atol = 2e-6 * (K + 1);
  for (const Modes& m : kModes) {
    ModeGuard g(m);
    for (Layout lx : {Layout::Contiguous, Layout::ChannelsLast, Layout::Sliced, Layout::Transposed}) {
      for (Layout lw : {Layout::Contiguous, Layout::ChannelsLast, Layout::Sliced}) {
        const Tensor x = test::with_layout(vx, lx), w = test::with_layout(vw, lw);
        Tensor out = conv2d(x, w, bias, cs.p, cs.relu);
        const std::string what = std::string("x ") + test::layout_name(lx) + " w " + test::layout_name(lw) +
                                 " threads " + std::to_string(m.threads) + " simd " +
                                 std::to_string(static_cast<int>(m.simd));
        ASSERT_EQ(out.suggest_memory_format(), x.suggest_memory_format()) << what;
        ASSERT_TRUE(test::all_close(out, ref, atol, 1e-5)) << what;
        for (Layout lo : {Layout::ChannelsLast, Layout::Sliced, Layout::Contiguous}) {
          Tensor o2 = test::with_layout(zeros(out.sizes()), lo);
          test::poison(o2);
          conv2d_out(o2, x, w, bias, cs.p, cs.relu);
          ASSERT_TRUE(test::all_close(o2, ref, atol, 1e-5)) << what << " out= " << test::layout_name(lo);
        }
      }
    }
  }
}

TEST(Conv2d, FixedCasesBothLayouts) {
  const Case cases[] = {
      {2, 8, 9, 11, 16, 3, 3, {1, 1, 1, 1}, true, false},    // 3x3 same padding
      {1, 5, 7, 6, 7, 3, 2, {2, 0, 1, 1}, false, true},      // stride 2, odd sizes, relu
      {2, 6, 10, 9, 12, 3, 3, {1, 2, 2, 1}, true, true},     // dilation 2
      {2, 8, 7, 7, 8, 3, 3, {1, 1, 1, 2}, true, false},      // groups 2
      {2, 6, 8, 7, 6, 3, 3, {1, 1, 1, 6}, true, true},       // depthwise
      {1, 4, 6, 6, 8, 3, 3, {2, 1, 1, 4}, false, false},     // depthwise, multiplier 2
      {3, 16, 5, 4, 20, 1, 1, {1, 0, 1, 1}, true, false},    // 1x1: a plain GEMM
      {1, 3, 20, 37, 17, 5, 5, {1, 2, 1, 1}, false, true},   // OW > 16: row-crossing panels
      {1, 3, 4, 4, 5, 4, 4, {1, 0, 1, 1}, true, false},      // kernel == input: 1x1 output
      {0, 3, 4, 4, 5, 3, 3, {1, 1, 1, 1}, true, false},      // empty batch
      {1, 2, 1, 30, 9, 1, 5, {3, 0, 1, 1}, false, false},    // H = 1, stride 3
      // wide enough for several output-channel blocks and pixel tiles of the direct
      // AVX-512 kernels (Note [Direct AVX-512 conv]): channel and pixel tails
      {2, 24, 9, 23, 70, 3, 3, {1, 1, 1, 1}, true, true},    // 70 = 64 + 6 (NHWC), 4x16 + 6 (NCHW)
      {1, 10, 8, 19, 40, 3, 3, {2, 1, 1, 1}, true, false},   // stride 2, 40 channels (3 zmm, last partial)
      {1, 12, 6, 18, 40, 3, 3, {1, 1, 2, 2}, false, true},   // groups 2 of 20 channels, dilation 2
  };
  uint64_t seed = 100;
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::Message() << "case N" << c.N << " C" << c.C << " H" << c.H << " W" << c.W << " O" << c.O
                                      << " k" << c.KH << "x" << c.KW << " s" << c.p.stride << " p" << c.p.padding
                                      << " d" << c.p.dilation << " g" << c.p.groups);
    check_case(c, seed += 10);
  }
}

TEST(Conv2d, RandomCases) {
  std::mt19937_64 rng(21);
  for (int t = 0; t < 12; ++t) {
    Case c{};
    c.p.groups = 1 + rng() % 3;
    c.N = rng() % 3;
    c.C = c.p.groups * (1 + rng() % 5);
    c.O = c.p.groups * (1 + rng() % 9);
    c.KH = 1 + rng() % 3; c.KW = 1 + rng() % 3;
    c.p.stride = 1 + rng() % 2; c.p.padding = rng() % 2; c.p.dilation = 1 + rng() % 2;
    c.H = c.p.dilation * (c.KH - 1) + 1 + rng() % 8;
    c.W = c.p.dilation * (c.KW - 1) + 1 + rng() % 20;
    c.bias = rng() % 2; c.relu = rng() % 2;
    SCOPED_TRACE(::testing::Message() << "random case " << t);
    check_case(c, rng());
  }
}

TEST(Conv2d, AllocatesOnlyResultPlusWorkspace) {
  Allocator* al = cpu_allocator();
  for (const Modes& m : kModes) {
    ModeGuard guard(m);
    for (bool cl : {false, true}) {
      Tensor x = randn({4, 16, 12, 12}, 1), w = randn({32, 16, 3, 3}, 2), b = randn({32}, 3);
      if (cl) x = x.contiguous(MemoryFormat::ChannelsLast);
      Tensor out = conv2d(x, w, b, {1, 1, 1, 1});
      al->reset_peak_stats();
      const int64_t base = al->stats().allocated_bytes;
      conv2d_out(out, x, w, b, {1, 1, 1, 1});
      const int64_t peak_out = al->stats().peak_allocated_bytes - base;
      const int64_t K = 16 * 9;
      int64_t ws = 0;
      if (m.simd == SimdLevel::AVX512) {
        // direct kernel: weights packed for 64 channels and a padded bias; NCHW also
        // stages one image channels-last (Note [NCHW through the channels-last kernel];
        // its output-row buffer is per thread, outside the allocator)
        ws = (64 * K + 64 + (cl ? 0 : 16 * 12 * 12)) * 4;
      } else {
        // a GEMM's packing buffers per thread plus the weight offset table
        const int64_t M = cl ? 4 * 144 : 32, N = cl ? 32 : 144;
        ws = static_cast<int64_t>(gemm_workspace_bytes(M, N, K) * (cl ? 1 : get_num_threads())) + K * 8;
      }
      EXPECT_GT(peak_out, 0);
      EXPECT_LE(peak_out, ws * 5 / 4 + 256) << (cl ? "nhwc" : "nchw") << " simd " << static_cast<int>(m.simd);
      EXPECT_EQ(al->stats().allocated_bytes, base);
    }
  }
}

TEST(Pool2d, MaxAndAvgBothLayouts) {
  std::mt19937_64 rng(4);
  for (int t = 0; t < 20; ++t) {
    const int64_t k = 1 + rng() % 3, s = rng() % 3, pad = rng() % (k / 2 + 1);
    const int64_t N = rng() % 3, C = 1 + rng() % 5, H = k + rng() % 7, W = k + rng() % 9;
    const Tensor vx = randn({N, C, H, W}, rng());
    for (bool is_max : {true, false}) {
      const std::vector<double> ref = ref_pool(vx, k, s == 0 ? k : s, pad, is_max);
      for (const Modes& m : kModes) {
        ModeGuard g(m);
        for (Layout l : {Layout::Contiguous, Layout::ChannelsLast, Layout::Sliced}) {
          const Tensor x = test::with_layout(vx, l);
          const Tensor out = is_max ? max_pool2d(x, {k, s, pad}) : avg_pool2d(x, {k, s, pad});
          ASSERT_EQ(out.suggest_memory_format(), x.suggest_memory_format());
          ASSERT_TRUE(test::all_close(out, ref, 1e-6, 1e-6))
              << (is_max ? "max" : "avg") << " k" << k << " s" << s << " p" << pad << " " << test::layout_name(l);
        }
      }
    }
  }
}

TEST(Conv2d, BadInputs) {
  const Tensor x = randn({1, 4, 5, 5}, 1), w = randn({6, 4, 3, 3}, 2);
  expect_msg([&] { conv2d(randn({4, 5, 5}, 1), w); }, "4-D input");
  expect_msg([&] { conv2d(x, randn({6, 4, 3}, 1)); }, "4-D weight");
  expect_msg([&] { conv2d(x, randn({6, 1, 3, 3}, 1), Tensor(), {1, 0, 1, 3}); }, "not divisible by groups");
  expect_msg([&] { conv2d(x, randn({6, 4, 7, 7}, 1)); }, "larger than the padded input");
  expect_msg([&] { conv2d(x, randn({6, 4, 3, 3}, 1), Tensor(), {1, 0, 3, 1}); }, "larger than the padded input");
  expect_msg([&] { conv2d(x.to(DType::Float64), w.to(DType::Float64)); }, "float32");
  expect_msg([&] { conv2d(x, w.to(DType::Float64)); }, "weight dtype");
  expect_msg([&] { conv2d(x, randn({6, 3, 3, 3}, 1)); }, "input channels per group");
  expect_msg([&] { conv2d(x, w, randn({5}, 1)); }, "bias must be 1-D of size 6");
  expect_msg([&] { conv2d(x, w, Tensor(), {0, 0, 1, 1}); }, "stride >= 1");
  Tensor out = empty({1, 6, 4, 4});
  test::poison(out);
  expect_msg([&] { conv2d_out(out, x, w); }, "expected [1, 6, 3, 3]");
  expect_msg([&] { max_pool2d(randn({3, 4}, 1), {2, 2, 0}); }, "4-D input");
  expect_msg([&] { avg_pool2d(x, {7, 1, 0}); }, "larger than the padded input");
  expect_msg([&] { max_pool2d(x, {2, 2, 2}); }, "padding");
  expect_msg([&] { avg_pool2d(x.to(DType::Float64), {2, 2, 0}); }, "float32");
}


TEST(Conv2d, DeviceMismatch) {
  const Tensor wg = test::fake_cuda({6, 4, 3, 3});
  expect_msg([&] { conv2d(randn({1, 4, 5, 5}, 1), wg); }, "device mismatch");
}

}  // namespace
}  // namespace sb
