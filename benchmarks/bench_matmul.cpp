// bench_matmul.cpp — float32 matmul by operand layout and by style (CLAIMS.md L1, S2),
// with OpenBLAS cblas_sgemm as the peer where the build has it (SB_HAVE_OPENBLAS); and
// bfloat16 matmul (float32 accumulation, a bfloat16 result) at 1024 and 2048, contiguous
// and transposed, out=, against the bf16 dot-product peak (the float32 one on a CPU
// without AVX512_BF16).
//
// shape key: MxKxN (A [M, K] x B [K, N] -> C [M, N]); square 1024 in quick, plus 256 and
//   2048 in full, 64 in smoke.
// layouts, styles, operands and calls: the case table's (cases/matmul.h), which
//   MatmulOnDevice runs too (`layout` names the non-contiguous operand, always A; B is
//   contiguous except in column_major):
//   contiguous        A, B row-major
//   transposed        A a .t() view of a row-major [K, M] buffer
//   sliced            A every other row of a row-major [2M, K] buffer (a stepped slice)
//   column_major      A and B column-major (.t() views of [K, M] and [N, K]); the out=
//                     buffer column-major too (a Fortran-order caller)
//   contiguous_first  A transposed as above; A.contiguous() then matmul, timed together
// styles: out (matmul_out into C made before the loop), outofplace (matmul(a, b): C and
//   the packing workspace through the caching allocator), outofplace_system (the same
//   inside CpuAllocatorGuard(System)); quick runs outofplace_system on contiguous only.
// impl:openblas: cblas_sgemm into a C made before the loop (style out) on contiguous
//   (NoTrans), transposed (CblasTrans on A), sliced (lda = 2K) and column_major
//   (CblasColMajor); openblas_set_num_threads(threads). Its kernel set is
//   openblas_get_corename(), written to the context as sb_openblas_core (meson sets
//   OPENBLAS_CORETYPE=Haswell for `ninja benchmark` on AVX2 builds: the packaged 0.3.21
//   takes some VMs for a Prescott and would run its SSE3 kernels, docs/notes/gemm.md).
//   The OpenBLAS rows run after all of ours, so its spinning threads never meet ours.
//
// Cost: flop = 2*M*N*K; bytes = A, B read once + C written once (contiguous_first also
// reads A and writes its copy: + 2 x A). 1024^3: 2.1 GFLOP, C 4 MiB, working set
// 12 MiB (regime LLC).
#include <cmath>
#include <cstring>
#include <memory>

#include "bench_common.h"
#include "cases/matmul.h"
#include "stridebench/matmul.h"
#include "stridebench/quant.h"  // relative_error

#ifdef SB_HAVE_OPENBLAS
#include <cblas.h>
#include <unistd.h>  // environ
#endif

namespace sb::bench {

const char* const kFamily = "matmul";

namespace {

struct Case {
  Layout layout;
  Style style;
  int64_t n;  // M = K = N
  int threads;
  bool openblas = false;
  DType dtype = DType::Float32;
  std::shared_ptr<bool> checked = std::make_shared<bool>(false);  // openblas result checked once
};

// The table's operands (cases::mm_operands), pooled per n, dtype and placement
// (contiguous_first shares transposed's A).
cases::MmOperands operands(const Case& c) {
  const std::string k = std::to_string(c.n) + RunName::dtype_key(c.dtype) + "/";
  return cases::mm_operands({c.layout, c.style}, c.n, c.n, c.n, [&](const cases::Placement& p, const Shape& sizes, char role) {
    const Tensor& storage = pooled(k + role + p.describe(), [&] {
      return random_tensor(cases::storage_sizes(sizes, p), role == 'a' ? 31 : 35, c.dtype);
    });
    return cases::view_in(storage, sizes, p);
  });
}

#ifdef SB_HAVE_OPENBLAS
// C = A B through cblas_sgemm for our strided operands (C [n, n], row-major unless
// column_major).
void sgemm(Layout l, int64_t n, const Tensor& a, const Tensor& b, Tensor& c) {
  const int m = static_cast<int>(n);
  const float* pa = a.data<float>();
  const float* pb = b.data<float>();
  float* pc = c.data<float>();
  switch (l) {
    case Layout::Contiguous:
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, m, m, 1.0f, pa, m, pb, m, 0.0f, pc, m);
      break;
    case Layout::Transposed:  // A(i, k) at a[k*M + i]: the row-major [K, M] buffer, transposed
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, m, m, m, 1.0f, pa, m, pb, m, 0.0f, pc, m);
      break;
    case Layout::Sliced:  // rows 2K apart
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, m, m, 1.0f, pa, static_cast<int>(a.stride(0)), pb, m,
                  0.0f, pc, m);
      break;
    case Layout::ColumnMajor:
      cblas_sgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, m, m, m, 1.0f, pa, m, pb, m, 0.0f, pc, m);
      break;
    case Layout::ContiguousFirst: SB_INTERNAL_ASSERT(false, "no openblas contiguous_first run"); break;
    default: SB_INTERNAL_ASSERT(false, "bench_matmul: layout ", layout_name(l), " has no OpenBLAS run"); break;
  }
}
#endif

void run_case(benchmark::State& st, const Case& c) {
  pool_scope("n" + std::to_string(c.n));
  ThreadScope ts(c.threads);
#ifdef SB_HAVE_OPENBLAS
  openblas_set_num_threads(c.threads);
#endif
  const int64_t n = c.n;
  cases::MmOperands t = operands(c);
  const Tensor &a = t.a, &b = t.b;
  Tensor& out = t.out;
  if (c.style == Style::Out) out.fill_(std::nan(""));  // the openblas check below fails if a call skips an element
  const bool first = c.layout == Layout::ContiguousFirst;
  auto call = [&]() {
    if (c.openblas) {
#ifdef SB_HAVE_OPENBLAS
      sgemm(c.layout, n, a, b, out);
#endif
      return;
    }
    Tensor y = cases::mm_call({c.layout, c.style}, t);
    benchmark::DoNotOptimize(y);
  };

  std::optional<CpuAllocatorGuard> system;
  if (c.style == Style::OutofplaceSystem) system.emplace(AllocatorKind::System);
  const AllocCount allocs = warm_up(call);  // first call: also the warm-up (Note [One warm-up per run])
  if (c.openblas && !*c.checked) {  // the cblas arguments describe our operands: same C as ours
    const double err = relative_error(out, matmul(a, b));
    SB_CHECK(err < 1e-4, "matmul bench: openblas ", layout_name(c.layout), " differs from ours by ", err);
    *c.checked = true;
  }
  for (auto _ : st) {
    call();
    benchmark::ClobberMemory();
  }
  system.reset();

  const int64_t c_bytes = n * n * static_cast<int64_t>(dtype_size(c.dtype));
  const int64_t bytes = distinct_bytes(a) + distinct_bytes(b) + c_bytes + (first ? 2 * distinct_bytes(a) : 0);
  set_work(st, bytes, 2 * n * n * n);
  set_alloc_counters(st, allocs);
  set_regime(st, span_bytes(a) + span_bytes(b) + c_bytes + (first ? distinct_bytes(a) : 0), c.threads);
}

void add_case(const Case& c) {
  const RunName name = RunName()
                           .op("matmul")
                           .impl(c.openblas ? "openblas" : "ours")
                           .layout(layout_name(c.layout))
                           .style(style_name(c.style))
                           .dtype(c.dtype)
                           .shape({c.n, c.n, c.n})
                           .threads(c.threads);
  add_run(name, [c](benchmark::State& st) { run_case(st, c); }, benchmark::kMillisecond);
}

}  // namespace

void register_family() {
  const std::vector<int64_t> sizes =
      smoke() ? std::vector<int64_t>{64} : full() ? std::vector<int64_t>{256, 1024, 2048} : std::vector<int64_t>{1024};
  for (int64_t n : sizes)
    for (int t : thread_counts())
      for (const cases::MmCase& m : cases::matmul_cases()) {
        if (m.style == Style::OutofplaceSystem && m.layout != Layout::Contiguous && !full()) continue;
        add_case({m.layout, m.style, n, t});
      }
  // bfloat16 (issue goals: 1024^3 and 2048^3, 1 and 2 threads), after the float32 rows
  for (int64_t n : smoke() ? std::vector<int64_t>{64} : std::vector<int64_t>{1024, 2048})
    for (int t : thread_counts())
      for (Layout l : {Layout::Contiguous, Layout::Transposed}) {
        if (l == Layout::Transposed && n != 1024 && !smoke()) continue;
        add_case({l, Style::Out, n, t, false, DType::BFloat16});
      }
#ifdef SB_HAVE_OPENBLAS
  benchmark::AddCustomContext("sb_openblas_core", openblas_get_corename());
  // OPENBLAS_* variables of the environment (OPENBLAS_CORETYPE forces a kernel set,
  // OPENBLAS_L2_SIZE the blocking): what the peer's rows, and NumPy's and PyTorch's
  // GEMMs through the same library, ran under. "" when none is set.
  std::string openblas_env;
  for (char** e = environ; *e; ++e)
    if (std::strncmp(*e, "OPENBLAS_", 9) == 0) openblas_env += (openblas_env.empty() ? "" : " ") + std::string(*e);
  benchmark::AddCustomContext("sb_openblas_env", openblas_env);
  for (int64_t n : sizes)
    for (int t : thread_counts())
      for (Layout l : {Layout::Contiguous, Layout::Transposed, Layout::Sliced, Layout::ColumnMajor})
        add_case({l, Style::Out, n, t, true});
#endif
}

}  // namespace sb::bench
