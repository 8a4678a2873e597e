// bench_copy_cuda.cpp — materialising layouts on cuda:0 (CLAIMS.md L4 and the channels-last
// conversion cost of L5 on the GPU). Every run allocates its result through the caching
// CUDA allocator (a cache hit after the first call) and copies once: bytes = read of
// the source + write of the result.
//
//   op:contiguous layout:transposed     x.t().contiguous(), 4096x4096 (64 MiB, as
//                                       bench_copy.cpp and the peers) and 8192x8192
//                                       (256 MiB): the tiled shared-memory transpose
//   op:contiguous layout:contiguous     the twin: clone() of a contiguous square
//                                       (one cudaMemcpy of the same bytes)
//   op:nchw_to_nhwc layout:contiguous   x.contiguous(ChannelsLast), 32x64x56x56 and
//                                       8x64x56x56 (bench_conv_cuda's inputs: the
//                                       channels-last break-even), a batched tiled
//                                       transpose
//   op:contiguous layout:channels_last  NHWC -> NCHW of the same tensor
//   op:contiguous layout:contiguous     clone() of the contiguous 32x64x56x56
//   the same three at 64x256x56x56 (205 MB), GPU only: every transpose pays a fixed
//                                       cost beyond its bytes at the DRAM rate
//                                       (docs/notes/cuda.md), a large share of a 25.7 MB
//                                       one and a small one here: the kernel's own rate
// `layout` is the source's layout, `shape` its logical sizes; style copy, f32 and bf16. The
// cases are the table's (cases/copy.h), which CopyOnDevice runs too.
// Ceiling: baseline d2d_copy (8192^2 transposed moves 512 MiB; docs/notes/cuda.md).
#include "cuda_bench_common.h"

namespace sb::bench {

const char* const kFamily = "copy";

namespace {

using CopyFn = std::function<Tensor(const Tensor&)>;

const Tensor& input(const Shape& s, DType dt) {
  return pooled("cuda/" + RunName::shape_key(s) + RunName::dtype_key(dt),
                [&] { return random_tensor(s, 11, dt).to(Device::cuda(0)); });
}

void run_copy(benchmark::State& st, const std::function<Tensor()>& source, const CopyFn& f) {
  SB_REQUIRE_DEVICE(st);
  const Tensor src = source();
  Tensor probe;
  const AllocCount a = measure_cuda_allocs([&] { probe = f(src); });
  SB_CHECK(!probe.shares_storage_with(src), "copy_cuda bench: expected a copy of ", src.str());
  const int64_t bytes = distinct_bytes(src) + static_cast<int64_t>(probe.nbytes());
  const int64_t ws = span_bytes(src) + span_bytes(probe);
  probe = Tensor();
  time_gpu_loop(
      st,
      [&] {
        Tensor y = f(src);
        benchmark::DoNotOptimize(y);
      },
      ws);
  set_work(st, bytes);
  set_alloc_counters(st, a);
  st.SetLabel(regime_label(ws));
}

}  // namespace

void register_family() {
  // float32, then bfloat16 (the same cases, half the bytes)
  for (DType dt : {DType::Float32, DType::BFloat16}) {
    std::vector<cases::CopyCase> table = copy_family_cases(smoke() ? std::vector<int64_t>{64} : std::vector<int64_t>{4096, 8192});
    if (!smoke()) {  // the layout conversions at a DRAM size, where the fixed cost is small
      const std::vector<cases::CopyCase> big = cases::nchw_cases({64, 256, 56, 56});
      table.insert(table.end(), big.begin(), big.end());
    }
    for (const cases::CopyCase& c : table) {
      const RunName name = gpu_name().op(cases::op_name(c.op)).layout(layout_name(c.layout)).style("copy").dtype(dt).shape(c.shape);
      add_manual_run(name, [c, dt](benchmark::State& st) {
        run_copy(
            st, [&] { return copy_source(c, [dt](const Shape& s) -> const Tensor& { return input(s, dt); }); },
            [c](const Tensor& x) { return cases::copy_call(c, x); });
      });
    }
  }
}

}  // namespace sb::bench
