// gemm_kernel.cpp — the GEMM micro-kernels, tile store (epilogue) and strided packers,
// and the raw gemm() entries (see gemm_impl.h for the blocking).
//
//   ukernel_f32_avx2    6x16 float32 tile in 12 ymm accumulators; per k: 2 loads of B,
//                       6 broadcasts of A, 12 FMAs (96 MACs). Peak: 2 FMA ports x 8 lanes
//                       x 2 flop = 32 flop/cycle/core.
//   ukernel_f32_avx512  16x16 float32 tile in 16 zmm accumulators (and _c: straight into C).
//   ukernel_f32_wide    12x32 float32 tile in 24 zmm accumulators over two B panels (and
//                       _c), for cores with full-width 512-bit FMAs (Note [Wide tile]).
//   ukernel_f32_scalar  the same tile in plain C (always compiled; SimdLevel::Scalar).
//   ukernel_f64         4x8 float64 tile in plain C (the "simple blocked" float64 path).
#ifdef SB_HAVE_AVX2
#include <immintrin.h>
#endif

#include "matmul/gemm_impl.h"
#include "core/vec.h"

namespace sb::detail {

#ifdef SB_HAVE_AVX2
void ukernel_f32_avx2(int64_t kc, const float* a, const float* b, float* tile) {
  __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
  __m256 c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
#pragma GCC unroll 4
  for (int64_t k = 0; k < kc; ++k, a += kMRf, b += kNRf) {
    _mm_prefetch(reinterpret_cast<const char*>(a + 8 * kMRf), _MM_HINT_T0);
    const __m256 b0 = _mm256_load_ps(b), b1 = _mm256_load_ps(b + 8);
    __m256 av = _mm256_broadcast_ss(a + 0);
    c00 = _mm256_fmadd_ps(av, b0, c00); c01 = _mm256_fmadd_ps(av, b1, c01);
    av = _mm256_broadcast_ss(a + 1);
    c10 = _mm256_fmadd_ps(av, b0, c10); c11 = _mm256_fmadd_ps(av, b1, c11);
    av = _mm256_broadcast_ss(a + 2);
    c20 = _mm256_fmadd_ps(av, b0, c20); c21 = _mm256_fmadd_ps(av, b1, c21);
    av = _mm256_broadcast_ss(a + 3);
    c30 = _mm256_fmadd_ps(av, b0, c30); c31 = _mm256_fmadd_ps(av, b1, c31);
    av = _mm256_broadcast_ss(a + 4);
    c40 = _mm256_fmadd_ps(av, b0, c40); c41 = _mm256_fmadd_ps(av, b1, c41);
    av = _mm256_broadcast_ss(a + 5);
    c50 = _mm256_fmadd_ps(av, b0, c50); c51 = _mm256_fmadd_ps(av, b1, c51);
  }
  _mm256_store_ps(tile + 0, c00); _mm256_store_ps(tile + 8, c01);
  _mm256_store_ps(tile + 16, c10); _mm256_store_ps(tile + 24, c11);
  _mm256_store_ps(tile + 32, c20); _mm256_store_ps(tile + 40, c21);
  _mm256_store_ps(tile + 48, c30); _mm256_store_ps(tile + 56, c31);
  _mm256_store_ps(tile + 64, c40); _mm256_store_ps(tile + 72, c41);
  _mm256_store_ps(tile + 80, c50); _mm256_store_ps(tile + 88, c51);
}
#else
void ukernel_f32_avx2(int64_t kc, const float* a, const float* b, float* tile) { ukernel_f32_scalar(kc, a, b, tile); }
#endif

#if defined(SB_HAVE_AVX2) && defined(SB_HAVE_AVX512)
// An MR x 16*NP tile, one zmm accumulator per row and panel: per k NP loads of B (the
// panels at b and b + b_panel), MR broadcasts of A (load ports), MR*NP FMAs. The 16x16
// tile (NP 1) is FMA-bound where 512-bit FMAs issue in halves; the 12x32 tile (NP 2)
// where they do not (Note [Wide tile]). n k steps; A's packed k steps are AS floats
// apart (AS > MR: the first MR rows of a wider panel, Note [Short wide tiles]):
template <int MR, int NP, int AS = MR>
__attribute__((target("avx512f"), always_inline)) static inline void k_steps_512(int64_t n, const float*& a,
                                                                                 const float*& b, int64_t b_panel,
                                                                                 __m512* acc) {
#pragma GCC unroll 2
  for (int64_t k = 0; k < n; ++k, a += AS, b += kNRf) {
    _mm_prefetch(reinterpret_cast<const char*>(a + 8 * AS), _MM_HINT_T0);
    __m512 bv[NP];
#pragma GCC unroll 2
    for (int q = 0; q < NP; ++q) bv[q] = _mm512_loadu_ps(b + q * b_panel);
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) {
      const __m512 av = _mm512_set1_ps(a[r]);
#pragma GCC unroll 2
      for (int q = 0; q < NP; ++q) acc[r * NP + q] = _mm512_fmadd_ps(av, bv[q], acc[r * NP + q]);
    }
  }
}

// An MR x 16 tile over one B panel into tile (ld 16).
template <int MR>
__attribute__((target("avx512f"), always_inline)) static inline void one_panel_tile(int64_t kc, const float* a,
                                                                                   const float* b, float* tile) {
  __m512 c[MR];
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r) c[r] = _mm512_setzero_ps();
  k_steps_512<MR, 1>(kc, a, b, 0, c);
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r) _mm512_store_ps(tile + r * kNRf, c[r]);
}

__attribute__((target("avx512f"))) void ukernel_f32_avx512(int64_t kc, const float* a, const float* b, float* tile) {
  one_panel_tile<kMRf512>(kc, a, b, tile);
}

// The first MR rows of a 12-row wide panel over NP B panels into tile (the 12x16
// halves one after the other, ld 16).
template <int MR, int NP>
__attribute__((target("avx512f"), always_inline)) static inline void wide_rows(int64_t kc, const float* a,
                                                                              const float* b, float* tile) {
  __m512 c[MR * NP];
#pragma GCC unroll 32
  for (int r = 0; r < MR * NP; ++r) c[r] = _mm512_setzero_ps();
  k_steps_512<MR, NP, kMRw>(kc, a, b, kNRf * kc, c);
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r) {
#pragma GCC unroll 2
    for (int q = 0; q < NP; ++q) _mm512_store_ps(tile + (q * kMRw + r) * kNRf, c[r * NP + q]);
  }
}

// Note [Short wide tiles]: M is rarely a multiple of 12 (1024 = 85 x 12 + 4, 256 = 21 x
// 12 + 4), and a tile of the last rows computed all 12 of its panel's rows: at M = 256
// one tile in 22 of each column block spent two thirds of its work on zero rows. The
// rows past mr are left out in steps of 4 (4, 8 or 12 rows of the same 12-row panel;
// the packed layout is unchanged). A 4x32 tile still keeps 8 accumulators, the FMA
// pipes' depth. The rows past mr in tile are not written.
__attribute__((target("avx512f"))) void ukernel_f32_wide(int64_t kc, const float* a, const float* b, bool two,
                                                         int mr, float* tile) {
  if (mr <= 4) two ? wide_rows<4, 2>(kc, a, b, tile) : wide_rows<4, 1>(kc, a, b, tile);
  else if (mr <= 8) two ? wide_rows<8, 2>(kc, a, b, tile) : wide_rows<8, 1>(kc, a, b, tile);
  else two ? wide_rows<kMRw, 2>(kc, a, b, tile) : wide_rows<kMRw, 1>(kc, a, b, tile);
}

// The tile written straight into C with the epilogue (a full tile of a C with unit
// column stride: the driver's common case). Note [Fused C store]: going through the
// tile buffer and store_tile cost 12 % of a 1024^3 GEMM (perf): the C rows missed in L1
// after the KC loop (16 rows 4 KiB apart share one L1 set) and the loads waited on
// them. Here C's rows are prefetched into L2 when the tile starts and into L1 shortly
// before the k loop ends, so the misses overlap the FMAs.
__attribute__((target("avx512f"))) void ukernel_f32_avx512_c(int64_t kc, const float* a, const float* b, float* c,
                                                             int64_t c_rs, const GemmEpilogue& ep, bool first,
                                                             bool last, int64_t i0, int64_t j0) {
  constexpr int kTail = 24;  // k steps left when C is pulled into L1 (~200 cycles)
  __m512 acc[kMRf512];
#pragma GCC unroll 16
  for (int r = 0; r < kMRf512; ++r) {
    acc[r] = _mm512_setzero_ps();
    _mm_prefetch(reinterpret_cast<const char*>(c + r * c_rs), _MM_HINT_T1);
  }
  const int64_t head = std::max<int64_t>(0, kc - kTail);
  k_steps_512<kMRf512, 1>(head, a, b, 0, acc);
#pragma GCC unroll 16
  for (int r = 0; r < kMRf512; ++r) _mm_prefetch(reinterpret_cast<const char*>(c + r * c_rs), _MM_HINT_T0);
  k_steps_512<kMRf512, 1>(kc - head, a, b, 0, acc);
  const __m512 alpha = _mm512_set1_ps(ep.alpha), zero = _mm512_setzero_ps();
  const bool read_c = !first || ep.beta != 0.0f;
  const __m512 cmul = first ? _mm512_set1_ps(ep.beta) : _mm512_set1_ps(1.0f);
  const bool col_bias = last && ep.bias && !ep.bias_per_row, row_bias = last && ep.bias && ep.bias_per_row;
  __m512 cb = zero;
  if (col_bias) {
    if (ep.bias_stride == 1) {
      cb = _mm512_loadu_ps(ep.bias + j0);
    } else {
      alignas(64) float tmp[16];
      for (int q = 0; q < 16; ++q) tmp[q] = ep.bias[(j0 + q) * ep.bias_stride];
      cb = _mm512_load_ps(tmp);
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < kMRf512; ++r) {  // unrolled: constant indices keep acc in registers
    float* cr = c + r * c_rs;
    __m512 v = _mm512_mul_ps(alpha, acc[r]);
    if (read_c) v = _mm512_fmadd_ps(cmul, _mm512_loadu_ps(cr), v);
    if (last) {
      if (col_bias) v = _mm512_add_ps(v, cb);
      if (row_bias) v = _mm512_add_ps(v, _mm512_set1_ps(ep.bias[(i0 + r) * ep.bias_stride]));
      if (ep.relu) v = _mm512_mask_max_ps(v, 0xFFFF, zero, v);  // NaN stays; not _mm512_max_ps: GCC 12 -Wmaybe-uninitialized false positive
    }
    _mm512_storeu_ps(cr, v);
  }
}

// The wide tile's twin of ukernel_f32_avx512_c (two C vectors per row); the 16x16 one
// keeps its own code, as measured on the cores that run it.
template <int MR, int NP>
__attribute__((target("avx512f"), always_inline)) static inline void tile_into_c(
    int64_t kc, const float* a, const float* b, int64_t b_panel, float* c, int64_t c_rs, const GemmEpilogue& ep,
    bool first, bool last, int64_t i0, int64_t j0) {
  constexpr int kTail = 24;  // k steps left when C is pulled into L1 (~200 cycles)
  __m512 acc[MR * NP];
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r) {
#pragma GCC unroll 2
    for (int q = 0; q < NP; ++q) {
      acc[r * NP + q] = _mm512_setzero_ps();
      _mm_prefetch(reinterpret_cast<const char*>(c + r * c_rs + q * kNRf), _MM_HINT_T1);
    }
  }
  const int64_t head = std::max<int64_t>(0, kc - kTail);
  k_steps_512<MR, NP>(head, a, b, b_panel, acc);
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r) {
#pragma GCC unroll 2
    for (int q = 0; q < NP; ++q) _mm_prefetch(reinterpret_cast<const char*>(c + r * c_rs + q * kNRf), _MM_HINT_T0);
  }
  k_steps_512<MR, NP>(kc - head, a, b, b_panel, acc);
  store_acc_tile<MR, NP>(acc, c, c_rs, ep, first, last, i0, j0);
}

__attribute__((target("avx512f"))) void ukernel_f32_wide_c(int64_t kc, const float* a, const float* b, float* c,
                                                           int64_t c_rs, const GemmEpilogue& ep, bool first,
                                                           bool last, int64_t i0, int64_t j0) {
  tile_into_c<kMRw, 2>(kc, a, b, kNRf * kc, c, c_rs, ep, first, last, i0, j0);
}
#else
void ukernel_f32_avx512(int64_t kc, const float* a, const float* b, float* tile) { ukernel_f32_avx2(kc, a, b, tile); }
void ukernel_f32_avx512_c(int64_t kc, const float* a, const float* b, float* c, int64_t c_rs, const GemmEpilogue& ep,
                          bool first, bool last, int64_t i0, int64_t j0) {
  alignas(64) float tile[kMRmax * kNRf];
  ukernel_f32_avx512(kc, a, b, tile);
  store_tile<float, kNRf>(tile, c, c_rs, 1, kMRf512, kNRf, ep, first, last, i0, j0);
}
void ukernel_f32_wide(int64_t, const float*, const float*, bool, int, float*) {
  SB_INTERNAL_ASSERT(false, "the wide tile needs an AVX-512 build");
}
void ukernel_f32_wide_c(int64_t, const float*, const float*, float*, int64_t, const GemmEpilogue&, bool, bool, int64_t,
                        int64_t) {
  SB_INTERNAL_ASSERT(false, "the wide tile needs an AVX-512 build");
}
#endif

template <typename T, int MR, int NR>
static void ukernel_plain(int64_t kc, const T* a, const T* b, T* tile) {
  T acc[MR][NR] = {};
  for (int64_t k = 0; k < kc; ++k, a += MR, b += NR)
    for (int r = 0; r < MR; ++r)
      for (int c = 0; c < NR; ++c) acc[r][c] += a[r] * b[c];
  for (int r = 0; r < MR; ++r)
    for (int c = 0; c < NR; ++c) tile[r * NR + c] = acc[r][c];
}
void ukernel_f32_scalar(int64_t kc, const float* a, const float* b, float* tile) {
  ukernel_plain<float, kMRf, kNRf>(kc, a, b, tile);
}
void ukernel_f64(int64_t kc, const double* a, const double* b, double* tile) {
  ukernel_plain<double, kMRd, kNRd>(kc, a, b, tile);
}

template <typename T, int NR>
void store_tile(const T* tile, T* c, int64_t c_rs, int64_t c_cs, int mr, int nr, const GemmEpilogueT<T>& ep,
                bool first, bool last, int64_t i0, int64_t j0) {
#ifdef SB_HAVE_AVX2
  if constexpr (std::is_same<T, float>::value && NR == 16) {
    if (c_cs == 1 && nr == 16 && use_avx2()) {
      const __m256 alpha = _mm256_set1_ps(ep.alpha), beta = _mm256_set1_ps(ep.beta), zero = _mm256_setzero_ps();
      const bool read_c = !first || ep.beta != 0.0f;
      const __m256 cmul = first ? beta : _mm256_set1_ps(1.0f);
      const bool col_bias = last && ep.bias && !ep.bias_per_row;
      __m256 bias0, bias1;
      col_bias_pair(ep, j0, col_bias, bias0, bias1);
      for (int r = 0; r < mr; ++r) {
        float* cr = c + r * c_rs;
        __m256 v0 = _mm256_mul_ps(alpha, _mm256_load_ps(tile + r * 16));
        __m256 v1 = _mm256_mul_ps(alpha, _mm256_load_ps(tile + r * 16 + 8));
        if (read_c) {
          v0 = _mm256_fmadd_ps(cmul, _mm256_loadu_ps(cr), v0);
          v1 = _mm256_fmadd_ps(cmul, _mm256_loadu_ps(cr + 8), v1);
        }
        if (last) {
          if (col_bias) { v0 = _mm256_add_ps(v0, bias0); v1 = _mm256_add_ps(v1, bias1); }
          if (ep.bias && ep.bias_per_row) {
            const __m256 bb = _mm256_set1_ps(ep.bias[(i0 + r) * ep.bias_stride]);
            v0 = _mm256_add_ps(v0, bb); v1 = _mm256_add_ps(v1, bb);
          }
          if (ep.relu) { v0 = _mm256_max_ps(zero, v0); v1 = _mm256_max_ps(zero, v1); }  // NaN stays
        }
        _mm256_storeu_ps(cr, v0);
        _mm256_storeu_ps(cr + 8, v1);
      }
      return;
    }
  }
#endif
  for (int r = 0; r < mr; ++r) {
    for (int q = 0; q < nr; ++q) {
      T* cp = c + r * c_rs + q * c_cs;
      T v = ep.alpha * tile[r * NR + q];
      if (!first) v += *cp;
      else if (ep.beta != T(0)) v += ep.beta * *cp;
      if (last) {
        if (ep.bias) v += ep.bias[(ep.bias_per_row ? i0 + r : j0 + q) * ep.bias_stride];
        if (ep.relu) v = v < T(0) ? T(0) : v;  // NaN stays (Note [Fused relu and NaN])
      }
      *cp = v;
    }
  }
}
template void store_tile<float, kNRf>(const float*, float*, int64_t, int64_t, int, int, const GemmEpilogue&, bool, bool,
                                      int64_t, int64_t);
template void store_tile<double, kNRd>(const double*, double*, int64_t, int64_t, int, int,
                                       const GemmEpilogueT<double>&, bool, bool, int64_t, int64_t);

void widen_to_float(const Half* p, int64_t s, int64_t n, float* out) {
  int64_t i = 0;
#ifdef SB_HAVE_AVX2
  if (s == 1 && use_avx2())
    for (; i + 8 <= n; i += 8)
      _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i))));
  if (use_avx2()) {
    for (; i < n; ++i) out[i] = _cvtsh_ss(p[i * s].bits);
    return;
  }
#endif
  for (; i < n; ++i) out[i] = static_cast<float>(p[i * s]);
}

void widen_to_float(const BFloat16* p, int64_t s, int64_t n, float* out) {
  int64_t i = 0;
#ifdef SB_HAVE_AVX2
  if (s == 1 && use_avx2())
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, vec::Vec<BFloat16>::load(p + i));
#endif
  for (; i < n; ++i) out[i] = static_cast<float>(p[i * s]);
}

// Note [Packing a row-major B]: a row-major B (unit column stride) is copied in runs of
// NR elements, each k row of a panel one run. Walked k outer over every panel, each run
// went to a different panel (KC x NR elements apart, one L1 set for all of them) and the
// packing ran several times slower than a walk that copies kPackRows rows of one panel
// at a time before moving to the next (docs/notes/gemm.md, "Packing a row-major B by
// blocks of rows"); the reads stay in the same few rows of B either way.
template <typename T, int NR, typename S>
void pack_b_strided(T* dst, const S* b, int64_t rs, int64_t cs, int64_t p0, int64_t kc, int64_t j0, int64_t nc) {
  if constexpr (std::is_same<T, S>::value) {
    if (cs == 1 && nc >= NR) {  // row-major B: Note [Packing a row-major B]
      const int64_t full = nc / NR * NR;
      for (int64_t k0 = 0; k0 < kc; k0 += kPackRows) {
        const int64_t kb = std::min<int64_t>(kPackRows, kc - k0);
        const S* rows = b + (p0 + k0) * rs + j0;
        for (int64_t jp = 0; jp < full; jp += NR) copy_runs<NR>(dst + jp * kc + k0 * NR, rows + jp, rs, kb);
      }
      dst += full * kc;
      b += full;  // the partial panel, if any, below
      nc -= full;
    }
  }
  for (int64_t jp = 0; jp < nc; jp += NR, dst += NR * kc) {
    const int nr = static_cast<int>(std::min<int64_t>(NR, nc - jp));
    const S* bp = b + p0 * rs + (j0 + jp) * cs;
    if constexpr (kWidened<S>) {
      alignas(32) float tmp[256];
      if (cs == 1) {
        for (int64_t k = 0; k < kc; ++k) {
          widen_to_float(bp + k * rs, 1, nr, dst + k * NR);
          for (int q = nr; q < NR; ++q) dst[k * NR + q] = 0.0f;
        }
      } else {
        for (int q = 0; q < NR; ++q) {
          if (q >= nr) { for (int64_t k = 0; k < kc; ++k) dst[k * NR + q] = 0.0f; continue; }
          for (int64_t k0 = 0; k0 < kc; k0 += 256) {
            const int64_t n = std::min<int64_t>(256, kc - k0);
            widen_to_float(bp + q * cs + k0 * rs, rs, n, tmp);
            for (int64_t k = 0; k < n; ++k) dst[(k0 + k) * NR + q] = tmp[k];
          }
        }
      }
    } else {
      if (cs == 1 && nr == NR) {
        for (int64_t k = 0; k < kc; ++k) std::memcpy(dst + k * NR, bp + k * rs, NR * sizeof(T));
      } else if (rs == 1) {
#ifdef SB_HAVE_AVX2
        if constexpr (std::is_same<T, float>::value && std::is_same<S, float>::value) {
          if (use_avx2()) {  // unit-stride columns: 8x8 transposes into the NR-wide panel
            transpose_tile_f32(dst, NR, bp, cs, kc, nr);
            for (int q = nr; q < NR; ++q)
              for (int64_t k = 0; k < kc; ++k) dst[k * NR + q] = T(0);
            continue;
          }
        }
#endif
        for (int q = 0; q < nr; ++q) {
          const S* col = bp + q * cs;
          for (int64_t k = 0; k < kc; ++k) dst[k * NR + q] = static_cast<T>(col[k]);
        }
        for (int q = nr; q < NR; ++q)
          for (int64_t k = 0; k < kc; ++k) dst[k * NR + q] = T(0);
      } else {
        for (int64_t k = 0; k < kc; ++k) {
          const S* row = bp + k * rs;
          for (int q = 0; q < nr; ++q) dst[k * NR + q] = static_cast<T>(row[q * cs]);
          for (int q = nr; q < NR; ++q) dst[k * NR + q] = T(0);
        }
      }
    }
  }
}
template void pack_b_strided<float, kNRf, float>(float*, const float*, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t);
template void pack_b_strided<float, kNRf, Half>(float*, const Half*, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t);
template void pack_b_strided<float, kNRf, BFloat16>(float*, const BFloat16*, int64_t, int64_t, int64_t, int64_t, int64_t,
                                                    int64_t);
template void pack_b_strided<double, kNRd, double>(double*, const double*, int64_t, int64_t, int64_t, int64_t, int64_t,
                                                   int64_t);

#if defined(SB_HAVE_AVX2) && defined(SB_HAVE_AVX512)
// Note [Narrow GEMMs]: an MR x 16 NP tile of C over all K, A broadcast from its MR rows
// (lda apart, unit stride along k), B packed [K][16 NP]; the NP panels of the tile into
// tile (panel q at tile + q * MR * 16, ld 16).
constexpr int64_t kNarrowAheadL1 = 64, kNarrowAheadL2 = 1024;  // elements of a row ahead of k0
template <int MR, int NP>
__attribute__((target("avx512f"))) static void narrow_tile(int64_t K, const float* a, int64_t lda, const float* b,
                                                          float* tile) {
  __m512 acc[MR * NP];
#pragma GCC unroll 24
  for (int r = 0; r < MR * NP; ++r) acc[r] = _mm512_setzero_ps();
  const float* row[MR];
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r) row[r] = a + r * lda;
  for (int64_t k0 = 0; k0 < K; k0 += 16) {
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) {
      _mm_prefetch(reinterpret_cast<const char*>(row[r] + k0 + kNarrowAheadL1), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(row[r] + k0 + kNarrowAheadL2), _MM_HINT_T1);
    }
    const int64_t k1 = std::min<int64_t>(K, k0 + 16);
    for (int64_t k = k0; k < k1; ++k) {
      const float* bk = b + k * 16 * NP;
      __m512 bv[NP];
#pragma GCC unroll 4
      for (int q = 0; q < NP; ++q) bv[q] = _mm512_load_ps(bk + 16 * q);
#pragma GCC unroll 16
      for (int r = 0; r < MR; ++r) {
        const __m512 av = _mm512_set1_ps(row[r][k]);
#pragma GCC unroll 4
        for (int q = 0; q < NP; ++q) acc[r * NP + q] = _mm512_fmadd_ps(av, bv[q], acc[r * NP + q]);
      }
    }
  }
#pragma GCC unroll 4
  for (int q = 0; q < NP; ++q) {
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) _mm512_store_ps(tile + (q * MR + r) * kNRf, acc[r * NP + q]);
  }
}

template <int MR, int NP>
static void narrow_rows(int64_t m0, int64_t m1, int64_t N, int64_t K, const float* a, int64_t a_rs, const float* bp,
                        float* tail, float* c, int64_t c_rs, const GemmEpilogue& ep) {
  alignas(64) float tile[MR * 16 * NP];
  for (int64_t i = m0; i < m1; i += MR) {
    const int mr = static_cast<int>(std::min<int64_t>(MR, m1 - i));
    if (mr == MR) {
      narrow_tile<MR, NP>(K, a + i * a_rs, a_rs, bp, tile);
    } else {  // the last rows, zero-padded to a whole tile
      for (int r = 0; r < MR; ++r)
        if (r < mr) std::memcpy(tail + r * K, a + (i + r) * a_rs, K * sizeof(float));
        else std::memset(tail + r * K, 0, K * sizeof(float));
      narrow_tile<MR, NP>(K, tail, K, bp, tile);
    }
    for (int q = 0; q < NP; ++q)
      store_tile<float, kNRf>(tile + q * MR * kNRf, c + i * c_rs + q * kNRf, c_rs, 1, mr,
                              static_cast<int>(std::min<int64_t>(kNRf, N - q * kNRf)), ep, true, true, i, q * kNRf);
  }
}

bool gemm_narrow_f32(int64_t M, int64_t N, int64_t K, const float* a, int64_t a_rs, int64_t a_cs, const float* b,
                     int64_t b_rs, int64_t b_cs, float* c, int64_t c_rs, int64_t c_cs, const GemmEpilogue& ep) {
  if (!narrow_shape(M, N, K) || a_cs != 1 || c_cs != 1) return false;
  const int NP = narrow_panels(N), MR = narrow_mr(N), W = 16 * NP;
  const int team = narrow_team(M, N, team_size());
  Workspace ws(gemm_workspace_bytes_t<float>(M, N, K, team_size()));  // Note [GEMM workspace]
  float* bp = ws.as<float>();
  float* tails = bp + round_up(K * W, 16);
  for (int64_t k = 0; k < K; ++k) {  // B packed [K][W], the columns past N zero
    float* d = bp + k * W;
    const float* src = b + k * b_rs;
    if (b_cs == 1) std::memcpy(d, src, N * sizeof(float));
    else for (int64_t j = 0; j < N; ++j) d[j] = src[j * b_cs];
    for (int64_t j = N; j < W; ++j) d[j] = 0.0f;
  }
  const int64_t tiles = (M + MR - 1) / MR, per = (tiles + team - 1) / team;
  run_team(team, [&](int t) {
    const int64_t m0 = std::min(M, t * per * MR), m1 = std::min(M, (t + 1) * per * MR);
    float* tail = tails + t * round_up(MR * K, 16);
    if (NP == 1) narrow_rows<kNarrowMR[1], 1>(m0, m1, N, K, a, a_rs, bp, tail, c, c_rs, ep);
    else if (NP == 2) narrow_rows<kNarrowMR[2], 2>(m0, m1, N, K, a, a_rs, bp, tail, c, c_rs, ep);
    else if (NP == 3) narrow_rows<kNarrowMR[3], 3>(m0, m1, N, K, a, a_rs, bp, tail, c, c_rs, ep);
    else narrow_rows<kNarrowMR[4], 4>(m0, m1, N, K, a, a_rs, bp, tail, c, c_rs, ep);
  });
  return true;
}
#else
bool gemm_narrow_f32(int64_t, int64_t, int64_t, const float*, int64_t, int64_t, const float*, int64_t, int64_t, float*,
                     int64_t, int64_t, const GemmEpilogue&) {
  return false;
}
#endif

// T the compute type; A stored as SA and B as SB (T, or float16 widened while packing).
template <typename T, typename SB, typename SA = T>
static void gemm_strided(int64_t M, int64_t N, int64_t K, const SA* a, int64_t a_rs, int64_t a_cs, const SB* b,
                         int64_t b_rs, int64_t b_cs, T* c, int64_t c_rs, int64_t c_cs, const GemmEpilogueT<T>& ep) {
  constexpr int NR = Tile<T>::NR;
  // Note [Column-major C]: the tile store is fast for unit column stride only, so a C
  // with unit row stride (column-major) is computed as C^T = B^T A^T, which swaps the
  // operands' roles and the bias side; for column-major A, B and C all three become
  // row-major. Needs A and B of one type (the f16 path keeps its order).
  if constexpr (std::is_same<T, SB>::value && std::is_same<T, SA>::value) {
    if (c_rs == 1 && c_cs != 1 && M > 1) {
      GemmEpilogueT<T> ept = ep;
      ept.bias_per_row = !ep.bias_per_row;
      gemm_strided<T, T>(N, M, K, b, b_cs, b_rs, a, a_cs, a_rs, c, c_cs, c_rs, ept);
      return;
    }
  }
  if constexpr (std::is_same<T, float>::value && std::is_same<SA, float>::value && std::is_same<SB, float>::value) {
    if (gemm_narrow_f32(M, N, K, a, a_rs, a_cs, b, b_rs, b_cs, c, c_rs, c_cs, ep)) return;  // Note [Narrow GEMMs]
  }
  gemm_driver<T>(
      M, N, K,
      [&](T* dst, int64_t i0, int64_t mc, int64_t p0, int64_t kc, int MR) {
        pack_a_strided<T>(dst, a, a_rs, a_cs, i0, mc, p0, kc, MR);
      },
      [&](T* dst, int64_t p0, int64_t kc, int64_t j0, int64_t nc) {
        pack_b_strided<T, NR>(dst, b, b_rs, b_cs, p0, kc, j0, nc);
      },
      c, c_rs, c_cs, ep);
}

}  // namespace sb::detail

namespace sb {

void gemm(int64_t M, int64_t N, int64_t K, const float* a, int64_t a_rs, int64_t a_cs, const float* b, int64_t b_rs,
          int64_t b_cs, float* c, int64_t c_rs, int64_t c_cs, const GemmEpilogue& ep) {
  detail::gemm_strided<float, float>(M, N, K, a, a_rs, a_cs, b, b_rs, b_cs, c, c_rs, c_cs, ep);
}
void gemm(int64_t M, int64_t N, int64_t K, const float* a, int64_t a_rs, int64_t a_cs, const Half* b, int64_t b_rs,
          int64_t b_cs, float* c, int64_t c_rs, int64_t c_cs, const GemmEpilogue& ep) {
  detail::gemm_strided<float, Half>(M, N, K, a, a_rs, a_cs, b, b_rs, b_cs, c, c_rs, c_cs, ep);
}
void gemm(int64_t M, int64_t N, int64_t K, const Half* a, int64_t a_rs, int64_t a_cs, const Half* b, int64_t b_rs,
          int64_t b_cs, float* c, int64_t c_rs, int64_t c_cs, const GemmEpilogue& ep) {
  detail::gemm_strided<float, Half, Half>(M, N, K, a, a_rs, a_cs, b, b_rs, b_cs, c, c_rs, c_cs, ep);
}
void gemm(int64_t M, int64_t N, int64_t K, const double* a, int64_t a_rs, int64_t a_cs, const double* b,
          int64_t b_rs, int64_t b_cs, double* c, int64_t c_rs, int64_t c_cs, const GemmEpilogueT<double>& ep) {
  detail::gemm_strided<double, double>(M, N, K, a, a_rs, a_cs, b, b_rs, b_cs, c, c_rs, c_cs, ep);
}

size_t gemm_workspace_bytes(int64_t M, int64_t N, int64_t K, DType dtype, int threads) {
  const int nt = threads > 0 ? threads : detail::team_size();
  SB_CHECK(dtype == DType::Float32 || dtype == DType::Float64 || dtype == DType::BFloat16,
           "gemm_workspace_bytes: expected float32, float64 or bfloat16, got ", dtype);
  if (dtype == DType::BFloat16) return detail::gemm_bf16_workspace_bytes(M, N, K, nt, true);
  return dtype == DType::Float32 ? detail::gemm_workspace_bytes_t<float>(M, N, K, nt)
                                 : detail::gemm_workspace_bytes_t<double>(M, N, K, nt);
}

}  // namespace sb
