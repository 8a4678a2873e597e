// normalize_memory.cpp — normalize's float32 rows when x comes from memory (larger than
// the streaming threshold): read in address order, one statistics pass and the write per
// group of 8 short rows or per row (Note [Normalize rows in address order]). normalize.cpp
// hands them here from normalize_strip; a file of their own keeps that file's kernels
// compiling as they did (GCC's inlining there changed with them, docs/notes/elementwise.md).
#include "elementwise/normalize_rows.h"

namespace sb::ew {

#ifdef SB_HAVE_AVX2
#ifdef SB_HAVE_AVX512
namespace {

// Note [Normalize rows in address order]: rows that come from memory (x larger than
// nt_threshold_bytes()) are read in address order, one row after another, in every pass,
// and each pass that reads memory is kept short. The rows kernel walks 8 rows side by
// side, its loads 4 * n bytes apart in turn; the hardware prefetcher follows one stream,
// not 8 interleaved ones, and from DRAM that walk took up to 2.9x the time of an in-place
// scale over the same bytes. In address order the demand stream is one the prefetcher
// follows, as long as the write passes (which read from L1 and load nothing new) stay
// short: a stream that pauses restarts slowly. So, on AVX-512:
//  - kFusedMinN <= n <= kFusedMaxN: groups of 8 rows (normalize_groups_in_order_f32), the
//    statistics loop of Note [Fused normalize groups] (one chain per row; the rows'
//    chains overlap out of order), the group's constants, then its write (8 KiB at most);
//  - n > kFusedMaxN: one row at a time (normalize_rows_in_order_f32), one statistics
//    pass and the write: a group of 8 such rows made the write pass 8-32 KiB long, and
//    the long-row path (mean, centered sums, write, 8 rows at a time) read each row
//    three times with two pauses;
// both streaming where out rows are 64-byte aligned and n % 16 == 0 (above kStatFlush an
// output to stream that is not takes the long-row path, which streams at any offset).
// Elsewhere (AVX2 up to kStatFlush, n < 16, unaligned streaming rows) the rows kernel
// walks its statistics passes in row order too. In the caches every kernel keeps its
// side-by-side walk, faster there. Software prefetches of the next groups were
// slower (docs/notes/elementwise.md).
template <bool NT>
SB_ZMM void normalize_groups_in_order_f32(const char* x, int64_t xr, char* out, int64_t orow, int64_t rows, int64_t n,
                                          double eps) {
  FusedSlots st;
  const float e = static_cast<float>(eps);
  const int64_t ng = rows / 8;
  VZ::V s[8], q[8];
  for (int64_t g = 0; g < ng; ++g) {
    const char* xs = x + g * 8 * xr;
    char* os = out + g * 8 * orow;
    fused_shift(st.shift[0], xs, xr);
    fused_loop<true, false>(st.shift[0], nullptr, nullptr, s, q, xs, nullptr, nullptr, xr, orow, n);
    if (fused_finish(st.shift[0], st.negmean[0], st.rstd[0], s, q, n, e))
      fused_loop<false, true, NT>(nullptr, st.negmean[0], st.rstd[0], s, q, nullptr, xs, os, xr, orow, n);
    else  // guard failed: the exact passes
      normalize_rows8_f32_vl<NT, true>(xs, xr, os, orow, 8, n, eps);
  }
  if (ng * 8 < rows)
    normalize_rows8_f32_vl<NT, true>(x + ng * 8 * xr, xr, out + ng * 8 * orow, orow, static_cast<int>(rows - ng * 8), n,
                                     eps);
  if (NT) _mm_sfence();
}

// Rows of n > kFusedMaxN from memory, one at a time (Note [Normalize rows in address
// order]): its statistics (two chains of S and Q; the shift of Note [One statistics
// pass], a pairwise sum of the first 8 elements; rows longer than kStatFlush flush each
// chunk's sums into double, as the reductions do), its constants, its write. A row whose
// guard or variance check fails takes the exact passes: the rows kernel's up to
// kStatFlush, dense_mean and dense_centered above it (row_stats_block's).
template <bool NT>
SB_ZMM void normalize_rows_in_order_f32(const char* x, int64_t xr, char* out, int64_t orow, int64_t rows, int64_t n,
                                        double eps) {
  constexpr int64_t kFlushV = kStatFlush / 16;  // vectors per flush
  const int64_t nf = n / 16;
  const VZ::Mask tm = static_cast<VZ::Mask>((1u << (n % 16)) - 1);
  const float e = static_cast<float>(eps);
  for (int64_t r = 0; r < rows; ++r) {
    const float* xk = reinterpret_cast<const float*>(x + r * xr);
    float* ok = reinterpret_cast<float*>(out + r * orow);
    const float c = VF::sum8_pairwise(xk) * 0.125f;
    const VZ::V cv = VZ::set1(c);
    VZ::V s0 = VZ::zero(), s1 = s0, q0 = s0, q1 = s0;
    double sd = 0, qd = 0;  // the flushed chunks
    for (int64_t c0 = 0; c0 < nf; c0 += kFlushV) {
      const int64_t ce = std::min(nf, c0 + kFlushV);
      int64_t v = c0;
      for (; v + 2 <= ce; v += 2) {
        const VZ::V d0 = VZ::sub(VZ::load(xk + 16 * v), cv);
        const VZ::V d1 = VZ::sub(VZ::load(xk + 16 * v + 16), cv);
        s0 = VZ::add(s0, d0);
        s1 = VZ::add(s1, d1);
        q0 = VZ::fma(d0, d0, q0);
        q1 = VZ::fma(d1, d1, q1);
      }
      if (v < ce) {
        const VZ::V d = VZ::sub(VZ::load(xk + 16 * v), cv);
        s0 = VZ::add(s0, d);
        q0 = VZ::fma(d, d, q0);
      }
      if (ce < nf) {
        sd += Vec<float>::hsum(vec::fold_halves(VZ::add(s0, s1)));
        qd += Vec<float>::hsum(vec::fold_halves(VZ::add(q0, q1)));
        s0 = s1 = q0 = q1 = VZ::zero();
      }
    }
    if (tm) {
      const VZ::V d = VZ::maskz_sub(tm, VZ::maskz_load(tm, xk + 16 * nf), cv);
      s0 = VZ::add(s0, d);
      q0 = VZ::fma(d, d, q0);
    }
    VZ::V st = VZ::add(s0, s1), qt = VZ::add(q0, q1);
    if (n > kStatFlush) {  // all the row's sums in lane 0
      st = VZ::maskz_mov(1, VZ::set1(static_cast<float>(sd + Vec<float>::hsum(vec::fold_halves(st)))));
      qt = VZ::maskz_mov(1, VZ::set1(static_cast<float>(qd + Vec<float>::hsum(vec::fold_halves(qt)))));
    }
    // fused_finish over 8 copies of the row: its constants in every lane
    alignas(32) float cs[8], nm[8], rs[8];
    VF::store_aligned(cs, VF::set1(c));
    VZ::V sr[8], qr[8];
    for (int k = 0; k < 8; ++k) {
      sr[k] = st;
      qr[k] = qt;
    }
    if (!fused_finish(cs, nm, rs, sr, qr, n, e)) {  // the exact passes
      if (n <= kStatFlush) {
        normalize_rows8_f32_vl<NT, true>(x + r * xr, xr, out + r * orow, orow, 1, n, eps);
        continue;
      }
      const double mean = dense_mean<float>(xk, n);
      double ss, sq;
      dense_centered<float>(xk, n, static_cast<float>(mean), &ss, &sq);
      const double var = std::max((sq - ss * ss / static_cast<double>(n)) / static_cast<double>(n), 0.0);
      nm[0] = -static_cast<float>(mean);
      rs[0] = static_cast<float>(1.0 / std::sqrt(var + eps));
    }
    const VZ::V mk = VZ::set1(nm[0]);
    const VZ::V rk = VZ::set1(rs[0]);
    for (int64_t v = 0; v < nf; ++v) {
      const VZ::V y = VZ::mul(VZ::add(VZ::load(xk + 16 * v), mk), rk);
      if constexpr (NT) VZ::stream(ok + 16 * v, y);
      else VZ::store(ok + 16 * v, y);
    }
    if (tm) VZ::mask_store(ok + 16 * nf, tm, VZ::mul(VZ::add(VZ::maskz_load(tm, xk + 16 * nf), mk), rk));
  }
  if (NT) _mm_sfence();
}

}  // namespace
#endif  // SB_HAVE_AVX512

// Dense float32 rows from memory, out = p[0], x = p[1] (Note [Normalize rows in address
// order]); nt: the caller may stream the output. false (nothing written) where there is
// no in-order kernel for them: rows longer than kStatFlush without AVX-512, or with an
// output to stream that the 16-float streams cannot (normalize_strip's long-row path
// streams at any offset).
bool normalize_rows_from_memory_f32(bool vl, bool nt, char* const* p, const int64_t* s,
                                                             int64_t rows, int64_t n, double eps) {
  // as normalize_strip's nt8: 8-float streaming stores need 32-byte aligned output rows
  const bool nt8 = nt && n % 8 == 0 && s[0] % 32 == 0 && reinterpret_cast<uintptr_t>(p[0]) % 32 == 0;
#ifdef SB_HAVE_AVX512
  if (vl && n >= kFusedMinN && (rows >= 8 || n > kFusedMaxN)) {
    const bool nt16 = nt8 && n % 16 == 0 && s[0] % 64 == 0 && reinterpret_cast<uintptr_t>(p[0]) % 64 == 0;
    const bool groups = n <= kFusedMaxN;
    if (nt16) {
      if (groups) normalize_groups_in_order_f32<true>(p[1], s[1], p[0], s[0], rows, n, eps);
      else normalize_rows_in_order_f32<true>(p[1], s[1], p[0], s[0], rows, n, eps);
      g_last_nt.store(true, std::memory_order_relaxed);
      return true;
    }
    if (n > kStatFlush ? !nt : !nt8) {
      if (groups) normalize_groups_in_order_f32<false>(p[1], s[1], p[0], s[0], rows, n, eps);
      else normalize_rows_in_order_f32<false>(p[1], s[1], p[0], s[0], rows, n, eps);
      return true;
    }
  }
#endif
  if (n > kStatFlush) return false;
  for (int64_t r0 = 0; r0 < rows; r0 += 8) {
    const int nr = static_cast<int>(std::min<int64_t>(8, rows - r0));
    char* const o = p[0] + r0 * s[0];
    const char* const xg = p[1] + r0 * s[1];
    if (nt8) normalize_rows8_f32<true, true>(vl, xg, s[1], o, s[0], nr, n, eps);
    else normalize_rows8_f32<false, true>(vl, xg, s[1], o, s[0], nr, n, eps);
  }
  if (nt8) g_last_nt.store(true, std::memory_order_relaxed);
  return true;
}
#endif

}  // namespace sb::ew
#undef SB_ZMM
