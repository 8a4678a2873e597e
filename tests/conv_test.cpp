// conv_test.cpp — conv2d / conv2d_out and pooling (lib/conv/) against direct
// float64 loops, in NCHW and channels-last (and other) layouts, with stride, padding,
// dilation, groups, depthwise, bias and relu; poisoned outputs; 1 and 2 threads; AVX2
// and scalar; plus the allocation accounting and bad inputs.
#include "stridebench/conv.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <iostream>

#include "stridebench/cpu_features.h"
#include "stridebench/parallel.h"
#include "stridebench/matmul.h"
#include "cases/conv.h"
#include "test_util.h"

#ifdef SB_WITH_CUDA
#include "cuda/cuda_backend.h"
#endif

namespace sb {
namespace {

using test::all_close;
using test::Layout;
using cases::Style;
using test::expect_msg;

// The float64 convolution of x and w (+ bias, relu), NCHW order; `bound`, when given,
// gets each output's sum of |x w| (+ |bias|), the scale of its rounding errors.
std::vector<double> ref_conv(const Tensor& x, const Tensor& w, const Tensor& bias, const Conv2dParams& p, bool relu,
                             std::vector<double>* bound = nullptr) {
  const std::vector<double> vx = x.to_vector(), vw = w.to_vector();
  const std::vector<double> vb = bias.defined() ? bias.to_vector() : std::vector<double>();
  const int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
  const int64_t O = w.size(0), Cg = w.size(1), KH = w.size(2), KW = w.size(3), Og = O / p.groups;
  const int64_t OH = (H + 2 * p.padding - p.dilation * (KH - 1) - 1) / p.stride + 1;
  const int64_t OW = (W + 2 * p.padding - p.dilation * (KW - 1) - 1) / p.stride + 1;
  std::vector<double> out(static_cast<size_t>(N * O * OH * OW));
  if (bound) bound->assign(out.size(), 0.0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          double s = vb.empty() ? 0.0 : vb[o];
          double m = std::fabs(s);
          for (int64_t ci = 0; ci < Cg; ++ci)
            for (int64_t kh = 0; kh < KH; ++kh)
              for (int64_t kw = 0; kw < KW; ++kw) {
                const int64_t ih = oh * p.stride - p.padding + kh * p.dilation;
                const int64_t iw = ow * p.stride - p.padding + kw * p.dilation;
                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                const int64_t c = (o / Og) * Cg + ci;
                const double t = vx[((n * C + c) * H + ih) * W + iw] * vw[((o * Cg + ci) * KH + kh) * KW + kw];
                s += t;
                m += std::fabs(t);
              }
          out[((n * O + o) * OH + oh) * OW + ow] = relu ? std::max(s, 0.0) : s;
          if (bound) (*bound)[static_cast<size_t>(((n * O + o) * OH + oh) * OW + ow)] = m;
        }
  (void)C;
  return out;
}

// v: the input's values row-major over sz (NCHW). max propagates NaN, as PyTorch's
// max_pool2d (a window with a NaN gives NaN). avg counts the padding.
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
              if (e > acc || std::isnan(e)) acc = std::isnan(acc) ? acc : e;
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
    test::available_modes({{1, SimdLevel::AVX512, 16}, {2, SimdLevel::AVX512, 16}, {1, SimdLevel::AVX512, 32},
                           {2, SimdLevel::AVX512, 32}, {1, SimdLevel::AVX2}, {2, SimdLevel::AVX2}, {2, SimdLevel::Scalar}});

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
                                 std::to_string(static_cast<int>(m.simd)) + " tile " + std::to_string(m.tile);
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
      {2, 16, 7, 8, 20, 3, 3, {1, 1, 1, 1}, true, false},    // W x C = 128: NCHW's staged rows padded
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

// Two inputs the layout list leaves out, each with its own packing:
//  - channels-last with every other channel (x[:, ::2] of an NHWC tensor: channel
//    stride 2, still channels-last by PyTorch's rule), whose im2col rows gather strided
//    channels and which the direct AVX-512 kernel declines;
//  - kernels of more than 64 taps (9x9, 7x10), which the GEMM's NCHW panels pack one
//    panel at a time, whole 16-column rows from one input row where they fit.
// Every mode, out-of-place and out= into a poisoned sliced out, against the float64 loops.
TEST(Conv2d, SteppedChannelsAndWideKernels) {
  const Case cases[] = {
      {2, 6, 9, 11, 8, 3, 3, {1, 1, 1, 1}, true, false},     // 3x3 same padding
      {1, 8, 10, 13, 12, 3, 3, {2, 1, 1, 2}, false, true},   // stride 2, groups 2
      {1, 4, 12, 20, 8, 9, 9, {1, 4, 1, 1}, true, true},     // 81 taps, OW 20: whole panel rows
      {2, 3, 11, 37, 5, 7, 10, {1, 3, 1, 1}, false, false},  // 70 taps, OW 34: rows crossing panels
      {1, 6, 14, 18, 8, 9, 9, {2, 4, 1, 2}, true, false},    // 81 taps, stride 2, groups 2
  };
  uint64_t seed = 700;
  for (const Case& cs : cases) {
    const std::string name = "N" + std::to_string(cs.N) + " C" + std::to_string(cs.C) + " " +
                             std::to_string(cs.H) + "x" + std::to_string(cs.W) + " O" + std::to_string(cs.O) + " k" +
                             std::to_string(cs.KH) + "x" + std::to_string(cs.KW) + " s" +
                             std::to_string(cs.p.stride) + " g" + std::to_string(cs.p.groups);
    seed += 10;
    const Tensor vx = randn({cs.N, cs.C, cs.H, cs.W}, seed);
    const Tensor vw = randn({cs.O, cs.C / cs.p.groups, cs.KH, cs.KW}, seed + 1);
    const Tensor bias = cs.bias ? randn({cs.O}, seed + 2) : Tensor();
    const std::vector<double> ref = ref_conv(vx, vw, bias, cs.p, cs.relu);
    const double atol = 2e-6 * static_cast<double>(cs.C / cs.p.groups * cs.KH * cs.KW + 1);
    // the channels of vx at the even channels of a channels-last tensor of twice as many
    Tensor wide = empty({cs.N, 2 * cs.C, cs.H, cs.W}, DType::Float32, Device::cpu(), MemoryFormat::ChannelsLast);
    test::poison(wide);
    Tensor stepped = wide.slice(1, 0, 2 * cs.C, 2);
    stepped.copy_(vx);
    ASSERT_EQ(stepped.stride(1), 2) << name;
    ASSERT_EQ(stepped.suggest_memory_format(), MemoryFormat::ChannelsLast) << name;
    for (const Modes& m : kModes) {
      ModeGuard g(m);
      for (const Tensor& x : {stepped, vx}) {
        const bool cl = x.stride(1) == 2;
        const std::string what = name + (cl ? " x channels-last, channels stepped" : " x NCHW") + " threads " +
                                 std::to_string(m.threads) + " simd " + std::to_string(static_cast<int>(m.simd)) +
                                 " tile " + std::to_string(m.tile);
        const Tensor y = conv2d(x, vw, bias, cs.p, cs.relu);
        ASSERT_TRUE(y.is_contiguous(cl ? MemoryFormat::ChannelsLast : MemoryFormat::Contiguous)) << what;
        ASSERT_TRUE(test::all_close(y, ref, atol, 1e-5)) << what;
        Tensor o2 = test::with_layout(zeros(y.sizes()), Layout::Sliced);
        test::poison(o2);
        conv2d_out(o2, x, vw, bias, cs.p, cs.relu);
        ASSERT_TRUE(test::all_close(o2, ref, atol, 1e-5)) << what << " out= sliced";
      }
    }
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
        // stages an image's rows channels-last per thread, rows of 12 x 16 floats padded
        // by 16 (Note [NCHW through the channels-last kernel]; its output-row buffer is
        // per thread, outside the allocator)
        ws = (64 * K + 64 + (cl ? 0 : get_num_threads() * 12 * (12 * 16 + 16))) * 4;
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
                                   std::to_string(static_cast<int>(m.simd)) + " tile " + std::to_string(m.tile);
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

// max and avg propagate NaN (PyTorch's rule), a window of NaN alone included. Both loop
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
    ASSERT_TRUE(std::isnan(ref[0]));
    ASSERT_TRUE(std::isnan(ref[1 * 20 + 4]));
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

// The NCHW rows 16 outputs at a time (Note [Pooling rows in zmm]) across several chunks:
// widths around the chunk edges (31-34 and 63-66 columns: the third vector's one column
// inside the row or past it), the pad column on the left, ragged right ends; NaNs at
// the first, a chunk-edge and the last column. Every window the zmm kernel takes (3x3 /
// 2, 2x2 / 2, 3x3 / 1, with and without padding), dense rows and rows of out every other
// column of a poisoned buffer, every mode.
TEST(Pool2d, RowsSixteenOutputsAtATime) {
  std::mt19937_64 rng(29);
  const int64_t kWin[5][3] = {{3, 2, 1}, {3, 2, 0}, {2, 2, 0}, {3, 1, 1}, {3, 1, 0}};
  // the zmm rows (Note [Pooling rows in zmm]) and the AVX2 passes, whichever this
  // design's row takes
  test::TuningScope tuning_scope;
  CpuTuning& tuning = tuning_scope.tuning();
  for (bool rows_zmm : {true, false})
  for (int64_t W : {31, 32, 33, 34, 47, 63, 64, 65, 66, 97, 130}) {
    tuning.pool_rows_zmm = rows_zmm;
    set_cpu_tuning(&tuning);
    for (const auto& win : kWin) {
      const int64_t k = win[0], s = win[1], pad = win[2], N = 1, C = 3, H = 3 + rng() % 5;
      Tensor vx = randn({N, C, H, W}, rng());
      float* p = vx.data<float>();
      const int64_t nan_at[3] = {0, std::min<int64_t>(32, W - 1), W - 1};
      for (int64_t c = 0; c < C; ++c) p[(c * H + c % H) * W + nan_at[c]] = NAN;
      const Shape osz{N, C, (H + 2 * pad - k) / s + 1, (W + 2 * pad - k) / s + 1};
      const std::vector<double> v = test::naive_values(vx);
      for (bool is_max : {true, false}) {
        const std::vector<double> ref = ref_pool(v, vx.sizes(), k, s, pad, is_max);
        for (const Modes& m : kModes) {
          ModeGuard g(m);
          const std::string what = std::string(is_max ? "max" : "avg") + " k" + std::to_string(k) + " s" +
                                   std::to_string(s) + " p" + std::to_string(pad) + " W " + std::to_string(W) +
                                   " simd " + std::to_string(static_cast<int>(m.simd)) + " threads " +
                                   std::to_string(m.threads) + " zmm rows " + std::to_string(rows_zmm);
          const Pool2dParams pp{k, s, pad};
          const Tensor out = is_max ? max_pool2d(vx, pp) : avg_pool2d(vx, pp);
          ASSERT_EQ(out.sizes(), osz) << what;
          ASSERT_TRUE(test::all_close(out, ref, 1e-6, 1e-6)) << what;
          Tensor base = empty({osz[0], osz[1], osz[2], 2 * osz[3]});
          test::poison(base);
          Tensor dst = base.slice(3, 1, std::nullopt, 2);
          if (is_max) max_pool2d_out(dst, vx, pp);
          else avg_pool2d_out(dst, vx, pp);
          ASSERT_TRUE(test::all_close(dst, ref, 1e-6, 1e-6)) << what << " out every other column";
          for (double e : test::naive_values(base.slice(3, 0, std::nullopt, 2)))
            ASSERT_TRUE(std::isnan(e)) << what << ": wrote between out's columns";
          // dense rows of out with 16 poisoned columns after each: a chunk must not write
          // past its row's end
          Tensor wide = empty({osz[0], osz[1], osz[2], osz[3] + 16});
          test::poison(wide);
          Tensor rows = wide.slice(3, 0, osz[3]);
          if (is_max) max_pool2d_out(rows, vx, pp);
          else avg_pool2d_out(rows, vx, pp);
          ASSERT_TRUE(test::all_close(rows, ref, 1e-6, 1e-6)) << what << " out rows in a wider buffer";
          for (double e : test::naive_values(wide.slice(3, osz[3], std::nullopt)))
            ASSERT_TRUE(std::isnan(e)) << what << ": wrote past out's rows";
        }
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
  // a CUDA tensor is checked as a CPU one before any kernel (fake_cuda: host memory)
  expect_msg([&] { max_pool2d(test::fake_cuda({1, 4, 5, 5}), {0, 1, 0}); }, "max_pool2d: expected kernel >= 1");
  expect_msg([&] { avg_pool2d(test::fake_cuda({1, 4, 5, 5}), {7, 1, 0}); }, "kernel 7 larger than the padded input");
#ifndef SB_WITH_CUDA
  expect_msg([&] {
    Tensor gout = test::fake_cuda({1, 4, 2, 2});
    max_pool2d_out(gout, test::fake_cuda({1, 4, 5, 5}), {2, 2, 0});
  }, "max_pool2d_out: expected a CPU tensor, got cuda:0 (this build has no CUDA)");
#endif
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

// ---------------------------------------------------------------- on every device
// (Note [Device-parameterized tests] in test_util.h)

class ConvOnDevice : public ::testing::TestWithParam<Device> {};

// A fused relu is the elementwise relu: NaN propagates (PyTorch's conv then relu), on
// every path (depthwise channels-last in vectors and its channel tail, the depthwise and
// few-channel direct loops, the implicit GEMM's epilogue and, on AVX-512 CPUs, the
// direct kernel) and SIMD level; on CUDA through cuDNN's fused relu (Note [Fused relu
// and NaN] in matmul/gemm_impl.h). Outputs start at 7, so an unwritten NaN cannot pass.
TEST_P(ConvOnDevice, FusedReluPropagatesNaN) {
  const Device dev = GetParam();
  SB_SKIP_WITHOUT_DEVICE(dev);
  const test::Tf32Scope scope(dev, false);
  struct NanCase {
    int64_t C, O, K;
    Conv2dParams p;
  };
  const NanCase cases[] = {{19, 19, 3, {1, 1, 1, 19}},  // depthwise: 2 vectors and a 3-channel tail
                           {6, 12, 3, {1, 1, 1, 3}},    // few channels a group
                           {16, 24, 3, {1, 1, 1, 1}},   // implicit GEMM / direct kernel
                           {16, 70, 1, {1, 0, 1, 1}}};  // 1x1
  for (const NanCase& c : cases) {
    Tensor vx = randn({2, c.C, 6, 11}, 41 + c.C);
    float* px = vx.data<float>();
    for (int64_t ch = 0; ch < c.C; ch += 3) px[((1 * c.C + ch) * 6 + 2) * 11 + 4] = NAN;
    const Tensor vw = randn({c.O, c.C / c.p.groups, c.K, c.K}, 42), bias = randn({c.O}, 43);
    const std::vector<double> ref = ref_conv(vx, vw, bias, c.p, true);
    ASSERT_TRUE(std::any_of(ref.begin(), ref.end(), [](double v) { return std::isnan(v); }));
    ASSERT_TRUE(std::any_of(ref.begin(), ref.end(), [](double v) { return v == 0.0; }));
    const Tensor w = vw.to(dev), b = bias.to(dev);
    for (const Modes& m : dev.is_cuda() ? std::vector<Modes>{kModes.front()} : kModes) {
      ModeGuard g(m);
      for (Layout l : {Layout::Contiguous, Layout::ChannelsLast}) {
        const Tensor x = test::on_device(dev, test::naive_values(vx), vx.sizes(), DType::Float32, l);
        Tensor out = empty(conv2d_output_sizes(x, w, b, c.p), DType::Float32, dev,
                           l == Layout::ChannelsLast ? MemoryFormat::ChannelsLast : MemoryFormat::Contiguous);
        out.fill_(7.0);
        conv2d_out(out, x, w, b, c.p, true);
        ASSERT_TRUE(test::all_close(out, ref, 1e-4, 1e-5))
            << "C " << c.C << " O " << c.O << " groups " << c.p.groups << " " << test::layout_name(l) << " on " << dev
            << ", simd " << static_cast<int>(m.simd) << " threads " << m.threads;
      }
    }
  }
}


struct ConvCase {
  int64_t N, C, H, W, O, KH, KW;
  Conv2dParams p;
  bool bias, relu;
};

std::string conv_str(const ConvCase& c) {
  return detail::str_cat("N", c.N, " C", c.C, " H", c.H, " W", c.W, " O", c.O, " K", c.KH, "x", c.KW, " s", c.p.stride,
                         " p", c.p.padding, " d", c.p.dilation, " g", c.p.groups, c.bias ? " bias" : "",
                         c.relu ? " relu" : "");
}

std::vector<ConvCase> conv_cases(uint64_t seed, int count) {
  std::vector<ConvCase> cs = {
      {1, 1, 1, 1, 1, 1, 1, {}, false, false},             // all sizes 1
      {2, 3, 7, 5, 4, 3, 3, {1, 1, 1, 1}, true, true},      // odd sizes, padding
      {2, 8, 9, 9, 6, 1, 1, {}, true, false},               // 1x1: x is the col matrix when dense
      {3, 4, 11, 10, 4, 3, 3, {2, 1, 1, 4}, true, true},    // depthwise, stride 2 (G > N: per-image GEMMs)
      {3, 6, 8, 8, 4, 3, 2, {1, 0, 1, 2}, false, true},     // groups 2 (G <= N: per-group GEMMs)
      {2, 6, 12, 9, 9, 3, 3, {1, 2, 2, 3}, true, false},    // dilation 2, groups 3
      {1, 5, 6, 13, 7, 2, 5, {3, 2, 1, 1}, true, true},     // stride 3, non-square kernel
      {2, 16, 10, 10, 32, 3, 3, {1, 1, 1, 1}, true, true},  // a real GEMM (K = 144)
      {1, 4, 5, 5, 8, 1, 1, {2, 0, 1, 1}, false, false},    // 1x1 with stride: im2col
      {0, 3, 5, 5, 2, 3, 3, {}, true, false},               // no images
  };
  std::mt19937_64 rng(seed);
  auto uni = [&](int64_t lo, int64_t hi) { return lo + static_cast<int64_t>(rng() % static_cast<uint64_t>(hi - lo + 1)); };
  for (int i = 0; i < count; ++i) {
    ConvCase c{};
    c.p.groups = uni(1, 3);
    c.C = c.p.groups * uni(1, 5);
    c.O = c.p.groups * uni(1, 5);
    c.KH = uni(1, 3);
    c.KW = uni(1, 3);
    c.p.stride = uni(1, 2);
    c.p.padding = uni(0, 2);
    c.p.dilation = uni(1, 2);
    c.N = uni(1, 3);
    // at least the dilated kernel, padding included
    c.H = std::max(uni(1, 12), c.p.dilation * (c.KH - 1) + 1 - 2 * c.p.padding);
    c.W = std::max(uni(1, 12), c.p.dilation * (c.KW - 1) + 1 - 2 * c.p.padding);
    c.bias = rng() & 1;
    c.relu = rng() & 1;
    cs.push_back(c);
  }
  return cs;
}

// conv2d and conv2d_out on dev against the float64 loops (ref_conv), for x in every
// layout (each device's path follows x's memory format), weights dense or not, a strided
// bias, and outputs in both dense layouts and a non-dense one.
void check_conv(Device dev, const ConvCase& c, Layout xl, Layout wl, Layout ol, uint64_t seed) {
  const Shape xs = {c.N, c.C, c.H, c.W}, ws = {c.O, c.C / c.p.groups, c.KH, c.KW};
  const auto vx = test::random_values(xs, seed, DType::Float32, -1, 1, xl == Layout::Expanded);
  const auto vw = test::random_values(ws, seed + 1, DType::Float32, -1, 1, wl == Layout::Expanded);
  const auto vb = test::random_values({c.O}, seed + 2, DType::Float32, -1, 1, false);
  const Tensor xc = test::with_layout(test::host_tensor(vx, xs, DType::Float32), xl);
  const Tensor wc = test::with_layout(test::host_tensor(vw, ws, DType::Float32), wl);
  const Tensor bc = c.bias ? test::with_layout(test::host_tensor(vb, {c.O}, DType::Float32), Layout::Sliced) : Tensor();
  const Shape ys = conv2d_output_sizes(xc, wc, bc, c.p);
  const std::vector<double> ref = ref_conv(xc, wc, bc, c.p, c.relu);
  const Tensor x = test::on_device(dev, vx, xs, DType::Float32, xl), w = test::on_device(dev, vw, ws, DType::Float32, wl);
  const Tensor b = c.bias ? test::on_device(dev, vb, {c.O}, DType::Float32, Layout::Sliced) : Tensor();
  const std::string what = conv_str(c) + " x " + test::layout_name(xl) + " w " + test::layout_name(wl);
  // Values in [-1, 1), K = Cg*KH*KW terms: float32 sums in another order.
  const double tol = 1e-5 * static_cast<double>(1 + c.C / c.p.groups * c.KH * c.KW);
  const Tensor y = conv2d(x, w, b, c.p, c.relu);
  ASSERT_EQ(y.device(), dev) << what;
  EXPECT_EQ(y.sizes(), ys) << what;
  // PyTorch's rule on every device: channels-last when the input or the weight is
  const bool cl = x.suggest_memory_format() == MemoryFormat::ChannelsLast ||
                  w.suggest_memory_format() == MemoryFormat::ChannelsLast;
  EXPECT_TRUE(y.is_contiguous(cl ? MemoryFormat::ChannelsLast : MemoryFormat::Contiguous)) << what;
  EXPECT_TRUE(all_close(y, ref, tol, tol)) << what;
  Tensor out = test::poisoned_on(dev, ys, DType::Float32, ol);
  conv2d_out(out, x, w, b, c.p, c.relu);
  EXPECT_TRUE(all_close(out, ref, tol, tol)) << what << " out " << test::layout_name(ol);
}


TEST_P(ConvOnDevice, MatchesFloat64LoopsEveryLayout) {
  const Device dev = GetParam();
  SB_SKIP_WITHOUT_DEVICE(dev);
#ifdef SB_WITH_CUDA
  ASSERT_FALSE(cuda::allow_tf32()) << "TF32 would need a looser tolerance";
#endif
  uint64_t seed = 100;
  for (const ConvCase& c : conv_cases(7, 24)) {
    for (Layout xl : test::all_layouts()) {
      const Layout wl = (seed % 3 == 0) ? Layout::Transposed : (seed % 3 == 1 ? Layout::ChannelsLast : Layout::Contiguous);
      const Layout ol = (seed % 2 == 0) ? Layout::ChannelsLast : Layout::Transposed;
      check_conv(dev, c, xl, wl, ol, seed++);
    }
    check_conv(dev, c, Layout::ChannelsLast, Layout::Contiguous, Layout::Contiguous, seed++);
    check_conv(dev, c, Layout::Contiguous, Layout::ChannelsLast, Layout::Sliced, seed++);
  }
}

TEST_P(ConvOnDevice, BadInputsLeaveOutUntouched) {
  const Device dev = GetParam();
  SB_SKIP_WITHOUT_DEVICE(dev);
  const Tensor x = zeros({1, 4, 8, 8}, DType::Float32, dev), w = zeros({6, 2, 3, 3}, DType::Float32, dev);
  Tensor out = full({1, 6, 6, 6}, 5.0, DType::Float32, dev);
  Tensor small = full({1, 6, 5, 5}, 5.0, DType::Float32, dev);
  const Conv2dParams g2{1, 0, 1, 2};
  expect_msg([&] { conv2d_out(small, x, w, Tensor(), g2); }, "conv2d_out: out has sizes [1, 6, 5, 5], expected [1, 6, 6, 6]");
  expect_msg([&] { conv2d_out(out, x, w, Tensor(), Conv2dParams{1, 0, 1, 1}); }, "input channels per group");
  expect_msg([&] { conv2d_out(out, x, w, zeros({5}, DType::Float32, dev), g2); }, "bias must be 1-D of size 6");
  expect_msg([&] { conv2d_out(out, x.to(DType::Float64), w, Tensor(), g2); },
             "conv2d_out: expected a float32, float16 or bfloat16 input, got float64");
  EXPECT_TRUE(all_close(out, std::vector<double>(216, 5.0), 0, 0)) << "out untouched by the rejected calls";
  EXPECT_TRUE(all_close(small, std::vector<double>(150, 5.0), 0, 0)) << "out untouched by the rejected calls";
}

// float16 and bfloat16 on every device (the CPU, and CUDA without cuDNN, through float32:
// Note [16-bit conv through float32]; CUDA with cuDNN in the dtype: Note [cuDNN conv
// plans]) and float32 with TF32 on CUDA, against the float64 loops over the operands'
// rounded values. x in four layouts, weights dense or channels-last, a strided bias,
// outs poisoned in three layouts. Each element is held to a bound of its own: its sum of
// |x w| (+ |bias|) times twice the relative error of the float32 accumulation over K,
// the output's rounding, and, on cuDNN, what its engines may add: TF32's 10-bit inputs,
// and the transforms of Winograd and FFT engines (PyTorch allows them too), taken as
// 2^-16 in float32 and one more rounding of the dtype for float16 and bfloat16.
// Each output's tolerance in dtype dt (tf32: float32 with TF32 on a CUDA device), from
// its sum of |x w| (+ |bias|) and K terms (SixteenBitAndTf32EveryLayout says why).
std::vector<double> typed_atol([[maybe_unused]] Device dev, DType dt, bool tf32, int64_t K,
                               const std::vector<double>& bound) {
  bool cudnn = false;
#ifdef SB_WITH_CUDA
  cudnn = dev.is_cuda() && std::string(cuda::conv2d_backend()) == "cudnn";
#endif
  const double acc = 0x1p-24 * static_cast<double>(K + 2);
  const double outr = dt == DType::BFloat16 ? 0x1p-8 : dt == DType::Float16 ? 0x1p-11 : 0.0;
  const double in = tf32 ? 0x1p-10 : 0.0;
  const double transforms = !cudnn ? 0.0 : dt == DType::Float32 ? 0x1p-16 : outr;
  std::vector<double> atol(bound.size());
  for (size_t i = 0; i < atol.size(); ++i) atol[i] = 2 * (acc + outr + in + transforms) * bound[i];
  return atol;
}

// One case of SixteenBitAndTf32EveryLayout: conv2d and conv2d_out (three out layouts)
// of x in layout xl and w in wl, dtype dt (tf32: float32 with TF32 on a CUDA device).
void check_typed(Device dev, const ConvCase& c, DType dt, bool tf32, Layout xl, Layout wl, uint64_t seed) {
  const int64_t K = c.C / c.p.groups * c.KH * c.KW;
  const Shape xs = {c.N, c.C, c.H, c.W}, ws = {c.O, c.C / c.p.groups, c.KH, c.KW};
  const auto vx = test::random_values(xs, seed, dt, -1, 1, false);
  const auto vw = test::random_values(ws, seed + 1, dt, -1, 1, false);
  const auto vb = test::random_values({c.O}, seed + 2, dt, -1, 1, false);
  const Tensor x = test::on_device(dev, vx, xs, dt, xl), w = test::on_device(dev, vw, ws, dt, wl);
  const Tensor b = c.bias ? test::on_device(dev, vb, {c.O}, dt, Layout::Sliced) : Tensor();
  std::vector<double> bound;
  const std::vector<double> ref = ref_conv(from_vector(vx, xs), from_vector(vw, ws),
                                           c.bias ? from_vector(vb, {c.O}) : Tensor(), c.p, c.relu, &bound);
  const std::vector<double> atol = typed_atol(dev, dt, tf32, K, bound);
  const std::string what = conv_str(c) + " " + dtype_name(dt) + (tf32 ? " (tf32)" : "") + " x " +
                           test::layout_name(xl) + " w " + test::layout_name(wl) + " on " + dev.str();
  const test::Tf32Scope scope(dev, tf32);
  const Tensor y = conv2d(x, w, b, c.p, c.relu);
  ASSERT_EQ(y.dtype(), dt) << what;
  ASSERT_EQ(y.device(), dev) << what;
  EXPECT_TRUE(all_close(y, ref, atol, 0)) << what;
  for (const Layout ol : {Layout::Contiguous, Layout::ChannelsLast, Layout::Transposed}) {
    Tensor out = test::poisoned_on(dev, y.sizes(), dt, ol);
    conv2d_out(out, x, w, b, c.p, c.relu);
    EXPECT_TRUE(all_close(out, ref, atol, 0)) << what << ", out " << test::layout_name(ol);
  }
}

TEST_P(ConvOnDevice, SixteenBitAndTf32EveryLayout) {
  const Device dev = GetParam();
  SB_SKIP_WITHOUT_DEVICE(dev);
  struct Type {
    DType dt;
    bool tf32;
  };
  std::vector<Type> types = {{DType::Float16, false}, {DType::BFloat16, false}};
  if (dev.is_cuda()) types.push_back({DType::Float32, true});
  const ConvCase fixed[] = {
      {2, 8, 9, 11, 16, 3, 3, {1, 1, 1, 1}, true, true},   // 3x3 same padding
      {2, 6, 10, 9, 12, 3, 3, {2, 2, 2, 3}, true, false},  // stride 2, dilation 2, groups 3
      {1, 16, 7, 7, 8, 1, 1, {}, false, true},             // 1x1
      {2, 6, 8, 7, 6, 3, 3, {1, 1, 1, 6}, true, true},     // depthwise
  };
  uint64_t seed = 700;
  for (const Type& ty : types)
    for (const ConvCase& c : fixed)
      for (const Layout xl : {Layout::Contiguous, Layout::ChannelsLast, Layout::Sliced, Layout::Transposed}) {
        check_typed(dev, c, ty.dt, ty.tf32, xl, seed % 2 ? Layout::ChannelsLast : Layout::Contiguous, seed);
        seed += 3;
      }
}

// Mixed dtypes are refused on every device (no promotion: PyTorch refuses them too) with
// the op and both dtypes named, and out stays as it was.
TEST_P(ConvOnDevice, MixedDtypesRefused) {
  const Device dev = GetParam();
  SB_SKIP_WITHOUT_DEVICE(dev);
  const Tensor x = zeros({1, 4, 6, 6}, DType::Float16, dev), w = zeros({2, 4, 3, 3}, DType::Float16, dev);
  Tensor out = full({1, 2, 4, 4}, 5.0, DType::Float16, dev);
  expect_msg([&] { conv2d_out(out, x, w.to(DType::BFloat16)); }, "conv2d_out: weight dtype bfloat16 differs from input dtype float16");
  expect_msg([&] { conv2d_out(out, x, w, zeros({2}, DType::Float32, dev)); }, "bias dtype float32 differs from input dtype float16");
  Tensor out32 = full({1, 2, 4, 4}, 5.0, DType::Float32, dev);
  expect_msg([&] { conv2d_out(out32, x, w); }, "conv2d_out: out dtype float32, expected float16");
  EXPECT_TRUE(all_close(out, std::vector<double>(32, 5.0), 0, 0));
  EXPECT_TRUE(all_close(out32, std::vector<double>(32, 5.0), 0, 0));
}

// Issue #45, defect 4: pooling on every device (CUDA: Note [CUDA pooling]), against the
// float64 reference: input layouts contiguous, channels-last, transposed, sliced; out
// of place, and out= into a poisoned dense, channels-last and stepped out; windows with
// padding and strides 1-3; NaN propagated by max and avg (PyTorch's rule).
TEST_P(ConvOnDevice, PoolingEveryLayoutStyleAndNaN) {
  const Device dev = GetParam();
  SB_SKIP_WITHOUT_DEVICE(dev);
  struct Case {
    int64_t N, C, H, W, k, s, pad;
  };
  const Case cases[] = {{1, 1, 1, 1, 1, 0, 0}, {2, 3, 7, 9, 3, 2, 1}, {1, 70, 8, 8, 3, 1, 1},
                        {2, 5, 11, 20, 2, 0, 0}, {1, 9, 6, 13, 4, 3, 2}, {0, 3, 5, 5, 2, 0, 0}};
  for (const Case& c : cases) {
    const Shape sz{c.N, c.C, c.H, c.W};
    std::vector<double> v = test::random_values(sz, 31, DType::Float32, -3, 3, false);
    if (!v.empty()) {
      v[0] = NAN;  // one NaN among numbers
      if (c.H * c.W >= 4) v[static_cast<size_t>(c.H * c.W - 1)] = NAN;
    }
    const int64_t ss = c.s == 0 ? c.k : c.s;
    const Shape osz{c.N, c.C, (c.H + 2 * c.pad - c.k) / ss + 1, (c.W + 2 * c.pad - c.k) / ss + 1};
    const Pool2dParams pp{c.k, c.s, c.pad};
    for (Layout l : {Layout::Contiguous, Layout::ChannelsLast, Layout::Transposed, Layout::Sliced}) {
      const Tensor x = test::on_device(dev, v, sz, DType::Float32, l);
      const std::vector<double> xv = test::naive_values(x.to(Device::cpu()));
      for (bool is_max : {true, false}) {
        const std::vector<double> ref = ref_pool(xv, sz, c.k, ss, c.pad, is_max);
        const std::string what = detail::str_cat(is_max ? "max" : "avg", " ", sz, " k", c.k, " s", c.s, " p", c.pad,
                                                 " x ", test::layout_name(l), " on ", dev);
        const Tensor out = is_max ? max_pool2d(x, pp) : avg_pool2d(x, pp);
        ASSERT_EQ(out.sizes(), osz) << what;
        ASSERT_EQ(out.device(), dev) << what;
        ASSERT_TRUE(test::all_close(out, ref, 1e-6, 1e-6)) << what;
        for (Layout lo : {Layout::Contiguous, Layout::ChannelsLast, Layout::Sliced}) {
          Tensor dst = test::poisoned_on(dev, osz, DType::Float32, lo);
          if (is_max) max_pool2d_out(dst, x, pp);
          else avg_pool2d_out(dst, x, pp);
          ASSERT_TRUE(test::all_close(dst, ref, 1e-6, 1e-6)) << what << ", out " << test::layout_name(lo);
        }
      }
    }
  }
}

// The family's case table (Note [Case tables], cases/conv.h): every convolution and
// pooling the benchmarks time, with their operands and calls, on small geometries
// (grouped, depthwise and 1x1 among them), on every device, against the float64 loops
// over the operands' own values (read back by plain loops); conv2d in the dtypes its
// benchmark rows take (float32, float16, bfloat16, and tf32 on CUDA), each element held
// to its rounding bound (typed_atol).
TEST_P(ConvOnDevice, EveryCaseOfTheTable) {
  const Device dev = GetParam();
  SB_SKIP_WITHOUT_DEVICE(dev);
  const cases::ConvGeometry geometries[] = {
      {{2, 3, 7, 6}, 4, 3, 1}, {{1, 4, 5, 5}, 6, 3, 2}, {{2, 8, 6, 5}, 4, 1, 1}, {{1, 4, 6, 6}, 4, 3, 4}};
  // the dtypes bench_conv_cuda times conv2d in (tf32 on CUDA); pooling in float32
  struct Type {
    DType dt;
    bool tf32;
  };
  std::vector<Type> types = {{DType::Float32, false}, {DType::Float16, false}, {DType::BFloat16, false}};
  if (dev.is_cuda()) types.push_back({DType::Float32, true});
  uint64_t seed = 1;
  for (const cases::ConvCase& c : cases::conv_cases({cases::ConvOp::Conv, cases::ConvOp::MaxPool, cases::ConvOp::AvgPool})) {
    for (const Type& ty : types) {
      if (c.op != cases::ConvOp::Conv && (ty.dt != DType::Float32 || ty.tf32)) continue;
      for (const cases::ConvGeometry& g : geometries) {
        const std::string what = std::string(cases::op_name(c.op)) + " " + layout_name(c.layout) + " " +
                                 cases::style_name(c.style) + " " + dtype_name(ty.dt) + (ty.tf32 ? " (tf32)" : "") +
                                 " x " + test::shape_str(g.x) + " k" + std::to_string(g.k) + " groups " +
                                 std::to_string(g.groups);
        cases::ConvOperands t = cases::conv_operands(c, g, [&](const cases::Placement& p, const Shape& sz, char) {
          return test::with_placement(test::host_tensor(test::random_values(sz, seed++, ty.dt, -1, 1), sz, ty.dt).to(dev), p);
        });
        if (t.out.defined()) test::poison(t.out);
        const std::vector<double> vx = test::naive_values(t.x);
        std::vector<double> ref, atol;
        if (c.op == cases::ConvOp::Conv) {
          const Tensor xh = from_vector(vx, g.x), wh = from_vector(test::naive_values(t.w), t.w.sizes());
          std::vector<double> bound;
          ref = ref_conv(xh, wh, Tensor(), cases::conv_params(g), false, &bound);
          atol = typed_atol(dev, ty.dt, ty.tf32, g.x[1] / g.groups * g.k * g.k, bound);
        } else {
          const Pool2dParams pp = cases::pool_params();
          ref = ref_pool(vx, g.x, pp.kernel, pp.stride, pp.padding, c.op == cases::ConvOp::MaxPool);
          atol.assign(ref.size(), 1e-6);
        }
        const test::Tf32Scope scope(dev, ty.tf32);
        const Tensor y = cases::conv_call(c, g, t);
        ASSERT_EQ(y.device(), dev) << what;
        // out=: the native format it was made in; out of place: PyTorch's rule, channels-last
        // when the input (or the weight) is
        const bool cl = t.x.suggest_memory_format() == MemoryFormat::ChannelsLast ||
                        (t.w.defined() && t.w.suggest_memory_format() == MemoryFormat::ChannelsLast);
        const MemoryFormat want = c.style == Style::Out ? cases::native_format(c)
                                  : cl                    ? MemoryFormat::ChannelsLast
                                                          : MemoryFormat::Contiguous;
        EXPECT_TRUE(y.is_contiguous(want)) << what << ": strides " << test::shape_str(y.strides());
        EXPECT_EQ(y.dtype(), ty.dt) << what;
        EXPECT_TRUE(all_close(y, ref, atol, 1e-6)) << what;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, ConvOnDevice, ::testing::ValuesIn(test::test_devices()), test::device_param_name);

#ifdef SB_WITH_CUDA
// ---------------------------------------------------------------- the CUDA backend's own checks and workspace

TEST(CudaConv, WorkspaceChunksOfImages) {
  const Device dev = Device::cuda(0);
  SB_SKIP_WITHOUT_DEVICE(dev);
  // One image's im2col (64*9*172*172 floats, 68 MiB) is over half the 128 MiB workspace:
  // three chunks of one image each, in both layouts.
  const ConvCase c{3, 64, 172, 172, 8, 3, 3, {1, 1, 1, 1}, true, true};
  check_conv(dev, c, Layout::Contiguous, Layout::Contiguous, Layout::ChannelsLast, 1);
  check_conv(dev, c, Layout::ChannelsLast, Layout::Contiguous, Layout::Contiguous, 2);
}

TEST(CudaConv, DeviceMismatchAndBackendChecks) {
  const Device dev = Device::cuda(0);
  SB_SKIP_WITHOUT_DEVICE(dev);
  const Tensor x = zeros({1, 4, 8, 8}, DType::Float32, dev), w = zeros({6, 2, 3, 3}, DType::Float32, dev);
  Tensor out = full({1, 6, 6, 6}, 5.0, DType::Float32, dev);
  const Conv2dParams g2{1, 0, 1, 2};
  expect_msg([&] { conv2d(x, zeros({6, 2, 3, 3}), Tensor(), g2); }, "conv2d: device mismatch: input on cuda:0, weight on cpu");
  expect_msg([&] { conv2d_out(out, x, w, zeros({6}), g2); }, "device mismatch");  // bias on the host
  // the backend's own checks, called directly
  expect_msg([&] { cuda::conv2d(zeros({1, 6, 5, 5}, DType::Float32, dev), x, w, Tensor(), g2, false); },
             "conv2d (CUDA): out sizes [1, 6, 5, 5]");
  EXPECT_THROW(cuda::conv2d(out, x, w, Tensor(), Conv2dParams{1, 0, 1, 1}, false), Error);  // groups do not fit w
  EXPECT_THROW(cuda::conv2d(out, x, w, zeros({5}, DType::Float32, dev), g2, false), Error);
  EXPECT_THROW(cuda::conv2d(out, x.to(DType::Float64), w, Tensor(), g2, false), Error);
  EXPECT_TRUE(all_close(out, std::vector<double>(216, 5.0), 0, 0)) << "out untouched by the rejected calls";
}

#ifdef SB_WITH_CUDNN
// Note [cuDNN conv plans], without a GPU: the descriptors of every graph conv2d builds
// (tensors, the convolution, its operation, the bias and relu ops) take their attributes
// and finalize in every dtype and layout, with and without the epilogue, for groups,
// stride, dilation, padding and 1x1; only the graph itself needs a device. Host tensors
// stand in: nothing is read.
TEST(CudnnConv, DescriptorsOfEveryGraphFinalizeWithoutAGpu) {
  EXPECT_GE(cuda::cudnn_version(), 90000);
  struct G {
    Shape x, w;
    Conv2dParams p;
  };
  const G geos[] = {{{2, 8, 9, 9}, {16, 8, 3, 3}, {1, 1, 1, 1}},
                    {{1, 6, 10, 9}, {9, 2, 3, 3}, {2, 2, 2, 3}},
                    {{2, 16, 7, 7}, {8, 16, 1, 1}, {}},
                    {{1, 4, 6, 6}, {4, 1, 3, 3}, {1, 1, 1, 4}}};
  for (const DType dt : {DType::Float32, DType::Float16, DType::BFloat16})
    for (const MemoryFormat fmt : {MemoryFormat::Contiguous, MemoryFormat::ChannelsLast})
      for (const G& g : geos)
        for (int epi = 0; epi < 4; ++epi) {
          const bool bias = epi & 1, relu = epi & 2;
          const Tensor x = empty(g.x, dt, Device::cpu(), fmt), w = empty(g.w, dt, Device::cpu(), fmt);
          const Tensor b = bias ? empty({g.w[0]}, dt) : Tensor();
          const Tensor y = empty(conv2d_output_sizes(x, w, b, g.p), dt, Device::cpu(), fmt);
          const std::string what = std::string(dtype_name(dt)) + " " + test::shape_str(g.x) +
                                   (fmt == MemoryFormat::ChannelsLast ? " nhwc" : " nchw") + (bias ? " bias" : "") +
                                   (relu ? " relu" : "");
          try {
            EXPECT_EQ(cuda::cudnn_conv_ops_for_tests(y, x, w, b, g.p, relu, true), 1 + bias + relu) << what;
            EXPECT_EQ(cuda::cudnn_conv_ops_for_tests(y, x, w, b, g.p, relu, false), 1) << what;
          } catch (const Error& e) {
            ADD_FAILURE() << what << ": " << e.what();
          }
        }
}

// Note [cuDNN conv plans]: the plan that ran is recorded (its engine's tag, the candidates
// timed, the runtime's version); with autotuning off one plan is taken; a graph no engine
// takes (here: an engine prefix that matches none) is an sb::Error naming the op and the
// sizes, and out stays as it was.
TEST(CudaConv, CudnnRecordsItsPlanAndRefusesCleanly) {
  const Device dev = Device::cuda(0);
  SB_SKIP_WITHOUT_DEVICE(dev);
  EXPECT_GE(cuda::cudnn_version(), 90000);
  EXPECT_STREQ(cuda::conv2d_backend(), "cudnn");
  const ConvCase c{2, 8, 9, 9, 16, 3, 3, {1, 1, 1, 1}, true, true};
  const char* was = std::getenv("SB_CUDNN_AUTOTUNE");
  const std::string prev = was ? was : "";
  ::unsetenv("SB_CUDNN_AUTOTUNE");  // gpu_run.sh's tests step sets it; restored below
  check_conv(dev, c, Layout::ChannelsLast, Layout::ChannelsLast, Layout::Contiguous, 11);
  cuda::ConvPlanInfo info = cuda::conv2d_last_plan();
  EXPECT_EQ(info.engine.rfind("eng", 0), 0u) << info.engine;
  EXPECT_GE(info.candidates, 1);
  EXPECT_GE(info.workspace_bytes, 0);
  // autotuned, the bias and relu go into the graph where an engine takes it (fused or
  // not, the values are the same)
  check_typed(dev, c, DType::Float16, false, Layout::ChannelsLast, Layout::ChannelsLast, 13);
  check_typed(dev, c, DType::BFloat16, false, Layout::Contiguous, Layout::Contiguous, 14);
  std::cout << "cuDNN " << cuda::cudnn_version() << ", the last plan: " << cuda::conv2d_last_plan().engine
            << (cuda::conv2d_last_plan().fused ? " (bias and relu fused)" : " (bias and relu after it)") << "\n";
  ::setenv("SB_CUDNN_AUTOTUNE", "0", 1);
  const ConvCase c1{1, 8, 7, 7, 8, 1, 1, {}, false, false};
  check_conv(dev, c1, Layout::Contiguous, Layout::Contiguous, Layout::Sliced, 12);
  EXPECT_EQ(cuda::conv2d_last_plan().candidates, 1);
  if (was) ::setenv("SB_CUDNN_AUTOTUNE", prev.c_str(), 1);
  else ::unsetenv("SB_CUDNN_AUTOTUNE");
  cuda::set_conv_engine_prefix("none");
  const Tensor x = full({1, 4, 6, 6}, 1.0, DType::Float16, dev), w = full({2, 4, 3, 3}, 1.0, DType::Float16, dev);
  Tensor out = full({1, 2, 4, 4}, 5.0, DType::Float16, dev);
  expect_msg([&] { conv2d_out(out, x, w); }, "conv2d (cuDNN): no engine takes x [1, 4, 6, 6], w [2, 4, 3, 3]");
  cuda::set_conv_engine_prefix("");
  EXPECT_TRUE(all_close(out, std::vector<double>(32, 5.0), 0, 0)) << "out untouched by the refused call";
  conv2d_out(out, x, w);
  EXPECT_TRUE(all_close(out, std::vector<double>(32, 36.0), 0, 0)) << "the same call once engines are allowed";
}
#endif

TEST(CudaConv, BackendRejectsHostTensorsBeforeAnyWork) {
  Tensor out = zeros({1, 2, 1, 1});
  expect_msg([&] { cuda::conv2d(out, zeros({1, 2, 3, 3}), zeros({2, 2, 3, 3}), Tensor(), {}, false); },
             "conv2d (CUDA): expected CUDA tensors, got one on cpu");
  EXPECT_EQ(out.to_vector(), std::vector<double>(2, 0.0));
}
#endif  // SB_WITH_CUDA

}  // namespace
}  // namespace sb
