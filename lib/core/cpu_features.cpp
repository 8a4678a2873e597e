// cpu_features.cpp — the run-time SIMD switch (see cpu_features.h).
//
// Note [Run-time AVX-512]: the level AVX512 needs AVX-512F (float32 FMA on zmm), BW and
// VNNI (vpdpbusd for the int8 kernel) on the running CPU, checked once with
// __builtin_cpu_supports; a CPU with AVX-512F but no VNNI (Skylake-SP) stays at AVX2, so
// that float32 and int8 are always compared on the same vector width.
#include "stridebench/cpu_features.h"

#include <unistd.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

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

const CacheSizes& cpu_caches() {
  static const CacheSizes c = read_caches();
  return c;
}

const char* simd_level_name(SimdLevel l) {
  switch (l) {
    case SimdLevel::AVX512: return "avx512(gemm,conv,int8)+avx2+fma+f16c";
    case SimdLevel::AVX2: return "avx2+fma+f16c";
    default: return "scalar";
  }
}

}  // namespace sb
