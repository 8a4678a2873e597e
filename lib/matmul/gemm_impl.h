// gemm_impl.h — internal: the packed GEMM driver shared by matmul, conv and linear.
//
// C[i, j] = epilogue(sum_k A(i, k) * B(k, j)), BLIS-style (Goto's algorithm):
//   for jc in N step NC:
//     for pc in K step KC:          B block (KC x NC) packed into NR-column panels
//       for ic in M step MC:        A block (MC x KC) packed into MR-row panels
//         for jr, ir: micro-kernel  MR x NR tile of C in registers over KC
// The operands reach the driver only through two packers, so a strided, transposed,
// column-major or stepped operand costs its packing and nothing else, and conv packs
// its implicit im2col straight from the input (no column buffer).
//   PackA: void(T* dst, int64_t i0, int64_t mc, int64_t p0, int64_t kc, int MR)
//          dst[panel][k][r] = A(i0 + panel*MR + r, p0 + k), zero past mc; MR is the
//          micro-kernel's row count, chosen at run time (tile_mr: 6 AVX2, 16 AVX-512)
//   PackB: void(T* dst, int64_t p0, int64_t kc, int64_t j0, int64_t nc)
//          dst[panel][k][c] = B(p0 + k, j0 + panel*NR + c), zero past nc
// Workspace (Note [GEMM workspace]): one B block (KC x NC, rounded to NR) and one A
// block (MC x KC) per thread, taken from cpu_allocator() for the call and given back
// at its end, so the allocator statistics count it: gemm_workspace_bytes() says how much.
// Threads: sb::parallel_for over a team of get_num_threads() (1 inside a parallel
// region), each owning a stripe of C (see GemmPlan).
// Cost: 2*M*N*K flop; packing reads A ceil(N/NC) times and B once.
#pragma once
#ifdef SB_HAVE_AVX2
#include <immintrin.h>
#endif

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "stridebench/allocator.h"
#include "stridebench/cpu_features.h"
#include "stridebench/parallel.h"
#include "stridebench/matmul.h"
#include "core/transpose_tile.h"

namespace sb::detail {

constexpr int kMRf = 6, kNRf = 16;     // float32 register tile: 12 ymm accumulators (AVX2, scalar)
constexpr int kMRf512 = 16;            // float32 AVX-512 tile 16x16: 16 zmm accumulators
constexpr int kMRw = 12, kNRw = 32;    // the wide AVX-512 tile 12x32: 24 zmm accumulators
constexpr int kMRt = 32, kNRt = 32;    // the bfloat16 AMX kernel: 2x2 tiles of 16x16 (its own tile buffer)
constexpr int kMRmax = 16;             // the largest MR of the paths that use kTileMax
constexpr int kTileMax = kMRw * kNRw;  // floats in the largest tile buffer (>= 16 x 16)
constexpr int kMRd = 4, kNRd = 8;      // float64 tile (scalar/auto-vectorised path)
// The block sizes KC, MC and NC come from cpu_tuning() (Note [Tuning by
// microarchitecture] in cpu_features.h): KC deep enough that the C tile's load and store
// happen rarely, MC x KC an A block that stays in L2, KC x NC a B block in L2 or L3.

// RAII workspace from the current CPU allocator (counted in its statistics).
class Workspace {
 public:
  explicit Workspace(size_t nbytes) : alloc_(cpu_allocator()), n_(nbytes), p_(n_ ? alloc_->allocate(n_) : nullptr) {}
  ~Workspace() { if (p_) alloc_->deallocate(p_, n_); }
  Workspace(const Workspace&) = delete;
  Workspace& operator=(const Workspace&) = delete;
  template <typename T> T* as() const { return static_cast<T*>(p_); }
 private:
  Allocator* alloc_;
  size_t n_;
  void* p_;
};

// Runs body(t) for t in [0, nt) on up to nt threads (serially when fewer exist).
template <typename F>
void run_team(int nt, const F& body) {
  if (nt <= 1) { body(0); return; }
  parallel_for(0, nt, 1, [&](int64_t b, int64_t e) { for (int64_t t = b; t < e; ++t) body(static_cast<int>(t)); });
}

inline int team_size() { return in_parallel_region() ? 1 : std::max(1, get_num_threads()); }

// Note [Fused relu and NaN]
// A fused relu (GEMM, conv and Linear epilogues, every SIMD level, CPU and our CUDA
// kernels) is the elementwise relu: max(0, v) with NaN kept, as PyTorch's relu after the
// op. So the vector forms are max_ps(zero, v), which returns its second operand when
// either is NaN, and the scalar ones v < 0 ? 0 : v; max_ps(v, zero) and v > 0 ? v : 0
// would turn NaN into 0 (tests: ConvOnDevice.FusedReluPropagatesNaN,
// Gemm.FusedReluPropagatesNaN, Linear.FusedReluPropagatesNaN, CudaLinear's twin).
// cuBLASLt's RELU epilogue does not keep NaN in every kernel, so the CUDA Linear
// takes only its bias (Note [Linear epilogue in cuBLASLt] in quant/quant.cu); cuDNN's
// fused relu keeps it (ConvOnDevice.FusedReluPropagatesNaN/cuda0 on the H100).

// tile (mr x nr, row-major with ld NR) -> C with the epilogue. first/last: the first
// and last KC block of the sum (beta applies on the first, bias/relu on the last).
template <typename T, int NR>
void store_tile(const T* tile, T* c, int64_t c_rs, int64_t c_cs, int mr, int nr, const GemmEpilogueT<T>& ep,
                bool first, bool last, int64_t i0, int64_t j0);
// float32 micro-kernels: tile[r*16 + c] = sum_k a[k*MR + r] * b[k*16 + c] (MR 6; 16 for AVX-512)
void ukernel_f32_avx2(int64_t kc, const float* a, const float* b, float* tile);
void ukernel_f32_avx512(int64_t kc, const float* a, const float* b, float* tile);
void ukernel_f32_scalar(int64_t kc, const float* a, const float* b, float* tile);
// AVX-512 16x16 tile stored straight into C (unit column stride) with the epilogue,
// as store_tile would (Note [Fused C store] in gemm_kernel.cpp).
void ukernel_f32_avx512_c(int64_t kc, const float* a, const float* b, float* c, int64_t c_rs, const GemmEpilogue& ep,
                          bool first, bool last, int64_t i0, int64_t j0);
void ukernel_f64(int64_t kc, const double* a, const double* b, double* tile);
// Note [Wide tile]: A in 12-row panels; B's panel at b and, when two, the next at
// b + 16 * kc. tile: the 12x16 left half, then the right half (ld 16 each); only its
// first mr rows are computed and written (Note [Short wide tiles] in gemm_kernel.cpp).
void ukernel_f32_wide(int64_t kc, const float* a, const float* b, bool two, int mr, float* tile);
// The full 12x32 tile straight into C (unit column stride) with the epilogue.
void ukernel_f32_wide_c(int64_t kc, const float* a, const float* b, float* c, int64_t c_rs, const GemmEpilogue& ep,
                        bool first, bool last, int64_t i0, int64_t j0);

// Note [Wide tile]
// The 16x16 AVX-512 tile loads one B vector and broadcasts 16 A values per k step: 17
// loads for 16 FMAs. A core that issues a 512-bit FMA in two halves (Zen 4) waits on its
// FMAs, but one with two full-width 512-bit FMA pipes (Zen 5's server cores) issues two a
// cycle and the loads hold it back. The wide tile, 12 rows x 32 columns, reads two B
// vectors and 12 broadcasts per 24 FMAs (0.58 loads per FMA). Its 32 columns are two of
// the packed 16-column B panels side by side (the second 16 * ks elements after the
// first), so the packers and the B layout stay one; a 16-column remainder runs a 12x16
// tile. cpu_tuning().gemm_tile_cols picks it per design (16 or 32).
inline bool wide_tile() { return use_avx512() && cpu_tuning().gemm_tile_cols == 32; }

#ifdef SB_HAVE_AVX2
// The per-column bias of a 16-column tile from column j0 as two 8-float vectors (the
// AVX2 epilogues of store_tile and store_tile_bf16), any bias stride; zeros when `on`
// is false.
inline void col_bias_pair(const GemmEpilogue& ep, int64_t j0, bool on, __m256& b0, __m256& b1) {
  b0 = b1 = _mm256_setzero_ps();
  if (on && ep.bias_stride == 1) {
    b0 = _mm256_loadu_ps(ep.bias + j0);
    b1 = _mm256_loadu_ps(ep.bias + j0 + 8);
  } else if (on) {
    alignas(32) float tmp[16];
    for (int q = 0; q < 16; ++q) tmp[q] = ep.bias[(j0 + q) * ep.bias_stride];
    b0 = _mm256_load_ps(tmp);
    b1 = _mm256_load_ps(tmp + 8);
  }
}
#endif

#if defined(SB_HAVE_AVX2) && defined(SB_HAVE_AVX512)
// The per-column bias of a register tile's NP 16-column vectors from column j0, any
// bias stride; zeros when `on` is false.
template <int NP>
__attribute__((target("avx512f"), always_inline)) inline void col_bias_vectors(const GemmEpilogue& ep, int64_t j0,
                                                                               bool on, __m512 (&cb)[NP]) {
#pragma GCC unroll 2
  for (int q = 0; q < NP; ++q) {
    cb[q] = _mm512_setzero_ps();
    if (on && ep.bias_stride == 1) {
      cb[q] = _mm512_loadu_ps(ep.bias + j0 + q * 16);
    } else if (on) {
      alignas(64) float tmp[16];
      for (int x = 0; x < 16; ++x) tmp[x] = ep.bias[(j0 + q * 16 + x) * ep.bias_stride];
      cb[q] = _mm512_load_ps(tmp);
    }
  }
}

// The epilogue of a tile kept in registers, MR rows of NP 16-float vectors (acc[r*NP + q]),
// into a float32 C with unit column stride (Note [Fused C store]): alpha, then beta x C
// on the first KC block or C's partial sum on the others, then bias and relu on the last.
template <int MR, int NP>
__attribute__((target("avx512f"), always_inline)) inline void store_acc_tile(const __m512* acc, float* c, int64_t c_rs,
                                                                             const GemmEpilogue& ep, bool first,
                                                                             bool last, int64_t i0, int64_t j0) {
  const __m512 alpha = _mm512_set1_ps(ep.alpha), zero = _mm512_setzero_ps();
  const bool read_c = !first || ep.beta != 0.0f;
  const __m512 cmul = first ? _mm512_set1_ps(ep.beta) : _mm512_set1_ps(1.0f);
  const bool col_bias = last && ep.bias && !ep.bias_per_row, row_bias = last && ep.bias && ep.bias_per_row;
  __m512 cb[NP];
  col_bias_vectors<NP>(ep, j0, col_bias, cb);
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r) {  // unrolled: constant indices keep acc in registers
#pragma GCC unroll 2
    for (int q = 0; q < NP; ++q) {
      float* cr = c + r * c_rs + q * kNRf;
      __m512 v = _mm512_mul_ps(alpha, acc[r * NP + q]);
      if (read_c) v = _mm512_fmadd_ps(cmul, _mm512_loadu_ps(cr), v);
      if (last) {
        if (col_bias) v = _mm512_add_ps(v, cb[q]);
        if (row_bias) v = _mm512_add_ps(v, _mm512_set1_ps(ep.bias[(i0 + r) * ep.bias_stride]));
        if (ep.relu) v = _mm512_mask_max_ps(v, 0xFFFF, zero, v);  // NaN stays; not _mm512_max_ps: GCC 12 -Wmaybe-uninitialized false positive
      }
      _mm512_storeu_ps(cr, v);
    }
  }
}
#endif

template <typename T>
struct Tile;
template <> struct Tile<float> { static constexpr int MR = kMRf, NR = kNRf; };
template <> struct Tile<double> { static constexpr int MR = kMRd, NR = kNRd; };

// The micro-kernel's row count on the current SIMD level.
template <typename T>
inline int tile_mr() {
  if constexpr (std::is_same<T, float>::value) return use_avx512() ? (wide_tile() ? kMRw : kMRf512) : kMRf;
  return Tile<T>::MR;
}
// The columns one tile call covers for a tile of MR rows: 32 for the wide tile and the
// bfloat16 AMX block (two B panels), else the B panel's NR.
template <typename T>
inline int tile_cols(int MR) {
  if (!std::is_same<T, float>::value) return Tile<T>::NR;
  return MR == kMRw ? kNRw : MR == kMRt ? kNRt : Tile<T>::NR;
}

inline int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

// Note [KC on Zen 4]
// The depth of a packed block (KC) bounds how many k steps a micro-kernel call runs
// between loading and storing its C tile. On Zen 4 (32 KiB L1d, 1 MiB L2, the 16x16
// AVX-512 tile) KC = 512 ran faster than 256, although a 16 x 512 A micro-panel and a
// 512 x 16 B micro-panel no longer fit L1 together; shallower was slower and deeper no
// better (the sweep: docs/notes/gemm.md, "KC on Zen 4"). Sapphire Rapids keeps 256,
// where it was measured. Each design's row is in cpu_features.cpp.
inline int64_t kc_block() { return cpu_tuning().gemm_kc; }

// Threads split C into independent stripes, one per thread, each running the whole
// serial loop nest with its own A and B buffers: one parallel region per call and no
// barrier (a shared packed B with a barrier per KC block was measured slower on this
// loaded 2-core machine: docs/notes/gemm.md). The stripes cut N when M <= N (A, M x K,
// is then packed by every thread) and M otherwise (B packed by every thread).
struct GemmPlan {
  int team;               // threads used
  bool split_n;
  int64_t chunk;          // rows (split M) or columns (split N) per thread
  int64_t kc, mc, nc;     // block sizes
};

template <typename T>
GemmPlan plan_gemm(int64_t M, int64_t N, int64_t K, int nt, int MR, int64_t kcb = kc_block(), int64_t mcb = 0) {
  const int NR = tile_cols<T>(MR);  // stripes and N blocks in whole tiles
  GemmPlan p;
  p.split_n = M <= N;
  const int64_t units = p.split_n ? (N + NR - 1) / NR : (M + MR - 1) / MR;
  p.team = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(nt, units)));
  p.chunk = (units + p.team - 1) / p.team * (p.split_n ? NR : MR);
  const int64_t m_own = p.split_n ? M : p.chunk, n_own = p.split_n ? p.chunk : N;
  const int64_t kb = std::max<int64_t>(1, (K + kcb - 1) / kcb);  // balanced KC blocks: no short tail
  p.kc = std::max<int64_t>(1, (K + kb - 1) / kb);
  const int64_t NC = cpu_tuning().gemm_nc, MC = mcb > 0 ? mcb : cpu_tuning().gemm_mc;
  const int64_t nb = std::max<int64_t>(1, (n_own + NC - 1) / NC);  // balanced N blocks
  p.nc = std::max<int64_t>(NR, round_up((n_own + nb - 1) / nb, NR));
  const int64_t mb = std::max<int64_t>(1, (m_own + MC - 1) / MC);  // balanced M blocks
  p.mc = std::max<int64_t>(MR, round_up((m_own + mb - 1) / mb, MR));
  return p;
}

// Elements of one thread's buffers, each rounded to 64 bytes so the packed B panels
// stay aligned for the micro-kernel's aligned loads.
inline int64_t thread_ws_elems(const GemmPlan& p) { return round_up(p.kc * p.nc, 16) + round_up(p.mc * p.kc, 16); }

// The bfloat16 GEMM's workspace (gemm_bf16.cpp), with a bfloat16 or a float32 C.
size_t gemm_bf16_workspace_bytes(int64_t M, int64_t N, int64_t K, int nt, bool c_bf16);

// Note [Narrow GEMMs]
// A float32 GEMM of at most 64 columns and many rows (the im2col GEMM of a conv to 16-64
// channels, 25088x576x64) spends much of its time packing A in the Goto nest: each
// packed element feeds only ceil(N/16) FMA instructions, so the packing (a transpose
// into MR-row panels, one read from memory and one write) weighs heavily beside the
// FMAs it feeds, and with K split into KC blocks C goes through the caches once per
// block. On the AVX512 level such a GEMM with unit-stride rows of A (a_cs == 1) and of C
// takes its own path instead (gemm_narrow_f32): B packed once, whole K deep and 16 NP
// columns wide (NP = 1-4 panels, zero-padded, at most 2048 x 64 floats: in L2), and MR x
// 16 NP tiles (8 x 16, 12 x 32, 8 x 48, 6 x 64) that broadcast A straight from its rows
// over all of K, each row prefetched every 16 k steps into L1 a few lines ahead and into
// L2 a page ahead (past its end: the next rows; with the hardware's prefetch alone, or
// the L1 one alone, the row's time moved with where A's pages fell from one process to
// the next): A is read once, from memory, while the FMAs run, and C is written once.
// The last M % MR rows go through a zero-padded copy. Rows are split between threads in
// whole tiles. Its workspace (packed B plus each thread's tail rows) and the Goto nest's
// are reported as the larger of the two for such a shape (gemm_workspace_bytes),
// whichever path the strides take, and both paths allocate exactly that.
constexpr int64_t kNarrowMaxN = 64, kNarrowMinM = 64, kNarrowMaxK = 2048;
inline bool narrow_shape(int64_t M, int64_t N, int64_t K) {
  return use_avx512() && N >= 1 && N <= kNarrowMaxN && M >= kNarrowMinM && K >= 1 && K <= kNarrowMaxK;
}
inline int narrow_panels(int64_t N) { return static_cast<int>((N + 15) / 16); }
constexpr int kNarrowMR[5] = {0, 8, 12, 8, 6};  // rows a tile, by panels: 8, 24, 24, 24 accumulators
inline int narrow_mr(int64_t N) { return kNarrowMR[narrow_panels(N)]; }
inline int narrow_team(int64_t M, int64_t N, int nt) {
  return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(nt, (M + narrow_mr(N) - 1) / narrow_mr(N))));
}
inline int64_t narrow_ws_elems(int64_t M, int64_t N, int64_t K, int nt) {
  return round_up(K * 16 * narrow_panels(N), 16) + narrow_team(M, N, nt) * round_up(narrow_mr(N) * K, 16);
}
// C = A B (+ the epilogue) through Note [Narrow GEMMs] when the shape and strides allow;
// false (nothing done) otherwise.
bool gemm_narrow_f32(int64_t M, int64_t N, int64_t K, const float* a, int64_t a_rs, int64_t a_cs, const float* b,
                     int64_t b_rs, int64_t b_cs, float* c, int64_t c_rs, int64_t c_cs, const GemmEpilogue& ep);

template <typename T>
size_t gemm_workspace_bytes_t(int64_t M, int64_t N, int64_t K, int nt) {
  if (M <= 0 || N <= 0 || K <= 0) return 0;
  const GemmPlan p = plan_gemm<T>(M, N, K, nt, tile_mr<T>());
  int64_t elems = p.team * thread_ws_elems(p);
  if (std::is_same<T, float>::value && narrow_shape(M, N, K))
    elems = std::max(elems, narrow_ws_elems(M, N, K, nt));
  return sizeof(T) * static_cast<size_t>(elems);
}

// One thread's stripe of C, rows [m0, m1) x columns [n0, n1), through Goto's loop nest:
// B blocks packed by pack_b(bbuf, pc, kc, jc, nc), A blocks by pack_a(abuf, ic, mc, pc,
// kc, MR), then tile(ap, bp, kc, i, j, mr, nr, first, last) for each MR x NR tile of C at
// (i, j), ap and bp its packed micro-panels. A packed k step holds KP elements of k
// (1; 2 for the bfloat16 pairs of vdpbf16ps), so a micro-panel of depth kc takes
// ceil(kc / KP) steps of MR (NR) packed elements P, rounded up to a multiple of KS (the
// AMX tiles' 16 steps; the packers write zeros there). Every GEMM of the library runs
// this nest; only its packers and tile function differ.
template <typename P, int KP, int KS = 1, typename PackA, typename PackB, typename TileFn>
inline void gemm_stripe(const GemmPlan& p, int MR, int NR, int64_t K, int64_t m0, int64_t m1, int64_t n0, int64_t n1,
                        P* bbuf, P* abuf, const PackA& pack_a, const PackB& pack_b, const TileFn& tile) {
  for (int64_t jc = n0; jc < n1; jc += p.nc) {
    const int64_t nc = std::min(p.nc, n1 - jc);
    for (int64_t pc = 0; pc < K; pc += p.kc) {
      const int64_t kc = std::min(p.kc, K - pc);
      const int64_t ks = ((kc + KP - 1) / KP + KS - 1) / KS * KS;  // packed k steps
      const bool first = pc == 0, last = pc + kc >= K;
      pack_b(bbuf, pc, kc, jc, nc);
      for (int64_t ic = m0; ic < m1; ic += p.mc) {
        const int64_t mc = std::min(p.mc, m1 - ic);
        pack_a(abuf, ic, mc, pc, kc, MR);
        for (int64_t jr = 0; jr < nc; jr += NR) {
          const int nr = static_cast<int>(std::min<int64_t>(NR, nc - jr));
          const P* bp = bbuf + jr * ks;
          for (int64_t ir = 0; ir < mc; ir += MR)
            tile(abuf + ir * ks, bp, kc, ic + ir, jc + jr, static_cast<int>(std::min<int64_t>(MR, mc - ir)), nr, first,
                 last);
        }
      }
    }
  }
}

// A thread's stripe of C under the plan: rows [m0, m1), columns [n0, n1).
struct Stripe {
  int64_t m0, m1, n0, n1;
};
inline Stripe stripe_of(const GemmPlan& p, int t, int64_t M, int64_t N) {
  const int64_t m0 = p.split_n ? 0 : t * p.chunk, n0 = p.split_n ? t * p.chunk : 0;
  return {m0, p.split_n ? M : std::min(M, m0 + p.chunk), n0, p.split_n ? std::min(N, n0 + p.chunk) : N};
}

// The driver. c points to C(0, 0); C(i, j) at c[i*c_rs + j*c_cs].
template <typename T, typename PackA, typename PackB>
void gemm_driver(int64_t M, int64_t N, int64_t K, const PackA& pack_a, const PackB& pack_b, T* c, int64_t c_rs,
                 int64_t c_cs, const GemmEpilogueT<T>& ep) {
  constexpr int NR = Tile<T>::NR;
  const int MR = tile_mr<T>();
  if (M <= 0 || N <= 0) return;
  if (K <= 0) {  // empty sum: C = beta*C + bias, relu
    alignas(64) T zero_tile[kMRmax * NR] = {};  // store_tile reads tiles with aligned loads
    for (int64_t i = 0; i < M; i += MR)
      for (int64_t j = 0; j < N; j += NR)
        store_tile<T, NR>(zero_tile, c + i * c_rs + j * c_cs, c_rs, c_cs, static_cast<int>(std::min<int64_t>(MR, M - i)),
                          static_cast<int>(std::min<int64_t>(NR, N - j)), ep, true, true, i, j);
    return;
  }
  const GemmPlan p = plan_gemm<T>(M, N, K, team_size(), MR);
  Workspace ws(gemm_workspace_bytes_t<T>(M, N, K, team_size()));
  const bool avx2 = std::is_same<T, float>::value && use_avx2(), avx512 = MR == kMRf512, wide = MR == kMRw;
  run_team(p.team, [&](int t) {
    T* bbuf = ws.as<T>() + static_cast<int64_t>(t) * thread_ws_elems(p);
    T* abuf = bbuf + round_up(p.kc * p.nc, 16);
    alignas(64) T tile[kTileMax];
    const Stripe st = stripe_of(p, t, M, N);
    gemm_stripe<T, 1>(p, MR, tile_cols<T>(MR), K, st.m0, st.m1, st.n0, st.n1, bbuf, abuf, pack_a, pack_b,
                      [&](const T* ap, const T* bp, int64_t kc, int64_t i, int64_t j, int mr, int nr, bool first,
                          bool last) {
                        if constexpr (std::is_same<T, float>::value) {
                          if (wide) {  // Note [Wide tile]: two 16-column panels, 12x16 halves in tile
                            if (c_cs == 1 && nr == kNRw && mr == MR) {
                              ukernel_f32_wide_c(kc, ap, bp, c + i * c_rs + j, c_rs, ep, first, last, i, j);
                              return;
                            }
                            ukernel_f32_wide(kc, ap, bp, nr > NR, mr, tile);
                            store_tile<T, NR>(tile, c + i * c_rs + j * c_cs, c_rs, c_cs, mr, std::min(nr, NR), ep,
                                              first, last, i, j);
                            if (nr > NR)
                              store_tile<T, NR>(tile + kMRw * NR, c + i * c_rs + (j + NR) * c_cs, c_rs, c_cs, mr,
                                                nr - NR, ep, first, last, i, j + NR);
                            return;
                          }
                          if (avx512 && c_cs == 1 && nr == NR && mr == MR) {
                            ukernel_f32_avx512_c(kc, ap, bp, c + i * c_rs + j, c_rs, ep, first, last, i, j);
                            return;
                          }
                          if (avx512) ukernel_f32_avx512(kc, ap, bp, tile);
                          else if (avx2) ukernel_f32_avx2(kc, ap, bp, tile);
                          else ukernel_f32_scalar(kc, ap, bp, tile);
                        } else {
                          ukernel_f64(kc, ap, bp, tile);
                        }
                        store_tile<T, NR>(tile, c + i * c_rs + j * c_cs, c_rs, c_cs, mr, nr, ep, first, last, i, j);
                      });
  });
}

// ---- strided packers (any strides; fast loops for unit strides) ----
// The 16-bit float types, widened to float32 while packing (exactly).
template <typename S> constexpr bool kWidened = std::is_same<S, Half>::value || std::is_same<S, BFloat16>::value;
// out[i] = p[i * s] as float, i < n (F16C or bfloat16 shifts for unit strides).
void widen_to_float(const Half* p, int64_t s, int64_t n, float* out);
void widen_to_float(const BFloat16* p, int64_t s, int64_t n, float* out);

// Note [Packing a transposed A]: when A's rows have unit stride (A is a .t() view, or
// CblasTrans), the elements of one k for a whole MC block are contiguous. The packer
// copies fixed-size MR-element runs (inlined moves) into the panels, kPackRows k steps
// of one panel, then the same steps of the next (the walk of Note [Packing a row-major
// B], for the same reason); so every k reads one contiguous run of the column. Panel by
// panel over all of kc, with a memcpy call per 64 bytes and a 4 KiB jump per k, a
// transposed A cost a tenth more than a contiguous one; k outer over every panel, a
// third more packing time than the blocks (docs/notes/gemm.md).
constexpr int kPackRows = 8;
template <typename S> inline float load_f32(const S* p) { return static_cast<float>(*p); }

// kb runs of R elements from src (runs ss apart) to dst (R apart): R a compile-time
// constant, so each run is a few inlined moves.
template <int R, typename T>
inline void copy_runs(T* dst, const T* src, int64_t ss, int64_t kb) {
  if (kb == kPackRows) {
#pragma GCC unroll 8
    for (int k = 0; k < kPackRows; ++k) std::memcpy(dst + k * R, src + k * ss, R * sizeof(T));
  } else {
    for (int64_t k = 0; k < kb; ++k) std::memcpy(dst + k * R, src + k * ss, R * sizeof(T));
  }
}

// A(i, k) = a[i*rs + k*cs]; a points to A(0, 0); MR-row panels.
template <typename T, typename S>
void pack_a_strided(T* dst, const S* a, int64_t rs, int64_t cs, int64_t i0, int64_t mc, int64_t p0, int64_t kc, int MR) {
  if constexpr (std::is_same<T, S>::value) {
    if (rs == 1 && cs != 1) {  // unit-stride columns (a transposed A): Note [Packing a transposed A]
      int64_t full = 0;  // rows in whole panels of a run length with an inlined copy
      if (MR == kMRf512 || MR == kMRw || MR == kMRf) {
        full = mc / MR * MR;
        for (int64_t k0 = 0; k0 < kc; k0 += kPackRows) {
          const int64_t kb = std::min<int64_t>(kPackRows, kc - k0);
          const S* cols = a + i0 + (p0 + k0) * cs;
          for (int64_t ip = 0; ip < full; ip += MR) {
            T* d = dst + ip * kc + k0 * MR;
            if (MR == kMRf512) copy_runs<kMRf512>(d, cols + ip, cs, kb);
            else if (MR == kMRw) copy_runs<kMRw>(d, cols + ip, cs, kb);
            else copy_runs<kMRf>(d, cols + ip, cs, kb);
          }
        }
      }
      for (int64_t ip = full; ip < mc; ip += MR) {  // the last panel, zero past mc
        const int mr = static_cast<int>(std::min<int64_t>(MR, mc - ip));
        T* d = dst + ip * kc;
        for (int64_t k = 0; k < kc; ++k, d += MR) {
          const S* col = a + i0 + (p0 + k) * cs;
          for (int r = 0; r < mr; ++r) d[r] = col[ip + r];
          for (int r = mr; r < MR; ++r) d[r] = T(0);
        }
      }
      return;
    }
  }
  if constexpr (kWidened<S>) {
    if (rs == 1 && cs != 1) {  // unit-stride columns, widened MR at a time (Note [Packing a transposed A])
      for (int64_t k = 0; k < kc; ++k) {
        const S* col = a + i0 + (p0 + k) * cs;
        T* d = dst + k * MR;
        for (int64_t ip = 0; ip < mc; ip += MR, d += MR * kc) {
          const int mr = static_cast<int>(std::min<int64_t>(MR, mc - ip));
          widen_to_float(col + ip, 1, mr, d);
          for (int r = mr; r < MR; ++r) d[r] = T(0);
        }
      }
      return;
    }
  }
  for (int64_t ip = 0; ip < mc; ip += MR, dst += MR * kc) {
    const int mr = static_cast<int>(std::min<int64_t>(MR, mc - ip));
#ifdef SB_HAVE_AVX2
    if constexpr (kWidened<S>) {
      if (cs == 1 && use_avx2()) {  // unit-stride rows: widened 256 k at a time, then 8x8 transposes
        alignas(32) float rows[kMRmax * 256];
        for (int64_t k0 = 0; k0 < kc; k0 += 256) {
          const int64_t n = std::min<int64_t>(256, kc - k0);
          for (int r = 0; r < mr; ++r) widen_to_float(a + (i0 + ip + r) * rs + p0 + k0, 1, n, rows + r * 256);
          transpose_tile_f32(dst + k0 * MR, MR, rows, 256, n, mr);
        }
        for (int r = mr; r < MR; ++r)
          for (int64_t k = 0; k < kc; ++k) dst[k * MR + r] = T(0);
        continue;
      }
    }
    if constexpr (std::is_same<T, float>::value && std::is_same<S, float>::value) {
      if (cs == 1 && use_avx2()) {  // unit-stride rows: 8x8 transposes into the MR-interleaved panel
        transpose_tile_f32(dst, MR, a + (i0 + ip) * rs + p0, rs, kc, mr);
        for (int r = mr; r < MR; ++r)
          for (int64_t k = 0; k < kc; ++k) dst[k * MR + r] = T(0);
        continue;
      }
    }
#endif
    for (int r = 0; r < mr; ++r) {
      const S* row = a + (i0 + ip + r) * rs + p0 * cs;
      if (cs == 1) for (int64_t k = 0; k < kc; ++k) dst[k * MR + r] = static_cast<T>(row[k]);
      else for (int64_t k = 0; k < kc; ++k) dst[k * MR + r] = static_cast<T>(row[k * cs]);
    }
    for (int r = mr; r < MR; ++r)
      for (int64_t k = 0; k < kc; ++k) dst[k * MR + r] = T(0);
  }
}

// B(k, j) = b[k*rs + j*cs]; b points to B(0, 0). S may be Half or BFloat16 (widened while packing).
template <typename T, int NR, typename S>
void pack_b_strided(T* dst, const S* b, int64_t rs, int64_t cs, int64_t p0, int64_t kc, int64_t j0, int64_t nc);

}  // namespace sb::detail
