// conv_direct512.cpp — conv2d's direct AVX-512 kernel: channels-last x read in place,
// 6 pixels x 64 output channels of accumulators per tile (Note [Direct AVX-512 conv]);
// NCHW x staged through a per-thread channels-last buffer, each row just before it is
// read (Note [NCHW through the channels-last kernel]). Needs out dense in x's layout.
//
// Note [Direct AVX-512 conv]: the implicit-GEMM paths pack every im2col element once
// and use it for only O_g/16 micro-tiles; at 64 output channels perf put the packing at
// 27 % (NHWC) and 38 % (NCHW) of conv2d's time. This kernel reads channels-last x in
// place instead: a tile is 6 pixels of one output row x up to 64 output channels (4 zmm
// per pixel, 24 accumulators); per (tap, c) 4 weight loads and 6 broadcasts from the 6
// pixels' channel runs, which sit a fixed s*xw apart (10 loads per 24 FMAs; the GEMM
// tile has 17 per 16). Taps whose input row is padding are left out of a row's tap
// list; pixels whose taps reach into the left/right padding run one at a time with
// their own tap list. Weights are repacked once per call as [tap][c][64 channels].
// NCHW x takes the same kernel (Note [NCHW through the channels-last kernel]). A direct
// NCHW kernel (16 channels x 16 pixels of a row, one masked row load and 16 weight
// broadcasts per (c, tap)) was slower: row loads split across cache lines and 16
// broadcasts per load tie up the load ports (docs/notes/gemm.md).
//
// Note [NCHW through the channels-last kernel]: the rows of an NCHW x are first
// transposed into a channels-last buffer (rows of W*C_g floats, no zero padding; a row
// padded to an odd number of cache lines, so that a transposed x, staged one input column
// at a time down the rows, does not write its rows into the same few L1 sets, as 56 rows
// of 64x56 floats did), then its output rows run exactly as NHWC ones do (interior tiles
// of 6 pixels, edge columns through edges()). The work is one parallel loop over units of
// (image, group, block of at most kRowsTile output rows; as many blocks per image as a
// multiple of the threads, of near-equal height). Each thread stages, into its own
// buffer, the input rows of its blocks just before the block reads them (a transposed x:
// all of the thread's rows of the image at once, column by column), so there is no
// barrier between staging and compute and a staged row is read while it is in L1/L2;
// rows on a boundary between two threads' blocks are staged by both. A block computes
// into a per-thread channels-last buffer (6*OW*O_g floats, 86 KB), which one
// transpose_tile_f32 writes into the NCHW output. The staging prefetches the next row's
// C_g short runs (too many streams for the hardware prefetchers), and each block
// prefetches its output lines while its rows compute. A zero-padded buffer and scattered
// output stores were slower (docs/notes/gemm.md, NCHW conv2d on the AMD EPYC VM).
#ifdef SB_HAVE_AVX2
#include <immintrin.h>
#endif

#include <algorithm>
#include <atomic>
#include <vector>

#include "conv/conv_impl.h"
#include "matmul/gemm_impl.h"  // detail::Workspace
#include "core/transpose_tile.h"
#include "stridebench/cpu_features.h"
#include "stridebench/error.h"
#include "stridebench/parallel.h"

namespace sb::conv_detail {

#if defined(SB_HAVE_AVX2) && defined(SB_HAVE_AVX512)
namespace {

constexpr int kMaxDirectTaps = 64;
constexpr int kCoTile = 64;  // output channels per tile (4 zmm)
constexpr int kRowsTile = 6;

// One tile: R output pixels (of a row, or of a column across rows) x NZ zmm of output
// channels (16 each, the last masked by last_mask), accumulated over num_taps taps and
// the group's channels.
//   tap_in[j]         channel 0 of the input pixel that tap j reads for the tile's
//                     first pixel, before pixel_shift
//   pixel_shift       floats added to every tap_in[j] (the tile's place in its row)
//   pixel_stride      floats between the input pixels of the tile's consecutive outputs
//   tap_id[j]         tap j's index (kh * KW + kw) into the packed weights
//   weights           packed [tap][channel][kCoTile output channels]
//   bias              kCoTile output channels (zero-padded)
//   out               the first output pixel's first channel; out_pixel_stride floats
//                     between output pixels, channels contiguous
template <int R, int NZ>
__attribute__((target("avx512f"))) void conv_tile(int num_taps, const float* const* tap_in, int64_t pixel_shift,
                                                  const int* tap_id, int64_t channels, int64_t pixel_stride,
                                                  const float* weights, const float* bias, bool relu, float* out,
                                                  int64_t out_pixel_stride, __mmask16 last_mask) {
  __m512 acc[R][NZ];
#pragma GCC unroll 6
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int z = 0; z < NZ; ++z) acc[r][z] = _mm512_setzero_ps();
  const int64_t stride3 = 3 * pixel_stride;
  for (int j = 0; j < num_taps; ++j) {
    const float* in0 = tap_in[j] + pixel_shift;  // pixels 0, 1, 2 at in0 + {0, 1, 2} * pixel_stride
    const float* in3 = in0 + stride3;            // pixels 3, 4, 5 at in3 + {0, 1, 2} * pixel_stride
    const float* w = weights + tap_id[j] * channels * kCoTile;
#pragma GCC unroll 2
    for (int64_t c = 0; c < channels; ++c, w += kCoTile) {
      __m512 wv[NZ];
#pragma GCC unroll 4
      for (int z = 0; z < NZ; ++z) wv[z] = _mm512_loadu_ps(w + 16 * z);
#pragma GCC unroll 6
      for (int r = 0; r < R; ++r) {
        const __m512 a = _mm512_set1_ps(((r < 3 ? in0 : in3) + (r % 3) * pixel_stride)[c]);
#pragma GCC unroll 4
        for (int z = 0; z < NZ; ++z) acc[r][z] = _mm512_fmadd_ps(a, wv[z], acc[r][z]);
      }
    }
  }
  const __m512 zero = _mm512_setzero_ps();
#pragma GCC unroll 6
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int z = 0; z < NZ; ++z) {
      __m512 v = _mm512_add_ps(acc[r][z], _mm512_loadu_ps(bias + 16 * z));
      if (relu) v = _mm512_mask_max_ps(v, 0xFFFF, zero, v);  // NaN stays; not _mm512_max_ps: GCC 12 false positive
      const __mmask16 m = z == NZ - 1 ? last_mask : __mmask16(0xFFFF);
      _mm512_mask_storeu_ps(out + r * out_pixel_stride + 16 * z, m, v);
    }
}

using ConvTileFn = void (*)(int, const float* const*, int64_t, const int*, int64_t, int64_t, const float*,
                            const float*, bool, float*, int64_t, __mmask16);
template <int R>
ConvTileFn tile_fn_nz(int nz) {
  return nz == 1 ? conv_tile<R, 1> : nz == 2 ? conv_tile<R, 2> : nz == 3 ? conv_tile<R, 3> : conv_tile<R, 4>;
}
ConvTileFn tile_fn(int rows, int nz) {
  switch (rows) {
    case 1: return tile_fn_nz<1>(nz);
    case 2: return tile_fn_nz<2>(nz);
    case 3: return tile_fn_nz<3>(nz);
    case 4: return tile_fn_nz<4>(nz);
    case 5: return tile_fn_nz<5>(nz);
    default: return tile_fn_nz<6>(nz);
  }
}


// Output rows of one (image, group) from channels-last input xg (channel 0 of the
// group; strides xh, xw): operator() runs one row's interior pixels; the edge pixels,
// whose taps reach into the left/right padding, go column by column across a block of
// rows (edges(), Note [Edge columns by rows]).
struct DirectRow {
  const ConvShape& g;
  const float* wpk;   // [group][block][T][Cg][64]
  const float* bpad;  // [group][blocks*64]
  bool relu;
  int64_t nblk;

  // Output columns [lo, hi) have every kw tap inside the input row.
  std::pair<int64_t, int64_t> interior() const {
    const int64_t ew = g.d * (g.KW - 1);
    const int64_t lo = std::min<int64_t>((g.p + g.s - 1) / g.s, g.OW);
    const int64_t hi = g.W + g.p - ew <= 0 ? 0 : (g.W + g.p - ew - 1) / g.s + 1;
    return {lo, std::max(lo, std::min(hi, g.OW))};
  }
  // The taps of output pixel (oh, ow) whose input lies inside the image -> their count,
  // input pointers tap_in and tap ids tap_id (in tap order; conv_tile's arguments).
  int taps(const float* xg, int64_t xh, int64_t xw, int64_t oh, int64_t ow, const float** tap_in, int* tap_id) const {
    // (nested loops, no t / KW: with two 64-bit divisions per tap this set-up took ~2 % of
    // an 8x64x56x56 conv, once per 6-pixel tile)
    int n = 0, t = 0;
    for (int64_t kh = 0; kh < g.KH; ++kh) {
      const int64_t ih = oh * g.s - g.p + kh * g.d;
      if (ih < 0 || ih >= g.H) {
        t += static_cast<int>(g.KW);
        continue;
      }
      for (int64_t kw = 0; kw < g.KW; ++kw, ++t) {
        const int64_t iw = ow * g.s - g.p + kw * g.d;
        if (iw < 0 || iw >= g.W) continue;
        tap_in[n] = xg + ih * xh + iw * xw;
        tap_id[n++] = t;
      }
    }
    return n;
  }
  // One block of up to kCoTile output channels of a group: its zmm count, the mask of
  // its last zmm, its packed weights and padded bias, its first channel's output offset.
  struct Block {
    int zmms;
    __mmask16 last_mask;
    const float* weights;
    const float* bias;
    int64_t out_offset;
  };
  Block block(int64_t grp, int64_t b) const {
    const int64_t nco = std::min<int64_t>(kCoTile, g.Og - b * kCoTile);
    return {static_cast<int>((nco + 15) / 16), static_cast<__mmask16>(nco % 16 ? (1u << (nco % 16)) - 1 : 0xFFFF),
            wpk + (grp * nblk + b) * kCoTile * g.Cg * g.KH * g.KW, bpad + (grp * nblk + b) * kCoTile,
            b * kCoTile};
  }

  // The interior pixels of row oh; og: the row's first pixel, channels contiguous,
  // pixels ows apart.
  void operator()(const float* xg, int64_t xh, int64_t xw, float* og, int64_t ows, int64_t grp, int64_t oh) const {
    const float* tap_in[kMaxDirectTaps];
    int tap_id[kMaxDirectTaps];
    const std::pair<int64_t, int64_t> span = interior();
    const int64_t lo = span.first, hi = span.second;  // named: C++17 lambdas capture no bindings
    if (lo >= hi) return;
    // every interior pixel has the same taps, s*xw floats on from its left neighbour's
    const int num_taps = taps(xg, xh, xw, oh, lo, tap_in, tap_id);
    for (int64_t b = 0; b < nblk; ++b) {
      const Block k = block(grp, b);
      auto run = [&](int64_t ow0, int rows) {
        tile_fn(rows, k.zmms)(num_taps, tap_in, (ow0 - lo) * g.s * xw, tap_id, g.Cg, g.s * xw, k.weights, k.bias, relu,
                            og + k.out_offset + ow0 * ows, ows, k.last_mask);
      };
      for (int64_t ow0 = lo; ow0 < hi; ow0 += kRowsTile) run(ow0, static_cast<int>(std::min<int64_t>(kRowsTile, hi - ow0)));
    }
  }


  // Note [Edge columns by rows]: a pixel whose taps reach into the left or right padding
  // has its own tap list, so row by row it ran alone (before git 9298602 (2026-11-22)): a 1-pixel tile
  // has 4 accumulator chains, half of what hides the FMA latency, and at 56x56 with
  // padding 1 those 2 columns took ~7 % of an NHWC conv. The same column of consecutive
  // output rows with the same taps (every row whose kh taps are all inside the image)
  // differs only by s input rows per output row, so up to 6 of them make one tile of the
  // kernel, pixels s*xh apart in the input and ohs apart in the output. Rows [oh0, oh1);
  // og: output row orow's first pixel (the image's row 0 or a buffer holding rows from
  // orow on).
  void edges(const float* xg, int64_t xh, int64_t xw, float* og, int64_t ows, int64_t ohs, int64_t grp, int64_t oh0,
             int64_t oh1, int64_t orow) const {
    const float* tap_in[kMaxDirectTaps];
    const float* next_in[kMaxDirectTaps];
    int tap_id[kMaxDirectTaps], next_id[kMaxDirectTaps];
    const auto [lo, hi] = interior();
    for (int64_t b = 0; b < nblk; ++b) {
      const Block k = block(grp, b);
      auto column = [&](int64_t ow) {
        for (int64_t oh = oh0; oh < oh1;) {
          const int num_taps = taps(xg, xh, xw, oh, ow, tap_in, tap_id);
          int rows = 1;
          while (rows < kRowsTile && oh + rows < oh1 && taps(xg, xh, xw, oh + rows, ow, next_in, next_id) == num_taps &&
                 std::equal(tap_id, tap_id + num_taps, next_id))
            ++rows;
          tile_fn(rows, k.zmms)(num_taps, tap_in, 0, tap_id, g.Cg, g.s * xh, k.weights, k.bias, relu,
                              og + k.out_offset + (oh - orow) * ohs + ow * ows, ohs, k.last_mask);
          oh += rows;
        }
      };
      for (int64_t ow = 0; ow < lo; ++ow) column(ow);
      for (int64_t ow = hi; ow < g.OW; ++ow) column(ow);
    }
  }
};

}  // namespace

// Whether the direct kernel takes this conv: AVX-512, channels-last x with unit channel
// stride or NCHW x (staged).
bool direct_ok(const ConvShape& g, const Tensor& x, bool nhwc) {
  if (!use_avx512() || g.KH * g.KW > kMaxDirectTaps) return false;
  return !nhwc || x.stride(1) == 1;
}

void conv_direct512(const ConvShape& g, const Tensor& out, const Tensor& x, const Tensor& w, const Tensor& bias, bool relu,
                    bool nhwc) {
  const int T = static_cast<int>(g.KH * g.KW);
  const int64_t nblk = (g.Og + kCoTile - 1) / kCoTile, ogp = nblk * kCoTile;
  // workspace: packed weights [group][block][tap][c][64] and padded bias [group][ogp];
  // NCHW also the rows of one (image, group) of x channels-last per thread
  const int64_t wsz = g.G * ogp * g.Cg * T + g.G * ogp;
  // staged floats per input row: an odd number of cache lines where W*C_g is a whole even
  // number (Note [NCHW through the channels-last kernel])
  const int64_t rowlen = g.W * g.Cg + (g.W * g.Cg % 32 == 0 ? 16 : 0);
  const int64_t stage = nhwc ? 0 : g.H * rowlen;  // per thread
  detail::Workspace ws(static_cast<size_t>(wsz + stage * get_num_threads()) * sizeof(float));
  float* wpk = ws.as<float>();
  float* bpad = wpk + g.G * ogp * g.Cg * T;
  float* xstage = wpk + wsz;
  const float* wsrc = w.data<float>();
  const int64_t wo = w.stride(0), wc = w.stride(1), wh = w.stride(2), ww = w.stride(3);
  // (nested kh, kw loops: the repack runs on every call, and t / KW, t % KW per element
  // were two 64-bit divisions each)
  const int64_t tstep = g.Cg * kCoTile;  // floats from one tap's block to the next
  for (int64_t grp = 0; grp < g.G; ++grp)
    for (int64_t b = 0; b < nblk; ++b) {
      float* dst = wpk + (grp * nblk + b) * kCoTile * g.Cg * T;
      for (int64_t q = 0; q < kCoTile; ++q) {
        const int64_t o = b * kCoTile + q, co = grp * g.Og + o;
        for (int64_t c = 0; c < g.Cg; ++c) {
          float* d = dst + c * kCoTile + q;
          const float* src = wsrc + co * wo + c * wc;
          for (int64_t kh = 0; kh < g.KH; ++kh)
            for (int64_t kw = 0; kw < g.KW; ++kw, d += tstep) *d = o < g.Og ? src[kh * wh + kw * ww] : 0.0f;
        }
        bpad[grp * ogp + o] = (o < g.Og && bias.defined()) ? bias.data<float>()[co * bias.stride(0)] : 0.0f;
      }
    }
  const float* xp = x.data<float>();
  float* op = out.data<float>();
  const int64_t xn = x.stride(0), xc = x.stride(1), xh = x.stride(2), xw = x.stride(3);
  const int64_t on = out.stride(0), oc = out.stride(1), ohs = out.stride(2), ows = out.stride(3);
  const DirectRow row{g, wpk, bpad, relu, nblk};
  if (nhwc) {  // blocks of kRowsTile output rows, so that edges() can tile a column across them,
    // but at least 2 blocks per thread when the batch is small (a single 6-row image would
    // otherwise be one unit: one thread idle)
    const int64_t per_img = (2 * get_num_threads() + g.N - 1) / g.N;
    const int64_t rpb = std::clamp<int64_t>(g.OH / std::max<int64_t>(per_img, 1), 1, kRowsTile);
    const int64_t nrb = (g.OH + rpb - 1) / rpb;
    parallel_for(0, g.N * nrb, 1, [&](int64_t b0, int64_t e0) {
      for (int64_t nb = b0; nb < e0; ++nb) {
        const int64_t n = nb / nrb, oh0 = nb % nrb * rpb, oh1 = std::min(g.OH, oh0 + rpb);
        for (int64_t grp = 0; grp < g.G; ++grp) {
          const float* xg = xp + n * xn + grp * g.Cg * xc;
          float* og = op + n * on + grp * g.Og * oc;
          for (int64_t oh = oh0; oh < oh1; ++oh) row(xg, xh, xw, og + oh * ohs, ows, grp, oh);
          row.edges(xg, xh, xw, og, ows, ohs, grp, oh0, oh1, 0);
        }
      }
    });
    return;
  }
  // NCHW (Note [NCHW through the channels-last kernel]): units of (image, group, block of
  // output rows); each thread stages the input rows its blocks read into its own
  // channels-last buffer, then computes the block into a channels-last buffer and
  // transposes it into the NCHW output.
  // blocks of at most kRowsTile output rows, as many as a multiple of the threads and of
  // near-equal height (56 rows on 2 threads: 10 blocks of 5-6 rows, not 9 x 6 + 2)
  const int64_t nthr = get_num_threads();
  const int64_t nrb = std::min(g.OH, ((g.OH + kRowsTile - 1) / kRowsTile + nthr - 1) / nthr * nthr);
  const bool by_column = xh == 1 && xw != 1;  // a transposed x
  // input rows [h0, h1) of x's (image, group) at xg into d: d[h*rowlen + iw*Cg + c] = x[c, h, iw]
  auto stage_rows = [&](float* d, const float* xg, int64_t h0, int64_t h1) {
    if (by_column) {  // per input column, (h, c) is a transpose with unit h stride
      for (int64_t iw = 0; iw < g.W; ++iw) {
        if (iw + 1 < g.W)  // as below
          for (int64_t c = 0; c < g.Cg; ++c)
            for (int64_t l = 0; l < (h1 - h0) * 4; l += 64) __builtin_prefetch(xg + c * xc + (iw + 1) * xw + h0 + l / 4, 0, 1);
        detail::transpose_tile_f32(d + h0 * rowlen + iw * g.Cg, rowlen, xg + iw * xw + h0, xc, h1 - h0, g.Cg);
      }
      return;
    }
    alignas(64) float tmp[8 * 256];
    const int64_t span = ((g.W - 1) * xw + 1) * 4;  // bytes of a row's run in one channel (strides >= 0)
    for (int64_t h = h0; h < h1; ++h) {
      float* dr = d + h * rowlen;
      // the next row's Cg short runs, at any column stride: too many streams for the
      // hardware prefetchers (the thread's next block stages it, if not this one)
      if (h + 1 < g.H)
        for (int64_t c = 0; c < g.Cg; ++c) {
          const char* r = reinterpret_cast<const char*>(xg + c * xc + (h + 1) * xh);
          for (int64_t l = 0; l < span; l += 64) __builtin_prefetch(r + l, 0, 1);
        }
      if (xw == 1) {
        detail::transpose_tile_f32(dr, g.Cg, xg + h * xh, xc, g.W, g.Cg);  // dr[iw*Cg + c] = x[c, h, iw]
        continue;
      }
      // any strides: gather 8 channels x 256 pixels of the row contiguous, then
      // transpose; stride 2 (every other column) by even/odd splits, whose loads stop
      // at the run's last element
      for (int64_t c0 = 0; c0 < g.Cg; c0 += 8)
        for (int64_t w0 = 0; w0 < g.W; w0 += 256) {
          const int64_t nc = std::min<int64_t>(8, g.Cg - c0), nw = std::min<int64_t>(256, g.W - w0);
          for (int64_t j = 0; j < nc; ++j) {
            const float* src = xg + (c0 + j) * xc + h * xh + w0 * xw;
            int64_t i = 0;
            if (xw == 2)
              for (; i + 9 <= nw; i += 8)
                _mm256_store_ps(tmp + j * 256 + i,
                                detail::even8_f32(_mm256_loadu_ps(src + 2 * i), _mm256_loadu_ps(src + 2 * i + 8)));
            for (; i < nw; ++i) tmp[j * 256 + i] = src[i * xw];
          }
          detail::transpose_tile_f32(dr + w0 * g.Cg + c0, g.Cg, tmp, 256, nw, nc);
        }
    }
  };
  const int64_t units = g.N * g.G * nrb;
  std::atomic<int64_t> next_slot{0};
  parallel_for(0, units, 1, [&](int64_t u0, int64_t u1) {
    float* xs = xstage + next_slot.fetch_add(1) * stage;  // this thread's staged rows
    static thread_local std::vector<float> obuf;  // kRowsTile output rows, channels-last
    const int64_t tohs = g.OW * g.Og;
    if (obuf.size() < static_cast<size_t>(kRowsTile * tohs)) obuf.resize(static_cast<size_t>(kRowsTile * tohs));
    float* t = obuf.data();
    int64_t staged_ng = -1, staged_hi = 0;  // rows [.., staged_hi) of (image, group) staged_ng are in xs
    for (int64_t u = u0; u < u1; ++u) {
      const int64_t ng = u / nrb, rb = u % nrb, n = ng / g.G, grp = ng % g.G;
      const int64_t oh0 = rb * g.OH / nrb, oh1 = (rb + 1) * g.OH / nrb;
      const float* xg = xp + n * xn + grp * g.Cg * xc;
      // the input rows this block reads
      const int64_t lo = std::max<int64_t>(0, oh0 * g.s - g.p);
      const int64_t hi = std::min(g.H, (oh1 - 1) * g.s - g.p + (g.KH - 1) * g.d + 1);
      if (ng != staged_ng) {
        staged_ng = ng;
        staged_hi = 0;
        if (by_column) {  // every row the thread's blocks of this (image, group) read, in one pass
          const int64_t last = std::min(u1, (ng + 1) * nrb) - 1 - ng * nrb;
          const int64_t ohl = (last + 1) * g.OH / nrb;
          staged_hi = std::min(g.H, (ohl - 1) * g.s - g.p + (g.KH - 1) * g.d + 1);
          if (lo < staged_hi) stage_rows(xs, xg, lo, staged_hi);
        }
      }
      if (std::max(lo, staged_hi) < hi) {
        stage_rows(xs, xg, std::max(lo, staged_hi), hi);
        staged_hi = hi;
      }
      float* og = op + n * on + grp * g.Og * oc;
      const int64_t run = (oh1 - oh0) * g.OW * 4;  // bytes of each channel's output run
      for (int64_t oh = oh0; oh < oh1; ++oh) {
        // the block's output lines, a share per row, for writing (their RFOs off the transpose's path)
        for (int64_t c = (oh - oh0) * g.Og / (oh1 - oh0); c < (oh + 1 - oh0) * g.Og / (oh1 - oh0); ++c)
          for (int64_t l = 0; l < run; l += 64) __builtin_prefetch(og + c * oc + oh0 * ohs + l / 4, 1, 1);
        row(xs, rowlen, g.Cg, t + (oh - oh0) * tohs, g.Og, grp, oh);
      }
      row.edges(xs, rowlen, g.Cg, t, g.Og, tohs, grp, oh0, oh1, oh0);
      // out[c, oh0 + i] = t[i*Og + c] for the (oh1 - oh0) * OW pixels of the block
      detail::transpose_tile_f32(og + oh0 * ohs, oc, t, g.Og, g.Og, (oh1 - oh0) * g.OW);
    }
  });
}
#else
bool direct_ok(const ConvShape&, const Tensor&, bool) { return false; }

void conv_direct512(const ConvShape&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, bool, bool) {
  SB_INTERNAL_ASSERT(false, "conv2d: the direct AVX-512 kernel is not in this build (direct_ok() is false)");
}
#endif

}  // namespace sb::conv_detail
