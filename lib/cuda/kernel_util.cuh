// kernel_util.cuh — shared pieces of the CUDA kernels: device element types and
// conversions, the offset calculator of the strided paths, dimension coalescing,
// launch sizes and warp/block reductions.
//
// Note [Strided iteration on the GPU]
// A kernel over tensors of one shape (out first, inputs broadcast to it with stride 0)
// runs over a flat index 0..numel-1 that is unravelled into per-operand offsets.
// Before launching, the host (make_iter) drops size-1 dims, orders the dims by the
// out strides (largest first, so the flat index walks out's memory in order: any
// dense out, channels-last included, is then written sequentially) and merges
// adjacent dims that are contiguous in every operand. A contiguous tensor becomes one
// dim; NCHW -> NHWC becomes 3 dims, a batched transpose that copy.cu sends to the
// tiled kernel. Offsets are int64 throughout; the unravel uses 32-bit division when
// the element count fits (div/mod of 64-bit values costs several times more).
#pragma once
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "core/tensor.h"
#include "cuda/cuda_check.h"

namespace sb::cuda {

constexpr int kMaxDims = 16;           // dims after coalescing; more is an error
constexpr int kThreads = 256;          // threads per block of the 1-D kernels
constexpr int kWarp = 32;

// ---------------------------------------------------------------- element types

template <typename T> struct AccType { using type = T; };
template <> struct AccType<__half> { using type = float; };
template <> struct AccType<int8_t> { using type = int64_t; };
template <> struct AccType<int32_t> { using type = int64_t; };
template <typename T> using acc_t = typename AccType<T>::type;

// The element conversion of core/convert.h, on the device: floating to integer
// truncates through int64, half goes through float (rounding to nearest even).
template <typename To, typename From>
__host__ __device__ __forceinline__ To cvt(From v) {
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else if constexpr (std::is_same_v<From, __half>) {
    return cvt<To>(__half2float(v));
  } else if constexpr (std::is_same_v<To, __half>) {
    return __float2half_rn(static_cast<float>(v));
  } else if constexpr (std::is_integral_v<To> && std::is_floating_point_v<From>) {
    return static_cast<To>(static_cast<int64_t>(v));
  } else {
    return static_cast<To>(v);
  }
}

// A double from the host as a device element (half through sb::Half, as the CPU does).
template <typename T>
T host_value(double v) {
  if constexpr (std::is_same_v<T, __half>) {
    __half_raw r;
    r.x = Half(static_cast<float>(v)).bits;
    return __half(r);
  } else if constexpr (std::is_integral_v<T>) {
    return static_cast<T>(static_cast<int64_t>(v));
  } else {
    return static_cast<T>(v);
  }
}

// Run __VA_ARGS__ with scalar_t the device type of DTYPE (Float16 -> __half).
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
  }
// The elementwise / reduction dtypes: float32, float64, float16, int32.
#define SB_CUDA_DISPATCH_MATH(DTYPE, NAME, ...)                                                 \
  switch (DTYPE) {                                                                              \
    SB_CUDA_CASE(::sb::DType::Float32, float, __VA_ARGS__)                                      \
    SB_CUDA_CASE(::sb::DType::Float64, double, __VA_ARGS__)                                     \
    SB_CUDA_CASE(::sb::DType::Float16, __half, __VA_ARGS__)                                     \
    SB_CUDA_CASE(::sb::DType::Int32, int32_t, __VA_ARGS__)                                      \
    default:                                                                                    \
      SB_CHECK(false, NAME, " (CUDA): dtype ", DTYPE, " is not supported (float32, float64, float16, int32)"); \
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
// strides[a] already broadcast: 0 where operand a is expanded). See the Note above.
// order_by_first = false keeps the given dim order (used for reduced dims).
template <int NARGS>
OffsetCalc<NARGS> make_iter(const Shape& sizes, const Shape* const (&strides)[NARGS], const char* op,
                            bool order_by_first = true) {
  const int nd = static_cast<int>(sizes.size());
  SB_CHECK(nd <= 64, op, " (CUDA): ", nd, "-D tensors are not supported (at most 64 dims)");
  std::vector<int> dims;
  for (int d = 0; d < nd; ++d)
    if (sizes[d] != 1) dims.push_back(d);
  if (order_by_first) {  // largest out stride first; ties: keep the logical order
    std::stable_sort(dims.begin(), dims.end(), [&](int x, int y) {
      for (int a = 0; a < NARGS; ++a) {
        const int64_t sx = (*strides[a])[x], sy = (*strides[a])[y];
        if (sx != sy) return sx > sy;
      }
      return false;
    });
  }
  OffsetCalc<NARGS> it;
  int n = 0;
  int64_t sz[64];
  int64_t st[NARGS][64];
  for (int d : dims) {
    bool merge = n > 0;
    for (int a = 0; a < NARGS && merge; ++a) merge = st[a][n - 1] == (*strides[a])[d] * sizes[d];
    if (merge) {  // previous (outer) dim folds into this one
      sz[n - 1] *= sizes[d];
      for (int a = 0; a < NARGS; ++a) st[a][n - 1] = (*strides[a])[d];
    } else {
      sz[n] = sizes[d];
      for (int a = 0; a < NARGS; ++a) st[a][n] = (*strides[a])[d];
      ++n;
    }
  }
  SB_CHECK(n <= kMaxDims, op, " (CUDA): ", n, " dims remain after coalescing sizes ", sizes, "; at most ", kMaxDims,
           " are supported");
  it.ndim = n;
  int64_t numel = 1;
  for (int d = 0; d < n; ++d) {
    it.sizes[d] = sz[d];
    numel *= sz[d];
    for (int a = 0; a < NARGS; ++a) it.strides[a][d] = st[a][d];
  }
  it.use32 = numel <= static_cast<int64_t>(UINT32_MAX);
  return it;
}

// t's strides seen through `sizes` (t broadcasts to them): stride 0 for new or size-1 dims.
inline Shape broadcast_strides(const Tensor& t, const Shape& sizes) {
  Shape st(sizes.size(), 0);
  const size_t lead = sizes.size() - t.sizes().size();
  for (size_t i = 0; i < t.sizes().size(); ++i) st[lead + i] = t.sizes()[i] == 1 ? 0 : t.strides()[i];
  return st;
}

// ---------------------------------------------------------------- launch helpers

int sm_count(int device);  // cached per device (copy.cu)

// Blocks for a grid-stride loop over `work` items of kThreads per block: enough to
// fill the device (32 blocks per SM), never more than the work needs.
inline unsigned grid_for(int64_t work, int device) {
  const int64_t need = (work + kThreads - 1) / kThreads;
  const int64_t cap = static_cast<int64_t>(sm_count(device)) * 32;
  return static_cast<unsigned>(std::max<int64_t>(1, std::min(need, cap)));
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
