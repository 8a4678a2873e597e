// cuda_backend.h — what the device-independent code (lib/core and the families' .cpp files) calls on
// CUDA tensors. Compiled only when meson finds nvcc (SB_WITH_CUDA); implemented in
// lib/cuda/*.cu. Every function expects its preconditions checked by the public op;
// each still checks devices and dtypes (cheap) before launching anything.
//
// Streams: every synchronous function runs on the legacy default stream and returns
// when the host may read or reuse what it passed (copies to or from the host are
// complete; device-only work is stream-ordered, as in PyTorch). to_async is the one
// asynchronous entry point.
#pragma once
#include <cstdint>
#include <string>

#include "stridebench/tensor.h"
#include "stridebench/conv.h"
#include "stridebench/elementwise.h"
#include "stridebench/quant.h"
#include "stridebench/reduce.h"

typedef struct CUstream_st* cudaStream_t;  // the same declaration as cuda_runtime.h

namespace sb::cuda {

bool is_available();   // a device is present and the driver answers
int device_count();    // 0 when none

// ---- allocators (lib/cuda/allocator.cpp, rules in include/stridebench/cuda_allocator.h) ----
enum class CudaAllocatorKind : uint8_t { Caching, Direct };
// The current CUDA allocator of `device`: caching unless SB_CUDA_ALLOCATOR=direct is
// set at start-up or set_allocator() says otherwise. Error when the device is absent.
Allocator* allocator(int device);
Allocator* caching_allocator(int device);  // pools, splitting, best fit (stridebench/cuda_allocator.h)
Allocator* direct_allocator(int device);   // cudaMalloc/cudaFree on every call, for comparison
void set_allocator(CudaAllocatorKind kind);
CudaAllocatorKind allocator_kind();
// Page-locked host memory (cudaHostAlloc, cached like device memory): a CPU-device
// allocator, so a CPU tensor may live in it and copy to/from the GPU by DMA.
Allocator* pinned_allocator();
Tensor pinned_empty(const Shape& sizes, DType dtype = DType::Float32, MemoryFormat format = MemoryFormat::Contiguous);
bool is_pinned(const Tensor& t);

class AllocatorGuard {  // sets the CUDA allocator kind for one scope
 public:
  explicit AllocatorGuard(CudaAllocatorKind kind) : prev_(allocator_kind()) { set_allocator(kind); }
  ~AllocatorGuard() { set_allocator(prev_); }
  AllocatorGuard(const AllocatorGuard&) = delete;
  AllocatorGuard& operator=(const AllocatorGuard&) = delete;

 private:
  CudaAllocatorKind prev_;
};

// ---- device facts, for benchmark context (sb_gpu_* keys) ----
struct DeviceInfo {
  std::string name;
  int64_t total_memory = 0;  // bytes
  int sm_count = 0;
  int major = 0, minor = 0;  // compute capability
  int driver_version = 0;    // cudaDriverGetVersion: 1000 * major + 10 * minor
  int runtime_version = 0;   // cudaRuntimeGetVersion
  int64_t l2_bytes = 0;
  double memory_clock_khz = 0;  // 0 when the runtime no longer reports it
  int memory_bus_bits = 0;
};
DeviceInfo device_info(int device = 0);  // error when absent
void synchronize(int device = 0);        // cudaDeviceSynchronize, checked

// ---- copies (lib/copy/copy.cu) ----
void copy(const Tensor& dst, const Tensor& src);  // any device pair, dtype conversion, broadcast src
void fill(const Tensor& t, double value);
// t copied to `device` on `stream` without waiting. Truly asynchronous only between a
// pinned, non-overlapping-and-dense CPU tensor and a CUDA tensor (either way; a
// result on the CPU is allocated pinned); any other source is staged synchronously
// first. The caller synchronises the stream before reading the result and before
// the source or the result is freed (the caching allocators are not stream-aware).
Tensor to_async(const Tensor& t, Device device, cudaStream_t stream);

// Counts of which copy path ran since the last reset (the benchmarks and tests read
// them to show that a layout took the fast path).
struct CopyPathCounts {
  int64_t memcpy = 0;      // one cudaMemcpy of a dense span
  int64_t strided = 0;     // generic offset-calculator kernel
  int64_t transpose = 0;   // shared-memory tiled transpose (incl. NCHW <-> NHWC)
  int64_t staged = 0;      // went through a host or device staging buffer
  int64_t transpose_pairs = 0;  // of the transposes, 2-byte ones moved in 4-byte pairs
};
CopyPathCounts copy_path_counts();
void reset_copy_path_counts();

// ---- elementwise (lib/elementwise/elementwise.cu) ----
// a and b already broadcast (expanded) to out's sizes.
void binary(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b);
void binary_scalar(BinaryOp op, const Tensor& out, const Tensor& a, double b);
void unary(UnaryOp op, const Tensor& out, const Tensor& a);
void normalize(const Tensor& out, const Tensor& x, int64_t dim, double eps);
struct ElementwisePathCounts {  // launches of each path since the last reset
  int64_t vectorized = 0;       // contiguous, 16-byte aligned: 16-byte accesses
  int64_t strided = 0;          // offset calculator (any layout, misaligned contiguous)
  int64_t tiled = 0;            // an input along out's next-to-last dim: shared-memory tiles
  int64_t tiled_pairs = 0;      // of the tiled, 2- and 4-byte ones moved in pairs
};
ElementwisePathCounts elementwise_path_counts();
void reset_elementwise_path_counts();

// ---- reductions (lib/reduce/reduce.cu) ----
// out has x's sizes with the reduced dims (sorted, unique) set to 1 (keepdim form).
void reduce(ReduceOp op, const Tensor& out, const Tensor& x, const Shape& dims, int64_t correction);
// reduce() calls of the column kernels, and launches of the finalize kernel (none where
// the last split's block finishes: Note [Last split finishes]), since the last reset.
struct ReducePathCounts {
  int64_t column = 0;        // outputs innermost, a lane an output
  int64_t column_pairs = 0;  // 2-byte outputs on aligned words, a lane two (Note [Column pairs])
  int64_t finalize = 0;      // reduce_finalize_kernel launches
};
ReducePathCounts reduce_path_counts();
void reset_reduce_path_counts();
// Tests: false makes split reductions take the finalize launch, as where their counters
// do not fit (Note [Last split finishes]); true, the default, the last split's block.
void set_reduce_last_split(bool on);
// ---- conv2d (lib/conv/conv.cu) ----
// out [N, O, OH, OW], any non-overlapping strides, = conv2d(x, w) + bias (undefined:
// none), relu when asked: im2col and cuBLAS in x's memory format, through a temporary
// when out is in the other one. Sizes, dtypes (float32) and devices checked by sb::conv2d.
// With cuDNN (SB_WITH_CUDNN) float16 and bfloat16 too, through conv2d_cudnn.
void conv2d(const Tensor& out, const Tensor& x, const Tensor& w, const Tensor& bias, const Conv2dParams& p, bool relu);
// The cuDNN path (lib/conv/conv_cudnn.cpp, Note [cuDNN conv plans]): the checks are
// conv2d's; the current device is x's.
void conv2d_cudnn(const Tensor& out, const Tensor& x, const Tensor& w, const Tensor& bias, const Conv2dParams& p,
                  bool relu);
struct ConvPlanInfo {       // what the last conv2d on CUDA ran (empty before any, and on im2col)
  std::string engine;       // cudnn-frontend's tag: eng<global index>_k<knob>=<value>...
  int64_t workspace_bytes = 0;
  bool fused = false;       // bias and relu inside the plan (else elementwise passes after it)
  int candidates = 0;       // plans timed when the plan was chosen (1: no autotuning)
};
ConvPlanInfo conv2d_last_plan();
// Only engines whose tag starts with `prefix` ("eng1_", say; "" = every engine) are
// planned from now on; the plans chosen so far are dropped when it changes. cuDNN builds only.
void set_conv_engine_prefix(const std::string& prefix);
// For the tests, in a cuDNN build: every descriptor of the call's graph short of the graph
// itself (the one that needs a device) built and finalized from the tensors' sizes,
// dtype, layout and pointers' alignment, as conv2d_cudnn would (any device: nothing is
// read); returns the ops (1, or 1 + bias + relu when fused); sb::Error as a call would.
int cudnn_conv_ops_for_tests(const Tensor& out, const Tensor& x, const Tensor& w, const Tensor& bias,
                             const Conv2dParams& p, bool relu, bool fused);
int cudnn_version();          // cudnnGetVersion() at run time; 0 in a build without cuDNN
const char* conv2d_backend();  // "cudnn" or "im2col"
// out [N, C, OH, OW] = max (max) or average (count_include_pad) pooling of x with a k x k
// window at stride s and padding pad, any strides of either (Note [CUDA pooling] in
// conv.cu). Geometry and dtypes checked by sb::max_pool2d / avg_pool2d.
void pool2d(bool max, const Tensor& out, const Tensor& x, int64_t k, int64_t s, int64_t pad);

// ---- matmul through cuBLAS (lib/matmul/matmul.cu) ----
// out = a @ b: 2-D (M,K)x(K,N) or 3-D batched (B,M,K)x(B,K,N) (a batch of size 1 or
// stride 0 broadcasts). float32 (TF32 tensor cores when allowed), float64, float16
// (tensor cores, float accumulation), int8 x int8 -> int32 (int32 accumulation).
// Row-major and column-major (transposed) operands go to cuBLAS as op flags with
// their leading dimension, no copy; any other layout is copied first and counted.
void matmul(const Tensor& out, const Tensor& a, const Tensor& b);
// out = x @ w^T, w of shape (N, K) (PyTorch's linear without bias).
void linear(const Tensor& out, const Tensor& x, const Tensor& w);
void set_allow_tf32(bool allow);  // off by default (PyTorch's default since 1.12)
bool allow_tf32();
class Tf32Guard {  // sets TF32 for one scope, then restores the previous setting
 public:
  explicit Tf32Guard(bool allow) : prev_(allow_tf32()) { set_allow_tf32(allow); }
  ~Tf32Guard() { set_allow_tf32(prev_); }
  Tf32Guard(const Tf32Guard&) = delete;
  Tf32Guard& operator=(const Tf32Guard&) = delete;

 private:
  bool prev_;
};
int64_t matmul_operand_copies();  // operands copied because their strides fit no cuBLAS layout
void reset_matmul_operand_copies();

// ---- the memory ceilings per read:write mix (lib/cuda/stream.cu, Note [GPU stream kernels]) ----
enum class StreamOp : uint8_t { Read, Copy, Scale, Add, Triad };
// read: c[block] = the sum of its part of a (c needs stream_blocks() elements); copy:
// c = a; scale: c = s a; add: c = a + b; triad: c = a + s b. Contiguous float32 tensors
// on one device; asynchronous on the legacy default stream.
void stream(StreamOp op, Tensor& c, const Tensor& a, const Tensor& b, double s);
int stream_blocks();

// ---- Linear in five precisions (lib/quant/quant.cu; the scheme in stridebench/quant.h) ----
struct LinearWeights {
  Precision precision = Precision::F32;
  Tensor w;        // F32: float32 [out, in]; F16: float16 [out, in]; int8: int8 [out', in'],
                   // out and in rounded up to multiples of 4 (cuBLAS's int8 rule), zero padded
  Tensor scale;    // int8: float32 [out], per output channel
  Tensor row_sum;  // int8: int32 [out], sum over k of the quantized weights
  Tensor bias;     // float32 [out], or undefined
  Tensor bias16;        // F16, BF16: the bias rounded to the layer's dtype (in it) ...
  Tensor bias_rounded;  // ... and the same values in float32; undefined without a bias
  int64_t out = 0, in = 0;
};
// y (contiguous [M, out], on the weights' device) = x W^T + bias, relu when asked; x
// [M, in], any strides. x and y float32, or (F16, BF16) both in the layer's dtype with
// bias16 (Note [16-bit activations] in stridebench/quant.h). F16 and BF16 round a
// float32 x to their dtype too (the tensor cores take both operands in it) and
// accumulate in float32. Int8Static quantizes x with `act`; Int8Dynamic finds x's range
// and its parameters on the device (no host round trip) with act_qparams's arithmetic.
void linear_forward(const Tensor& y, const Tensor& x, const LinearWeights& w, const ActQParams& act, bool relu);
struct LinearPathCounts {   // f32 and f16 layers since the last reset
  int64_t lt_epilogue = 0;  // one cublasLt matmul with bias/relu in its epilogue
  int64_t fallback = 0;     // cuBLAS GEMM, then the bias/relu kernel
};
LinearPathCounts linear_path_counts();
void reset_linear_path_counts();

}  // namespace sb::cuda
