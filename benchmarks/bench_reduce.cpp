// bench_reduce.cpp — reductions by direction and layout (CLAIMS.md L6).
//
// ops: sum, mean, max, var (correction 1), out-of-place (the small result through the
//   caching allocator), over one dim of a 2-D R x C float32 tensor:
//   dim:inner  reduce dim 1 (along a row of the logical matrix) -> R values
//   dim:outer  reduce dim 0 (down a column)                     -> C values
// layouts: contiguous (row-major), column_major (a .t() view of a row-major C x R
//   buffer: the same logical matrix stored column by column). On a row-major tensor
//   dim:inner walks memory in order; on a column-major one dim:outer does.
// sizes: L2 512x256 (512 KiB), LLC 4096x4096 (64 MiB, sum only), DRAM 16384x8192
//   (512 MiB; quick: sum on both layouts, mean/max/var on the contiguous one; full:
//   every op on both). Threads 1 and 2. dtype f32; bf16 (accumulated in float32) sum and
//   var of the contiguous L2 and DRAM tensors in quick, every row's twin in full.
// Cost: one read of the input, one write of the result. flop per input element: 1 for
//   sum, mean and max (a comparison), 4 for var (the mean, then a subtraction, a
//   multiplication and an addition), whatever passes a kernel makes.
#include "bench_common.h"
#include "stridebench/reduce.h"

namespace sb::bench {

const char* const kFamily = "reduce";

namespace {

enum class Op { Sum, Mean, Max, Var };
const char* op_name(Op op) {
  switch (op) {
    case Op::Sum: return "sum";
    case Op::Mean: return "mean";
    case Op::Max: return "max";
    case Op::Var: return "var";
  }
  return "?";
}

struct Case {
  Op op;
  bool column_major;
  bool inner;
  Shape shape;  // logical R x C
  int threads;
  DType dtype = DType::Float32;
};

const Tensor& input(const Case& c) {
  const int64_t r = c.shape[0], cols = c.shape[1];
  return pooled(c.column_major ? "col" : "row", [&] {
    return in_layout(c.column_major ? Layout::ColumnMajor : Layout::Contiguous, {r, cols},
                     [&](const Shape& storage) { return random_tensor(storage, 31, c.dtype); });
  });
}

void run_case(benchmark::State& st, const Case& c) {
  pool_scope(RunName::shape_key(c.shape) + RunName::dtype_key(c.dtype));
  ThreadScope ts(c.threads);
  const Tensor& x = input(c);
  const Shape dims{c.inner ? 1 : 0};
  auto call = [&] {
    Tensor y;
    switch (c.op) {
      case Op::Sum: y = sum(x, dims); break;
      case Op::Mean: y = mean(x, dims); break;
      case Op::Max: y = max(x, dims); break;
      case Op::Var: y = var(x, dims); break;
    }
    benchmark::DoNotOptimize(y);
  };
  const AllocCount allocs = measure_allocs(call);  // also the warm-up
  for (auto _ : st) call();
  const int64_t out_bytes = (c.inner ? c.shape[0] : c.shape[1]) * static_cast<int64_t>(dtype_size(c.dtype));
  set_work(st, distinct_bytes(x) + out_bytes, (c.op == Op::Var ? 4 : 1) * x.numel());
  set_alloc_counters(st, allocs);
  set_regime(st, span_bytes(x) + out_bytes, c.threads);
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
        for (Op op : {Op::Sum, Op::Mean, Op::Max, Op::Var}) {
          if (op != Op::Sum && !s.all_ops) continue;
          if (bf && (op == Op::Mean || op == Op::Max)) continue;
          for (bool col : {false, true}) {
            if (col && op != Op::Sum && s.shape[0] * s.shape[1] > (int64_t{1} << 24) && !full()) continue;
            if (col && bf) continue;
            for (bool inner : {true, false}) {
              const Case c{op, col, inner, s.shape, t, dt};
              const RunName name = RunName()
                                       .op(op_name(op))
                                       .layout(col ? "column_major" : "contiguous")
                                       .dtype(dt)
                                       .shape(s.shape)
                                       .threads(t)
                                       .dim(inner ? "inner" : "outer");
              add_run(name, [c](benchmark::State& st) { run_case(st, c); });
            }
          }
        }
      }
    }
  }
}

}  // namespace sb::bench
