// iterator.h — the one strided iterator every elementwise kernel shares.
//
// Note [Strided iteration]
// Operand 0 is the output; the others are inputs already broadcast to the output's
// sizes (stride 0 where expanded). Before any loop runs the iterator
//   1-3. takes the dims from plan_dims (Note [One dimension planner], core/dim_plan.h):
//      size-1 dims dropped, fastest first by the output's strides (PyTorch's rule), and
//      merged where every operand continues (a dense tensor becomes one dim), so a
//      channels-last or a transposed output is walked in memory order;
//   4. picks a path:
//      Contiguous  one dim left and every operand has stride == its element size,
//                  or 0 (a stride-0 scalar): one strip per thread.
//      Tiled       an input's fastest dim k is not the output's fastest dim 0 (e.g.
//                  a.t() + b): dims 0 and k are walked in tiles of kTileBytes0 (of
//                  the output; all of dim 0 when shorter) x kTileRows (more when dim 0
//                  is short: up to kTileElems elements, a whole 128 x 128 plane), tiles
//                  going down dim k first. Cache-resident tiles go to a row-block
//                  kernel unstaged (Note [Cache-resident tiles]); otherwise each
//                  such input is first staged (transposed) into a per-thread tile
//                  buffer, read along its own fastest dim (256 B = 4 whole lines per
//                  row for float32) by the AVX2 8x8 / 4x4 in-register transposes of
//                  core/transpose_tile.h (4/8-byte elements; scalar otherwise), with a
//                  software prefetch of the next tile's source lines; buffer rows are
//                  padded by kTilePad so its column writes do not alias one cache set.
//                  Kernels then see dense strips for every operand and take their SIMD
//                  path. Operands beyond the caches prefetch the next tile (Note
//                  [Tile prefetch]), or, with whole planes as tiles and a dense input
//                  beside, are staged a group of planes at a time (Note [Grouped
//                  staging]), or, with tiles that are one run of the staged input,
//                  read the next tile during this one (Note [Staged source read
//                  ahead]). Rates: docs/notes/elementwise.md.
//      Broadcast   an input has stride 0 in the inner dim (x + col[N,1]).
//      Strided     anything else: an odometer over the outer dims, strips over dim 0.
// Kernels see 1-D strips: f(char* const* ptrs, const int64_t* strides_bytes,
// int64_t n), element j of operand i at ptrs[i] + j * strides_bytes[i], or, where they
// take that form, row blocks of such strips (Note [Row blocks]). A kernel looks at the
// strides to take its SIMD path (all == element size, or 0 for a scalar operand) or its
// scalar strided loop; no kernel writes an N-D loop of its own.
// Work is split over sb::parallel_for by linear index (tiles for the Tiled path), so a
// single long strip is split too; below `grain` elements one thread does it all.
// Cost: O(ndim^2) set-up per call, O(ndim) per strip or tile; no allocation of data,
// and none at all up to kInlineDims dims (SmallVec: with std::vectors the set-up's
// small allocations cost more than a small add itself). All-contiguous operands
// (StridedIter::of) skip the set-up: O(ndim) checks.
#pragma once
#include <array>
#include <cstdint>
#include <initializer_list>
#include <type_traits>
#include <vector>

#include "core/dim_plan.h"
#include "stridebench/cpu_features.h"
#include "stridebench/parallel.h"
#include "core/scratch.h"
#include "core/small_vec.h"

#ifdef SB_HAVE_AVX2
#include <immintrin.h>
#endif
#include "stridebench/tensor.h"

namespace sb {

// Note [Cache-resident tiles]
// Where nothing is prefetched (the operands fit the caches) and the kernel takes row
// blocks (Note [Row blocks]; the elementwise StripKernel), each tile goes to it unstaged
// as one row block of tile1 strips of tile0 elements: the kernel transposes the inputs
// that run along the rows itself, in registers (Note [Transposed row blocks] in
// strips.h). Staging a whole tile first and handing the kernel the buffer cost a second
// write and read of every staged element (0.6x the contiguous rate against 0.84x,
// docs/notes/elementwise.md). Callables of the plain strip form keep the staging.
// Note [Tile prefetch]
// Hardware prefetchers (Zen 4's at least) fail on the staging's access pattern: 8 source
// rows read side by side (32 bytes of each in turn) run at a fraction of a linear read,
// even within one contiguous plane, and the dense inputs' streams stall while a tile is
// staged. So when the operands exceed
// the streaming threshold (copy.h nt_threshold_bytes(): they come from memory), each
// tile prefetches the next one into L2 (prefetcht2; T0 was no better): the staged
// inputs' rows kStageRows at a time between the staging steps (a whole tile at once
// overflows the miss queues), the dense inputs' strip j before strip j of this tile
// runs. Whole 128 x 128 planes as tiles (kTileElems) help further. Below the threshold
// nothing is prefetched and a tile is staged in one call: the prefetch instructions
// would cost an L2-sized op a measurable share (docs/notes/elementwise.md).
// Note [Chunked staging]
// Above the streaming threshold, a tile whose inputs are all staged (no dense input
// streams beside the staged one: a unary op on a transposed tensor, or every input
// transposed) is staged a few strips at a time, each chunk's strips running right after
// it from an L1-sized slice of the buffer, and the next tile's source rows are
// prefetched one strip's share at a time. Staging the whole tile first (64 KiB, L2) and
// then running its strips left the output's streaming stores in one burst per tile.
// With a dense input beside it (a.t() + b) the same change was not a win, so those tiles
// keep the whole-tile staging of Note [Tile prefetch] (docs/notes/elementwise.md). The
// chunk is the design's (CpuTuning::stage_chunk_strips, SB_TUNING chunk): 8 strips (half
// a float32 source line a row) on Zen 4, where 16 were slower; 16 (a whole line) on
// Sapphire Rapids, where 8 left an NCHW -> NHWC float32 relu near twice the permuting
// copy's time.
// Note [Grouped staging]
// Above the streaming threshold, when every tile is a whole plane (dims 0 and 1 fit one
// tile: x + y.transpose(2, 3) with planes up to kTileElems elements), the output and a
// dense input run on through dim 2 plane after plane, and the staged inputs read along
// dense rows, the walk takes group() planes at a time (cpu_tuning().group_bytes of
// staged data, e.g. 512 KiB: 8 planes of 128 x 128 float32): (1) transpose the group's staged planes, whose lines the
// previous group already loaded, into one unpadded buffer, a source line's width of
// strips per step (16 float32: each source line read once, the writes in 16 rows); (2)
// hand the kernel the group as one dense run in kPieceBytes pieces, and between pieces
// read (plain loads, not prefetches) the next group's source lines, a share per piece.
// Step 2 keeps three linear streams going, as a contiguous add does; the per-tile walk
// of Note [Tile prefetch] paused the dense streams for every tile it staged, a paused
// linear stream costs far more than the pause, and software prefetches from DRAM run
// well below a hardware-followed stream. The group size and step widths were swept
// (docs/notes/elementwise.md) and differ per design (Note [Tuning by microarchitecture]):
// Zen 4 takes 512 KiB groups, Sapphire Rapids (2 MiB L2s) smaller ones, 128 KiB and at
// least 2 planes. Without a dense input (relu of a
// transposed tensor) the grouped walk was slower than Note [Chunked staging], which those
// tiles keep; tiles of longer rows keep Note [Tile prefetch].
// Note [Staged source read ahead]
// Above the streaming threshold, where each staged input's tile is one run of memory
// (the tile spans the input's fastest dim and its rows lie end to end: an NHWC operand
// beside NCHW ones, of up to 64 channels of 2- or 4-byte elements or 128 of 8-byte ones,
// kTileBytes0 of pixels a tile) and a dense input streams
// beside it, the next tile's staged source is read during this tile's strips: after
// each strip, plain loads of that strip's share of its lines, as Note [Grouped
// staging] reads its next group, so the staged source, the dense input and the output
// run as three streams together; this tile is then staged in one call from the cache.
// Nothing else is prefetched (prefetching the dense input's next strip too was slower).
// Taken only where the output streams (for_each's fence, so the output of such tiles
// streams: Note [Streaming elementwise outputs]); in place, with the output a dense
// input, reading ahead was level or slower than Note [Tile prefetch], which it keeps.
// Rates: docs/notes/elementwise.md.
class StridedIter {
 public:
  static constexpr int kMaxOperands = DimPlan::kMaxOperands;
  static constexpr int64_t kTileBytes0 = 1024;  // bytes of the output per tile strip
  static constexpr int64_t kTileRows = 64;      // strips per tile (dim k of the tile): 256 B of a float32 source row
  static constexpr int64_t kTileElems = 16384;  // elements per tile when dim 0 is shorter than kTileBytes0
  static constexpr int64_t kTilePad = 64;  // bytes added to each staged row: no power-of-two stride
  static constexpr int64_t kStageRows = 8;  // source rows staged (and next-tile rows prefetched) per step
  static constexpr int64_t kPieceBytes = 2048;        // output bytes per kernel call there
  enum class Path : uint8_t { Contiguous, Broadcast, Tiled, Strided };

  static constexpr int kInlineDims = DimPlan::kInlineDims;  // dims held without allocating
  struct Operand {
    char* data;              // address of element [0, ..., 0]
    const int64_t* strides;  // in elements, one per dim of the common sizes
    int64_t elem_size;       // bytes
  };

  // sizes: the output's sizes; ops[0] the output. Every operand has sizes.size() strides.
  // tiles = false: never the Tiled path, so every strip pointer is an address inside its
  // operand (a kernel that reads beyond the strip, as normalize's rows do, needs that:
  // a staged strip points into a tile buffer that holds the strip and nothing else).
  StridedIter(const Shape& sizes, const Operand* ops, int nops, bool tiles = true);
  // Convenience: tensors already of `tensors[0]`'s sizes (inputs expanded).
  static StridedIter from_tensors(const std::vector<Tensor>& tensors, bool tiles = true);
  // The same without copying the tensors; when every one is contiguous (the common
  // case) the result (one dim, Contiguous) is built directly, skipping steps 1-4 and
  // their small allocations (half the cost of a 1-element add_out).
  static StridedIter of(std::initializer_list<const Tensor*> tensors);

  Path path() const { return path_; }
  int num_operands() const { return nops_; }
  int ndim() const { return static_cast<int>(sizes_.size()); }
  Shape sizes() const { return Shape(sizes_.begin(), sizes_.end()); }  // iteration dims, fastest first
  int64_t stride_bytes(int op, int dim) const { return strides_[dim][op]; }
  int64_t numel() const { return numel_; }
  int64_t tile0() const { return tile0_; }  // Tiled: elements of dim 0 per tile
  int64_t tile1() const { return tile1_; }  // Tiled: strips (elements of dim 1) per tile
  bool staged(int op) const { return (staged_mask_ >> op) & 1; }  // Tiled: op goes through a tile buffer
  int64_t group() const { return group_; }  // Tiled: planes staged per group (Note [Grouped staging]; 1: off)

  // Tiled: each tile's output (tile0 x tile1) is one dense block: whole output rows
  // (dim 0 fits one tile) lying next to each other (dim 1's stride is dim 0's length).
  bool tiles_write_dense_blocks() const {
    return path_ == Path::Tiled && tile0_ >= sizes_[0] && strides_[1][0] == sizes_[0] * elem_size_[0];
  }
  // Tiled: the tiles read their staged source ahead where the output streams (Note
  // [Staged source read ahead]), and then want it to.
  bool reads_ahead() const { return ahead_; }

  // Strided or Broadcast: the output, in iteration order, is one dense block (dim 0 of
  // stride one element, each dim's stride the product of the faster dims' sizes), so
  // every strip writes a dense run and the runs follow each other in memory.
  bool strips_write_dense_output() const {
    if (path_ != Path::Strided && path_ != Path::Broadcast) return false;
    int64_t want = elem_size_[0];
    for (int d = 0; d < ndim(); ++d) {
      if (sizes_[d] != 1 && strides_[d][0] != want) return false;
      want *= sizes_[d];
    }
    return true;
  }

  // Calls f on strips covering every element exactly once, in parallel above grain.
  // fence: each thread ends with an sfence (its strips used non-temporal stores).
  //
  // Note [Row blocks]: on the Strided and Broadcast paths, an f that also takes
  // (p, s, n, rows, s1) gets runs of whole dim-0 strips along dim 1 in one call: `rows`
  // strips of n = sizes[0] elements, strip r at p[i] + r * s1[i] (s1: dim 1's strides).
  // Partial strips (a thread's range starting or ending mid-strip) and f without that
  // form take one call per strip. The elementwise kernels take it (StripKernel in
  // elementwise.cpp): x + b with b a short broadcast row spent most of its time in the
  // per-strip call and the odometer between strips (docs/notes/elementwise.md). The
  // Tiled path hands such an f its cache-resident tiles the same way, one row block per
  // tile, in which an input may run along the rows (Note [Cache-resident tiles]).
  template <typename F>
  void for_each(const F& f, int64_t grain = kGrainSize, bool fence = false) const;

 private:
  StridedIter() = default;  // of(): filled in directly
  using Strides = std::array<int64_t, kMaxOperands>;
  using Index = SmallVec<int64_t, kInlineDims>;
  void ptrs_at(const Index& idx, char** p) const;  // idx: one index per dim
  // The odometer over dims d0 .. ndim-1: idx and the pointers p (of operands 0 .. nops_-1)
  // step to the next index there, the dims before d0 left as they are.
  void step_from(int d0, Index& idx, char** p) const;
  template <typename F>
  void run_range(const F& f, int64_t begin, int64_t end) const;
  template <typename F>
  void run_tiles(const F& f, int64_t begin, int64_t end, bool streams) const;
  template <typename F>
  void run_groups(const F& f, int64_t begin, int64_t end) const;

  int nops_ = 0;
  SmallVec<int64_t, kInlineDims> sizes_;    // fastest first
  SmallVec<Strides, kInlineDims> strides_;  // [dim][op], bytes
  std::array<char*, kMaxOperands> base_{};
  std::array<int64_t, kMaxOperands> elem_size_{};
  unsigned staged_mask_ = 0;
  int64_t numel_ = 0;
  Path path_ = Path::Strided;
  int64_t tile0_ = 0, tile1_ = 0, tiles0_ = 0, tiles1_ = 0;
  bool prefetch_ = false;  // Tiled: operands beyond the caches: prefetch the next tile
  int64_t group_ = 1;       // Tiled: planes staged per group (Note [Grouped staging]; 1: off)
  bool ahead_ = false;      // Tiled: Note [Staged source read ahead] where the output streams

};


// ---------------------------------------------------------------- template bodies

inline void StridedIter::ptrs_at(const Index& idx, char** p) const {
  for (int i = 0; i < nops_; ++i) {
    char* q = base_[i];
    for (size_t d = 0; d < sizes_.size(); ++d) q += idx[d] * strides_[d][i];
    p[i] = q;
  }
}

inline void StridedIter::step_from(int d0, Index& idx, char** p) const {
  for (int d = d0; d < ndim(); ++d) {
    if (++idx[d] < sizes_[d]) {
      for (int i = 0; i < nops_; ++i) p[i] += strides_[d][i];
      return;
    }
    for (int i = 0; i < nops_; ++i) p[i] -= (sizes_[d] - 1) * strides_[d][i];
    idx[d] = 0;
  }
}

template <typename F>
void StridedIter::run_range(const F& f, int64_t begin, int64_t end) const {
  const int nd = ndim();
  Index idx(nd);
  int64_t rem = begin;
  for (int d = 0; d < nd; ++d) {
    idx[d] = rem % sizes_[d];
    rem /= sizes_[d];
  }
  char* p[kMaxOperands];
  ptrs_at(idx, p);
  const Strides& s0 = strides_[0];
  int64_t pos = begin;
  while (pos < end) {
    // Note [Row blocks]: a run of whole dim-0 strips along dim 1 in one call, where f takes it
    if constexpr (std::is_invocable_v<const F&, char* const*, const int64_t*, int64_t, int64_t, const int64_t*>) {
      const int64_t n0 = sizes_[0];
      if (nd >= 2 && idx[0] == 0 && end - pos >= n0) {
        const int64_t rows = std::min(sizes_[1] - idx[1], (end - pos) / n0);
        f(static_cast<char* const*>(p), s0.data(), n0, rows, strides_[1].data());
        pos += rows * n0;
        if (pos >= end) break;
        idx[1] += rows;
        for (int i = 0; i < nops_; ++i) p[i] += rows * strides_[1][i];
        if (idx[1] < sizes_[1]) continue;
        for (int i = 0; i < nops_; ++i) p[i] -= sizes_[1] * strides_[1][i];
        idx[1] = 0;
        step_from(2, idx, p);  // the dims above 1
        continue;
      }
    }
    const int64_t n = std::min(sizes_[0] - idx[0], end - pos);
    f(static_cast<char* const*>(p), s0.data(), n);
    pos += n;
    if (pos >= end) break;
    // advance: finish dim 0, then odometer over the outer dims
    for (int i = 0; i < nops_; ++i) p[i] -= idx[0] * s0[i];
    idx[0] = 0;
    step_from(1, idx, p);
  }
}

// Copies an n0 x n1 block whose element (i, j) is at src + i*s0 + j*s1 to buf[j][i]
// (row length ld elements): reads along j, the source's fast dim. 2-, 4- and 8-byte
// elements with s1 == es take detail::transpose_tile_* (AVX2, core/transpose_tile.h,
// shared with the copy) when use_avx2(), 2-byte ones the 16 x 32 zmm tiles of
// detail::fill_tile_u16 where the tuning fills 2-byte buffers through them (zmm16_fill);
// the rest a scalar loop.
void stage_tile(char* buf, const char* src, int64_t s0, int64_t s1, int64_t n0, int64_t n1, int64_t ld, int64_t es);

template <typename F>
void StridedIter::run_groups(const F& f, int64_t begin, int64_t end) const {
  const int nd = ndim();
  const int64_t n0 = sizes_[0], n1 = sizes_[1], plane = n0 * n1, d2 = sizes_[2];
  char* bufs[kMaxOperands] = {};  // one per staged input: group_ planes, unpadded, 64-byte aligned
  const auto buf_bytes = [&](int i) { return (group_ * plane * elem_size_[i] + 63) / 64 * 64; };
  int64_t need = 0;
  for (int i = 1; i < nops_; ++i)
    if (staged(i)) need += buf_bytes(i);
  char* b = tile_scratch(static_cast<size_t>(need));
  for (int i = 1; i < nops_; ++i)
    if (staged(i)) {
      bufs[i] = b;
      b += buf_bytes(i);
    }
  Strides st{};  // every strip is dense, or a constant operand (stride 0 over dims 0-2)
  for (int i = 0; i < nops_; ++i) st[i] = (staged(i) || strides_[0][i] != 0) ? elem_size_[i] : 0;
  // The staged inputs' source lines, walked in order (plane u, row r, line k of the row)
  // and read with plain loads: the next group's are touched while this one streams.
  // Where the group's rows lie end to end, one linear range instead (a little faster,
  // docs/notes/elementwise.md).
  struct Lines {
    const char* base = nullptr;
    int64_t s2 = 0, s0 = 0, span = 0, per_row = 0, total = 0, done = 0, u = 0, r = 0, k = 0;
    void start(const char* b, int64_t planes) {
      base = b;
      linear = s0 == span && s2 == n0_ * s0;
      bytes = planes * n0_ * span;
      total = linear ? (bytes + 63) / 64 + 1 : planes * n0_ * per_row;
      done = u = r = k = 0;
    }
    void until(int64_t target) {  // touch lines [done, target)
      if (linear) {  // the group's rows lie end to end: one range of total - 1 lines or so
        const char* lo = base - reinterpret_cast<uintptr_t>(base) % 64;
        const char* hi = base + bytes;
        for (; done < target; ++done) {
          const char* a = done == 0 ? base : lo + 64 * done;
          if (a < hi) (void)*static_cast<const volatile char*>(a);
        }
        return;
      }
      for (; done < target; ++done) {
        const char* row = base + u * s2 + r * s0;
        const char* a = k == 0 ? row : row - reinterpret_cast<uintptr_t>(row) % 64 + 64 * k;
        if (a < row + span) (void)*static_cast<const volatile char*>(a);
        if (++k == per_row) {
          k = 0;
          if (++r == n0_) {
            r = 0;
            ++u;
          }
        }
      }
    }
    bool linear = false;
    int64_t bytes = 0;
    int64_t n0_ = 0;
  } lines[kMaxOperands];
  for (int i = 1; i < nops_; ++i)
    if (staged(i)) {
      lines[i].s2 = strides_[2][i];
      lines[i].s0 = strides_[0][i];
      lines[i].span = (n1 - 1) * strides_[1][i] + elem_size_[i];
      lines[i].per_row = (lines[i].span + 63) / 64 + 1;
      lines[i].n0_ = n0;
    }
  const auto group_at = [&](int64_t t) { return std::min({group_, end - t, d2 - t % d2}); };
  Index idx(nd);
  char* p[kMaxOperands];
  char* q[kMaxOperands];
  const auto locate = [&](int64_t t, char** ptr) {  // plane t: dims 0 and 1 whole
    int64_t rem = t;
    idx[0] = idx[1] = 0;
    for (int d = 2; d < nd; ++d) {
      idx[d] = rem % sizes_[d];
      rem /= sizes_[d];
    }
    ptrs_at(idx, ptr);
  };
  const int64_t piece = std::max<int64_t>(64, kPieceBytes / elem_size_[0]);
  locate(begin, p);
  for (int i = 1; i < nops_; ++i)
    if (staged(i)) {  // the first group: nothing touched it yet
      lines[i].start(p[i], group_at(begin));
      lines[i].until(lines[i].total);
    }
  for (int64_t t = begin; t < end;) {
    const int64_t g = group_at(t), tn = t + g;
    char* np[kMaxOperands];
    const bool next = tn < end;
    if (next) {
      locate(tn, np);
      for (int i = 1; i < nops_; ++i)
        if (staged(i)) lines[i].start(np[i], group_at(tn));
    }
    // stage a source line's width of strips at a time (16 float32, 8 float64): the
    // buffer's writes stay in those rows and each source line is read once
    for (int i = 1; i < nops_; ++i)
      if (staged(i)) {
        const int64_t s0 = strides_[0][i], s1 = strides_[1][i], es = elem_size_[i];
        const int64_t cs = std::max<int64_t>(8, 64 / es);  // strips per step: one source line
        for (int64_t u = 0; u < g; ++u)
          for (int64_t j0 = 0; j0 < n1; j0 += cs)
            stage_tile(bufs[i] + (u * plane + j0 * n0) * es, p[i] + u * strides_[2][i] + j0 * s1, s0, s1, n0,
                       std::min<int64_t>(cs, n1 - j0), n0, es);
      }
    const int64_t total = g * plane, npieces = (total + piece - 1) / piece;
    for (int64_t c = 0; c < npieces; ++c) {
      const int64_t off = c * piece;
      if (next)
        for (int i = 1; i < nops_; ++i)
          if (staged(i)) lines[i].until((c + 1) * lines[i].total / npieces);
      for (int i = 0; i < nops_; ++i) q[i] = (staged(i) ? bufs[i] : p[i]) + off * st[i];
      f(static_cast<char* const*>(q), st.data(), std::min(piece, total - off));
    }
    if (next)
      for (int i = 0; i < nops_; ++i) p[i] = np[i];
    t = tn;
  }
}

// One plain load from each 64-byte line of [p, p + bytes).
inline void read_lines(const char* p, int64_t bytes) {
  for (int64_t l = 0; l < bytes; l += 64) (void)*reinterpret_cast<const volatile char*>(p + l);
}

template <typename F>
void StridedIter::run_tiles(const F& f, int64_t begin, int64_t end, bool streams) const {
  if (group_ > 1) return run_groups(f, begin, end);
  const bool ahead = ahead_ && streams;  // Note [Staged source read ahead]
  const int nd = ndim();
  Index idx(nd);
  if constexpr (std::is_invocable_v<const F&, char* const*, const int64_t*, int64_t, int64_t, const int64_t*>) {
    if (!prefetch_) {  // Note [Cache-resident tiles]: each tile, unstaged, as one row block
      // tile t = (t1, t0, outer index), t1 fastest; found once by division, then stepped
      int64_t rem = begin;
      int64_t t1 = rem % tiles1_;
      rem /= tiles1_;
      int64_t t0 = rem % tiles0_;
      rem /= tiles0_;
      idx[0] = idx[1] = 0;
      for (int d = 2; d < nd; ++d) {
        idx[d] = rem % sizes_[d];
        rem /= sizes_[d];
      }
      char* base[kMaxOperands];
      ptrs_at(idx, base);  // the outer index's plane
      char* p[kMaxOperands];
      for (int64_t t = begin; t < end; ++t) {
        for (int i = 0; i < nops_; ++i) p[i] = base[i] + t0 * tile0_ * strides_[0][i] + t1 * tile1_ * strides_[1][i];
        f(static_cast<char* const*>(p), strides_[0].data(), std::min(tile0_, sizes_[0] - t0 * tile0_),
          std::min(tile1_, sizes_[1] - t1 * tile1_), strides_[1].data());
        if (++t1 < tiles1_) continue;
        t1 = 0;
        if (++t0 < tiles0_) continue;
        t0 = 0;
        step_from(2, idx, base);  // the outer dims
      }
      return;
    }
  }
  char* p[kMaxOperands];
  char* q[kMaxOperands];
  Strides st = strides_[0];
  Strides rs = strides_[1];  // step from one strip to the next
  const size_t per = static_cast<size_t>(((tile0_ * 8 + kTilePad) * tile1_ + 63) / 64 * 64);  // 64-byte multiple
  char* const store = tile_scratch(per * (kMaxOperands - 1));
  char* bufs[kMaxOperands - 1];
  for (int i = 0; i < kMaxOperands - 1; ++i) bufs[i] = store + i * per;
  for (int i = 1; i < nops_; ++i)
    if (staged(i)) {
      st[i] = elem_size_[i];
      rs[i] = (tile0_ + kTilePad / elem_size_[i]) * elem_size_[i];
    }
  // tile t -> the index of its first element (tiles walk dim 1 first: the staged inputs'
  // rows continue from tile to tile), its extent n0 x n1
  const auto locate = [&](int64_t t, Index& ix, int64_t& n0, int64_t& n1) {
    int64_t rem = t;
    const int64_t t1 = rem % tiles1_;
    rem /= tiles1_;
    const int64_t t0 = rem % tiles0_;
    rem /= tiles0_;
    ix[0] = t0 * tile0_;
    ix[1] = t1 * tile1_;
    for (int d = 2; d < nd; ++d) {
      ix[d] = rem % sizes_[d];
      rem /= sizes_[d];
    }
    n0 = std::min(tile0_, sizes_[0] - ix[0]);
    n1 = std::min(tile1_, sizes_[1] - ix[1]);
  };
  Index nidx(nd);
  char* np[kMaxOperands];
  bool chunked = prefetch_;  // Note [Chunked staging]: no dense input moving along both tile dims
  const int64_t chunk = cpu_tuning().stage_chunk_strips;
  for (int i = 1; i < nops_; ++i)
    if (!staged(i) && strides_[0][i] != 0 && strides_[1][i] != 0) chunked = false;
  for (int64_t t = begin; t < end; ++t) {
    int64_t n0, n1, n0n = 0, n1n = 0;
    locate(t, idx, n0, n1);
    ptrs_at(idx, p);
    if (prefetch_ && t + 1 < end) {
      locate(t + 1, nidx, n0n, n1n);
      ptrs_at(nidx, np);
    }
    if (chunked) {  // Note [Chunked staging]
      for (int64_t j0 = 0; j0 < n1; j0 += chunk) {
        const int64_t jn = std::min(chunk, n1 - j0);
        for (int i = 1; i < nops_; ++i)
          if (staged(i))
            stage_tile(bufs[i - 1], p[i] + j0 * strides_[1][i], strides_[0][i], strides_[1][i], n0, jn,
                       rs[i] / elem_size_[i], elem_size_[i]);
        for (int64_t j = j0; j < j0 + jn; ++j) {
          for (int i = 0; i < nops_; ++i) q[i] = staged(i) ? bufs[i - 1] + (j - j0) * rs[i] : p[i] + j * rs[i];
          // the next tile's source rows, spread evenly over this tile's strips (the other
          // inputs do not move from strip to strip here: nothing of theirs to prefetch)
          for (int i = 1; i < nops_; ++i)
            if (staged(i)) {
              const int64_t s0 = strides_[0][i], len = n1n * strides_[1][i];
              for (int64_t r = j * n0n / n1; r < (j + 1) * n0n / n1; ++r)
                for (int64_t l = 0; l < len; l += 64) __builtin_prefetch(np[i] + r * s0 + l, 0, 1);
            }
          f(static_cast<char* const*>(q), st.data(), n0);
        }
      }
      continue;
    }
    if (ahead) {  // Note [Staged source read ahead]
      for (int i = 1; i < nops_; ++i)
        if (staged(i)) {
          stage_tile(bufs[i - 1], p[i], strides_[0][i], strides_[1][i], n0, n1, rs[i] / elem_size_[i], elem_size_[i]);
          p[i] = bufs[i - 1];
        }
      for (int64_t j = 0; j < n1; ++j) {
        for (int i = 0; i < nops_; ++i) q[i] = p[i] + j * rs[i];
        f(static_cast<char* const*>(q), st.data(), n0);
        if (t + 1 < end)  // strip j's share of the next tile's staged source
          for (int i = 1; i < nops_; ++i)
            if (staged(i)) {
              const int64_t bytes = n0n * strides_[0][i];
              read_lines(np[i] + j * bytes / n1, (j + 1) * bytes / n1 - j * bytes / n1);
            }
      }
      continue;
    }
    for (int i = 1; i < nops_; ++i)
      if (staged(i)) {
        // Prefetch the next tile's source (n0 rows of n1 * s1 bytes, whole lines) while
        // this one is transposed: its rows are too many interleaved streams for the
        // hardware prefetchers (docs/notes/elementwise.md).
        // The prefetches are spread over the staging, 8 source rows at a time (a burst of
        // a whole tile's lines overflows the miss queues and is dropped).
        const int64_t s0 = strides_[0][i], s1 = strides_[1][i], es = elem_size_[i];
        if (!prefetch_) {  // nothing to prefetch: one call
          stage_tile(bufs[i - 1], p[i], s0, s1, n0, n1, rs[i] / es, es);
        } else {
          for (int64_t r0 = 0; r0 < n0; r0 += kStageRows) {
            for (int64_t r = r0; r < std::min(r0 + kStageRows, n0n); ++r)
              for (int64_t l = 0; l < n1n * s1; l += 64) __builtin_prefetch(np[i] + r * s0 + l, 0, 1);
            stage_tile(bufs[i - 1] + r0 * es, p[i] + r0 * s0, s0, s1, std::min(kStageRows, n0 - r0), n1, rs[i] / es, es);
          }
        }
        if (n0n > n0)  // a longer next tile: the rest of its rows
          for (int64_t r = n0; r < n0n; ++r)
            for (int64_t l = 0; l < n1n * s1; l += 64) __builtin_prefetch(np[i] + r * s0 + l, 0, 1);
        p[i] = bufs[i - 1];
      }
    for (int64_t j = 0; j < n1; ++j) {
      for (int i = 0; i < nops_; ++i) q[i] = p[i] + j * rs[i];
      if (j < n1n)  // the other inputs' strip j of the next tile (their hardware streams stall during staging)
        for (int i = 1; i < nops_; ++i)
          if (!staged(i) && strides_[0][i] != 0)
            for (int64_t l = 0; l < n0n * strides_[0][i]; l += 64) __builtin_prefetch(np[i] + j * strides_[1][i] + l, 0, 1);
      f(static_cast<char* const*>(q), st.data(), n0);
    }
  }
}

inline void store_fence() {
#ifdef SB_HAVE_AVX2
  _mm_sfence();
#endif
}

template <typename F>
void StridedIter::for_each(const F& f, int64_t grain, bool fence) const {
  if (numel_ == 0) return;
  grain = std::max<int64_t>(grain, 1);
  if (path_ == Path::Contiguous) {
    parallel_for(0, numel_, grain, [&](int64_t b, int64_t e) {
      char* p[kMaxOperands];
      for (int i = 0; i < nops_; ++i) p[i] = base_[i] + b * strides_[0][i];
      f(static_cast<char* const*>(p), strides_[0].data(), e - b);
      if (fence) store_fence();
    });
  } else if (path_ == Path::Tiled) {
    const int64_t ntiles = numel_ / (sizes_[0] * sizes_[1]) * tiles0_ * tiles1_;
    const int64_t tile_grain = std::max<int64_t>(1, grain / (tile0_ * tile1_));
    parallel_for(0, ntiles, tile_grain, [&](int64_t b, int64_t e) {
      run_tiles(f, b, e, fence);
      if (fence) store_fence();
    });
  } else {
    parallel_for(0, numel_, grain, [&](int64_t b, int64_t e) {
      run_range(f, b, e);
      if (fence) store_fence();
    });
  }
}

}  // namespace sb
