// bench_matmul_cuda.cpp — matmul on cuda:0 through cuBLAS by operand layout and style
// (CLAIMS.md L1 and S2 on the GPU).
//
// A [M, K] @ B [K, N], shape key MxKxN; the case table of bench_matmul.cpp
// (cases/matmul.h, run by MatmulOnDevice too) and the peers' layouts:
// `layout` names the non-contiguous operand, always A; B is contiguous except in
// column_major:
//   contiguous        A, B row-major
//   transposed        A a .t() view of a row-major [K, M] buffer: cuBLAS op T, no copy
//   sliced            A every other row of a row-major [2M, K] buffer: still row-major
//                     with leading dimension 2K for cuBLAS, no copy
//   column_major      A and B column-major (.t() views of [K, M] and [N, K]); the out=
//                     buffer column-major too (computed as out^T = B^T A^T)
//   contiguous_first  A transposed as above; A.contiguous() then matmul, timed together
//                     (bytes count the copy's read and write of A)
// None of these needs a copy inside matmul on the GPU (operand_copies 0: strides that
// fit no cuBLAS layout, e.g. a column-stepped slice, would show 1 or 2 there).
// styles: out (matmul_out into C made before the loop), outofplace (matmul: C through
// the caching CUDA allocator), outofplace_system (the same with cudaMalloc/cudaFree,
// contiguous only).
// dtypes: f32 (CUBLAS_COMPUTE_32F, no tensor cores), tf32 (f32 tensors with
//   cuda::set_allow_tf32: TF32 tensor cores), f16 and bf16 (fp16 / bf16 tensor cores,
//   fp32 accumulation).
// sizes: square 1024 (bench_matmul's and the peers' quick size) and 4096 (full adds
//   8192). Counters: flop = 2 M N K; bytes = A, B read once, C written once;
//   operand_copies = operands matmul copied in one call; peak_alloc_bytes /
//   allocs_per_iter from the CUDA allocators.
// Ceiling: baseline gemm_peak of the same dtype (the nominal and measured peaks per
//   dtype: docs/notes/cuda.md, Ceilings).
#include <optional>

#include "cases/matmul.h"
#include "cuda_bench_common.h"
#include "stridebench/matmul.h"

namespace sb::bench {

const char* const kFamily = "matmul";

namespace {

struct Case {
  Layout layout;
  Style style;
  DType dtype;  // of the tensors
  bool tf32;
  int64_t m;    // M = N = K
};

// The table's operands (cases::mm_operands) on cuda:0, pooled per placement
// (contiguous_first shares transposed's A).
cases::MmOperands operands(const Case& c) {
  return cases::mm_operands({c.layout, c.style}, c.m, c.m, c.m, [&](const cases::Placement& p, const Shape& sizes, char role) {
    const Tensor& storage = pooled(std::string("cuda/") + role + p.describe(), [&] {
      return random_tensor(cases::storage_sizes(sizes, p), role == 'a' ? 41 : 42, c.dtype).to(Device::cuda(0));
    });
    return cases::view_in(storage, sizes, p);
  });
}

void run_case(benchmark::State& st, const Case& c) {
  SB_REQUIRE_DEVICE(st);
  pool_scope("cuda/" + std::to_string(c.m) + RunName::dtype_key(c.dtype));
  const int64_t M = c.m, N = c.m, K = c.m;
  cases::MmOperands t = operands(c);
  const Tensor &a = t.a, &b = t.b;
  const bool first = c.layout == Layout::ContiguousFirst;
  auto call = [&] {
    Tensor r = cases::mm_call({c.layout, c.style}, t);
    benchmark::DoNotOptimize(r);
  };
  const cuda::Tf32Guard tf32(c.tf32);  // restores the TF32 setting however the run ends
  std::optional<cuda::AllocatorGuard> direct;
  if (c.style == Style::OutofplaceSystem) direct.emplace(cuda::CudaAllocatorKind::Direct);
  cuda::reset_matmul_operand_copies();
  const AllocCount allocs = measure_cuda_allocs(call);  // also the warm-up (cuBLAS heuristics)
  const int64_t copies = cuda::matmul_operand_copies();
  time_gpu_loop(st, call);
  direct.reset();
  const int64_t es = static_cast<int64_t>(dtype_size(c.dtype));
  const int64_t copy_bytes = first ? 2 * distinct_bytes(a) : 0;  // the caller's copy of a
  set_work(st, distinct_bytes(a) + distinct_bytes(b) + M * N * es + copy_bytes, 2 * M * N * K);
  set_alloc_counters(st, allocs);
  st.counters["operand_copies"] = benchmark::Counter(static_cast<double>(copies));
  st.SetLabel(regime_label(span_bytes(a) + span_bytes(b) + M * N * es));
}

}  // namespace

void register_family() {
  const std::vector<int64_t> sizes = smoke() ? std::vector<int64_t>{64}
                                     : full() ? std::vector<int64_t>{1024, 4096, 8192}
                                              : std::vector<int64_t>{1024, 4096};
  struct Type {
    DType dtype;
    bool tf32;
    const char* key;
  };
  const Type types[] = {{DType::Float32, false, "f32"}, {DType::Float32, true, "tf32"}, {DType::Float16, false, "f16"},
                        {DType::BFloat16, false, "bf16"}};
  for (int64_t m : sizes) {
    for (const Type& t : types) {
      for (const cases::MmCase& mc : cases::matmul_cases()) {
        if (mc.style == Style::OutofplaceSystem && mc.layout != Layout::Contiguous) continue;
        const Case c{mc.layout, mc.style, t.dtype, t.tf32, m};
        const RunName name = gpu_name()
                                 .op("matmul")
                                 .layout(layout_name(mc.layout))
                                 .style(style_name(mc.style))
                                 .set("dtype", t.key)
                                 .shape({m, m, m});
        add_manual_run(name, [c](benchmark::State& st) { run_case(st, c); });
      }
    }
  }
}

}  // namespace sb::bench
