// gemm_bf16.cpp — the bfloat16 GEMM: bfloat16 A and B, float32 accumulation, C in
// bfloat16 (matmul) or float32 (Linear), on gemm_impl.h's loop nest (gemm_stripe).
//
//   tiles   where use_amx_bf16(): 32x32 blocks of C in AMX tiles, tdpbf16ps (Note
//           [bfloat16 GEMM in AMX tiles]).
//   pairs   where use_avx512_bf16() otherwise: A and B packed as bfloat16 pairs along k (one
//           32-bit word holds A(i, 2p), A(i, 2p+1); likewise B(2p, j), B(2p+1, j)), a
//           16x16 float32 tile in 16 zmm accumulators, per pair step 1 load of B, 16
//           broadcasts of A, 16 vdpbf16ps (512 MACs: twice the float32 kernel's per
//           instruction); or the wide 12x32 tile of Note [Wide tile] (two B panels, 24
//           accumulators) where the design takes it. KC twice the float32 one: the same
//           bytes per panel.
//   widened everywhere else: A and B widened to float32 while packing (exact), the
//           float32 micro-kernels of the level (16x16 AVX-512, 6x16 AVX2, scalar).
// Both round each product exactly (a bfloat16 product fits a float32) and add in
// float32; vdpbf16ps adds the pair's two products one after the other with subnormals
// flushed (Note [bfloat16 NaN and subnormals]), the FMA kernels one product at a time.
// Note [bfloat16 C]: C is rounded to bfloat16 once, after the last KC block. With more
// than one KC block the partial sums of a thread's stripe wait in a float32 buffer
// (stripe rows x NC), which takes the read and write of C that the float32 GEMM does in
// C itself; a float32 C takes them in place, as the float32 GEMM does.
// Cost: 2*M*N*K flop; A and B read as bfloat16 (A ceil(N/NC) times), C written once.
#ifdef SB_HAVE_AVX2
#include <immintrin.h>
#endif

#include <cstdint>
#include <cstring>

#include <algorithm>
#include <atomic>
#include <type_traits>

#include "core/test_hooks.h"
#include "core/vec.h"
#include "matmul/gemm_impl.h"

namespace sb::detail {

namespace {

constexpr int kMRp = 16, kNRp = 16;  // the pair kernel's tile (kMRw rows for the wide tile)

std::atomic<int> g_pairs_mode{-1};  // test_hooks.h set_bf16_gemm_pairs

// The kernels, by what they pack: AMX tiles, vdpbf16ps pairs, or operands widened.
enum class Bf16Path { Widened, Pairs, Tiles };
// The tiles where the CPU has AMX, the pairs where it has vdpbf16ps (or a test forces
// either: then its scalar stand-in runs where the CPU lacks it).
Bf16Path bf16_path() {
  const int m = g_pairs_mode.load(std::memory_order_relaxed);
  if (m < 0) return use_amx_bf16() ? Bf16Path::Tiles : use_avx512_bf16() ? Bf16Path::Pairs : Bf16Path::Widened;
  return m == 2 ? Bf16Path::Tiles : m == 1 ? Bf16Path::Pairs : Bf16Path::Widened;
}

inline uint32_t pair(BFloat16 lo, BFloat16 hi) { return static_cast<uint32_t>(lo.bits) | (static_cast<uint32_t>(hi.bits) << 16); }

// 4-byte aligned, for reading bfloat16 pairs as 32-bit words
inline bool word_aligned(const void* p) { return reinterpret_cast<uintptr_t>(p) % 4 == 0; }

#ifdef SB_HAVE_AVX2
// 16 columns of rows x0 and x1 (16 bfloat16 each) as 16 pairs (x0[c], x1[c]), in order.
inline void interleave16(uint32_t* d, __m256i x0, __m256i x1) {
  const __m256i lo = _mm256_unpacklo_epi16(x0, x1), hi = _mm256_unpackhi_epi16(x0, x1);  // c0-3 c8-11 | c4-7 c12-15
  _mm256_store_si256(reinterpret_cast<__m256i*>(d), _mm256_permute2x128_si256(lo, hi, 0x20));
  _mm256_store_si256(reinterpret_cast<__m256i*>(d + 8), _mm256_permute2x128_si256(lo, hi, 0x31));
}
#endif

#if defined(SB_HAVE_AVX2) && defined(SB_HAVE_AVX512)
// Note [Two B panels in zmm]: rows of B (unit column stride) pack two 16-column panels
// per pair step from one 64-byte load of each row: the word unpacks interleave rows 2p
// and 2p + 1 within each 128-bit lane, and one two-source qword permute a panel puts
// its four lanes in column order. Half the instructions of interleave16 per pair.
__attribute__((target("avx512f,avx512bw"))) void interleave32_rows(uint32_t* d0, uint32_t* d1, const BFloat16* b0,
                                                                    int64_t rs, int64_t steps) {
  const __m512i i0 = _mm512_setr_epi64(0, 1, 8, 9, 2, 3, 10, 11), i1 = _mm512_setr_epi64(4, 5, 12, 13, 6, 7, 14, 15);
  for (int64_t p = 0; p < steps; ++p) {
    const __m512i x0 = _mm512_loadu_si512(b0 + 2 * p * rs), x1 = _mm512_loadu_si512(b0 + (2 * p + 1) * rs);
    const __m512i lo = _mm512_unpacklo_epi16(x0, x1), hi = _mm512_unpackhi_epi16(x0, x1);  // per lane: c0-3 | c4-7
    _mm512_storeu_si512(d0 + p * kNRp, _mm512_permutex2var_epi64(lo, i0, hi));
    _mm512_storeu_si512(d1 + p * kNRp, _mm512_permutex2var_epi64(lo, i1, hi));
  }
}

// Note [Packing a transposed bfloat16 A]: where A's columns have unit stride (a .t()
// view), pair step p of a panel is rows 2p and 2p + 1 of memory, side by side: widened
// to 32-bit lanes, the second shifted into the high half, stored as MR words. The
// masked loads read only a panel's mr elements and give zeros past them, the panel's
// padding. It serves the wide tile's 12-row panels, which were packed a pair at a time;
// 16-row panels keep their AVX2 interleave, as measured on Zen 4 (the one design whose
// bfloat16 GEMM takes them). The walk takes kPackSteps steps of every panel before the
// next steps: panel by panel over all of kc, a panel's column walk (rows a power of two
// apart) left the L1 before the next panel read the rest of its lines; step by step
// over every panel, the panels' partial lines (a multiple of 4 KiB apart) left it
// before they were whole (docs/notes/gemm.md).
constexpr int64_t kPackSteps = 16;
__attribute__((target("avx2,avx512f,avx512vl,avx512bw"))) void pack_a_columns_zmm(uint32_t* dst, const BFloat16* a0,
                                                                                   int64_t cs, int64_t mc, int64_t ks,
                                                                                   int64_t steps, int MR) {
  const __mmask16 out = static_cast<__mmask16>((1u << MR) - 1);
  for (int64_t q = 0; q < steps; q += kPackSteps) {
    const int64_t qe = std::min(steps, q + kPackSteps);
    for (int64_t ip = 0; ip < mc; ip += MR) {
      const __mmask16 in = static_cast<__mmask16>((1u << std::min<int64_t>(MR, mc - ip)) - 1);
      for (int64_t p = q; p < qe; ++p) {
        const BFloat16* r0 = a0 + 2 * p * cs + ip;
        // the maskz forms: GCC 12 warns of the unmasked ones' undefined source (as vec.h)
        const __m512i lo = _mm512_maskz_cvtepu16_epi32(in, _mm256_maskz_loadu_epi16(in, r0));
        const __m512i hi = _mm512_maskz_cvtepu16_epi32(in, _mm256_maskz_loadu_epi16(in, r0 + cs));
        _mm512_mask_storeu_epi32(dst + ip * ks + p * MR, out, _mm512_or_si512(lo, _mm512_maskz_slli_epi32(in, hi, 16)));
      }
    }
  }
}
#endif

// dst[panel][p][r] = (A(i0 + panel*MR + r, p0 + 2p), A(.., p0 + 2p + 1)), zero past mc and kc.
void pack_a_pairs(uint32_t* dst, const BFloat16* a, int64_t rs, int64_t cs, int64_t i0, int64_t mc, int64_t p0,
                  int64_t kc, int MR) {
  const int64_t ks = (kc + 1) / 2;
  [[maybe_unused]] const int64_t full = kc / 2;  // pair steps with both elements (the fast paths)
  bool columns = false;  // every panel's full steps packed at once (Note [Packing a transposed bfloat16 A])
#if defined(SB_HAVE_AVX2) && defined(SB_HAVE_AVX512)
  if (rs == 1 && cs != 1 && MR < kMRp && use_avx512()) {
    pack_a_columns_zmm(dst, a + i0 + p0 * cs, cs, mc, ks, full, MR);
    columns = true;
  }
#endif
  for (int64_t ip = 0; ip < mc; ip += MR, dst += MR * ks) {
    const int mr = static_cast<int>(std::min<int64_t>(MR, mc - ip));
    const BFloat16* a0 = a + (i0 + ip) * rs + p0 * cs;
    int64_t done = columns ? full : 0;  // pair steps packed by a fast path
#ifdef SB_HAVE_AVX2
    if (columns) {  // packed above, but for an odd kc's last step
    } else if (cs == 1 && rs % 2 == 0 && word_aligned(a0)) {  // rows: the pairs are 32-bit words, a 32-bit transpose
      transpose_tile_f32(reinterpret_cast<float*>(dst), MR, reinterpret_cast<const float*>(a0), rs / 2, full, mr);
      done = full;
    } else if (rs == 1 && cs != 1 && mr == kMRp && MR == kMRp) {  // columns: two of 16 interleaved per step
      for (; done < full; ++done)
        interleave16(dst + done * kMRp, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a0 + 2 * done * cs)),
                     _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a0 + (2 * done + 1) * cs)));
    }
#endif
    for (int64_t p = 0; p < ks; ++p) {
      uint32_t* d = dst + p * MR;
      for (int r = 0; r < mr && p >= done; ++r) {
        const BFloat16* e = a0 + r * rs + 2 * p * cs;
        d[r] = pair(e[0], 2 * p + 1 < kc ? e[cs] : BFloat16());
      }
      for (int r = mr; r < MR; ++r) d[r] = 0;
    }
  }
}

// dst[panel][p][c] = (B(p0 + 2p, j0 + panel*16 + c), B(p0 + 2p + 1, ..)), zero past nc and
// kc; panels of max(ceil(kc / 2), kst) pair steps (the AMX tiles' whole chunks).
void pack_b_pairs(uint32_t* dst, const BFloat16* b, int64_t rs, int64_t cs, int64_t p0, int64_t kc, int64_t j0,
                  int64_t nc, int64_t kst = 0) {
  const int64_t ks = (kc + 1) / 2;
  kst = std::max(ks, kst);
  [[maybe_unused]] const int64_t full = kc / 2;  // pair steps with both elements (the fast paths)
  int64_t zmm_cols = 0;  // columns whose full pair steps Note [Two B panels in zmm] packed
#if defined(SB_HAVE_AVX2) && defined(SB_HAVE_AVX512)
  if (cs == 1 && use_avx512()) {
    zmm_cols = nc / (2 * kNRp) * (2 * kNRp);
    for (int64_t jp = 0; jp < zmm_cols; jp += 2 * kNRp)
      interleave32_rows(dst + jp * kst, dst + (jp + kNRp) * kst, b + p0 * rs + j0 + jp, rs, full);
  }
#endif
  for (int64_t jp = 0; jp < nc; jp += kNRp, dst += kNRp * kst) {
    const int nr = static_cast<int>(std::min<int64_t>(kNRp, nc - jp));
    const BFloat16* b0 = b + p0 * rs + (j0 + jp) * cs;
    int64_t done = jp < zmm_cols ? full : 0;
#ifdef SB_HAVE_AVX2
    if (jp < zmm_cols) {
      // packed above, two panels at a time (Note [Two B panels in zmm])
    } else if (cs == 1 && nr == kNRp) {  // rows of B: two rows of 16 interleaved per step
      for (; done < full; ++done)
        interleave16(dst + done * kNRp, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b0 + 2 * done * rs)),
                     _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b0 + (2 * done + 1) * rs)));
    } else if (rs == 1 && cs % 2 == 0 && word_aligned(b0)) {  // columns: the pairs are 32-bit words
      float* d = reinterpret_cast<float*>(dst);
      const float* s = reinterpret_cast<const float*>(b0);
      const int64_t sB = cs / 2;
      int64_t i = 0;
      if (nr == kNRp)  // both 8x8 halves of each 8 pair steps together: each 64-byte panel row written at once
        for (; i + 8 <= full; i += 8) {
          tile8x8_f32(d + i * kNRp, kNRp, s + i, sB);
          tile8x8_f32(d + i * kNRp + 8, kNRp, s + 8 * sB + i, sB);
        }
      transpose_tile_f32(d + i * kNRp, kNRp, s + i, sB, full - i, nr);
      done = full;
    }
#endif
    for (int64_t p = 0; p < ks; ++p) {
      uint32_t* d = dst + p * kNRp;
      for (int q = 0; q < nr && p >= done; ++q) {
        const BFloat16* e = b0 + 2 * p * rs + q * cs;
        d[q] = pair(e[0], 2 * p + 1 < kc ? e[rs] : BFloat16());
      }
      for (int q = nr; q < kNRp; ++q) d[q] = 0;
    }
    std::memset(dst + kNRp * ks, 0, sizeof(uint32_t) * kNRp * (kst - ks));
  }
}

// Note [bfloat16 GEMM in AMX tiles]
// Where the CPU has AMX-BF16 (use_amx_bf16), the bfloat16 GEMM runs in tile registers:
// C in 32x32 blocks of four 16x16 float32 tiles (tmm0-3); per chunk of 16 pair steps
// (32 k) two A tiles (tmm4-5: 16 rows x 16 pairs), two B tiles (tmm6-7: 16 pair steps x
// 16 columns) and four tdpbf16ps, each 16x16x32 multiply-adds (16 cycles on Sapphire
// Rapids: 1024 flop a cycle, eight times two vdpbf16ps pipes). Every tile is 1 KiB of
// 64-byte rows:
// - B's panels are the pair kernel's (pack_b_pairs): a panel row is one pair step of 16
//   columns, as tdpbf16ps reads a B row;
// - A's are packed row by row (pack_a_tiles): per 32-row panel, chunk by chunk, 32 rows
//   of 16 pairs; the two halves are the A tiles.
// The k steps are padded with zero pairs to whole chunks (gemm_stripe's KS), rows and
// columns past C's edge are zero; a block of 16 rows or columns or fewer skips the other
// half's tiles. tdpbf16ps rounds as vdpbf16ps does (each product exact, the pair's sum
// and the accumulation in float32, subnormals flushed), so Note [bfloat16 NaN and
// subnormals] holds as it is. A whole block of a bfloat16 C keeps its partial sums in
// the tiles from one KC block to the next (stored to and loaded from the stripe's
// float32 buffer, its rows padded off a 4 KiB stride) and leaves through a 32x32 float
// buffer and the pair kernel's store (store_tile_bf16) after the last; edge blocks and a
// float32 C take that way after every KC block. KC and MC are the tuning's own
// (gemm_amx_kc, gemm_amx_mc): small enough that an A panel and a B sliver share L1,
// where the tile loads keep up (docs/notes/gemm.md, "bfloat16 in AMX tiles"). A thread
// loads the tile configuration once a GEMM and releases the tiles after its stripe.
// Where the CPU has no AMX the test hook runs the same packing and nest through a scalar
// stand-in (amx_block_scalar).
constexpr int64_t kChunkSteps = 16;                   // pair steps per tile chunk (32 k)
constexpr int64_t kChunkWords = kMRt * kChunkSteps;  // an A panel's words per chunk

// dst[panel][c][r][q] = (A(i0 + 32 * panel + r, p0 + 2 * st), A(.., p0 + 2 * st + 1)) for
// the step st = 16 * c + q;
// zero past mc and kc, chunks up to ceil(ceil(kc / 2) / 16).
void pack_a_tiles(uint32_t* dst, const BFloat16* a, int64_t rs, int64_t cs, int64_t i0, int64_t mc, int64_t p0,
                  int64_t kc) {
  const int64_t ks = (kc + 1) / 2, kst = round_up(ks, kChunkSteps);
  [[maybe_unused]] const int64_t full = kc / 2;  // pair steps with both elements (the fast paths)
  for (int64_t ip = 0; ip < mc; ip += kMRt, dst += kMRt * kst) {
    const int mr = static_cast<int>(std::min<int64_t>(kMRt, mc - ip));
    const BFloat16* a0 = a + (i0 + ip) * rs + p0 * cs;
    int64_t done = 0;  // pair steps of rows < mr packed by a fast path
#ifdef SB_HAVE_AVX2
    if (cs == 1) {  // rows: a row's pairs are consecutive 32-bit words, 64 bytes a chunk
      for (int r = 0; r < mr; ++r) {
        const BFloat16* row = a0 + r * rs;
        int64_t st = 0;
        for (; st + kChunkSteps <= full; st += kChunkSteps) {
          uint32_t* d = dst + st / kChunkSteps * kChunkWords + r * kChunkSteps;
          _mm256_store_si256(reinterpret_cast<__m256i*>(d), _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 2 * st)));
          _mm256_store_si256(reinterpret_cast<__m256i*>(d + 8), _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 2 * st + 16)));
        }
        if (st < full)
          std::memcpy(dst + st / kChunkSteps * kChunkWords + r * kChunkSteps, row + 2 * st,
                      sizeof(uint32_t) * static_cast<size_t>(full - st));
      }
      done = full;
    } else if (rs == 1 && mr == kMRt) {  // columns: 16 rows of two columns interleaved a step, then transposed
      alignas(32) uint32_t t[kChunkSteps * 16];
      for (; done + kChunkSteps <= full; done += kChunkSteps)
        for (int h = 0; h < 2; ++h) {
          const BFloat16* col = a0 + h * 16 + 2 * done * cs;
          for (int q = 0; q < kChunkSteps; ++q)
            interleave16(t + q * 16, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(col + 2 * q * cs)),
                         _mm256_loadu_si256(reinterpret_cast<const __m256i*>(col + (2 * q + 1) * cs)));
          transpose_tile_f32(reinterpret_cast<float*>(dst + done / kChunkSteps * kChunkWords + h * 16 * kChunkSteps),
                             kChunkSteps, reinterpret_cast<const float*>(t), 16, 16, kChunkSteps);
        }
    }
#endif
    for (int r = 0; r < kMRt; ++r)
      for (int64_t st = r < mr ? done : 0; st < kst; ++st) {
        uint32_t v = 0;
        if (r < mr && st < ks) {
          const BFloat16* e = a0 + r * rs + 2 * st * cs;
          v = pair(e[0], 2 * st + 1 < kc ? e[cs] : BFloat16());
        }
        dst[st / kChunkSteps * kChunkWords + r * kChunkSteps + st % kChunkSteps] = v;
      }
  }
}

// A 32x32 block of C over nch chunks: its tiles start from in (row-major, ld in_ld: the
// partial sums of the earlier KC blocks) or from zero, and go to out, tile (h, q) (rows
// 16h.., columns 16q..) at out + 16 h out_ld + q out_q: row-major partial sums (out_q
// 16), or the tile buffer the stores read (ld 16, the column halves 512 apart). two_a:
// rows 16-31 exist; two_b: columns 16-31 (the panel at b + b_panel).
struct TileIO {
  const float* in;
  int64_t in_ld;
  float* out;
  int64_t out_ld, out_q;
};
#ifdef SB_HAVE_AMX
template <bool TwoA, bool TwoB>
__attribute__((target("amx-tile,amx-bf16"))) void amx_block(int64_t nch, const uint32_t* a, const uint32_t* b,
                                                           int64_t b_panel, const TileIO& io) {
  // The tile intrinsics are asm statements that name no memory: the packed panels and
  // the partial sums must be written before the loads, read after the stores.
  __asm__ volatile("" ::: "memory");
  if (io.in) {
    const int64_t s = io.in_ld * 4, h1 = 16 * io.in_ld;
    _tile_loadd(0, io.in, s);
    if constexpr (TwoB) _tile_loadd(1, io.in + 16, s);
    if constexpr (TwoA) _tile_loadd(2, io.in + h1, s);
    if constexpr (TwoA && TwoB) _tile_loadd(3, io.in + h1 + 16, s);
  } else {
    _tile_zero(0);
    if constexpr (TwoB) _tile_zero(1);
    if constexpr (TwoA) _tile_zero(2);
    if constexpr (TwoA && TwoB) _tile_zero(3);
  }
  for (int64_t c = 0; c < nch; ++c, a += kChunkWords, b += kChunkSteps * kNRp) {
    _tile_loadd(4, a, 64);
    _tile_loadd(6, b, 64);
    _tile_dpbf16ps(0, 4, 6);
    if constexpr (TwoB) {
      _tile_loadd(7, b + b_panel, 64);
      _tile_dpbf16ps(1, 4, 7);
    }
    if constexpr (TwoA) {
      _tile_loadd(5, a + kChunkSteps * 16, 64);
      _tile_dpbf16ps(2, 5, 6);
      if constexpr (TwoB) _tile_dpbf16ps(3, 5, 7);
    }
  }
  const int64_t s = io.out_ld * 4, h1 = 16 * io.out_ld;
  _tile_stored(0, io.out, s);
  if constexpr (TwoB) _tile_stored(1, io.out + io.out_q, s);
  if constexpr (TwoA) _tile_stored(2, io.out + h1, s);
  if constexpr (TwoA && TwoB) _tile_stored(3, io.out + h1 + io.out_q, s);
  __asm__ volatile("" ::: "memory");
}
void amx_block_hw(int64_t nch, const uint32_t* a, const uint32_t* b, int64_t b_panel, bool two_a, bool two_b,
                  const TileIO& io) {
  if (two_a) two_b ? amx_block<true, true>(nch, a, b, b_panel, io) : amx_block<true, false>(nch, a, b, b_panel, io);
  else two_b ? amx_block<false, true>(nch, a, b, b_panel, io) : amx_block<false, false>(nch, a, b, b_panel, io);
}
#else
void amx_block_hw(int64_t, const uint32_t*, const uint32_t*, int64_t, bool, bool, const TileIO&) {
  SB_INTERNAL_ASSERT(false, "the bfloat16 tile kernel needs an AMX build");
}
#endif

// tdpbf16ps in plain C on the same packed chunks (the tests' stand-in on a CPU without
// AMX): per element, the low pair's product added first, then the high one's.
void amx_block_scalar(int64_t nch, const uint32_t* a, const uint32_t* b, int64_t b_panel, bool two_a, bool two_b,
                      const TileIO& io) {
  auto lo = [](uint32_t w) { return BFloat16::to_float(static_cast<uint16_t>(w)); };
  auto hi = [](uint32_t w) { return BFloat16::to_float(static_cast<uint16_t>(w >> 16)); };
  for (int h = 0; h < (two_a ? 2 : 1); ++h)
    for (int q = 0; q < (two_b ? 2 : 1); ++q) {
      float acc[16][16] = {};
      if (io.in)
        for (int r = 0; r < 16; ++r)
          for (int col = 0; col < 16; ++col) acc[r][col] = io.in[(h * 16 + r) * io.in_ld + q * 16 + col];
      for (int64_t c = 0; c < nch; ++c)
        for (int r = 0; r < 16; ++r)
          for (int s = 0; s < kChunkSteps; ++s) {
            const uint32_t x = a[c * kChunkWords + (h * 16 + r) * kChunkSteps + s];
            const uint32_t* y = b + q * b_panel + (c * kChunkSteps + s) * kNRp;
            for (int col = 0; col < 16; ++col) {
              acc[r][col] += lo(x) * lo(y[col]);
              acc[r][col] += hi(x) * hi(y[col]);
            }
          }
      for (int r = 0; r < 16; ++r)
        for (int col = 0; col < 16; ++col) io.out[(h * 16 + r) * io.out_ld + q * io.out_q + col] = acc[r][col];
    }
}

#if defined(SB_HAVE_AVX2) && defined(SB_HAVE_AVX512)
// n pair steps of an MR x 16*NP tile (vdpbf16ps) into acc: per step NP loads of B (the
// panels at b and b + b_panel), MR broadcasts of A, whose packed steps are AS pairs
// apart (AS > MR: the first rows of a wider panel, Note [Short wide tiles]).
template <int MR, int NP, int AS = MR>
__attribute__((target("avx512f,avx512bf16"), always_inline)) static inline void pair_loop(
    int64_t n, const uint32_t*& a, const uint32_t*& b, int64_t b_panel, __m512* acc) {
#pragma GCC unroll 2
  for (int64_t p = 0; p < n; ++p, a += AS, b += kNRp) {
    _mm_prefetch(reinterpret_cast<const char*>(a + 8 * AS), _MM_HINT_T0);
    __m512bh bv[NP];
#pragma GCC unroll 2
    for (int q = 0; q < NP; ++q) bv[q] = (__m512bh)_mm512_load_si512(b + q * b_panel);
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) {
      const __m512bh av = (__m512bh)_mm512_set1_epi32(static_cast<int>(a[r]));
#pragma GCC unroll 2
      for (int q = 0; q < NP; ++q) acc[r * NP + q] = _mm512_dpbf16_ps(acc[r * NP + q], av, bv[q]);
    }
  }
}

// ks pair steps into tile: the 16-column halves one after the other, AS rows of ld 16
// each, of which the first MR are computed.
template <int MR, int NP, int AS = MR>
__attribute__((target("avx512f,avx512bf16"), always_inline)) static inline void pair_steps(
    int64_t ks, const uint32_t* a, const uint32_t* b, int64_t b_panel, float* tile) {
  __m512 acc[MR * NP];
#pragma GCC unroll 32
  for (int r = 0; r < MR * NP; ++r) acc[r] = _mm512_setzero_ps();
  pair_loop<MR, NP, AS>(ks, a, b, b_panel, acc);
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r) {
#pragma GCC unroll 2
    for (int q = 0; q < NP; ++q) _mm512_store_ps(tile + (q * AS + r) * kNRp, acc[r * NP + q]);
  }
}

// tile[r*16 + c] = sum over the ks pair steps of the pair dot products, 16x16.
__attribute__((target("avx512f,avx512bf16"))) void ukernel_bf16_avx512(int64_t ks, const uint32_t* a,
                                                                        const uint32_t* b, float* tile) {
  pair_steps<kMRp, 1>(ks, a, b, 0, tile);
}
// The wide tile (Note [Wide tile]): 12 rows, two panels (b and b + 16 * ks) when two;
// the first mr rows only, in steps of 4 (Note [Short wide tiles] in gemm_kernel.cpp).
__attribute__((target("avx512f,avx512bf16"))) void ukernel_bf16_wide(int64_t ks, const uint32_t* a,
                                                                      const uint32_t* b, bool two, int mr,
                                                                      float* tile) {
  const int64_t bp = kNRp * ks;
  if (mr <= 4) two ? pair_steps<4, 2, kMRw>(ks, a, b, bp, tile) : pair_steps<4, 1, kMRw>(ks, a, b, 0, tile);
  else if (mr <= 8) two ? pair_steps<8, 2, kMRw>(ks, a, b, bp, tile) : pair_steps<8, 1, kMRw>(ks, a, b, 0, tile);
  else two ? pair_steps<kMRw, 2>(ks, a, b, bp, tile) : pair_steps<kMRw, 1>(ks, a, b, 0, tile);
}

// A full tile straight into C (unit column stride), as the float32 ones go (Note
// [Fused C store]: C's rows prefetched while the k loop runs): the wide 12x32 tile
// (MR 12, NP 2) or the 16x16 one (MR 16, NP 1). A float32 C takes the whole epilogue.
// A bfloat16 C (fused_c: beta 0) adds the partial sums of the earlier KC blocks from
// part (ld part_ld) and, before the last block, leaves its sums there (Note [bfloat16
// C]); on the last, alpha, bias and relu, rounded once.
template <typename SC, int MR, int NP>
__attribute__((target("avx512f,avx512bf16"))) void ukernel_bf16_c(int64_t ks, const uint32_t* a, const uint32_t* b,
                                                                   SC* c, int64_t c_rs, float* part, int64_t part_ld,
                                                                   const GemmEpilogue& ep, bool first, bool last,
                                                                   int64_t i0, int64_t j0) {
  constexpr bool kBf16C = std::is_same<SC, BFloat16>::value;
  constexpr int64_t kTail = 24;  // pair steps left when C is pulled into L1
  __m512 acc[MR * NP];
  // the lines this tile's store reads or writes: C's row (64 bytes of bfloat16, 128 of
  // float32) and, for a bfloat16 C after the first KC block, the partial sums' row
  auto prefetch = [&](auto hint) {
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) {
      const char* cr = reinterpret_cast<const char*>(c + r * c_rs);
      if (!kBf16C || last) _mm_prefetch(cr, decltype(hint)::value);
      if (!kBf16C) _mm_prefetch(cr + 64, decltype(hint)::value);
      if (kBf16C && !first) {  // part is null for a float32 C
        const char* pr = reinterpret_cast<const char*>(part + r * part_ld);
        _mm_prefetch(pr, decltype(hint)::value);
        _mm_prefetch(pr + 64, decltype(hint)::value);
      }
    }
  };
#pragma GCC unroll 32
  for (int r = 0; r < MR * NP; ++r) acc[r] = _mm512_setzero_ps();
  prefetch(std::integral_constant<decltype(_MM_HINT_T0), _MM_HINT_T1>());
  const int64_t head = std::max<int64_t>(0, ks - kTail);
  pair_loop<MR, NP>(head, a, b, kNRp * ks, acc);
  prefetch(std::integral_constant<decltype(_MM_HINT_T0), _MM_HINT_T0>());
  pair_loop<MR, NP>(ks - head, a, b, kNRp * ks, acc);
  if constexpr (kBf16C) {
    const __m512 alpha = _mm512_set1_ps(ep.alpha), zero = _mm512_setzero_ps();
    const bool col_bias = last && ep.bias && !ep.bias_per_row, row_bias = last && ep.bias && ep.bias_per_row;
    __m512 cb[NP];
    col_bias_vectors<NP>(ep, j0, col_bias, cb);
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) {
#pragma GCC unroll 2
      for (int q = 0; q < NP; ++q) {
        float* pr = part + r * part_ld + q * kNRp;
        __m512 v = acc[r * NP + q];
        if (!first) v = _mm512_add_ps(v, _mm512_loadu_ps(pr));
        if (!last) {
          _mm512_storeu_ps(pr, v);
          continue;
        }
        v = _mm512_mul_ps(v, alpha);  // then the bias and relu, as store_tile_bf16 (beta is 0 here)
        if (col_bias) v = _mm512_add_ps(v, cb[q]);
        if (row_bias) v = _mm512_add_ps(v, _mm512_set1_ps(ep.bias[(i0 + r) * ep.bias_stride]));
        if (ep.relu) v = _mm512_mask_max_ps(v, 0xFFFF, zero, v);  // NaN stays (Note [Fused relu and NaN])
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(c + r * c_rs + q * kNRp), (__m256i)_mm512_cvtneps_pbh(v));
      }
    }
  } else {
    store_acc_tile<MR, NP>(acc, c, c_rs, ep, first, last, i0, j0);
  }
}
#else
void ukernel_bf16_avx512(int64_t, const uint32_t*, const uint32_t*, float*) {
  SB_INTERNAL_ASSERT(false, "the bfloat16 pair kernel needs an AVX-512 build");
}
void ukernel_bf16_wide(int64_t, const uint32_t*, const uint32_t*, bool, int, float*) {
  SB_INTERNAL_ASSERT(false, "the bfloat16 pair kernel needs an AVX-512 build");
}
template <typename SC, int MR, int NP>
void ukernel_bf16_c(int64_t, const uint32_t*, const uint32_t*, SC*, int64_t, float*, int64_t, const GemmEpilogue&,
                    bool, bool, int64_t, int64_t) {
  SB_INTERNAL_ASSERT(false, "the bfloat16 pair kernel needs an AVX-512 build");
}
#endif

// vdpbf16ps in plain C on the same packed pairs (the tests' stand-in on a CPU without
// AVX512_BF16): per lane, the high pair's product added first, then the low one's, each
// product exact in float32 (the instruction also flushes subnormals; this does not).
// An MR-row panel against np 16-column panels (b and b + 16 * ks), tile as pair_steps'.
void ukernel_bf16_pairs_scalar(int64_t ks, const uint32_t* a, const uint32_t* b, int MR, int np, float* tile) {
  for (int q = 0; q < np; ++q) {
    float acc[kMRmax][kNRp] = {};
    const uint32_t* ap = a;
    const uint32_t* bp = b + q * kNRp * ks;
    for (int64_t p = 0; p < ks; ++p, ap += MR, bp += kNRp)
      for (int r = 0; r < MR; ++r)
        for (int c = 0; c < kNRp; ++c) {
          acc[r][c] += BFloat16::to_float(static_cast<uint16_t>(ap[r] >> 16)) * BFloat16::to_float(static_cast<uint16_t>(bp[c] >> 16));
          acc[r][c] += BFloat16::to_float(static_cast<uint16_t>(ap[r])) * BFloat16::to_float(static_cast<uint16_t>(bp[c]));
        }
    for (int r = 0; r < MR; ++r)
      for (int c = 0; c < kNRp; ++c) tile[(q * MR + r) * kNRp + c] = acc[r][c];
  }
}

#if defined(SB_HAVE_AVX2) && defined(SB_HAVE_AVX512)
// store_tile_bf16's full 16-column rows of a row-major C where the CPU has AVX512_BF16:
// one vector a row, the epilogue in store_tile_bf16's order, rounded by vcvtneps2bf16 as
// the pair kernel's fused store is (Note [bfloat16 NaN and subnormals]). The AMX blocks
// leave through here; the AVX2 rounding (eight instructions per 8 values) was a large
// share of the bfloat16 Linear's time (docs/notes/gemm.md, "bfloat16 C by vcvtneps2bf16").
__attribute__((target("avx512f,avx512bf16"))) void store_rows_bf16_512(const float* tile, float* acc, int64_t acc_ld,
                                                                      BFloat16* c, int64_t c_rs, int mr,
                                                                      const GemmEpilogue& ep, bool first, bool last,
                                                                      int64_t i0, int64_t j0) {
  const bool col_bias = last && ep.bias && !ep.bias_per_row, row_bias = last && ep.bias && ep.bias_per_row;
  __m512 cb[1];
  col_bias_vectors<1>(ep, j0, col_bias, cb);
  const __m512 alpha = _mm512_set1_ps(ep.alpha), beta = _mm512_set1_ps(ep.beta), zero = _mm512_setzero_ps();
  for (int r = 0; r < mr; ++r) {
    __m512 v = _mm512_load_ps(tile + r * 16);
    float* ar = acc + r * acc_ld;
    if (!first) v = _mm512_add_ps(v, _mm512_loadu_ps(ar));
    if (!last) {
      _mm512_storeu_ps(ar, v);
      continue;
    }
    BFloat16* cr = c + r * c_rs;
    v = _mm512_mul_ps(v, alpha);
    if (ep.beta != 0.0f) v = _mm512_add_ps(v, _mm512_mul_ps(beta, vec::Vec<BFloat16, 512>::load(cr)));
    if (col_bias) v = _mm512_add_ps(v, cb[0]);
    if (row_bias) v = _mm512_add_ps(v, _mm512_set1_ps(ep.bias[(i0 + r) * ep.bias_stride]));
    if (ep.relu) v = _mm512_mask_max_ps(v, 0xFFFF, zero, v);  // NaN stays (Note [Fused relu and NaN])
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(cr), (__m256i)_mm512_cvtneps_pbh(v));
  }
}
#endif

// Note [bfloat16 C]: tile (mr x nr floats, ld 16) into a bfloat16 C; acc (ld acc_ld) holds
// the sums of the earlier KC blocks.
void store_tile_bf16(const float* tile, float* acc, int64_t acc_ld, BFloat16* c, int64_t c_rs, int64_t c_cs, int mr,
                     int nr, const GemmEpilogue& ep, bool first, bool last, int64_t i0, int64_t j0) {
#if defined(SB_HAVE_AVX2) && defined(SB_HAVE_AVX512)
  if (nr == 16 && c_cs == 1 && use_avx512_bf16()) {
    store_rows_bf16_512(tile, acc, acc_ld, c, c_rs, mr, ep, first, last, i0, j0);
    return;
  }
#endif
#ifdef SB_HAVE_AVX2
  // Full 16-column rows of a row-major C in two 8-float vectors: the 16x16 tiles' case
  // (Linear's bias and the MLP's relu included); the rest element by element below.
  const bool vec_rows = nr == 16 && c_cs == 1 && use_avx2();
  const bool col_bias = vec_rows && last && ep.bias && !ep.bias_per_row;
  __m256 cb0, cb1;
  col_bias_pair(ep, j0, col_bias, cb0, cb1);
#endif
  for (int r = 0; r < mr; ++r) {
    const float* t = tile + r * 16;
    float* ar = acc + r * acc_ld;
    BFloat16* cr = c + r * c_rs;
#ifdef SB_HAVE_AVX2
    if (vec_rows) {
      using L = vec::Vec<BFloat16>;
      __m256 v0 = _mm256_load_ps(t), v1 = _mm256_load_ps(t + 8);
      if (!first) {
        v0 = _mm256_add_ps(v0, _mm256_loadu_ps(ar));
        v1 = _mm256_add_ps(v1, _mm256_loadu_ps(ar + 8));
      }
      if (!last) {
        _mm256_storeu_ps(ar, v0);
        _mm256_storeu_ps(ar + 8, v1);
        continue;
      }
      const __m256 alpha = _mm256_set1_ps(ep.alpha);
      v0 = _mm256_mul_ps(v0, alpha);
      v1 = _mm256_mul_ps(v1, alpha);
      if (ep.beta != 0.0f) {
        const __m256 beta = _mm256_set1_ps(ep.beta);
        v0 = _mm256_add_ps(v0, _mm256_mul_ps(beta, L::load(cr)));
        v1 = _mm256_add_ps(v1, _mm256_mul_ps(beta, L::load(cr + 8)));
      }
      if (col_bias) {
        v0 = _mm256_add_ps(v0, cb0);
        v1 = _mm256_add_ps(v1, cb1);
      } else if (ep.bias) {
        const __m256 rb = _mm256_set1_ps(ep.bias[(i0 + r) * ep.bias_stride]);
        v0 = _mm256_add_ps(v0, rb);
        v1 = _mm256_add_ps(v1, rb);
      }
      if (ep.relu) {
        v0 = _mm256_max_ps(_mm256_setzero_ps(), v0);  // NaN stays (Note [Fused relu and NaN])
        v1 = _mm256_max_ps(_mm256_setzero_ps(), v1);
      }
      L::store(cr, v0);
      L::store(cr + 8, v1);
      continue;
    }
#endif
    for (int q = 0; q < nr; ++q) {
      float v = t[q];
      if (!first) v += ar[q];
      if (!last) {
        ar[q] = v;
        continue;
      }
      v *= ep.alpha;
      if (ep.beta != 0.0f) v += ep.beta * static_cast<float>(cr[q * c_cs]);
      if (ep.bias) v += ep.bias[(ep.bias_per_row ? i0 + r : j0 + q) * ep.bias_stride];
      if (ep.relu) v = v < 0.0f ? 0.0f : v;
      cr[q * c_cs] = BFloat16(v);
    }
  }
}

// The pair kernel's rows: the wide tile's where the design takes it (Note [Wide tile]).
int pair_mr() { return wide_tile() ? kMRw : kMRp; }

int path_mr(Bf16Path path) {
  return path == Bf16Path::Tiles ? kMRt : path == Bf16Path::Pairs ? pair_mr() : tile_mr<float>();
}

// The blocking of the bfloat16 GEMM: the float32 plan, with KC doubled for pairs and tiles.
// The tiles take their own KC and MC (Note [bfloat16 GEMM in AMX tiles]).
GemmPlan plan_bf16(int64_t M, int64_t N, int64_t K, int nt, Bf16Path path) {
  if (path == Bf16Path::Tiles)
    return plan_gemm<float>(M, N, K, nt, kMRt, cpu_tuning().gemm_amx_kc, cpu_tuning().gemm_amx_mc);
  return plan_gemm<float>(M, N, K, nt, path_mr(path), (path == Bf16Path::Widened ? 1 : 2) * kc_block());
}

// Per thread: the packed B and A blocks (4-byte units: floats, or pairs), and for a
// bfloat16 C with several KC blocks the stripe's float32 partial sums.
struct Bf16Workspace {
  int64_t b_elems, a_elems, acc_elems, acc_ld;
  int64_t per_thread() const { return b_elems + a_elems + acc_elems; }
};
Bf16Workspace bf16_workspace(const GemmPlan& p, int64_t M, int64_t K, Bf16Path path, bool c_bf16) {
  const int64_t ks = path == Bf16Path::Tiles   ? round_up((p.kc + 1) / 2, kChunkSteps)
                     : path == Bf16Path::Pairs ? (p.kc + 1) / 2
                                               : p.kc;
  Bf16Workspace w;
  w.b_elems = round_up(ks * p.nc, 16);
  w.a_elems = round_up(p.mc * ks, 16);
  const int64_t rows = p.split_n ? M : p.chunk;
  w.acc_ld = p.nc + 16;  // tile rows not 4 KiB apart (one L1 set)
  w.acc_elems = c_bf16 && K > p.kc ? round_up(rows * w.acc_ld, 16) : 0;
  return w;
}

// C(i, j) = epilogue(sum_k A(i, k) B(k, j)); SC is BFloat16 or float.
template <typename SC>
void gemm_bf16_driver(int64_t M, int64_t N, int64_t K, const BFloat16* a, int64_t a_rs, int64_t a_cs,
                      const BFloat16* b, int64_t b_rs, int64_t b_cs, SC* c, int64_t c_rs, int64_t c_cs,
                      const GemmEpilogue& ep) {
  constexpr bool kBf16C = std::is_same<SC, BFloat16>::value;
  if (M <= 0 || N <= 0) return;
  if (K <= 0) {  // an empty sum: C = beta*C + bias, relu, through a zero tile
    alignas(64) float zero[kMRmax * 16] = {};
    for (int64_t i = 0; i < M; i += 16)
      for (int64_t j = 0; j < N; j += 16) {
        const int mr = static_cast<int>(std::min<int64_t>(16, M - i)), nr = static_cast<int>(std::min<int64_t>(16, N - j));
        if constexpr (kBf16C) store_tile_bf16(zero, nullptr, 0, c + i * c_rs + j * c_cs, c_rs, c_cs, mr, nr, ep, true, true, i, j);
        else store_tile<float, kNRf>(zero, c + i * c_rs + j * c_cs, c_rs, c_cs, mr, nr, ep, true, true, i, j);
      }
    return;
  }
  const Bf16Path path = bf16_path();
  const bool pairs = path == Bf16Path::Pairs, hw_pairs = use_avx512_bf16(), hw_tiles = use_amx_bf16();
  const int nt = team_size();
  const GemmPlan p = plan_bf16(M, N, K, nt, path);
  const Bf16Workspace w = bf16_workspace(p, M, K, path, kBf16C);
  Workspace ws(sizeof(float) * static_cast<size_t>(p.team * w.per_thread()));
  const int MR = path_mr(path), NRs = tile_cols<float>(MR);
  const bool avx512 = use_avx512(), avx2 = use_avx2(), wide = MR == kMRw;
  // ukernel_bf16_c's cases: C with unit column stride; a bfloat16 C without beta
  const bool fused_c = c_cs == 1 && (!kBf16C || ep.beta == 0.0f);
  run_team(p.team, [&](int t) {
    float* base = ws.as<float>() + static_cast<int64_t>(t) * w.per_thread();
    float* acc = base + w.b_elems + w.a_elems;
    alignas(64) float tile[kMRt * kNRt];  // >= kTileMax
    const Stripe st = stripe_of(p, t, M, N);
    // C(i, j)'s place in the stripe's partial sums (Note [bfloat16 C])
    auto part_at = [&](int64_t i, int64_t j) { return acc + (i - st.m0) * w.acc_ld + (j - st.n0) % p.nc; };
    // the tile into C (float32: accumulated in place; bfloat16: Note [bfloat16 C]), its
    // 16-column halves one after the other (MR rows of ld 16 each)
    auto store = [&](int64_t i, int64_t j, int mr, int nr, bool first, bool last) {
      for (int h = 0; h * 16 < nr; ++h) {
        const float* th = tile + h * MR * 16;
        const int64_t jh = j + h * 16;
        const int nh = std::min(16, nr - h * 16);
        if constexpr (kBf16C) {
          store_tile_bf16(th, part_at(i, jh), w.acc_ld, c + i * c_rs + jh * c_cs, c_rs, c_cs, mr, nh, ep, first, last, i, jh);
        } else {
          store_tile<float, kNRf>(th, c + i * c_rs + jh * c_cs, c_rs, c_cs, mr, nh, ep, first, last, i, jh);
        }
      }
    };
    if (path == Bf16Path::Tiles) {  // Note [bfloat16 GEMM in AMX tiles]
      uint32_t* bbuf = reinterpret_cast<uint32_t*>(base);
      uint32_t* abuf = bbuf + w.b_elems;
      if (hw_tiles) amx_tiles_begin();
      gemm_stripe<uint32_t, 2, kChunkSteps>(
          p, MR, NRs, K, st.m0, st.m1, st.n0, st.n1, bbuf, abuf,
          [&](uint32_t* d, int64_t i0, int64_t mc, int64_t p0, int64_t kc, int) { pack_a_tiles(d, a, a_rs, a_cs, i0, mc, p0, kc); },
          [&](uint32_t* d, int64_t p0, int64_t kc, int64_t j0, int64_t nc) {
            pack_b_pairs(d, b, b_rs, b_cs, p0, kc, j0, nc, round_up((kc + 1) / 2, kChunkSteps));
          },
          [&](const uint32_t* ap, const uint32_t* bp, int64_t kc, int64_t i, int64_t j, int mr, int nr, bool first,
              bool last) {
            const int64_t kst = round_up((kc + 1) / 2, kChunkSteps);
            // a whole block of a bfloat16 C keeps its partial sums in the tiles between
            // KC blocks (loaded from and stored to the stripe's buffer): the store runs
            // once, on the last; the others go through the tile buffer and the store
            TileIO io{nullptr, 0, tile, 16, kMRt * 16};
            const bool direct = kBf16C && mr == kMRt && nr == kNRt;
            if (direct) {
              float* part = part_at(i, j);
              if (!first) io.in = part, io.in_ld = w.acc_ld;
              if (!last) io.out = part, io.out_ld = w.acc_ld, io.out_q = 16;
            }
            if (hw_tiles) amx_block_hw(kst / kChunkSteps, ap, bp, kNRp * kst, mr > 16, nr > 16, io);
            else amx_block_scalar(kst / kChunkSteps, ap, bp, kNRp * kst, mr > 16, nr > 16, io);
            if (!direct) store(i, j, mr, nr, first, last);
            else if (last) store(i, j, mr, nr, true, true);
          });
      if (hw_tiles) amx_tiles_end();
      return;
    }
    if (pairs) {
      uint32_t* bbuf = reinterpret_cast<uint32_t*>(base);
      uint32_t* abuf = bbuf + w.b_elems;
      gemm_stripe<uint32_t, 2>(
          p, MR, NRs, K, st.m0, st.m1, st.n0, st.n1, bbuf, abuf,
          [&](uint32_t* d, int64_t i0, int64_t mc, int64_t p0, int64_t kc, int mr) { pack_a_pairs(d, a, a_rs, a_cs, i0, mc, p0, kc, mr); },
          [&](uint32_t* d, int64_t p0, int64_t kc, int64_t j0, int64_t nc) { pack_b_pairs(d, b, b_rs, b_cs, p0, kc, j0, nc); },
          [&](const uint32_t* ap, const uint32_t* bp, int64_t kc, int64_t i, int64_t j, int mr, int nr, bool first,
              bool last) {
            const int64_t ks = (kc + 1) / 2;
            if (hw_pairs && fused_c && mr == MR && nr == (wide ? kNRw : kNRp)) {
              float* part = kBf16C ? part_at(i, j) : nullptr;
              if (wide) ukernel_bf16_c<SC, kMRw, 2>(ks, ap, bp, c + i * c_rs + j, c_rs, part, w.acc_ld, ep, first, last, i, j);
              else ukernel_bf16_c<SC, kMRp, 1>(ks, ap, bp, c + i * c_rs + j, c_rs, part, w.acc_ld, ep, first, last, i, j);
              return;
            }
            if (hw_pairs && wide) ukernel_bf16_wide(ks, ap, bp, nr > kNRp, mr, tile);
            else if (hw_pairs) ukernel_bf16_avx512(ks, ap, bp, tile);
            else ukernel_bf16_pairs_scalar(ks, ap, bp, MR, nr > kNRp ? 2 : 1, tile);
            store(i, j, mr, nr, first, last);
          });
      return;
    }
    float* bbuf = base;
    float* abuf = base + w.b_elems;
    gemm_stripe<float, 1>(
        p, MR, NRs, K, st.m0, st.m1, st.n0, st.n1, bbuf, abuf,
        [&](float* d, int64_t i0, int64_t mc, int64_t p0, int64_t kc, int mr) {
          pack_a_strided<float>(d, a, a_rs, a_cs, i0, mc, p0, kc, mr);
        },
        [&](float* d, int64_t p0, int64_t kc, int64_t j0, int64_t nc) {
          pack_b_strided<float, kNRf>(d, b, b_rs, b_cs, p0, kc, j0, nc);
        },
        [&](const float* ap, const float* bp, int64_t kc, int64_t i, int64_t j, int mr, int nr, bool first, bool last) {
          if (wide) ukernel_f32_wide(kc, ap, bp, nr > kNRf, mr, tile);
          else if (avx512) ukernel_f32_avx512(kc, ap, bp, tile);
          else if (avx2) ukernel_f32_avx2(kc, ap, bp, tile);
          else ukernel_f32_scalar(kc, ap, bp, tile);
          store(i, j, mr, nr, first, last);
        });
  });
}

// Note [Column-major C] for the bfloat16 GEMM: C^T = B^T A^T.
template <typename SC>
void gemm_bf16_strided(int64_t M, int64_t N, int64_t K, const BFloat16* a, int64_t a_rs, int64_t a_cs,
                       const BFloat16* b, int64_t b_rs, int64_t b_cs, SC* c, int64_t c_rs, int64_t c_cs,
                       const GemmEpilogue& ep) {
  if (c_rs == 1 && c_cs != 1 && M > 1) {
    GemmEpilogue ept = ep;
    ept.bias_per_row = !ep.bias_per_row;
    return gemm_bf16_driver<SC>(N, M, K, b, b_cs, b_rs, a, a_cs, a_rs, c, c_cs, c_rs, ept);
  }
  gemm_bf16_driver<SC>(M, N, K, a, a_rs, a_cs, b, b_rs, b_cs, c, c_rs, c_cs, ep);
}

}  // namespace

size_t gemm_bf16_workspace_bytes(int64_t M, int64_t N, int64_t K, int nt, bool c_bf16) {
  if (M <= 0 || N <= 0 || K <= 0) return 0;
  const Bf16Path path = bf16_path();
  const GemmPlan p = plan_bf16(M, N, K, nt, path);
  return sizeof(float) * static_cast<size_t>(p.team * bf16_workspace(p, M, K, path, c_bf16).per_thread());
}

}  // namespace sb::detail

namespace sb {

void set_bf16_gemm_pairs(int mode) { detail::g_pairs_mode.store(mode < 0 ? -1 : mode > 2 ? 2 : mode); }

void gemm(int64_t M, int64_t N, int64_t K, const BFloat16* a, int64_t a_rs, int64_t a_cs, const BFloat16* b,
          int64_t b_rs, int64_t b_cs, BFloat16* c, int64_t c_rs, int64_t c_cs, const GemmEpilogue& ep) {
  detail::gemm_bf16_strided<BFloat16>(M, N, K, a, a_rs, a_cs, b, b_rs, b_cs, c, c_rs, c_cs, ep);
}
void gemm(int64_t M, int64_t N, int64_t K, const BFloat16* a, int64_t a_rs, int64_t a_cs, const BFloat16* b,
          int64_t b_rs, int64_t b_cs, float* c, int64_t c_rs, int64_t c_cs, const GemmEpilogue& ep) {
  detail::gemm_bf16_strided<float>(M, N, K, a, a_rs, a_cs, b, b_rs, b_cs, c, c_rs, c_cs, ep);
}

}  // namespace sb
