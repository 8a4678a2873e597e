// stream.cu — the GPU's memory ceilings per read:write mix (Note [GPU stream kernels]):
// STREAM's kernels on float32 device tensors, for bench_baseline_cuda.
#include <cuda_runtime.h>

#include "cuda/cuda_backend.h"
#include "cuda/cuda_check.h"
#include "stridebench/error.h"

namespace sb::cuda {
namespace {

// Note [GPU stream kernels]
// A memory-bound row is held to the rate of a kernel with its own mix of reads and
// writes (issue #50): read (1 read: a sum kept in registers, one float per block
// written), copy and scale (1 read, 1 write), add and triad (2 reads, 1 write).
// cudaMemcpy is measured beside them (baseline/op:d2d_copy) but is not the roof: its
// engine path can fall below a kernel's. Accesses are float4 (16 bytes, the widest a
// thread issues), kUnroll of them per operand loaded before any is used. copy, scale,
// add and triad launch one block per chunk of kThreads x kUnroll float4, as the
// contiguous elementwise kernels do (Note [Contiguous elementwise launch]), so that each
// ceiling and the rows it bounds share one design; read loops a few resident blocks over
// the array, each writing one partial sum. The n % 4 tail goes to the first threads of
// block 0; pointers come from the allocators, 256-byte aligned.
constexpr int kThreads = 256;
constexpr int kUnroll = 4;

template <StreamOp OP>
__device__ __forceinline__ float4 apply(float4 x, float4 y, float s) {
  if constexpr (OP == StreamOp::Copy) return x;
  else if constexpr (OP == StreamOp::Scale) return make_float4(s * x.x, s * x.y, s * x.z, s * x.w);
  else if constexpr (OP == StreamOp::Add) return make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w);
  else return make_float4(x.x + s * y.x, x.y + s * y.y, x.z + s * y.z, x.w + s * y.w);
}

template <StreamOp OP>
__global__ void stream_kernel(float* __restrict__ c, const float* __restrict__ a, const float* __restrict__ b,
                              float s, int64_t n, float* __restrict__ partial) {
  constexpr bool kReadsB = OP == StreamOp::Add || OP == StreamOp::Triad;
  const int64_t n4 = n / 4;
  const float4* a4 = reinterpret_cast<const float4*>(a);
  const float4* b4 = reinterpret_cast<const float4*>(b);
  float4* c4 = reinterpret_cast<float4*>(c);
  float acc = 0;
  if constexpr (OP == StreamOp::Read) {  // resident blocks looping, kUnroll loads in flight
    const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
    for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n4; i += kUnroll * stride) {
      float4 x[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
        if (i + u * stride < n4) x[u] = a4[i + u * stride];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
        if (i + u * stride < n4) acc += (x[u].x + x[u].y) + (x[u].z + x[u].w);
    }
  } else {  // one chunk of kThreads x kUnroll float4 a block
    constexpr int64_t kChunk = int64_t{kThreads} * kUnroll;
    const int64_t chunks = (n4 + kChunk - 1) / kChunk;
    for (int64_t ch = blockIdx.x; ch < chunks; ch += gridDim.x) {
      const int64_t first = ch * kChunk + threadIdx.x;
      float4 x[kUnroll], y[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int64_t i = first + u * kThreads;
        if (i < n4) {
          x[u] = a4[i];
          if constexpr (kReadsB) y[u] = b4[i];
        }
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int64_t i = first + u * kThreads;
        if (i < n4) c4[i] = apply<OP>(x[u], kReadsB ? y[u] : x[u], s);
      }
    }
  }
  if (blockIdx.x == 0)
    for (int64_t i = 4 * n4 + threadIdx.x; i < n; i += blockDim.x) {  // the tail
      if constexpr (OP == StreamOp::Read) acc += a[i];
      else if constexpr (OP == StreamOp::Copy) c[i] = a[i];
      else if constexpr (OP == StreamOp::Scale) c[i] = s * a[i];
      else if constexpr (OP == StreamOp::Add) c[i] = a[i] + b[i];
      else c[i] = a[i] + s * b[i];
    }
  if constexpr (OP == StreamOp::Read) {  // one value per block, so the loads are kept
    for (int o = 16; o > 0; o /= 2) acc += __shfl_down_sync(0xffffffffu, acc, o);
    __shared__ float warp_sums[kThreads / 32];
    if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = acc;
    __syncthreads();
    if (threadIdx.x == 0) {
      float t = 0;
      for (int w = 0; w < kThreads / 32; ++w) t += warp_sums[w];
      partial[blockIdx.x] = t;
    }
  }
}

template <StreamOp OP>
void launch(float* c, const float* a, const float* b, float s, int64_t n, float* partial, int blocks) {
  stream_kernel<OP><<<blocks, kThreads>>>(c, a, b, s, n, partial);
  SB_CUDA_LAUNCH_CHECK();
}

}  // namespace

int stream_blocks() {
  static const int blocks = 8 * device_info(0).sm_count;  // a few resident blocks per SM
  return blocks;
}

void stream(StreamOp op, Tensor& c, const Tensor& a, const Tensor& b, double s) {
  const char* what = "cuda::stream";
  SB_CHECK(a.device().is_cuda() && a.dtype() == DType::Float32 && a.is_contiguous(), what,
           ": a must be a contiguous float32 CUDA tensor, got ", a.str());
  const int64_t n = a.numel();
  const bool reads_b = op == StreamOp::Add || op == StreamOp::Triad;
  if (reads_b)
    SB_CHECK(b.device() == a.device() && b.dtype() == DType::Float32 && b.is_contiguous() && b.numel() == n, what,
             ": b must be a contiguous float32 tensor of a's size on a's device, got ", b.str());
  // read: c holds one partial sum per block; the others write n elements
  const int64_t want = op == StreamOp::Read ? stream_blocks() : n;
  SB_CHECK(c.device() == a.device() && c.dtype() == DType::Float32 && c.is_contiguous() && c.numel() >= want, what,
           ": c must be a contiguous float32 tensor of at least ", want, " elements on a's device, got ", c.str());
  if (n == 0) return;
  constexpr int64_t kChunk = int64_t{kThreads} * kUnroll;
  const int64_t chunks = std::max<int64_t>(1, (n / 4 + kChunk - 1) / kChunk);
  const int blocks = static_cast<int>(op == StreamOp::Read ? std::min<int64_t>(stream_blocks(), chunks)
                                                           : std::min<int64_t>(chunks, INT32_MAX));
  float* pc = c.data<float>();
  const float* pa = a.data<float>();
  const float* pb = reads_b ? b.data<float>() : nullptr;
  const float fs = static_cast<float>(s);
  switch (op) {
    case StreamOp::Read: launch<StreamOp::Read>(nullptr, pa, nullptr, fs, n, pc, blocks); break;
    case StreamOp::Copy: launch<StreamOp::Copy>(pc, pa, nullptr, fs, n, nullptr, blocks); break;
    case StreamOp::Scale: launch<StreamOp::Scale>(pc, pa, nullptr, fs, n, nullptr, blocks); break;
    case StreamOp::Add: launch<StreamOp::Add>(pc, pa, pb, fs, n, nullptr, blocks); break;
    case StreamOp::Triad: launch<StreamOp::Triad>(pc, pa, pb, fs, n, nullptr, blocks); break;
  }
}

}  // namespace sb::cuda
