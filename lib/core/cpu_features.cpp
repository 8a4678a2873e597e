// cpu_features.cpp — the run-time SIMD switch (see cpu_features.h).
//
// Note [Run-time AVX-512]: the level AVX512 needs AVX-512F (float32 FMA on zmm), BW and
// VNNI (vpdpbusd for the int8 kernel) on the running CPU, checked once with
// __builtin_cpu_supports; a CPU with AVX-512F but no VNNI (Skylake-SP) stays at AVX2, so
// that float32 and int8 are always compared on the same vector width.
#include "stridebench/cpu_features.h"

#ifdef __linux__
#include <sys/syscall.h>
#endif
#include <unistd.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "stridebench/error.h"
#include "core/test_hooks.h"

namespace sb {

namespace {
SimdLevel best_level() {
#ifdef SB_HAVE_AVX2
#ifdef SB_HAVE_AVX512
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vnni"))
    return SimdLevel::AVX512;
#endif
  return SimdLevel::AVX2;
#else
  return SimdLevel::Scalar;
#endif
}
SimdLevel initial_level() {
  const SimdLevel best = compiled_simd_level();
  const char* env = std::getenv("SB_SIMD");
  if (env && std::strcmp(env, "scalar") == 0) return SimdLevel::Scalar;
  if (env && std::strcmp(env, "avx2") == 0) return std::min(best, SimdLevel::AVX2);
  return best;
}
// Function-local statics: other translation units (test and benchmark registries) ask
// during their own static initialisation, before any namespace-scope state here exists.
std::atomic<SimdLevel>& level() {
  static std::atomic<SimdLevel> l{initial_level()};
  return l;
}
}  // namespace

SimdLevel compiled_simd_level() {
  static const SimdLevel best = best_level();
  return best;
}

SimdLevel simd_level() { return level().load(std::memory_order_relaxed); }

void set_simd_level(SimdLevel l) {
  if (l > compiled_simd_level()) l = compiled_simd_level();
  level().store(l);
}

namespace {
std::string read_line(const std::string& path) {
  std::string s;
  if (FILE* f = std::fopen(path.c_str(), "r")) {
    char buf[64] = {};
    if (std::fgets(buf, sizeof buf, f)) s = buf;
    std::fclose(f);
  }
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}
// "48K" / "2048K" / "32M" -> bytes; 0 when unreadable
int64_t parse_size(const std::string& s) {
  char* end = nullptr;
  long long v = std::strtoll(s.c_str(), &end, 10);
  if (v <= 0 || end == s.c_str()) return 0;
  if (*end == 'K' || *end == 'k') v <<= 10;
  else if (*end == 'M' || *end == 'm') v <<= 20;
  else if (*end == 'G' || *end == 'g') v <<= 30;
  return v;
}
CacheSizes read_caches() {
  CacheSizes c;
  for (int i = 0; i < 8; ++i) {  // Note [Cache sizes]: sysfs first
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/";
    const std::string level = read_line(dir + "level"), type = read_line(dir + "type");
    if (level.empty()) break;
    if (type == "Instruction") continue;
    const int64_t size = parse_size(read_line(dir + "size"));
    if (level == "1" && c.l1d == 0) c.l1d = size;
    if (level == "2" && c.l2 == 0) c.l2 = size;
    if (level == "3" && c.llc == 0) c.llc = size;
  }
  if (c.l1d == 0) c.l1d = std::max<long>(sysconf(_SC_LEVEL1_DCACHE_SIZE), 0);
  if (c.l2 == 0) c.l2 = std::max<long>(sysconf(_SC_LEVEL2_CACHE_SIZE), 0);
  if (c.llc == 0) c.llc = std::max<long>(sysconf(_SC_LEVEL3_CACHE_SIZE), 0);
  if (c.llc == 0) {
    c.llc = c.l2;
    c.llc_level = 2;
  }
  return c;
}
}  // namespace

CpuVendor cpu_vendor() {
  static const CpuVendor v = [] {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    if (__builtin_cpu_is("amd")) return CpuVendor::AMD;
    if (__builtin_cpu_is("intel")) return CpuVendor::Intel;
#endif
    return CpuVendor::Other;
  }();
  return v;
}

namespace {
CpuId read_cpu_id() {
  CpuId id;
  id.vendor = cpu_vendor();
#if defined(__x86_64__) || defined(__i386__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid(1, &a, &b, &c, &d)) {
    const int base_family = (a >> 8) & 0xF, base_model = (a >> 4) & 0xF;
    id.family = base_family == 0xF ? base_family + static_cast<int>((a >> 20) & 0xFF) : base_family;
    id.model = base_family == 0x6 || base_family == 0xF ? base_model | static_cast<int>(((a >> 16) & 0xF) << 4)
                                                        : base_model;
  }
#endif
  id.arch = arch_of(id.vendor, id.family, id.model);
  return id;
}

// Note [Tuning by microarchitecture]: the rows measured on a design, and what each other
// design takes until it is measured. The sweeps are in docs/notes/gemm.md (KC) and
// docs/notes/copy-reduce.md (transpose bands, zmm 2-byte tiles, staging groups).
CpuTuning zen4_row() {
  CpuTuning t;
  t.gemm_kc = 512;  // Note [KC on Zen 4]
  t.transpose_band_rows = 16;
  t.transpose_blocks = true;
  t.zmm16 = true;  // Note [zmm 2-byte tiles]: faster on Zen 4 too, whose shuffles run in halves;
                   // not the pipelined blocks' fill through them (zmm16_fill), slower there
  t.group_bytes = 512 * 1024;
  t.group_min = 1;
  t.grain16 = 32768;  // Note [Grain in bytes]: PyTorch's grain in elements, the 2-byte loops bound by instructions
  return t;
}
CpuTuning sapphire_rapids_row(const CacheSizes& caches) {
  CpuTuning t;
  t.gemm_kc = 256;
  t.gemm_tile_cols = 32;  // Note [Wide tile]: two full-width 512-bit FMA pipes, as Zen 5
  t.transpose_band_rows = 32;
  t.transpose_blocks = false;
  t.zmm16 = true;           // Note [zmm 2-byte tiles]: the direct tiles and their runs,
  t.zmm16_stage = true;     // the streaming runs 64 source rows at a time (Note [Staged 2-byte
  t.zmm16_lines_min = 64;   // tile runs]), for source rows of 64 elements or more: unstaged,
                            // NHWC -> NCHW of 64 channels ran slower than the buffered tiles here
  t.zmm16_fill = true;      // the buffered 2-byte tiles filled through zmm tiles (no blocks here)
  // Note [Transpose bands]: 2-byte transposes into near dst rows (NCHW -> NHWC) took
  // longer streamed than with plain stores up to outputs of 32-48 MiB on this VM, much
  // less time beyond (docs/notes/copy-reduce.md, "2-byte bands by output size")
  t.bands16_min_bytes = int64_t{48} << 20;
  t.aliased_transpose_nt = true;   // Note [Aliased transposes stream]: measured here only
  t.band_read_bytes = 32 * 1024;  // Note [Contiguous bands read in order]: a 32-row band of 1 KiB rows
  t.tiled_partial_nt = true;  // Note [Streaming elementwise outputs]: measured here only
  t.group_bytes = 128 * 1024;
  t.group_min = 2;
  t.stage_chunk_strips = 16;  // Note [Chunked staging]: a whole source line of float32 a row per chunk
  t.gemm_amx_kc = 256;  // Note [bfloat16 GEMM in AMX tiles]: an A panel and a B sliver in L1
  t.gemm_amx_mc = 32;
  // Note [bfloat16 sums by dot products]: vdpbf16ps runs at half the FMA rate here; its
  // long runs gain in the caches, are level past them and lose from memory: up to four
  // L2s of input (docs/notes/copy-reduce.md, "bfloat16 dot products by input size")
  t.bf16_dot_runs_max = 4 * (caches.l2 > 0 ? caches.l2 : int64_t{2} << 20);
  t.grain16 = 32768;        // Note [Grain in bytes]: as on Zen 4
  t.prefetch16 = true;      // Note [bfloat16 zmm rows prefetch]: 16-bit rows from DRAM at the memory's rate
  t.prefetch16_rows = true;
  t.var_rows_zmm = true;    // Note [Short var rows in zmm]: two full-width 512-bit pipes, as Zen 5's
  // Notes [Short rows in address order], [Narrow columns in registers]: the short rows and
  // the register columns gain here; the wider columns through buf lost
  t.rows_in_order = true;
  return t;
}
int64_t round_down(int64_t x, int64_t m) { return x / m * m; }
bool parse_i64(const std::string& v, int64_t lo, int64_t hi, int64_t* out) {
  char* end = nullptr;
  const long long x = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || x < lo || x > hi) return false;
  *out = x;
  return true;
}
}  // namespace

const char* cpu_arch_name(CpuArch a) {
  switch (a) {
    case CpuArch::Zen: return "zen";
    case CpuArch::Zen2: return "zen2";
    case CpuArch::Zen3: return "zen3";
    case CpuArch::Zen4: return "zen4";
    case CpuArch::Zen5: return "zen5";
    case CpuArch::SkylakeX: return "skylake-x";
    case CpuArch::IceLakeX: return "icelake-x";
    case CpuArch::SapphireRapids: return "sapphire-rapids";
    case CpuArch::GraniteRapids: return "granite-rapids";
    default: return "other";
  }
}

CpuArch arch_of(CpuVendor vendor, int family, int model) {
  if (vendor == CpuVendor::AMD) {
    if (family == 0x17) return model < 0x30 ? CpuArch::Zen : CpuArch::Zen2;
    if (family == 0x19) {
      const bool zen4 = (model >= 0x10 && model <= 0x1F) || (model >= 0x60 && model <= 0x7F) ||
                        (model >= 0xA0 && model <= 0xAF);
      return zen4 ? CpuArch::Zen4 : CpuArch::Zen3;
    }
    if (family == 0x1A) return CpuArch::Zen5;
  }
  if (vendor == CpuVendor::Intel && family == 6) {
    switch (model) {
      case 0x55: return CpuArch::SkylakeX;  // Skylake-SP, Cascade Lake, Cooper Lake
      case 0x6A: case 0x6C: return CpuArch::IceLakeX;
      case 0x8F: case 0xCF: return CpuArch::SapphireRapids;  // and Emerald Rapids
      case 0xAD: case 0xAE: return CpuArch::GraniteRapids;
      default: break;
    }
  }
  return CpuArch::Other;
}

const CpuId& cpu_id() {
  static const CpuId id = read_cpu_id();
  return id;
}

CpuTuning tuning_for(const CpuId& id, const CacheSizes& caches) {
  const CpuArch arch = id.arch;
  CpuTuning t;
  const std::string name = cpu_arch_name(arch);
  switch (arch) {
    case CpuArch::Zen4:
      t = zen4_row();
      t.copy_nt_bytes = caches.llc / 2;  // Note [Dense copies in the last-level cache]: measured on zen4 only
      t.basis = "measured on zen4";
      break;
    case CpuArch::Zen3:
      t = zen4_row();
      t.basis = "zen4's row (on zen3, KC 256, 384 and 512 ran level)";
      break;
    case CpuArch::Zen5:
      t = zen4_row();
      t.gemm_tile_cols = 32;  // Note [Wide tile]: full-width 512-bit FMA pipes
      t.zmm16_fill = true;    // Note [zmm 2-byte tiles]: full-width 512-bit shuffles
      t.zmm16_stage = true;   // Note [Staged 2-byte tile runs], as on Sapphire Rapids
      t.zmm16_lines_min = 64;
      t.grain16 = 65536;      // Note [Grain in bytes]: a second thread joins at 128 KiB
      t.grain_bytes = 262144;  // and at 256 KiB of wider elements
      // Note [Dense copies in the last-level cache]: half of one CCD's 32 MiB L3, as on
      // Zen 4; a VM may report the whole socket's (508 MiB on the family-26 VM), which
      // no one core's copy keeps
      t.copy_nt_bytes = std::min<int64_t>(caches.llc, int64_t{32} << 20) / 2;
      // Note [16-bit rows prefetch the next group]: the normalize rows and the bf16
      // moments gain; the elementwise loops' prefetches (prefetch16) lost here
      t.prefetch16_rows = true;
      t.pool_rows_zmm = false;  // Note [Pooling rows in zmm]: slower than the AVX2 passes here
      t.sum_runs_zmm = true;    // Note [float32 sums in zmm]: long rows from memory gain here
      t.rows_in_order = true;   // Notes [Short rows in address order], [Narrow columns in registers]: L2 rows gain here
      t.buf_columns_in_order = true;
      t.var_rows_zmm = true;    // Note [Short var rows in zmm]: faster on one family-26 VM, level on the other
      t.basis = "measured on zen5 (the tile, the zmm 2-byte tiles, copynt, grain16, grainbytes, pf16rows, pool512, sumzmm, rowsinorder, bufcols and varzmm; the blocks zen4's, level there)";
      break;
    case CpuArch::Zen: case CpuArch::Zen2:
      t = zen4_row();
      t.basis = "zen4's row (not measured on " + name + ")";
      break;
    case CpuArch::SapphireRapids:
      t = sapphire_rapids_row(caches);
      t.basis = "measured on sapphire-rapids";
      break;
    case CpuArch::SkylakeX: case CpuArch::IceLakeX: case CpuArch::GraniteRapids:
      t = sapphire_rapids_row(caches);
      t.basis = "sapphire-rapids's row (not measured on " + name + ")";
      break;
    default: {
      // A design we do not know: the nearest measured row of its vendor; elsewhere the
      // defaults, cut down where the caches are smaller than the ones they were sized on.
      const CpuVendor v = id.vendor;
      if (v == CpuVendor::AMD || v == CpuVendor::Intel) {
        t = v == CpuVendor::AMD ? zen4_row() : sapphire_rapids_row(caches);
        t.basis = std::string(v == CpuVendor::AMD ? "zen4's" : "sapphire-rapids's") + " row (unknown design)";
        break;
      }
      if (caches.l1d > 0 && caches.l1d < 32 * 1024) t.gemm_kc = 128;  // a 16-column B micro-panel in half of L1
      if (caches.l2 > 0)  // the A block in half of L2
        t.gemm_mc = std::clamp<int64_t>(round_down(caches.l2 / 2 / (t.gemm_kc * 4), 16), 16, t.gemm_mc);
      if (caches.llc > 0)  // the B block in half of the LLC
        t.gemm_nc = std::clamp<int64_t>(round_down(caches.llc / 2 / (t.gemm_kc * 4), 16), 256, t.gemm_nc);
      t.basis = "sized from the caches (unknown design)";
    }
  }
  t.arch = arch;
  return t;
}

bool apply_tuning_spec(const char* spec, CpuTuning* out, std::string* err) {
  CpuTuning t = *out;
  std::string s = spec ? spec : "";
  size_t pos = 0;
  while (pos <= s.size() && !s.empty()) {
    const size_t comma = s.find(',', pos);
    const std::string item = s.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    pos = comma == std::string::npos ? s.size() + 1 : comma + 1;
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    const std::string key = item.substr(0, eq), val = eq == std::string::npos ? "" : item.substr(eq + 1);
    int64_t x = 0;
    bool ok = eq != std::string::npos;
    if (key == "kc") ok = ok && parse_i64(val, 8, 8192, &t.gemm_kc);
    else if (key == "mc") ok = ok && parse_i64(val, 1, 1 << 16, &t.gemm_mc);
    else if (key == "nc") ok = ok && parse_i64(val, 1, 1 << 20, &t.gemm_nc);
    else if (key == "tile") ok = ok && parse_i64(val, 16, 32, &x) && (x == 16 || x == 32) && (t.gemm_tile_cols = static_cast<int>(x), true);
    else if (key == "bands") ok = ok && parse_i64(val, 16, 32, &x) && (x == 16 || x == 32) && (t.transpose_band_rows = static_cast<int>(x), true);
    else if (key == "blocks") ok = ok && parse_i64(val, 0, 1, &x) && (t.transpose_blocks = x != 0, true);
    else if (key == "zmm16") ok = ok && parse_i64(val, 0, 1, &x) && (t.zmm16 = x != 0, true);
    else if (key == "zmm16fill") ok = ok && parse_i64(val, 0, 1, &x) && (t.zmm16_fill = x != 0, true);
    else if (key == "zmm16lines") ok = ok && parse_i64(val, 16, int64_t{1} << 40, &t.zmm16_lines_min);
    else if (key == "zmm16stage") ok = ok && parse_i64(val, 0, 1, &x) && (t.zmm16_stage = x != 0, true);
    else if (key == "bands16min") ok = ok && parse_i64(val, 0, int64_t{1} << 50, &t.bands16_min_bytes);
    else if (key == "aliasnt") ok = ok && parse_i64(val, 0, 1, &x) && (t.aliased_transpose_nt = x != 0, true);
    else if (key == "bandread") ok = ok && parse_i64(val, 0, int64_t{1} << 30, &t.band_read_bytes);
    else if (key == "tilent") ok = ok && parse_i64(val, 0, 1, &x) && (t.tiled_partial_nt = x != 0, true);
    else if (key == "group") ok = ok && parse_i64(val, 4096, int64_t{1} << 30, &t.group_bytes);
    else if (key == "group_min") ok = ok && parse_i64(val, 1, 16, &x) && (t.group_min = static_cast<int>(x), true);
    else if (key == "copynt") ok = ok && parse_i64(val, 0, int64_t{1} << 40, &t.copy_nt_bytes);
    else if (key == "grain16") ok = ok && parse_i64(val, 1, int64_t{1} << 40, &t.grain16);
    else if (key == "grainbytes") ok = ok && parse_i64(val, 1, int64_t{1} << 40, &t.grain_bytes);
    else if (key == "amx") ok = ok && parse_i64(val, 0, 1, &x) && (t.amx = x != 0, true);
    else if (key == "amxkc") ok = ok && parse_i64(val, 32, 8192, &x) && x % 32 == 0 && (t.gemm_amx_kc = x, true);
    else if (key == "amxmc") ok = ok && parse_i64(val, 32, 1 << 16, &x) && x % 32 == 0 && (t.gemm_amx_mc = x, true);
    else if (key == "dotruns") ok = ok && parse_i64(val, 0, 1, &x) && (t.bf16_dot_runs = x != 0, true);
    else if (key == "dotrunsmax") ok = ok && parse_i64(val, 0, int64_t{1} << 50, &t.bf16_dot_runs_max);
    else if (key == "pf16") ok = ok && parse_i64(val, 0, 1, &x) && (t.prefetch16 = x != 0, true);
    else if (key == "pf16rows") ok = ok && parse_i64(val, 0, 1, &x) && (t.prefetch16_rows = x != 0, true);
    else if (key == "varzmm") ok = ok && parse_i64(val, 0, 1, &x) && (t.var_rows_zmm = x != 0, true);
    else if (key == "pool512") ok = ok && parse_i64(val, 0, 1, &x) && (t.pool_rows_zmm = x != 0, true);
    else if (key == "sumzmm") ok = ok && parse_i64(val, 0, 1, &x) && (t.sum_runs_zmm = x != 0, true);
    else if (key == "rowsinorder") ok = ok && parse_i64(val, 0, 1, &x) && (t.rows_in_order = x != 0, true);
    else if (key == "bufcols") ok = ok && parse_i64(val, 0, 1, &x) && (t.buf_columns_in_order = x != 0, true);
    else if (key == "chunk") ok = ok && parse_i64(val, 1, 4096, &t.stage_chunk_strips);
    else {
      if (err) *err = "unknown key '" + key + "' (kc, mc, nc, tile, bands, blocks, zmm16, zmm16fill, zmm16lines, zmm16stage, bands16min, aliasnt, bandread, tilent, group, group_min, copynt, grain16, grainbytes, amx, amxkc, amxmc, dotruns, dotrunsmax, pf16, pf16rows, varzmm, pool512, sumzmm, rowsinorder, bufcols, chunk)";
      return false;
    }
    if (!ok) {
      if (err) *err = "bad value in '" + item + "' (kc 8-8192, mc and nc >= 1, tile 16 or 32, bands 16 or 32, blocks, zmm16, zmm16fill, zmm16stage, aliasnt, tilent, pf16, pf16rows, varzmm, pool512, sumzmm, rowsinorder and bufcols 0 or 1, zmm16lines >= 16 elements, bands16min 0-2^50 bytes, bandread 0-2^30 bytes, group >= 4096, group_min 1-16, copynt 0-2^40 bytes, grain16 1-2^40 elements, grainbytes 1-2^40 bytes, dotrunsmax 0-2^50 bytes, chunk 1-4096 strips)";
      return false;
    }
  }
  *out = t;
  return true;
}

std::string describe_tuning(const CpuTuning& t) {
  return "kc=" + std::to_string(t.gemm_kc) + ",mc=" + std::to_string(t.gemm_mc) + ",nc=" + std::to_string(t.gemm_nc) +
         ",tile=" + std::to_string(t.gemm_tile_cols) + ",bands=" + std::to_string(t.transpose_band_rows) + ",blocks=" + (t.transpose_blocks ? "1" : "0") + ",zmm16=" + (t.zmm16 ? "1" : "0") +
         ",zmm16fill=" + (t.zmm16_fill ? "1" : "0") + ",zmm16lines=" + std::to_string(t.zmm16_lines_min) +
         ",zmm16stage=" + (t.zmm16_stage ? "1" : "0") + ",bands16min=" + std::to_string(t.bands16_min_bytes) + ",aliasnt=" + (t.aliased_transpose_nt ? "1" : "0") + ",bandread=" + std::to_string(t.band_read_bytes) + ",tilent=" + (t.tiled_partial_nt ? "1" : "0") +
         ",group=" + std::to_string(t.group_bytes) + ",group_min=" + std::to_string(t.group_min) +
         ",copynt=" + std::to_string(t.copy_nt_bytes) + ",grain16=" + std::to_string(t.grain16) +
         ",grainbytes=" + std::to_string(t.grain_bytes) +
         ",amx=" + (t.amx ? "1" : "0") + ",amxkc=" + std::to_string(t.gemm_amx_kc) +
         ",amxmc=" + std::to_string(t.gemm_amx_mc) + ",dotruns=" + (t.bf16_dot_runs ? "1" : "0") +
         ",dotrunsmax=" + std::to_string(t.bf16_dot_runs_max) + ",pf16=" + (t.prefetch16 ? "1" : "0") +
         ",pf16rows=" + (t.prefetch16_rows ? "1" : "0") + ",varzmm=" + (t.var_rows_zmm ? "1" : "0") +
         ",pool512=" + (t.pool_rows_zmm ? "1" : "0") +
         ",sumzmm=" + (t.sum_runs_zmm ? "1" : "0") +
         ",rowsinorder=" + (t.rows_in_order ? "1" : "0") + ",bufcols=" + (t.buf_columns_in_order ? "1" : "0") +
         ",chunk=" + std::to_string(t.stage_chunk_strips);
}

namespace {
std::atomic<const CpuTuning*> g_tuning_override{nullptr};
CpuTuning machine_tuning() {
  CpuTuning t = tuning_for(cpu_id(), cpu_caches());
  if (const char* env = std::getenv("SB_TUNING"); env && *env) {
    std::string err;
    if (!apply_tuning_spec(env, &t, &err)) throw Error("SB_TUNING='" + std::string(env) + "': " + err);
    t.basis += "; SB_TUNING=" + std::string(env);
  }
  return t;
}
}  // namespace

void set_cpu_tuning(const CpuTuning* t) { g_tuning_override.store(t); }
const CpuTuning* cpu_tuning_override() { return g_tuning_override.load(std::memory_order_acquire); }

const CpuTuning& cpu_tuning() {
  if (const CpuTuning* o = g_tuning_override.load(std::memory_order_acquire)) return *o;
  static const CpuTuning t = machine_tuning();  // a throw leaves it unset: the next call throws again
  return t;
}

#if defined(SB_HAVE_AVX2) && defined(SB_HAVE_AVX512)
namespace {
// Twelve independent FMA chains (more than latency x ports on every core we know) for
// `iters` steps; returns seconds. The sums go to *sink so the chains stay live.
__attribute__((target("avx512f"))) double fma_chains512(int64_t iters, float* sink) {
  __m512 acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = _mm512_set1_ps(1.0f + 0.01f * i);
  const __m512 m = _mm512_set1_ps(0.999999f), a = _mm512_set1_ps(1e-7f);
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t k = 0; k < iters; ++k)
    for (int i = 0; i < 12; ++i) acc[i] = _mm512_fmadd_ps(acc[i], m, a);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  float out[16];
  for (int i = 0; i < 12; ++i) {
    _mm512_storeu_ps(out, acc[i]);
    *sink += out[0];
  }
  return s;
}
__attribute__((target("avx2,fma"))) double fma_chains256(int64_t iters, float* sink) {
  __m256 acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = _mm256_set1_ps(1.0f + 0.01f * i);
  const __m256 m = _mm256_set1_ps(0.999999f), a = _mm256_set1_ps(1e-7f);
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t k = 0; k < iters; ++k)
    for (int i = 0; i < 12; ++i) acc[i] = _mm256_fmadd_ps(acc[i], m, a);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  float out[8];
  for (int i = 0; i < 12; ++i) {
    _mm256_storeu_ps(out, acc[i]);
    *sink += out[0];
  }
  return s;
}
double probe_fma512_rate() {
  if (compiled_simd_level() != SimdLevel::AVX512) return 0;
  constexpr int64_t kIters = 20000;  // 240k FMAs per try: well under a millisecond
  float sink = 0;
  double best256 = 1e9, best512 = 1e9;
  for (int r = 0; r < 7; ++r) {  // alternating, best of each: the probe's noise is other tenants
    best256 = std::min(best256, fma_chains256(kIters, &sink));
    best512 = std::min(best512, fma_chains512(kIters, &sink));
  }
  volatile float keep = sink;
  (void)keep;
  return 2.0 * best256 / best512;  // a 512-bit FMA does twice a 256-bit one's flops
}
}  // namespace
#endif

double cpu_fma512_rate() {
#if defined(SB_HAVE_AVX2) && defined(SB_HAVE_AVX512)
  static const double r = probe_fma512_rate();
  return r;
#else
  return 0;
#endif
}

const char* fma512_rate_name(double r) {
  if (r <= 0) return "none";
  return r >= 1.6 ? "full" : r <= 1.3 ? "half" : "between";
}

bool cpu_has_avx512_bf16() {
  static const bool has = [] {
#if defined(SB_HAVE_AVX2) && defined(SB_HAVE_AVX512) && (defined(__x86_64__) || defined(__i386__))
    // cpuid leaf 7, subleaf 1: EAX bit 5 is AVX512_BF16 (GCC 12's __builtin_cpu_supports
    // does not know the name)
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (__get_cpuid_max(0, nullptr) < 7) return false;
    __cpuid_count(7, 1, a, b, c, d);
    return (a & (1u << 5)) != 0;
#else
    return false;
#endif
  }();
  return has;
}

bool cpu_has_amx_bf16() {
  static const bool has = [] {
#if defined(SB_HAVE_AMX) && defined(__linux__) && defined(__x86_64__)
    // cpuid leaf 7, subleaf 0: EDX bit 22 AMX-BF16, bit 24 AMX-TILE; XCR0 bits 17 and 18:
    // the OS saves the tile configuration and data. Linux then grants the tile data per
    // process on request (arch/x86/include/uapi/asm/prctl.h: ARCH_REQ_XCOMP_PERM 0x1023,
    // XFEATURE_XTILEDATA 18); without the grant the first tile load faults.
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (__get_cpuid_max(0, nullptr) < 7) return false;
    __cpuid(1, a, b, c, d);
    if ((c & (1u << 27)) == 0) return false;  // OSXSAVE: xgetbv may be read
    __cpuid_count(7, 0, a, b, c, d);
    if ((d & (1u << 22)) == 0 || (d & (1u << 24)) == 0) return false;
    unsigned lo = 0, hi = 0;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    if ((lo & (3u << 17)) != (3u << 17)) return false;
    return syscall(SYS_arch_prctl, 0x1023, 18) == 0;
#else
    return false;
#endif
  }();
  return has;
}

bool use_amx_bf16() { return use_avx512() && cpu_has_amx_bf16() && cpu_tuning().amx; }

#ifdef SB_HAVE_AMX
namespace {
struct alignas(64) TileConfig {  // ldtilecfg's 64 bytes
  uint8_t palette = 1, start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};
}  // namespace
__attribute__((target("amx-tile"))) void amx_tiles_begin() {
  TileConfig cfg;
  for (int t = 0; t < 8; ++t) cfg.colsb[t] = 64, cfg.rows[t] = 16;
  // GCC 12's _tile_loadconfig tells the compiler it reads 8 bytes of cfg, which lets it
  // drop the stores above: the 64 bytes escape here first.
  __asm__ volatile("" : : "r"(&cfg) : "memory");
  _tile_loadconfig(&cfg);
}
__attribute__((target("amx-tile"))) void amx_tiles_end() { _tile_release(); }
#else
void amx_tiles_begin() { SB_INTERNAL_ASSERT(false, "amx_tiles_begin: not an AMX build"); }
void amx_tiles_end() {}
#endif
bool use_bf16_dot_runs(int64_t input_bytes) {
  const CpuTuning& t = cpu_tuning();
  return use_avx512_bf16() && t.bf16_dot_runs && (t.bf16_dot_runs_max == 0 || input_bytes <= t.bf16_dot_runs_max);
}

const CacheSizes& cpu_caches() {
  static const CacheSizes c = read_caches();
  return c;
}

const char* simd_level_name(SimdLevel l) {
  switch (l) {
    case SimdLevel::AVX512: return "avx512+avx2+fma+f16c";
    case SimdLevel::AVX2: return "avx2+fma+f16c";
    default: return "scalar";
  }
}

}  // namespace sb
