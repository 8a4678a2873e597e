// bench_baseline.cpp — the machine's own ceilings, measured in the same run as the
// kernels: every memory-bound row of the tables is shown as a % of one of these.
//
//   copy   c[i] = a[i]            2 x 4 bytes per element, 0 flop
//   scale  b[i] = s * c[i]        2 x 4 bytes, 1 flop
//   add    c[i] = a[i] + b[i]     3 x 4 bytes, 1 flop
//   triad  a[i] = b[i] + s * c[i] 3 x 4 bytes, 2 flop
//   read   sum += a[i]            1 x 4 bytes, 1 flop (16 accumulators)
//   copy_nt, add_nt  copy and add with streaming stores (AVX2 builds; LLC and DRAM sizes):
//          no read-for-ownership, as the library's streaming copies and elementwise
//          outputs. A memory-bound row's ceiling is the faster of the plain and the
//          streaming twin (docs/BENCHMARKS.md, Ceilings), so a streaming kernel no longer
//          reads far above a plain-store ceiling (docs/notes/bench.md).
//   add_inplace    a[i] += b[i]   3 x 4 bytes, 1 flop  } the in-place patterns: the
//   scale_inplace  a[i] *= s      2 x 4 bytes, 1 flop  } updated array is read, then
//          written back. Bytes are counted as the in-place kernel rows count them (the
//          updated array read and written: 3 resp. 2 arrays), but the written lines are
//          already in the cache, so there is no read-for-ownership: a plain-store
//          add/copy pays one extra line read per written line that these do not, and
//          in-place rows measured against add/copy read far above 100% at DRAM size.
//          The tables use these as the ceilings of in-place elementwise rows
//          (docs/BENCHMARKS.md, Ceilings). s is 1, read at run time (no drift, no
//          folding); add_inplace grows a by 2 per call, far from overflow.
//   fma_peak  register-resident FMA chains, 12 independent accumulators per thread
//          (FMA latency 4 cycles x 2 ports needs >= 8), no memory; 16 floats wide where
//          the CPU has AVX-512F, else 8 (AVX2). dtype:i8: u8 x s8 multiply-adds into
//          int32 (AVX-512 VNNI, else AVX-512BW, else AVX2), 2 ops per multiply-add.
//          dtype:bf16: bfloat16 pair dot products into float32 (AMX tdpbf16ps where
//          the CPU has AMX-BF16, four accumulator tiles; else AVX512_BF16 vdpbf16ps,
//          32 multiply-adds per instruction, 24 accumulators), 2 flop per multiply-add; registered only
//          where the CPU has it: elsewhere the bfloat16 GEMM runs the float32 kernels
//          and the tables hold it to the float32 peak. The ISA used is in the context
//          as sb_peak_isa (bf16:none where there is no such row). These are the machine's
//          peaks, wider than our kernels' AVX2 path where the CPU has AVX-512.
//
// STREAM conventions: bytes count each array once (no write-allocate traffic). The
// loops are plain C++ (no OpenMP pragmas), parallelised with sb::parallel_for and
// the same grain (sb::kGrainSize) as the library's kernels, compiled with the same
// flags, so the ceiling is what the library's own machinery can reach. GCC would turn
// the copy loop into a memcpy call (whose non-temporal stores no kernel of ours
// uses), so loop-pattern distribution is off for this file's kernels.
//
// Working sets (float32, one array = n elements), fixed by name so runs compare across
// machines; the regime label comes from this machine's caches (the in-place ops' working
// set is their distinct arrays: 2 and 1, as the in-place kernel rows count theirs).
// Note [A ladder of cache sizes]: in the caches n = 1 Ki, 2 Ki, 4 Ki, ... 128 Ki (add:
// 12 KiB to 1.5 MiB), a doubling apart, so a cache-size row of any dtype finds a baseline
// of its own regime within a factor of 1.41 of its bytes (the tables take the nearest:
// docs/BENCHMARKS.md, Ceilings). One size per level does not do: which level holds it
// depends on the machine, and on a 32 KiB L1d and 1 MiB L2 the single "L1" add fell in
// the L2 regime and was every 1-thread L2 row's ceiling at L1 speed (docs/notes/bench.md).
// Then LLC n = 1 Mi (triad 12 MiB: an LLC of 24 MiB or more) and n = 8 Mi (triad 96
// MiB: LLCs of 192 MiB or more; on a 32 MiB L3 it is a second DRAM row, partly served by
// the L3: the tables take the largest row of DRAM), DRAM ~1 GiB per op (read n = 256 Mi,
// copy/scale n = 128 Mi, add/triad n = 96 Mi, add_inplace n = 96 Mi, scale_inplace n =
// 128 Mi): beyond any last-level cache up to 260 MiB, >= 3.9x this machine's
// (scale_inplace: 512 MiB, 1.9x).
//   (A level counts when the working set fills at most half of it: bench_common.h.)
// Arrays are re-initialised (a = 1, b = 2, c = 0) before each run's timed loop, so no
// run sees values grown by earlier runs; within a run the inputs never change.
#include <atomic>
#include <cstring>
#include <mutex>

#include "bench_common.h"
#include "stridebench/cpu_features.h"

#include <string>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define SB_X86 1
#endif

#if defined(__GNUC__) && !defined(__clang__)
#define SB_NO_MEMCPY_IDIOM __attribute__((optimize("no-tree-loop-distribute-patterns")))
#else
#define SB_NO_MEMCPY_IDIOM
#endif

namespace sb::bench {

const char* const kFamily = "baseline";

namespace {

constexpr float kScale = 3.0f;

enum class Op { Copy, Scale, Add, Triad, Read, AddInplace, ScaleInplace, CopyNt, AddNt };
const char* op_name(Op op) {
  switch (op) {
    case Op::Copy: return "copy";
    case Op::Scale: return "scale";
    case Op::Add: return "add";
    case Op::Triad: return "triad";
    case Op::Read: return "read";
    case Op::AddInplace: return "add_inplace";
    case Op::ScaleInplace: return "scale_inplace";
    case Op::CopyNt: return "copy_nt";
    case Op::AddNt: return "add_nt";
  }
  return "?";
}
// Arrays counted in the bytes (each read once, each write once) and arrays touched.
int arrays(Op op) {
  return op == Op::Read ? 1 : (op == Op::Copy || op == Op::Scale || op == Op::ScaleInplace || op == Op::CopyNt) ? 2 : 3;
}
int distinct_arrays(Op op) { return op == Op::AddInplace ? 2 : op == Op::ScaleInplace ? 1 : arrays(op); }
int flop_per_elem(Op op) { return op == Op::Copy || op == Op::CopyNt ? 0 : op == Op::Triad ? 2 : 1; }

// The three STREAM arrays, each grown to the largest n an op that uses it asks for
// (prefixes serve smaller n): first-touch page faults are slow on VMs
// (docs/notes/bench.md), so nothing is allocated twice and no array is larger than needed.
Tensor& array_for(int which, int64_t n) {
  static Tensor arr[3];
  if (arr[which].numel() < n) {
    arr[which] = Tensor();  // free before growing
    caching_cpu_allocator()->empty_cache();
    arr[which] = empty({n});
  }
  return arr[which];
}

// Before a run: the arrays the op reads and writes set to a = 1, b = 2, c = 0.
SB_NO_MEMCPY_IDIOM void init(float* p, float v, int64_t n) {
  parallel_for(0, n, kGrainSize, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) p[i] = v;
  });
}

// Note [Unrolled STREAM loops]: every STREAM loop is unrolled 4x. On Zen 4 a loop with
// one vector store per iteration runs at one iteration per cycle or per two depending on
// its placement in the binary (lib/elementwise/elementwise.cpp, Note [Unrolled vector loops]),
// so rolled loops can halve a ceiling and put kernel rows above 100% of it
// (docs/notes/bench.md).
SB_NO_MEMCPY_IDIOM void copy(const float* __restrict a, float* __restrict c, int64_t n) {
  parallel_for(0, n, kGrainSize, [&](int64_t lo, int64_t hi) {
#pragma GCC unroll 4  // Note [Unrolled STREAM loops]
    for (int64_t i = lo; i < hi; ++i) c[i] = a[i];
  });
}
SB_NO_MEMCPY_IDIOM void scale(const float* __restrict c, float* __restrict b, int64_t n) {
  parallel_for(0, n, kGrainSize, [&](int64_t lo, int64_t hi) {
#pragma GCC unroll 4  // Note [Unrolled STREAM loops]
    for (int64_t i = lo; i < hi; ++i) b[i] = kScale * c[i];
  });
}
SB_NO_MEMCPY_IDIOM void add(const float* __restrict a, const float* __restrict b, float* __restrict c, int64_t n) {
  parallel_for(0, n, kGrainSize, [&](int64_t lo, int64_t hi) {
#pragma GCC unroll 4  // Note [Unrolled STREAM loops]
    for (int64_t i = lo; i < hi; ++i) c[i] = a[i] + b[i];
  });
}
SB_NO_MEMCPY_IDIOM void triad(const float* __restrict b, const float* __restrict c, float* __restrict a, int64_t n) {
  parallel_for(0, n, kGrainSize, [&](int64_t lo, int64_t hi) {
#pragma GCC unroll 4  // Note [Unrolled STREAM loops]
    for (int64_t i = lo; i < hi; ++i) a[i] = b[i] + kScale * c[i];
  });
}
SB_NO_MEMCPY_IDIOM void add_inplace(float* __restrict a, const float* __restrict b, int64_t n) {
  parallel_for(0, n, kGrainSize, [&](int64_t lo, int64_t hi) {
#pragma GCC unroll 4  // Note [Unrolled STREAM loops]
    for (int64_t i = lo; i < hi; ++i) a[i] += b[i];
  });
}
volatile float g_inplace_scale = 1.0f;  // read once per call: the compiler cannot fold a *= 1
SB_NO_MEMCPY_IDIOM void scale_inplace(float* __restrict a, int64_t n) {
  const float s = g_inplace_scale;
  parallel_for(0, n, kGrainSize, [&](int64_t lo, int64_t hi) {
#pragma GCC unroll 4  // Note [Unrolled STREAM loops]
    for (int64_t i = lo; i < hi; ++i) a[i] *= s;
  });
}
#ifdef SB_HAVE_AVX2
// The streaming-store twins of copy and add (_mm256_stream_ps: no read-for-ownership of
// the written lines, the lines go to memory, not to the caches), each thread ending with
// an sfence, as the library's streaming copies and elementwise outputs do. c is 64-byte
// aligned (caching allocator) and every chunk starts at a multiple of kGrainSize.
//
// Note [Streaming loops take their pointers as arguments]: a vector store may alias any
// memory (__m256 is may_alias), so a loop of them written inside a [&] lambda reloads
// the captured pointers through the closure after every store: six loads a vector,
// which held these rows below the library's own streaming add (docs/notes/bench.md).
// The loops are functions of their pointers; the lambdas only split the range.
void copy_nt_run(const float* __restrict a, float* __restrict c, int64_t lo, int64_t hi) {
  int64_t i = lo;
#pragma GCC unroll 4  // Note [Unrolled STREAM loops]
  for (; i + 8 <= hi; i += 8) _mm256_stream_ps(c + i, _mm256_loadu_ps(a + i));
  for (; i < hi; ++i) c[i] = a[i];
  _mm_sfence();
}
void add_nt_run(const float* __restrict a, const float* __restrict b, float* __restrict c, int64_t lo, int64_t hi) {
  int64_t i = lo;
#pragma GCC unroll 4  // Note [Unrolled STREAM loops]
  for (; i + 8 <= hi; i += 8) _mm256_stream_ps(c + i, _mm256_add_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i)));
  for (; i < hi; ++i) c[i] = a[i] + b[i];
  _mm_sfence();
}
void copy_nt(const float* a, float* c, int64_t n) {
  parallel_for(0, n, kGrainSize, [=](int64_t lo, int64_t hi) { copy_nt_run(a, c, lo, hi); });
}
void add_nt(const float* a, const float* b, float* c, int64_t n) {
  parallel_for(0, n, kGrainSize, [=](int64_t lo, int64_t hi) { add_nt_run(a, b, c, lo, hi); });
}
#endif
// Note [Read accumulators]: the read keeps 64 float sums (eight AVX2 vectors once
// vectorized). With 16 (two vectors) each vector add waited for the previous one on the
// same accumulator (3-cycle latency), and the row measured the adds, not the caches
// (docs/notes/bench.md).
float read(const float* __restrict a, int64_t n) {
  std::mutex m;
  double total = 0;
  parallel_for(0, n, kGrainSize, [&](int64_t lo, int64_t hi) {
    constexpr int kAcc = 64;  // eight AVX2 vectors of independent sums (Note [Read accumulators])
    float acc[kAcc] = {};
    int64_t i = lo;
    for (; i + kAcc <= hi; i += kAcc)
      for (int j = 0; j < kAcc; ++j) acc[j] += a[i + j];
    for (; i < hi; ++i) acc[0] += a[i];
    float s = 0;
    for (int j = 0; j < kAcc; ++j) s += acc[j];
    std::lock_guard<std::mutex> g(m);
    total += s;
  });
  return static_cast<float>(total);
}

void run_stream(benchmark::State& st, Op op, int64_t n, int threads) {
  ThreadScope ts(threads);
  // Which arrays each op touches: copy a->c, scale c->b, add a,b->c, triad b,c->a, read a,
  // add_inplace a,b->a, scale_inplace a->a.
  const bool uses[9][3] = {{1, 0, 1}, {0, 1, 1}, {1, 1, 1}, {1, 1, 1}, {1, 0, 0}, {1, 1, 0}, {1, 0, 0}, {1, 0, 1}, {1, 1, 1}};
  float* p[3] = {nullptr, nullptr, nullptr};
  const float init_value[3] = {1.0f, 2.0f, 0.0f};
  for (int k = 0; k < 3; ++k) {
    if (!uses[static_cast<int>(op)][k]) continue;
    p[k] = array_for(k, n).data<float>();
    init(p[k], init_value[k], n);
  }
  float *a = p[0], *b = p[1], *c = p[2];
  for (auto _ : st) {
    switch (op) {
      case Op::Copy: copy(a, c, n); break;
      case Op::Scale: scale(c, b, n); break;
      case Op::Add: add(a, b, c, n); break;
      case Op::Triad: triad(b, c, a, n); break;
      case Op::AddInplace: add_inplace(a, b, n); break;
      case Op::ScaleInplace: scale_inplace(a, n); break;
#ifdef SB_HAVE_AVX2
      case Op::CopyNt: copy_nt(a, c, n); break;
      case Op::AddNt: add_nt(a, b, c, n); break;
#else
      case Op::CopyNt:
      case Op::AddNt: break;  // not registered without AVX2
#endif
      case Op::Read: {
        float r = read(a, n);
        benchmark::DoNotOptimize(r);
        break;
      }
    }
    benchmark::ClobberMemory();
  }
  const int64_t bytes = arrays(op) * n * static_cast<int64_t>(sizeof(float));
  set_work(st, bytes, flop_per_elem(op) * n);
  set_regime(st, distinct_arrays(op) * n * static_cast<int64_t>(sizeof(float)), threads);
}

// ---- fma_peak ----
constexpr int kFmaAcc = 12;
// Note [Peak calls long enough]: a probe call runs long enough that waking the team's
// other thread for it is a small part of its time; with calls a tenth as long, the
// 2-thread probes read below the GEMMs they are the ceiling of on a VM (docs/notes/
// bench.md, "Peak probes in longer calls"). The same holds for the int8 and bfloat16 ones.
constexpr int64_t kFmaSteps = 1 << 18;

float fma_chain() {
#ifdef SB_HAVE_AVX2
  const __m256 x = _mm256_set1_ps(0.9999f), y = _mm256_set1_ps(1e-4f);  // fixed point 1.0: no denormals
  __m256 acc[kFmaAcc];
  for (int j = 0; j < kFmaAcc; ++j) acc[j] = _mm256_set1_ps(0.1f * j);
  for (int64_t k = 0; k < kFmaSteps; ++k) {
#pragma GCC unroll 12
    for (int j = 0; j < kFmaAcc; ++j) acc[j] = _mm256_fmadd_ps(acc[j], x, y);
  }
  __m256 s = acc[0];
  for (int j = 1; j < kFmaAcc; ++j) s = _mm256_add_ps(s, acc[j]);
  alignas(32) float out[8];
  _mm256_store_ps(out, s);
  return out[0] + out[7];
#else
  // Scalar build: the same chains in GCC vector types (mul + add where no FMA exists).
  typedef float v8f __attribute__((vector_size(32)));
  const v8f x = {0.9999f, 0.9999f, 0.9999f, 0.9999f, 0.9999f, 0.9999f, 0.9999f, 0.9999f};
  const v8f y = x * 0.0f + 1e-4f;
  v8f acc[kFmaAcc];
  for (int j = 0; j < kFmaAcc; ++j) acc[j] = x * 0.0f + 0.1f * j;
  for (int64_t k = 0; k < kFmaSteps; ++k) {
#pragma GCC unroll 12
    for (int j = 0; j < kFmaAcc; ++j) acc[j] = acc[j] * x + y;
  }
  v8f s = acc[0];
  for (int j = 1; j < kFmaAcc; ++j) s += acc[j];
  return s[0] + s[7];
#endif
}

// The chains' lengths, beside run_bf16 and run_i8's counts of their work on every CPU.
constexpr int64_t kI8Steps = 1 << 17;  // Note [Peak calls long enough]
// 24 chains, as many accumulators as the bf16 GEMM's 12x32 tile keeps (Note [Wide tile] in
// matmul/gemm_impl.h): vdpbf16ps takes longer than an FMA to its result on some cores,
// where 12 chains left the probe below the GEMM it is the ceiling of
// (docs/notes/gemm.md, "The bf16 peak's chains").
constexpr int kBf16Acc = 24;
constexpr int64_t kBf16Steps = 1 << 16;  // Note [Peak calls long enough]
constexpr int64_t kAmxSteps = 1 << 13;

#ifdef SB_X86
// The machine's peak, not our kernels' ISA: where the CPU has AVX-512 the same chains
// run 16 wide (GCC target attributes; picked at run time), so compute rows are shown
// against what the hardware can do (PyTorch's oneDNN uses AVX-512 here).
__attribute__((target("avx512f"))) float fma_chain_avx512() {
  const __m512 x = _mm512_set1_ps(0.9999f), y = _mm512_set1_ps(1e-4f);
  __m512 acc[kFmaAcc];
  for (int j = 0; j < kFmaAcc; ++j) acc[j] = _mm512_set1_ps(0.1f * j);
  for (int64_t k = 0; k < kFmaSteps; ++k) {
#pragma GCC unroll 12
    for (int j = 0; j < kFmaAcc; ++j) acc[j] = _mm512_fmadd_ps(acc[j], x, y);
  }
  __m512 s = acc[0];
  for (int j = 1; j < kFmaAcc; ++j) s = _mm512_add_ps(s, acc[j]);
  alignas(64) float out[16];
  _mm512_store_ps(out, s);
  return out[0] + out[15];
}

// ---- int8 multiply-add peak (the quant rows' ceiling) ----
// u8 x s8 products summed into int32, counted as the quant rows count them: 2 ops per
// multiply-add. Best ISA first: AVX-512 VNNI (vpdpbusd: 64 per instruction), AVX-512BW
// (vpmaddubsw + vpmaddwd + vpaddd), AVX2 (the same, 32 per sequence). Inputs keep the
// int16 pair sums far from saturation; the accumulators wrap harmlessly.

__attribute__((target("avx512f,avx512bw,avx512vnni"))) int32_t i8_chain_vnni() {
  const __m512i a = _mm512_set1_epi8(3), b = _mm512_set1_epi8(-2);
  __m512i acc[kFmaAcc];
  for (int j = 0; j < kFmaAcc; ++j) acc[j] = _mm512_set1_epi32(j);
  for (int64_t k = 0; k < kI8Steps; ++k) {
#pragma GCC unroll 12
    for (int j = 0; j < kFmaAcc; ++j) acc[j] = _mm512_dpbusd_epi32(acc[j], a, b);
  }
  __m512i s = acc[0];
  for (int j = 1; j < kFmaAcc; ++j) s = _mm512_add_epi32(s, acc[j]);
  alignas(64) int32_t out[16];
  _mm512_store_si512(out, s);
  return out[0] + out[15];
}

__attribute__((target("avx512f,avx512bw"))) int32_t i8_chain_avx512bw() {
  const __m512i a = _mm512_set1_epi8(3), b = _mm512_set1_epi8(-2), ones = _mm512_set1_epi16(1);
  __m512i acc[kFmaAcc];
  for (int j = 0; j < kFmaAcc; ++j) acc[j] = _mm512_set1_epi32(j);
  for (int64_t k = 0; k < kI8Steps; ++k) {
#pragma GCC unroll 12
    for (int j = 0; j < kFmaAcc; ++j)
      acc[j] = _mm512_add_epi32(acc[j], _mm512_madd_epi16(_mm512_maddubs_epi16(a, b), ones));
  }
  __m512i s = acc[0];
  for (int j = 1; j < kFmaAcc; ++j) s = _mm512_add_epi32(s, acc[j]);
  alignas(64) int32_t out[16];
  _mm512_store_si512(out, s);
  return out[0] + out[15];
}

__attribute__((target("avx2"))) int32_t i8_chain_avx2() {
  const __m256i a = _mm256_set1_epi8(3), b = _mm256_set1_epi8(-2), ones = _mm256_set1_epi16(1);
  __m256i acc[kFmaAcc];
  for (int j = 0; j < kFmaAcc; ++j) acc[j] = _mm256_set1_epi32(j);
  for (int64_t k = 0; k < kI8Steps; ++k) {
#pragma GCC unroll 12
    for (int j = 0; j < kFmaAcc; ++j)
      acc[j] = _mm256_add_epi32(acc[j], _mm256_madd_epi16(_mm256_maddubs_epi16(a, b), ones));
  }
  __m256i s = acc[0];
  for (int j = 1; j < kFmaAcc; ++j) s = _mm256_add_epi32(s, acc[j]);
  alignas(32) int32_t out[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(out), s);
  return out[0] + out[7];
}

// ---- bfloat16 dot-product peak (the bf16 matmul rows' ceiling) ----

__attribute__((target("avx512f,avx512bf16"))) float bf16_chain_avx512() {
  const __m512bh a = (__m512bh)_mm512_set1_epi32(0x3f803f80), b = (__m512bh)_mm512_set1_epi32(0x3a803a80);  // 1, 2^-10
  __m512 acc[kBf16Acc];
  for (int j = 0; j < kBf16Acc; ++j) acc[j] = _mm512_set1_ps(0.1f * j);
  for (int64_t k = 0; k < kBf16Steps; ++k) {
#pragma GCC unroll 24
    for (int j = 0; j < kBf16Acc; ++j) acc[j] = _mm512_dpbf16_ps(acc[j], a, b);
  }
  __m512 s = acc[0];
  for (int j = 1; j < kBf16Acc; ++j) s = _mm512_add_ps(s, acc[j]);
  alignas(64) float out[16];
  _mm512_store_ps(out, s);
  return out[0] + out[15];
}

// Where the CPU has AMX-BF16 (sb::cpu_has_amx_bf16) the bf16 peak is the tiles': four
// accumulator tiles, each tdpbf16ps 16x16x32 multiply-adds, as the bf16 GEMM's 32x32
// block issues them (Note [bfloat16 GEMM in AMX tiles] in matmul/gemm_bf16.cpp).
#ifdef SB_HAVE_AMX
__attribute__((target("amx-tile,amx-bf16"))) float bf16_chain_amx() {
  sb::amx_tiles_begin();
  alignas(64) uint32_t a[256], b[256];
  alignas(64) float out[256];
  for (int i = 0; i < 256; ++i) a[i] = 0x3f803f80, b[i] = 0x3a803a80;  // 1, 2^-10
  __asm__ volatile("" : : "r"(a), "r"(b) : "memory");
  _tile_loadd(4, a, 64);
  _tile_loadd(5, a, 64);
  _tile_loadd(6, b, 64);
  _tile_loadd(7, b, 64);
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  for (int64_t k = 0; k < kAmxSteps; ++k) {
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  _tile_stored(3, out, 64);
  sb::amx_tiles_end();
  __asm__ volatile("" : : "r"(out) : "memory");
  return out[0] + out[255];
}
#else
float bf16_chain_amx() { return 0; }
#endif

struct PeakIsa {
  const char* f32;
  const char* i8;
  int f32_width;  // floats per FMA
  int i8_width;   // multiply-adds per step and accumulator
  const char* bf16 = "none";
  int bf16_width = 0;  // multiply-adds per instruction
};

PeakIsa peak_isa() {
  __builtin_cpu_init();
  PeakIsa p{"scalar", "none", 8, 0};
  if (__builtin_cpu_supports("avx2")) p = PeakIsa{sb::compiled_simd_level() >= sb::SimdLevel::AVX2 ? "avx2+fma" : "scalar", "avx2", 8, 32};
  if (__builtin_cpu_supports("avx512f")) p.f32 = "avx512f", p.f32_width = 16;
  if (__builtin_cpu_supports("avx512bw")) p.i8 = "avx512bw", p.i8_width = 64;
  if (__builtin_cpu_supports("avx512vnni")) p.i8 = "avx512vnni", p.i8_width = 64;
  if (__builtin_cpu_supports("avx512f") && sb::cpu_has_avx512_bf16()) p.bf16 = "avx512bf16", p.bf16_width = 32;
  if (sb::cpu_has_amx_bf16()) p.bf16 = "amx-bf16", p.bf16_width = 16 * 16 * 32;
  return p;
}

float fma_best() { return peak_isa().f32_width == 16 ? fma_chain_avx512() : fma_chain(); }

int32_t i8_best() {
  const PeakIsa p = peak_isa();
  if (std::string(p.i8) == "avx512vnni") return i8_chain_vnni();
  if (std::string(p.i8) == "avx512bw") return i8_chain_avx512bw();
  return i8_chain_avx2();
}

#else
struct PeakIsa {
  const char* f32;
  const char* i8;
  int f32_width;
  int i8_width;
  const char* bf16 = "none";
  int bf16_width = 0;
};
PeakIsa peak_isa() { return {"scalar", "none", 8, 0}; }
float fma_best() { return fma_chain(); }
int32_t i8_best() { return 0; }
float bf16_chain_avx512() { return 0; }
float bf16_chain_amx() { return 0; }
#endif

void run_fma(benchmark::State& st, int threads) {
  ThreadScope ts(threads);
  const int width = peak_isa().f32_width;
  std::atomic<float> sink{0};
  for (auto _ : st) {
    parallel_for(0, threads, 1, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) sink.store(fma_best(), std::memory_order_relaxed);
    });
  }
  benchmark::DoNotOptimize(sink.load());
  set_work(st, 0, static_cast<int64_t>(threads) * kFmaSteps * kFmaAcc * width * 2);
}

void run_bf16(benchmark::State& st, int threads) {
  ThreadScope ts(threads);
  const PeakIsa p = peak_isa();
  const bool amx = std::string(p.bf16) == "amx-bf16";
  std::atomic<float> sink{0};
  for (auto _ : st) {
    parallel_for(0, threads, 1, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) sink.store(amx ? bf16_chain_amx() : bf16_chain_avx512(), std::memory_order_relaxed);
    });
  }
  benchmark::DoNotOptimize(sink.load());
  // per step: 24 vdpbf16ps, or 4 tdpbf16ps
  set_work(st, 0, static_cast<int64_t>(threads) * (amx ? kAmxSteps * 4 : kBf16Steps * kBf16Acc) * p.bf16_width * 2);
}

void run_i8(benchmark::State& st, int threads) {
  ThreadScope ts(threads);
  const PeakIsa p = peak_isa();  // registered only where p.i8_width > 0
  std::atomic<int32_t> sink{0};
  for (auto _ : st) {
    parallel_for(0, threads, 1, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) sink.store(i8_best(), std::memory_order_relaxed);
    });
  }
  benchmark::DoNotOptimize(sink.load());
  set_work(st, 0, static_cast<int64_t>(threads) * kI8Steps * kFmaAcc * p.i8_width * 2);
}

}  // namespace

void register_family() {
  const PeakIsa isa = peak_isa();
  benchmark::AddCustomContext("sb_peak_isa", std::string("f32:") + isa.f32 + ",i8:" + isa.i8 + ",bf16:" + isa.bf16);
  struct Size {
    bool cache;    // a cache size (Note [A ladder of cache sizes]): no streaming-store twins
    int64_t n[9];  // per op, in the order of Op: copy, scale, add, triad, read, add_inplace, scale_inplace,
                   // copy_nt, add_nt
  };
  auto same = [](bool cache, int64_t n) { return Size{cache, {n, n, n, n, n, n, n, n, n}}; };
  std::vector<Size> sizes;
  if (smoke()) {
    sizes = {same(false, 1024), same(false, 65536)};  // the streaming twins too, to test them
  } else {
    for (int64_t n : {1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072}) sizes.push_back(same(true, n));
    sizes.push_back(same(false, int64_t{1} << 20));
    sizes.push_back(same(false, int64_t{8} << 20));
    sizes.push_back(Size{false,
                         {int64_t{128} << 20, int64_t{128} << 20, int64_t{96} << 20, int64_t{96} << 20,
                          int64_t{256} << 20, int64_t{96} << 20, int64_t{128} << 20, int64_t{128} << 20,
                          int64_t{96} << 20}});
  }
  // read first: it needs the largest array a, so a is allocated once at its full size.
  std::vector<Op> ops = {Op::Read, Op::Copy, Op::Scale, Op::Add, Op::Triad, Op::AddInplace, Op::ScaleInplace};
#ifdef SB_HAVE_AVX2
  if (use_avx2()) ops.insert(ops.end(), {Op::CopyNt, Op::AddNt});
#endif
  for (int t : thread_counts()) {
    for (const auto& size : sizes) {
      for (const Op op : ops) {
        // streaming stores only where data comes from beyond the caches
        const bool nt_op = op == Op::CopyNt || op == Op::AddNt;
        if (nt_op && size.cache) continue;
        const int64_t n = size.n[static_cast<int>(op)];
        add_run(RunName().op(op_name(op)).dtype(DType::Float32).shape({n}).threads(t),
                [op, n, t](benchmark::State& st) { run_stream(st, op, n, t); });
      }
    }
    add_run(RunName().op("fma_peak").dtype(DType::Float32).threads(t),
            [t](benchmark::State& st) { run_fma(st, t); });
    if (isa.i8_width > 0)  // no int8 multiply-add chain without AVX2: no int8 ceiling row
      add_run(RunName().op("fma_peak").dtype(DType::Int8).threads(t),
              [t](benchmark::State& st) { run_i8(st, t); });
    if (isa.bf16_width > 0)
      add_run(RunName().op("fma_peak").dtype(DType::BFloat16).threads(t),
              [t](benchmark::State& st) { run_bf16(st, t); });
  }
}

}  // namespace sb::bench
