// cpu_features.cpp — the run-time SIMD switch (see cpu_features.h).
#include "core/cpu_features.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

namespace sb {

namespace {
SimdLevel initial_level() {
  const char* env = std::getenv("SB_SIMD");
  if (env && std::strcmp(env, "scalar") == 0) return SimdLevel::Scalar;
  return compiled_simd_level();
}
std::atomic<SimdLevel> g_level{initial_level()};
}  // namespace

SimdLevel compiled_simd_level() {
#ifdef SB_HAVE_AVX2
  return SimdLevel::AVX2;
#else
  return SimdLevel::Scalar;
#endif
}

SimdLevel simd_level() { return g_level.load(std::memory_order_relaxed); }

void set_simd_level(SimdLevel level) {
  if (level > compiled_simd_level()) level = compiled_simd_level();
  g_level.store(level);
}

const char* simd_level_name(SimdLevel level) { return level == SimdLevel::AVX2 ? "avx2+fma+f16c" : "scalar"; }

}  // namespace sb
