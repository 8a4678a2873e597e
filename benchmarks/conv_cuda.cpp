// conv_cuda.cpp — conv2d on cuda:0, NCHW vs channels-last (CLAIMS.md L5 on the GPU; the
// break-even reads copy/op:nchw_to_nhwc of the same shape from bench_copy_cuda).
//
// x Nx64x56x56 (the shape key: x's logical NCHW sizes), w 64x64x3x3, no bias, padding
// 1, stride 1: a ResNet stage-1 layer, as the peers' conv cases. N = 8 (the peers'
// size) and 32 (the copy/op:nchw_to_nhwc row's shape, for the channels-last
// break-even). layouts: contiguous (x, w and out NCHW) and channels_last (x, w and out
// NHWC). styles: out (conv2d_out into an out of x's layout made before the loop) and
// outofplace (conv2d: out and the im2col workspace through the caching CUDA allocator).
// Path (lib/cuda/conv.cu): im2col (9 taps x 64 channels x 3136 pixels: 6.9 MiB per
// image; the 128 MiB workspace takes 18 images, so two chunks at N = 32), cuBLAS
// SGEMMs. flop = 2 N O OH OW C KH KW = 59.2 GFLOP at N = 32; bytes = x, w read once,
// out written once (im2col traffic not counted: it is the implementation's cost).
// Ceiling: baseline gemm_peak f32 (~1.1 ms at 55 TF/s for N = 32); the im2col
// workspace adds ~2 x 221 MiB of traffic (~0.15 ms at 3 TB/s).
#include "cuda_bench_common.h"
#include "ops/conv.h"

namespace sb::bench {

const char* const kFamily = "conv";

namespace {

struct Case {
  bool channels_last;
  bool out_style;
  Shape x;  // N, C, H, W
  int64_t O, k;
};

void run_case(benchmark::State& st, const Case& c) {
  SB_REQUIRE_DEVICE(st);
  const Device g = Device::cuda(0);
  const MemoryFormat fmt = c.channels_last ? MemoryFormat::ChannelsLast : MemoryFormat::Contiguous;
  pool_scope("cuda/" + RunName::shape_key(c.x));
  const Tensor& x = pooled(std::string("cuda/x/") + (c.channels_last ? "cl" : "nchw"),
                           [&] { return random_tensor(c.x, 51).to(g).contiguous(fmt); });
  const Tensor& w = pooled(std::string("cuda/w/") + (c.channels_last ? "cl" : "nchw"),
                           [&] { return random_tensor({c.O, c.x[1], c.k, c.k}, 52).to(g).contiguous(fmt); });
  const Tensor bias;  // none, as the peers' rows
  Conv2dParams p;
  p.padding = c.k / 2;
  Tensor out;
  if (c.out_style) out = empty(conv2d_output_sizes(x, w, bias, p), DType::Float32, g, fmt);
  auto call = [&] {
    if (c.out_style) {
      conv2d_out(out, x, w, bias, p);
    } else {
      Tensor y = conv2d(x, w, bias, p);
      benchmark::DoNotOptimize(y);
    }
  };
  const AllocCount allocs = measure_cuda_allocs(call);  // also the warm-up
  time_gpu_loop(st, call);
  const Shape os = conv2d_output_sizes(x, w, bias, p);
  const int64_t out_n = checked_numel(os, "conv_cuda bench");
  const int64_t flop = 2 * out_n * c.x[1] * c.k * c.k;
  const int64_t bytes = distinct_bytes(x) + distinct_bytes(w) + out_n * 4;
  set_work(st, bytes, flop);
  set_alloc_counters(st, allocs);
  st.SetLabel(regime_label(bytes));
}

}  // namespace

void register_family() {
  const std::vector<Shape> xs =
      smoke() ? std::vector<Shape>{{2, 8, 10, 10}} : std::vector<Shape>{{8, 64, 56, 56}, {32, 64, 56, 56}};
  const int64_t O = smoke() ? 8 : 64;
  for (const Shape& x : xs) {
    for (bool cl : {false, true}) {
      for (bool out_style : {true, false}) {
        const Case c{cl, out_style, x, O, 3};
        const RunName name = gpu_name()
                                 .op("conv2d")
                                 .layout(cl ? "channels_last" : "contiguous")
                                 .style(out_style ? "out" : "outofplace")
                                 .dtype(DType::Float32)
                                 .shape(x);
        add_manual_run(name, [c](benchmark::State& st) { run_case(st, c); });
      }
    }
  }
}

}  // namespace sb::bench
