// bench_matmul_cuda.cpp — matmul on cuda:0 through cuBLAS by operand layout and style
// (CLAIMS.md L1 and S2 on the GPU).
//
// A [M, K] @ B [K, N], shape key MxKxN; the layouts of bench_matmul.cpp (and the peers'):
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

// A [rows, cols] operand on cuda:0: A (`right` false) or B in layout l.
Tensor operand(Layout l, int64_t rows, int64_t cols, DType dt, bool right, uint64_t seed) {
  const Device g = Device::cuda(0);
  auto rnd = [&](const Shape& s) { return random_tensor(s, seed, dt).to(g); };
  if (right) return in_layout(l == Layout::ColumnMajor ? l : Layout::Contiguous, {rows, cols}, rnd);
  // sliced: rows 2K apart; contiguous_first: transposed's A
  return in_layout(l == Layout::ContiguousFirst ? Layout::Transposed : l, {rows, cols}, rnd, 0);
}

void run_case(benchmark::State& st, const Case& c) {
  SB_REQUIRE_DEVICE(st);
  pool_scope("cuda/" + std::to_string(c.m) + RunName::dtype_key(c.dtype));
  const int64_t M = c.m, N = c.m, K = c.m;
  const Layout source = c.layout == Layout::ContiguousFirst ? Layout::Transposed : c.layout;  // the same A
  const std::string key = std::string("cuda/") + layout_name(source);
  const Tensor& a = pooled(key + "/a", [&] { return operand(c.layout, M, K, c.dtype, false, 41); });
  const Tensor& b = pooled(key + "/b", [&] { return operand(c.layout, K, N, c.dtype, true, 42); });
  Tensor out;  // column_major: a column-major C, as a Fortran-order caller's
  if (c.style == Style::Out && c.layout == Layout::ColumnMajor) out = empty({N, M}, c.dtype, Device::cuda(0)).t();
  else if (c.style == Style::Out) out = empty({M, N}, c.dtype, Device::cuda(0));
  const bool first = c.layout == Layout::ContiguousFirst;
  auto call = [&] {
    const Tensor x = first ? a.contiguous() : a;
    if (c.style == Style::Out) {
      matmul_out(out, x, b);
    } else {
      Tensor r = matmul(x, b);
      benchmark::DoNotOptimize(r);
    }
  };
  struct Tf32Scope {  // restores the TF32 setting however the run ends
    bool prev = cuda::allow_tf32();
    explicit Tf32Scope(bool on) { cuda::set_allow_tf32(on); }
    ~Tf32Scope() { cuda::set_allow_tf32(prev); }
  } tf32(c.tf32);
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
  const Layout layouts[] = {Layout::Contiguous, Layout::Transposed, Layout::Sliced, Layout::ColumnMajor,
                            Layout::ContiguousFirst};
  struct Type {
    DType dtype;
    bool tf32;
    const char* key;
  };
  const Type types[] = {{DType::Float32, false, "f32"}, {DType::Float32, true, "tf32"}, {DType::Float16, false, "f16"},
                        {DType::BFloat16, false, "bf16"}};
  for (int64_t m : sizes) {
    for (const Type& t : types) {
      for (Layout l : layouts) {
        for (Style style : {Style::Out, Style::Outofplace, Style::OutofplaceSystem}) {
          if (style == Style::OutofplaceSystem && l != Layout::Contiguous) continue;
          const Case c{l, style, t.dtype, t.tf32, m};
          const RunName name = gpu_name()
                                   .op("matmul")
                                   .layout(layout_name(l))
                                   .style(style_name(style))
                                   .set("dtype", t.key)
                                   .shape({m, m, m});
          add_manual_run(name, [c](benchmark::State& st) { run_case(st, c); });
        }
      }
    }
  }
}

}  // namespace sb::bench
