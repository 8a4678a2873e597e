// bench_conv_cuda.cpp — conv2d on cuda:0, NCHW vs channels-last per precision (CLAIMS.md
// L5 on the GPU; the break-even reads copy/op:nchw_to_nhwc of the same shape from
// bench_copy_cuda).
//
// The cases of bench_conv.cpp (and the peers'): the table of cases/conv.h, which
// ConvOnDevice runs too, on cuda:0; stride 1, padding k / 2, no bias; shape key =
// cases::shape_key (the input's NCHW sizes; then output channels, kernel and groups
// when the layer is not 3x3 C -> C).
//   float32, 8x64x56x56 -> 64 3x3 (bench_conv's size): layouts contiguous (NCHW x and
//     weights), channels_last (NHWC x and weights), sliced (x every other column of an
//     [N, C, H, 2W] buffer), transposed (x a .transpose(2, 3) view of [N, C, W, H]);
//     weights contiguous except in channels_last; 32x64x56x56 (copy/op:nchw_to_nhwc's
//     other shape): contiguous and channels_last. Styles out and outofplace.
//   The layers users run (issue #48's table): 32x64x56x56 -> 64, 32x128x28x28 -> 128
//     and 32x256x14x14 -> 256 3x3, 32x256x56x56 -> 64 1x1, 8x64x56x56 -> 64 3x3, in
//     dtypes f32 (TF32 off), tf32 (float32 with set_allow_tf32), f16 and bf16,
//     contiguous and channels_last, outofplace (the float32 rows above stand for those
//     layers' f32 rows where they coincide).
// styles: out (conv2d_out into an output made before the loop, dense in the case's
// native layout: NHWC for channels_last, NCHW otherwise) and outofplace (conv2d: the
// result and the workspace through the caching CUDA allocator).
// Path: cuDNN where the build has it (lib/conv/conv_cudnn.cpp, Note [cuDNN conv plans]:
// the plan chosen at the warm-up call; the label names its engine, engine:<tag>, and
// the context cuDNN's version, sb_cudnn_version), else im2col + cuBLAS SGEMMs
// (float32 only; rows named impl:im2col, so the two never share a table row).
// flop = 2 N O OH OW C/groups KH KW; bytes = x (its elements once), w read once, out
// written once (a path's workspace traffic is its own cost, not counted). Ceiling of
// the conv rows: baseline gemm_peak of the row's dtype.
// max_pool2d / avg_pool2d 3x3 / 2, pad 1 on 8x64x56x56, contiguous and channels_last,
// out and outofplace (the CPU rows' case; CUDA: Note [CUDA pooling]).
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
  DType dtype = DType::Float32;
  bool tf32 = false;
};

// The table's operands (cases/conv.h) on cuda:0 in the case's dtype, pooled per placement.
cases::ConvOperands operands(const Case& k) {
  return cases::conv_operands(k.c, k.g, [&](const cases::Placement& p, const Shape& sizes, char role) {
    const Tensor& storage =
        pooled(std::string("cuda/") + role + RunName::shape_key(sizes) + dtype_name(k.dtype) + p.describe(), [&] {
          return random_tensor(cases::storage_sizes(sizes, p), role == 'x' ? 51 : 52).to(k.dtype).to(Device::cuda(0));
        });
    return cases::view_in(storage, sizes, p);
  });
}

// conv2d: flop = 2 N O OH OW C KH KW; bytes = x (its elements once), w once, out once.
// Pooling: x read once, out written once; avg 9 flop per output element.
void run_case(benchmark::State& st, const Case& k) {
  SB_REQUIRE_DEVICE(st);
  pool_scope("cuda/" + RunName::shape_key(k.g.x) + dtype_name(k.dtype));
  const cuda::Tf32Guard tf32(k.tf32);
  cases::ConvOperands t = operands(k);
  Tensor probe;
  const AllocCount allocs = measure_cuda_allocs([&] { probe = cases::conv_call(k.c, k.g, t); });  // also the warm-up
  const int64_t out_n = probe.numel();
  const std::string engine = k.c.op == ConvOp::Conv ? cuda::conv2d_last_plan().engine : "";
  probe = Tensor();
  time_gpu_loop(st, [&] {
    Tensor y = cases::conv_call(k.c, k.g, t);
    benchmark::DoNotOptimize(y);
  });
  int64_t flop = 0;
  if (k.c.op == ConvOp::Conv) flop = 2 * out_n * (k.g.x[1] / k.g.groups) * k.g.k * k.g.k;
  else if (k.c.op == ConvOp::AvgPool) flop = 9 * out_n;
  const int64_t bytes = distinct_bytes(t.x) + (t.w.defined() ? distinct_bytes(t.w) : 0) +
                        out_n * static_cast<int64_t>(dtype_size(k.dtype));
  set_work(st, bytes, flop);
  set_alloc_counters(st, allocs);
  st.SetLabel(regime_label(bytes) + (engine.empty() ? "" : " engine:" + engine));
}

}  // namespace

void register_family() {
  benchmark::AddCustomContext("sb_gpu_conv", cuda::conv2d_backend());
  const int v = cuda::cudnn_version();
  benchmark::AddCustomContext("sb_cudnn_version", v ? std::to_string(v) : "");
  const bool im2col = std::string(cuda::conv2d_backend()) == "im2col";
  const Shape small = smoke() ? Shape{1, 8, 8, 8} : Shape{8, 64, 56, 56};
  const Shape big = smoke() ? Shape{2, 8, 10, 10} : Shape{32, 64, 56, 56};
  const int64_t O = smoke() ? 8 : 64;
  auto add_case = [im2col](const Case& k) {
    RunName name = gpu_name();
    name.op(cases::op_name(k.c.op));
    if (im2col && k.c.op == ConvOp::Conv) name.impl("im2col");
    name.layout(layout_name(k.c.layout)).style(style_name(k.c.style));
    if (k.tf32) name.set("dtype", "tf32");
    else name.dtype(k.dtype);
    name.shape(cases::shape_key(k.g));
    add_manual_run(name, [k](benchmark::State& st) { run_case(st, k); });
  };
  for (const Shape& x : {small, big})
    for (const cases::ConvCase& c : cases::conv_cases({ConvOp::Conv})) {
      if (x == big && (c.layout == Layout::Sliced || c.layout == Layout::Transposed)) continue;
      add_case({c, {x, O, 3, 1}});
    }
  for (const cases::ConvCase& c : cases::conv_cases({ConvOp::MaxPool, ConvOp::AvgPool})) add_case({c, {small}});
  // the layers of issue #48 in every precision; float32 where the rows above lack it
  const std::vector<cases::ConvGeometry> layers =
      smoke() ? std::vector<cases::ConvGeometry>{{{2, 8, 10, 10}, 8, 3, 1}, {{2, 16, 6, 6}, 8, 1, 1}}
              : std::vector<cases::ConvGeometry>{{{32, 64, 56, 56}, 64, 3, 1},
                                                 {{32, 128, 28, 28}, 128, 3, 1},
                                                 {{32, 256, 14, 14}, 256, 3, 1},
                                                 {{32, 256, 56, 56}, 64, 1, 1},
                                                 {{8, 64, 56, 56}, 64, 3, 1}};
  struct Precision {
    DType dt;
    bool tf32;
  };
  const Precision precisions[] = {
      {DType::Float32, false}, {DType::Float32, true}, {DType::Float16, false}, {DType::BFloat16, false}};
  for (const Precision& pr : precisions) {
    if (im2col && pr.dt != DType::Float32) continue;  // Note [16-bit conv through float32]: not a GPU kernel
    for (const cases::ConvGeometry& g : layers) {
      const bool listed = g.x == small || g.x == big;
      if (pr.dt == DType::Float32 && !pr.tf32 && listed && g.cout == O && g.k == 3) continue;
      for (const Layout l : {Layout::Contiguous, Layout::ChannelsLast})
        add_case({{ConvOp::Conv, l, Style::Outofplace}, g, pr.dt, pr.tf32});
    }
  }
}

}  // namespace sb::bench
