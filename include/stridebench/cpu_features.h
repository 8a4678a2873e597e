// cpu_features.h — which SIMD path the CPU kernels take.
//
// Levels: Scalar (plain C, always compiled), AVX2 (AVX2+FMA+F16C: every kernel), and
// AVX512 (AVX-512F/BW/VNNI): the kernels that gain from 512-bit registers or masks take
// it (the float32 and bfloat16 GEMM micro-kernels, the direct conv2d kernel, the int8
// kernel, normalize's short-row kernels, the conversions between float32 and 16-bit types, and
// the k-masked stores of elementwise outputs, Note [Masked stores] in strips.h); the
// others keep their AVX2 path at this level. The bfloat16 GEMM's AMX tiles belong to it
// too, where the CPU has AMX-BF16 (use_amx_bf16 below).
// AVX2 is chosen at build time (meson option `simd`, default: when the compiler and the
// building CPU have it; see meson.build). The AVX-512 kernels are compiled with function
// target attributes whenever the compiler supports them (SB_HAVE_AVX512) and taken only
// when the running CPU reports all three extensions (Note [Run-time AVX-512]).
// The level can be lowered at run time (set_simd_level, or SB_SIMD=scalar / SB_SIMD=avx2
// in the environment) so every path is tested and measurable on the same machine.
#pragma once
#include <cstdint>
#include <string>

namespace sb {

enum class SimdLevel : uint8_t { Scalar, AVX2, AVX512 };

SimdLevel compiled_simd_level();  // the best path this build has on this CPU
SimdLevel simd_level();           // the path kernels take now
void set_simd_level(SimdLevel level);  // clamps to compiled_simd_level()
const char* simd_level_name(SimdLevel level);

// Who made the CPU (cpuid's vendor string). Kernels do not choose by vendor: they read
// cpu_tuning(), chosen per microarchitecture (Note [Tuning by microarchitecture]).
enum class CpuVendor : uint8_t { Intel, AMD, Other };
CpuVendor cpu_vendor();

// The core's microarchitecture, from cpuid's vendor, family and model (the same names
// as BLIS's configs). Cores of one design share a value: Emerald Rapids is
// SapphireRapids (both Golden/Raptor Cove), Zen 4's Genoa, Bergamo and Raphael are Zen4.
enum class CpuArch : uint8_t { Other, Zen, Zen2, Zen3, Zen4, Zen5, SkylakeX, IceLakeX, SapphireRapids, GraniteRapids };
const char* cpu_arch_name(CpuArch a);  // "zen4", "sapphire-rapids", "other"
CpuArch arch_of(CpuVendor vendor, int family, int model);  // pure: for tests and tools
struct CpuId {
  CpuVendor vendor = CpuVendor::Other;
  int family = -1, model = -1;  // cpuid's display family and model; -1 where unknown
  CpuArch arch = CpuArch::Other;
};
const CpuId& cpu_id();  // read once

// The data caches one core sees, in bytes (0 where unknown). Note [Cache sizes]: the
// kernel's sysfs (/sys/devices/system/cpu/cpu0/cache/index*) first, glibc's sysconf
// where sysfs says nothing. sysfs gives the size of the cache instance this core uses;
// sysconf on the AMD EPYC VM we measure on reports the L3 of the whole socket (320 MiB,
// ten 32 MiB CCD slices of which a core reaches one), which labelled 64 MiB working
// sets "LLC". llc_level is 3, or 2 where no L3 is reported (then llc == l2).
struct CacheSizes {
  int64_t l1d = 0, l2 = 0, llc = 0;  // per core for L1d/L2; the LLC instance this core shares
  int llc_level = 3;
};
const CacheSizes& cpu_caches();  // read once

// Note [Tuning by microarchitecture]
// Block sizes and the shapes of a few memory-bound walks are chosen per core design, as
// BLIS keeps one config per microarchitecture (config/zen3, zen4, zen5, skx...), never
// per vendor: Zen 4 issues a 512-bit FMA in two halves and Zen 5's server cores do not;
// Zen 3 has no AVX-512 at all. tuning_for() maps the arch and the caches read at run time
// to a CpuTuning; each value is either measured on that design (`basis` says so and
// docs/notes/ holds the sweep) or taken from the nearest measured design and labelled
// so, until a machine of that design runs the sweep (SB_TUNING makes one possible
// without a rebuild). A design we do not know gets values sized from its caches.
// Every benchmark result records the choice (context key sb_tuning, describe_tuning()).
// The fma512 rate is probed, not looked up: a Zen 5 core in a laptop runs 512-bit FMAs at
// half rate where the server core runs them at full rate, with the same family.
struct CpuTuning {
  CpuArch arch = CpuArch::Other;
  std::string basis;             // where the values come from, e.g. "measured on zen4"
  int64_t gemm_kc = 256;         // float32 GEMM block depth (bfloat16 pairs take 2x)
  int64_t gemm_mc = 144;         // rows of a packed A block
  int64_t gemm_nc = 1024;        // columns of a packed B block
  int gemm_tile_cols = 16;       // AVX-512 GEMM tile: 16 (16x16) or 32 (12x32; Note [Wide tile])
  int transpose_band_rows = 16;  // streaming transposes: 16 or 32 source rows per band
  bool transpose_blocks = true;  // wide transposes as pipelined 64-row blocks
  bool zmm16 = false;            // 2-byte transposes through zmm tiles (Note [zmm 2-byte tiles])
  bool zmm16_fill = false;       // and the fill of 2-byte buffers through them (the pipelined
                                 // blocks', the buffered tiles', the elementwise staged tiles')
  int64_t zmm16_lines_min = 16;  // and the streaming 2-byte tile runs, for source rows of at least
                                 // this many elements (Note [Streaming 2-byte tile runs])
  bool zmm16_stage = false;      // and those runs 64 source rows at a time through an L1 stage
                                 // (Note [Staged 2-byte tile runs])
  int64_t bands16_min_bytes = 0;  // 2-byte transposes into near dst rows: streaming bands for outputs
                                  // of at least this many bytes (0: whenever the copy streams),
                                  // plain-store tiles below (Note [Transpose bands])
  bool aliased_transpose_nt = false;  // transposes past the L2 into dst rows a multiple of 2 KiB apart
                                      // stream at any size (Note [Aliased transposes stream])
  int64_t band_read_bytes = 0;    // transpose bands whose source rows lie end to end, up to this
                                  // many bytes, read in address order first (Note [Contiguous
                                  // bands read in order]); 0: never
  bool tiled_partial_nt = false;  // elementwise tiles writing parts of longer out rows stream past the
                                  // threshold too (Note [Streaming elementwise outputs])
  int64_t group_bytes = 512 * 1024;  // elementwise staging: bytes per group of planes
  int group_min = 1;                 // and the fewest planes per group
  int64_t stage_chunk_strips = 8;    // elementwise staging from memory with no dense input beside it:
                                     // strips staged at a time (Note [Chunked staging])
  int64_t copy_nt_bytes = 0;  // dense copies stream above max(this, the streaming threshold), 1.5x
                              // this on 2+ threads; 0: the threshold alone (Note [Dense copies in
                              // the last-level cache], copy.cpp)
  int64_t grain16 = 65536;  // elements: the grain of the 2-byte elementwise loops (Note [Grain in bytes])
  int64_t grain_bytes = 131072;  // bytes: the grain of the other elementwise loops (Note [Grain in bytes])
  bool amx = true;          // the bfloat16 GEMM in AMX tiles where the CPU has them,
  int64_t gemm_amx_kc = 256;  // with KC in k (a multiple of 32: whole tiles)
  int64_t gemm_amx_mc = 32;   // and MC in rows (a multiple of 32)
  bool bf16_dot_runs = true;  // long bfloat16 sums by vdpbf16ps (Note [bfloat16 sums by dot products]),
  int64_t bf16_dot_runs_max = 0;  // for inputs of at most this many bytes (0: any size)
  bool prefetch16 = false;  // 16-bit elementwise loops prefetch their inputs (Note [bfloat16 zmm rows prefetch])
  bool prefetch16_rows = false;  // 16-bit normalize rows from memory and bf16 moments of long runs
                                 // prefetch theirs (Note [16-bit rows prefetch the next group])
  bool var_rows_zmm = false;  // var of short float32 and float16 rows in zmm (Note [Short var rows in zmm])
  bool pool_rows_zmm = true;  // NCHW pooling rows 16 outputs at a time in zmm (Note [Pooling rows in zmm])
  bool sum_runs_zmm = false;  // float32 sums of unit-stride runs 16 lanes a load (Note [float32 sums in zmm])
  bool rows_in_order = false;  // short rows' sums one row after another, in zmm (Note [Short rows in address
                               // order]), and narrow column sums rows in order (Note [Narrow columns in registers])
  bool buf_columns_in_order = false;  // with rows_in_order: float32 column sums of 257-2048 columns rows in
                                      // order through buf (Note [Narrow columns in registers])
};
// The tuning for a core and its caches (pure; the basis says which row was taken).
CpuTuning tuning_for(const CpuId& id, const CacheSizes& caches);
// Applies "key=value,..." (kc, mc, nc, tile, bands, blocks, zmm16, zmm16fill, zmm16lines, zmm16stage, bands16min, aliasnt,
// bandread, tilent, group, group_min, copynt, grain16, grainbytes, amx, amxkc, amxmc, dotruns, dotrunsmax, pf16, pf16rows, varzmm, pool512, sumzmm, rowsinorder, bufcols, chunk) to t; false with *err naming the bad key or value, t
// unchanged.
bool apply_tuning_spec(const char* spec, CpuTuning* t, std::string* err);
// tuning_for(cpu_id(), cpu_caches()), then the SB_TUNING environment variable
// (throws sb::Error naming it when malformed). Read once; tests may swap it (test_hooks.h).
const CpuTuning& cpu_tuning();
std::string describe_tuning(const CpuTuning& t);  // "arch=zen3 kc=512 mc=144 ... (basis)"
// 512-bit FMA throughput over 256-bit, in flops, probed once on first call (about a
// millisecond): ~2 full rate, ~1 half rate (two 256-bit halves, or one 512-bit unit);
// 0 where the level AVX512 is not available. fma512_rate_name: "full", "half", "none".
double cpu_fma512_rate();
const char* fma512_rate_name(double rate);

inline bool use_avx2() {
#ifdef SB_HAVE_AVX2
  return simd_level() >= SimdLevel::AVX2;
#else
  return false;
#endif
}

inline bool use_avx512() {
#if defined(SB_HAVE_AVX2) && defined(SB_HAVE_AVX512)
  return simd_level() == SimdLevel::AVX512;
#else
  return false;
#endif
}

// AVX512_BF16 (vdpbf16ps, vcvtneps2bf16) on the running CPU, read once. Its kernels (the
// bfloat16 GEMM, the float32 -> bfloat16 conversions) belong to the AVX512 level: they
// run where use_avx512() and this hold, so SB_SIMD=avx2 turns them off with the rest.
bool cpu_has_avx512_bf16();
inline bool use_avx512_bf16() { return use_avx512() && cpu_has_avx512_bf16(); }
// Whether 2-byte buffers (the copy's pipelined blocks and buffered tiles, the elementwise
// staged tiles) fill through the zmm 2-byte tiles: the design's zmm16 and zmm16_fill
// (Note [zmm 2-byte tiles]), on an AVX-512 level.
inline bool use_zmm_fill16() { return use_avx512() && cpu_tuning().zmm16 && cpu_tuning().zmm16_fill; }
// The long-run bfloat16 sum by vdpbf16ps against ones, for a reduction of input_bytes,
// where the design's row takes it (CpuTuning::bf16_dot_runs and bf16_dot_runs_max; Note
// [bfloat16 sums by dot products]).
bool use_bf16_dot_runs(int64_t input_bytes);

// AMX-TILE and AMX-BF16 (tdpbf16ps: a 16x16 float32 tile += a 16x32 by 32x16 bfloat16
// product) on the running CPU, with the tile state granted to this process (Linux
// asks for it once: arch_prctl ARCH_REQ_XCOMP_PERM; false where it refuses). Read once.
// The bfloat16 GEMM's tile kernel belongs to the AVX512 level, as the pair kernel does.
// SB_TUNING=amx=0 turns it off (a sweep or an A/B without a rebuild).
bool cpu_has_amx_bf16();
bool use_amx_bf16();
// The tile configuration of every AMX kernel of ours (palette 1; tiles 0-7, each 16 rows
// of 64 bytes), loaded on the calling thread; amx_tiles_end() releases the tiles. Call
// only where cpu_has_amx_bf16().
void amx_tiles_begin();
void amx_tiles_end();

}  // namespace sb
