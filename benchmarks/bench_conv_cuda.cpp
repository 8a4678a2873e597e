// bench_conv_cuda.cpp — conv2d on cuda:0, NCHW vs channels-last (CLAIMS.md L5 on the GPU; the
// break-even reads copy/op:nchw_to_nhwc of the same shape from bench_copy_cuda).
//
// The cases of bench_conv.cpp (and the peers'): the table of cases/conv.h, which
// ConvOnDevice runs too, on cuda:0: conv2d 3x3, 64 -> 64,
// stride 1, padding 1, no bias; shape key = the input's logical NCHW sizes.
//   8x64x56x56 (bench_conv's size): layouts contiguous (NCHW x and weights),
//     channels_last (NHWC x and weights), sliced (x every other column of an
//     [N, C, H, 2W] buffer), transposed (x a .transpose(2, 3) view of [N, C, W, H]);
//     weights contiguous except in channels_last.
//   32x64x56x56 (copy/op:nchw_to_nhwc's other shape): contiguous and channels_last.
// styles: out (conv2d_out into an output made before the loop, dense in the path's
// native layout: NHWC for channels_last, NCHW otherwise) and outofplace (conv2d: the
// result and the im2col workspace through the caching CUDA allocator).
// Path (lib/conv/conv.cu): im2col (9 taps x 64 channels x 3136 pixels: 6.9 MiB per
// image; the 128 MiB workspace takes 18 images, so two chunks at N = 32), cuBLAS
// SGEMMs; the NHWC path reads channels contiguously. flop = 2 N O OH OW C KH KW
// (14.8 GFLOP at N = 8); bytes = x (its elements once), w read once, out written once
// (the im2col traffic is the implementation's cost, not counted).
// max_pool2d / avg_pool2d 3x3 / 2, pad 1 on 8x64x56x56, contiguous and channels_last,
// out and outofplace (the CPU rows' case; CUDA: Note [CUDA pooling]). Ceiling of the
// conv rows: baseline gemm_peak f32; the im2col workspace adds ~2 x 55 MiB of traffic at
// N = 8 (the back-of-envelope times: docs/notes/cuda.md).
#include "cases/conv.h"
#include "cuda_bench_common.h"
#include "stridebench/conv.h"

namespace sb::bench {

const char* const kFamily = "conv";

namespace {


using cases::ConvOp;

struct Case {
  cases::ConvCase c;
  cases::ConvGeometry g;
};

// The table's operands (cases/conv.h) on cuda:0, pooled per placement.
cases::ConvOperands operands(const Case& k) {
  return cases::conv_operands(k.c, k.g, [&](const cases::Placement& p, const Shape& sizes, char role) {
    const Tensor& storage = pooled(std::string("cuda/") + role + p.describe(), [&] {
      return random_tensor(cases::storage_sizes(sizes, p), role == 'x' ? 51 : 52).to(Device::cuda(0));
    });
    return cases::view_in(storage, sizes, p);
  });
}

// conv2d: flop = 2 N O OH OW C KH KW; bytes = x (its elements once), w once, out once.
// Pooling: x read once, out written once; avg 9 flop per output element.
void run_case(benchmark::State& st, const Case& k) {
  SB_REQUIRE_DEVICE(st);
  pool_scope("cuda/" + RunName::shape_key(k.g.x));
  cases::ConvOperands t = operands(k);
  Tensor probe;
  const AllocCount allocs = measure_cuda_allocs([&] { probe = cases::conv_call(k.c, k.g, t); });  // also the warm-up
  const int64_t out_n = probe.numel();
  probe = Tensor();
  time_gpu_loop(st, [&] {
    Tensor y = cases::conv_call(k.c, k.g, t);
    benchmark::DoNotOptimize(y);
  });
  int64_t flop = 0;
  if (k.c.op == ConvOp::Conv) flop = 2 * out_n * (k.g.x[1] / k.g.groups) * k.g.k * k.g.k;
  else if (k.c.op == ConvOp::AvgPool) flop = 9 * out_n;
  const int64_t bytes = distinct_bytes(t.x) + (t.w.defined() ? distinct_bytes(t.w) : 0) + out_n * 4;
  set_work(st, bytes, flop);
  set_alloc_counters(st, allocs);
  st.SetLabel(regime_label(bytes));
}

}  // namespace

void register_family() {
  const Shape small = smoke() ? Shape{1, 8, 8, 8} : Shape{8, 64, 56, 56};
  const Shape big = smoke() ? Shape{2, 8, 10, 10} : Shape{32, 64, 56, 56};
  const int64_t O = smoke() ? 8 : 64;
  auto add_case = [](const Case& k) {
    const RunName name = gpu_name()
                             .op(cases::op_name(k.c.op))
                             .layout(layout_name(k.c.layout))
                             .style(style_name(k.c.style))
                             .dtype(DType::Float32)
                             .shape(k.g.x);
    add_manual_run(name, [k](benchmark::State& st) { run_case(st, k); });
  };
  for (const Shape& x : {small, big})
    for (const cases::ConvCase& c : cases::conv_cases({ConvOp::Conv})) {
      if (x == big && (c.layout == Layout::Sliced || c.layout == Layout::Transposed)) continue;
      add_case({c, {x, O, 3, 1}});
    }
  for (const cases::ConvCase& c : cases::conv_cases({ConvOp::MaxPool, ConvOp::AvgPool})) add_case({c, {small}});
}

}  // namespace sb::bench
