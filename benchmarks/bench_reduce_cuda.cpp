// bench_reduce_cuda.cpp — sum by direction and layout on cuda:0 (CLAIMS.md L6 on the GPU).
//
// sum over one dim of a 2-D R x C float32 tensor, out-of-place (the small result through
// the caching CUDA allocator):
//   dim:inner  reduce dim 1 -> R values (reduce.cu: a block per output row, warp shuffles)
//   dim:outer  reduce dim 0 -> C values (a thread per output, coalesced across threads)
// layouts: contiguous (row-major), column_major (a .t() view of a row-major C x R
//   buffer): on a column-major tensor dim:outer walks memory in order; sliced (x[:, ::2]
//   of an R x 2C buffer, float32 only).
// sizes: 4096x4096 (64 MiB: DRAM on an H100, whose L2 is 50 MiB) and 16384x8192
//   (512 MiB). Cost: one read of the input, one write of the result; 1 flop per input
//   element. The cases and the call are the table's (cases/reduce.h), which
//   ReduceOnDevice runs too. Ceiling: baseline d2d_copy (a read-only kernel can beat it: it moves half
//   the bytes of a copy per element, so the % may pass 100 against a copy's rate).
#include "cases/reduce.h"
#include "cuda_bench_common.h"
#include "stridebench/reduce.h"

namespace sb::bench {

const char* const kFamily = "reduce";

namespace {

struct Case {
  cases::ReduceCase c;
  Shape shape;  // logical R x C
  DType dtype = DType::Float32;
};

const Tensor& input(const Case& k) {
  const cases::Placement p = cases::reduce_placement(k.c, k.shape);
  return pooled(std::string("cuda/") + layout_name(k.c.layout), [&] {
    return cases::view_in(random_tensor(cases::storage_sizes(k.shape, p), 31, k.dtype).to(Device::cuda(0)), k.shape, p);
  });
}

void run_case(benchmark::State& st, const Case& k) {
  SB_REQUIRE_DEVICE(st);
  pool_scope("cuda/" + RunName::shape_key(k.shape) + RunName::dtype_key(k.dtype));
  const Tensor& x = input(k);
  auto call = [&] {
    Tensor y = cases::reduce_call(k.c, x);
    benchmark::DoNotOptimize(y);
  };
  const AllocCount allocs = measure_cuda_allocs(call);  // also the warm-up
  const int64_t out_bytes = (k.c.inner ? k.shape[0] : k.shape[1]) * static_cast<int64_t>(dtype_size(k.dtype));
  time_gpu_loop(st, call, span_bytes(x) + out_bytes);
  set_work(st, distinct_bytes(x) + out_bytes, x.numel());
  set_alloc_counters(st, allocs);
  st.SetLabel(regime_label(span_bytes(x) + out_bytes));
}

}  // namespace

void register_family() {
  const std::vector<Shape> sizes =
      smoke() ? std::vector<Shape>{{64, 48}} : std::vector<Shape>{{4096, 4096}, {16384, 8192}};
  for (DType dt : {DType::Float32, DType::BFloat16})  // bf16: accumulated in float32
    for (const Shape& s : sizes)
      for (const cases::ReduceCase& c : cases::reduce_cases({ReduceOp::Sum})) {
        if (c.layout != Layout::Contiguous && dt != DType::Float32) continue;
        const RunName name = gpu_name()
                                 .op(reduce_op_name(c.op))
                                 .layout(layout_name(c.layout))
                                 .dtype(dt)
                                 .shape(s)
                                 .dim(cases::dim_name(c));
        add_manual_run(name, [k = Case{c, s, dt}](benchmark::State& st) { run_case(st, k); });
      }
}

}  // namespace sb::bench
