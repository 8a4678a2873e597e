// cpu_features.cpp — the run-time SIMD switch (see cpu_features.h).
//
// Note [Run-time AVX-512]: the level AVX512 needs AVX-512F (float32 FMA on zmm), BW and
// VNNI (vpdpbusd for the int8 kernel) on the running CPU, checked once with
// __builtin_cpu_supports; a CPU with AVX-512F but no VNNI (Skylake-SP) stays at AVX2, so
// that float32 and int8 are always compared on the same vector width.
#include "core/cpu_features.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>

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

const char* simd_level_name(SimdLevel l) {
  switch (l) {
    case SimdLevel::AVX512: return "avx512(gemm,conv,int8)+avx2+fma+f16c";
    case SimdLevel::AVX2: return "avx2+fma+f16c";
    default: return "scalar";
  }
}

}  // namespace sb
