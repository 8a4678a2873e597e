// bench_views.cpp — views vs copies (CLAIMS.md L7): time per call and the bytes each
// call copies and allocates.
//
// Metadata-only calls (style:view), on a contiguous 32x64x56x56 float32 tensor (x) or
// its transposed view (xt = x.transpose(2, 3)): view, reshape (viewable case), transpose,
// permute, flatten, slice (step 2), select, expand (of a 1x64x56x56 tensor), and
// contiguous() of an already contiguous tensor. Cost: O(dim) metadata, no tensor data,
// bytes = 0, peak_alloc_bytes = 0 expected (the Shape vectors are not tensor memory).
// Copies (style:copy): reshape of xt (not viewable: copies), contiguous() of xt,
// clone() of x and of xt. Cost: one read and one write of 25.7 MB, one allocation.
//
// Every run reports bytes (moved by one call), peak_alloc_bytes and allocs_per_iter
// (measured on one call before the timed loop, bench_common.h), and copies a regime.
// Metadata calls run on 1 thread (no thread count changes them); copies on 1 and 2.
#include "bench_common.h"

namespace sb::bench {

const char* const kFamily = "views";

namespace {

Shape view_shape() { return smoke() ? Shape{2, 4, 6, 6} : Shape{32, 64, 56, 56}; }

const Tensor& source() {
  return pooled("x", [] { return random_tensor(view_shape(), 1); });
}
const Tensor& source_t() {  // a transposed view: stored as N, C, W, H
  return pooled("xt", [] {
    Shape s = view_shape();
    std::swap(s[2], s[3]);
    return random_tensor(s, 2).transpose(2, 3);
  });
}
const Tensor& expandable() {
  return pooled("e", [] {
    Shape s = view_shape();
    s[0] = 1;
    return random_tensor(s, 3);
  });
}

using ViewFn = std::function<Tensor()>;

void run_call(benchmark::State& st, const ViewFn& f, bool copies, int threads) {
  ThreadScope ts(threads);
  Tensor probe;
  const AllocCount a = measure_allocs([&] { probe = f(); });
  const bool shares = probe.shares_storage_with(source()) || probe.shares_storage_with(source_t()) ||
                      probe.shares_storage_with(expandable());
  SB_CHECK(shares != copies, "views bench: expected ", copies ? "a copy" : "a view", ", got ", probe.str());
  const int64_t bytes = copies ? 2 * static_cast<int64_t>(probe.nbytes()) : 0;
  probe = Tensor();
  for (auto _ : st) {
    Tensor v = f();
    benchmark::DoNotOptimize(v);
  }
  set_work(st, bytes);
  set_alloc_counters(st, a);
  if (copies) set_regime(st, bytes, threads);
}

}  // namespace

void register_family() {
  const Shape s = view_shape();
  const int64_t n1 = s[1] * s[2] * s[3];
  struct Case {
    const char* op;
    const char* layout;
    bool copies;
    ViewFn f;
  };
  const std::vector<Case> cases = {
      {"view", "contiguous", false, [n1] { return source().view({source().size(0), n1}); }},
      {"reshape", "contiguous", false, [n1] { return source().reshape({source().size(0), n1}); }},
      {"transpose", "contiguous", false, [] { return source().transpose(2, 3); }},
      {"permute", "contiguous", false, [] { return source().permute({0, 2, 3, 1}); }},
      {"flatten", "contiguous", false, [] { return source().flatten(); }},
      {"slice", "contiguous", false, [] { return source().slice(1, 0, std::nullopt, 2); }},
      {"select", "contiguous", false, [] { return source().select(0, 0); }},
      {"expand", "contiguous", false, [s] { return expandable().expand(s); }},
      {"contiguous", "contiguous", false, [] { return source().contiguous(); }},
      {"reshape", "transposed", true, [n1] { return source_t().reshape({source_t().size(0), n1}); }},
      {"contiguous", "transposed", true, [] { return source_t().contiguous(); }},
      {"clone", "contiguous", true, [] { return source().clone(); }},
      {"clone", "transposed", true, [] { return source_t().clone(); }},
  };
  for (const auto& c : cases) {
    const std::vector<int> threads = c.copies ? thread_counts() : std::vector<int>{1};
    for (int t : threads) {
      const RunName name = RunName()
                               .op(c.op)
                               .layout(c.layout)
                               .style(c.copies ? "copy" : "view")
                               .dtype(DType::Float32)
                               .shape(s)
                               .threads(t);
      add_run(name, [c, t](benchmark::State& st) { run_call(st, c.f, c.copies, t); },
              c.copies ? benchmark::kMicrosecond : benchmark::kNanosecond);
    }
  }
}

}  // namespace sb::bench
