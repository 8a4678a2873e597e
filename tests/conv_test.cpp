// conv_test.cpp — conv2d / conv2d_out and pooling (lib/conv/) against direct
// float64 loops, in NCHW and channels-last (and other) layouts, with stride, padding,
// dilation, groups, depthwise, bias and relu; poisoned outputs; 1 and 2 threads; AVX2
// and scalar; plus the allocation accounting and bad inputs.
#include "stridebench/conv.h"

#include <cmath>
#include <functional>

#include "stridebench/cpu_features.h"
#include "stridebench/parallel.h"
#include "stridebench/matmul.h"
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

// v: the input's values row-major over sz (NCHW). max skips NaN, as the kernels
// document (fmax); a window of NaN alone gives -inf. avg counts the padding.
std::vector<double> ref_pool(const std::vector<double>& v, const Shape& sz, int64_t k, int64_t s, int64_t pad,
                             bool is_max) {
  const int64_t N = sz[0], C = sz[1], H = sz[2], W = sz[3];
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
            const double e = v[static_cast<size_t>((nc * H + ih) * W + iw)];
            if (is_max) {
              if (e > acc) acc = e;
            } else {
              acc += e;
            }
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
        // PyTorch's rule: channels-last out when the input or the weight is channels-last
        const bool cl = x.suggest_memory_format() == MemoryFormat::ChannelsLast ||
                        w.suggest_memory_format() == MemoryFormat::ChannelsLast;
        ASSERT_TRUE(out.is_contiguous(cl ? MemoryFormat::ChannelsLast : MemoryFormat::Contiguous)) << what;
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
      // depthwise on channels-last x (Note [Channels-last depthwise]): the 64-channel
      // pass, passes of fewer vectors, the one-channel tail, stride, dilation, 5x5
      {2, 75, 9, 10, 75, 3, 3, {1, 1, 1, 75}, true, true},   // 75 = 64 + 8 + 3
      {1, 20, 11, 9, 20, 3, 3, {2, 1, 2, 20}, false, false}, // 20 = 2 x 8 + 4, stride 2, dilation 2
      {1, 16, 6, 7, 16, 5, 5, {1, 2, 1, 16}, true, false},   // 5x5, padding 2
  };
  uint64_t seed = 100;
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::Message() << "case N" << c.N << " C" << c.C << " H" << c.H << " W" << c.W << " O" << c.O
                                      << " k" << c.KH << "x" << c.KW << " s" << c.p.stride << " p" << c.p.padding
                                      << " d" << c.p.dilation << " g" << c.p.groups);
    check_case(c, seed += 10);
  }
}

// Every channel count from 1 to 72 of a channels-last depthwise 3x3 (Note [Channels-last
// depthwise]): each width of its passes (1-8 vectors per pixel, 1-4 per pixel pair) and
// each channel tail, at the row edges (single pixels) and inside (pairs); stride 1 and 2.
TEST(Conv2d, DepthwiseChannelsLastEveryWidth) {
  for (int64_t C = 1; C <= 72; ++C) {
    const Conv2dParams p{1 + C % 2, 1, 1, C};
    const Tensor vx = randn({1, C, 5, 9}, 300 + C), vw = randn({C, 1, 3, 3}, 400 + C);
    const Tensor bias = randn({C}, 500 + C);
    const std::vector<double> ref = ref_conv(vx, vw, bias, p, C % 3 == 0);
    for (const Modes& m : kModes) {
      ModeGuard g(m);
      const Tensor x = test::with_layout(vx, Layout::ChannelsLast);
      Tensor out = empty(conv2d_output_sizes(x, vw, bias, p), DType::Float32, Device::cpu(), MemoryFormat::ChannelsLast);
      test::poison(out);
      conv2d_out(out, x, vw, bias, p, C % 3 == 0);
      ASSERT_TRUE(test::all_close(out, ref, 2e-5, 1e-5)) << "C " << C << " stride " << p.stride << " simd "
                                                       << static_cast<int>(m.simd);
    }
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

// The three out= destinations: dense NCHW, dense NHWC, and every other column of a
// buffer twice as wide (its other columns must stay poisoned). Each poisoned first.
struct PoolDst {
  Tensor base, dst;
  bool gaps;  // dst is base's odd columns
};
std::vector<PoolDst> pool_destinations(const Shape& osz) {
  std::vector<PoolDst> d;
  d.push_back({empty(osz), Tensor(), false});
  d.push_back({empty(osz, DType::Float32, Device::cpu(), MemoryFormat::ChannelsLast), Tensor(), false});
  d.push_back({empty({osz[0], osz[1], osz[2], 2 * osz[3]}), Tensor(), true});
  for (PoolDst& p : d) {
    test::poison(p.base);
    p.dst = p.gaps ? p.base.slice(3, 1, std::nullopt, 2) : p.base;
  }
  return d;
}

// Every input layout, both styles (out-of-place, out= into three poisoned destinations),
// every kernel mode; widths up to ~45 so the 8-wide passes and their scalar tails both
// run, 64-83 channels in a third of the cases (else 1-12) so the 64-, 8- and 1-channel
// steps of the channels-last loop do; strides 1-3 (the 8-wide horizontal pass: 1 and 2).
TEST(Pool2d, MaxAndAvgEveryLayoutAndStyle) {
  std::mt19937_64 rng(4);
  for (int t = 0; t < 24; ++t) {
    // the first cases: the windows the kernels unroll (3x3 / 2 with and without padding,
    // 3x3 / 1) and 2x2 / 2; then random ones
    const int64_t kFixed[4][3] = {{3, 2, 1}, {3, 2, 0}, {3, 1, 1}, {2, 0, 0}};
    int64_t k = 1 + rng() % 4, s = rng() % 4, pad = rng() % (k / 2 + 1);
    if (t < 4) k = kFixed[t][0], s = kFixed[t][1], pad = kFixed[t][2];
    const int64_t N = t < 4 ? 1 + rng() % 2 : rng() % 3, C = t % 3 == 0 ? 64 + rng() % 20 : 1 + rng() % 12, H = k + rng() % 9, W = k + rng() % 40;
    const int64_t ss = s == 0 ? k : s;
    const Shape osz{N, C, (H + 2 * pad - k) / ss + 1, (W + 2 * pad - k) / ss + 1};
    const Tensor vx = randn({N, C, H, W}, rng());
    const Pool2dParams pp{k, s, pad};
    for (Layout l : {Layout::Contiguous, Layout::Transposed, Layout::Sliced, Layout::Expanded, Layout::ChannelsLast,
                     Layout::Offset}) {
      const Tensor x = test::with_layout(vx, l);
      const std::vector<double> v = test::layout_values(test::naive_values(vx), vx.sizes(), l);
      for (bool is_max : {true, false}) {
        const std::vector<double> ref = ref_pool(v, vx.sizes(), k, ss, pad, is_max);
        for (const Modes& m : kModes) {
          ModeGuard g(m);
          const std::string what = std::string(is_max ? "max" : "avg") + " k" + std::to_string(k) + " s" +
                                   std::to_string(s) + " p" + std::to_string(pad) + " " + test::layout_name(l) +
                                   " x " + x.str() + " threads " + std::to_string(m.threads) + " simd " +
                                   std::to_string(static_cast<int>(m.simd));
          const Tensor out = is_max ? max_pool2d(x, pp) : avg_pool2d(x, pp);
          ASSERT_EQ(out.sizes(), osz) << what;
          ASSERT_EQ(out.suggest_memory_format(), x.suggest_memory_format()) << what;
          ASSERT_TRUE(test::all_close(out, ref, 1e-6, 1e-6)) << what;
          for (PoolDst& d : pool_destinations(osz)) {
            Tensor& r = is_max ? max_pool2d_out(d.dst, x, pp) : avg_pool2d_out(d.dst, x, pp);
            ASSERT_EQ(&r, &d.dst);
            ASSERT_TRUE(test::all_close(d.dst, ref, 1e-6, 1e-6)) << what << " out " << d.dst.str();
            if (d.gaps) {
              const Tensor gaps = d.base.slice(3, 0, std::nullopt, 2);
              for (double e : test::naive_values(gaps)) ASSERT_TRUE(std::isnan(e)) << what << ": wrote between out's columns";
            }
          }
        }
      }
    }
  }
}

// max skips NaN (fmax), a window of NaN alone gives -inf; avg propagates NaN. Both loop
// orders, vector and scalar channel steps (C = 9: one 8-channel step and a tail) and
// widths with 8-wide passes (W = 40, stride 2: OW = 20).
TEST(Pool2d, NaNInputs) {
  const int64_t C = 9, H = 6, W = 40;
  Tensor vx = randn({1, C, H, W}, 17);
  float* p = vx.data<float>();
  for (int64_t c = 0; c < C; ++c) {
    p[(c * H + 0) * W + 0] = NAN;  // one NaN in window (0, 0)
    for (int64_t i = 2; i < 4; ++i)
      for (int64_t j = 8; j < 10; ++j) p[(c * H + i) * W + j] = NAN;  // all of window (1, 4)
    p[(c * H + 5) * W + 39] = NAN;  // the last window's last element
  }
  const std::vector<double> v = test::naive_values(vx);
  for (bool is_max : {true, false}) {
    const std::vector<double> ref = ref_pool(v, vx.sizes(), 2, 2, 0, is_max);
    ASSERT_EQ(std::isnan(ref[0]), !is_max);
    ASSERT_TRUE(is_max ? ref[1 * 20 + 4] == -INFINITY : std::isnan(ref[1 * 20 + 4]));
    for (const Modes& m : kModes) {
      ModeGuard g(m);
      for (Layout l : {Layout::Contiguous, Layout::ChannelsLast}) {
        const Tensor x = test::with_layout(vx, l);
        const Tensor out = is_max ? max_pool2d(x, {2, 2, 0}) : avg_pool2d(x, {2, 2, 0});
        ASSERT_TRUE(test::all_close(out, ref, 1e-6, 1e-6)) << (is_max ? "max " : "avg ") << test::layout_name(l);
        Tensor dst = empty(out.sizes());
        dst.fill_(7.0);  // not NaN: a NaN result must be written, not left from the poison
        if (is_max) max_pool2d_out(dst, x, {2, 2, 0});
        else avg_pool2d_out(dst, x, {2, 2, 0});
        ASSERT_TRUE(test::all_close(dst, ref, 1e-6, 1e-6)) << (is_max ? "max_out " : "avg_out ") << test::layout_name(l);
      }
    }
  }
}

// Bad inputs of both styles; a rejected out= call leaves out as it was.
TEST(Pool2d, BadInputs) {
  const Tensor x = randn({1, 4, 5, 5}, 1);
  expect_msg([&] { max_pool2d(randn({3, 4}, 1), {2, 2, 0}); }, "max_pool2d: expected a 4-D input [N, C, H, W], got sizes [3, 4]");
  expect_msg([&] { avg_pool2d(x, {7, 1, 0}); }, "avg_pool2d: kernel 7 larger than the padded input 5x5");
  expect_msg([&] { max_pool2d(x, {2, 2, 2}); }, "padding 2");
  expect_msg([&] { max_pool2d(x, {2, -1, 0}); }, "stride -1");
  expect_msg([&] { max_pool2d(x, {0, 1, 0}); }, "kernel 0");
  expect_msg([&] { avg_pool2d(x.to(DType::Float64), {2, 2, 0}); }, "avg_pool2d: expected float32, got float64");
  expect_msg([&] { max_pool2d(test::fake_cuda({1, 4, 5, 5}), {2, 2, 0}); }, "expected a CPU tensor");
  const Pool2dParams pp{2, 2, 0};  // -> [1, 4, 2, 2]
  Tensor out = empty({1, 4, 2, 2});
  test::poison(out);
  auto untouched = [&] {
    for (double e : test::naive_values(out)) ASSERT_TRUE(std::isnan(e)) << "a rejected call wrote out";
  };
  expect_msg([&] { max_pool2d_out(out, randn({4, 5, 5}, 1), pp); }, "max_pool2d_out: expected a 4-D input");
  Tensor wrong = empty({1, 4, 3, 2});
  expect_msg([&] { max_pool2d_out(wrong, x, pp); }, "max_pool2d_out: out has sizes [1, 4, 3, 2], expected [1, 4, 2, 2]");
  Tensor wrong_dtype = empty({1, 4, 2, 2}, DType::Float64);
  expect_msg([&] { avg_pool2d_out(wrong_dtype, x, pp); }, "avg_pool2d_out: out must be float32, got float64");
  Tensor on_gpu = test::fake_cuda({1, 4, 2, 2});
  expect_msg([&] { avg_pool2d_out(on_gpu, x, pp); }, "avg_pool2d_out: out on cuda:0, input on cpu");
  Tensor undefined;
  expect_msg([&] { max_pool2d_out(undefined, x, pp); }, "out is undefined");
  Tensor expanded = empty({1, 4, 2, 1}).expand({1, 4, 2, 2});
  expect_msg([&] { max_pool2d_out(expanded, x, pp); }, "out has overlapping elements");
  Tensor self = x;  // kernel 1, stride 1: out's sizes are x's, so x itself would fit
  expect_msg([&] { avg_pool2d_out(self, x, {1, 1, 0}); }, "avg_pool2d_out: out (sizes [1, 4, 5, 5], strides [100, 25, 5, 1], offset 0) overlaps the input (sizes [1, 4, 5, 5]");
  expect_msg([&] { max_pool2d_out(out, x.to(DType::Float64), pp); }, "expected float32");
  expect_msg([&] { max_pool2d_out(out, x, {3, 1, 2}); }, "padding");
  untouched();
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
}


TEST(Conv2d, DeviceMismatch) {
  const Tensor wg = test::fake_cuda({6, 4, 3, 3});
  expect_msg([&] { conv2d(randn({1, 4, 5, 5}, 1), wg); }, "device mismatch");
}

}  // namespace
}  // namespace sb
