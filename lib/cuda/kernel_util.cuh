// kernel_util.cuh — shared pieces of the CUDA kernels: device element types and
// conversions, the offset calculator of the strided paths, dimension coalescing,
// launch sizes and warp/block reductions.
//
// Note [Strided iteration on the GPU]
// A kernel over tensors of one shape (out first, inputs broadcast to it with stride 0)
// runs over a flat index 0..numel-1 that is unravelled into per-operand offsets.
// Before launching, the host (make_iter) takes the dims from plan_dims (Note [One
// dimension planner]): size-1 dims dropped, ordered by the out strides (the flat index
// walks out's memory in order: any dense out, channels-last included, is written
// sequentially), merged where every operand continues. A contiguous tensor becomes one
// dim; NCHW -> NHWC becomes 3 dims, a batched transpose that copy.cu sends to the
// tiled kernel. Offsets are int64 throughout; the unravel uses 32-bit division when
// the element count fits (div/mod of 64-bit values costs several times more).
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <mutex>
#include <type_traits>
#include <vector>

#include "core/dim_plan.h"
#include "stridebench/tensor.h"
#include "cuda/cuda_backend.h"
#include "cuda/cuda_check.h"

namespace sb::cuda {

constexpr int kMaxDims = 16;           // dims after coalescing; more is an error
constexpr int kThreads = 256;          // threads per block of the 1-D kernels
constexpr int kWarp = 32;

// ---------------------------------------------------------------- element types

template <typename T> struct AccType { using type = T; };
template <> struct AccType<__half> { using type = float; };
template <> struct AccType<__nv_bfloat16> { using type = float; };
template <> struct AccType<int8_t> { using type = int64_t; };
template <> struct AccType<int32_t> { using type = int64_t; };
template <typename T> using acc_t = typename AccType<T>::type;

// The element conversion of core/convert.h, on the device: floating to integer
// truncates through int64, half and bfloat16 go through float (rounding to nearest even).
template <typename To, typename From>
__host__ __device__ __forceinline__ To cvt(From v) {
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else if constexpr (std::is_same_v<From, __half>) {
    return cvt<To>(__half2float(v));
  } else if constexpr (std::is_same_v<To, __half>) {
    return __float2half_rn(static_cast<float>(v));
  } else if constexpr (std::is_same_v<From, __nv_bfloat16>) {
    return cvt<To>(__bfloat162float(v));
  } else if constexpr (std::is_same_v<To, __nv_bfloat16>) {
    return __float2bfloat16_rn(static_cast<float>(v));
  } else if constexpr (std::is_integral_v<To> && std::is_floating_point_v<From>) {
    return static_cast<To>(static_cast<int64_t>(v));
  } else {
    return static_cast<To>(v);
  }
}

// A double from the host as a device element (half and bfloat16 through sb::Half and
// sb::BFloat16, as the CPU does).
template <typename T>
T host_value(double v) {
  if constexpr (std::is_same_v<T, __half>) {
    __half_raw r;
    r.x = Half(static_cast<float>(v)).bits;
    return __half(r);
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    __nv_bfloat16_raw r;
    r.x = BFloat16(static_cast<float>(v)).bits;
    return __nv_bfloat16(r);
  } else if constexpr (std::is_integral_v<T>) {
    return static_cast<T>(static_cast<int64_t>(v));
  } else {
    return static_cast<T>(v);
  }
}

// Run __VA_ARGS__ with scalar_t the device type of DTYPE (Float16 -> __half, BFloat16 ->
// __nv_bfloat16).
#define SB_CUDA_CASE(DT, T, ...) \
  case DT: {                     \
    using scalar_t = T;          \
    __VA_ARGS__;                 \
    break;                       \
  }
#define SB_CUDA_DISPATCH_ALL(DTYPE, NAME, ...)                      \
  switch (DTYPE) {                                                  \
    SB_CUDA_CASE(::sb::DType::Float32, float, __VA_ARGS__)          \
    SB_CUDA_CASE(::sb::DType::Float64, double, __VA_ARGS__)         \
    SB_CUDA_CASE(::sb::DType::Float16, __half, __VA_ARGS__)         \
    SB_CUDA_CASE(::sb::DType::Int8, int8_t, __VA_ARGS__)            \
    SB_CUDA_CASE(::sb::DType::Int32, int32_t, __VA_ARGS__)          \
    SB_CUDA_CASE(::sb::DType::Int64, int64_t, __VA_ARGS__)          \
    SB_CUDA_CASE(::sb::DType::BFloat16, __nv_bfloat16, __VA_ARGS__) \
  }
// The elementwise / reduction dtypes: float32, float64, float16, bfloat16, int32.
#define SB_CUDA_DISPATCH_MATH(DTYPE, NAME, ...)                                                 \
  switch (DTYPE) {                                                                              \
    SB_CUDA_CASE(::sb::DType::Float32, float, __VA_ARGS__)                                      \
    SB_CUDA_CASE(::sb::DType::Float64, double, __VA_ARGS__)                                     \
    SB_CUDA_CASE(::sb::DType::Float16, __half, __VA_ARGS__)                                     \
    SB_CUDA_CASE(::sb::DType::BFloat16, __nv_bfloat16, __VA_ARGS__)                             \
    SB_CUDA_CASE(::sb::DType::Int32, int32_t, __VA_ARGS__)                                      \
    default:                                                                                    \
      SB_CHECK(false, NAME, " (CUDA): dtype ", DTYPE, " is not supported (float32, float64, float16, bfloat16, int32)"); \
  }

template <typename T, int V>
struct alignas(sizeof(T) * V) AlignedVector {
  T val[V];
};

// ---------------------------------------------------------------- offset calculator

template <int NARGS>
struct OffsetCalc {
  int ndim = 0;
  bool use32 = true;                 // every size and the numel fit in uint32
  int64_t sizes[kMaxDims] = {};      // outermost first
  int64_t strides[NARGS][kMaxDims] = {};  // elements

  // Offsets (elements) of flat index i, row-major over sizes.
  __device__ __forceinline__ void get(int64_t i, int64_t (&off)[NARGS]) const {
#pragma unroll
    for (int a = 0; a < NARGS; ++a) off[a] = 0;
    if (use32) {
      uint32_t r = static_cast<uint32_t>(i);
      for (int d = ndim - 1; d >= 0; --d) {
        const uint32_t s = static_cast<uint32_t>(sizes[d]);
        const uint32_t q = r / s;
        const uint32_t idx = r - q * s;
        r = q;
#pragma unroll
        for (int a = 0; a < NARGS; ++a) off[a] += static_cast<int64_t>(idx) * strides[a][d];
      }
    } else {
      int64_t r = i;
      for (int d = ndim - 1; d >= 0; --d) {
        const int64_t q = r / sizes[d];
        const int64_t idx = r - q * sizes[d];
        r = q;
#pragma unroll
        for (int a = 0; a < NARGS; ++a) off[a] += idx * strides[a][d];
      }
    }
  }
};

// Host: the iteration space of NARGS operands of `sizes` (operand 0 is the output;
// strides[a] already broadcast: 0 where operand a is expanded), from plan_dims (Note
// [One dimension planner], core/dim_plan.h), outermost first.
template <int NARGS>
OffsetCalc<NARGS> make_iter(const Shape& sizes, const Shape* const (&strides)[NARGS], const char* op) {
  static_assert(NARGS <= DimPlan::kMaxOperands, "make_iter: too many operands");
  const int64_t* st[NARGS];
  for (int a = 0; a < NARGS; ++a) st[a] = strides[a]->data();
  const DimPlan plan = plan_dims(sizes.data(), static_cast<int64_t>(sizes.size()), st, NARGS);
  const int n = plan.ndim();
  SB_CHECK(n <= kMaxDims, op, " (CUDA): ", n, " dims remain after coalescing sizes ", sizes, "; at most ", kMaxDims,
           " are supported");
  OffsetCalc<NARGS> it;
  it.ndim = n;
  for (int d = 0; d < n; ++d) {  // the plan is fastest first; the offset calculator outermost first
    it.sizes[d] = plan.sizes[n - 1 - d];
    for (int a = 0; a < NARGS; ++a) it.strides[a][d] = plan.strides[n - 1 - d][a];
  }
  it.use32 = plan.numel() <= static_cast<int64_t>(UINT32_MAX);
  return it;
}

// ---------------------------------------------------------------- batched tiles

// Note [Batched tile walks]
// The transposes (copy.cu) and the tiled elementwise kernel (elementwise.cu) take tiles
// of the last two dims of an iteration space (rows: the next-to-last, cols: the last),
// batched over the dims before them: block (x, y, z) takes tile column x, tile row y and
// batch z, and loops where the grid's dimension is capped (x at 2^30, y and z at 65535).
// The loops are uniform over a block, so the walk's body may hold __syncthreads().
template <int N>
struct TileWalk {
  OffsetCalc<N> batch;  // the dims before the last two
  int64_t nbatch = 1, rows = 0, cols = 0, tiles_i = 0, tiles_j = 0;

  // f(off, i0, j0) for every (batch, tile) of this block: off the operands' offsets of
  // the batch, (i0, j0) the tile's first row and column. The tile's shape is the one
  // tile_walk() was given.
  template <int kTileRowsOf, int kTileColsOf, typename F>
  __device__ __forceinline__ void each(F&& f) const {
    for (int64_t b = blockIdx.z; b < nbatch; b += gridDim.z) {
      int64_t off[N];
      batch.get(b, off);
      for (int64_t ti = blockIdx.y; ti < tiles_i; ti += gridDim.y)
        for (int64_t tj = blockIdx.x; tj < tiles_j; tj += gridDim.x) f(off, ti * kTileRowsOf, tj * kTileColsOf);
    }
  }

  dim3 grid() const {
    return dim3(static_cast<unsigned>(std::min<int64_t>(tiles_j, 1 << 30)),
                static_cast<unsigned>(std::min<int64_t>(tiles_i, 65535)),
                static_cast<unsigned>(std::min<int64_t>(nbatch, 65535)));
  }
};

// Host: the walk of `it` (two dims or more) in tiles of tile_rows x tile_cols.
template <int N>
TileWalk<N> tile_walk(const OffsetCalc<N>& it, int64_t tile_rows, int64_t tile_cols) {
  TileWalk<N> w;
  const int nd = it.ndim;
  w.batch.ndim = nd - 2;
  for (int d = 0; d < nd - 2; ++d) {
    w.batch.sizes[d] = it.sizes[d];
    for (int a = 0; a < N; ++a) w.batch.strides[a][d] = it.strides[a][d];
    w.nbatch *= it.sizes[d];
  }
  w.batch.use32 = w.nbatch <= static_cast<int64_t>(UINT32_MAX);
  w.rows = it.sizes[nd - 2];
  w.cols = it.sizes[nd - 1];
  w.tiles_i = (w.rows + tile_rows - 1) / tile_rows;
  w.tiles_j = (w.cols + tile_cols - 1) / tile_cols;
  return w;
}

// ---------------------------------------------------------------- launch helpers

// One int per device, asked of the runtime on first use: device attributes and occupancy
// queries cost microseconds, a few percent of a small kernel's time. Each Query type (each
// lambda) has its own cache. A query that gives 0 is asked again next time.
template <typename Query>
int per_device_once(int device, Query query) {
  static std::mutex mu;
  static std::vector<int> cache;
  std::lock_guard<std::mutex> lock(mu);
  if (cache.empty()) cache.assign(static_cast<size_t>(std::max(device_count(), 1)), 0);
  int& c = cache[static_cast<size_t>(device)];
  if (c == 0) c = query(device);
  return c;
}

int sm_count(int device);  // copy.cu

// Blocks for a grid-stride loop over `work` items of kThreads per block: enough to
// fill the device (32 blocks per SM), never more than the work needs.
inline unsigned grid_for(int64_t work, int device) {
  const int64_t need = (work + kThreads - 1) / kThreads;
  const int64_t cap = static_cast<int64_t>(sm_count(device)) * 32;
  return static_cast<unsigned>(std::max<int64_t>(1, std::min(need, cap)));
}

// The epilogue of conv2d and the CUDA Linear: out (dense, `total` float elements) +=
// bias[((i / inner) % O) * bias_stride] when bias is given, then relu when asked.
// conv2d NCHW: inner = P (pixels), channels-last and Linear [M, O]: inner = 1.
template <typename T = float>
__global__ void bias_relu_kernel(T* __restrict__ out, const T* __restrict__ bias, int64_t bias_stride, int64_t total,
                                 int64_t inner, int64_t O, bool relu) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    T v = out[i];
    if (bias) v += bias[((i / inner) % O) * bias_stride];
    if (relu) v = v < T(0) ? T(0) : v;  // NaN stays, as the elementwise relu
    out[i] = v;
  }
}

inline int current_device() {
  int d = 0;
  SB_CUDA_CHECK(cudaGetDevice(&d));
  return d;
}

// Every tensor on one CUDA device; returns its index.
inline int common_device(const char* op, std::initializer_list<const Tensor*> ts) {
  const Device d0 = (*ts.begin())->device();
  for (const Tensor* t : ts) {
    SB_CHECK(t->device().is_cuda(), op, " (CUDA): expected CUDA tensors, got one on ", t->device());
    SB_CHECK(t->device() == d0, op, " (CUDA): tensors on different devices: ", d0, " and ", t->device());
  }
  return d0.index;
}

// ---------------------------------------------------------------- reductions

template <typename T>
__device__ __forceinline__ T warp_sum(T v) {
#pragma unroll
  for (int o = kWarp / 2; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  return v;  // lane 0 holds the sum
}

template <typename T>
__device__ __forceinline__ T nan_max(T a, T b) {  // NaN propagates, as torch.max
  return (b != b || b > a) ? b : a;
}

template <typename T>
__device__ __forceinline__ T warp_max(T v) {
#pragma unroll
  for (int o = kWarp / 2; o > 0; o >>= 1) v = nan_max(v, __shfl_down_sync(0xffffffffu, v, o));
  return v;
}

}  // namespace sb::cuda
