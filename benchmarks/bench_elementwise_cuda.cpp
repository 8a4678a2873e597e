// bench_elementwise_cuda.cpp — the elementwise family on cuda:0 (CLAIMS.md L3, S1, S2 on the
// GPU): add, mul, relu by layout and by style, through the public ops (which dispatch to
// lib/elementwise/elementwise.cu). Ops, layouts, styles, operands and calls are the case
// table's (cases/elementwise.h), which ElementwiseOnDevice runs on cuda:0 too.
//
// styles: inplace (a.add_(b)), out (add_out, out made before the loop), outofplace (the
//   result through the caching CUDA allocator), outofplace_system (the same inside
//   cuda::AllocatorGuard(Direct): cudaMalloc + cudaFree every call; cudaFree waits for
//   the device, which the events see as a gap before the next launch)
// layouts (NCHW sizes; binary ops: b in the layout, a contiguous, except channels_last
//   where a, b and out all are): contiguous, transposed (dims 2 and 3 stored swapped),
//   sliced (every other element along W), expanded (1x1xHxW broadcast), channels_last,
//   mixed_formats (binary: a NCHW, b NHWC, out NCHW; unary, out= only: NCHW x into an
//   NHWC out, the NCHW -> NHWC elementwise case)
// sizes: those of bench_elementwise.cpp and the peers: 1x16x64x64 (256 KiB per f32
//   tensor: L2, launch-latency bound on a GPU) and 64x64x128x128 (256 MiB per tensor:
//   DRAM). f32: quick, every layout and style at both sizes except outofplace_system on
//   non-contiguous layouts; full: all. bf16: add and relu, contiguous and transposed,
//   in place and out=. threads:1 (gpu_name).
// Counters: bytes (inputs read once, an expanded input's storage once; output written
//   once), flop 1 per element, peak_alloc_bytes / allocs_per_iter from the CUDA
//   allocators' stats (one call outside the timed loop). Label regime:L2|DRAM.
// Ceiling: baseline d2d_copy (HBM); a contiguous add moves 3 x 256 MiB
//   (docs/notes/cuda.md has the back-of-envelope time).
// In-place runs do not drift: add alternates add_ and sub_, mul multiplies by ones,
//   relu_ is idempotent (the kernels are branch-free).
#include <optional>

#include "cases/elementwise.h"
#include "cuda_bench_common.h"
#include "stridebench/elementwise.h"

namespace sb::bench {

const char* const kFamily = "elementwise";

namespace {

using cases::EwCase;
using cases::EwOp;



// A cuda:0 tensor of NCHW `sizes` in layout l: random (normal when `normal`) or ones.
Tensor make(Layout l, const Shape& sizes, DType dt, bool ones, bool normal, uint64_t seed) {
  const Device g = Device::cuda(0);
  auto fill = [&](const Shape& s) {
    return ones ? full(s, 1.0, dt, g) : random_tensor(s, seed, dt, normal ? Dist::Normal : Dist::Uniform).to(g);
  };
  return in_layout(l, sizes, fill);
}

struct Case {
  EwCase c;
  Shape shape;
  DType dtype = DType::Float32;
};

// The table's operands (cases::ew_operands): a uniform (relu: normal), b uniform (mul:
// ones); pooled, except an in-place unary target, a fresh x of its own.
cases::EwOperands operands(const Case& k) {
  const EwOp op = k.c.op;
  return cases::ew_operands(k.c, [&](Layout l, char role) -> Tensor {
    const bool ones = role == 'b' && op == EwOp::Mul, normal = role != 'b' && op == EwOp::Relu;
    const uint64_t seed = role == 'b' ? 22 : 21;
    if (role == 'x') return make(l, k.shape, k.dtype, ones, normal, seed);
    const std::string key = std::string("cuda/") + (role == 'b' ? "b" : "a") + "/" + layout_name(l) + "/" +
                            RunName::shape_key(k.shape) + RunName::dtype_key(k.dtype) + (ones ? "/1" : normal ? "/n" : "/u");
    return pooled(key, [&] { return make(l, k.shape, k.dtype, ones, normal, seed); });
  });
}

void run_case(benchmark::State& st, const Case& k) {
  SB_REQUIRE_DEVICE(st);
  const EwCase& c = k.c;
  pool_scope("cuda/" + RunName::shape_key(k.shape) + RunName::dtype_key(k.dtype));
  const bool bin = cases::is_binary(c.op);
  cases::EwOperands t = operands(k);
  int64_t parity = 0;
  auto call = [&]() {
    Tensor y = cases::ew_call(c, t, (parity++ & 1) != 0);
    benchmark::DoNotOptimize(y);
  };
  std::optional<cuda::AllocatorGuard> direct;
  if (c.style == Style::OutofplaceSystem) direct.emplace(cuda::CudaAllocatorKind::Direct);
  const AllocCount allocs = measure_cuda_allocs(call);  // also the warm-up
  if (c.style == Style::Inplace && c.op == EwOp::Add) call();  // undo the add_
  const int64_t n = checked_numel(k.shape, "elementwise_cuda bench");
  const Tensor& x = c.style == Style::Inplace ? t.target : t.a;
  const int64_t es = static_cast<int64_t>(dtype_size(k.dtype));
  const int64_t bytes = distinct_bytes(x) + (bin ? distinct_bytes(t.b) : 0) + n * es;
  const int64_t ws = span_bytes(x) + (bin ? span_bytes(t.b) : 0) + (c.style == Style::Inplace ? 0 : n * es);
  time_gpu_loop(st, call, ws);
  direct.reset();

  set_work(st, bytes, n);
  set_alloc_counters(st, allocs);
  st.SetLabel(regime_label(ws));
}

}  // namespace

void register_family() {
  const Shape l2 = smoke() ? Shape{2, 4, 8, 8} : Shape{1, 16, 64, 64};
  const Shape dram = smoke() ? Shape{2, 4, 16, 16} : Shape{64, 64, 128, 128};
  auto add_case = [](const Case& k) {
    const RunName name = gpu_name()
                             .op(cases::op_name(k.c.op))
                             .layout(layout_name(k.c.layout))
                             .style(style_name(k.c.style))
                             .dtype(k.dtype)
                             .shape(k.shape);
    add_manual_run(name, [k](benchmark::State& st) { run_case(st, k); });
  };
  for (const Shape& shape : {l2, dram})
    for (EwOp op : {EwOp::Add, EwOp::Mul, EwOp::Relu})
      for (const EwCase& c : cases::elementwise_cases({op})) {
        if (c.style == Style::OutofplaceSystem && c.layout != Layout::Contiguous && !full()) continue;
        add_case({c, shape});
      }
  // bfloat16: the float32 rows' twins on contiguous and transposed inputs, out= and in place
  for (const Shape& shape : {l2, dram})
    for (EwOp op : {EwOp::Add, EwOp::Relu})
      for (Layout l : {Layout::Contiguous, Layout::Transposed})
        for (Style s : {Style::Inplace, Style::Out}) add_case({{op, l, s}, shape, DType::BFloat16});
}

}  // namespace sb::bench
