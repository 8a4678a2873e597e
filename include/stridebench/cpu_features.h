// cpu_features.h — which SIMD path the CPU kernels take.
//
// Levels: Scalar (plain C, always compiled), AVX2 (AVX2+FMA+F16C: every kernel), and
// AVX512 (AVX-512F/BW/VNNI: the compute-bound kernels: the float32 GEMM micro-kernel,
// the direct conv2d kernel and the int8 kernel; and the k-masked stores of elementwise
// outputs through a stepped slice (elementwise.cpp, Note [Masked stores]); every other
// kernel keeps its AVX2 path, which is memory-bound anyway).
// AVX2 is chosen at build time (meson option `simd`, default: when the compiler and the
// building CPU have it; see meson.build). The AVX-512 kernels are compiled with function
// target attributes whenever the compiler supports them (SB_HAVE_AVX512) and taken only
// when the running CPU reports all three extensions (Note [Run-time AVX-512]).
// The level can be lowered at run time (set_simd_level, or SB_SIMD=scalar / SB_SIMD=avx2
// in the environment) so every path is tested and measurable on the same machine.
#pragma once
#include <cstdint>

namespace sb {

enum class SimdLevel : uint8_t { Scalar, AVX2, AVX512 };

SimdLevel compiled_simd_level();  // the best path this build has on this CPU
SimdLevel simd_level();           // the path kernels take now
void set_simd_level(SimdLevel level);  // clamps to compiled_simd_level()
const char* simd_level_name(SimdLevel level);

// Who made the CPU (cpuid's vendor string): a few memory-bound kernels are tuned per
// vendor where the two machines we measure on disagree (copy.cpp, Note [Transpose bands]).
enum class CpuVendor : uint8_t { Intel, AMD, Other };
CpuVendor cpu_vendor();

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

}  // namespace sb
