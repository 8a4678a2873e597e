// bench_copy.cpp — materialising layouts (CLAIMS.md L4, the channels-last conversion
// cost of L5): every run allocates its result through the caching allocator and
// copies once. Cost: one read of the source, one write of the result (bytes =
// 2 x nbytes); the allocation is served from the cache after the first call.
//
//   op:contiguous layout:transposed     x.t().contiguous(), 4096x4096, 3000x3000 (rows not a
//                                       multiple of 64 bytes: Note [Whole lines only]), 1024x1024
//                                       (float32 rows 4 KiB apart, past the L2: Note [Aliased
//                                       transposes stream]), 1000x1000 (past the L2, under the
//                                       streaming threshold: Note [Direct small tiles]) and 256x256
//   op:contiguous layout:contiguous     the twin: a copy of the same bytes in the same
//                                       order (clone() of a contiguous tensor; a
//                                       contiguous() there would return itself)
//   op:nchw_to_nhwc layout:contiguous   x.contiguous(ChannelsLast), 32x64x56x56, and
//                                       8x64x56x56 (bench_conv's conv2d input: the
//                                       Channels-last table's break-even)
//   op:contiguous layout:channels_last  NHWC -> NCHW: contiguous() of a channels-last
//                                       tensor, 32x64x56x56
//   op:permute layout:contiguous        x.permute({2, 0, 1}).contiguous(), 256x256x256
// `layout` is the source's layout; `shape` its (logical) sizes. Threads 1 and 2. dtypes
// f32 and bf16 (every case in both). The cases are the table's (cases/copy.h), which
// CopyOnDevice runs too.
#include "bench_common.h"

namespace sb::bench {

const char* const kFamily = "copy";

namespace {

using CopyFn = std::function<Tensor(const Tensor&)>;

void run_copy(benchmark::State& st, const Tensor& src, const CopyFn& f, int threads) {
  ThreadScope ts(threads);
  Tensor probe;
  const AllocCount a = measure_allocs([&] { probe = f(src); });
  SB_CHECK(!probe.shares_storage_with(src), "copy bench: expected a copy of ", src.str());
  const int64_t bytes = distinct_bytes(src) + static_cast<int64_t>(probe.nbytes());
  const int64_t ws = span_bytes(src) + span_bytes(probe);
  probe = Tensor();
  for (auto _ : st) {
    Tensor y = f(src);
    benchmark::DoNotOptimize(y);
  }
  set_work(st, bytes);
  set_alloc_counters(st, a);
  set_regime(st, ws, threads);
}

const Tensor& input(const Shape& s, DType dt) {
  return pooled("in" + RunName::shape_key(s) + RunName::dtype_key(dt), [&] { return random_tensor(s, 11, dt); });
}

}  // namespace

void register_family() {
  const std::vector<int64_t> squares = smoke() ? std::vector<int64_t>{64} : std::vector<int64_t>{256, 1000, 1024, 3000, 4096};
  const Shape cube = smoke() ? Shape{8, 8, 8} : Shape{256, 256, 256};
  // float32, then bfloat16 (2-byte elements: the same cases, half the bytes)
  for (DType dt : {DType::Float32, DType::BFloat16}) {
    std::vector<cases::CopyCase> table = copy_family_cases(squares);
    table.push_back({cases::CopyOp::Permute, Layout::Contiguous, cube});
    for (int t : thread_counts()) {
      for (const cases::CopyCase& c : table) {
        const RunName name =
            RunName().op(cases::op_name(c.op)).layout(layout_name(c.layout)).style("copy").dtype(dt).shape(c.shape).threads(t);
        add_run(name, [c, t, dt](benchmark::State& st) {
          const Tensor src = copy_source(c, [dt](const Shape& s) -> const Tensor& { return input(s, dt); });
          run_copy(st, src, [c](const Tensor& x) { return cases::copy_call(c, x); }, t);
        });
      }
    }
  }
}

}  // namespace sb::bench
