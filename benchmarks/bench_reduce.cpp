// bench_reduce.cpp — reductions by direction and layout (CLAIMS.md L6).
//
// The cases (ops, layouts, dims, the call) are the table's (cases/reduce.h), which
// ReduceOnDevice runs too.
// ops: sum, mean, max, var (correction 1), out-of-place (the small result through the
//   caching allocator), over one dim of a 2-D R x C float32 tensor:
//   dim:inner  reduce dim 1 (along a row of the logical matrix) -> R values
//   dim:outer  reduce dim 0 (down a column)                     -> C values
// layouts: contiguous (row-major), column_major (a .t() view of a row-major C x R
//   buffer: the same logical matrix stored column by column), sliced (x[:, ::2] of an
//   R x 2C buffer: along a row every other element, Notes [Stride-2 float runs] and
//   [Stride-2 kept columns]). On a row-major tensor dim:inner walks memory in order; on a
//   column-major one dim:outer does.
// sizes: L2 512x256 (512 KiB), LLC 4096x4096 (64 MiB, sum only), DRAM 16384x8192
//   (512 MiB; quick: sum on every layout, mean/max/var on the contiguous one; full:
//   every op on each). sliced in quick: sum and max at L2 size, sum at DRAM size.
//   Threads 1 and 2. dtype f32; bf16 (accumulated in float32) sum and
//   var of the contiguous L2 and DRAM tensors in quick, every row's twin in full.
// Cost: one read of the input, one write of the result. flop per input element: 1 for
//   sum, mean and max (a comparison), 4 for var (the mean, then a subtraction, a
//   multiplication and an addition), whatever passes a kernel makes.
#include "bench_common.h"
#include "cases/reduce.h"
#include "stridebench/reduce.h"

namespace sb::bench {

const char* const kFamily = "reduce";

namespace {

struct Case {
  cases::ReduceCase c;
  Shape shape;  // logical R x C
  int threads;
  DType dtype = DType::Float32;
};

const Tensor& input(const Case& k) {
  const cases::Placement p = cases::reduce_placement(k.c, k.shape);
  return pooled(layout_name(k.c.layout), [&] {
    return cases::view_in(random_tensor(cases::storage_sizes(k.shape, p), 31, k.dtype), k.shape, p);
  });
}

void run_case(benchmark::State& st, const Case& k) {
  pool_scope(RunName::shape_key(k.shape) + RunName::dtype_key(k.dtype));
  ThreadScope ts(k.threads);
  const Tensor& x = input(k);
  auto call = [&] {
    Tensor y = cases::reduce_call(k.c, x);
    benchmark::DoNotOptimize(y);
  };
  const AllocCount allocs = warm_up(call);  // also the warm-up (Note [One warm-up per run])
  for (auto _ : st) call();
  const int64_t out_bytes = (k.c.inner ? k.shape[0] : k.shape[1]) * static_cast<int64_t>(dtype_size(k.dtype));
  set_work(st, distinct_bytes(x) + out_bytes, (k.c.op == ReduceOp::Var ? 4 : 1) * x.numel());
  set_alloc_counters(st, allocs);
  set_regime(st, span_bytes(x) + out_bytes, k.threads);
}

}  // namespace

void register_family() {
  struct Size {
    Shape shape;
    bool all_ops;  // false: sum only
  };
  const std::vector<Size> sizes = smoke() ? std::vector<Size>{{{64, 48}, true}}
                                          : std::vector<Size>{{{512, 256}, true}, {{4096, 4096}, false}, {{16384, 8192}, true}};
  // float32, then bfloat16 (accumulated in float32): in quick its sum and var over either
  // dim of the contiguous L2 and DRAM tensors; in full every float32 row's twin
  for (DType dt : {DType::Float32, DType::BFloat16}) {
    const bool bf = dt == DType::BFloat16 && !full();
    for (const Size& s : sizes) {
      if (bf && !s.all_ops) continue;
      for (int t : thread_counts()) {
        for (const cases::ReduceCase& c :
             cases::reduce_cases({ReduceOp::Sum, ReduceOp::Mean, ReduceOp::Max, ReduceOp::Var})) {
          const bool col = c.layout == Layout::ColumnMajor;
          if (c.op != ReduceOp::Sum && !s.all_ops) continue;
          if (bf && (c.op == ReduceOp::Mean || c.op == ReduceOp::Max)) continue;
          if (col && c.op != ReduceOp::Sum && s.shape[0] * s.shape[1] > (int64_t{1} << 24) && !full()) continue;
          if (col && bf) continue;
          const bool sliced = c.layout == Layout::Sliced;
          if (sliced && !full() && (bf || c.op == ReduceOp::Mean || c.op == ReduceOp::Var || s.shape == Shape{4096, 4096} ||
                                    (c.op == ReduceOp::Max && s.shape[0] * s.shape[1] > (int64_t{1} << 24))))
            continue;
          const RunName name = RunName()
                                   .op(reduce_op_name(c.op))
                                   .layout(layout_name(c.layout))
                                   .dtype(dt)
                                   .shape(s.shape)
                                   .threads(t)
                                   .dim(cases::dim_name(c));
          add_run(name, [k = Case{c, s.shape, t, dt}](benchmark::State& st) { run_case(st, k); });
        }
      }
    }
  }
}

}  // namespace sb::bench
