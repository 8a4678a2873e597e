// elementwise.cpp — binary and unary ops (CPU), in three styles, on the shared strided
// iterator (lib/elementwise/iterator.h) and the strip kernels of elementwise/strips.h;
// normalize is in normalize.cpp. CUDA tensors go to lib/cuda after the same checks.
//
// Each public op: checks (one per precondition, before any work) -> broadcast inputs
// with expand() -> allocate the output (out-of-place: PyTorch's layout rule,
// output_strides_like) -> StridedIter -> a 1-D strip kernel per (op, dtype).
// Strip kernels: AVX2+FMA(+F16C for float16) when sb::use_avx2() and the output strip is
// dense (stride == element size), strided inputs packed into L1 chunks first (Note
// [Packed strided inputs]); a scalar loop otherwise, always compiled. float16 and
// bfloat16 are stored 16-bit and computed in float32.
// exp: float32/float16 AVX2 uses a Cephes-style polynomial with range reduction
// (<= 2 ulp, tests/elementwise_test.cpp checks every 997th float in [-104, 89]); the
// scalar path and float64 call std::exp per element (compute-bound: several times
// slower than memory for large tensors).
// Cost: one read per input element, one write per output element.
#include "stridebench/elementwise.h"
#include "core/test_hooks.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "stridebench/cpu_features.h"
#include "copy/copy.h"
#include "elementwise/strips.h"
#include "elementwise/iterator.h"
#include "elementwise/op_math.h"
#include "core/transpose_tile.h"

#ifdef SB_HAVE_AVX2
#include <immintrin.h>
#endif
#ifdef SB_WITH_CUDA
#include "cuda/cuda_backend.h"
#endif

namespace sb {

const char* binary_op_name(BinaryOp op) {
  switch (op) {
    case BinaryOp::Add: return "add";
    case BinaryOp::Sub: return "sub";
    case BinaryOp::Mul: return "mul";
    case BinaryOp::Div: return "div";
    case BinaryOp::Maximum: return "maximum";
    case BinaryOp::Minimum: return "minimum";
  }
  return "?";
}

const char* unary_op_name(UnaryOp op) {
  switch (op) {
    case UnaryOp::Neg: return "neg";
    case UnaryOp::Abs: return "abs";
    case UnaryOp::Relu: return "relu";
    case UnaryOp::Exp: return "exp";
    case UnaryOp::Sqrt: return "sqrt";
  }
  return "?";
}

namespace {

using namespace ew;  // acc_t and the strip kernels (elementwise/strips.h)

// The ops' arithmetic, BinaryFn<OP> and UnaryFn<OP>: elementwise/op_math.h.

// ---------------------------------------------------------------- dispatch helpers

#define SB_BINARY_OP_CASES(OPV, ...)                                  \
  switch (OPV) {                                                      \
    case BinaryOp::Add: { constexpr BinaryOp OP = BinaryOp::Add; __VA_ARGS__; break; }         \
    case BinaryOp::Sub: { constexpr BinaryOp OP = BinaryOp::Sub; __VA_ARGS__; break; }         \
    case BinaryOp::Mul: { constexpr BinaryOp OP = BinaryOp::Mul; __VA_ARGS__; break; }         \
    case BinaryOp::Div: { constexpr BinaryOp OP = BinaryOp::Div; __VA_ARGS__; break; }         \
    case BinaryOp::Maximum: { constexpr BinaryOp OP = BinaryOp::Maximum; __VA_ARGS__; break; } \
    case BinaryOp::Minimum: { constexpr BinaryOp OP = BinaryOp::Minimum; __VA_ARGS__; break; } \
  }

#define SB_UNARY_OP_CASES(OPV, ...)                                                \
  switch (OPV) {                                                                   \
    case UnaryOp::Neg: { constexpr UnaryOp OP = UnaryOp::Neg; __VA_ARGS__; break; }   \
    case UnaryOp::Abs: { constexpr UnaryOp OP = UnaryOp::Abs; __VA_ARGS__; break; }   \
    case UnaryOp::Relu: { constexpr UnaryOp OP = UnaryOp::Relu; __VA_ARGS__; break; } \
    case UnaryOp::Exp: { constexpr UnaryOp OP = UnaryOp::Exp; __VA_ARGS__; break; }   \
    case UnaryOp::Sqrt: { constexpr UnaryOp OP = UnaryOp::Sqrt; __VA_ARGS__; break; } \
  }

// The dtypes elementwise ops compute on; the caller has checked the dtype.
#define SB_DISPATCH_EW(DTYPE, ...)                                 \
  switch (DTYPE) {                                                 \
    SB_DTYPE_CASE(::sb::DType::Float32, float, __VA_ARGS__)        \
    SB_DTYPE_CASE(::sb::DType::Float64, double, __VA_ARGS__)       \
    SB_DTYPE_CASE(::sb::DType::Float16, ::sb::Half, __VA_ARGS__)   \
    SB_DTYPE_CASE(::sb::DType::BFloat16, ::sb::BFloat16, __VA_ARGS__) \
    SB_DTYPE_CASE(::sb::DType::Int32, int32_t, __VA_ARGS__)        \
    default: SB_INTERNAL_ASSERT(false, "unchecked dtype ", DTYPE); \
  }

}  // namespace

namespace ew {

std::atomic<bool> g_last_nt{false};

void check_dtype(const char* name, DType dt, bool floating_only) {
  const bool ok = is_floating(dt) || dt == DType::Int32;
  SB_CHECK(ok, name, ": dtype ", dt, " is not supported (float32, float64, float16, bfloat16 or int32)");
  SB_CHECK(!floating_only || is_floating(dt), name, ": dtype ", dt,
           " is not supported: this op needs a floating dtype (PyTorch would promote integers to float; "
           "stridebench has no type promotion: convert with .to(DType::Float32) first)");
}

// Checks out against the result's sizes, dtype and device and the overlap rules (Note
// [Overlap from strides]): an input that shares elements with out other than exactly
// (a.add_(a)) is an error. Returns true when an input's overlap with out could not be
// decided within the search bound; the caller then computes from copies of its inputs.
bool check_out(const char* name, const Tensor& out, const Shape& sizes, DType dt, Device dev,
               const std::vector<const Tensor*>& inputs) {
  SB_CHECK(out.defined(), name, ": undefined output tensor");
  SB_CHECK(out.dtype() == dt, name, ": output dtype ", out.dtype(), " does not match the result dtype ", dt);
  SB_CHECK(out.device() == dev, name, ": output is on ", out.device(), " but the inputs are on ", dev);
  SB_CHECK(out.sizes() == sizes, name, ": output sizes ", out.sizes(), " do not match the result sizes ", sizes,
           " (stridebench does not resize outputs)");
  // is_contiguous() first: O(ndim), no allocation (the overlap test sorts the strides)
  SB_CHECK(out.is_contiguous() || has_internal_overlap(out) != MemOverlap::Yes, name, ": the output (sizes ", out.sizes(), ", strides ",
           out.strides(), ") has several elements at one memory location (an expanded tensor); clone() it first");
  bool undecided = false;
  for (const Tensor* in : inputs) {
    const MemOverlapStatus ov = get_overlap_status(out, *in);
    SB_CHECK(ov != MemOverlapStatus::Partial, name, ": an input (sizes ", in->sizes(), ", strides ", in->strides(),
             ", offset ", in->storage_offset(), ") shares elements with the output (sizes ", out.sizes(), ", strides ",
             out.strides(), ", offset ", out.storage_offset(), ") at other positions; clone() the input first");
    undecided |= ov == MemOverlapStatus::TooHard;
  }
  return undecided;
}

void check_inputs(const char* name, const Tensor& a, const Tensor& b) {
  SB_CHECK(a.defined() && b.defined(), name, ": undefined input tensor");
  SB_CHECK(a.dtype() == b.dtype(), name, ": dtype mismatch: ", a.dtype(), " and ", b.dtype(),
           " (stridebench has no type promotion)");
  SB_CHECK(a.device() == b.device(), name, ": expected both inputs on one device, got ", a.device(), " and ",
           b.device());
}

void no_cuda(const char* name, Device d) {
  SB_CHECK(false, name, ": tensor on ", d, " needs CUDA, and stridebench was built without it");
}

// The rule both share: the vector path of a dtype that has one, an output above the
// threshold, and no input that is the output (in place never streams).
bool may_stream(bool avx, const Tensor& out, std::initializer_list<const Tensor*> ins) {
  const DType dt = out.dtype();  // the dtypes with vector loops (kHasVec)
  bool nt = avx && is_floating(dt) &&
            out.numel() * static_cast<int64_t>(out.element_size()) > nt_threshold_bytes();
  for (const Tensor* t : ins) nt = nt && t->data_ptr() != out.data_ptr();
  return nt;
}

// The output of an op over `inputs` (already of `sizes`), laid out as PyTorch lays it.
Tensor new_output(const Shape& sizes, std::initializer_list<const Tensor*> inputs) {
  SB_INTERNAL_ASSERT(inputs.size() <= DimPlan::kMaxOperands, "new_output: ", inputs.size(), " inputs");
  const Shape* st[DimPlan::kMaxOperands];
  int n = 0;
  for (const Tensor* t : inputs) st[n++] = &t->strides();
  return empty_strided(sizes, output_strides_like(sizes, st, n), (*inputs.begin())->dtype(),
                       (*inputs.begin())->device());
}

}  // namespace ew

namespace {

using namespace ew;

// ---------------------------------------------------------------- the three bodies (checks done)

// Note [Row blocks]: the strip kernels as the iterator's row-block callable. K is a
// callable (p, s, n) for one strip (unary_strip / binary_strip with the op bound); the block form
// runs `rows` strips s1 apart in a tight loop, so a strip costs a call of K (its stride
// dispatch, its vector loop) and no longer also the iterator's odometer and pointer
// bookkeeping, which perf put at a third of x + b over 20-float rows.
//
// Note [One iterator instance]: every elementwise op hands the iterator the same type,
// StripKernel, a function pointer to row_block<N, K> and K's address, so StridedIter's
// for_each / run_range / run_tiles / run_groups are compiled once for all of them, and
// each (op, dtype) has one copy of its strip kernel (the stride dispatch and every
// vector loop). With K passed as its own type, the iterator was instantiated for each
// of the 68 (op, dtype) kernels and inlined a copy of the strip kernel at each of its
// seven call sites (Contiguous, run_range's two, run_tiles' four): functions of up to
// 125 KB, and 10 CPU-minutes to compile this file in the sanitizer build, whose
// register-liveness passes grow faster than function size (-ftime-report). The price
// is one indirect call per strip or row block (the same target every time). row_block
// is `flatten`ed: unary_strip / binary_strip and their loops inline into it, where they
// were three calls deep, at two call sites of K: the one strip, and the loop over rows,
// whose copy GCC specializes for the rows (sharing one site cost the row loops of a
// broadcast operand; docs/notes/elementwise.md). The staged and periodic forms
// (staged_rows, periodic_rows) call back through row_block with rows = 1, as the
// iterator does, and are compiled once per (operand count, dtype), not per op: a third
// copy of K in each staged_rows was the largest share of this file's compile time.
using RowBlockFn = void (*)(const void* k, char* const* p, const int64_t* s, int64_t n, int64_t rows, const int64_t* s1);

struct StripKernel {
  RowBlockFn fn;
  const void* k;
  void operator()(char* const* p, const int64_t* s, int64_t n) const { fn(k, p, s, n, 1, s); }
  void operator()(char* const* p, const int64_t* s, int64_t n, int64_t rows, const int64_t* s1) const {
    fn(k, p, s, n, rows, s1);
  }
};

// Note [Periodic rows]: a row block whose output rows lie end to end (s1 = n elements)
// and whose inputs are each dense the same way, a scalar (stride 0 both ways), or one row
// read again for every output row (stride 1 along the strip, 0 across rows: x + b with b a
// bias row, or a per-channel bias on a channels-last tensor, rows of C) is one dense run
// of n * rows elements in which the repeated rows are periodic. As rows, short ones pay
// per row for the strip's stride dispatch and for a partial vector at each end (masked,
// or element by element when streaming: Note [Streaming strips]). Here each repeated row
// is copied, repeated, into an L1 buffer of kPeriodicChunk + 128 bytes, and the
// kernel's dense loop runs over chunks of kPeriodicChunk outputs, reading the buffer from
// (position mod n). Chunks end on 64-byte boundaries of the output, so only the block's
// own two ends are partial vectors. The chunks go through row_block itself with rows = 1
// (fn), so this function is compiled once per (operand count, dtype), not per op.
// Only rows under 128 bytes: longer rows already run at the memory rate as rows, and the
// periodic form was slower there (docs/notes/elementwise.md).
constexpr int64_t kPeriodicChunk = 1024;     // outputs per kernel call: a multiple of 64 bytes for every dtype
constexpr int64_t kPeriodicRowBytes = 128;   // rows shorter than this take the periodic form

template <int N, typename T>
__attribute__((noinline)) bool periodic_rows(RowBlockFn fn, const void* kp, char* const* p, const int64_t* s, int64_t n,
                                             int64_t rows, const int64_t* s1) {
  constexpr int64_t es = sizeof(T);
  const int64_t total = n * rows;
  if (total < 4 * kPeriodicChunk || s[0] != es || s1[0] != n * es) return false;
  enum class Kind : uint8_t { Dense, Scalar, Periodic };
  Kind kind[N];
  int periodic = 0;
  for (int i = 1; i < N; ++i) {
    if (s[i] == es && s1[i] == n * es) {
      kind[i] = Kind::Dense;
    } else if (s[i] == 0 && s1[i] == 0) {
      kind[i] = Kind::Scalar;
    } else if (s[i] == es && s1[i] == 0) {
      kind[i] = Kind::Periodic;
      ++periodic;
    } else {
      return false;
    }
  }
  if (periodic == 0) return false;
  constexpr int64_t kLen = kPeriodicChunk + kPeriodicRowBytes / es;  // enough for a chunk from any phase
  alignas(64) unsigned char raw[N - 1][kLen * es];                    // at most 2 x 8.1 KiB (float64)
  int64_t st[N];
  st[0] = es;
  for (int i = 1; i < N; ++i) {
    st[i] = kind[i] == Kind::Scalar ? 0 : es;
    if (kind[i] != Kind::Periodic) continue;
    std::memcpy(raw[i - 1], p[i], n * es);  // the row, then doubled until the buffer is full
    for (int64_t have = n; have < kLen; have *= 2)
      std::memcpy(raw[i - 1] + have * es, raw[i - 1], std::min(have, kLen - have) * es);
  }
  const int64_t lead = static_cast<int64_t>(reinterpret_cast<uintptr_t>(p[0]) % 64) / es;
  char* q[N];
  int64_t pos = 0, phase = 0;  // phase: pos mod n
  for (int64_t len = std::min(total, kPeriodicChunk - lead); pos < total;
       len = std::min(total - pos, kPeriodicChunk)) {
    q[0] = p[0] + pos * es;
    for (int i = 1; i < N; ++i)
      q[i] = kind[i] == Kind::Dense    ? p[i] + pos * es
             : kind[i] == Kind::Scalar ? p[i]
                                       : reinterpret_cast<char*>(raw[i - 1] + phase * es);
    fn(kp, static_cast<char* const*>(q), st, len, 1, st);
    pos += len;
    phase = (phase + len) % n;
  }
  return true;
}

// Note [Transposed row blocks], the staged form: the block's inputs that run along its
// rows (|s1| < |s|) are copied, stage_elems() elements at a time (whole rows where they
// fit), into L1 buffers (stage_tile: AVX2 tile transposes for 2-, 4- and 8-byte elements
// with s1 of one element, a scalar copy otherwise), and the kernel (fn: row_block with
// rows = 1) runs on the staged rows, every such input dense: in one call where the
// output and the other inputs hold whole rows one after the other (or are scalars), else
// row by row.
// 2-byte elements stage twice as many, the same 4 KiB as float32: 16 rows of a 64-wide
// plane a step left each step's fixed cost on half the bytes (docs/notes/elementwise.md).
//
// Note [Staged part rows]: rows too long for 8 of them to fit a step (n > stage_elems() /
// 8) are staged kAcrossRows at a time (or all of the block's, if fewer), in parts of up
// to twice stage_elems() / kAcrossRows columns: the input running along the rows is read
// 16 elements a column into the tile transposes, and each row part goes to the kernel as
// one call. Whole rows a step, as shorter rows take, gave such blocks (a channels-last
// input of 16 channels into an NCHW out: rows of 4096) one row a step, all of it through
// scalar copies, at several times the contiguous time in bfloat16 (float32 takes
// across_block); the doubled buffer halves the calls per row (docs/notes/elementwise.md).
constexpr int64_t kStageElems = 1024;
constexpr int64_t kAcrossRows = 16;
template <typename T>
constexpr int64_t stage_elems() { return sizeof(T) == 2 ? 2 * kStageElems : kStageElems; }

template <int N, typename T>
__attribute__((noinline)) bool staged_rows(RowBlockFn fn, const void* kp, char* const* p, const int64_t* s, int64_t n,
                                           int64_t rows, const int64_t* s1) {
  constexpr int64_t es = sizeof(T);
  bool across[N] = {};
  bool any = false;
  for (int i = 1; i < N; ++i) {
    const int64_t a = s[i] < 0 ? -s[i] : s[i], b = s1[i] < 0 ? -s1[i] : s1[i];
    across[i] = b != 0 && b < a;
    any = any || across[i];
  }
  if (!any) return false;
  constexpr int64_t kElems = stage_elems<T>();
  // Note [Staged part rows]
  const bool whole = n <= kElems / 8;
  const int64_t gmax = whole ? kElems / n : std::min(rows, kAcrossRows);  // rows per step
  const int64_t mmax = whole ? n : std::min(n, 2 * kElems / gmax);        // columns per step
  bool blocks = mmax == n && s[0] == es && s1[0] == n * es;
  for (int i = 1; i < N; ++i)
    if (!across[i]) blocks = blocks && ((s[i] == es && s1[i] == n * es) || (s[i] == 0 && s1[i] == 0));
  alignas(64) unsigned char buf[N - 1][2 * kElems * es];
  int64_t st[N];
  for (int i = 0; i < N; ++i) st[i] = across[i] ? es : s[i];
  char* q[N];
  for (int64_t r0 = 0; r0 < rows; r0 += gmax) {
    const int64_t g = std::min(gmax, rows - r0);
    for (int64_t j0 = 0; j0 < n; j0 += mmax) {
      const int64_t m = std::min(mmax, n - j0);
      for (int i = 1; i < N; ++i)  // buf[r][j] = element (r0 + r, j0 + j)
        if (across[i])
          stage_tile(reinterpret_cast<char*>(buf[i - 1]), p[i] + r0 * s1[i] + j0 * s[i], s[i], s1[i], m, g, m, es);
      for (int64_t r = 0; r < (blocks ? 1 : g); ++r) {
        for (int i = 0; i < N; ++i)
          q[i] = across[i] ? reinterpret_cast<char*>(buf[i - 1]) + r * m * es : p[i] + (r0 + r) * s1[i] + j0 * s[i];
        fn(kp, static_cast<char* const*>(q), st, blocks ? g * m : m, 1, st);
      }
    }
  }
  return true;
}

template <int N, typename T, typename K>  // N: operands, the output first; T: their dtype
__attribute__((flatten)) void row_block(const void* kp, char* const* p, const int64_t* s, int64_t n, int64_t rows, const int64_t* s1) {
  const K& k = *static_cast<const K*>(kp);
  if (rows == 1) {  // one strip: p goes to k as it is (copying it first cost a store-forwarding stall per strip)
    k(p, s, n);
    return;
  }
  if (n * static_cast<int64_t>(sizeof(T)) < kPeriodicRowBytes &&
      periodic_rows<N, T>(&row_block<N, T, K>, kp, p, s, n, rows, s1))
    return;
  int64_t r = 0;  // Note [Transposed row blocks]
#ifdef SB_HAVE_AVX2
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>)
    if (k.avx && !k.nt) r = across_block<T, N>(p, s, n, rows, s1, k.f);
#endif
  if (r == rows) return;
  char* q[N];
  for (int i = 0; i < N; ++i) q[i] = p[i] + r * s1[i];
  if (staged_rows<N, T>(&row_block<N, T, K>, kp, static_cast<char* const*>(q), s, n, rows - r, s1)) return;
  for (;;) {
    k(static_cast<char* const*>(q), s, n);
    if (++r == rows) return;
    for (int i = 0; i < N; ++i) q[i] += s1[i];
  }
}

// The strip kernel of an op: unary_strip (N = 2) or binary_strip (N = 3) with the op's
// functor f bound; row_block reads avx, nt and f for Note [Transposed row blocks].
template <typename T, int N, typename F>
struct Strip {
  bool avx, nt;
  F f;
  void operator()(char* const* p, const int64_t* s, int64_t n) const {
    if constexpr (N == 3) binary_strip<T>(avx, nt, p, s, n, f);
    else unary_strip<T>(avx, nt, p, s, n, f);
  }
};

// k must outlive the for_each it is passed to.
template <int N, typename T, typename K>
StripKernel strip_kernel(const K& k) {
  return StripKernel{&row_block<N, T, K>, &k};
}

// Note [Streaming elementwise outputs]: a dense output (the Contiguous path, or Tiled
// with dense-block tiles) above the streaming threshold that no input shares, on the
// vector path of a dtype that has one. Tiles that write parts of longer out rows (a
// transposed 2-D operand or out) kept plain stores on the Intel VM where they were first
// timed streamed; on the Sapphire Rapids-class VM they took much less time streamed, at
// every size past the threshold, so they stream where the design's tuning says so
// (CpuTuning::tiled_partial_nt, SB_TUNING tilent; docs/notes/elementwise.md, "Tiles of
// longer out rows streamed").
bool stream_output(bool avx, const StridedIter& it, const Tensor& out, std::initializer_list<const Tensor*> ins) {
  const bool tiled = it.path() == StridedIter::Path::Tiled;
  const bool nt = may_stream(avx, out, ins) &&
                  (it.path() == StridedIter::Path::Contiguous || it.tiles_write_dense_blocks() ||
                   it.strips_write_dense_output() || it.reads_ahead() || (tiled && cpu_tuning().tiled_partial_nt));
  g_last_nt.store(nt, std::memory_order_relaxed);
  return nt;
}

}  // namespace

bool last_elementwise_used_nt() { return g_last_nt.load(std::memory_order_relaxed); }

namespace {

std::atomic<int64_t> g_last_grain{0};

// The grain of an elementwise loop over T (Note [Grain in bytes]): the design's, in
// elements for 2-byte elements and in bytes of T for the rest.
template <typename T>
int64_t ew_grain() {
  const CpuTuning& t = cpu_tuning();
  const int64_t g = sizeof(T) == 2 ? t.grain16 : std::max<int64_t>(1, t.grain_bytes / static_cast<int64_t>(sizeof(T)));
  g_last_grain.store(g, std::memory_order_relaxed);
  return g;
}

void run_binary([[maybe_unused]] const char* name, BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b) {
  if (out.numel() == 0) return;
  if (!out.device().is_cpu()) {
#ifdef SB_WITH_CUDA
    return cuda::binary(op, out, a, b);
#else
    return no_cuda(name, out.device());
#endif
  }
  const StridedIter it = StridedIter::of({&out, &a, &b});
  const bool avx = use_avx2();
  const bool nt = stream_output(avx, it, out, {&a, &b});
  SB_DISPATCH_EW(out.dtype(), SB_BINARY_OP_CASES(op, {
    const Strip<scalar_t, 3, BinaryFn<OP>> k{avx, nt, {}};
    it.for_each(strip_kernel<3, scalar_t>(k), ew_grain<scalar_t>(), nt);  // Note [Grain in bytes]
  }));
}

void run_binary_scalar([[maybe_unused]] const char* name, BinaryOp op, const Tensor& out, const Tensor& a, double b) {
  if (out.numel() == 0) return;
  if (!out.device().is_cpu()) {
#ifdef SB_WITH_CUDA
    return cuda::binary_scalar(op, out, a, b);
#else
    return no_cuda(name, out.device());
#endif
  }
  const StridedIter it = StridedIter::of({&out, &a});
  const bool avx = use_avx2();
  const bool nt = stream_output(avx, it, out, {&a});
  SB_DISPATCH_EW(out.dtype(), SB_BINARY_OP_CASES(op, {
    using A = acc_t<scalar_t>;
    const BinaryScalarFn<OP, A> f{static_cast<A>(b)};
    const Strip<scalar_t, 2, BinaryScalarFn<OP, A>> k{avx, nt, f};
    it.for_each(strip_kernel<2, scalar_t>(k), ew_grain<scalar_t>(), nt);  // Note [Grain in bytes]
  }));
}

void run_unary([[maybe_unused]] const char* name, UnaryOp op, const Tensor& out, const Tensor& a) {
  if (out.numel() == 0) return;
  if (!out.device().is_cpu()) {
#ifdef SB_WITH_CUDA
    return cuda::unary(op, out, a);
#else
    return no_cuda(name, out.device());
#endif
  }
  const StridedIter it = StridedIter::of({&out, &a});
  const bool avx = use_avx2();
  const bool nt = stream_output(avx, it, out, {&a});
  SB_DISPATCH_EW(out.dtype(), SB_UNARY_OP_CASES(op, {
    const Strip<scalar_t, 2, UnaryFn<OP>> k{avx, nt, {}};
    it.for_each(strip_kernel<2, scalar_t>(k), ew_grain<scalar_t>(), nt);  // Note [Grain in bytes]
  }));
}

void check_int_scalar(const char* name, DType dt, double b) {
  if (dt != DType::Int32) return;
  SB_CHECK(std::trunc(b) == b && b >= std::numeric_limits<int32_t>::min() && b <= std::numeric_limits<int32_t>::max(),
           name, ": scalar ", b, " is not an int32 value, and an int32 tensor needs one (no type promotion)");
}

}  // namespace

int64_t last_elementwise_grain() { return g_last_grain.load(std::memory_order_relaxed); }

// ---------------------------------------------------------------- public entry points

namespace {
Tensor& binary_out_named(const char* name, BinaryOp op, Tensor& out, const Tensor& a, const Tensor& b) {
  check_inputs(name, a, b);
  check_dtype(name, a.dtype(), op == BinaryOp::Div);
  const Shape sizes = broadcast_shapes(a.sizes(), b.sizes(), name);
  if (check_out(name, out, sizes, a.dtype(), a.device(), {&a, &b}))
    return binary_out_named(name, op, out, a.clone(), b.clone());
  if (a.sizes() == sizes && b.sizes() == sizes) {  // nothing to broadcast: no expanded copies (per-call cost)
    run_binary(name, op, out, a, b);
  } else {
    run_binary(name, op, out, a.expand(sizes), b.expand(sizes));
  }
  return out;
}

Tensor& binary_scalar_out_named(const char* name, BinaryOp op, Tensor& out, const Tensor& a, double b) {
  SB_CHECK(a.defined(), name, ": undefined input tensor");
  check_dtype(name, a.dtype(), op == BinaryOp::Div);
  check_int_scalar(name, a.dtype(), b);
  if (check_out(name, out, a.sizes(), a.dtype(), a.device(), {&a}))
    return binary_scalar_out_named(name, op, out, a.clone(), b);
  run_binary_scalar(name, op, out, a, b);
  return out;
}

Tensor& unary_out_named(const char* name, UnaryOp op, Tensor& out, const Tensor& a) {
  SB_CHECK(a.defined(), name, ": undefined input tensor");
  check_dtype(name, a.dtype(), op == UnaryOp::Exp || op == UnaryOp::Sqrt);
  if (check_out(name, out, a.sizes(), a.dtype(), a.device(), {&a})) return unary_out_named(name, op, out, a.clone());
  run_unary(name, op, out, a);
  return out;
}

}  // namespace

Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b) {
  const char* name = binary_op_name(op);
  check_inputs(name, a, b);
  check_dtype(name, a.dtype(), op == BinaryOp::Div);
  const Shape sizes = broadcast_shapes(a.sizes(), b.sizes(), name);
  if (a.sizes() == sizes && b.sizes() == sizes) {  // nothing to broadcast: no expanded copies (per-call cost)
    Tensor out = new_output(sizes, {&a, &b});
    run_binary(name, op, out, a, b);
    return out;
  }
  const Tensor ea = a.expand(sizes), eb = b.expand(sizes);
  Tensor out = new_output(sizes, {&ea, &eb});
  run_binary(name, op, out, ea, eb);
  return out;
}

Tensor& binary_out(BinaryOp op, Tensor& out, const Tensor& a, const Tensor& b) {
  return binary_out_named(binary_op_name(op), op, out, a, b);
}

Tensor binary(BinaryOp op, const Tensor& a, double b) {
  const char* name = binary_op_name(op);
  SB_CHECK(a.defined(), name, ": undefined input tensor");
  check_dtype(name, a.dtype(), op == BinaryOp::Div);
  check_int_scalar(name, a.dtype(), b);
  Tensor out = new_output(a.sizes(), {&a});
  run_binary_scalar(name, op, out, a, b);
  return out;
}

Tensor& binary_out(BinaryOp op, Tensor& out, const Tensor& a, double b) {
  return binary_scalar_out_named(binary_op_name(op), op, out, a, b);
}

Tensor unary(UnaryOp op, const Tensor& a) {
  const char* name = unary_op_name(op);
  SB_CHECK(a.defined(), name, ": undefined input tensor");
  check_dtype(name, a.dtype(), op == UnaryOp::Exp || op == UnaryOp::Sqrt);
  Tensor out = new_output(a.sizes(), {&a});
  run_unary(name, op, out, a);
  return out;
}

Tensor& unary_out(UnaryOp op, Tensor& out, const Tensor& a) { return unary_out_named(unary_op_name(op), op, out, a); }

#define SB_DEFINE_BINARY(name, OPV)                                                                         \
  Tensor name(const Tensor& a, const Tensor& b) { return binary(OPV, a, b); }                               \
  Tensor& name##_out(Tensor& out, const Tensor& a, const Tensor& b) {                                       \
    return binary_out_named(#name "_out", OPV, out, a, b);                                                  \
  }                                                                                                         \
  Tensor name(const Tensor& a, double b) { return binary(OPV, a, b); }                                      \
  Tensor& name##_out(Tensor& out, const Tensor& a, double b) {                                              \
    return binary_scalar_out_named(#name "_out", OPV, out, a, b);                                           \
  }
SB_DEFINE_BINARY(add, BinaryOp::Add)
SB_DEFINE_BINARY(sub, BinaryOp::Sub)
SB_DEFINE_BINARY(mul, BinaryOp::Mul)
SB_DEFINE_BINARY(div, BinaryOp::Div)
SB_DEFINE_BINARY(maximum, BinaryOp::Maximum)
SB_DEFINE_BINARY(minimum, BinaryOp::Minimum)
#undef SB_DEFINE_BINARY

#define SB_DEFINE_UNARY(name, OPV)                                   \
  Tensor name(const Tensor& a) { return unary(OPV, a); }             \
  Tensor& name##_out(Tensor& out, const Tensor& a) { return unary_out_named(#name "_out", OPV, out, a); }
SB_DEFINE_UNARY(neg, UnaryOp::Neg)
SB_DEFINE_UNARY(abs, UnaryOp::Abs)
SB_DEFINE_UNARY(relu, UnaryOp::Relu)
SB_DEFINE_UNARY(exp, UnaryOp::Exp)
SB_DEFINE_UNARY(sqrt, UnaryOp::Sqrt)
#undef SB_DEFINE_UNARY

// ---------------------------------------------------------------- in-place Tensor methods

#define SB_DEFINE_INPLACE_BINARY(name, OPV)                                                           \
  Tensor& Tensor::name##_(const Tensor& other) { return binary_out_named(#name "_", OPV, *this, *this, other); } \
  Tensor& Tensor::name##_(double other) { return binary_scalar_out_named(#name "_", OPV, *this, *this, other); }
SB_DEFINE_INPLACE_BINARY(add, BinaryOp::Add)
SB_DEFINE_INPLACE_BINARY(sub, BinaryOp::Sub)
SB_DEFINE_INPLACE_BINARY(mul, BinaryOp::Mul)
SB_DEFINE_INPLACE_BINARY(div, BinaryOp::Div)
#undef SB_DEFINE_INPLACE_BINARY

Tensor& Tensor::maximum_(const Tensor& other) { return binary_out_named("maximum_", BinaryOp::Maximum, *this, *this, other); }
Tensor& Tensor::minimum_(const Tensor& other) { return binary_out_named("minimum_", BinaryOp::Minimum, *this, *this, other); }
Tensor& Tensor::neg_() { return unary_out_named("neg_", UnaryOp::Neg, *this, *this); }
Tensor& Tensor::abs_() { return unary_out_named("abs_", UnaryOp::Abs, *this, *this); }
Tensor& Tensor::relu_() { return unary_out_named("relu_", UnaryOp::Relu, *this, *this); }
Tensor& Tensor::exp_() { return unary_out_named("exp_", UnaryOp::Exp, *this, *this); }
Tensor& Tensor::sqrt_() { return unary_out_named("sqrt_", UnaryOp::Sqrt, *this, *this); }

}  // namespace sb
