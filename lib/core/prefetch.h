// prefetch.h — how far ahead the 16-bit loops' software prefetches reach (internal).
#pragma once
#include <cstdint>

namespace sb {

// Note [bfloat16 zmm rows prefetch] (elementwise/strips16.h): the 16-bit elementwise
// loops, the bf16 long sums and moments (reduce_kernels.h, reduce_rows.h) prefetch their inputs this many
// bytes ahead, one line a step, where CpuTuning::prefetch16 says so.
constexpr int64_t kPrefetch16Ahead = 2048;

}  // namespace sb
