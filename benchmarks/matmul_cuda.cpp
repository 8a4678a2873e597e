// matmul_cuda.cpp — matmul on cuda:0 through cuBLAS by operand layout and style
// (CLAIMS.md L1 and S2 on the GPU).
//
// a (M x K) @ b (K x N); as the peers' matmul cases (scripts/peers.py), the layout
// names the left operand a, except `transposed`:
//   contiguous        both row-major
//   transposed        b is a .t() view of a row-major N x K tensor (x @ w.t(), as linear)
//   column_major      a is a .t() view of a row-major K x M tensor
//   sliced            a takes every other column of a buffer twice as wide: no cuBLAS
//                     layout fits, so matmul copies it first (operand_copies 1)
//   contiguous_first  that sliced a made contiguous by the caller, then matmul, timed
//                     together (bytes count the copy's read and write of a)
// Row- and column-major operands go to cuBLAS as op flags with their leading dimension,
// no copy (matmul.cu). styles: outofplace (matmul: the result through the caching CUDA
// allocator) for every layout, out (matmul_out into an out made before the loop) for
// contiguous.
// dtypes: f32 (CUBLAS_COMPUTE_32F, no tensor cores), tf32 (f32 tensors with
//   cuda::set_allow_tf32: TF32 tensor cores), f16 (fp16 tensor cores, fp32 accumulation).
// shape: MxKxN, 1024 (the peers' size) and 4096 cubes (full adds 8192). Counters:
//   flop = 2 M N K; bytes = a, b read once, out written once; operand_copies =
//   operands matmul copied in one call;
//   peak_alloc_bytes / allocs_per_iter from the CUDA allocators.
// Ceiling: baseline gemm_peak of the same dtype (H100 SXM nominal: 67 TF/s f32, ~495
//   TF/s tf32, ~990 TF/s f16 dense). 4096^3 f32: 137 GFLOP, ~2.5 ms at 55 TF/s.
#include <optional>

#include "cuda_bench_common.h"
#include "ops/matmul.h"

namespace sb::bench {

const char* const kFamily = "matmul";

namespace {

enum class Layout { Contiguous, Transposed, ColumnMajor, Sliced, ContiguousFirst };
const char* layout_name(Layout l) {
  switch (l) {
    case Layout::Contiguous: return "contiguous";
    case Layout::Transposed: return "transposed";
    case Layout::ColumnMajor: return "column_major";
    case Layout::Sliced: return "sliced";
    case Layout::ContiguousFirst: return "contiguous_first";
  }
  return "?";
}

struct Case {
  Layout layout;
  bool out_style;
  DType dtype;  // of the tensors
  bool tf32;
  int64_t m;    // M = N = K
};

// A rows x cols operand on cuda:0: a (`right` false) or b in layout l.
Tensor operand(Layout l, int64_t rows, int64_t cols, DType dt, bool right, uint64_t seed) {
  const Device g = Device::cuda(0);
  auto rnd = [&](const Shape& s) { return random_tensor(s, seed, dt).to(g); };
  if (right) return l == Layout::Transposed ? rnd({cols, rows}).t() : rnd({rows, cols});
  switch (l) {
    case Layout::Contiguous:
    case Layout::Transposed: return rnd({rows, cols});
    case Layout::ColumnMajor: return rnd({cols, rows}).t();
    case Layout::Sliced:
    case Layout::ContiguousFirst: return rnd({rows, 2 * cols}).slice(1, 0, std::nullopt, 2);
  }
  return Tensor();
}

void run_case(benchmark::State& st, const Case& c) {
  SB_REQUIRE_DEVICE(st);
  pool_scope("cuda/" + std::to_string(c.m) + RunName::dtype_key(c.dtype));
  const int64_t M = c.m, N = c.m, K = c.m;
  const std::string key = std::string("cuda/") + layout_name(c.layout == Layout::ContiguousFirst ? Layout::Sliced : c.layout);
  const Tensor& a = pooled(key + "/a", [&] { return operand(c.layout, M, K, c.dtype, false, 41); });
  const Tensor& b = pooled(key + "/b", [&] { return operand(c.layout, K, N, c.dtype, true, 42); });
  Tensor out;
  if (c.out_style) out = empty({M, N}, c.dtype, Device::cuda(0));
  const bool first = c.layout == Layout::ContiguousFirst;
  auto call = [&] {
    const Tensor x = first ? a.contiguous() : a;
    if (c.out_style) {
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
  cuda::reset_matmul_operand_copies();
  const AllocCount allocs = measure_cuda_allocs(call);  // also the warm-up (cuBLAS heuristics)
  const int64_t copies = cuda::matmul_operand_copies();
  time_gpu_loop(st, call);
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
  const Layout layouts[] = {Layout::Contiguous, Layout::Transposed, Layout::ColumnMajor, Layout::Sliced,
                            Layout::ContiguousFirst};
  struct Type {
    DType dtype;
    bool tf32;
    const char* key;
  };
  const Type types[] = {{DType::Float32, false, "f32"}, {DType::Float32, true, "tf32"}, {DType::Float16, false, "f16"}};
  for (int64_t m : sizes) {
    for (const Type& t : types) {
      for (Layout l : layouts) {
        for (bool out_style : {true, false}) {
          if (out_style && l != Layout::Contiguous) continue;
          const Case c{l, out_style, t.dtype, t.tf32, m};
          const RunName name = gpu_name()
                                   .op("matmul")
                                   .layout(layout_name(l))
                                   .style(out_style ? "out" : "outofplace")
                                   .set("dtype", t.key)
                                   .shape({m, m, m});
          add_manual_run(name, [c](benchmark::State& st) { run_case(st, c); });
        }
      }
    }
  }
}

}  // namespace sb::bench
