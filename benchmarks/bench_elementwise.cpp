// bench_elementwise.cpp — elementwise ops by layout and by style (CLAIMS.md L3, S1,
// S2, S3).
//
// The ops, layouts, styles, operands and calls are the case table's (cases/elementwise.h),
// which the device tests run too; this file adds the sizes, dtypes, threads and counters.
// ops: add, mul (binary), relu, normalize (unary; along the last dim)
// styles: inplace (a.add_(b)), out (add_out(out, a, b), out allocated before the loop),
//   outofplace (add(a, b): the result through the caching allocator), outofplace_system
//   (the same inside CpuAllocatorGuard(System): aligned_alloc + free and first-touch
//   page faults on every call)
// layouts (4-D NCHW sizes; for binary ops the layout is b's, a is contiguous, except
//   channels_last where a, b and out all are):
//   contiguous; transposed (dims 2 and 3 stored swapped: a .transpose(2, 3) view);
//   sliced (every other element of a buffer twice as long in W); expanded (a 1x1xHxW
//   tensor broadcast to NxCxHxW: stride 0); channels_last (NHWC strides);
//   mixed_formats (binary: a NCHW, b NHWC, out NCHW; unary, out= only: x NCHW into an
//   NHWC out)
// op:loop (S3): relu(add(mul(a, b), b)) — a chain of 3 ops making 2 temporaries and a
//   result every call (outofplace, outofplace_system) vs the same chain writing into 3
//   buffers made once (out).
// sizes: L2 1x16x64x64 (256 KiB per f32 tensor), DRAM 64x64x128x128 (256 MiB per f32
//   tensor; add reads and writes 768 MiB). dtypes f32 (quick); f64 and i32 in full
//   (normalize: floating only); bf16 on the rows its Precision comparison reads (quick;
//   every row in full). Threads 1 and 2.
// The quick matrix (about 220 runs) keeps what the tables read: every style on the
//   contiguous layout, and inplace/out/outofplace on the others; at DRAM size add,
//   relu and the loop on the contiguous and transposed layouts and add and relu out= on
//   mixed_formats, normalize on the contiguous one (no outofplace_system), mul
//   contiguous in place, out= and out-of-place; the DRAM outofplace_system rows take 3
//   repetitions. full: every op, style and layout at both sizes.
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
#include <algorithm>
#include <optional>

#include "bench_common.h"
#include "cases/elementwise.h"
#include "stridebench/elementwise.h"

namespace sb::bench {

const char* const kFamily = "elementwise";

namespace {

using cases::EwOp;
using cases::EwCase;

int64_t flop_per_elem(EwOp op) { return op == EwOp::Normalize ? 6 : op == EwOp::Loop ? 3 : 1; }



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
  EwCase c;
  Shape shape;
  DType dtype;
  int threads;
};

// The operands of the table's case (cases::ew_operands): a and x uniform (relu: normal),
// b uniform (mul: ones, so in-place mul never drifts). Pooled: made once per binary,
// never modified; x shares a's tensor where they coincide.
cases::EwOperands operands(const Case& k) {
  const EwOp op = k.c.op;
  return cases::ew_operands(k.c, [&](Layout l, char role) -> Tensor {
    const Values v = role == 'b' ? (op == EwOp::Mul ? Values::Ones : Values::Uniform)
                                 : (op == EwOp::Relu ? Values::Normal : Values::Uniform);
    auto fresh = [&] { return make(l, k.shape, k.dtype, v, role == 'b' ? 22 : 21); };
    if (role == 'x') return fresh();  // the in-place target: a copy of its own
    return pooled(key(role == 'b' ? "b" : "a", l, k.shape, k.dtype, v), fresh);
  });
}

void run_case(benchmark::State& st, const Case& k) {
  const EwCase& c = k.c;
  // Inputs are kept for the runs of one size, dtype and layout (registered together),
  // then dropped: at most ~5 tensors live (2.5 GiB at the full matrix's f64 DRAM size).
  pool_scope(RunName::shape_key(k.shape) + RunName::dtype_key(k.dtype) + layout_name(c.layout));
  ThreadScope ts(k.threads);
  const bool bin = cases::is_binary(c.op);
  cases::EwOperands t = operands(k);
  int64_t parity = 0;
  auto call = [&]() {
    Tensor y = cases::ew_call(c, t, (parity++ & 1) != 0);
    benchmark::DoNotOptimize(y);
  };

  std::optional<CpuAllocatorGuard> system;
  if (c.style == Style::OutofplaceSystem) system.emplace(AllocatorKind::System);
  const AllocCount allocs = warm_up(call);  // first call: also the warm-up (Note [One warm-up per run])
  if (c.style == Style::Inplace && c.op == EwOp::Add && !repeat_call()) call();  // undo the warm-up's add_
  for (auto _ : st) {
    call();
    benchmark::ClobberMemory();
  }
  system.reset();

  const Tensor &a = t.a, &b = t.b;
  const int64_t n = checked_numel(k.shape, "elementwise bench");
  const int64_t es = static_cast<int64_t>(dtype_size(k.dtype));
  int64_t bytes = 0, ws = 0;
  if (c.op == EwOp::Loop) {  // mul: a, b -> t1; add: t1, b -> t2; relu: t2 -> y
    bytes = distinct_bytes(a) + 2 * distinct_bytes(b) + 5 * n * es;  // t1, t2 written and read; y written
    ws = span_bytes(a) + span_bytes(b) + 3 * n * es;
  } else {
    bytes = distinct_bytes(a) + (bin ? distinct_bytes(b) : 0) + n * es;
    ws = (bin ? span_bytes(b) : 0) + (c.style == Style::Inplace ? span_bytes(t.target) : span_bytes(a) + n * es);
  }
  set_work(st, bytes, flop_per_elem(c.op) * n);
  set_alloc_counters(st, allocs);
  set_regime(st, ws, k.threads);
}

}  // namespace

void register_family() {
  const Shape l2 = smoke() ? Shape{2, 4, 8, 8} : Shape{1, 16, 64, 64};
  const Shape dram = smoke() ? Shape{2, 4, 16, 16} : Shape{64, 64, 128, 128};
  const std::vector<Layout> all_layouts = {Layout::Contiguous, Layout::Transposed, Layout::Sliced, Layout::Expanded,
                                           Layout::ChannelsLast, Layout::MixedFormats};
  const std::vector<Layout> dram_layouts =
      full() ? all_layouts : std::vector<Layout>{Layout::Contiguous, Layout::Transposed, Layout::MixedFormats};
  const std::vector<DType> dtypes =
      full() ? std::vector<DType>{DType::Float32, DType::Float64, DType::Int32, DType::BFloat16}
             : std::vector<DType>{DType::Float32};
  const std::vector<EwOp> ops = {EwOp::Add, EwOp::Mul, EwOp::Relu, EwOp::Normalize, EwOp::Loop};

  auto add_case = [&dram](const Case& k) {
    const RunName name = RunName()
                             .op(cases::op_name(k.c.op))
                             .layout(layout_name(k.c.layout))
                             .style(style_name(k.c.style))
                             .dtype(k.dtype)
                             .shape(k.shape)
                             .threads(k.threads);
    auto* b = add_run(name, [k](benchmark::State& st) { run_case(st, k); });
    // A DRAM-size outofplace_system call faults in a fresh 256 MiB result (and the loop
    // two temporaries) every time: quick takes 3 samples of it, not 5 (docs/notes/bench.md).
    if (k.c.style == Style::OutofplaceSystem && k.shape == dram && !full()) b->Repetitions(std::min(3, repetitions()));
  };
  // The table's order (layout outermost) with threads innermost: one pool group (the
  // inputs of one size, dtype and layout) serves every run that reads it, then is dropped.
  for (DType dt : dtypes) {
    for (const Shape& shape : {l2, dram}) {
      const auto& layouts = shape == l2 ? all_layouts : dram_layouts;
      for (const EwCase& c : cases::elementwise_cases(ops)) {
        const Layout l = c.layout;
        const Style s = c.style;
        if (std::find(layouts.begin(), layouts.end(), l) == layouts.end()) continue;
        if (c.op == EwOp::Normalize && !is_floating(dt)) continue;
        if (c.op != EwOp::Loop && s == Style::OutofplaceSystem && l != Layout::Contiguous && !full()) continue;
        // The slowest DRAM rows (docs/notes/bench.md): quick keeps normalize contiguous, and
        // its system-allocator style for the L2 size only (add, relu and the loop show it).
        if (c.op == EwOp::Normalize && shape == dram && (l != Layout::Contiguous || s == Style::OutofplaceSystem) &&
            !full())
          continue;
        // mul at DRAM size (quick): the contiguous in-place, out= and out-of-place rows of
        // the speed goal (#3: add, mul and relu in every style)
        if (c.op == EwOp::Mul && shape == dram && !full() && (l != Layout::Contiguous || s == Style::OutofplaceSystem))
          continue;
        // mixed formats at DRAM size (quick): add and relu out=, an NHWC operand into an
        // NCHW out and the reverse
        if (l == Layout::MixedFormats && shape == dram && !full() &&
            !(s == Style::Out && (c.op == EwOp::Add || c.op == EwOp::Relu)))
          continue;
        for (int t : thread_counts()) add_case({c, shape, dt, t});
      }
    }
  }
  // bfloat16 (quick): twins of the float32 rows the tables compare it with: add in place and
  // out= on contiguous inputs, out= with a transposed operand, relu and normalize out=, at
  // both sizes (full: every row, as float32)
  const EwCase bf16_rows[] = {{EwOp::Add, Layout::Contiguous, Style::Inplace},
                              {EwOp::Add, Layout::Contiguous, Style::Out},
                              {EwOp::Add, Layout::Transposed, Style::Out},
                              {EwOp::Relu, Layout::Contiguous, Style::Out},
                              {EwOp::Normalize, Layout::Contiguous, Style::Out}};
  if (!full())
    for (const Shape& shape : {l2, dram})
      for (const EwCase& c : bf16_rows)
        for (int t : thread_counts()) add_case({c, shape, DType::BFloat16, t});
}

}  // namespace sb::bench
