// bench_conv.cpp — conv2d and pooling by input layout (CLAIMS.md L2, L5, S2), float32.
//
// shape key: the input's logical NCHW sizes (every layout has the same logical sizes).
// The conv and pooling cases, operands and calls are the table's (cases/conv.h), which
// ConvOnDevice runs too.
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
//     8x256x56x56 (shape keys 8x32x112x112x32x3x32 and 8x256x56x56x64x1x1: the input's
//     sizes, then output channels, kernel and groups, cases::shape_key), contiguous and
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
#include "cases/conv.h"
#include "stridebench/conv.h"
#include "stridebench/matmul.h"

namespace sb::bench {

const char* const kFamily = "conv";

namespace {


using cases::ConvOp;

// A table case (cases/conv.h), or (gemm) the GEMM row beside them: input {M, K, N}.
struct Case {
  cases::ConvCase c;
  cases::ConvGeometry g;
  int threads;
  bool gemm = false;
};

// The table's operands, pooled per input shape and placement (x normal, w normal).
cases::ConvOperands operands(const Case& k) {
  return cases::conv_operands(k.c, k.g, [&](const cases::Placement& p, const Shape& sizes, char role) {
    const Tensor& storage = pooled(std::string(1, role) + RunName::shape_key(sizes) + p.describe(), [&] {
      return random_tensor(cases::storage_sizes(sizes, p), role == 'x' ? 41 : 42, DType::Float32, Dist::Normal);
    });
    return cases::view_in(storage, sizes, p);
  });
}

void run_gemm(benchmark::State& st, const Case& c) {
  const int64_t M = c.g.x[0], K = c.g.x[1], N = c.g.x[2];
  const Tensor& a = pooled("gemm_a" + RunName::shape_key(c.g.x), [&] { return random_tensor({M, K}, 43); });
  const Tensor& b = pooled("gemm_b" + RunName::shape_key(c.g.x), [&] { return random_tensor({K, N}, 44); });
  Tensor out = empty({M, N});
  const AllocCount allocs = warm_up([&] { matmul_out(out, a, b); });  // Note [One warm-up per run]
  for (auto _ : st) {
    matmul_out(out, a, b);
    benchmark::ClobberMemory();
  }
  set_work(st, (M * K + K * N + M * N) * 4, 2 * M * N * K);
  set_alloc_counters(st, allocs);
  set_regime(st, (M * K + K * N + M * N) * 4, c.threads);
}

void run_case(benchmark::State& st, const Case& k) {
  pool_scope(RunName::shape_key(k.g.x));
  ThreadScope ts(k.threads);
  if (k.gemm) return run_gemm(st, k);
  const cases::ConvCase& c = k.c;
  cases::ConvOperands t = operands(k);
  Tensor probe;
  const AllocCount allocs = measure_allocs([&] { probe = cases::conv_call(c, k.g, t); });  // also the warm-up
  const int64_t out_bytes = static_cast<int64_t>(probe.nbytes()), out_numel = probe.numel();
  probe = Tensor();  // the timed calls start with the allocator as every later call sees it
  for (auto _ : st) {
    Tensor r = cases::conv_call(c, k.g, t);
    benchmark::DoNotOptimize(r);
    benchmark::ClobberMemory();
  }
  int64_t flop = 0;
  if (c.op == ConvOp::Conv)
    flop = 2 * out_numel * (k.g.x[1] / k.g.groups) * k.g.k * k.g.k;  // out_numel = N*O*OH*OW
  else if (c.op == ConvOp::AvgPool)
    flop = 9 * out_numel;
  const int64_t wbytes = t.w.defined() ? static_cast<int64_t>(t.w.nbytes()) : 0;
  set_work(st, distinct_bytes(t.x) + wbytes + out_bytes, flop);
  set_alloc_counters(st, allocs);
  set_regime(st, span_bytes(t.x) + wbytes + out_bytes, k.threads);
}

void add_case(const Case& k) {
  RunName name;
  name.op(k.gemm ? "matmul" : cases::op_name(k.c.op))
      .layout(layout_name(k.c.layout))
      .style(style_name(k.c.style))
      .dtype(DType::Float32)
      .shape(k.gemm ? k.g.x : cases::shape_key(k.g))
      .threads(k.threads);
  add_run(name, [k](benchmark::State& st) { run_case(st, k); }, benchmark::kMillisecond);
}

}  // namespace

void register_family() {
  const Shape x = smoke() ? Shape{1, 8, 8, 8} : Shape{8, 64, 56, 56};  // smoke: as scripts/peers.py
  const int64_t cout = x[1];
  const Shape gemm{x[0] * x[2] * x[3], x[1] * 9, cout};  // pad 1, stride 1: OH*OW = H*W
  const cases::ConvGeometry g3{x, cout, 3, 1};
  for (int t : thread_counts()) {
    for (const cases::ConvCase& c : cases::conv_cases({ConvOp::Conv})) add_case({c, g3, t});
    add_case({{ConvOp::Conv, Layout::Contiguous, Style::Out}, {gemm}, t, true});
    for (const cases::ConvCase& c : cases::conv_cases({ConvOp::MaxPool, ConvOp::AvgPool})) add_case({c, g3, t});
    if (full()) {
      for (const cases::ConvCase& c : cases::conv_cases({ConvOp::Conv})) {
        if (c.layout != Layout::Contiguous && c.layout != Layout::ChannelsLast) continue;
        add_case({c, {{8, 32, 112, 112}, 32, 3, 32}, t});  // depthwise
        add_case({c, {{8, 256, 56, 56}, 64, 1, 1}, t});    // 1x1
      }
    }
  }
}

}  // namespace sb::bench
