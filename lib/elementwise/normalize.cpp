// normalize.cpp — normalize(x, dim, eps): (x - mean) / sqrt(var + eps) along one dim
// (CPU; CUDA via lib/cuda), in-place, out= and out-of-place, on the shared strided
// iterator with one strip element per row. Cost: x read three times per dense row
// (twice from L1/L2) or twice per strided row (an outer dim), the output written once.
#include "stridebench/elementwise.h"

#include <algorithm>
#include <limits>
#include <atomic>
#include <cmath>
#include <cstring>

#include "stridebench/cpu_features.h"
#include "elementwise/strips.h"
#include "elementwise/normalize_rows.h"
#include "core/small_vec.h"
#include "elementwise/iterator.h"
#include "core/transpose_tile.h"
#include "copy/copy.h"
#include "core/test_hooks.h"
#include "core/scratch.h"

#ifdef SB_HAVE_AVX2
#include <immintrin.h>
#endif
#ifdef SB_WITH_CUDA
#include "cuda/cuda_backend.h"
#endif

namespace sb {

namespace {

using namespace ew;

#ifdef SB_HAVE_AVX2
#ifdef SB_HAVE_AVX512
// buf[j] = f[2j], j < n: a float row at a stride of 2 elements packed for the fused
// groups, 16 elements per two loads and a permute. The loads stop at the row's last
// element, f[2n - 2] (masked, fault-suppressing loads past it): pack_strided's AVX2 loop
// leaves its last 8 elements to scalar copies, a quarter of a 64-element row.
SB_ZMM inline void pack_stride2_f32(float* buf, const float* f, int64_t n) {
  int64_t j = 0;
  for (; j + 16 <= n; j += 16)
    VZ::store(buf + j, VZ::even_lanes(VZ::load(f + 2 * j), VZ::maskz_load(0x7FFF, f + 2 * j + 16)));
  if (j < n) {
    const int64_t c = 2 * (n - j) - 1;  // elements f[2j] .. f[2n - 2]
    const VZ::Mask lo = static_cast<VZ::Mask>(c >= 16 ? 0xFFFF : (1u << c) - 1);
    const VZ::Mask hi = static_cast<VZ::Mask>(c > 16 ? (1u << (c - 16)) - 1 : 0);
    VZ::mask_store(buf + j, static_cast<VZ::Mask>((1u << (n - j)) - 1),
                   VZ::even_lanes(VZ::maskz_load(lo, f + 2 * j), VZ::maskz_load(hi, f + 2 * j + 16)));
  }
}

// rows rows of Note [Fused normalize groups]; plain stores (the caller streams elsewhere).
SB_ZMM void normalize_groups_f32(const char* x, int64_t xr, char* out, int64_t orow, int64_t rows, int64_t n,
                                 double eps) {
  FusedSlots st;
  const float e = static_cast<float>(eps);
  const int64_t ng = rows / 8;
  bool pending[2] = {false, false};  // slot g & 1 holds the constants of group g, not yet written
  VZ::V s[8], q[8];
  if (ng > 0) fused_shift(st.shift[0], x, xr);
  for (int64_t g = 0; g < ng + 2; ++g) {
    const int p = static_cast<int>(g & 1);
    const char* xs = x + g * 8 * xr;
    const bool sums = g < ng, write = g >= 2 && pending[p];
    const char* xw = x + (g - 2) * 8 * xr;
    char* ow = out + (g - 2) * 8 * orow;
    if (sums && write) fused_loop<true, true>(st.shift[p], st.negmean[p], st.rstd[p], s, q, xs, xw, ow, xr, orow, n);
    else if (sums) fused_loop<true, false>(st.shift[p], nullptr, nullptr, s, q, xs, nullptr, nullptr, xr, orow, n);
    else if (write) fused_loop<false, true>(nullptr, st.negmean[p], st.rstd[p], s, q, nullptr, xw, ow, xr, orow, n);
    pending[p] = false;
    if (!sums) continue;
    if (g + 1 < ng) fused_shift(st.shift[p ^ 1], xs + 8 * xr, xr);
    if (fused_finish(st.shift[p], st.negmean[p], st.rstd[p], s, q, n, e)) pending[p] = true;
    // guard failed: the exact passes, inlined: as a call, whose clobbers reach every zmm
    // register, it had GCC keep the loop's state on the stack
    else normalize_rows8_body<false, true, false>(xs, xr, out + g * 8 * orow, orow, 8, n, eps);
  }
  if (ng * 8 < rows)
    normalize_rows8_f32_vl<false>(x + ng * 8 * xr, xr, out + ng * 8 * orow, orow, static_cast<int>(rows - ng * 8), n, eps);
}

// Note [16-bit fused groups]: float16 and bfloat16 rows that Note [16-bit normalize rows
// through float32] would widen into a buffer for the fused groups take the fused loop
// on their own bytes instead, widened as loaded and rounded as stored (Note [16-bit fused
// IO]): the same float32 arithmetic and the same one rounding, so the same bits, without
// the two conversion passes over the buffer and its loads and stores. The rows whose
// guard fails, and the last rows short of a group, go through the buffer (rows8_via_f32).
// bfloat16 needs AVX512_BF16's rounding (use_avx512_bf16()); without it the buffer path.
// The group loop is normalize_groups_f32's, written out again: as one template for both,
// GCC chose other registers and scheduling in the float32 instance.
// F32Pair rows (Note [Stride-2 fused rows]) are packed, and go out as TO rows: dense
// floats, or stepped ones by masked stores.
template <typename T, typename TO = T>
SB_ZMM __attribute__((noinline)) void rows8_via_f32(const char* x, int64_t xr, char* out, int64_t orow, int nr,
                                                   int64_t n, double eps) {
  alignas(64) float buf[8 * kFusedMaxN];
  char* const b = reinterpret_cast<char*>(buf);
  if (nr < 1) return;  // never: tells GCC that buf is written before it is read
  for (int k = 0; k < nr; ++k) {
    if constexpr (std::is_same_v<T, F32Pair>) pack_stride2_f32(buf + k * n, reinterpret_cast<const float*>(x + k * xr), n);
    else convert_unit_stride(buf + k * n, reinterpret_cast<const T*>(x + k * xr), n, false);
  }
  normalize_rows8_f32_vl<false>(b, n * 4, b, n * 4, nr, n, eps);
  for (int k = 0; k < nr; ++k) {
    if constexpr (std::is_same_v<TO, float>) std::memcpy(out + k * orow, buf + k * n, static_cast<size_t>(n) * 4);
    else if constexpr (std::is_same_v<TO, F32Pair>) unpack_strided(out + k * orow, 8, buf + k * n, n);
    else convert_unit_stride(reinterpret_cast<TO*>(out + k * orow), buf + k * n, n, false);
  }
}

// Also the float32 rows at a stride of 2 (T = F32Pair; TO = float, or F32Pair in place
// through the steps: Note [Stride-2 fused rows]), where a dense float32 row's pipeline is
// normalize_groups_f32's.
template <typename T, typename TO = T>
SB_ZMM void normalize_groups_16(const char* x, int64_t xr, char* out, int64_t orow, int64_t rows, int64_t n,
                                double eps) {
  FusedSlots st;
  const float e = static_cast<float>(eps);
  const int64_t ng = rows / 8;
  bool pending[2] = {false, false};
  VZ::V s[8], q[8];
  if (ng > 0) fused_shift<T>(st.shift[0], x, xr);
  for (int64_t g = 0; g < ng + 2; ++g) {
    const int p = static_cast<int>(g & 1);
    const char* xs = x + g * 8 * xr;
    const bool sums = g < ng, write = g >= 2 && pending[p];
    const char* xw = x + (g - 2) * 8 * xr;
    char* ow = out + (g - 2) * 8 * orow;
    if (sums && write)
      fused_loop<true, true, false, T, TO>(st.shift[p], st.negmean[p], st.rstd[p], s, q, xs, xw, ow, xr, orow, n);
    else if (sums)
      fused_loop<true, false, false, T, TO>(st.shift[p], nullptr, nullptr, s, q, xs, nullptr, nullptr, xr, orow, n);
    else if (write)
      fused_loop<false, true, false, T, TO>(nullptr, st.negmean[p], st.rstd[p], s, q, nullptr, xw, ow, xr, orow, n);
    pending[p] = false;
    if (!sums) continue;
    if (g + 1 < ng) fused_shift<T>(st.shift[p ^ 1], xs + 8 * xr, xr);
    if (fused_finish(st.shift[p], st.negmean[p], st.rstd[p], s, q, n, e)) pending[p] = true;
    else rows8_via_f32<T, TO>(xs, xr, out + g * 8 * orow, orow, 8, n, eps);
  }
  if (ng * 8 < rows)
    rows8_via_f32<T, TO>(x + ng * 8 * xr, xr, out + ng * 8 * orow, orow, static_cast<int>(rows - ng * 8), n, eps);
}

// Note [16-bit rows from memory]: float16 and bfloat16 rows of kFusedMinN..kFusedMaxN
// elements that come from memory take Note [Normalize rows in address order] on their
// own bytes, as float32 rows do: per group of 8 rows its statistics loop, then its write,
// widened as loaded and rounded as stored (Note [16-bit fused IO]). Streaming where the
// output may stream and every out row is 64-byte aligned with n % 32 == 0 (whole 512-bit
// pairs); else plain stores, as float32's misaligned rows (no partial lines). Through
// the L1 buffer of Note [16-bit normalize rows through float32] each group was read from
// memory by one conversion pass and written by another with the arithmetic in between,
// and the demand stream paused for the whole group. The arithmetic and the one rounding
// are the float32 in-order groups', so the bits are those of the float32 rows rounded.
// Rows whose guard fails, and the last rows short of a group, go through the buffer
// (rows8_via_f32, plain stores). The group loop is normalize_groups_in_order_f32's
// (normalize_memory.cpp) written out again, as normalize_groups_16 is
// normalize_groups_f32's, so that the float32 instance keeps the code it was timed with;
// unlike it, each group prefetches the next (Note [16-bit rows prefetch the next group]).
//
// Note [16-bit rows prefetch the next group]: per byte of memory a 16-bit row does twice
// the float32 row's vector work (16 elements a vector, widened and rounded), so a group's
// work in the caches comes near the time its bytes take from DRAM, and from DRAM the two
// added up: the statistics pass stalls on its loads and the write pass loads nothing new.
// A burst of software prefetches of the next group's lines into L1, between the
// statistics pass and the write, keeps loads in flight through the write. One group
// ahead; two or more ahead, into L2 only, before the statistics pass, or one line per
// written pair across the write pass were each slower (docs/notes/elementwise.md). The
// float32 rows, with half the work per byte, were slower with prefetches and take none.
// Where the design's tuning says so (CpuTuning::prefetch16_rows, SB_TUNING pf16rows: the
// rows of Sapphire Rapids and Zen 5, where the elementwise loops' own flag differs).
template <typename T>
SB_ZMM __attribute__((always_inline)) inline void prefetch_group(const char* xs, int64_t xr, int64_t n) {
  const uintptr_t bytes = static_cast<uintptr_t>(n) * sizeof(T);
  for (int k = 0; k < 8; ++k) {
    const uintptr_t row = reinterpret_cast<uintptr_t>(xs + k * xr);
    for (uintptr_t line = row & ~uintptr_t{63}; line < row + bytes; line += 64)
      _mm_prefetch(reinterpret_cast<const char*>(line), _MM_HINT_T0);
  }
}

template <typename T, bool NT>
SB_ZMM void normalize_groups_in_order_16(const char* x, int64_t xr, char* out, int64_t orow, int64_t rows, int64_t n,
                                         double eps) {
  FusedSlots st;
  const float e = static_cast<float>(eps);
  const int64_t ng = rows / 8;
  VZ::V s[8], q[8];
  const bool pf = cpu_tuning().prefetch16_rows;
  for (int64_t g = 0; g < ng; ++g) {
    const char* xs = x + g * 8 * xr;
    char* os = out + g * 8 * orow;
    fused_shift<T>(st.shift[0], xs, xr);
    fused_loop<true, false, false, T>(st.shift[0], nullptr, nullptr, s, q, xs, nullptr, nullptr, xr, orow, n);
    if (pf && g + 1 < ng) prefetch_group<T>(xs + 8 * xr, xr, n);  // Note [16-bit rows prefetch the next group]
    if (fused_finish(st.shift[0], st.negmean[0], st.rstd[0], s, q, n, e))
      fused_loop<false, true, NT, T>(nullptr, st.negmean[0], st.rstd[0], s, q, nullptr, xs, os, xr, orow, n);
    else
      rows8_via_f32<T>(xs, xr, os, orow, 8, n, eps);
  }
  if (ng * 8 < rows)
    rows8_via_f32<T>(x + ng * 8 * xr, xr, out + ng * 8 * orow, orow, static_cast<int>(rows - ng * 8), n, eps);
  if (NT) _mm_sfence();
}
#undef SB_ZMM
#endif
#endif

// Mean and 1/sqrt(var + eps) of nr rows of n elements: row k at x + k * row_bytes, its
// elements stride_bytes apart. Rows are taken a block at a time, each pass over every row
// of the block before the next pass: a 64-element row is mostly latency (two dependent
// vector sums, their horizontal adds, a division, a square root), and this puts the
// independent rows' chains next to each other (docs/notes/elementwise.md, Normalize).
template <typename T>
void row_stats_block(bool avx, const char* x, int64_t row_bytes, int nr, int64_t stride_bytes, int64_t n, double eps,
                     double* mean, double* rstd) {
  using A = acc_t<T>;
  const bool dense = stride_bytes == static_cast<int64_t>(sizeof(T));
#ifdef SB_HAVE_AVX2
  if constexpr (kHasVec<T>) {
    if (avx && dense) {
      double ss[kMaxStatRows], sq[kMaxStatRows];
      A ma[kMaxStatRows];
      for (int k = 0; k < nr; ++k) mean[k] = dense_mean(reinterpret_cast<const T*>(x + k * row_bytes), n);
      for (int k = 0; k < nr; ++k) ma[k] = static_cast<A>(mean[k]);
      for (int k = 0; k < nr; ++k) dense_centered(reinterpret_cast<const T*>(x + k * row_bytes), n, ma[k], ss + k, sq + k);
      for (int k = 0; k < nr; ++k) {
        const double var = std::max((sq[k] - ss[k] * ss[k] / static_cast<double>(n)) / static_cast<double>(n), 0.0);
        rstd[k] = 1.0 / std::sqrt(var + eps);
        mean[k] = static_cast<double>(ma[k]) + ss[k] / static_cast<double>(n);  // Note [Normalize row statistics]
      }
      return;
    }
  }
#else
  (void)avx;
  (void)dense;
#endif
  for (int k = 0; k < nr; ++k) {  // Note [Normalize row statistics], as the vector paths
    const char* xr = x + k * row_bytes;
    double sum = 0, s = 0, sq = 0;
    const double x0 = static_cast<double>(A(at<T>(xr, 0, stride_bytes)));
    for (int64_t j = 0; j < n; ++j) sum += static_cast<double>(A(at<T>(xr, j, stride_bytes))) - x0;
    const double m = x0 + sum / static_cast<double>(n);
    for (int64_t j = 0; j < n; ++j) {
      const double d = static_cast<double>(A(at<T>(xr, j, stride_bytes))) - m;
      s += d;
      sq += d * d;
    }
    const double var = std::max((sq - s * s / static_cast<double>(n)) / static_cast<double>(n), 0.0);
    mean[k] = m + s / static_cast<double>(n);
    rstd[k] = 1.0 / std::sqrt(var + eps);
  }
}

// out = (x - mean) * rstd in the accumulation type of T.
template <typename A>
struct NormWrite {
  A m, rs;
  A operator()(A v) const { return static_cast<A>((v - m) * rs); }
#ifdef SB_HAVE_AVX2
  // a register of float or double lanes (vec::LanesOf), m and rs rounded to its lane type
  template <typename V, typename L = vec::LanesOf<V>>
  V operator()(V v) const {
    return L::mul(L::sub(v, L::set1(m)), L::set1(rs));
  }
#endif
};

#ifdef SB_HAVE_AVX2
// detail::transpose_tile_f32 as a call: inlined into normalize_strip it spilled the
// transposes' registers to the stack (Note [Dense rows into side-by-side out rows]).
__attribute__((noinline)) void transpose_out(float* dst, int64_t ld, const float* src, int64_t sB, int64_t na,
                                             int64_t nb) {
  detail::transpose_tile_f32(dst, ld, src, sB, na, nb);
}
#endif

// One strip of rows: row r of operand i starts at p[i] + r * s[i] and runs n elements
// with stride xsd (x) / osd (out) bytes.
//  - dense rows (xsd == element size): per row, two passes for the stats (the row is in
//    L1/L2 for the second) and one vectorised write pass.
//  - strided rows (normalizing an outer dim): kCols rows side by side, so every pass
//    reads kCols contiguous elements of each of the n lines of x. The statistics in
//    blocks merged by Chan's formula (Note [Normalize columns in merged blocks]), one
//    write pass: x is read twice from memory, out written once. Walking 16 rows at a
//    power-of-two stride three times instead was an order of magnitude slower
//    (cache-set conflicts; docs/notes/elementwise.md).
// resident: x fits the caches by the rule that decides streaming (Note [Fused normalize
// groups]).
template <typename T>
void normalize_strip(bool avx, bool nt, bool resident, char* const* p, const int64_t* s, int64_t rows, int64_t n,
                     int64_t xsd, int64_t osd, double eps) {
  using A = acc_t<T>;
  constexpr int64_t es = sizeof(T);
#ifdef SB_HAVE_AVX2
  if constexpr (std::is_same_v<T, float>) {
    // Streaming rows of 8-float vectors need every output row 32-byte aligned; rows
    // that are not take plain stores (no partial lines: Note [Streaming strips]).
    const bool nt8 = nt && osd == es && n % 8 == 0 && s[0] % 32 == 0 && reinterpret_cast<uintptr_t>(p[0]) % 32 == 0;
    const bool vl = avx && use_avx512();  // Note [Normalize rows with 32 registers]
#ifdef SB_HAVE_AVX512
    if (vl && resident && !nt8 && xsd == es && osd == es && n >= kFusedMinN && n <= kFusedMaxN && rows >= 16 &&
        !stores_alias_loads(p[0], p[1])) {
      normalize_groups_f32(p[1], s[1], p[0], s[0], rows, n, eps);  // Note [Fused normalize groups]
      return;
    }
#endif
    if (avx && !resident && xsd == es && osd == es && normalize_rows_from_memory_f32(vl, nt, p, s, rows, n, eps))
      return;  // Note [Normalize rows in address order]
    if (avx && xsd == es && osd == es && n <= kStatFlush) {  // Note [Short normalize rows]
      for (int64_t r0 = 0; r0 < rows; r0 += 8) {
        const int nr = static_cast<int>(std::min<int64_t>(8, rows - r0));
        if (nt8) normalize_rows8_f32<true>(vl, p[1] + r0 * s[1], s[1], p[0] + r0 * s[0], s[0], nr, n, eps);
        else normalize_rows8_f32(vl, p[1] + r0 * s[1], s[1], p[0] + r0 * s[0], s[0], nr, n, eps);
      }
      if (nt8) g_last_nt.store(true, std::memory_order_relaxed);
      return;
    }
    if (avx && s[1] == es && xsd != es) {  // Note [Normalize across adjacent rows]
      normalize_adjacent_rows_f32(vl, p, s, rows, n, xsd, osd, eps);
      return;
    }
    if (avx && xsd == es && s[0] == es && osd != es && osd % es == 0 && n <= kStatFlush) {
      // Note [Dense rows into side-by-side out rows]: x's rows dense along dim, out's side
      // by side (an NCHW x into a channels-last out): blocks of rows normalized by the
      // dense rows' kernels into an L2 buffer, then transposed into out by 8x8 tiles.
      // Packed and unpacked element by element instead, they took several times the
      // contiguous time (docs/notes/elementwise.md)
      const int64_t kr = std::clamp<int64_t>((int64_t{64} << 10) / (n * es), 1, rows);
      float* const ob = reinterpret_cast<float*>(tile_scratch(static_cast<size_t>(kr * n * es)));
      for (int64_t r0 = 0; r0 < rows; r0 += kr) {
        const int64_t kk = std::min(kr, rows - r0);
        char* const q[2] = {reinterpret_cast<char*>(ob), p[1] + r0 * s[1]};
        const int64_t sq[2] = {n * es, s[1]};
        normalize_strip<float>(avx, false, /*resident=*/true, q, sq, kk, n, es, es, eps);
        transpose_out(reinterpret_cast<float*>(p[0] + r0 * es), osd / es, ob, n, n, kk);
      }
      return;
    }
    if (avx && n <= kStatFlush) {  // rows apart and strided (a stepped slice): pack 8 rows
      alignas(64) float buf[8 * kStatFlush];
#ifdef SB_HAVE_AVX512
      if (vl && resident && !nt8 && xsd == 2 * es && (osd == es || osd == 2 * es) && n >= kFusedMinN &&
          n <= kFusedMaxN && rows >= 16 && !stores_alias_loads(p[0], p[1])) {  // Note [Stride-2 fused rows]
        if (osd == es) normalize_groups_16<F32Pair, float>(p[1], s[1], p[0], s[0], rows, n, eps);
        else normalize_groups_16<F32Pair, F32Pair>(p[1], s[1], p[0], s[0], rows, n, eps);
        return;
      }
      if (vl && resident && !nt8 && n >= kFusedMinN && n <= kFusedMaxN && rows >= 16) {
        // Note [Fused normalize groups] over packed rows, as many as buf holds (>= 32):
        // straight into dense out rows, else (strided out rows, or out rows whose stores
        // would alias the loads from buf) in place in buf and copied out
        const int64_t chunk = 8 * kStatFlush / n;
        char* const b = reinterpret_cast<char*>(buf);
        for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
          const int64_t nr = std::min(chunk, rows - r0);
          for (int64_t k = 0; k < nr; ++k) {
            if (xsd == 2 * es) pack_stride2_f32(buf + k * n, reinterpret_cast<const float*>(p[1] + (r0 + k) * s[1]), n);
            else pack_strided(buf + k * n, p[1] + (r0 + k) * s[1], xsd, n);
          }
          char* const o = p[0] + r0 * s[0];
          if (osd == es && !stores_alias_loads(o, b)) {
            normalize_groups_f32(b, n * es, o, s[0], nr, n, eps);
            continue;
          }
          normalize_groups_f32(b, n * es, b, n * es, nr, n, eps);
          for (int64_t k = 0; k < nr; ++k) {
            if (osd == es) std::memcpy(o + k * s[0], buf + k * n, static_cast<size_t>(n * es));
            else unpack_strided(o + k * s[0], osd, buf + k * n, n);
          }
        }
        return;
      }
#endif
      for (int64_t r0 = 0; r0 < rows; r0 += 8) {
        const int nr = static_cast<int>(std::min<int64_t>(8, rows - r0));
        for (int k = 0; k < nr; ++k) pack_strided(buf + k * n, p[1] + (r0 + k) * s[1], xsd, n);
        if (nt8) {
          normalize_rows8_f32<true>(vl, reinterpret_cast<const char*>(buf), n * es, p[0] + r0 * s[0], s[0], nr, n, eps);
        } else if (osd == es) {
          normalize_rows8_f32(vl, reinterpret_cast<const char*>(buf), n * es, p[0] + r0 * s[0], s[0], nr, n, eps);
        } else {
          normalize_rows8_f32(vl, reinterpret_cast<const char*>(buf), n * es, reinterpret_cast<char*>(buf), n * es, nr, n, eps);
          for (int k = 0; k < nr; ++k) unpack_strided(p[0] + (r0 + k) * s[0], osd, buf + k * n, n);
        }
      }
      if (nt8) g_last_nt.store(true, std::memory_order_relaxed);
      return;
    }
  }
  // Note [16-bit normalize rows through float32]: float16 and bfloat16 rows of up to
  // kStatFlush elements, dense along dim, are widened into an L1 buffer of float32
  // (copy.h convert_unit_stride: F16C, or bfloat16 shifts), 8 rows at a time, or as many
  // as it holds where float32 rows would take Note [Fused normalize groups] (those rows
  // take Note [16-bit fused groups] instead, with no buffer, at every offset of out from
  // x (Note [Fused groups and 4K aliasing]), unless they stream or bfloat16 lacks
  // AVX512_BF16); normalized there in place by the kernel the float32 rows would take,
  // and rounded back into out (streaming under the same rule as the other rows). The
  // numerics are float32's (that kernel's statistics, the float32 arithmetic of the
  // write), one rounding on the store.
  // The generic path below is several times slower per element (docs/notes/elementwise.md,
  // bfloat16 on an AVX2 core).
  if constexpr (kIs16Bit<T>) {
    if (avx && (xsd != es || osd != es) && normalize_strided16<T>(avx, p, s, rows, n, xsd, osd, eps))
      return;  // Note [16-bit strided rows through float32]
    if (avx && xsd == es && osd == es && n <= kStatFlush) {
      alignas(64) float buf[8 * kStatFlush];
      const bool vl = use_avx512();
      const bool x_run = s[1] == n * es, o_run = s[0] == n * es;  // rows back to back: one run
      // Note [Fused normalize groups] over as many widened rows as buf holds (>= 32), where
      // the float32 rows would take it; else the rows kernel, 8 rows at a time
      bool fused = false;
#ifdef SB_HAVE_AVX512
      if (vl && !resident && n >= kFusedMinN && n <= kFusedMaxN && rows >= 8 &&
          (!std::is_same_v<T, BFloat16> || use_avx512_bf16())) {  // Note [16-bit rows from memory]
        const bool nt32 = nt && n % 32 == 0 && s[0] % 64 == 0 && reinterpret_cast<uintptr_t>(p[0]) % 64 == 0;
        if (nt32) {
          normalize_groups_in_order_16<T, true>(p[1], s[1], p[0], s[0], rows, n, eps);
          g_last_nt.store(true, std::memory_order_relaxed);
        } else {
          normalize_groups_in_order_16<T, false>(p[1], s[1], p[0], s[0], rows, n, eps);
        }
        return;
      }
      fused = vl && resident && n >= kFusedMinN && n <= kFusedMaxN && rows >= 16;
      if (fused && !nt && (!std::is_same_v<T, BFloat16> || use_avx512_bf16())) {
        normalize_groups_16<T>(p[1], s[1], p[0], s[0], rows, n, eps);  // Note [16-bit fused groups]
        return;
      }
#endif
      const int64_t chunk = fused ? 8 * kStatFlush / n : 8;
      char* const b = reinterpret_cast<char*>(buf);
      for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
        const int64_t nr = std::min(chunk, rows - r0);
        const T* x0 = reinterpret_cast<const T*>(p[1] + r0 * s[1]);
        if (x_run) convert_unit_stride(buf, x0, nr * n, false);
        else
          for (int64_t k = 0; k < nr; ++k)
            convert_unit_stride(buf + k * n, reinterpret_cast<const T*>(p[1] + (r0 + k) * s[1]), n, false);
#ifdef SB_HAVE_AVX512
        if (fused) normalize_groups_f32(b, n * 4, b, n * 4, nr, n, eps);
#endif
        if (!fused) normalize_rows8_f32(vl, b, n * 4, b, n * 4, static_cast<int>(nr), n, eps);
        T* o0 = reinterpret_cast<T*>(p[0] + r0 * s[0]);
        if (o_run) convert_unit_stride(o0, buf, nr * n, nt);
        else
          for (int64_t k = 0; k < nr; ++k) convert_unit_stride(reinterpret_cast<T*>(p[0] + (r0 + k) * s[0]), buf + k * n, n, nt);
      }
      if (nt) g_last_nt.store(true, std::memory_order_relaxed);
      return;
    }
  }
#else
  (void)resident;  // the vector kernels' choice
#endif
  if (xsd == es) {
    for (int64_t r0 = 0; r0 < rows; r0 += kMaxStatRows) {
      const int nr = static_cast<int>(std::min<int64_t>(kMaxStatRows, rows - r0));
      double mean[kMaxStatRows], rstd[kMaxStatRows];
      row_stats_block<T>(avx, p[1] + r0 * s[1], s[1], nr, xsd, n, eps, mean, rstd);
      for (int k = 0; k < nr; ++k) {
        const NormWrite<A> f{static_cast<A>(mean[k]), static_cast<A>(rstd[k])};
        char* q[2] = {p[0] + (r0 + k) * s[0], p[1] + (r0 + k) * s[1]};
        const int64_t st[2] = {osd, xsd};
        unary_strip<T>(avx, nt && osd == es, q, st, n, f);
      }
    }
    if (avx && nt && osd == es) g_last_nt.store(true, std::memory_order_relaxed);
    return;
  }
  // Note [Normalize columns in merged blocks]: the statistics of kCols rows side by side
  // come from blocks of kColBlock elements along dim. In one pass over a block, each row
  // sums its deviations from the block's first element and their squares (the original
  // one-pass form); the block's (count, mean, sum of squared deviations) follow, and the
  // blocks are merged by Chan's formula, as the var reduction merges its blocks (Note [One
  // read for var]). Within a block the shifted sums cancel by at most a factor of
  // 1 + ((x0 - mean_b) / sd_b)^2 <= kColBlock (no element of nb lies further than
  // sqrt(nb - 1) population standard deviations from their mean), so the variance errs
  // by O(kColBlock) ulp whatever the data; the merge adds no cancellation. Shifting the
  // whole row by its first element erred by 1 + ((x0 - mean) / sd)^2 ulp instead (issue
  // #45; docs/notes/elementwise.md; tests/elementwise_test.cpp,
  // NormalizeOuterDimFirstElementFarFromMean). A block's
  // shift is its first element, so a constant row still normalizes to exactly 0. x is
  // read once from memory for the statistics and once for the write.
  constexpr int kCols = 256;
  constexpr int64_t kColBlock = 32;
  for (int64_t r0 = 0; r0 < rows; r0 += kCols) {
    const int kk = static_cast<int>(std::min<int64_t>(kCols, rows - r0));
    char* ob = p[0] + r0 * s[0];
    const char* xb = p[1] + r0 * s[1];
    double mean[kCols], m2[kCols], shift[kCols], bs[kCols], bq[kCols];
    A m[kCols], rs[kCols];
    for (int64_t i0 = 0; i0 < n; i0 += kColBlock) {
      const int64_t nb = std::min(kColBlock, n - i0);
      for (int k = 0; k < kk; ++k) {
        shift[k] = static_cast<double>(A(at<T>(xb + i0 * xsd, k, s[1])));
        bs[k] = bq[k] = 0.0;
      }
      for (int64_t i = i0 + 1; i < i0 + nb; ++i) {
        const char* xi = xb + i * xsd;
        for (int k = 0; k < kk; ++k) {
          const double v = static_cast<double>(A(at<T>(xi, k, s[1]))) - shift[k];
          bs[k] += v;
          bq[k] += v * v;
        }
      }
      const double na = static_cast<double>(i0), fb = static_cast<double>(nb), nt_ = na + fb;
      for (int k = 0; k < kk; ++k) {  // the block's (nb, mean, M2), then Chan et al.'s merge
        const double bm = shift[k] + bs[k] / fb, bm2 = std::max(bq[k] - bs[k] * bs[k] / fb, 0.0);
        if (i0 == 0) {
          mean[k] = bm;
          m2[k] = bm2;
          continue;
        }
        const double delta = bm - mean[k];
        mean[k] += delta * fb / nt_;
        m2[k] += bm2 + delta * delta * na * fb / nt_;
      }
    }
    for (int k = 0; k < kk; ++k) {
      m[k] = static_cast<A>(mean[k]);
      rs[k] = static_cast<A>(1.0 / std::sqrt(m2[k] / static_cast<double>(n) + eps));
    }
    const bool dense = s[0] == es && s[1] == es;
    for (int64_t i = 0; i < n; ++i) {
      const char* xi = xb + i * xsd;
      char* oi = ob + i * osd;
      if (dense) {
        const T* xt = reinterpret_cast<const T*>(xi);
        T* ot = reinterpret_cast<T*>(oi);
        for (int k = 0; k < kk; ++k) ot[k] = T((A(xt[k]) - m[k]) * rs[k]);
      } else {
        for (int k = 0; k < kk; ++k)
          *reinterpret_cast<T*>(oi + k * s[0]) = T((A(at<T>(xi, k, s[1])) - m[k]) * rs[k]);
      }
    }
  }
}

}  // namespace

#ifdef SB_HAVE_AVX2
void ew::normalize_buffered_f32(bool avx, char* const* p, const int64_t* s, int64_t rows, int64_t n, int64_t xsd,
                            int64_t osd, double eps) {
  normalize_strip<float>(avx, /*nt=*/false, /*resident=*/true, p, s, rows, n, xsd, osd, eps);
}
#endif

namespace {

// ---------------------------------------------------------------- the op

// Note [Streaming normalize outputs]: normalize writes its output with streaming stores
// on the same terms as the other elementwise ops (Note [Streaming elementwise outputs]):
// an output above copy.h's nt_threshold_bytes() that is not x itself (in place never
// streams), in the rows it writes whole: rows dense along `dim`, through the short-row
// kernel when n % 8 == 0 and every row starts 32-byte aligned, else through unary_strip's
// streaming loop (its heads and tails streamed element by element). The paths across
// adjacent rows (x strided along dim) keep plain stores. Without streaming, out= and
// out-of-place paid the read-for-ownership of every output line (docs/notes/elementwise.md).
// The call-wide rule is may_stream's; which rows stream is decided per strip.

void run_normalize([[maybe_unused]] const char* name, const Tensor& out, const Tensor& x, int64_t dim, double eps) {
  if (out.numel() == 0) return;
  if (!out.device().is_cpu()) {
#ifdef SB_WITH_CUDA
    return cuda::normalize(out, x, dim, eps);
#else
    return no_cuda(name, out.device());
#endif
  }
  // Iterate over the rows (x with `dim` selected away); each strip element is one row.
  const Tensor x1 = x.dim() == 0 ? x.reshape({1}) : x;
  const Tensor o1 = out.dim() == 0 ? out.as_strided({1}, {1}) : out;
  const int64_t d = x.dim() == 0 ? 0 : dim;
  const int64_t n = x1.size(d);
  const int64_t xsd = x1.stride(d) * static_cast<int64_t>(x1.element_size());
  const int64_t osd = o1.stride(d) * static_cast<int64_t>(o1.element_size());
  // The rows: out and x with `dim` left out, as select(d, 0) would give them, without
  // building those views (per-call cost). No Tiled path: the kernels read row elements
  // at p[1] + i * xsd, beyond the strip.
  Shape rsizes;
  SmallVec<int64_t, 8> ost, xst;
  for (int64_t i = 0; i < o1.dim(); ++i)
    if (i != d) rsizes.push_back(o1.size(i)), ost.push_back(o1.stride(i)), xst.push_back(x1.stride(i));
  // Note [Rows in x's order]: the rows go in out's order (out first to the planner)
  // unless x is strided along dim and one of its row dims has a stride of one element:
  // then x decides, so that its rows come side by side (Note [Normalize across adjacent
  // rows]) whatever out's layout. The order of the rows is free; which lie together is
  // not: a channels-last x into an NCHW out came as rows a whole image row apart, packed
  // one by one (docs/notes/elementwise.md).
  bool x_first = xsd != static_cast<int64_t>(x1.element_size());
  if (x_first) {
    bool unit = false;
    for (size_t i = 0; i < xst.size(); ++i) unit = unit || (xst[i] == 1 && rsizes[i] > 1);
    x_first = unit;
  }
  const StridedIter::Operand oop = {static_cast<char*>(o1.data_ptr()), ost.data(), static_cast<int64_t>(o1.element_size())},
                             xop = {static_cast<char*>(x1.data_ptr()), xst.data(), static_cast<int64_t>(x1.element_size())};
  const StridedIter::Operand ops[2] = {x_first ? xop : oop, x_first ? oop : xop};
  const StridedIter it(rsizes, ops, 2, /*tiles=*/false);
  const bool avx = use_avx2();
  const bool nt = may_stream(avx, out, {&x});
  const bool resident = x.numel() * static_cast<int64_t>(x.element_size()) <= nt_threshold_bytes();
  g_last_nt.store(false, std::memory_order_relaxed);  // the strips that stream set it
  const int64_t grain = std::max<int64_t>(1, kGrainSize / n);
  SB_DISPATCH_FLOATING(out.dtype(), "normalize", {
    it.for_each([=](char* const* p, const int64_t* s, int64_t rows) {
      if (!x_first) return normalize_strip<scalar_t>(avx, nt, resident, p, s, rows, n, xsd, osd, eps);
      char* const q[2] = {p[1], p[0]};  // out, x
      const int64_t sq[2] = {s[1], s[0]};
      normalize_strip<scalar_t>(avx, nt, resident, q, sq, rows, n, xsd, osd, eps);
    }, grain, nt);
  });
}

Tensor& normalize_out_named(const char* name, Tensor& out, const Tensor& x, int64_t dim, double eps) {
  SB_CHECK(x.defined(), name, ": undefined input tensor");
  check_dtype(name, x.dtype(), true);
  dim = wrap_dim(dim, x.dim(), name);
  SB_CHECK(eps >= 0, name, ": eps must be >= 0, got ", eps);
  if (check_out(name, out, x.sizes(), x.dtype(), x.device(), {&x})) return normalize_out_named(name, out, x.clone(), dim, eps);
  run_normalize(name, out, x, dim, eps);
  return out;
}

}  // namespace

Tensor normalize(const Tensor& x, int64_t dim, double eps) {
  SB_CHECK(x.defined(), "normalize: undefined input tensor");
  check_dtype("normalize", x.dtype(), true);
  dim = wrap_dim(dim, x.dim(), "normalize");
  SB_CHECK(eps >= 0, "normalize: eps must be >= 0, got ", eps);
  Tensor out = new_output(x.sizes(), {&x});
  run_normalize("normalize", out, x, dim, eps);
  return out;
}

Tensor& normalize_out(Tensor& out, const Tensor& x, int64_t dim, double eps) {
  return normalize_out_named("normalize_out", out, x, dim, eps);
}

Tensor& Tensor::normalize_(int64_t dim, double eps) { return normalize_out_named("normalize_", *this, *this, dim, eps); }

}  // namespace sb
