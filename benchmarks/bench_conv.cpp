// bench_conv.cpp — conv2d and pooling by input layout (CLAIMS.md L2, L5, S2), float32.
//
// shape key: the input's logical NCHW sizes (every layout has the same logical sizes).
//   conv2d 3x3, 64 -> 64, stride 1, pad 1, input 8x64x56x56 (quick and full; smoke 1x8x8x8)
//     layouts: contiguous (NCHW x and weights), channels_last (NHWC x and weights: both
//       .contiguous(ChannelsLast)), sliced (x every other column of an [N, C, H, 2W]
//       buffer: a stepped slice), transposed (x a .transpose(2, 3) view of an
//       [N, C, W, H] buffer); weights contiguous except in channels_last.
//     styles: out (conv2d_out into an output made before the loop, dense in the path's
//       native layout: NHWC for channels_last, NCHW otherwise), outofplace (conv2d: the
//       result in x.suggest_memory_format() plus the GEMM workspace through the caching
//       allocator).
//   max_pool2d / avg_pool2d 3x3, stride 2, pad 1 on the same input, contiguous and
//     channels_last; styles out (max_pool2d_out into an output made before the loop, in
//     the input's layout) and outofplace (no in-place style: the sizes change).
//   op:matmul, shape 25088x576x64 (MxKxN; layout contiguous, style out): the GEMM a 3x3
//     64 -> 64 conv over 8x56x56 pixels is (M = N*OH*OW, K = C*KH*KW, N = O), so conv
//     GFLOP/s can be read as a % of the GEMM's at its own shape (benchmarks/README.md).
//   full adds: a depthwise 3x3 (groups 32) on 8x32x112x112 and a 1x1 256 -> 64 on
//     8x256x56x56 (their input shapes tell them apart from the 3x3 row), contiguous and
//     channels_last, out and outofplace.
// The NCHW -> NHWC conversion of the 3x3 input (the Channels-last table's break-even)
//   is bench_copy's op:nchw_to_nhwc at shape 8x64x56x56.
//
// Cost: conv flop = 2*N*O*OH*OW*(C/groups)*KH*KW (3x3 64->64: 1.85 GFLOP); bytes = x
// (its elements once) + weights + output.
// Pooling: bytes = input + output; flop: avg 9 per output (8 adds and the scaling),
// max 0 (comparisons are not floating-point arithmetic). The GEMM row: 2*M*N*K flop,
// A + B + C bytes. Threads 1 and 2.
#include "bench_common.h"
#include "stridebench/conv.h"
#include "stridebench/matmul.h"

namespace sb::bench {

const char* const kFamily = "conv";

namespace {


enum class Op { Conv, MaxPool, AvgPool, Gemm };
const char* op_name(Op op) {
  switch (op) {
    case Op::Conv: return "conv2d";
    case Op::MaxPool: return "max_pool2d";
    case Op::AvgPool: return "avg_pool2d";
    case Op::Gemm: return "matmul";
  }
  return "?";
}

struct Case {
  Op op;
  Layout layout;
  bool out;      // style out (else outofplace)
  Shape input;   // NCHW sizes; for Gemm {M, K, N}
  int64_t cout;  // conv output channels
  int64_t k;     // conv kernel size
  int64_t groups;
  int threads;
};

const Tensor& input(const Case& c) {
  const std::string key = "x" + RunName::shape_key(c.input) + "/" + layout_name(c.layout);
  return pooled(key, [&] {
    return in_layout(c.layout, c.input, [](const Shape& s) { return random_tensor(s, 41, DType::Float32, Dist::Normal); });
  });
}

const Tensor& weight(const Case& c) {
  const bool cl = c.layout == Layout::ChannelsLast;
  const Shape s{c.cout, c.input[1] / c.groups, c.k, c.k};
  return pooled("w" + RunName::shape_key(s) + (cl ? "/cl" : ""), [&] {
    return in_layout(cl ? Layout::ChannelsLast : Layout::Contiguous, s,
                     [](const Shape& storage) { return random_tensor(storage, 42, DType::Float32, Dist::Normal); });
  });
}

void run_gemm(benchmark::State& st, const Case& c) {
  const int64_t M = c.input[0], K = c.input[1], N = c.input[2];
  const Tensor& a = pooled("gemm_a" + RunName::shape_key(c.input), [&] { return random_tensor({M, K}, 43); });
  const Tensor& b = pooled("gemm_b" + RunName::shape_key(c.input), [&] { return random_tensor({K, N}, 44); });
  Tensor out = empty({M, N});
  const AllocCount allocs = measure_allocs([&] { matmul_out(out, a, b); });
  for (auto _ : st) {
    matmul_out(out, a, b);
    benchmark::ClobberMemory();
  }
  set_work(st, (M * K + K * N + M * N) * 4, 2 * M * N * K);
  set_alloc_counters(st, allocs);
  set_regime(st, (M * K + K * N + M * N) * 4, c.threads);
}

void run_case(benchmark::State& st, const Case& c) {
  pool_scope(RunName::shape_key(c.input));
  ThreadScope ts(c.threads);
  if (c.op == Op::Gemm) return run_gemm(st, c);
  const Tensor& x = input(c);
  const MemoryFormat native = c.layout == Layout::ChannelsLast ? MemoryFormat::ChannelsLast : MemoryFormat::Contiguous;
  const Conv2dParams cp{1, c.k / 2, 1, c.groups};
  const Pool2dParams pp{3, 2, 1};
  Tensor w, out;
  if (c.op == Op::Conv) {
    w = weight(c);
    if (c.out) out = empty(conv2d_output_sizes(x, w, Tensor(), cp), DType::Float32, Device::cpu(), native);
  } else if (c.out) {  // pooling: 3x3 / 2, pad 1
    const Shape& s = c.input;
    out = empty({s[0], s[1], (s[2] - 1) / 2 + 1, (s[3] - 1) / 2 + 1}, DType::Float32, Device::cpu(), native);
  }
  const bool is_max = c.op == Op::MaxPool;
  auto pool = [&] { return is_max ? max_pool2d(x, pp) : avg_pool2d(x, pp); };
  auto pool_out = [&](Tensor& o) { is_max ? max_pool2d_out(o, x, pp) : avg_pool2d_out(o, x, pp); };
  Tensor probe;
  auto call = [&]() {
    switch (c.op) {
      case Op::Conv:
        if (c.out) conv2d_out(out, x, w, Tensor(), cp);
        else probe = conv2d(x, w, Tensor(), cp);
        break;
      case Op::MaxPool:
      case Op::AvgPool:
        if (c.out) pool_out(out);
        else probe = pool();
        break;
      case Op::Gemm: break;
    }
  };
  const AllocCount allocs = measure_allocs(call);  // first call: also the warm-up
  const Tensor& y = c.out ? out : probe;
  const int64_t out_bytes = static_cast<int64_t>(y.nbytes()), out_numel = y.numel();
  probe = Tensor();  // the timed calls start with the allocator as every later call sees it
  for (auto _ : st) {
    switch (c.op) {
      case Op::Conv:
        if (c.out) {
          conv2d_out(out, x, w, Tensor(), cp);
        } else {
          Tensor r = conv2d(x, w, Tensor(), cp);
          benchmark::DoNotOptimize(r);
        }
        break;
      case Op::MaxPool:
      case Op::AvgPool:
        if (c.out) {
          pool_out(out);
        } else {
          Tensor r = pool();
          benchmark::DoNotOptimize(r);
        }
        break;
      case Op::Gemm: break;
    }
    benchmark::ClobberMemory();
  }
  int64_t flop = 0;
  if (c.op == Op::Conv)
    flop = 2 * out_numel * (c.input[1] / c.groups) * c.k * c.k;  // out_numel = N*O*OH*OW
  else if (c.op == Op::AvgPool)
    flop = 9 * out_numel;
  const int64_t wbytes = w.defined() ? static_cast<int64_t>(w.nbytes()) : 0;
  set_work(st, distinct_bytes(x) + wbytes + out_bytes, flop);
  set_alloc_counters(st, allocs);
  set_regime(st, span_bytes(x) + wbytes + out_bytes, c.threads);
}

void add_case(const Case& c) {
  RunName name;
  name.op(op_name(c.op)).layout(layout_name(c.layout)).style(c.out ? "out" : "outofplace").dtype(DType::Float32)
      .shape(c.input).threads(c.threads);
  add_run(name, [c](benchmark::State& st) { run_case(st, c); }, benchmark::kMillisecond);
}

}  // namespace

void register_family() {
  const Shape x = smoke() ? Shape{1, 8, 8, 8} : Shape{8, 64, 56, 56};  // smoke: as scripts/peers.py
  const int64_t cout = x[1];
  const Shape gemm{x[0] * x[2] * x[3], x[1] * 9, cout};  // pad 1, stride 1: OH*OW = H*W
  const std::vector<Layout> all = {Layout::Contiguous, Layout::ChannelsLast, Layout::Sliced, Layout::Transposed};
  const std::vector<Layout> two = {Layout::Contiguous, Layout::ChannelsLast};
  for (int t : thread_counts()) {
    for (Layout l : all)
      for (bool out : {true, false}) add_case({Op::Conv, l, out, x, cout, 3, 1, t});
    add_case({Op::Gemm, Layout::Contiguous, true, gemm, 0, 0, 1, t});
    for (Op op : {Op::MaxPool, Op::AvgPool})
      for (Layout l : two)
        for (bool out : {true, false}) add_case({op, l, out, x, 0, 0, 1, t});
    if (full()) {
      for (Layout l : two)
        for (bool out : {true, false}) {
          add_case({Op::Conv, l, out, {8, 32, 112, 112}, 32, 3, 32, t});  // depthwise
          add_case({Op::Conv, l, out, {8, 256, 56, 56}, 64, 1, 1, t});    // 1x1
        }
    }
  }
}

}  // namespace sb::bench
