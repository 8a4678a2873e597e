// bench_reduce_cuda.cpp — sum by direction and layout on cuda:0 (CLAIMS.md L6 on the GPU).
//
// sum over one dim of a 2-D R x C float32 tensor, out-of-place (the small result through
// the caching CUDA allocator):
//   dim:inner  reduce dim 1 -> R values (reduce.cu: a block per output row, warp shuffles)
//   dim:outer  reduce dim 0 -> C values (a thread per output, coalesced across threads)
// layouts: contiguous (row-major), column_major (a .t() view of a row-major C x R
//   buffer): on a column-major tensor dim:outer walks memory in order.
// sizes: 4096x4096 (64 MiB: DRAM on an H100, whose L2 is 50 MiB) and 16384x8192
//   (512 MiB). Cost: one read of the input, one write of the result; 1 flop per input
//   element. Ceiling: baseline d2d_copy (a read-only kernel can beat it: it moves half
//   the bytes of a copy per element, so the % may pass 100 against a copy's rate).
#include "cuda_bench_common.h"
#include "stridebench/reduce.h"

namespace sb::bench {

const char* const kFamily = "reduce";

namespace {

struct Case {
  bool column_major;
  bool inner;
  Shape shape;  // logical R x C
  DType dtype = DType::Float32;
};

const Tensor& input(const Case& c) {
  const int64_t r = c.shape[0], cols = c.shape[1];
  return pooled(c.column_major ? "cuda/col" : "cuda/row", [&] {
    return in_layout(c.column_major ? Layout::ColumnMajor : Layout::Contiguous, {r, cols},
                     [&](const Shape& storage) { return random_tensor(storage, 31, c.dtype).to(Device::cuda(0)); });
  });
}

void run_case(benchmark::State& st, const Case& c) {
  SB_REQUIRE_DEVICE(st);
  pool_scope("cuda/" + RunName::shape_key(c.shape) + RunName::dtype_key(c.dtype));
  const Tensor& x = input(c);
  const Shape dims{c.inner ? 1 : 0};
  auto call = [&] {
    Tensor y = sum(x, dims);
    benchmark::DoNotOptimize(y);
  };
  const AllocCount allocs = measure_cuda_allocs(call);  // also the warm-up
  time_gpu_loop(st, call);
  const int64_t out_bytes = (c.inner ? c.shape[0] : c.shape[1]) * static_cast<int64_t>(dtype_size(c.dtype));
  set_work(st, distinct_bytes(x) + out_bytes, x.numel());
  set_alloc_counters(st, allocs);
  st.SetLabel(regime_label(span_bytes(x) + out_bytes));
}

}  // namespace

void register_family() {
  const std::vector<Shape> sizes =
      smoke() ? std::vector<Shape>{{64, 48}} : std::vector<Shape>{{4096, 4096}, {16384, 8192}};
  for (DType dt : {DType::Float32, DType::BFloat16})  // bf16: accumulated in float32
    for (const Shape& s : sizes) {
      for (bool col : {false, true}) {
        if (col && dt != DType::Float32) continue;
        for (bool inner : {true, false}) {
          const Case c{col, inner, s, dt};
          const RunName name = gpu_name()
                                   .op("sum")
                                   .layout(col ? "column_major" : "contiguous")
                                   .dtype(dt)
                                   .shape(s)
                                   .dim(inner ? "inner" : "outer");
          add_manual_run(name, [c](benchmark::State& st) { run_case(st, c); });
        }
      }
    }
}

}  // namespace sb::bench
