// cpu_features.h — which SIMD path the CPU kernels take.
//
// The level is fixed at build time (meson option `simd`, default: AVX2+FMA+F16C when
// the compiler and the building CPU have them; see meson.build), and can be lowered at
// run time to Scalar (set_simd_level, or SB_SIMD=scalar in the environment) so the
// scalar fallback, always compiled, is tested and measurable on the same machine.
#pragma once
#include <cstdint>

namespace sb {

enum class SimdLevel : uint8_t { Scalar, AVX2 };

SimdLevel compiled_simd_level();  // the best path this build has
SimdLevel simd_level();           // the path kernels take now
void set_simd_level(SimdLevel level);  // clamps to compiled_simd_level()
const char* simd_level_name(SimdLevel level);

inline bool use_avx2() {
#ifdef SB_HAVE_AVX2
  return simd_level() == SimdLevel::AVX2;
#else
  return false;
#endif
}

}  // namespace sb
