// elementwise.cu — the elementwise family on the GPU: binary (tensor-tensor and
// tensor-scalar), unary, and the fused normalize along one dim.
//
// Variants (chosen per call, see kernel_util.cuh Note [Strided iteration on the GPU]):
//   vectorized  every operand contiguous (one dim of stride 1 after coalescing) and
//               16-byte aligned: each thread moves 16 bytes per operand per step
//               (float4, 2 doubles, 8 halves, 4 int32), scalar tail
//   contiguous  one dim of stride 1 but misaligned: one element per access
//   tiled       an input whose fastest dim is out's next-to-last (a transposed operand,
//               NCHW beside NHWC): 2-D tiles through shared memory (Note [Tiled
//               elementwise for mismatched layouts]); 2- and 4-byte elements in pairs
//               where aligned (Note [Paired elementwise tiles])
//   strided     any other layout: offsets from the flat index (OffsetCalc)
// Arithmetic happens in acc_t: float for half and bfloat16, int64 for int32 (wrapping back on the
// store, as int32 arithmetic wraps), the type itself otherwise. Integer division by
// zero gives 0 (the CPU would trap; no GPU trap exists). maximum/minimum propagate
// NaN. Cost: one read per input element, one write per output element: memory bound,
// so the ceiling is the device-to-device copy bandwidth (baseline d2d_copy).
//
// normalize: one warp per row along `dim`: mean, then the sum of squared deviations
// (two passes over the row, the second usually from L1/L2), then the write: three
// reads and one write of each element worst case, one read from DRAM when the row
// fits in cache. Accumulates in float (float32/float16) or double.
#include <atomic>

#include "cuda/cuda_backend.h"
#include "cuda/kernel_util.cuh"

namespace sb::cuda {

namespace {


// Each functor's code, for the kernels that take the op at run time (the tiled one):
// binary ops 0-15, unary 16-31, tensor-scalar 32-47.
template <BinaryOp OP>
struct BinaryFn {
  static constexpr int kCode = static_cast<int>(OP);
  template <typename A>
  __device__ __forceinline__ A operator()(A a, A b) const {
    if constexpr (OP == BinaryOp::Add) return a + b;
    else if constexpr (OP == BinaryOp::Sub) return a - b;
    else if constexpr (OP == BinaryOp::Mul) return a * b;
    else if constexpr (OP == BinaryOp::Div) {
      if constexpr (std::is_integral_v<A>) return b == 0 ? A(0) : a / b;
      else return a / b;
    } else if constexpr (OP == BinaryOp::Maximum) {
      if (a != a) return a;
      return (b != b || b > a) ? b : a;
    } else {
      if (a != a) return a;
      return (b != b || b < a) ? b : a;
    }
  }
};

template <BinaryOp OP, typename A>
struct ScalarFn {  // a op s, s fixed
  static constexpr int kCode = 32 + static_cast<int>(OP);
  A s;
  __device__ __forceinline__ A operator()(A a) const { return BinaryFn<OP>()(a, s); }
};

template <UnaryOp OP>
struct UnaryFn {
  static constexpr int kCode = 16 + static_cast<int>(OP);
  template <typename A>
  __device__ __forceinline__ A operator()(A a) const {
    if constexpr (OP == UnaryOp::Neg) return -a;
    else if constexpr (OP == UnaryOp::Abs) return a < A(0) ? -a : a;  // NaN stays NaN
    else if constexpr (OP == UnaryOp::Relu) return a < A(0) ? A(0) : a;  // NaN stays NaN
    else if constexpr (OP == UnaryOp::Exp) {
      if constexpr (std::is_same_v<A, float>) return expf(a);
      else if constexpr (std::is_same_v<A, double>) return ::exp(a);
      else return static_cast<A>(::exp(static_cast<double>(a)));
    } else {
      if constexpr (std::is_same_v<A, float>) return sqrtf(a);
      else if constexpr (std::is_same_v<A, double>) return ::sqrt(a);
      else return static_cast<A>(::sqrt(static_cast<double>(a)));
    }
  }
};

template <typename F, typename A, int NIN>
__device__ __forceinline__ A call(const F& f, const A (&x)[NIN]) {
  if constexpr (NIN == 1) return f(x[0]);
  else return f(x[0], x[1]);
}

// The op of a run-time `code` (kCode above) as a functor op(x, s) over the inputs x (s:
// a tensor-scalar op's scalar), handed to body: one switch for all the elements a body
// computes, not one an element (Note [Tiled kernel registers]).
template <BinaryOp OP> struct Code2 {
  template <typename A> __device__ __forceinline__ A operator()(const A (&x)[2], A) const {
    return BinaryFn<OP>()(x[0], x[1]);
  }
};
template <BinaryOp OP> struct CodeS {
  template <typename A> __device__ __forceinline__ A operator()(const A (&x)[1], A s) const {
    return BinaryFn<OP>()(x[0], s);
  }
};
template <UnaryOp OP> struct Code1 {
  template <typename A> __device__ __forceinline__ A operator()(const A (&x)[1], A) const {
    return UnaryFn<OP>()(x[0]);
  }
};

template <int NIN, typename Body>
__device__ __forceinline__ void with_code(int code, Body&& body) {
#define SB_BIN(OP, FN) case static_cast<int>(BinaryOp::OP): body(FN<BinaryOp::OP>{}); return;
#define SB_UN(OP) case static_cast<int>(UnaryOp::OP): body(Code1<UnaryOp::OP>{}); return;
  if constexpr (NIN == 2) {
    switch (code) { SB_BIN(Add, Code2) SB_BIN(Sub, Code2) SB_BIN(Mul, Code2) SB_BIN(Div, Code2)
                    SB_BIN(Maximum, Code2) SB_BIN(Minimum, Code2) }
  } else if (code >= 32) {
    switch (code - 32) { SB_BIN(Add, CodeS) SB_BIN(Sub, CodeS) SB_BIN(Mul, CodeS) SB_BIN(Div, CodeS)
                         SB_BIN(Maximum, CodeS) SB_BIN(Minimum, CodeS) }
  } else {
    switch (code - 16) { SB_UN(Neg) SB_UN(Abs) SB_UN(Relu) SB_UN(Exp) SB_UN(Sqrt) }
  }
#undef SB_BIN
#undef SB_UN
}

template <typename F, typename A>
A scalar_of(const F& f) {  // a tensor-scalar functor's scalar, else 0
  if constexpr (F::kCode >= 32) return f.s;
  else return A(0);
}

struct Ptrs2 { const void* p[2]; };

// Note [Contiguous elementwise launch]
// Every operand contiguous and 16-byte aligned. Each block takes chunks of
// kVecThreads x kVecUnroll 16-byte vectors (a thread's kVecUnroll vectors kVecThreads
// apart, so each load instruction of a warp is 512 contiguous bytes) and loads all of
// a chunk's inputs before it computes and stores any: kVecUnroll vectors per operand in
// flight per thread. The grid covers every chunk (one chunk a block, as PyTorch's
// vectorized kernel covers its tensor), not a few resident blocks looping over the
// tensor: the H100 ran the looping form, one vector per operand in flight, below
// PyTorch's add (docs/notes/cuda.md). Blocks past 2^31 - 1 chunks loop. The n % V tail
// goes to block 0. out is not __restrict__: an in-place call (a.add_(b)) passes it as an
// input too; each element is read before it is written, by the same thread.
constexpr int kVecThreads = 128;
constexpr int kVecUnroll = 4;
constexpr int64_t kVecChunk = int64_t{kVecThreads} * kVecUnroll;  // vectors a chunk

template <typename T, int NIN, typename F>
__global__ void __launch_bounds__(kVecThreads) vectorized_kernel(T* out, Ptrs2 in, int64_t n, F f) {
  using A = acc_t<T>;
  constexpr int V = 16 / sizeof(T);
  using Vec = AlignedVector<T, V>;
  const int64_t nv = n / V, chunks = (nv + kVecChunk - 1) / kVecChunk;
  for (int64_t c = blockIdx.x; c < chunks; c += gridDim.x) {
    const int64_t first = c * kVecChunk + threadIdx.x;
    Vec v[kVecUnroll][NIN];
#pragma unroll
    for (int u = 0; u < kVecUnroll; ++u) {
      const int64_t i = first + u * kVecThreads;
      if (i < nv)
#pragma unroll
        for (int k = 0; k < NIN; ++k) v[u][k] = reinterpret_cast<const Vec*>(in.p[k])[i];
    }
#pragma unroll
    for (int u = 0; u < kVecUnroll; ++u) {
      const int64_t i = first + u * kVecThreads;
      if (i >= nv) break;
      Vec r;
#pragma unroll
      for (int j = 0; j < V; ++j) {
        A x[NIN];
#pragma unroll
        for (int k = 0; k < NIN; ++k) x[k] = cvt<A>(v[u][k].val[j]);
        r.val[j] = cvt<T>(call(f, x));
      }
      reinterpret_cast<Vec*>(out)[i] = r;
    }
  }
  if (blockIdx.x == 0)
    for (int64_t i = nv * V + threadIdx.x; i < n; i += blockDim.x) {  // tail: fewer than V elements
      A x[NIN];
#pragma unroll
      for (int k = 0; k < NIN; ++k) x[k] = cvt<A>(static_cast<const T*>(in.p[k])[i]);
      out[i] = cvt<T>(call(f, x));
    }
}

// Blocks of vectorized_kernel for n elements of T: one per chunk, at least one (the tail).
template <typename T>
unsigned vectorized_blocks(int64_t n) {
  constexpr int64_t kChunkElems = kVecChunk * static_cast<int64_t>(16 / sizeof(T));
  return static_cast<unsigned>(std::clamp<int64_t>((n + kChunkElems - 1) / kChunkElems, 1, INT32_MAX));
}

// Any layout (contiguous-but-misaligned included: one dim of stride 1).
template <typename T, int NIN, typename F>
__global__ void strided_kernel(T* out, Ptrs2 in, OffsetCalc<NIN + 1> it, int64_t n, F f) {
  using A = acc_t<T>;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    int64_t off[NIN + 1];
    it.get(i, off);
    A x[NIN];
#pragma unroll
    for (int k = 0; k < NIN; ++k) x[k] = cvt<A>(static_cast<const T*>(in.p[k])[off[k + 1]]);
    out[off[0]] = cvt<T>(call(f, x));
  }
}

// Note [Tiled elementwise for mismatched layouts]
// When the walk ordered by out (kernel_util.cuh) ends in two dims i (rows) and j
// (columns, stride 1 in out) and an input runs along i instead (stride 1 there, not
// along j: a transposed or column-major operand, NCHW beside an NHWC out, a relu out=
// into a transposed buffer seen from its input), the flat walk reads that input a
// column at a time: one element per 32-byte sector a warp touches. The tiled kernel
// takes TxT tiles of (i, j) (T = 64, 32 for 8-byte elements) batched over the other dims:
// block (32, 8) first reads each such "staged" input's tile along i (coalesced) into
// shared memory, then computes the tile along j, reading out's other inputs straight
// from memory (coalesced along j, or broadcast) and the staged ones from the tile
// (T + 1 columns: the column reads hit 32 banks), and writes out along j. copy.cu's
// transpose tile with the op in it. The same planner (Note [One dimension planner])
// gives the dims; the launch only picks this kernel when the last two dims are 4 or more
// long. In place is safe: an input that is out has out's strides, so it is never staged
// and each element is read before it is written by the same thread. The op comes as a
// run-time code (with_code), uniform over the grid: one kernel per dtype and staged set
// (four) instead of one per op, which kept every binary's fatbin (each links all of
// lib/cuda) from doubling.
template <int N>
struct TileStrides {
  int i[N], j[N];  // per operand (0: out), elements along the rows and the columns
};

template <typename T>
constexpr int tile_edge() {
  return sizeof(T) >= 8 ? 32 : 64;
}
constexpr int kTileRows = 8;

// Note [Tiled kernel registers]
// Each thread keeps 2 x 8 (8-byte: 1 x 4) elements of a tile in flight per phase, from
// one base pointer per operand plus 32-bit offsets inside the tile: the launch takes the
// tiled path only where (kT - 1) * (|row stride| + |column stride|) of every operand fits
// an int. With the tile walked in 64-bit indices (i * si + j * sj per element, as the
// strided kernel does), nvcc gave a two-input kernel about 150 registers a thread
// (-Xptxas -v, sm_90): one 256-thread block an SM, too few loads in flight (measured in
// docs/notes/cuda.md). __launch_bounds__ asks for 3 blocks an SM, which nvcc meets in
// 58-80 registers, and 3 blocks' tiles (two inputs of 64 x 65 floats) fit in shared
// memory. The compute phase loads the unstaged input a column at a time before any
// store: with its loads after each element's store (out may alias it), they went one
// at a time, and a transposed add lagged the transposed copy by far (docs/notes/cuda.md).
// The staged set is a template argument and the op is switched on once a tile: with the
// operand or the op picked per element, nvcc put the kernel arguments in local memory
// and spilled. One variant a dtype (input 0 staged, input 1 not) spills 8 bytes.
constexpr int kTiledBlocksPerSm = 3;

// The unstaged input kU's element at row ty, column lj of the tile (i0, j0), and its
// row and column strides in ui, uj; nullptr where every input is staged (kU < 0).
template <int kU, typename E, int N>
__device__ __forceinline__ const E* unstaged_at(const Ptrs2& in, const int64_t (&off)[N], const TileStrides<N>& st,
                                                int64_t i0, int64_t j0, int ty, int lj, int& ui, int& uj) {
  if constexpr (kU < 0) {
    return nullptr;
  } else {
    ui = st.i[kU + 1];
    uj = st.j[kU + 1];
    return static_cast<const E*>(in.p[kU]) + off[kU + 1] + i0 * ui + j0 * uj + (ty * ui + lj * uj);
  }
}

// kStaged: the staged inputs (bit k: input k), a template argument so that no operand
// is picked at run time (an array of kernel arguments indexed at run time goes to
// local memory): one kernel for one input, three for two (01, 10, 11); only the staged
// inputs have a tile.
template <typename T, int NIN, unsigned kStaged>
__global__ void __launch_bounds__(32 * kTileRows, kTiledBlocksPerSm)
    tiled_kernel(T* out, Ptrs2 in, TileWalk<NIN + 1> walk, TileStrides<NIN + 1> st, int code, acc_t<T> s) {
  using A = acc_t<T>;
  constexpr int kT = tile_edge<T>(), kC = kT / 32, kR = kT / kTileRows;
  constexpr int kSlots = kStaged == 3u ? 2 : 1;
  constexpr int kU = NIN == 2 && kStaged != 3u ? (kStaged == 1u ? 1 : 0) : -1;  // the unstaged input, if any
  __shared__ T tile[kSlots][kT][kT + 1];
  const int tx = threadIdx.x, ty = threadIdx.y;
  walk.template each<kT, kT>([&](const int64_t (&off)[NIN + 1], int64_t i0, int64_t j0) {
    const int ni = static_cast<int>(min(static_cast<int64_t>(kT), walk.rows - i0));
    const int nj = static_cast<int>(min(static_cast<int64_t>(kT), walk.cols - j0));
    // the staged inputs' tiles, read along i (their stride there is 1): tile[slot][lj][li]
#pragma unroll
    for (int k = 0; k < NIN; ++k) {
      if (!(kStaged & (1u << k))) continue;
      const int slot = kStaged == 3u ? k : 0;
      const int sj = st.j[k + 1];
      const T* p = static_cast<const T*>(in.p[k]) + off[k + 1] + i0 + j0 * sj + (tx + ty * sj);
#pragma unroll
      for (int c = 0; c < kT; c += 32)
#pragma unroll
        for (int r = 0; r < kT; r += kTileRows)
          if (tx + c < ni && ty + r < nj) tile[slot][ty + r][tx + c] = p[c + r * sj];
    }
    __syncthreads();
    // the tile computed and written along j (out's stride there is 1), element
    // (li, lj) = (ty + 8 r, tx + 32 c), a column c at a time: the unstaged input's kR
    // elements loaded first (kR loads in flight; out may be that input, in place, and a
    // load after a store to out could not move ahead of it), then the op and the stores.
    // One switch on the op for the whole tile (with_code).
    const int so = st.i[0];
    T* o = out + off[0] + i0 * so + j0 + (ty * so + tx);
    int ui = 0, uj = 0;
    const T* d = unstaged_at<kU, T>(in, off, st, i0, j0, ty, tx, ui, uj);
    with_code<NIN>(code, [&](auto op) {
#pragma unroll
      for (int c = 0; c < kC; ++c) {
        T u[kR];
        if constexpr (kU >= 0) {
#pragma unroll
          for (int r = 0; r < kR; ++r)
            if (ty + kTileRows * r < ni && tx + 32 * c < nj) u[r] = d[kTileRows * r * ui + 32 * c * uj];
        }
#pragma unroll
        for (int r = 0; r < kR; ++r)
          if (ty + kTileRows * r < ni && tx + 32 * c < nj) {
            A x[NIN];
#pragma unroll
            for (int k = 0; k < NIN; ++k)
              x[k] = k == kU ? cvt<A>(u[r]) : cvt<A>(tile[kStaged == 3u ? k : 0][tx + 32 * c][ty + kTileRows * r]);
            o[kTileRows * r * so + 32 * c] = cvt<T>(op(x, s));
          }
      }
    });
    __syncthreads();  // the tiles are reused by the next iteration
  });
}

// Note [Paired elementwise tiles]
// tiled_kernel moves one element a lane per warp instruction: 64 bytes for 2-byte
// elements, and a 2-byte transposed add took nearly the float32 one's time for half the
// bytes (docs/notes/cuda.md). Where every pair of adjacent elements lies on a boundary
// of twice the element's size (below), tiled_pairs_kernel moves 2- and 4-byte elements
// as pairs, one 4- or 8-byte word per access, as copy.cu's paired transpose does (Note
// [Paired 2-byte transpose tiles]): a thread reads a staged input's words (i, i + 1) of
// columns j and j + 1 and turns that 2x2 block into the row words (j, j + 1) of rows i
// and i + 1 (two byte permutes, or a swap of halves); the shared tile holds 64 rows of
// 32 row words, word w of row r at column (w + r / 2) % 32, so that both phases hit
// distinct banks (8-byte words: within each half warp). The compute phase takes a row
// word a step: elements (i, j) and (i, j + 1), the unstaged input loaded as one word
// where it runs along j (else two elements), one word of out stored. Needs: out and
// each staged input aligned to the word, with every stride but their unit one even; a
// pair cut by the tile's edge (an odd row or column count) moves one element.
// Elsewhere, and for 1- and 8-byte elements, the element tile runs. Blocks an SM asked
// of nvcc: four for 2-byte pairs (61-64 registers, a 4-byte spill in two variants),
// three for 4-byte ones (64-80 registers; at four, 8-byte words spilled 132-256 bytes).
//
// Note [Two-half 2-byte tiles]: a thread of a 64 x 64 tile keeps 16 elements an operand
// in flight, 32 bytes of 2-byte ones against float32's 64, and the tiled kernels wait
// on their loads (docs/notes/cuda.md, "Seventh device run"). A one-input 2-byte launch
// (a unary op into a transposed out, NCHW into NHWC) therefore takes tiles of kHalves =
// 2 halves of 64 rows, 128 x 64: each thread stages both halves' words before the
// barrier and computes 16 rows, float32's bytes in flight, at float32's three blocks an
// SM, without a spill. Two-input 2-byte tiles of 128 rows spilled at three or four
// blocks an SM (docs/notes/cuda.md, "Word tiles and 16 KiB 2-byte tiles") and stay at
// 64 rows.
// The word store is an explicit one (PairWord::store, __stwb): with a plain store of the
// word beside the cut pair's store of its low element, nvcc stored the low element in
// both branches and the high one alone, two 4-byte stores a lane for float32.
//
// The staged words are loaded and the barrier passed before the unstaged input's words
// are: loading both before the barrier (one wait a tile, twice the bytes in flight a
// block) was slower on an H200 (docs/notes/cuda.md, "Seventh device run").
constexpr int kPairT = 64, kPairWords = kPairT / 2;

template <typename T, int NIN>
constexpr int pair_halves() {  // Note [Two-half 2-byte tiles]
  return sizeof(T) == 2 && NIN == 1 ? 2 : 1;
}

template <typename T, int NIN>
constexpr int tiled_pairs_blocks() {  // blocks an SM asked of nvcc (Note [Paired elementwise tiles])
  return sizeof(T) == 2 && pair_halves<T, NIN>() == 1 ? 4 : 3;
}

template <int kBytes> struct PairWord;  // E: an element's bits, W: two of them
template <> struct PairWord<2> {
  using E = uint16_t;
  using W = uint32_t;
  static __device__ __forceinline__ W make(E lo, E hi) { return lo | static_cast<uint32_t>(hi) << 16; }
  static __device__ __forceinline__ E lo(W w) { return static_cast<E>(w); }
  static __device__ __forceinline__ E hi(W w) { return static_cast<E>(w >> 16); }
  // w0 = (i, j), (i + 1, j); w1 = (i, j + 1), (i + 1, j + 1) -> rows i and i + 1
  static __device__ __forceinline__ void rows(W w0, W w1, W& r0, W& r1) {
    r0 = __byte_perm(w0, w1, 0x5410);
    r1 = __byte_perm(w0, w1, 0x7632);
  }
  static __device__ __forceinline__ void store(E* p, W w) { __stwb(reinterpret_cast<unsigned*>(p), w); }
};
template <> struct PairWord<4> {
  using E = uint32_t;
  using W = uint2;
  static __device__ __forceinline__ W make(E lo, E hi) { return make_uint2(lo, hi); }
  static __device__ __forceinline__ E lo(W w) { return w.x; }
  static __device__ __forceinline__ E hi(W w) { return w.y; }
  static __device__ __forceinline__ void rows(W w0, W w1, W& r0, W& r1) {
    r0 = make_uint2(w0.x, w1.x);
    r1 = make_uint2(w0.y, w1.y);
  }
  static __device__ __forceinline__ void store(E* p, W w) { __stwb(reinterpret_cast<uint2*>(p), w); }
};

template <typename T, typename E>
__device__ __forceinline__ T from_bits(E b) {
  if constexpr (std::is_same_v<T, __half>) return __ushort_as_half(b);
  else if constexpr (std::is_same_v<T, __nv_bfloat16>) return __ushort_as_bfloat16(b);
  else if constexpr (std::is_same_v<T, float>) return __uint_as_float(b);
  else return static_cast<T>(b);  // int32_t
}
template <typename E, typename T>
__device__ __forceinline__ E to_bits(T v) {
  if constexpr (std::is_same_v<T, __half>) return __half_as_ushort(v);
  else if constexpr (std::is_same_v<T, __nv_bfloat16>) return __bfloat16_as_ushort(v);
  else if constexpr (std::is_same_v<T, float>) return __float_as_uint(v);
  else return static_cast<E>(v);  // int32_t
}

template <typename T, int NIN, unsigned kStaged>
__global__ void __launch_bounds__(32 * kTileRows, tiled_pairs_blocks<T, NIN>())
    tiled_pairs_kernel(T* out, Ptrs2 in, TileWalk<NIN + 1> walk, TileStrides<NIN + 1> st, int code, acc_t<T> s,
                       bool u_words) {
  using P = PairWord<sizeof(T)>;
  using E = typename P::E;
  using W = typename P::W;
  using A = acc_t<T>;
  constexpr int kSlots = kStaged == 3u ? 2 : 1;
  constexpr int kU = NIN == 2 && kStaged != 3u ? (kStaged == 1u ? 1 : 0) : -1;  // the unstaged input, if any
  constexpr int kHalves = pair_halves<T, NIN>(), kTi = kHalves * kPairT;  // Note [Two-half 2-byte tiles]
  constexpr int kR = kTi / kTileRows;
  __shared__ W tile[kSlots][kTi][kPairWords];
  const int tx = threadIdx.x, ty = threadIdx.y;
  walk.template each<kTi, kPairT>([&](const int64_t (&off)[NIN + 1], int64_t i0, int64_t j0) {
    const int ni = static_cast<int>(min(static_cast<int64_t>(kTi), walk.rows - i0));
    const int nj = static_cast<int>(min(static_cast<int64_t>(kPairT), walk.cols - j0));
    // the staged inputs: words (li, li + 1) of columns lj = 2 w and lj + 1, li = 2 tx +
    // 64 h in half h
#pragma unroll
    for (int k = 0; k < NIN; ++k) {
      if (!(kStaged & (1u << k))) continue;
      const int slot = kStaged == 3u ? k : 0;
      const int sj = st.j[k + 1];
#pragma unroll
      for (int h = 0; h < kHalves; ++h) {
        const int li = 2 * tx + kPairT * h;
        const E* p = static_cast<const E*>(in.p[k]) + off[k + 1] + i0 + j0 * sj + li;
#pragma unroll
        for (int q = 0; q < kPairWords / kTileRows; ++q) {
          const int w = ty + kTileRows * q, lj = 2 * w;
          const E* pw = p + lj * sj;
          W w0{}, w1{};
          if (li < ni) {
            const bool pair = li + 1 < ni;
            if (lj < nj) w0 = pair ? *reinterpret_cast<const W*>(pw) : P::make(pw[0], 0);
            if (lj + 1 < nj) w1 = pair ? *reinterpret_cast<const W*>(pw + sj) : P::make(pw[sj], 0);
          }
          const int col = (w + tx) % kPairWords;  // rows li and li + 1: (w + r / 2) % 32, r / 2 = tx + 32 h
          P::rows(w0, w1, tile[slot][li][col], tile[slot][li + 1][col]);
        }
      }
    }
    __syncthreads();
    // rows r = ty + 8 k, word tx: columns (2 tx, 2 tx + 1); the unstaged input's words
    // loaded first (out may be that input, in place), then the op and the stores
    const int so = st.i[0], lj = 2 * tx;
    const bool j_in = lj < nj, j_pair = lj + 1 < nj;
    E* o = reinterpret_cast<E*>(out) + off[0] + i0 * so + j0 + ty * so + lj;
    int ui = 0, uj = 0;
    const E* d = unstaged_at<kU, E>(in, off, st, i0, j0, ty, lj, ui, uj);
    with_code<NIN>(code, [&](auto op) {
      [[maybe_unused]] W u[kR];
      if constexpr (kU >= 0) {
#pragma unroll
        for (int k = 0; k < kR; ++k) {
          u[k] = W{};
          if (ty + kTileRows * k < ni && j_in) {
            const E* q = d + kTileRows * k * ui;
            if (u_words && j_pair) u[k] = *reinterpret_cast<const W*>(q);
            else u[k] = P::make(q[0], j_pair ? q[uj] : E{0});
          }
        }
      }
#pragma unroll
      for (int k = 0; k < kR; ++k) {
        const int r = ty + kTileRows * k;
        if (r < ni && j_in) {
          A x0[NIN], x1[NIN];
#pragma unroll
          for (int m = 0; m < NIN; ++m) {
            const W wv = m == kU ? u[k] : tile[kStaged == 3u ? m : 0][r][(tx + r / 2) % kPairWords];
            x0[m] = cvt<A>(from_bits<T>(P::lo(wv)));
            x1[m] = cvt<A>(from_bits<T>(P::hi(wv)));
          }
          const E lo = to_bits<E>(cvt<T>(op(x0, s)));
          E* q = o + kTileRows * k * so;
          if (j_pair)
            P::store(q, P::make(lo, to_bits<E>(cvt<T>(op(x1, s)))));
          else
            *q = lo;
        }
      }
    });
    __syncthreads();  // the tiles are reused by the next iteration
  });
}

std::atomic<int64_t> g_vectorized{0}, g_strided{0}, g_tiled{0}, g_tiled_pairs{0};

// The inputs a tiled launch stages (Note [Tiled elementwise for mismatched layouts]): a
// bit per input that runs along the next-to-last dim of `it` where out runs along the
// last; 0 when the tiled kernel does not apply, also where an offset inside a kT x kT
// tile would not fit an int (Note [Tiled kernel registers]).
template <int NARGS>
unsigned staged_inputs(const OffsetCalc<NARGS>& it, int kT) {
  const int nd = it.ndim;
  if (nd < 2 || it.strides[0][nd - 1] != 1 || it.sizes[nd - 1] < 4 || it.sizes[nd - 2] < 4) return 0;
  for (int k = 0; k < NARGS; ++k) {
    const int64_t span = std::abs(it.strides[k][nd - 2]) + std::abs(it.strides[k][nd - 1]);
    if (span > std::numeric_limits<int>::max() / (kT - 1)) return 0;
  }
  unsigned staged = 0;
  for (int k = 1; k < NARGS; ++k)
    if (it.strides[k][nd - 2] == 1 && it.strides[k][nd - 1] != 1) staged |= 1u << (k - 1);
  return staged;
}

// Whether operand a (0: out) of `it` has every pair of `bytes` on a 2 x `bytes` boundary,
// `unit` being its dim of stride 1 (Note [Paired elementwise tiles]).
template <int NARGS>
bool words_aligned(const void* ptr, const OffsetCalc<NARGS>& it, int a, int unit, size_t bytes) {
  if (reinterpret_cast<uintptr_t>(ptr) % (2 * bytes) != 0) return false;
  for (int d = 0; d < it.ndim; ++d)
    if (d != unit && it.strides[a][d] % 2 != 0) return false;
  return true;
}

template <typename T, int NIN>
void launch_tiled(T* o, const Ptrs2& p, const OffsetCalc<NIN + 1>& it, unsigned staged, int code, acc_t<T> s) {
  constexpr int kT = tile_edge<T>();
  const int nd = it.ndim;
  TileStrides<NIN + 1> st{};
  for (int a = 0; a <= NIN; ++a) {
    st.i[a] = static_cast<int>(it.strides[a][nd - 2]);  // fits: staged_inputs
    st.j[a] = static_cast<int>(it.strides[a][nd - 1]);
  }
  const dim3 block(32, kTileRows);
  if constexpr (sizeof(T) == 2 || sizeof(T) == 4) {
    static_assert(kT == kPairT, "the paired tile is the element tile's width");
    bool pairs = words_aligned(o, it, 0, nd - 1, sizeof(T));
    for (int k = 0; k < NIN; ++k)
      if (staged & (1u << k)) pairs = pairs && words_aligned(p.p[k], it, k + 1, nd - 2, sizeof(T));
    if (pairs) {
      bool u_words = false;  // the unstaged input, if any, read a word at a time
      if (NIN == 2 && staged != 3u) {
        const int u = staged == 1u ? 1 : 0;
        u_words = it.strides[u + 1][nd - 1] == 1 && words_aligned(p.p[u], it, u + 1, nd - 1, sizeof(T));
      }
      // the paired tile's rows: 128 for one-input 2-byte launches (Note [Two-half 2-byte tiles])
      const TileWalk<NIN + 1> wp = tile_walk(it, kPairT * pair_halves<T, NIN>(), kPairT);  // Note [Batched tile walks]
      const dim3 gp = wp.grid();
      if constexpr (NIN == 1) {
        tiled_pairs_kernel<T, 1, 1u><<<gp, block>>>(o, p, wp, st, code, s, u_words);
      } else if (staged == 1u) {
        tiled_pairs_kernel<T, 2, 1u><<<gp, block>>>(o, p, wp, st, code, s, u_words);
      } else if (staged == 2u) {
        tiled_pairs_kernel<T, 2, 2u><<<gp, block>>>(o, p, wp, st, code, s, u_words);
      } else {
        tiled_pairs_kernel<T, 2, 3u><<<gp, block>>>(o, p, wp, st, code, s, u_words);
      }
      SB_CUDA_LAUNCH_CHECK();
      ++g_tiled_pairs;
      return;
    }
  }
  const TileWalk<NIN + 1> walk = tile_walk(it, kT, kT);  // Note [Batched tile walks]
  const dim3 grid = walk.grid();
  if constexpr (NIN == 1) {
    tiled_kernel<T, 1, 1u><<<grid, block>>>(o, p, walk, st, code, s);
  } else if (staged == 1u) {
    tiled_kernel<T, 2, 1u><<<grid, block>>>(o, p, walk, st, code, s);
  } else if (staged == 2u) {
    tiled_kernel<T, 2, 2u><<<grid, block>>>(o, p, walk, st, code, s);
  } else {
    tiled_kernel<T, 2, 3u><<<grid, block>>>(o, p, walk, st, code, s);
  }
  SB_CUDA_LAUNCH_CHECK();
}

template <typename T, int NIN, typename F>
void launch(const char* op, const Tensor& out, const Tensor* const (&in)[NIN], F f) {
  const int64_t n = out.numel();
  if (n == 0) return;
  const int dev = out.device().index;
  DeviceGuard g(dev);
  Shape st[NIN + 1];
  st[0] = out.strides();
  for (int k = 0; k < NIN; ++k) st[k + 1] = broadcast_strides(*in[k], out.sizes());
  const Shape* sp[NIN + 1];
  for (int k = 0; k <= NIN; ++k) sp[k] = &st[k];
  const OffsetCalc<NIN + 1> it = make_iter<NIN + 1>(out.sizes(), sp, op);
  Ptrs2 p{{nullptr, nullptr}};
  for (int k = 0; k < NIN; ++k) p.p[k] = in[k]->data_ptr();
  T* o = static_cast<T*>(out.data_ptr());
  // contiguous: one dim of stride 1, or none (a single element: plan_dims drops size-1 dims)
  const auto unit = [&](int a) { return it.ndim == 0 || it.strides[a][0] == 1; };
  bool vec = it.ndim <= 1 && unit(0) && reinterpret_cast<uintptr_t>(o) % 16 == 0;
  for (int k = 0; k < NIN; ++k) vec = vec && unit(k + 1) && reinterpret_cast<uintptr_t>(p.p[k]) % 16 == 0;
  // the longest tile edge (Note [Two-half 2-byte tiles]), so that its offsets fit an int
  const unsigned staged = vec ? 0u : staged_inputs(it, std::max(tile_edge<T>(), kPairT * pair_halves<T, NIN>()));
  if (vec) {
    vectorized_kernel<T, NIN><<<vectorized_blocks<T>(n), kVecThreads>>>(o, p, n, f);
    SB_CUDA_LAUNCH_CHECK();
    ++g_vectorized;
  } else if (staged) {
    launch_tiled<T, NIN>(o, p, it, staged, F::kCode, scalar_of<F, acc_t<T>>(f));
    ++g_tiled;
  } else {
    strided_kernel<T, NIN><<<grid_for(n, dev), kThreads>>>(o, p, it, n, f);
    SB_CUDA_LAUNCH_CHECK();
    ++g_strided;
  }
}

void check_same(const char* op, const Tensor& out, const Tensor& a) {
  SB_CHECK(out.dtype() == a.dtype(), op, " (CUDA): dtypes differ: out ", out.dtype(), ", input ", a.dtype());
  SB_CHECK(broadcast_shapes(a.sizes(), out.sizes(), op) == out.sizes(), op, " (CUDA): input sizes ", a.sizes(),
           " do not broadcast to out sizes ", out.sizes());
}

// ---------------------------------------------------------------- normalize

template <typename T>
__global__ void normalize_kernel(T* out, const T* x, OffsetCalc<2> rows_it, int64_t rows, int64_t len,
                                 int64_t out_step, int64_t x_step, double eps) {
  using A = std::conditional_t<std::is_same_v<T, double>, double, float>;
  const int lane = threadIdx.x % kWarp;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * (blockDim.x / kWarp);
  for (int64_t r = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / kWarp; r < rows; r += warps) {
    int64_t off[2];
    rows_it.get(r, off);
    T* o = out + off[0];
    const T* xs = x + off[1];
    A s = 0;
    for (int64_t k = lane; k < len; k += kWarp) s += cvt<A>(xs[k * x_step]);
    s = warp_sum(s);
    const A mean = __shfl_sync(0xffffffffu, s, 0) / static_cast<A>(len);
    A q = 0;
    for (int64_t k = lane; k < len; k += kWarp) {
      const A d = cvt<A>(xs[k * x_step]) - mean;
      q += d * d;
    }
    q = warp_sum(q);
    const A var = __shfl_sync(0xffffffffu, q, 0) / static_cast<A>(len);
    const A inv = A(1) / ::sqrt(var + static_cast<A>(eps));
    for (int64_t k = lane; k < len; k += kWarp) o[k * out_step] = cvt<T>((cvt<A>(xs[k * x_step]) - mean) * inv);
  }
}

}  // namespace

void binary(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b) {
  const char* name = binary_op_name(op);
  common_device(name, {&out, &a, &b});
  check_same(name, out, a);
  check_same(name, out, b);
  const Tensor* in[2] = {&a, &b};
  SB_CUDA_DISPATCH_MATH(out.dtype(), name, {
    switch (op) {
      case BinaryOp::Add: launch<scalar_t, 2>(name, out, in, BinaryFn<BinaryOp::Add>()); break;
      case BinaryOp::Sub: launch<scalar_t, 2>(name, out, in, BinaryFn<BinaryOp::Sub>()); break;
      case BinaryOp::Mul: launch<scalar_t, 2>(name, out, in, BinaryFn<BinaryOp::Mul>()); break;
      case BinaryOp::Div: launch<scalar_t, 2>(name, out, in, BinaryFn<BinaryOp::Div>()); break;
      case BinaryOp::Maximum: launch<scalar_t, 2>(name, out, in, BinaryFn<BinaryOp::Maximum>()); break;
      case BinaryOp::Minimum: launch<scalar_t, 2>(name, out, in, BinaryFn<BinaryOp::Minimum>()); break;
    }
  });
}

void binary_scalar(BinaryOp op, const Tensor& out, const Tensor& a, double b) {
  const char* name = binary_op_name(op);
  common_device(name, {&out, &a});
  check_same(name, out, a);
  const Tensor* in[1] = {&a};
  SB_CUDA_DISPATCH_MATH(out.dtype(), name, {
    using A = acc_t<scalar_t>;
    // The scalar as the tensor's arithmetic type sees it: float for float16 (not
    // rounded to half first, as PyTorch's CUDA kernels), truncated for integers.
    const A s = std::is_integral_v<A> ? static_cast<A>(static_cast<int64_t>(b)) : static_cast<A>(b);
    switch (op) {
      case BinaryOp::Add: launch<scalar_t, 1>(name, out, in, ScalarFn<BinaryOp::Add, A>{s}); break;
      case BinaryOp::Sub: launch<scalar_t, 1>(name, out, in, ScalarFn<BinaryOp::Sub, A>{s}); break;
      case BinaryOp::Mul: launch<scalar_t, 1>(name, out, in, ScalarFn<BinaryOp::Mul, A>{s}); break;
      case BinaryOp::Div: launch<scalar_t, 1>(name, out, in, ScalarFn<BinaryOp::Div, A>{s}); break;
      case BinaryOp::Maximum: launch<scalar_t, 1>(name, out, in, ScalarFn<BinaryOp::Maximum, A>{s}); break;
      case BinaryOp::Minimum: launch<scalar_t, 1>(name, out, in, ScalarFn<BinaryOp::Minimum, A>{s}); break;
    }
  });
}

void unary(UnaryOp op, const Tensor& out, const Tensor& a) {
  const char* name = unary_op_name(op);
  common_device(name, {&out, &a});
  check_same(name, out, a);
  const Tensor* in[1] = {&a};
  SB_CUDA_DISPATCH_MATH(out.dtype(), name, {
    switch (op) {
      case UnaryOp::Neg: launch<scalar_t, 1>(name, out, in, UnaryFn<UnaryOp::Neg>()); break;
      case UnaryOp::Abs: launch<scalar_t, 1>(name, out, in, UnaryFn<UnaryOp::Abs>()); break;
      case UnaryOp::Relu: launch<scalar_t, 1>(name, out, in, UnaryFn<UnaryOp::Relu>()); break;
      case UnaryOp::Exp: launch<scalar_t, 1>(name, out, in, UnaryFn<UnaryOp::Exp>()); break;
      case UnaryOp::Sqrt: launch<scalar_t, 1>(name, out, in, UnaryFn<UnaryOp::Sqrt>()); break;
    }
  });
}

void normalize(const Tensor& out, const Tensor& x, int64_t dim, double eps) {
  const int dev = common_device("normalize", {&out, &x});
  SB_CHECK(out.dtype() == x.dtype(), "normalize (CUDA): dtypes differ: out ", out.dtype(), ", input ", x.dtype());
  SB_CHECK(is_floating(x.dtype()), "normalize (CUDA): expected a floating dtype, got ", x.dtype());
  SB_CHECK(out.sizes() == x.sizes(), "normalize (CUDA): out sizes ", out.sizes(), " != input sizes ", x.sizes());
  dim = wrap_dim(dim, x.dim(), "normalize");
  if (x.numel() == 0) return;
  // a 0-D tensor is one row of one element, as on the CPU (out = 0, or NaN where eps = 0)
  if (x.dim() == 0) return normalize(out.as_strided({1}, {1}), x.as_strided({1}, {1}), 0, eps);
  DeviceGuard g(dev);
  Shape sizes = x.sizes(), so = out.strides(), sx = x.strides();
  const int64_t len = sizes[dim], out_step = so[dim], x_step = sx[dim];
  sizes.erase(sizes.begin() + dim);
  so.erase(so.begin() + dim);
  sx.erase(sx.begin() + dim);
  const Shape* sp[2] = {&so, &sx};
  const OffsetCalc<2> it = make_iter<2>(sizes, sp, "normalize");
  const int64_t rows = x.numel() / len;
  const unsigned grid = grid_for(rows * kWarp, dev);  // one warp per row
  switch (x.dtype()) {
    case DType::Float32:
      normalize_kernel<float><<<grid, kThreads>>>(static_cast<float*>(out.data_ptr()),
                                                  static_cast<const float*>(x.data_ptr()), it, rows, len, out_step,
                                                  x_step, eps);
      break;
    case DType::Float64:
      normalize_kernel<double><<<grid, kThreads>>>(static_cast<double*>(out.data_ptr()),
                                                   static_cast<const double*>(x.data_ptr()), it, rows, len, out_step,
                                                   x_step, eps);
      break;
    case DType::Float16:
      normalize_kernel<__half><<<grid, kThreads>>>(static_cast<__half*>(out.data_ptr()),
                                                   static_cast<const __half*>(x.data_ptr()), it, rows, len, out_step,
                                                   x_step, eps);
      break;
    case DType::BFloat16:
      normalize_kernel<__nv_bfloat16><<<grid, kThreads>>>(static_cast<__nv_bfloat16*>(out.data_ptr()),
                                                          static_cast<const __nv_bfloat16*>(x.data_ptr()), it, rows,
                                                          len, out_step, x_step, eps);
      break;
    default: SB_INTERNAL_ASSERT(false, "normalize: dtype ", x.dtype());
  }
  SB_CUDA_LAUNCH_CHECK();
}

ElementwisePathCounts elementwise_path_counts() {
  return {g_vectorized.load(), g_strided.load(), g_tiled.load(), g_tiled_pairs.load()};
}
void reset_elementwise_path_counts() {
  g_vectorized = 0;
  g_strided = 0;
  g_tiled = 0;
  g_tiled_pairs = 0;
}

}  // namespace sb::cuda
