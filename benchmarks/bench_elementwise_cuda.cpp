// bench_elementwise_cuda.cpp — the elementwise family on cuda:0 (CLAIMS.md L3, S1, S2 on the
// GPU): add, mul, relu by layout and by style, through the public ops (which dispatch to
// lib/elementwise/elementwise.cu).
//
// styles: inplace (a.add_(b)), out (add_out, out made before the loop), outofplace (the
//   result through the caching CUDA allocator), outofplace_system (the same inside
//   cuda::AllocatorGuard(Direct): cudaMalloc + cudaFree every call; cudaFree waits for
//   the device, which the events see as a gap before the next launch)
// layouts (NCHW sizes; binary ops: b in the layout, a contiguous, except channels_last
//   where a, b and out all are): contiguous, transposed (dims 2 and 3 stored swapped),
//   sliced (every other element along W), expanded (1x1xHxW broadcast), channels_last
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

#include "cuda_bench_common.h"
#include "stridebench/elementwise.h"

namespace sb::bench {

const char* const kFamily = "elementwise";

namespace {

enum class Op { Add, Mul, Relu };
const char* op_name(Op op) { return op == Op::Add ? "add" : op == Op::Mul ? "mul" : "relu"; }



// A cuda:0 tensor of NCHW `sizes` in layout l: random (normal when `normal`) or ones.
Tensor make(Layout l, const Shape& sizes, DType dt, bool ones, bool normal, uint64_t seed) {
  const Device g = Device::cuda(0);
  auto fill = [&](const Shape& s) {
    return ones ? full(s, 1.0, dt, g) : random_tensor(s, seed, dt, normal ? Dist::Normal : Dist::Uniform).to(g);
  };
  return in_layout(l, sizes, fill);
}

struct Case {
  Op op;
  Style style;
  Layout layout;
  Shape shape;
  DType dtype = DType::Float32;
};

const Tensor& operand(const char* role, Layout l, const Case& c, bool ones, bool normal, uint64_t seed) {
  const std::string key = std::string("cuda/") + role + "/" + layout_name(l) + "/" + RunName::shape_key(c.shape) +
                          RunName::dtype_key(c.dtype) + (ones ? "/1" : normal ? "/n" : "/u");
  return pooled(key, [&] { return make(l, c.shape, c.dtype, ones, normal, seed); });
}

void run_case(benchmark::State& st, const Case& c) {
  SB_REQUIRE_DEVICE(st);
  pool_scope("cuda/" + RunName::shape_key(c.shape) + RunName::dtype_key(c.dtype));
  const bool bin = c.op != Op::Relu;
  const bool normal = c.op == Op::Relu;
  const Layout la = bin && c.layout != Layout::ChannelsLast ? Layout::Contiguous : c.layout;
  const Tensor& a = operand("a", la, c, false, normal, 21);
  const Tensor b = bin ? operand("b", c.layout, c, c.op == Op::Mul, false, 22) : Tensor();
  const MemoryFormat fmt = c.layout == Layout::ChannelsLast ? MemoryFormat::ChannelsLast : MemoryFormat::Contiguous;
  Tensor target, out;
  if (c.style == Style::Inplace) target = bin ? a.clone() : make(c.layout, c.shape, c.dtype, false, normal, 21);
  if (c.style == Style::Out) out = empty(c.shape, c.dtype, Device::cuda(0), fmt);
  int64_t parity = 0;
  auto call = [&]() {
    switch (c.style) {
      case Style::Inplace:
        if (c.op == Op::Add) (parity++ & 1) ? target.sub_(b) : target.add_(b);
        else if (c.op == Op::Mul) target.mul_(b);
        else target.relu_();
        break;
      case Style::Out:
        if (c.op == Op::Add) add_out(out, a, b);
        else if (c.op == Op::Mul) mul_out(out, a, b);
        else relu_out(out, a);
        break;
      case Style::Outofplace:
      case Style::OutofplaceSystem: {
        Tensor y = c.op == Op::Add ? add(a, b) : c.op == Op::Mul ? mul(a, b) : relu(a);
        benchmark::DoNotOptimize(y);
        break;
      }
    }
  };
  std::optional<cuda::AllocatorGuard> direct;
  if (c.style == Style::OutofplaceSystem) direct.emplace(cuda::CudaAllocatorKind::Direct);
  const AllocCount allocs = measure_cuda_allocs(call);  // also the warm-up
  if (c.style == Style::Inplace && c.op == Op::Add) call();  // undo the add_
  time_gpu_loop(st, call);
  direct.reset();

  const int64_t n = checked_numel(c.shape, "elementwise_cuda bench");
  const Tensor& x = c.style == Style::Inplace ? target : a;
  const int64_t es = static_cast<int64_t>(dtype_size(c.dtype));
  const int64_t bytes = distinct_bytes(x) + (bin ? distinct_bytes(b) : 0) + n * es;
  const int64_t ws = span_bytes(x) + (bin ? span_bytes(b) : 0) + (c.style == Style::Inplace ? 0 : n * es);
  set_work(st, bytes, n);
  set_alloc_counters(st, allocs);
  st.SetLabel(regime_label(ws));
}

}  // namespace

void register_family() {
  const Shape l2 = smoke() ? Shape{2, 4, 8, 8} : Shape{1, 16, 64, 64};
  const Shape dram = smoke() ? Shape{2, 4, 16, 16} : Shape{64, 64, 128, 128};
  const Layout layouts[] = {Layout::Contiguous, Layout::Transposed, Layout::Sliced, Layout::Expanded,
                            Layout::ChannelsLast};
  const Style styles[] = {Style::Inplace, Style::Out, Style::Outofplace, Style::OutofplaceSystem};
  for (const Shape& shape : {l2, dram}) {
    for (Op op : {Op::Add, Op::Mul, Op::Relu}) {
      for (Layout l : layouts) {
        for (Style s : styles) {
          if (s == Style::Inplace && l == Layout::Expanded && op == Op::Relu) continue;  // writes overlap
          if (s == Style::OutofplaceSystem && l != Layout::Contiguous && !full()) continue;
          const Case c{op, s, l, shape};
          const RunName name =
              gpu_name().op(op_name(op)).layout(layout_name(l)).style(style_name(s)).dtype(DType::Float32).shape(shape);
          add_manual_run(name, [c](benchmark::State& st) { run_case(st, c); });
        }
      }
    }
  }
  // bfloat16: the float32 rows' twins on contiguous and transposed inputs, out= and in place
  for (const Shape& shape : {l2, dram})
    for (Op op : {Op::Add, Op::Relu})
      for (Layout l : {Layout::Contiguous, Layout::Transposed})
        for (Style s : {Style::Inplace, Style::Out}) {
          const Case c{op, s, l, shape, DType::BFloat16};
          const RunName name = gpu_name()
                                   .op(op_name(op))
                                   .layout(layout_name(l))
                                   .style(style_name(s))
                                   .dtype(DType::BFloat16)
                                   .shape(shape);
          add_manual_run(name, [c](benchmark::State& st) { run_case(st, c); });
        }
}

}  // namespace sb::bench
