// parallel.h — the one place OpenMP is used: parallel_for over [begin, end) in
// chunks of at least `grain` iterations, run serially below that or when built
// without OpenMP. Thread count: OMP_NUM_THREADS, or set_num_threads().
#pragma once
#include <algorithm>
#include <cstdint>

#ifdef _OPENMP
#include <omp.h>
#endif

namespace sb {

constexpr int64_t kGrainSize = 32768;  // elements: below this, one thread does it all

// Note [Grain in bytes]
// PyTorch's grain, 32768 elements, sizes a thread's share of a memory-bound loop for
// 4-byte elements: 128 KiB. The elementwise loops take their grain from the core
// design's tuning (ew_grain in elementwise.cpp): for 1-, 4- and 8-byte elements in
// bytes (CpuTuning::grain_bytes), for 2-byte ones in elements (CpuTuning::grain16). A
// 2-byte loop moves half the bytes of a float32 one per element but, bound by its
// conversions at cache sizes, costs about as many instructions per element, so its
// grain is counted apart. Whether a second thread pays for itself at 64 K elements is
// the machine's: Zen 4 and Sapphire Rapids split them (128 KiB, PyTorch's; 2-byte rows
// at 32768 elements, faster split there); Zen 5 keeps them on one thread (256 KiB;
// 65536 elements), since there a fork and join cost more than the work of an L2-size
// float32 row (all measured: docs/notes/elementwise.md).

inline int get_num_threads() {
#ifdef _OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}

inline void set_num_threads(int n) {
#ifdef _OPENMP
  omp_set_num_threads(std::max(n, 1));
#else
  (void)n;
#endif
}

inline bool in_parallel_region() {
#ifdef _OPENMP
  return omp_in_parallel();
#else
  return false;
#endif
}

// f(chunk_begin, chunk_end) on each thread's contiguous share of [begin, end).
template <typename F>
void parallel_for(int64_t begin, int64_t end, int64_t grain, const F& f) {
  const int64_t n = end - begin;
  if (n <= 0) return;
#ifdef _OPENMP
  const int64_t max_chunks = grain > 0 ? (n + grain - 1) / grain : n;
  const int nt = static_cast<int>(std::min<int64_t>(omp_get_max_threads(), max_chunks));
  if (nt > 1 && !omp_in_parallel()) {
#pragma omp parallel num_threads(nt)
    {
      // the team OpenMP gave, which may be smaller than asked (OMP_THREAD_LIMIT)
      const int tid = omp_get_thread_num(), got = omp_get_num_threads();
      const int64_t chunk = (n + got - 1) / got;
      const int64_t b = begin + tid * chunk;
      const int64_t e = std::min(end, b + chunk);
      if (b < e) f(b, e);
    }
    return;
  }
#else
  (void)grain;
#endif
  f(begin, end);
}

}  // namespace sb
