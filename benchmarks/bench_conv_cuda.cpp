// bench_conv_cuda.cpp — conv2d on cuda:0, NCHW vs channels-last (CLAIMS.md L5 on the GPU; the
// break-even reads copy/op:nchw_to_nhwc of the same shape from bench_copy_cuda).
//
// The cases of bench_conv.cpp (and the peers'), on cuda:0: conv2d 3x3, 64 -> 64,
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
#include "cuda_bench_common.h"
#include "stridebench/conv.h"

namespace sb::bench {

const char* const kFamily = "conv";

namespace {


// x of logical sizes s on cuda:0 in layout l.
Tensor make_x(Layout l, const Shape& s) {
  return in_layout(l, s, [](const Shape& storage) { return random_tensor(storage, 51).to(Device::cuda(0)); });
}

struct Case {
  Layout layout;
  bool out_style;
  Shape x;  // N, C, H, W
  int64_t O, k;
};

void run_case(benchmark::State& st, const Case& c) {
  SB_REQUIRE_DEVICE(st);
  const Device g = Device::cuda(0);
  const bool cl = c.layout == Layout::ChannelsLast;
  const MemoryFormat fmt = cl ? MemoryFormat::ChannelsLast : MemoryFormat::Contiguous;
  pool_scope("cuda/" + RunName::shape_key(c.x));
  const Tensor& x = pooled(std::string("cuda/x/") + layout_name(c.layout), [&] { return make_x(c.layout, c.x); });
  const Tensor& w = pooled(std::string("cuda/w/") + (cl ? "cl" : "nchw"),
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

// max_pool2d / avg_pool2d 3x3, stride 2, pad 1 on cuda:0 (the CPU rows' case: x read
// once, out written once; avg 9 flop per output element).
void run_pool(benchmark::State& st, Layout l, bool is_max, bool out_style, const Shape& s) {
  SB_REQUIRE_DEVICE(st);
  const Device g = Device::cuda(0);
  const MemoryFormat fmt = l == Layout::ChannelsLast ? MemoryFormat::ChannelsLast : MemoryFormat::Contiguous;
  pool_scope("cuda/" + RunName::shape_key(s));
  const Tensor& x = pooled(std::string("cuda/x/") + layout_name(l), [&] { return make_x(l, s); });
  const Pool2dParams pp{3, 2, 1};
  const Shape os{s[0], s[1], (s[2] - 1) / 2 + 1, (s[3] - 1) / 2 + 1};
  Tensor out;
  if (out_style) out = empty(os, DType::Float32, g, fmt);
  auto call = [&] {
    if (out_style) {
      if (is_max) max_pool2d_out(out, x, pp);
      else avg_pool2d_out(out, x, pp);
    } else {
      Tensor y = is_max ? max_pool2d(x, pp) : avg_pool2d(x, pp);
      benchmark::DoNotOptimize(y);
    }
  };
  const AllocCount allocs = measure_cuda_allocs(call);  // also the warm-up
  time_gpu_loop(st, call);
  const int64_t out_n = checked_numel(os, "pool_cuda bench");
  const int64_t bytes = distinct_bytes(x) + out_n * 4;
  set_work(st, bytes, is_max ? 0 : 9 * out_n);
  set_alloc_counters(st, allocs);
  st.SetLabel(regime_label(bytes));
}

}  // namespace

void register_family() {
  const Shape small = smoke() ? Shape{1, 8, 8, 8} : Shape{8, 64, 56, 56};
  const Shape big = smoke() ? Shape{2, 8, 10, 10} : Shape{32, 64, 56, 56};
  const int64_t O = smoke() ? 8 : 64;
  for (const Shape& x : {small, big}) {
    for (Layout l : {Layout::Contiguous, Layout::ChannelsLast, Layout::Sliced, Layout::Transposed}) {
      if (x == big && (l == Layout::Sliced || l == Layout::Transposed)) continue;
      for (bool out_style : {true, false}) {
        const Case c{l, out_style, x, O, 3};
        const RunName name = gpu_name()
                                 .op("conv2d")
                                 .layout(layout_name(l))
                                 .style(out_style ? "out" : "outofplace")
                                 .dtype(DType::Float32)
                                 .shape(x);
        add_manual_run(name, [c](benchmark::State& st) { run_case(st, c); });
      }
    }
  }
  for (bool is_max : {true, false})
    for (Layout l : {Layout::Contiguous, Layout::ChannelsLast})
      for (bool out_style : {true, false}) {
        const RunName name = gpu_name()
                                 .op(is_max ? "max_pool2d" : "avg_pool2d")
                                 .layout(layout_name(l))
                                 .style(out_style ? "out" : "outofplace")
                                 .dtype(DType::Float32)
                                 .shape(small);
        add_manual_run(name, [=](benchmark::State& st) { run_pool(st, l, is_max, out_style, small); });
      }
}

}  // namespace sb::bench
