// copy.cu — copies to, from and between GPUs, fill, and the asynchronous to_async.
//
// Paths (counted in CopyPathCounts):
//   memcpy      same dtype, same sizes and strides, both non-overlapping and dense:
//               one cudaMemcpy of numel * element_size bytes (H2D, D2H, D2D, peer)
//   transpose   on one device, same dtype, when (after ordering by dst strides and
//               coalescing) dst is contiguous in its last dim and src in the one
//               before: a batched 2-D transpose through 64x65 shared-memory tiles,
//               so both the read and the write are coalesced (2-byte elements on
//               4-byte boundaries: 64x128 or 64x64 tiles in pairs, Note [Paired 2-byte
//               transpose tiles]). NCHW <-> NHWC and .t().contiguous() take it.
//   strided     on one device, anything else: dst[off_d(i)] = convert(src[off_s(i)])
//               over the flat index (kernel_util.cuh)
//   staged      between host and device when the layouts or dtypes differ: the
//               conversion / gather runs on the side that has the data (the CPU copy
//               on the host, the strided kernel on the device) into a dense staging
//               buffer, then one cudaMemcpy
// Cost: one read of src, one write of dst (the staged path adds one pass over the
// staging buffer). H2D/D2H from pageable memory goes through the driver's pinned
// bounce buffer (about half the PCIe rate); from pinned memory (pinned_empty) it is
// DMA at the link rate, and to_async overlaps it with other work.
#include <atomic>

#include "cuda/cuda_backend.h"
#include "cuda/kernel_util.cuh"

namespace sb::cuda {

int sm_count(int device) {
  return per_device_once(device, [](int d) {
    int c = 0;
    SB_CUDA_CHECK(cudaDeviceGetAttribute(&c, cudaDevAttrMultiProcessorCount, d));
    return c;
  });
}

namespace {

std::atomic<int64_t> g_memcpy{0}, g_strided{0}, g_transpose{0}, g_transpose_pairs{0}, g_staged{0};

bool dense(const Tensor& t) { return t.is_non_overlapping_and_dense(); }

// dst and src cover the same bytes in the same order: one memcpy moves everything.
bool memcpy_compatible(const Tensor& dst, const Tensor& src) {
  return dst.dtype() == src.dtype() && dst.sizes() == src.sizes() && dense(dst) && dense(src) &&
         (dst.strides() == src.strides() || (dst.is_contiguous() && src.is_contiguous()));
}

// ---------------------------------------------------------------- kernels

template <typename D, typename S>
__global__ void strided_copy_kernel(D* dst, const S* src, OffsetCalc<2> it, int64_t n) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    int64_t off[2];
    it.get(i, off);
    dst[off[0]] = cvt<D>(src[off[1]]);
  }
}

template <typename T>
__global__ void fill_kernel(T* t, OffsetCalc<1> it, int64_t n, T value) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    int64_t off[1];
    it.get(i, off);
    t[off[0]] = value;
  }
}

constexpr int kTile = 64;      // tile edge, elements
constexpr int kTileRows = 8;   // block (32, kTileRows): each thread moves 2 x 8 elements

// dst[b][i][j] = src[b][i][j] where dst is contiguous along j (stride 1) and src along
// i (stride 1): block (32, 8) reads a 64x64 tile along i (coalesced in src: a warp reads
// 32 adjacent elements, twice), writes it along j (coalesced in dst); the tile has 65
// columns so that the column reads of the write phase hit 32 different banks. A 32x32
// tile (4 elements a thread) stayed well below the device-to-device copy on an H100;
// 64x64 keeps 16 loads in flight per thread (docs/notes/cuda.md). Batches (any strides)
// come from `walk` (Note [Batched tile walks]). transpose_kernel_5 asks for five
// blocks an SM for 2-, 4- and 8-byte elements: 48 registers without a spill, a quarter
// more warps than nvcc's 56 registers allow; the 1-byte tile spills under any bound
// and keeps transpose_kernel (48 registers unbounded).
template <typename T>
__device__ __forceinline__ void transpose_tiles(T* dst, const T* src, const TileWalk<2>& walk,
                                                int64_t dst_row_stride, int64_t src_col_stride) {
  __shared__ T tile[kTile][kTile + 1];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t rows = walk.rows, cols = walk.cols;
  walk.template each<kTile, kTile>([&](const int64_t (&off)[2], int64_t i0, int64_t j0) {
    T* d = dst + off[0];
    const T* s = src + off[1];
    // read: i = i0 + tx + c (contiguous in src), j = j0 + ty + k
#pragma unroll
    for (int c = 0; c < kTile; c += 32) {
      const int64_t i = i0 + tx + c;
#pragma unroll
      for (int k = 0; k < kTile; k += kTileRows) {
        const int64_t j = j0 + ty + k;
        if (i < rows && j < cols) tile[ty + k][tx + c] = s[i + j * src_col_stride];
      }
    }
    __syncthreads();
    // write: j = j0 + tx + c (contiguous in dst), i = i0 + ty + k
#pragma unroll
    for (int c = 0; c < kTile; c += 32) {
      const int64_t j = j0 + tx + c;
#pragma unroll
      for (int k = 0; k < kTile; k += kTileRows) {
        const int64_t ii = i0 + ty + k;
        if (ii < rows && j < cols) d[ii * dst_row_stride + j] = tile[tx + c][ty + k];
      }
    }
    __syncthreads();  // the tile is reused by the next iteration
  });
}

template <typename T>
__global__ void transpose_kernel(T* dst, const T* src, TileWalk<2> walk, int64_t dst_row_stride,
                                 int64_t src_col_stride) {
  transpose_tiles(dst, src, walk, dst_row_stride, src_col_stride);
}

template <typename T>
__global__ void __launch_bounds__(32 * kTileRows, 5)
    transpose_kernel_5(T* dst, const T* src, TileWalk<2> walk, int64_t dst_row_stride, int64_t src_col_stride) {
  transpose_tiles(dst, src, walk, dst_row_stride, src_col_stride);
}

// Note [Paired 2-byte transpose tiles]
// For 2-byte elements the element tile above moves 64 bytes a warp instruction, half of
// what it moves for 4-byte ones. Where both sides allow 4-byte words (below), a
// 64 (i) x 128 (j) tile moves as 32-bit words only: in the read phase a thread loads the
// words (i, i + 1) of columns j and j + 1 and turns that 2x2 block, with two byte
// permutes, into the words (j, j + 1) of rows i and i + 1; the shared tile holds row
// words, so the write phase stores each word as it loads it. Per word: one global load,
// one shared store, one shared load, one global store; 16 words a thread each way, as
// the 4-byte tile. Word w of tile row r sits at column (w + r / 2) % 64, so the read
// phase's stores (rows 2tx and 2tx + 1, one word column a warp) and the write phase's
// loads (one row, words tx and tx + 32) each hit 32 distinct banks (64 x 64 tiles, where
// the columns are 64 or fewer: 32 words a row, at column (w + r / 2) % 32). A tile of 2-byte
// elements at an odd pitch (two 16-bit shared accesses per word each way) was slower
// than the element tile (docs/notes/cuda.md).
// Needs: src 4-byte aligned with every stride but the unit one even, dst likewise, so
// that every word lies on a 4-byte boundary (the launch checks); a ragged last pair of
// a tile (an odd row or column count) moves one element. Full tiles skip the bounds.
// __launch_bounds__(256, 4): 64 registers, no spill, four blocks an SM as the element
// tile's 56 registers allow; 96 without it, two blocks an SM.
// Where the columns are 64 or fewer (NCHW -> NHWC with C <= 64), a 128-wide tile would
// move half its width in bounds checks: a 64 x 64 tile (32 words a row, 8 a thread each
// way) runs instead, kWords the template argument.
constexpr int kPairI = 64, kPairWideWords = 64, kPairNarrowWords = 32;

template <int kWords, bool kFull>
__device__ __forceinline__ void transpose_pair_tile(uint16_t* d, const uint16_t* s, uint32_t (&tile)[kPairI][kWords],
                                                    int64_t rows, int64_t cols, int64_t i0, int64_t j0,
                                                    int64_t dst_row_stride, int64_t src_col_stride) {
  const int tx = threadIdx.x, ty = threadIdx.y;
  // read: the words (i, i + 1) of columns j = j0 + 2 w and j + 1, w = ty + 8 q
  const int64_t i = i0 + 2 * tx;
#pragma unroll
  for (int q = 0; q < kWords / kTileRows; ++q) {
    const int w = ty + kTileRows * q;
    const int64_t j = j0 + 2 * w;
    const uint16_t* p = s + i + j * src_col_stride;
    uint32_t w0 = 0, w1 = 0;
    if (kFull) {
      w0 = *reinterpret_cast<const uint32_t*>(p);
      w1 = *reinterpret_cast<const uint32_t*>(p + src_col_stride);
    } else if (i < rows) {
      const bool pair = i + 1 < rows;
      if (j < cols) w0 = pair ? *reinterpret_cast<const uint32_t*>(p) : p[0];
      if (j + 1 < cols) w1 = pair ? *reinterpret_cast<const uint32_t*>(p + src_col_stride) : p[src_col_stride];
    }
    const int col = (w + tx) % kWords;              // rows 2tx and 2tx + 1: r / 2 = tx
    tile[2 * tx][col] = __byte_perm(w0, w1, 0x5410);      // (i, j), (i, j + 1)
    tile[2 * tx + 1][col] = __byte_perm(w0, w1, 0x7632);  // (i + 1, j), (i + 1, j + 1)
  }
  __syncthreads();
  // write: the words w = tx + 32 c, elements (j, j + 1) = j0 + 2 w, of rows i0 + ty + 8 k
#pragma unroll
  for (int k = 0; k < kPairI / kTileRows; ++k) {
    const int r = ty + kTileRows * k;
    const int64_t ii = i0 + r;
    uint16_t* row = d + ii * dst_row_stride + j0;
#pragma unroll
    for (int c = 0; c < kWords; c += 32) {
      const int w = tx + c;
      const uint32_t word = tile[r][(w + r / 2) % kWords];
      if (kFull) {
        *reinterpret_cast<uint32_t*>(row + 2 * w) = word;
      } else if (ii < rows && j0 + 2 * w < cols) {
        if (j0 + 2 * w + 1 < cols)
          *reinterpret_cast<uint32_t*>(row + 2 * w) = word;
        else
          row[2 * w] = static_cast<uint16_t>(word);
      }
    }
  }
  __syncthreads();  // the tile is reused by the next iteration
}

template <int kWords>
__global__ void __launch_bounds__(32 * kTileRows, 4)
    transpose_pairs_kernel(uint16_t* dst, const uint16_t* src, TileWalk<2> walk, int64_t dst_row_stride,
                           int64_t src_col_stride) {
  __shared__ uint32_t tile[kPairI][kWords];
  const int64_t rows = walk.rows, cols = walk.cols;
  walk.each<kPairI, 2 * kWords>([&](const int64_t (&off)[2], int64_t i0, int64_t j0) {
    if (i0 + kPairI <= rows && j0 + 2 * kWords <= cols)  // uniform over the block
      transpose_pair_tile<kWords, true>(dst + off[0], src + off[1], tile, rows, cols, i0, j0, dst_row_stride,
                                        src_col_stride);
    else
      transpose_pair_tile<kWords, false>(dst + off[0], src + off[1], tile, rows, cols, i0, j0, dst_row_stride,
                                         src_col_stride);
  });
}

// Whether every word of the paired kernel lies on a 4-byte boundary on both sides.
bool pairs_aligned(const void* dst, const void* src, const OffsetCalc<2>& it) {
  if (reinterpret_cast<uintptr_t>(dst) % 4 != 0 || reinterpret_cast<uintptr_t>(src) % 4 != 0) return false;
  const int nd = it.ndim;
  for (int d = 0; d < nd; ++d) {
    if (d != nd - 1 && it.strides[0][d] % 2 != 0) return false;  // dst: unit stride along the last dim
    if (d != nd - 2 && it.strides[1][d] % 2 != 0) return false;  // src: unit stride along the one before
  }
  return true;
}

template <int N> struct UInt;
template <> struct UInt<1> { using type = uint8_t; };
template <> struct UInt<2> { using type = uint16_t; };
template <> struct UInt<4> { using type = uint32_t; };
template <> struct UInt<8> { using type = uint64_t; };

// dst and src on one device (the current one), src broadcast to dst's sizes.
void copy_same_device(const Tensor& dst, const Tensor& src) {
  const int64_t n = dst.numel();
  if (n == 0) return;
  const int dev = dst.device().index;
  if (memcpy_compatible(dst, src)) {
    SB_CUDA_CHECK(cudaMemcpyAsync(dst.data_ptr(), src.data_ptr(), dst.nbytes(), cudaMemcpyDeviceToDevice, 0));
    ++g_memcpy;
    return;
  }
  const Shape sst = broadcast_strides(src, dst.sizes());
  const Shape* sp[2] = {&dst.strides(), &sst};
  const OffsetCalc<2> it = make_iter<2>(dst.sizes(), sp, "copy_");
  const int nd = it.ndim;
  if (dst.dtype() == src.dtype() && nd >= 2 && it.strides[0][nd - 1] == 1 && it.strides[1][nd - 2] == 1 &&
      it.strides[1][nd - 1] != 1 && it.sizes[nd - 1] >= 4 && it.sizes[nd - 2] >= 4) {
    // batched transpose: rows = dim nd-2 (i), cols = dim nd-1 (j) (Note [Batched tile walks])
    const dim3 block(32, kTileRows);
    const int64_t dst_row_stride = it.strides[0][nd - 2], src_col_stride = it.strides[1][nd - 1];
    if (dst.element_size() == 2 && pairs_aligned(dst.data_ptr(), src.data_ptr(), it)) {
      auto* d = static_cast<uint16_t*>(dst.data_ptr());
      const auto* s = static_cast<const uint16_t*>(src.data_ptr());
      if (it.sizes[nd - 1] <= 2 * kPairNarrowWords) {
        const TileWalk<2> walk = tile_walk(it, kPairI, 2 * kPairNarrowWords);
        transpose_pairs_kernel<kPairNarrowWords><<<walk.grid(), block>>>(d, s, walk, dst_row_stride, src_col_stride);
      } else {
        const TileWalk<2> walk = tile_walk(it, kPairI, 2 * kPairWideWords);
        transpose_pairs_kernel<kPairWideWords><<<walk.grid(), block>>>(d, s, walk, dst_row_stride, src_col_stride);
      }
      SB_CUDA_LAUNCH_CHECK();
      ++g_transpose;
      ++g_transpose_pairs;
      return;
    }
    const TileWalk<2> walk = tile_walk(it, kTile, kTile);
    switch (dst.element_size()) {
#define SB_TRANSPOSE_CASE(N, KERNEL)                                                                      \
  case N:                                                                                                 \
    KERNEL<UInt<N>::type><<<walk.grid(), block>>>(static_cast<UInt<N>::type*>(dst.data_ptr()),            \
                                                  static_cast<const UInt<N>::type*>(src.data_ptr()), walk, \
                                                  dst_row_stride, src_col_stride);                        \
    break;
      SB_TRANSPOSE_CASE(1, transpose_kernel)
      SB_TRANSPOSE_CASE(2, transpose_kernel_5)
      SB_TRANSPOSE_CASE(4, transpose_kernel_5)
      SB_TRANSPOSE_CASE(8, transpose_kernel_5)
#undef SB_TRANSPOSE_CASE
      default: SB_INTERNAL_ASSERT(false, "copy_: element size ", dst.element_size());
    }
    SB_CUDA_LAUNCH_CHECK();
    ++g_transpose;
    return;
  }
  SB_CUDA_DISPATCH_ALL(dst.dtype(), "copy_", {
    using D = scalar_t;
    SB_CUDA_DISPATCH_ALL(src.dtype(), "copy_", {
      strided_copy_kernel<D, scalar_t><<<grid_for(n, dev), kThreads>>>(
          static_cast<D*>(dst.data_ptr()), static_cast<const scalar_t*>(src.data_ptr()), it, n);
      SB_CUDA_LAUNCH_CHECK();
    });
  });
  ++g_strided;
}

// An uninitialised tensor with t's sizes and strides (t dense) on `device`.
Tensor empty_same_layout(const Tensor& t, DType dtype, Device device) {
  return empty_strided(t.sizes(), t.strides(), dtype, device);
}

void copy_h2d(const Tensor& dst, const Tensor& src) {
  DeviceGuard g(dst.device().index);
  if (memcpy_compatible(dst, src)) {
    SB_CUDA_CHECK(cudaMemcpy(dst.data_ptr(), src.data_ptr(), dst.nbytes(), cudaMemcpyHostToDevice));
    ++g_memcpy;
    return;
  }
  ++g_staged;
  // Gather/convert on the host into dst's dtype and (dense) layout, then one memcpy.
  const bool dst_dense = dense(dst);
  Tensor host = dst_dense ? empty_same_layout(dst, dst.dtype(), Device::cpu()) : empty(dst.sizes(), dst.dtype());
  host.copy_(src);  // CPU copy: broadcast, dtype conversion, any layout
  if (dst_dense) {
    SB_CUDA_CHECK(cudaMemcpy(dst.data_ptr(), host.data_ptr(), dst.nbytes(), cudaMemcpyHostToDevice));
    return;
  }
  Tensor dev = empty(dst.sizes(), dst.dtype(), dst.device());
  SB_CUDA_CHECK(cudaMemcpy(dev.data_ptr(), host.data_ptr(), dev.nbytes(), cudaMemcpyHostToDevice));
  copy_same_device(dst, dev);
}

void copy_d2h(const Tensor& dst, const Tensor& src) {
  DeviceGuard g(src.device().index);
  if (memcpy_compatible(dst, src)) {  // cudaMemcpy waits for the kernels before it on stream 0
    SB_CUDA_CHECK(cudaMemcpy(dst.data_ptr(), src.data_ptr(), dst.nbytes(), cudaMemcpyDeviceToHost));
    ++g_memcpy;
    return;
  }
  ++g_staged;
  if (dense(dst) && dst.dtype() == src.dtype()) {  // gather on the device into dst's layout
    Tensor dev = empty_same_layout(dst, dst.dtype(), src.device());
    copy_same_device(dev, src);
    SB_CUDA_CHECK(cudaMemcpy(dst.data_ptr(), dev.data_ptr(), dst.nbytes(), cudaMemcpyDeviceToHost));
    return;
  }
  // Gather on the device (src's dtype, dst's sizes, dense), copy, convert on the host.
  Tensor dev = src;
  if (!(dense(src) && src.sizes() == dst.sizes())) {
    dev = empty(dst.sizes(), src.dtype(), src.device());
    copy_same_device(dev, src);
  }
  Tensor host = empty_same_layout(dev, dev.dtype(), Device::cpu());
  SB_CUDA_CHECK(cudaMemcpy(host.data_ptr(), dev.data_ptr(), dev.nbytes(), cudaMemcpyDeviceToHost));
  Tensor(dst).copy_(host);  // CPU copy: dtype conversion, dst layout
}

// Between two GPUs: gather to dense on the source, peer copy, finish on the destination.
void copy_peer(const Tensor& dst, const Tensor& src) {
  ++g_staged;
  Tensor s = src;
  {
    DeviceGuard g(src.device().index);
    if (!(dense(src) && src.sizes() == dst.sizes())) {
      s = empty(dst.sizes(), src.dtype(), src.device());
      copy_same_device(s, src);
    }
  }
  DeviceGuard g(dst.device().index);
  Tensor t = (dense(dst) && dst.dtype() == s.dtype() && dst.strides() == s.strides())
                 ? dst
                 : empty_same_layout(s, s.dtype(), dst.device());
  SB_CUDA_CHECK(cudaMemcpyPeer(t.data_ptr(), dst.device().index, s.data_ptr(), src.device().index, s.nbytes()));
  if (!t.shares_storage_with(dst)) copy_same_device(dst, t);
}

}  // namespace

void copy(const Tensor& dst, const Tensor& src) {
  SB_CHECK(dst.device().is_cuda() || src.device().is_cuda(), "copy_ (CUDA): neither tensor is on a CUDA device (",
           src.device(), " -> ", dst.device(), ")");
  SB_CHECK(broadcast_shapes(src.sizes(), dst.sizes(), "copy_") == dst.sizes(), "copy_ (CUDA): source sizes ",
           src.sizes(), " cannot be broadcast to destination sizes ", dst.sizes());
  if (dst.numel() == 0) return;
  if (dst.device().is_cuda() && src.device().is_cuda()) {
    if (dst.device() == src.device()) {
      DeviceGuard g(dst.device().index);
      copy_same_device(dst, src);
    } else {
      copy_peer(dst, src);
    }
  } else if (dst.device().is_cuda()) {
    copy_h2d(dst, src);
  } else {
    copy_d2h(dst, src);
  }
}

void fill(const Tensor& t, double value) {
  SB_CHECK(t.device().is_cuda(), "fill_ (CUDA): expected a CUDA tensor, got one on ", t.device());
  const int64_t n = t.numel();
  if (n == 0) return;
  const int dev = t.device().index;
  DeviceGuard g(dev);
  const Shape* sp[1] = {&t.strides()};
  const OffsetCalc<1> it = make_iter<1>(t.sizes(), sp, "fill_");
  SB_CUDA_DISPATCH_ALL(t.dtype(), "fill_", {
    fill_kernel<scalar_t><<<grid_for(n, dev), kThreads>>>(static_cast<scalar_t*>(t.data_ptr()), it, n,
                                                          host_value<scalar_t>(value));
    SB_CUDA_LAUNCH_CHECK();
  });
}

Tensor to_async(const Tensor& t, Device device, cudaStream_t stream) {
  SB_CHECK(t.defined(), "to_async: undefined tensor");
  if (t.device() == device) return t;
  const bool h2d = t.device().is_cpu() && device.is_cuda();
  const bool d2h = t.device().is_cuda() && device.is_cpu();
  if (!(h2d && is_pinned(t) && dense(t)) && !(d2h && dense(t))) {
    ++g_staged;
    Tensor out = t.to(device);  // synchronous fallback, documented in cuda_backend.h
    return out;
  }
  const int dev = h2d ? device.index : t.device().index;
  DeviceGuard g(dev);
  Tensor out;
  if (h2d) {
    out = empty_strided(t.sizes(), t.strides(), t.dtype(), device);
  } else {
    auto storage = std::make_shared<Storage>(t.nbytes(), pinned_allocator());
    out = Tensor(std::move(storage), t.sizes(), t.strides(), 0, t.dtype());
  }
  if (t.numel() == 0) return out;
  // `stream` first waits for the work already queued on the legacy default stream:
  // the device block may have been freed by a tensor whose kernels are still queued,
  // and a D2H source may still be being written.
  cudaEvent_t ev;
  SB_CUDA_CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
  SB_CUDA_CHECK(cudaEventRecord(ev, cudaStreamLegacy));
  SB_CUDA_CHECK(cudaStreamWaitEvent(stream, ev, 0));
  SB_CUDA_CHECK(cudaEventDestroy(ev));
  SB_CUDA_CHECK(cudaMemcpyAsync(out.data_ptr(), t.data_ptr(), t.nbytes(),
                                h2d ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost, stream));
  ++g_memcpy;
  return out;
}

CopyPathCounts copy_path_counts() {
  return {g_memcpy.load(), g_strided.load(), g_transpose.load(), g_staged.load(), g_transpose_pairs.load()};
}
void reset_copy_path_counts() {
  g_memcpy = 0;
  g_strided = 0;
  g_transpose = 0;
  g_transpose_pairs = 0;
  g_staged = 0;
}

}  // namespace sb::cuda
