// reduce.cu — sum, mean, max, var, std over any set of dims on the GPU.
//
// out is in keepdim form (x's sizes, reduced dims set to 1). O outputs, R reduced
// elements each. Four kernels (kernel_util.cuh Note [Strided iteration on the GPU]
// for the offsets: kept dims ordered by out's strides, reduced dims by x's):
//   block   one block per (output, split of R): threads stride over the R elements,
//           then a block reduction (warp shuffles, one double per warp in shared
//           memory). Taken when the reduced dims are innermost in memory (coalesced
//           reads), or when there are too few outputs to fill the device; R is then
//           split over several blocks and the last of them adds the partials in a
//           fixed order (deterministic; Note [Last split finishes]).
//           Note [One launch for whole rows]: with one block per whole row and one
//           pass (sum, mean, max), the block writes its output itself: no partials,
//           no finalize launch, whose gap weighed a few percent of a 64 MiB sum.
//   warp    many unit-stride rows of moderate length: one warp per row, one launch
//           for every op (Note [Rows per warp])
//   column  the other cases with R >= kColMinRows (dim:outer): 32 adjacent outputs x 8
//           warps of rows per block, rows split over blocks where outputs are few
//           (Note [Column reductions]), splits combined in order by the last split's
//           block (Note [Last split finishes]); 2-byte outputs that
//           lie in aligned pairs, two a lane (Note [Column pairs])
//   thread  short reductions (R < kColMinRows) that the block kernel does not take:
//           one thread per output walks its R elements.
// Accumulation in double for every dtype (max compares in double too; NaN
// propagates); var/std are two-pass (mean first, then the squared deviations), with
// PyTorch's divisor max(0, R - correction). Cost: one read of x (var/std: two), one
// write of out.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <mutex>
#include <vector>

#include "cuda/cuda_backend.h"
#include "cuda/kernel_util.cuh"

namespace sb::cuda {

namespace {

enum Mode : int { kSum = 0, kMax = 1, kSqDev = 2 };

std::atomic<int64_t> g_column{0}, g_column_pairs{0}, g_finalize{0};
std::atomic<bool> g_last_split{true};  // set_reduce_last_split

__device__ __forceinline__ double combine(int mode, double acc, double v) {
  return mode == kMax ? nan_max(acc, v) : acc + v;
}

__device__ __forceinline__ double finish(ReduceOp op, double s, int64_t R, int64_t correction) {
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Max: return s;
    case ReduceOp::Mean: return s / static_cast<double>(R);
    case ReduceOp::Var: return s / static_cast<double>(R - correction > 0 ? R - correction : 0);
    case ReduceOp::Std: return ::sqrt(s / static_cast<double>(R - correction > 0 ? R - correction : 0));
  }
  return s;
}

// Note [Linear reduced dims]
// After coalescing, the reduced dims are most often one dim at one stride (a row, a
// column, a contiguous block of dims). Then the offset of element r is r * rstride: the
// kernels take kLinear = true and skip OffsetCalc's per-element division, which with one
// 4-byte load per element had kept the block and column kernels far below the device's
// copy bandwidth on an H100 (docs/notes/cuda.md). Stride 1 in the block kernel
// also reads 16 bytes per thread and load (reduce_row_linear).
template <bool kLinear>
__device__ __forceinline__ int64_t red_offset(const OffsetCalc<1>& red, int64_t rstride, int64_t r) {
  if constexpr (kLinear) {
    return r * rstride;
  } else {
    int64_t ro[1];
    red.get(r, ro);
    return ro[0];
  }
}

__device__ __forceinline__ double prep(int mode, double v, double m) { return mode == kSqDev ? (v - m) * (v - m) : v; }

// Note [Last split finishes]
// A reduction split over several blocks (the column kernels' blockIdx.y, the block
// kernel's splits of long rows) left its partials to reduce_finalize_kernel, a second,
// dependent launch, a tenth of a 64 MiB column sum's time (docs/notes/cuda.md, "Last
// split finishes"). Now each block, once its partials are written, counts itself on its
// group's counter (a column block, or an output of the block kernel); the block that
// brings the count to `splits` adds the group's partials in split order, as the
// finalize kernel does (the same bits), writes the outputs (or var's means) and sets
// the counter back to 0. The counters are one zeroed buffer per device, kept between
// calls (split_counters): every kernel of ours runs on the legacy default stream, so no
// two reductions hold them at once, and each launch leaves them zero. Groups beyond the
// buffer take the finalize launch. The partials are read through L2 (__ldcg): another
// SM wrote them.
__device__ __forceinline__ bool last_split(int* counter, int64_t splits) {
  __shared__ int is_last;
  __threadfence();  // this block's partials, visible before its count
  __syncthreads();
  if (threadIdx.x == 0 && threadIdx.y == 0) {
    is_last = atomicAdd(counter, 1) + 1 == splits;
    if (is_last) *counter = 0;  // every split has counted: the next launch starts at 0
  }
  __syncthreads();
  if (is_last) __threadfence();
  return is_last;
}

// Output o from its partial s (every split combined, in order): the final value into
// out[out_off], or the mean into mean_out[o] (var's first pass).
template <typename T>
__device__ __forceinline__ void store_reduced(T* out, int64_t out_off, double* mean_out, int64_t o, double s,
                                              ReduceOp op, int64_t R, int64_t correction) {
  if (mean_out) mean_out[o] = s / static_cast<double>(R);
  else out[out_off] = cvt<T>(finish(op, s, R, correction));
}

// The splits of output o combined in order, from the identity (every path's order);
// kLoads loads in flight before their adds, which keep that order. (The pairs kernel
// takes 1: with 4, its two outputs took it from 40 registers to 50, six blocks an SM to
// four.)
template <int kLoads = 4>
__device__ __forceinline__ double combine_splits(const double* partial, int64_t o, int64_t splits, ReduceOp op) {
  const int mode = op == ReduceOp::Max ? kMax : kSum;
  const double* p = partial + o * splits;
  double s = mode == kMax ? -INFINITY : 0.0;
  int64_t k = 0;
  if constexpr (kLoads > 1) {
    for (; k + kLoads <= splits; k += kLoads) {
      double v[kLoads];
#pragma unroll
      for (int u = 0; u < kLoads; ++u) v[u] = __ldcg(p + k + u);
#pragma unroll
      for (int u = 0; u < kLoads; ++u) s = combine(mode, s, v[u]);
    }
  }
  for (; k < splits; ++k) s = combine(mode, s, __ldcg(p + k));
  return s;
}

// One split's partial as combine_splits would finish it.
__device__ __forceinline__ double one_split(double acc, ReduceOp op) {
  return op == ReduceOp::Max ? combine(kMax, -INFINITY, acc) : combine(kSum, 0.0, acc);
}

// Where the outputs go once the splits are in (Note [Last split finishes]). With
// `finish` the kernel writes them: at once where there is one split, else the last
// split's block, counting on `counters`; without it the finalize kernel does.
template <typename T>
struct SplitsOut {
  T* out = nullptr;
  double* mean_out = nullptr;
  int* counters = nullptr;
  bool finish = false;
  ReduceOp op = ReduceOp::Sum;
  int64_t correction = 0;
};

// This thread's share of the contiguous elements p[0, n): 16-byte loads between a
// scalar head (up to the first 16-byte boundary) and a scalar tail; elements
// tid, tid + nt, ... of each part, kRowLoads vector loads in flight: with one warp a
// row and every row resident at once, the bytes in flight, not waves of blocks, set
// the rate (two loads fell short of the read ceiling: docs/notes/cuda.md, Rows).
constexpr int kRowLoads = 4;
template <typename T>
__device__ __forceinline__ double reduce_row_linear(const T* p, int64_t n, int tid, int nt, int mode, double m,
                                                   double acc) {
  constexpr int V = 16 / sizeof(T) > 0 ? 16 / sizeof(T) : 1;
  using Vec = AlignedVector<T, V>;
  const uintptr_t addr = reinterpret_cast<uintptr_t>(p);
  int64_t head = addr % sizeof(T) != 0 ? n : static_cast<int64_t>(((16 - addr % 16) % 16) / sizeof(T));
  head = head < n ? head : n;
  for (int64_t i = tid; i < head; i += nt) acc = combine(mode, acc, prep(mode, cvt<double>(p[i]), m));
  const Vec* pv = reinterpret_cast<const Vec*>(p + head);
  const int64_t nv = (n - head) / V;
  int64_t i = tid;
  for (; i + (kRowLoads - 1) * nt < nv; i += kRowLoads * nt) {
    Vec a[kRowLoads];
#pragma unroll
    for (int u = 0; u < kRowLoads; ++u) a[u] = pv[i + u * nt];
#pragma unroll
    for (int u = 0; u < kRowLoads; ++u)
#pragma unroll
      for (int k = 0; k < V; ++k) acc = combine(mode, acc, prep(mode, cvt<double>(a[u].val[k]), m));
  }
  for (; i < nv; i += nt) {
    const Vec a = pv[i];
#pragma unroll
    for (int k = 0; k < V; ++k) acc = combine(mode, acc, prep(mode, cvt<double>(a.val[k]), m));
  }
  for (int64_t j = head + nv * V + tid; j < n; j += nt) acc = combine(mode, acc, prep(mode, cvt<double>(p[j]), m));
  return acc;
}

template <typename T>
__global__ void reduce_thread_kernel(T* out, const T* x, OffsetCalc<2> kept, OffsetCalc<1> red, int64_t O, int64_t R,
                                     ReduceOp op, int64_t correction) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t o = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; o < O; o += step) {
    int64_t off[2];
    kept.get(o, off);
    const T* xs = x + off[1];
    double s = op == ReduceOp::Max ? -INFINITY : 0.0;
    const int mode = op == ReduceOp::Max ? kMax : kSum;
    for (int64_t r = 0; r < R; ++r) {
      int64_t ro[1];
      red.get(r, ro);
      s = combine(mode, s, cvt<double>(xs[ro[0]]));
    }
    if (op == ReduceOp::Var || op == ReduceOp::Std) {
      const double mean = s / static_cast<double>(R);
      s = 0;
      for (int64_t r = 0; r < R; ++r) {
        int64_t ro[1];
        red.get(r, ro);
        const double d = cvt<double>(xs[ro[0]]) - mean;
        s += d * d;
      }
    }
    out[off[0]] = cvt<T>(finish(op, s, R, correction));
  }
}

// partial[w] for w = o * splits + s: the reduction of elements [s*chunk, (s+1)*chunk) of output o.
// With `direct` (one split, one pass: Note [One launch for whole rows]) the block
// writes the output's final value into so.out instead, and no partial is kept. kFused
// (Note [Last split finishes]): so.finish, the outputs written here. The whole-row
// launches keep the instance without that code: 48 registers against 64, five blocks an
// SM against four (the split launches are sized for four).
template <typename T, bool kLinear, bool kFused>
__global__ void reduce_block_kernel(const T* x, OffsetCalc<2> kept, OffsetCalc<1> red, int64_t rstride, int64_t O,
                                    int64_t R, int64_t splits, int64_t chunk, int mode, const double* mean,
                                    double* partial, bool direct, SplitsOut<T> so) {
  __shared__ double warp_acc[kThreads / kWarp];
  const double identity = mode == kMax ? -INFINITY : 0.0;
  const int tid = threadIdx.x, lane = tid % kWarp, wid = tid / kWarp, nwarps = blockDim.x / kWarp;
  const int nt = blockDim.x;
  for (int64_t w = blockIdx.x; w < O * splits; w += gridDim.x) {
    const int64_t o = w / splits, s = w - o * splits;
    int64_t off[2];
    kept.get(o, off);
    const T* xs = x + off[1];
    const double m = mode == kSqDev ? mean[o] : 0.0;
    const int64_t r0 = s * chunk, r1 = r0 + chunk < R ? r0 + chunk : R;
    double acc = identity;
    if (kLinear && rstride == 1) {
      acc = reduce_row_linear(xs + r0, r1 - r0, tid, nt, mode, m, acc);
    } else {
      int64_t r = r0 + tid;
      for (; r + 3 * nt < r1; r += 4 * nt) {  // four loads in flight
        double v[4];
#pragma unroll
        for (int u = 0; u < 4; ++u) v[u] = cvt<double>(xs[red_offset<kLinear>(red, rstride, r + u * nt)]);
#pragma unroll
        for (int u = 0; u < 4; ++u) acc = combine(mode, acc, prep(mode, v[u], m));
      }
      for (; r < r1; r += nt) acc = combine(mode, acc, prep(mode, cvt<double>(xs[red_offset<kLinear>(red, rstride, r)]), m));
    }
    acc = mode == kMax ? warp_max(acc) : warp_sum(acc);
    if (lane == 0) warp_acc[wid] = acc;
    __syncthreads();
    if (wid == 0) {
      acc = lane < nwarps ? warp_acc[lane] : identity;
      acc = mode == kMax ? warp_max(acc) : warp_sum(acc);
      if (lane == 0) {
        if (!kFused && direct)
          so.out[off[0]] = cvt<T>(finish(so.op, acc, R, so.correction));
        else if (kFused && splits == 1)
          store_reduced(so.out, off[0], so.mean_out, o, one_split(acc, so.op), so.op, R, so.correction);
        else
          partial[w] = acc;
      }
    }
    if (kFused && splits > 1 && last_split(so.counters + o, splits) && tid == 0)
      store_reduced(so.out, off[0], so.mean_out, o, combine_splits(partial, o, splits, so.op), so.op, R, so.correction);
    __syncthreads();  // warp_acc is rewritten by the next iteration
  }
}

// Note [Rows per warp]
// A whole-row reduction with one block per row pays a block's fixed cost per row (the
// block reduction through shared memory, two barriers) and runs in waves of blocks;
// with thousands of rows of a few KiB (a 4096 x 4096 sum over dim 1) that cost, not the
// memory, set the time. Where rows are unit-stride, many (kWarpRowsPerSm a streaming
// multiprocessor or more) and at most kWarpRowMax long, one warp takes one row: its 32
// lanes read it in 16-byte vectors, warp shuffles add the lanes, lane 0 writes the
// output. One launch for every op: var and std reread their row for the second pass
// (from L1/L2) after the warp has its mean. The block kernel keeps the long rows and
// the few-row cases, where one warp a row would leave the device idle.
constexpr int64_t kWarpRowsPerSm = 16, kWarpRowMax = 32768;

template <typename T>
__global__ void reduce_warp_rows_kernel(T* out, const T* x, OffsetCalc<2> kept, int64_t O, int64_t R, ReduceOp op,
                                        int64_t correction) {
  const int lane = threadIdx.x % kWarp;
  const int64_t warps = blockDim.x / kWarp;
  const int mode = op == ReduceOp::Max ? kMax : kSum;
  for (int64_t o = static_cast<int64_t>(blockIdx.x) * warps + threadIdx.x / kWarp; o < O;
       o += static_cast<int64_t>(gridDim.x) * warps) {  // o is the same in every lane: the shuffles see the whole warp
    int64_t off[2];
    kept.get(o, off);
    const T* xs = x + off[1];
    double acc = reduce_row_linear(xs, R, lane, kWarp, mode, 0.0, mode == kMax ? -INFINITY : 0.0);
    acc = mode == kMax ? warp_max(acc) : warp_sum(acc);
    if (op == ReduceOp::Var || op == ReduceOp::Std) {
      const double mean = __shfl_sync(0xffffffffu, acc, 0) / static_cast<double>(R);
      acc = warp_sum(reduce_row_linear(xs, R, lane, kWarp, kSqDev, mean, 0.0));
    }
    if (lane == 0) out[off[0]] = cvt<T>(finish(op, acc, R, correction));
  }
}

// Note [Column reductions]
// Outputs whose kept dims are innermost in x (a reduction over an outer dim,
// dim:outer) used one thread per output walking its R rows: 4096 outputs are 16 blocks
// on 132 SMs, one 4-byte load in flight per thread. Now a block takes kColWidth adjacent
// outputs (one coalesced row segment per warp) and kColWarps warps, each warp every
// kColWarps-th row of the block's range, col_unroll rows in flight per thread; the
// warps meet in shared memory. Where the output blocks do not fill the device, the
// rows are split over blockIdx.y as well (at least kColMinRows rows a split) and the
// last split's block combines the splits of each output in order (deterministic; Note
// [Last split finishes]).
//
// Note [Column splits in one wave]
// The splits make at most as many blocks as the device holds at once (the kernel's
// occupancy times the SMs), the split count rounded down: every block reads the same
// number of rows, so a second wave of a few blocks would read its rows with a few SMs'
// loads in flight, at a fraction of the bandwidth, after the rest are done. Rounding up
// to 8 blocks an SM (1152 blocks for a 4096-column sum on 132 SMs) left such a tail.
//
// Rows in flight a thread: 16 for 2-byte elements, whose warp loads are 64 bytes, and 8
// for wider ones, where 16 did not pay (docs/notes/cuda.md, "Seventh device run"). The
// values wait in T and become double at the add.
constexpr int kColWidth = 32, kColWarps = 8;
template <typename T>
constexpr int col_unroll() {
  return sizeof(T) == 2 ? 16 : 8;
}
constexpr int64_t kColMinRows = 256;

// partial[o * splits + s]: the reduction of rows [s*chunk, (s+1)*chunk) of output o.
// With so.finish (Note [Last split finishes]) the outputs are written here.
template <typename T, bool kLinear>
__global__ void reduce_column_kernel(const T* x, OffsetCalc<2> kept, OffsetCalc<1> red, int64_t rstride, int64_t O,
                                     int64_t R, int64_t splits, int64_t chunk, int mode, const double* mean,
                                     double* partial, SplitsOut<T> so) {
  __shared__ double acc_s[kColWarps][kColWidth + 1];
  const int lane = threadIdx.x, row = threadIdx.y;
  const int64_t o = static_cast<int64_t>(blockIdx.x) * kColWidth + lane, s = blockIdx.y;
  double acc = mode == kMax ? -INFINITY : 0.0;
  if (o < O) {
    int64_t off[2];
    kept.get(o, off);
    const T* xs = x + off[1];
    const double m = mode == kSqDev ? mean[o] : 0.0;
    const int64_t r0 = s * chunk, r1 = r0 + chunk < R ? r0 + chunk : R;
    int64_t r = r0 + row;
    constexpr int kU = col_unroll<T>();
    for (; r + (kU - 1) * kColWarps < r1; r += kU * kColWarps) {
      T v[kU];
#pragma unroll
      for (int u = 0; u < kU; ++u)  // the loads first: kU in flight
        v[u] = xs[red_offset<kLinear>(red, rstride, r + u * kColWarps)];
#pragma unroll
      for (int u = 0; u < kU; ++u) acc = combine(mode, acc, prep(mode, cvt<double>(v[u]), m));
    }
    for (; r < r1; r += kColWarps)
      acc = combine(mode, acc, prep(mode, cvt<double>(xs[red_offset<kLinear>(red, rstride, r)]), m));
  }
  acc_s[row][lane] = acc;
  __syncthreads();
  if (row == 0 && o < O) {
    for (int k = 1; k < kColWarps; ++k) acc = combine(mode, acc, acc_s[k][lane]);
    if (so.finish && splits == 1) {
      int64_t off[2];
      kept.get(o, off);
      store_reduced(so.out, off[0], so.mean_out, o, one_split(acc, so.op), so.op, R, so.correction);
    } else {
      partial[o * splits + s] = acc;
    }
  }
  if (so.finish && splits > 1 && last_split(so.counters + blockIdx.x, splits) && row == 0 && o < O) {
    int64_t off[2];
    kept.get(o, off);
    store_reduced(so.out, off[0], so.mean_out, o, combine_splits(partial, o, splits, so.op), so.op, R, so.correction);
  }
}

// Note [Column pairs]
// The column kernel reads one element a lane a row: 64 bytes a warp load for 2-byte
// elements, half of float32's 128, and at the same loads in flight a bf16 outer sum
// read far less of the read ceiling than float32's (docs/notes/cuda.md, "Column
// pairs"). Where x's outputs lie in pairs on 4-byte words (the kept dims one dim of x
// stride 1, an even output count, the reduced dims linear at an even stride, x 4-byte
// aligned), a lane takes two adjacent outputs and loads their word: 128 bytes a warp
// load, 64 outputs a block, the block grid, rows in flight and one-wave splits as
// float32's. Each output's
// rows are added in the column kernel's order (warp w: rows w, w + 8, ... of a split;
// the warps in order; the splits in order by the last split's block): deterministic,
// though the split count, from this kernel's blocks and occupancy, may differ from the
// element kernel's. (A lane of 16 bytes, 8 outputs, was slower where the columns were
// few: docs/notes/cuda.md, "Vector column reductions".)
template <typename T>
__device__ __forceinline__ double half_of_word(uint32_t w, int k) {
  const unsigned short b = static_cast<unsigned short>(w >> (16 * k));
  if constexpr (std::is_same_v<T, __half>) return cvt<double>(__ushort_as_half(b));
  else return cvt<double>(__ushort_as_bfloat16(b));
}

// partial[o * splits + s] for outputs o = 2 (32 blockIdx.x + lane) and o + 1; x + o is
// 4-byte aligned and rstride even (Note [Column pairs]).
// out_stride: out's stride along its one kept dim.
template <typename T>
__global__ void reduce_column_pairs_kernel(const T* x, int64_t rstride, int64_t O, int64_t R, int64_t splits,
                                           int64_t chunk, int mode, const double* mean, double* partial,
                                           int64_t out_stride, SplitsOut<T> so) {
  static_assert(sizeof(T) == 2, "pairs of 2-byte elements");
  __shared__ double acc_s[kColWarps][2 * kColWidth + 1];
  const int lane = threadIdx.x, row = threadIdx.y;
  const int64_t o = 2 * (static_cast<int64_t>(blockIdx.x) * kColWidth + lane), s = blockIdx.y;
  double a0 = mode == kMax ? -INFINITY : 0.0, a1 = a0;
  if (o < O) {  // O is even: o + 1 < O too
    const double m0 = mode == kSqDev ? mean[o] : 0.0, m1 = mode == kSqDev ? mean[o + 1] : 0.0;
    const uint32_t* xs = reinterpret_cast<const uint32_t*>(x + o);
    const int64_t ws = rstride / 2;  // words a row
    const int64_t r0 = s * chunk, r1 = r0 + chunk < R ? r0 + chunk : R;
    int64_t r = r0 + row;
    constexpr int kU = col_unroll<float>();  // 4-byte loads, as float32's
    for (; r + (kU - 1) * kColWarps < r1; r += kU * kColWarps) {
      uint32_t v[kU];
#pragma unroll
      for (int u = 0; u < kU; ++u) v[u] = xs[(r + u * kColWarps) * ws];  // the loads first: kU in flight
#pragma unroll
      for (int u = 0; u < kU; ++u) {
        a0 = combine(mode, a0, prep(mode, half_of_word<T>(v[u], 0), m0));
        a1 = combine(mode, a1, prep(mode, half_of_word<T>(v[u], 1), m1));
      }
    }
    for (; r < r1; r += kColWarps) {
      const uint32_t v = xs[r * ws];
      a0 = combine(mode, a0, prep(mode, half_of_word<T>(v, 0), m0));
      a1 = combine(mode, a1, prep(mode, half_of_word<T>(v, 1), m1));
    }
  }
  acc_s[row][2 * lane] = a0;
  acc_s[row][2 * lane + 1] = a1;
  __syncthreads();
  if (row == 0 && o < O) {
    for (int k = 1; k < kColWarps; ++k) {
      a0 = combine(mode, a0, acc_s[k][2 * lane]);
      a1 = combine(mode, a1, acc_s[k][2 * lane + 1]);
    }
    if (so.finish && splits == 1) {
      store_reduced(so.out, o * out_stride, so.mean_out, o, one_split(a0, so.op), so.op, R, so.correction);
      store_reduced(so.out, (o + 1) * out_stride, so.mean_out, o + 1, one_split(a1, so.op), so.op, R, so.correction);
    } else {
      partial[o * splits + s] = a0;
      partial[(o + 1) * splits + s] = a1;
    }
  }
  if (so.finish && splits > 1 && last_split(so.counters + blockIdx.x, splits) && row == 0 && o < O) {
    for (int k = 0; k < 2; ++k)
      store_reduced(so.out, (o + k) * out_stride, so.mean_out, o + k, combine_splits<1>(partial, o + k, splits, so.op),
                    so.op, R, so.correction);
  }
}

// Blocks of reduce_column_kernel<T, kLinear> an SM of device `dev` holds at once (Note
// [Column splits in one wave]), asked of the runtime once per device and kernel: the
// query costs microseconds, as much as a few percent of a 64 MiB column sum. The query
// reads the current device: the caller's DeviceGuard has made it `dev`.
template <typename T, bool kLinear>
int column_blocks_per_sm(int dev) {
  const int c = per_device_once(dev, [](int) {
    int n = 0;
    SB_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, reduce_column_kernel<T, kLinear>,
                                                                kColWidth * kColWarps, 0));
    return n;
  });
  return std::max(c, 1);
}
template <typename T>
int column_pairs_blocks_per_sm(int dev) {  // the same for reduce_column_pairs_kernel<T>
  const int c = per_device_once(dev, [](int) {
    int n = 0;
    SB_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, reduce_column_pairs_kernel<T>,
                                                                kColWidth * kColWarps, 0));
    return n;
  });
  return std::max(c, 1);
}

// Adds (or maxes) the splits of each output in order; writes the mean (var stage 1)
// or the final value.
template <typename T>
__global__ void reduce_finalize_kernel(T* out, OffsetCalc<2> kept, const double* partial, int64_t O, int64_t splits,
                                       int64_t R, ReduceOp op, int64_t correction, double* mean_out) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t o = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; o < O; o += step) {
    int64_t off[2] = {0, 0};
    if (!mean_out) kept.get(o, off);
    store_reduced(out, off[0], mean_out, o, combine_splits(partial, o, splits, op), op, R, correction);
  }
}


// The counters of Note [Last split finishes]: kSplitCounters zeroed ints a device,
// allocated on first use and kept for the process (as the allocators are); null where n
// groups would not fit, and the caller takes the finalize launch. Splits are only made
// where the blocks are fewer than the device holds at once (column kernels) or the
// outputs fewer than 4 an SM (block kernel), so n stays far below it.
constexpr int64_t kSplitCounters = 8192;
int* split_counters(int dev, int64_t n) {
  if (n > kSplitCounters || !g_last_split) return nullptr;
  static std::mutex mu;
  static std::vector<int*> bufs;
  std::lock_guard<std::mutex> lock(mu);
  if (bufs.empty()) bufs.assign(static_cast<size_t>(std::max(device_count(), 1)), nullptr);
  int*& b = bufs[static_cast<size_t>(dev)];
  if (!b) {
    SB_CUDA_CHECK(cudaMalloc(&b, kSplitCounters * sizeof(int)));
    SB_CUDA_CHECK(cudaMemset(b, 0, kSplitCounters * sizeof(int)));  // on the default stream, before any reduction
  }
  return b;
}

// reduce_finalize_kernel: the splits of O outputs combined, where the kernels that made
// them did not (Note [Last split finishes]).
template <typename T>
void finalize_splits(T* out, const OffsetCalc<2>& kept, const double* partial, int64_t O, int64_t splits, int64_t R,
                     ReduceOp op, int64_t correction, double* mean_out, int dev) {
  reduce_finalize_kernel<T><<<grid_for(O, dev), kThreads>>>(out, kept, partial, O, splits, R, op, correction, mean_out);
  SB_CUDA_LAUNCH_CHECK();
  ++g_finalize;
}

}  // namespace

ReducePathCounts reduce_path_counts() { return {g_column.load(), g_column_pairs.load(), g_finalize.load()}; }
void reset_reduce_path_counts() {
  g_column = 0;
  g_column_pairs = 0;
  g_finalize = 0;
}
void set_reduce_last_split(bool on) { g_last_split = on; }

void reduce(ReduceOp op, const Tensor& out, const Tensor& x, const Shape& dims, int64_t correction) {
  const char* name = reduce_op_name(op);
  const int dev = common_device(name, {&out, &x});
  SB_CHECK(out.dtype() == x.dtype(), name, " (CUDA): dtypes differ: out ", out.dtype(), ", input ", x.dtype());
  Shape keep = x.sizes();
  Shape red_sizes(x.sizes().size(), 1);
  int64_t prev = -1;
  for (int64_t d : dims) {
    SB_CHECK(d > prev && d < x.dim(), name, " (CUDA): dims ", dims, " must be sorted, unique and in [0, ", x.dim(),
             ")");
    prev = d;
    keep[d] = 1;
    red_sizes[d] = x.sizes()[d];
  }
  SB_CHECK(out.sizes() == keep, name, " (CUDA): out sizes ", out.sizes(), " != keepdim sizes ", keep, " of input ",
           x.sizes(), " reduced over ", dims);
  const int64_t O = out.numel();
  int64_t R = 1;
  for (int64_t s : red_sizes) R *= s;
  SB_CHECK(!(op == ReduceOp::Max && R == 0 && O > 0), name, " (CUDA): max of an empty set (input sizes ", x.sizes(),
           ", dims ", dims, ")");
  if (O == 0) return;
  DeviceGuard g(dev);
  const Shape* kp[2] = {&out.strides(), &x.strides()};
  const OffsetCalc<2> kept = make_iter<2>(keep, kp, name);
  const Shape* rp[1] = {&x.strides()};
  const OffsetCalc<1> red = make_iter<1>(red_sizes, rp, name);
  const bool inner = red.ndim > 0 && red.strides[0][red.ndim - 1] == 1;
  const int sms = sm_count(dev);
  const bool use_block = R > 0 && ((inner && R >= 32) || (O < 1024 && R >= 1024));
  const bool linear = red.ndim <= 1;  // Note [Linear reduced dims]
  const int64_t rstride = red.ndim == 1 ? red.strides[0][0] : 0;

  SB_CUDA_DISPATCH_MATH(x.dtype(), name, {
    scalar_t* po = static_cast<scalar_t*>(out.data_ptr());
    const scalar_t* px = static_cast<const scalar_t*>(x.data_ptr());
    if (!use_block && R < kColMinRows) {
      reduce_thread_kernel<scalar_t><<<grid_for(O, dev), kThreads>>>(po, px, kept, red, O, R, op, correction);
      SB_CUDA_LAUNCH_CHECK();
    } else if (!use_block) {  // Note [Column reductions]
      // Note [Column pairs]: x + off of output o is x + o, every row on a 4-byte word
      const bool pairs = sizeof(scalar_t) == 2 && linear && kept.ndim == 1 && kept.strides[1][0] == 1 && O % 2 == 0 &&
                         rstride % 2 == 0 && reinterpret_cast<uintptr_t>(px) % 4 == 0;
      const int64_t per_block = pairs ? 2 * kColWidth : kColWidth;
      const int64_t col_blocks = (O + per_block - 1) / per_block;
      int resident = 0;  // Note [Column splits in one wave]
      if constexpr (sizeof(scalar_t) == 2) {
        if (pairs) resident = column_pairs_blocks_per_sm<scalar_t>(dev);
      }
      if (!pairs)
        resident = linear ? column_blocks_per_sm<scalar_t, true>(dev) : column_blocks_per_sm<scalar_t, false>(dev);
      const int64_t slots = static_cast<int64_t>(resident) * sms;
      int64_t splits = 1;
      if (col_blocks < slots) splits = std::min<int64_t>({slots / col_blocks, R / kColMinRows, 65535});
      splits = std::max<int64_t>(splits, 1);
      const int64_t chunk = (R + splits - 1) / splits;
      splits = (R + chunk - 1) / chunk;
      SB_CHECK(col_blocks <= INT32_MAX, name, " (CUDA): ", O, " outputs exceed the column kernel's grid");
      const dim3 grid(static_cast<unsigned>(col_blocks), static_cast<unsigned>(splits)), block(kColWidth, kColWarps);
      int* counters = splits > 1 ? split_counters(dev, col_blocks) : nullptr;  // Note [Last split finishes]
      const bool fused = splits == 1 || counters;
      const bool need_partial = splits > 1 || !fused;
      Tensor partial = need_partial ? empty({O * splits}, DType::Float64, out.device()) : Tensor();
      double* pp = need_partial ? partial.data<double>() : nullptr;
      const int mode = op == ReduceOp::Max ? kMax : kSum;
      const int64_t out_stride = kept.ndim == 1 ? kept.strides[0][0] : 0;  // the pairs kernel's one kept dim
      ++(pairs ? g_column_pairs : g_column);
      auto column = [&](int md, const double* mean, double* mean_out) {
        const SplitsOut<scalar_t> so{mean_out ? nullptr : po, mean_out, counters, fused, op, correction};
        if constexpr (sizeof(scalar_t) == 2) {
          if (pairs) {
            reduce_column_pairs_kernel<scalar_t>
                <<<grid, block>>>(px, rstride, O, R, splits, chunk, md, mean, pp, out_stride, so);
            return;
          }
        }
        if (linear)
          reduce_column_kernel<scalar_t, true>
              <<<grid, block>>>(px, kept, red, rstride, O, R, splits, chunk, md, mean, pp, so);
        else
          reduce_column_kernel<scalar_t, false>
              <<<grid, block>>>(px, kept, red, rstride, O, R, splits, chunk, md, mean, pp, so);
      };
      auto finalize = [&](double* mean_out) {
        if (!fused) finalize_splits(po, kept, pp, O, splits, R, op, correction, mean_out, dev);
      };
      if (op == ReduceOp::Var || op == ReduceOp::Std) {
        Tensor mean = empty({O}, DType::Float64, out.device());
        column(mode, nullptr, mean.data<double>());
        SB_CUDA_LAUNCH_CHECK();
        finalize(mean.data<double>());
        column(kSqDev, mean.data<double>(), nullptr);
        SB_CUDA_LAUNCH_CHECK();
      } else {
        column(mode, nullptr, nullptr);
        SB_CUDA_LAUNCH_CHECK();
      }
      finalize(nullptr);
    } else if (linear && rstride == 1 && O >= kWarpRowsPerSm * sms && R <= kWarpRowMax) {  // Note [Rows per warp]
      const int64_t warps = kThreads / kWarp;
      const unsigned blocks = static_cast<unsigned>(std::min<int64_t>((O + warps - 1) / warps, 8LL * sms));
      reduce_warp_rows_kernel<scalar_t><<<blocks, kThreads>>>(po, px, kept, O, R, op, correction);
      SB_CUDA_LAUNCH_CHECK();
    } else {
      const int64_t want = 4LL * sms;  // blocks to fill the device
      int64_t splits = 1;
      if (O < want && R > 8192) splits = std::min<int64_t>((R + 4095) / 4096, (want + O - 1) / O);
      const int64_t chunk = (R + splits - 1) / splits;
      splits = (R + chunk - 1) / chunk;
      const int threads = static_cast<int>(std::min<int64_t>(kThreads, std::max<int64_t>(kWarp, (chunk + kWarp - 1) / kWarp * kWarp)));
      const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(O * splits, static_cast<int64_t>(sms) * 64));
      Tensor mean;
      const int mode = op == ReduceOp::Max ? kMax : kSum;
      const bool two_pass = op == ReduceOp::Var || op == ReduceOp::Std;
      // Note [One launch for whole rows], Note [Last split finishes]
      const bool direct = splits == 1 && !two_pass;
      int* counters = splits > 1 ? split_counters(dev, O) : nullptr;
      const bool fused = !direct && (splits == 1 || counters);
      const bool need_partial = splits > 1 || !(direct || fused);
      Tensor partial = need_partial ? empty({O * splits}, DType::Float64, out.device()) : Tensor();
      double* pp = need_partial ? partial.data<double>() : nullptr;
      auto block_pass = [&](int md, const double* mean, double* mean_out) {
        const SplitsOut<scalar_t> so{mean_out ? nullptr : po, mean_out, counters, fused, op, correction};
        auto* k = linear ? (fused ? reduce_block_kernel<scalar_t, true, true> : reduce_block_kernel<scalar_t, true, false>)
                         : (fused ? reduce_block_kernel<scalar_t, false, true> : reduce_block_kernel<scalar_t, false, false>);
        k<<<blocks, threads>>>(px, kept, red, rstride, O, R, splits, chunk, md, mean, pp, direct, so);
      };
      auto finalize = [&](double* mean_out) {
        if (!fused) finalize_splits(po, kept, pp, O, splits, R, op, correction, mean_out, dev);
      };
      if (two_pass) mean = empty({O}, DType::Float64, out.device());
      block_pass(mode, nullptr, two_pass ? mean.data<double>() : nullptr);
      SB_CUDA_LAUNCH_CHECK();
      if (direct) return;
      if (two_pass) {
        finalize(mean.data<double>());
        block_pass(kSqDev, mean.data<double>(), nullptr);
        SB_CUDA_LAUNCH_CHECK();
      }
      finalize(nullptr);
    }
  });
}

}  // namespace sb::cuda
