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
#include "core/tensor.h"

namespace sb {

void copy_kernel(const Tensor& dst, const Tensor& src);
void fill_kernel(const Tensor& t, double value);

// The reference strided copy: one element at a time, any layout, any dtype pair.
// Always compiled; the fast paths must agree with it (tests/copy_test.cpp).
void copy_generic(const Tensor& dst, const Tensor& src);

// ---- introspection for tests (not a user API) ----
// Which path the last CPU copy_kernel / fill_kernel call on this process took, and
// whether it used non-temporal stores, so tests can prove a fast path actually ran.
enum class CopyPath : uint8_t { Empty, Memcpy, Rows, Tiled, Strided, Convert, Fill, FillStrided };
const char* copy_path_name(CopyPath p);
CopyPath last_copy_path();
bool last_copy_used_nt();
// Tiled path: whether 4-byte tiles went straight to memory as streaming bands (copy.cpp,
// Note [Transpose bands]: 16 or 32, the band's source rows) or pipelined blocks (Note
// [Pipelined transpose blocks]: 64) rather than through the L1 tile buffer (0).
int last_copy_band_rows();
// The streaming transposes' shape: 16 or 32 source rows per band (Note [Transpose bands])
// or 64, the pipelined blocks (Note [Pipelined transpose blocks]), and whether tasks walk
// the source rows' direction fastest. Chosen per CPU vendor and, on AMD and others, per
// copy (blocks where dst rows are 4 KiB or more apart and source rows 1024 elements or
// longer, else 16-row bands); tests force each (rows = 0: back to the automatic choice).
void set_transpose_bands(int rows, bool source_rows_outer);
// Outputs larger than this many bytes take non-temporal (streaming) stores. Default:
// min(last-level cache, 2 x cores x L2), detected once (copy.cpp, Note [Streaming
// threshold]). Tests set 0 to force streaming at small sizes; negative: the default.
void set_nt_threshold_bytes(int64_t bytes);
int64_t nt_threshold_bytes();

}  // namespace sb
