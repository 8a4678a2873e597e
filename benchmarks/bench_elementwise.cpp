// bench_elementwise.cpp — elementwise ops by layout and by style (CLAIMS.md L3, S1,
// S2, S3).
//
// ops: add, mul (binary), relu, normalize (unary; along the last dim)
// styles: inplace (a.add_(b)), out (add_out(out, a, b), out allocated before the loop),
//   outofplace (add(a, b): the result through the caching allocator), outofplace_system
//   (the same inside CpuAllocatorGuard(System): aligned_alloc + free and first-touch
//   page faults on every call)
// layouts (4-D NCHW sizes; for binary ops the layout is b's, a is contiguous, except
//   channels_last where a, b and out all are):
//   contiguous; transposed (dims 2 and 3 stored swapped: a .transpose(2, 3) view);
//   sliced (every other element of a buffer twice as long in W); expanded (a 1x1xHxW
//   tensor broadcast to NxCxHxW: stride 0); channels_last (NHWC strides)
// op:loop (S3): relu(add(mul(a, b), b)) — a chain of 3 ops making 2 temporaries and a
//   result every call (outofplace, outofplace_system) vs the same chain writing into 3
//   buffers made once (out).
// sizes: L2 1x16x64x64 (256 KiB per f32 tensor), DRAM 64x64x128x128 (256 MiB per f32
//   tensor; add reads and writes 768 MiB). dtypes f32 (quick); f64 and i32 in full
//   (normalize: floating only); bf16 on the rows its Precision comparison reads (quick;
//   every row in full). Threads 1 and 2.
// The quick matrix (about 250 runs) keeps what the tables read: every style on the
//   contiguous layout, and inplace/out/outofplace on the others; at DRAM size add,
//   relu and the loop on the contiguous and transposed layouts, normalize on the
//   contiguous one, mul contiguous in place, out= and out-of-place. full: every op,
//   style and layout at both sizes.
//
// Cost: one read per input element (an expanded input: its storage once), one write
// per output element; in-place reads and writes the updated tensor. flop: 1 per
// element for add/mul/relu, 6 for normalize (mean: 1, variance: 3, scaling: 2), 3 for
// the loop.
//
// In-place runs never drift (no PauseTiming needed): add alternates a.add_(b) and
// a.sub_(b) on odd and even iterations (the same kernel shape, a stays bounded); mul's
// operand b is all ones in every style, so a.mul_(b) leaves a as it was; relu_ and
// normalize_ are idempotent after their first call (relu_: from then on every element
// is >= 0; our kernels are branch-free, so the timing does not depend on the signs).
// In-place targets are fresh copies made for the run, so the shared inputs never change.
#include <tuple>

#include "bench_common.h"
#include "stridebench/elementwise.h"

namespace sb::bench {

const char* const kFamily = "elementwise";

namespace {

enum class Op { Add, Mul, Relu, Normalize, Loop };
const char* op_name(Op op) {
  switch (op) {
    case Op::Add: return "add";
    case Op::Mul: return "mul";
    case Op::Relu: return "relu";
    case Op::Normalize: return "normalize";
    case Op::Loop: return "loop";
  }
  return "?";
}
bool binary_op(Op op) { return op == Op::Add || op == Op::Mul || op == Op::Loop; }
int64_t flop_per_elem(Op op) { return op == Op::Normalize ? 6 : op == Op::Loop ? 3 : 1; }



enum class Values { Uniform, Normal, Ones };

// A tensor of NCHW `sizes` laid out as asked, holding `v`.
Tensor make(Layout l, const Shape& sizes, DType dt, Values v, uint64_t seed) {
  auto fill = [&](const Shape& s) {
    return v == Values::Ones ? full(s, 1.0, dt) : random_tensor(s, seed, dt, v == Values::Normal ? Dist::Normal : Dist::Uniform);
  };
  return in_layout(l, sizes, fill);
}

std::string key(const char* what, Layout l, const Shape& s, DType dt, Values v) {
  return std::string(what) + "/" + layout_name(l) + "/" + RunName::shape_key(s) + "/" + RunName::dtype_key(dt) + "/" +
         std::to_string(static_cast<int>(v));
}

struct Case {
  Op op;
  Style style;
  Layout layout;
  Shape shape;
  DType dtype;
  int threads;
};

// Inputs: a (contiguous, or channels-last) and b (in the layout) for binary ops; x (in
// the layout) for unary ones. Pooled: made once per binary, never modified.
const Tensor& operand_a(const Case& c) {
  const Layout l = c.layout == Layout::ChannelsLast ? Layout::ChannelsLast : Layout::Contiguous;
  const Values v = c.op == Op::Relu ? Values::Normal : Values::Uniform;
  return pooled(key("a", l, c.shape, c.dtype, v), [&] { return make(l, c.shape, c.dtype, v, 21); });
}
const Tensor& operand_b(const Case& c) {
  const Values v = c.op == Op::Mul ? Values::Ones : Values::Uniform;
  return pooled(key("b", c.layout, c.shape, c.dtype, v), [&] { return make(c.layout, c.shape, c.dtype, v, 22); });
}
const Tensor& operand_x(const Case& c) {  // shares a's tensor where they coincide
  const Values v = c.op == Op::Relu ? Values::Normal : Values::Uniform;
  return pooled(key("a", c.layout, c.shape, c.dtype, v), [&] { return make(c.layout, c.shape, c.dtype, v, 21); });
}

MemoryFormat out_format(const Case& c) {
  return c.layout == Layout::ChannelsLast ? MemoryFormat::ChannelsLast : MemoryFormat::Contiguous;
}

void run_case(benchmark::State& st, const Case& c) {
  // Inputs are kept for the runs of one size, dtype and layout (registered together),
  // then dropped: at most ~5 tensors live (2.5 GiB at the full matrix's f64 DRAM size).
  pool_scope(RunName::shape_key(c.shape) + RunName::dtype_key(c.dtype) + layout_name(c.layout));
  ThreadScope ts(c.threads);
  const bool bin = binary_op(c.op);
  const Tensor& a = bin ? operand_a(c) : operand_x(c);
  const Tensor b = bin ? operand_b(c) : Tensor();
  constexpr int64_t kDim = -1;  // normalize along W

  // The tensor an in-place run updates: a fresh copy in the run's layout.
  Tensor target;
  if (c.style == Style::Inplace) target = a.clone();  // clone keeps a dense layout, not a slice:
  if (c.style == Style::Inplace && !bin && c.layout == Layout::Sliced)
    target = make(c.layout, c.shape, c.dtype, c.op == Op::Relu ? Values::Normal : Values::Uniform, 21);
  Tensor out, t1, t2;
  if (c.style == Style::Out) {
    out = empty(c.shape, c.dtype, Device::cpu(), out_format(c));
    if (c.op == Op::Loop) {
      t1 = empty(c.shape, c.dtype, Device::cpu(), out_format(c));
      t2 = empty(c.shape, c.dtype, Device::cpu(), out_format(c));
    }
  }

  int64_t parity = 0;
  auto call = [&]() {
    switch (c.style) {
      case Style::Inplace:
        switch (c.op) {
          case Op::Add: (parity++ & 1) ? target.sub_(b) : target.add_(b); break;
          case Op::Mul: target.mul_(b); break;
          case Op::Relu: target.relu_(); break;
          case Op::Normalize: target.normalize_(kDim); break;
          case Op::Loop: break;  // not registered
        }
        break;
      case Style::Out:
        switch (c.op) {
          case Op::Add: add_out(out, a, b); break;
          case Op::Mul: mul_out(out, a, b); break;
          case Op::Relu: relu_out(out, a); break;
          case Op::Normalize: normalize_out(out, a, kDim); break;
          case Op::Loop: relu_out(out, add_out(t2, mul_out(t1, a, b), b)); break;
        }
        break;
      case Style::Outofplace:
      case Style::OutofplaceSystem: {
        Tensor y;
        switch (c.op) {
          case Op::Add: y = add(a, b); break;
          case Op::Mul: y = mul(a, b); break;
          case Op::Relu: y = relu(a); break;
          case Op::Normalize: y = normalize(a, kDim); break;
          case Op::Loop: y = relu(add(mul(a, b), b)); break;
        }
        benchmark::DoNotOptimize(y);
        break;
      }
    }
  };

  std::optional<CpuAllocatorGuard> system;
  if (c.style == Style::OutofplaceSystem) system.emplace(AllocatorKind::System);
  const AllocCount allocs = measure_allocs(call);  // first call: also the warm-up
  if (c.style == Style::Inplace && c.op == Op::Add) call();  // undo the add_: a is back
  for (auto _ : st) {
    call();
    benchmark::ClobberMemory();
  }
  system.reset();

  const int64_t n = checked_numel(c.shape, "elementwise bench");
  const int64_t es = static_cast<int64_t>(dtype_size(c.dtype));
  int64_t bytes = 0, ws = 0;
  if (c.op == Op::Loop) {  // mul: a, b -> t1; add: t1, b -> t2; relu: t2 -> y
    bytes = distinct_bytes(a) + 2 * distinct_bytes(b) + 5 * n * es;  // t1, t2 written and read; y written
    ws = span_bytes(a) + span_bytes(b) + 3 * n * es;
  } else {
    bytes = distinct_bytes(a) + (bin ? distinct_bytes(b) : 0) + n * es;
    ws = (bin ? span_bytes(b) : 0) + (c.style == Style::Inplace ? span_bytes(target) : span_bytes(a) + n * es);
  }
  set_work(st, bytes, flop_per_elem(c.op) * n);
  set_alloc_counters(st, allocs);
  set_regime(st, ws, c.threads);
}

}  // namespace

void register_family() {
  const Shape l2 = smoke() ? Shape{2, 4, 8, 8} : Shape{1, 16, 64, 64};
  const Shape dram = smoke() ? Shape{2, 4, 16, 16} : Shape{64, 64, 128, 128};
  const std::vector<Layout> all_layouts = {Layout::Contiguous, Layout::Transposed, Layout::Sliced, Layout::Expanded,
                                           Layout::ChannelsLast};
  const std::vector<Layout> dram_layouts =
      full() ? all_layouts : std::vector<Layout>{Layout::Contiguous, Layout::Transposed};
  const std::vector<DType> dtypes =
      full() ? std::vector<DType>{DType::Float32, DType::Float64, DType::Int32, DType::BFloat16}
             : std::vector<DType>{DType::Float32};
  const std::vector<Style> styles = {Style::Inplace, Style::Out, Style::Outofplace, Style::OutofplaceSystem};
  const std::vector<Op> ops = {Op::Add, Op::Mul, Op::Relu, Op::Normalize};
  const std::vector<Op> dram_ops = full() ? ops : std::vector<Op>{Op::Add, Op::Mul, Op::Relu, Op::Normalize};

  auto add_case = [](const Case& c) {
    const RunName name = RunName()
                             .op(op_name(c.op))
                             .layout(layout_name(c.layout))
                             .style(style_name(c.style))
                             .dtype(c.dtype)
                             .shape(c.shape)
                             .threads(c.threads);
    add_run(name, [c](benchmark::State& st) { run_case(st, c); });
  };
  for (DType dt : dtypes) {
    for (const Shape& shape : {l2, dram}) {
      const auto& layouts = shape == l2 ? all_layouts : dram_layouts;
      // Layout outermost, threads innermost: one pool group (the inputs of one size,
      // dtype and layout) serves every run that reads it, then is dropped.
      for (Layout l : layouts) {
        for (Op op : shape == l2 ? ops : dram_ops) {
          if (op == Op::Normalize && !is_floating(dt)) continue;
          for (Style s : styles) {
            // Writing in place into an expanded (overlapping) tensor is an error.
            if (s == Style::Inplace && l == Layout::Expanded && !binary_op(op)) continue;
            if (s == Style::OutofplaceSystem && l != Layout::Contiguous && !full()) continue;
            // The slowest DRAM rows (docs/notes/bench.md): quick keeps normalize contiguous.
            if (op == Op::Normalize && shape == dram && l != Layout::Contiguous && !full()) continue;
            // mul at DRAM size (quick): the contiguous in-place, out= and out-of-place rows of
            // the speed goal (#3: add, mul and relu in every style)
            if (op == Op::Mul && shape == dram && !full() && (l != Layout::Contiguous || s == Style::OutofplaceSystem))
              continue;
            for (int t : thread_counts()) add_case({op, s, l, shape, dt, t});
          }
        }
        if (l == Layout::Contiguous)
          for (Style s : {Style::Out, Style::Outofplace, Style::OutofplaceSystem})
            for (int t : thread_counts()) add_case({Op::Loop, s, Layout::Contiguous, shape, dt, t});
      }
    }
  }
  // bfloat16 (quick): twins of the float32 rows the tables compare it with: add in place and
  // out= on contiguous inputs, out= with a transposed operand, relu and normalize out=, at
  // both sizes (full: every row, as float32)
  const std::vector<std::tuple<Op, Layout, Style>> bf16_rows = {
      {Op::Add, Layout::Contiguous, Style::Inplace}, {Op::Add, Layout::Contiguous, Style::Out},
      {Op::Add, Layout::Transposed, Style::Out},     {Op::Relu, Layout::Contiguous, Style::Out},
      {Op::Normalize, Layout::Contiguous, Style::Out}};
  if (!full())
    for (const Shape& shape : {l2, dram})
      for (const auto& [op, l, s] : bf16_rows)
        for (int t : thread_counts()) add_case({op, s, l, shape, DType::BFloat16, t});
}

}  // namespace sb::bench
