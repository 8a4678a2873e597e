// copy.h — moving elements between layouts, dtypes and devices.
//
//   copy_kernel(dst, src)  dst[i] = convert(src[i]) for every index of dst, src
//                          already broadcast-checked to dst's sizes (stride 0 where
//                          it is expanded). Backs Tensor::copy_, contiguous, clone,
//                          reshape, to(). Cost: one read of src, one write of dst.
//   fill_kernel(t, v)      t[i] = v.
//
// The generic path walks any layout in dst's index order; fast paths for
// same-dtype contiguous, transposed (cache-blocked) and channels-last copies live in
// copy.cpp beside it. CUDA tensors go to lib/cuda.
#pragma once
#include "stridebench/tensor.h"

namespace sb {

void copy_kernel(const Tensor& dst, const Tensor& src);
void fill_kernel(const Tensor& t, double value);

// The reference strided copy: one element at a time, any layout, any dtype pair.
// Always compiled; the fast paths must agree with it (tests/copy_test.cpp).
void copy_generic(const Tensor& dst, const Tensor& src);

// Outputs larger than this many bytes take non-temporal (streaming) stores. Default:
// min(last-level cache, 2 x cores x L2), detected once (copy.cpp, Note [Streaming
// threshold]); tests move it (core/test_hooks.h).
int64_t nt_threshold_bytes();

// d[0 .. n) = s[0 .. n) converted between float32 and float16 or bfloat16, unit strides,
// a vector at a time (copy.cpp, Note [Vector conversions]); nt: streaming stores from the
// first aligned vector on (the caller issues the fence). D, S: one of float, Half,
// BFloat16 and the other float.
template <typename D, typename S>
void convert_unit_stride(D* d, const S* s, int64_t n, bool nt);

}  // namespace sb
