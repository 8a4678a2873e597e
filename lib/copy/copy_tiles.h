// copy_tiles.h — the tiled transposes of the strided copy (copy.cpp's Tiled path):
// L1 tiles of every element size, the streaming bands of Note [Transpose bands], the
// pipelined blocks and the direct tile runs. A part of copy.cpp, included once inside its
// anonymous namespace after the plan, the path records and the byte copies it uses; not a
// header for anyone else.
#pragma once


constexpr int64_t kTileBytes = 256;  // bytes of one tile row: 64 floats, 4 cache lines

#ifdef SB_HAVE_AVX2
// A tile of 4-byte elements goes through detail::transpose_tile_f32 (transpose_tile.h,
// shared with the iterator) into a contiguous L1 buffer buf[i*kTileB + j] = src[i +
// j*sB] (na <= kTileA, nb <= kTileB), so power-of-two strides cannot make its rows
// conflict in the cache; then whole tile rows go out.
constexpr int64_t kTileA = 128, kTileB = 64;  // 4-byte elements: a 32 KiB buffer

using F8 = vec::Vec<float>;

// One tile row of nb 4-byte elements from the L1 buffer to memory: streaming stores
// for its whole 64-byte lines (nt; Note [Whole lines only] in core/transpose_tile.h),
// plain stores for the rest; scalar at the ragged ends.
void store_row_f32(float* d, const float* b, int64_t nb, bool nt) {
  int64_t j = 0;
  if (nt) {
    while (j < nb && (reinterpret_cast<uintptr_t>(d + j) & 63)) {
      d[j] = b[j];
      ++j;
    }
#pragma GCC unroll 2  // Note [Unrolled vector loops] (elementwise/strips.h)
    for (; j + 16 <= nb; j += 16) {
      F8::stream(d + j, F8::load(b + j));
      F8::stream(d + j + 8, F8::load(b + j + 8));
    }
    if (j + 8 <= nb) {  // a partial last line: plain
      F8::store(d + j, F8::load(b + j));
      j += 8;
    }
  } else {
#pragma GCC unroll 4  // Note [Unrolled vector loops] (elementwise/strips.h)
    for (; j + 8 <= nb; j += 8) F8::store(d + j, F8::load(b + j));
  }
  for (; j < nb; ++j) d[j] = b[j];
}
#endif

template <typename U>
void tile_scalar(U* dst, const U* src, int64_t na, int64_t nb, int64_t dA, int64_t sB) {
  for (int64_t i = 0; i < na; ++i)
    for (int64_t j = 0; j < nb; ++j) dst[i * dA + j] = src[i + j * sB];
}

// Note [Transpose bands]
// The buffered tiles above read 128-float (512-byte) pieces of 64 source rows, one
// 4 KiB page each, and the transpose of a 4096^2 float32 stalled on those reads
// (docs/notes/copy-reduce.md). With streaming stores the dst side needs no buffer: a
// band of 16 nh source rows x kBandA columns goes through detail::stream_band_f32 (per
// 8 columns, nh 16-row halves of two 8x8 transposes; each dst row gets 64 nh
// contiguous bytes as whole 64-byte lines), so the source rows are read as sequential
// runs and the buffer round trip disappears. The machines we measure on disagree on the
// band height, so it is chosen per microarchitecture (cpu_tuning().transpose_band_rows,
// Note [Tuning by microarchitecture]; the sweeps in docs/notes/copy-reduce.md):
//   Sapphire Rapids: 32 rows (nh = 2: 128 bytes per dst row visit); 16 was slower there.
//   Zen 4: 16 rows (nh = 1: one whole line per dst row visit); 32 and 64 were slower.
// On both, tasks walk A fastest, so each band reads its source rows start to end and a
// thread's range is a run of whole source-row bands.
// Taken when the copy streams, elements are 4 bytes, nB >= 16, and every dst row start
// is 64-byte aligned (base, dA and the outer dst strides); ragged edges (nB % 16
// columns, nA % 8 rows) go through the buffer with plain stores.
//
// 2-byte elements take bands of kBand16Rows = 32 source rows on every machine
// (detail::stream_band_u16): the fewest rows that still give each dst row one whole
// 64-byte line per visit. Taken under the same conditions (streaming, dst rows 64-byte
// aligned, nB >= 32) where dst rows lie less than kBlockMinRowBytes apart (NCHW -> NHWC:
// 128 bytes for 64 channels), where one line per visit comes close to sequential
// writes; their ragged edges (nB % 32 columns, nA % 8 rows) go through the buffer with
// plain stores. Below the tuning's cpu_tuning().bands16_min_bytes of output (Sapphire
// Rapids' row: 48 MiB) such copies do not stream at all and take the plain-store tiles
// (the zmm direct runs or the buffered tiles): there the bands took longer than those
// from inside the L2 up to outputs of 32-48 MiB, and half the time or less beyond, where
// the plain stores' read-for-ownership comes from memory (docs/notes/copy-reduce.md,
// "bf16 NCHW -> NHWC bands on the Sapphire Rapids-class VM" and "2-byte bands by output
// size"); the other 2-byte transposes and every 4-byte one gain from streaming from the
// threshold on. Rows further apart (a 4096^2 transpose: 8 KiB) keep the buffered tiles of
// Note [Tiles of 2- and 8-byte elements], whose 256-byte dst rows per visit beat the
// bands there, as the pipelined blocks beat them for 4-byte elements (the comparison:
// docs/notes/copy-reduce.md).
constexpr int64_t kBandA = 512, kBandBMax = 32, kEdgeRows = 512, kBand16Rows = 32;

// Note [Contiguous bands read in order]
// A band reads its source rows side by side, a few elements of each in turn, and counts
// on the hardware prefetchers to follow each row as a stream. Where the source rows are
// short and lie end to end (a batch of transposed planes, B x 128 x 128, or a permute of
// 256-element rows: sB == nA <= kBandA), each row is a few lines long and no stream gets
// going; such a band is one contiguous run of memory. Where the tuning says so
// (cpu_tuning().band_read_bytes: bands of up to that many bytes, 0: never) the band is
// first read once in address order, a load a line (read_in_order), one linear stream the
// prefetchers follow, so that its transposes then read it from L1. Loads, not
// prefetches: software prefetches of the band, this one or the next, gained less; and
// bands of longer rows, which already stream, only lost time read this way
// (docs/notes/copy-reduce.md, "Contiguous bands read in order").
constexpr bool contiguous_band(int64_t nA, int64_t sB) { return sB == nA && nA <= kBandA; }
// One load from each 64-byte line of [p, p + bytes).
inline void read_in_order(const void* p, int64_t bytes) {
  if (bytes <= 0) return;
  const char* c = static_cast<const char*>(p);
  for (int64_t l = 0; l < bytes; l += 64) (void)*reinterpret_cast<const volatile char*>(c + l);
  (void)*reinterpret_cast<const volatile char*>(c + bytes - 1);  // the last line, where p is off a line
}
constexpr int64_t kBlockA = 1024, kBlockB = 64, kBlockMinRowBytes = 4096;  // Note [Pipelined transpose blocks]
constexpr int64_t kBlock16B = 128;  // 2-byte blocks: 128 source rows, dst rows of 256 bytes as the 4-byte ones
template <typename E>
constexpr int64_t kBlockRow = sizeof(E) == 4 ? kBlockB : kBlock16B;  // buffer row = source rows of a block

#ifdef SB_HAVE_AVX2
// Note [Pipelined transpose blocks]
// Streaming stores of one 64-byte line per dst row visit run at half the speed of
// sequential ones once reads run beside them, while 128-256 bytes per visit come close to
// a plain copy; reads want the opposite, few source rows side by side
// (docs/notes/copy-reduce.md, bare loops on the AMD EPYC VM). So a block of kBlockB = 64 source rows x kBlockA = 1024 columns is read as 8
// groups of 8 rows (each group's 4 KiB row pieces start to end, 8x8 transposes) into an
// L2 buffer laid out as the block's dst rows (1024 rows of 256 bytes), and goes out as
// whole 256-byte dst rows with streaming stores. Reading everything and then writing
// everything would not overlap the two, so each thread keeps two buffers and drains
// block t while it fills block t + 1, one 8x8 fill step per dst row drained. The blocks
// lose where the bands' writes are already near sequential (dst rows 256 bytes apart,
// NCHW -> NHWC) or the source rows are short (a 256^3 permute), since 8 rows side by side
// fill slower than the bands' 16 and the buffer round trip costs a core time; so
// transpose_bands() takes them only for dst rows >= 4 KiB apart and source rows >= 1024
// elements (or when set_transpose_bands(64, ...) forces them). Two whole blocks in a row
// take a loop with one drain per fill and compile-time extents.
// 2-byte elements take the same blocks, 128 source rows high (256-byte dst rows again),
// where their dst rows lie kBlockMinRowBytes or more apart and the 4-byte rule would take
// blocks; nearer dst rows take their bands (Note [Transpose bands]).

// Columns [i, i + 8) of 8 source rows (s + k sB + i) -> buffer rows i..i+7 (kBlockB
// floats each) at b + i * kBlockB.
__attribute__((always_inline)) inline void block_fill_step(float* b, const float* s, int64_t sB, int64_t i) {
  detail::tile8x8_f32(b + i * kBlockB, kBlockB, s + i, sB);
}
__attribute__((always_inline)) inline void block_fill_step(uint16_t* b, const uint16_t* s, int64_t sB, int64_t i) {
  detail::tile8x8_u16(b + i * kBlock16B, kBlock16B, s + i, sB);
}

// One dst row of a block: ng x 8 floats from the buffer row, streaming stores.
inline void block_drain_row(float* d, const float* b, int64_t ng) {
  if (ng == kBlockB / 8) {
#pragma GCC unroll 8
    for (int64_t k = 0; k < kBlockB; k += 8) F8::stream(d + k, F8::load(b + k));
    return;
  }
  for (int64_t k = 0; k < 8 * ng; k += 8) F8::stream(d + k, F8::load(b + k));
}
inline void block_drain_row(uint16_t* d, const uint16_t* b, int64_t ng) {  // ng x 8 2-byte elements
  int64_t k = 0;
#pragma GCC unroll 8
  for (; k + 16 <= 8 * ng; k += 16)
    vec::Bits256::stream(d + k, vec::Bits256::load_aligned(b + k));
  if (k < 8 * ng)
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + k), _mm_load_si128(reinterpret_cast<const __m128i*>(b + k)));
}

// The bands' kernel as a function of its own, for the reason given at block_pipeline:
// inlined into the copy's closure its loop spilled the row addresses (and the
// closure's growth with the blocks slowed NHWC -> NCHW: docs/notes/copy-reduce.md).
__attribute__((noinline)) void stream_band(float* d, int64_t ld, const float* s, int64_t sB, int64_t na8, int64_t nh) {
  detail::stream_band_f32(d, ld, s, sB, na8, nh);
}

#ifdef SB_HAVE_AVX512
// Two whole 2-byte blocks (kBlockA x kBlock16B): block_pipeline's fill through zmm
// registers of two 256-bit source rows, k and k + 8 (as Note [zmm 2-byte tiles], with
// 16 rows side by side where four 128-bit rows would put 32): 16 source rows x 16
// columns a fill step, lane-wise unpacks, a lane permute that joins each buffer row's
// 16 values, 32 bytes into each of 16 buffer rows; two dst rows drained a step
// (docs/notes/copy-reduce.md, zmm fills for the 2-byte blocks).
__attribute__((noinline, target("avx512f,avx512bw"))) void block_pipeline_u16_512(uint16_t* d, int64_t ld,
                                                                                 const uint16_t* bc, uint16_t* bn,
                                                                                 const uint16_t* sn, int64_t sB) {
  constexpr int64_t kB = kBlock16B;
  const __m512i lo = _mm512_set_epi64(7, 6, 3, 2, 5, 4, 1, 0);  // lanes 0, 2 | 1, 3
  for (int64_t g = 0; g < kB / 16; ++g)
    for (int64_t i = 0; i < kBlockA; i += 16) {
      __m512i r[8];
      const uint16_t* sg = sn + 16 * g * sB + i;
#pragma GCC unroll 8
      for (int k = 0; k < 8; ++k) {  // rows k and k + 8; masked forms: GCC 12 warns on the plain ones
        const __m512i a = _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(sg + k * sB)));
        r[k] = _mm512_mask_inserti64x4(a, 0xFF, a, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(sg + (k + 8) * sB)), 1);
      }
      detail::transpose8_u16_lanes512(r);
#pragma GCC unroll 8
      for (int m = 0; m < 8; ++m) {
        const __m512i v = _mm512_maskz_permutexvar_epi64(0xFF, lo, r[m]);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(bn + (i + m) * kB + 16 * g), _mm512_maskz_extracti64x4_epi64(0xF, v, 0));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(bn + (i + 8 + m) * kB + 16 * g),
                            _mm512_maskz_extracti64x4_epi64(0xF, v, 1));
      }
      const int64_t c = 2 * (g * (kBlockA / 16) + i / 16);
#pragma GCC unroll 2
      for (int64_t row = c; row < c + 2; ++row)
#pragma GCC unroll 4
        for (int64_t k = 0; k < kB; k += 32)
          _mm512_stream_si512(reinterpret_cast<__m512i*>(d + row * ld + k), _mm512_loadu_si512(bc + row * kB + k));
    }
}
#endif

// Drains one block (na8 dst rows of ng x 8 elements, buffer bc -> d, row stride ld) while
// it fills the next (ngn groups x nan8 columns of the source at sn -> buffer bn), one
// fill step per na8 / (ngn nan8 / 8) rows drained. A function of its own, with every
// operand a plain value: inside the copy's closure the compiler spilled the loop's
// pointers and reloaded them after each vector store.
template <typename E>
__attribute__((noinline)) void block_pipeline(E* d, int64_t ld, const E* bc, int64_t na8, int64_t ng, E* bn,
                                              const E* sn, int64_t sB, int64_t nan8, int64_t ngn) {
  constexpr int64_t kB = kBlockRow<E>;
  // two whole blocks: kB / 8 x kBlockA / 8 fills for kBlockA rows, so one drain per fill
  // (4-byte elements) or per two fills (2-byte ones)
  constexpr int64_t kFillsPerRow = kB / 8 * (kBlockA / 8) / kBlockA;
  static_assert(kFillsPerRow * kBlockA == kB / 8 * (kBlockA / 8), "whole fills per drained row");
#ifdef SB_HAVE_AVX512
  if constexpr (sizeof(E) == 2) {
    if (na8 == kBlockA && ng == kB / 8 && nan8 == kBlockA && ngn == kB / 8 && use_zmm_fill16())
      return block_pipeline_u16_512(d, ld, bc, bn, sn, sB);
  }
#endif
  if (na8 == kBlockA && ng == kB / 8 && nan8 == kBlockA && ngn == kB / 8) {
    for (int64_t g = 0; g < kB / 8; ++g)
      for (int64_t i = 0; i < kBlockA; i += 8) {
        block_fill_step(bn + 8 * g, sn + 8 * g * sB, sB, i);
        const int64_t f = g * (kBlockA / 8) + i / 8;
        if (f % kFillsPerRow == kFillsPerRow - 1) {
          const int64_t c = f / kFillsPerRow;
          block_drain_row(d + c * ld, bc + c * kB, kB / 8);
        }
      }
    return;
  }
  const int64_t fills = ngn * (nan8 / 8);
  int64_t c = 0, owed = 0;  // c = floor(f * na8 / fills) after f fills, without a division in the loop
  for (int64_t g = 0; g < ngn; ++g)
    for (int64_t i = 0; i < nan8; i += 8) {
      block_fill_step(bn + 8 * g, sn + 8 * g * sB, sB, i);
      for (owed += na8; owed >= fills; owed -= fills, ++c) block_drain_row(d + c * ld, bc + c * kB, ng);
    }
  for (; c < na8; ++c) block_drain_row(d + c * ld, bc + c * kB, ng);
}
#endif

// Note [Direct small tiles]
// In an L2-resident copy the buffered tile's round trip through the L1 buffer costs as
// much as the transposes. Such copies (4- and 2-byte elements, AVX2, the whole copy
// within one core's L2) go as 16 (A) x 32 (B) tiles of 8x8 transposes stored straight
// into dst (the fastest tile shape in bare loops for 4-byte elements,
// docs/notes/copy-reduce.md). Not taken when dst rows are a multiple of 2 KiB apart: a
// tile's 16 dst rows then share one or two L1 sets; nor above the L2 (but see below).
// 4-byte tiles walk A fastest, in runs (Note [Direct tile runs]). 2-byte tiles walk B
// fastest, one tile a call, so that two threads split the dst rows between them: split
// by columns, as A-fastest tasks split, the second thread more than doubled the time of a
// 256^2 bfloat16 transpose (docs/notes/copy-reduce.md). Where zmm 2-byte tiles run (Note
// [zmm 2-byte tiles]) they walk A fastest in runs too: each dst row gets whole lines.
// Both run past the L2 as well, in every copy that does not stream (last-level-cache
// sizes), where source rows are kDirectLlcMinA elements or longer (2-byte elements only
// with the zmm tiles): there the buffered tiles' round trip costs as much as it does in
// L2; with source rows of 64 elements (NHWC -> NCHW of 64 channels) two threads took
// longer than the buffered tiles (docs/notes/copy-reduce.md, "zmm 2-byte tiles past the
// L2" and "4-byte direct tiles past the L2").
constexpr int64_t kDirectA = 16, kDirectB = 32, kDirectLlcMinA = 128;
constexpr int64_t kStagedB = 64;  // B tile of the staged runs (Note [Staged 2-byte tile runs], core/transpose_tile.h)

// Note [Streaming 2-byte tile runs]
// 2-byte copies that stream, whose dst rows lie kBlockMinRowBytes or more apart and
// whose source rows are too short for the pipelined blocks (NHWC -> NCHW of 64
// channels: source rows of 64 elements, dst rows 6 KiB apart) took the buffered tiles of
// Note [Tiles of 2- and 8-byte elements]. Where the zmm tiles run (Note [zmm 2-byte
// tiles]) they take the direct tile runs instead, A fastest, with streaming stores: each
// dst row gets one whole 64-byte line per visit, written without a read for ownership,
// and each B tile's source rows are read start to end. The dst alignment is the bands'
// (dst rows 64-byte aligned); the whole 16 x 32 tiles stream, the edges (nA % 16 rows,
// nB % 32 columns) are stored plainly, and a fence ends each thread's range. The
// design's tuning may keep the buffered tiles for short source rows while taking the zmm
// tiles elsewhere (zmm16_lines_min): on the Sapphire Rapids-class VM the unstaged runs
// of 64-element source rows were slower than the buffered tiles, those of 256 and 4096
// faster (docs/notes/copy-reduce.md, "zmm 2-byte tiles on the Sapphire Rapids-class VM").
// Where the tuning stages them (zmm16_stage), the B tiles are kStagedB rows and each
// run goes through Note [Staged 2-byte tile runs]: 128 bytes a dst row per visit.

// Note [Direct tile runs]: the direct tiles of one (outer, B-tile) row, A from 0 to na,
// in one call, whole 16 x 32 tiles with compile-time extents: locating every tile
// (divisions, the outer offsets), the copy's closure around the 8x8 transposes (stride
// multiples spilled to the stack) and run-time extents cost a 256² transpose half again
// the time of bare loops of this shape (docs/notes/copy-reduce.md).
#ifdef SB_HAVE_AVX2
// 16 along A by 8 along B: two 8x8 float tiles, or one 2-byte tile16x8_u16 (two 8x8
// lane by lane)
__attribute__((always_inline)) inline void tile_a16(float* d, int64_t ld, const float* s, int64_t sB) {
  detail::tile8x8_f32(d, ld, s, sB);
  detail::tile8x8_f32(d + 8 * ld, ld, s + 8, sB);
}
__attribute__((always_inline)) inline void tile_a16(uint16_t* d, int64_t ld, const uint16_t* s, int64_t sB) {
  detail::tile16x8_u16(d, ld, s, sB);
}
inline void transpose_tile(float* d, int64_t ld, const float* s, int64_t sB, int64_t na, int64_t nb) {
  detail::transpose_tile_f32(d, ld, s, sB, na, nb);
}
inline void transpose_tile(uint16_t* d, int64_t ld, const uint16_t* s, int64_t sB, int64_t na, int64_t nb) {
  detail::transpose_tile_u16(d, ld, s, sB, na, nb);
}

inline void store_row(float* d, const float* b, int64_t n) { store_row_f32(d, b, n, false); }  // plain stores
inline void store_row(uint16_t* d, const uint16_t* b, int64_t n) {
  std::memcpy(d, b, static_cast<size_t>(n) * sizeof(uint16_t));
}

// E: float or uint16_t; zmm16: Note [zmm 2-byte tiles] (2-byte elements), their whole
// tiles with streaming stores where nt (Note [Streaming 2-byte tile runs]), and B tiles
// of kStagedB rows through the stage where staged (Note [Staged 2-byte tile runs]).
template <typename E>
__attribute__((noinline)) void direct_tile_run(E* d, int64_t dA, const E* s, int64_t sB, int64_t na, int64_t nb,
                                               bool zmm16, bool nt = false, bool staged = false) {
  int64_t i = 0;
#ifdef SB_HAVE_AVX512
  if constexpr (sizeof(E) == 2) {
    if (zmm16 && staged && nb == kStagedB) {
      i = nt ? detail::tile_run64x64_u16<true>(d, dA, s, sB, na) : detail::tile_run64x64_u16(d, dA, s, sB, na);
      if (i == na) return;
    }
    if (zmm16 && nb > kDirectB) {  // the rest of a staged tile, or a B edge: its two parts
      direct_tile_run(d + i * dA, dA, s + i, sB, na - i, kDirectB, zmm16, nt);
      direct_tile_run(d + i * dA + kDirectB, dA, s + i + kDirectB * sB, sB, na - i, nb - kDirectB, zmm16, nt);
      return;
    }
    if (nb == kDirectB && zmm16)
      i = nt ? detail::tile_run16x32_u16<true>(d, dA, s, sB, na) : detail::tile_run16x32_u16(d, dA, s, sB, na);
  }
#endif
  (void)zmm16;
  (void)nt;
  (void)staged;
  if (nb == kDirectB)  // whole tiles: compile-time extents, the 8 micro-tiles unrolled
    for (; i + kDirectA <= na; i += kDirectA)
      for (int64_t j = 0; j < kDirectB; j += 8) tile_a16(d + i * dA + j, dA, s + i + j * sB, sB);
  for (; i < na; i += kDirectA) transpose_tile(d + i * dA, dA, s + i, sB, std::min(kDirectA, na - i), nb);
}
#endif

struct TransposeBands {
  int64_t rows;            // source rows per band: 16 or 32 (<= kBandBMax); 64: pipelined blocks
  bool source_rows_outer;  // tasks walk A fastest (each band's source rows start to end)
};
std::atomic<int> g_band_rows{0};  // 0: cpu_tuning()'s choice; else set_transpose_bands()
std::atomic<bool> g_band_outer{true};

// The band (or block) for a transpose whose A extent is nA and whose dst rows lie
// dA_bytes apart: forced by set_transpose_bands, else cpu_tuning()'s band, and blocks
// where the tuning takes them and Note [Pipelined transpose blocks] found them faster.
[[maybe_unused]] TransposeBands transpose_bands(int64_t nA, int64_t dA_bytes) {  // AVX2 builds only
  const int forced = g_band_rows.load(std::memory_order_relaxed);
  if (forced) return {forced, g_band_outer.load(std::memory_order_relaxed)};
  const CpuTuning& t = cpu_tuning();
  if (t.transpose_blocks && nA >= kBlockA && dA_bytes >= kBlockMinRowBytes) return {kBlockB, true};
  return {t.transpose_band_rows, true};
}

// Plan dims: B = last (dst stride 1), A = a (src stride 1); others loop outside.
// Returns the streaming bands' rows (0: none; 64: pipelined blocks; 32: 2-byte bands;
// 16: 4-byte bands, or 2-byte streaming tile runs; 128: staged 2-byte tile runs). nt:
// whether the copy may stream, and on return whether it did (Note [Transpose bands]:
// near 2-byte dst rows may not). read_bands: on return, whether the bands were read in
// address order (Note [Contiguous bands read in order]).
template <typename U>
int tiled_path(U* d, const U* s, const Plan& p, int64_t a, bool& nt, bool& read_bands) {
  read_bands = false;
  const int64_t last = p.ndim() - 1;
  const bool simd = sizeof(U) == 4 && use_avx2();
  // Note [Tiles of 2- and 8-byte elements]: as the 4-byte tiles, transposed into the L1
  // buffer (transpose_tile_u16 / transpose_tile_f64) and stored a whole row at a time;
  // streaming 2-byte copies take bands or blocks first where those apply (below).
  // The scalar tile walks 64 source rows for every dst row, and rows a power-of-two
  // stride apart (4096 bfloat16 = 8 KiB) share their L1 sets: every read missed
  // (docs/notes/copy-reduce.md, Transposes of 2- and 8-byte elements).
  const bool simd_other = (sizeof(U) == 2 || sizeof(U) == 8) && use_avx2();
  [[maybe_unused]] constexpr int64_t kOtherA = sizeof(U) == 8 ? 64 : 128, kOtherB = sizeof(U) == 8 ? 64 : 128;  // 32 KiB
  const int64_t tile = std::clamp<int64_t>(kTileBytes / static_cast<int64_t>(sizeof(U)), 32, 64);  // scalar tiles
  const int64_t nA = p.size[a], nB = p.size[last], dA = p.dst[a], sB = p.src[last];
  Plan outer;  // the other dims
  for (int64_t k = 0; k < last; ++k)
    if (k != a) {
      outer.size.push_back(p.size[k]);
      outer.dst.push_back(p.dst[k]);
      outer.src.push_back(p.src[k]);
    }
  const int64_t nouter = std::accumulate(outer.size.begin(), outer.size.end(), int64_t{1}, std::multiplies<>());
  bool bands = false, bands16 = false, blocks16 = false;  // Note [Transpose bands]: 4-byte, 2-byte elements
  bool lines16 = false;  // Note [Streaming 2-byte tile runs]
  bool staged16 = false;  // and Note [Staged 2-byte tile runs]
#ifdef SB_HAVE_AVX2
  // Note [Aliased transposes stream]
  // Past the L2, a transpose into dst rows a multiple of 2 KiB apart (a 1024^2 float32, a
  // 2048^2 bfloat16) is kept from the direct tiles (Note [Direct small tiles]) and took
  // the buffered tiles with plain stores, whose dst lines crowd a few L1 sets; on the
  // Sapphire Rapids-class VM the same copy streamed (the bands or the 2-byte tile runs of
  // Note [Transpose bands]) took much less time below the streaming threshold too. Where
  // the design's tuning says so (CpuTuning::aliased_transpose_nt, SB_TUNING aliasnt),
  // such 4- and 2-byte copies stream at any size past the L2; elsewhere past the
  // threshold, as every copy, until measured on that design (docs/notes/copy-reduce.md,
  // "Transposes into aliased rows streamed").
  if (!nt && (sizeof(U) == 4 || sizeof(U) == 2) && use_avx2() && cpu_tuning().aliased_transpose_nt &&
      (dA * static_cast<int64_t>(sizeof(U))) % 2048 == 0 &&
      nA * nB * nouter * static_cast<int64_t>(sizeof(U)) > cpu_caches().l2)
    nt = true;
  bands = simd && nt && nB >= 16 && dA % 16 == 0 && reinterpret_cast<uintptr_t>(d) % 64 == 0;
  bands16 = sizeof(U) == 2 && use_avx2() && nt && nB >= kBand16Rows && dA % 32 == 0 &&
            reinterpret_cast<uintptr_t>(d) % 64 == 0;
  for (int64_t st : outer.dst) {
    bands = bands && st % 16 == 0;
    bands16 = bands16 && st % 32 == 0;
  }
  const TransposeBands tune = transpose_bands(nA, dA * static_cast<int64_t>(sizeof(U)));
  const bool blocks = bands && tune.rows == kBlockB;  // Note [Pipelined transpose blocks]
  // Note [Streaming 2-byte tile runs]: where 2-byte dst rows lie far apart and the
  // source rows are too short for blocks
  const bool zmm16 = use_avx512() && cpu_tuning().zmm16;
  if (bands16 && dA * 2 >= kBlockMinRowBytes) {  // 2-byte dst rows far apart: blocks, zmm tile runs or the buffered tiles
    blocks16 = transpose_bands(nA, dA * 2).rows == kBlockB;
    lines16 = !blocks16 && zmm16 && nA >= std::max(kDirectA, cpu_tuning().zmm16_lines_min);
    staged16 = lines16 && cpu_tuning().zmm16_stage;
    bands16 = false;
  } else if (bands16 && nA * nB * nouter * 2 < cpu_tuning().bands16_min_bytes) {  // near dst rows, plain stores (Note [Transpose bands])
    bands16 = false;
    nt = false;
  }
  // Note [Direct small tiles]: L2-resident copies whose dst rows do not alias in L1
  // (also past the L2 where the copy does not stream, for source rows of kDirectLlcMinA
  // or more; 2-byte elements there with the zmm tiles only: Note [Direct small tiles])
  const bool direct = simd && !nt && (nA * nB * nouter * 4 <= cpu_caches().l2 || nA >= kDirectLlcMinA) &&
                      (dA * 4) % 2048 != 0;
  const bool direct16 = lines16 || (sizeof(U) == 2 && use_avx2() && !nt &&
                                    (nA * nB * nouter * 2 <= cpu_caches().l2 || (zmm16 && nA >= kDirectLlcMinA)) &&
                                    (dA * 2) % 2048 != 0);
  const int64_t tA = blocks || blocks16 ? kBlockA : bands || bands16 ? kBandA : direct || direct16 ? kDirectA
                    : simd ? kTileA : simd_other ? kOtherA : tile,
                tB = blocks ? kBlockB : blocks16 ? kBlock16B : bands ? tune.rows : bands16 ? kBand16Rows
                    : staged16 ? kStagedB : direct || direct16 ? kDirectB : simd ? kTileB : simd_other ? kOtherB : tile;
  // direct16 A-fastest only with zmm tiles (Note [zmm 2-byte tiles]): a run's dst writes
  // are whole 64-byte lines, so two threads on neighbouring B tiles share none
  const bool a_fastest = (bands && tune.source_rows_outer) || bands16 || blocks16 || direct || (direct16 && zmm16);
  // Note [Runs split by dst rows]: where those dst rows are not whole lines (rows a
  // multiple of 64 bytes apart, from a 64-byte boundary), neighbouring B tiles share a
  // line in every row, and threads split by B tiles wrote the line at their border from
  // both cores. Then A is cut into one part per thread, each part's runs done for every
  // B tile before the next part: a thread writes whole dst rows.
  bool whole_lines = reinterpret_cast<uintptr_t>(d) % 64 == 0 && (dA * 2) % 64 == 0;
  for (int64_t st : outer.dst) whole_lines = whole_lines && (st * 2) % 64 == 0;
  const int64_t parts = direct16 && zmm16 && !whole_lines && !in_parallel_region() ? get_num_threads() : 1;
#else
  const int64_t tA = tile, tB = tile;
  const bool a_fastest = false;
  const int64_t parts = 1;
#endif
#ifdef SB_HAVE_AVX2
  // Note [Contiguous bands read in order]
  read_bands = ((bands && !blocks) || bands16) && contiguous_band(nA, sB) &&
               tB * nA * static_cast<int64_t>(sizeof(U)) <= cpu_tuning().band_read_bytes;
#endif
  const int64_t no = outer.ndim();
  const int64_t ta = (nA + tA - 1) / tA, tb = (nB + tB - 1) / tB;
  const int64_t tap = a_fastest ? (ta + parts - 1) / parts : ta;  // A tiles of a part (tasks past ta: empty)
  const int64_t tasks = nouter * (a_fastest ? parts * tap : ta) * tb;
  parallel_for(0, tasks, std::max<int64_t>(1, kGrainSize / (tA * tB)), [&](int64_t b, int64_t e) {
    Dims idx(static_cast<size_t>(std::max<int64_t>(no, 1)));
#ifdef SB_HAVE_AVX2
    alignas(64) float buf[kTileA * kTileB];  // one 4-byte tile (or a band's ragged edge)
#endif
    // task t -> its tile: dst and src corners, extent na x nb
    const auto locate = [&](int64_t t, int64_t& doff, int64_t& soff, int64_t& na, int64_t& nb) {
      const int64_t per_o = tasks / nouter, r = t % per_o, o = t / per_o;
      const int64_t ia = a_fastest ? r / (tb * tap) * tap + r % tap : (r / tb) % ta,
                    ib = a_fastest ? (r / tap) % tb : r % tb;
      unravel_offsets(outer, no, o, doff, soff, idx);
      const int64_t i0 = ia * tA, j0 = ib * tB;
      na = std::min(tA, nA - i0);
      nb = std::min(tB, nB - j0);
      doff += i0 * dA + j0;
      soff += i0 + j0 * sB;
    };
#ifdef SB_HAVE_AVX2
    // A band's or block's ragged edges through the buffer with plain stores: columns [jr,
    // nb) (fewer than a band's rows) of rows [0, na8), then rows [na8, na) (fewer than 8),
    // every column. E: float or uint16_t; buffer rows of 64 bytes, then of a block's row.
    const auto ragged_edges = [&](auto* de, const auto* se, int64_t na, int64_t nb, int64_t jr) {
      using E = std::remove_pointer_t<decltype(de)>;
      constexpr int64_t kCols = 64 / sizeof(E), kRow = kBlockRow<E>;
      static_assert(kEdgeRows * kCols * sizeof(E) <= sizeof(buf) && 8 * kRow * sizeof(E) <= sizeof(buf),
                    "band edges fit the buffer");
      E* const be = reinterpret_cast<E*>(buf);
      const int64_t na8 = na / 8 * 8;
      for (int64_t i = 0; i < na8 && jr < nb; i += kEdgeRows) {
        const int64_t n = std::min(kEdgeRows, na8 - i);
        transpose_tile(be, kCols, se + i + jr * sB, sB, n, nb - jr);
        for (int64_t r = 0; r < n; ++r) store_row(de + (i + r) * dA + jr, be + r * kCols, nb - jr);
      }
      if (na8 < na) {
        transpose_tile(be, kRow, se + na8, sB, na - na8, nb);
        for (int64_t i = na8; i < na; ++i) store_row(de + i * dA, be + (i - na8) * kRow, nb);
      }
    };
    // Note [Pipelined transpose blocks]: drain block t while filling block t + 1; E: float
    // (4-byte elements) or uint16_t (2-byte ones)
    const auto run_blocks = [&](auto zero) {
      using E = decltype(zero);
      constexpr int64_t kB = kBlockRow<E>;
      E* const bufs = reinterpret_cast<E*>(tile_scratch(2 * kBlockA * kB * sizeof(E)));
      struct Block {
        E* d;
        const E* s;
        int64_t na, nb;
      };
      const auto block = [&](int64_t t) {
        int64_t doff, soff, na, nb;
        locate(t, doff, soff, na, nb);
        return Block{reinterpret_cast<E*>(d + doff), reinterpret_cast<const E*>(s + soff), na, nb};
      };
      Block cur = block(b);
      block_pipeline<E>(nullptr, dA, nullptr, 0, 0, bufs, cur.s, sB, cur.na / 8 * 8, cur.nb / 8);  // fill only
      for (int64_t t = b; t < e; ++t) {
        const E* const bc = bufs + ((t - b) & 1) * (kBlockA * kB);
        E* const bn = bufs + ((t - b + 1) & 1) * (kBlockA * kB);
        const Block nxt = t + 1 < e ? block(t + 1) : Block{nullptr, nullptr, 0, 0};
        block_pipeline<E>(cur.d, dA, bc, cur.na / 8 * 8, cur.nb / 8, bn, nxt.s, sB, nxt.na / 8 * 8, nxt.nb / 8);
        ragged_edges(cur.d, cur.s, cur.na, cur.nb, cur.nb / 8 * 8);
        cur = nxt;
      }
      fence(true);
    };
    if (blocks) return run_blocks(float{});
    if constexpr (sizeof(U) == 2) {
      if (blocks16) return run_blocks(uint16_t{});
    }
#endif
#ifdef SB_HAVE_AVX2
    // Note [Direct small tiles]: 4-byte tiles a run along A at a time (Note [Direct tile runs]), 2-byte ones one by one
    const auto run_direct = [&](auto zero) {
      using E = decltype(zero);
      for (int64_t t = b; t < e;) {
        const int64_t r = t % (tasks / nouter), ia = a_fastest ? r / (tb * tap) * tap + r % tap : (r / tb) % ta;
        const int64_t run = a_fastest ? std::min(tap - r % tap, e - t) : 1;  // A-fastest tiles are consecutive
        if (ia < ta) {  // a part's tasks past the last A tile are empty
          int64_t doff, soff, na, nb;
          locate(t, doff, soff, na, nb);
          direct_tile_run<E>(reinterpret_cast<E*>(d + doff), dA, reinterpret_cast<const E*>(s + soff), sB,
                             std::min(run * tA, nA - ia * tA), nb, zmm16, lines16, staged16);
        }
        t += run;
      }
      fence(lines16);
    };
    if (direct) return run_direct(float{});
    if constexpr (sizeof(U) == 2) {
      if (direct16) return run_direct(uint16_t{});
    }
#endif
    for (int64_t t = b; t < e; ++t) {
      int64_t doff, soff, na, nb;
      locate(t, doff, soff, na, nb);
      U* dt = d + doff;
      const U* st = s + soff;
#ifdef SB_HAVE_AVX2
      float* df = reinterpret_cast<float*>(dt);
      const float* sf = reinterpret_cast<const float*>(st);
      if (bands) {  // Note [Transpose bands]
        const int64_t jr = nb / 16 * 16, na8 = na / 8 * 8;
        if (read_bands) read_in_order(sf, nb * na * 4);  // Note [Contiguous bands read in order]
        stream_band(df, dA, sf, sB, na8, jr / 16);
        ragged_edges(df, sf, na, nb, jr);
        continue;
      }
      if constexpr (sizeof(U) == 2) {
        if (bands16) {  // Note [Transpose bands], 2-byte elements
          uint16_t* const du = reinterpret_cast<uint16_t*>(dt);
          const uint16_t* const su = reinterpret_cast<const uint16_t*>(st);
          const int64_t jr = nb / kBand16Rows * kBand16Rows;
          if (read_bands) read_in_order(su, nb * na * 2);  // Note [Contiguous bands read in order]
          if (jr > 0) detail::stream_band_u16(du, dA, su, sB, na / 8 * 8);
          ragged_edges(du, su, na, nb, jr);
          continue;
        }
      }
      if (simd && nt && t + 1 < e) {  // Note [Tile prefetch] (iterator.h): the next tile's source into L2
        int64_t ndoff, nsoff, nna, nnb;
        locate(t + 1, ndoff, nsoff, nna, nnb);
        const char* nx = reinterpret_cast<const char*>(s + nsoff);
        for (int64_t j = 0; j < nb; j += 8) {
          for (int64_t r = j; r < std::min(j + 8, nnb); ++r)
            for (int64_t l = 0; l < nna * 4; l += 64) __builtin_prefetch(nx + r * sB * 4 + l, 0, 1);
          detail::transpose_tile_f32(buf + j, kTileB, sf + j * sB, sB, na, std::min<int64_t>(8, nb - j));
        }
        for (int64_t r = nb; r < nnb; ++r)
          for (int64_t l = 0; l < nna * 4; l += 64) __builtin_prefetch(nx + r * sB * 4 + l, 0, 1);
        for (int64_t i = 0; i < na; ++i) store_row_f32(df + i * dA, buf + i * kTileB, nb, nt);
        continue;
      }
      if (simd) {
        detail::transpose_tile_f32(buf, kTileB, sf, sB, na, nb);
        for (int64_t i = 0; i < na; ++i) store_row_f32(df + i * dA, buf + i * kTileB, nb, nt);
        continue;
      }
      if constexpr (sizeof(U) == 2 || sizeof(U) == 8) {
        if (simd_other) {  // Note [Tiles of 2- and 8-byte elements]
          U* const bu = reinterpret_cast<U*>(buf);
          static_assert(kOtherA * kOtherB * sizeof(U) <= kTileA * kTileB * sizeof(float), "the tile fits the buffer");
          if constexpr (sizeof(U) == 2) {
            detail::fill_tile_u16(bu, kOtherB, st, sB, na, nb, use_zmm_fill16());  // Note [Tiles of 2- and 8-byte elements]
          } else {  // bit patterns through double lanes
            detail::transpose_tile_f64(reinterpret_cast<double*>(bu), kOtherB, reinterpret_cast<const double*>(st), sB,
                                       na, nb);
          }
          const size_t row = static_cast<size_t>(nb) * sizeof(U);
          for (int64_t i = 0; i < na; ++i) {
            char* const dr = reinterpret_cast<char*>(dt + i * dA);
            const char* const br = reinterpret_cast<const char*>(bu + i * kOtherB);
            if (nt) detail::stream_copy(dr, br, static_cast<int64_t>(row));
            else std::memcpy(dr, br, row);
          }
          continue;
        }
      }
#endif
      tile_scalar(dt, st, na, nb, dA, sB);
    }
    fence(nt && (simd || simd_other));
  });
  return bands ? static_cast<int>(tB) : blocks16 ? static_cast<int>(kBlockB) : bands16 ? static_cast<int>(kBand16Rows)
         : staged16 ? static_cast<int>(2 * kStagedB) : lines16 ? static_cast<int>(kDirectA) : 0;
}
