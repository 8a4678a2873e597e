// copy.cpp — the strided copy and fill (CPU), dispatching CUDA tensors to lib/cuda.
//
// copy_generic: the reference. An N-D odometer over dst's sizes; the innermost dim is
// a plain strided loop. src strides are aligned to dst's dims with 0 for broadcast
// dims. One read and one write per element; serial; any dtype pair.
//
// copy_kernel routes through a plan: drop size-1 dims, order dims by dst stride (dst's
// fastest dim last), merge dims that are contiguous in both tensors. Then:
//   Memcpy   one dense run in both: parallel memcpy of 64-byte blocks.
//   Rows     the innermost dim is unit-stride in both: parallel memcpy per row.
//   Tiled    dst's fastest dim B and src's fastest dim A differ, both unit-stride:
//            2-D transposes, N-D permutes, NCHW<->NHWC (a batch of C x HW
//            transposes after merging H and W). Cache-blocked tiles: for 4-byte
//            elements AVX2 8x8 in-register transposes (core/transpose_tile.h, shared
//            with the iterator's Tiled path) into an L1 buffer, then whole tile rows out; a scalar tile for other
//            element sizes (tile rows of 256 bytes, 32..64 elements). Parallel over (outer, tile).
//            A streaming copy prefetches the next tile's source into L2 between 8-row
//            staging steps, as the iterator does (iterator.h, Note [Tile prefetch]).
//            Streaming 4-byte copies into 64-byte aligned dst rows take bands instead
//            (Note [Transpose bands]): 16 or 32 source rows x 512, no buffer, every dst
//            line written whole by two streaming stores; where the tuning takes
//            blocks (cpu_tuning(), e.g. Zen 4), dst rows lie 4 KiB or more apart and
//            source rows are 1024 elements or longer, pipelined blocks (Note [Pipelined transpose blocks]):
//            64 source rows x 1024 through an L2 buffer, 256 bytes per dst row, each
//            block drained while the next one fills.
//   Strided  anything else of the same dtype (stepped slices, broadcast): a parallel
//            strided row loop on same-size unsigned words; dense rows of every other
//            source element by vector loads (Note [Every other element gathered]).
//   Convert  dtypes differ: the same parallel row loop with convert<D, S>; unit-stride
//            runs between float32 and float16 or bfloat16 a vector at a time (Note
//            [Vector conversions]), streaming above the threshold.
// Outputs larger than the streaming threshold (min(LLC, 2 x cores x L2), see Note
// [Streaming threshold]) use non-temporal stores (_mm256_stream_*, then _mm_sfence on
// each thread): the output would only evict the input from the cache, and streaming
// skips the read-for-ownership of each destination line.
// Every path costs one read of src and one write of dst.
//
// fill_kernel: dense tensors (any permutation of dims) are filled as one byte range
// with a 32-byte pattern (AVX2 broadcast stores, streaming above the threshold);
// others through a parallel strided row loop.
#include "copy/copy.h"
#include "core/test_hooks.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <functional>
#include <numeric>

#ifdef SB_HAVE_AVX2
#include <immintrin.h>
#endif

#include "core/convert.h"
#include "stridebench/cpu_features.h"
#include "core/dim_plan.h"
#include "core/small_vec.h"
#include "stridebench/parallel.h"
#include "core/scratch.h"
#include "core/transpose_tile.h"
#include "core/vec.h"

#ifdef SB_WITH_CUDA
#include "cuda/cuda_backend.h"
#endif

namespace sb {

namespace {

std::atomic<CopyPath> g_last_path{CopyPath::Empty};
std::atomic<bool> g_last_nt{false};
std::atomic<int> g_last_band_rows{0};  // 0: no bands; 16, 32: bands (2-byte 16: tile runs; 128: staged); 64: blocks
std::atomic<bool> g_last_read_bands{false};  // the bands read in address order first
std::atomic<int64_t> g_nt_threshold{-1};  // bytes; -1 = not set: default_nt_threshold()

// Note [Streaming threshold]
// Streaming pays off for outputs larger than the cache a core can use. On a VM the
// detected L3 may be the host's, shared with other tenants, and the measured crossovers
// are far below it (docs/notes/copy-reduce.md). So the default is min(LLC, 2 x cores x
// L2): 8 MiB with 2 cores and 2 MiB L2s, 4 MiB with 1 MiB L2s.
int64_t default_nt_threshold() {
  static const int64_t v = [] {
    const CacheSizes& c = cpu_caches();  // Note [Cache sizes] (cpu_features.h)
    const int64_t l2 = c.l2 > 0 ? c.l2 : int64_t{1} << 20;
    const int64_t llc = c.llc > 0 ? c.llc : int64_t{32} << 20;  // unknown: assume 32 MiB
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (cores <= 0) cores = 1;
    return std::min<int64_t>(llc, 2 * static_cast<int64_t>(cores) * l2);
  }();
  return v;
}

void record(CopyPath p, bool nt, int band_rows = 0, bool read_bands = false) {
  g_last_path.store(p, std::memory_order_relaxed);
  g_last_nt.store(nt, std::memory_order_relaxed);
  g_last_band_rows.store(band_rows, std::memory_order_relaxed);
  g_last_read_bands.store(read_bands, std::memory_order_relaxed);
}

bool want_nt(int64_t out_bytes) {
#ifdef SB_HAVE_AVX2
  return use_avx2() && out_bytes > nt_threshold_bytes();
#else
  (void)out_bytes;
  return false;
#endif
}

// Note [Dense copies in the last-level cache]: a dense copy (the Memcpy and Rows paths)
// whose output fits well inside the last-level cache ran faster with plain stores than
// streaming on the Zen 4 VM, at outputs where the transposes and elementwise outputs
// already gain from streaming, and PyTorch's plain-store copy there took half our time.
// Where the design's tuning says so (cpu_tuning().copy_nt_bytes: Zen 4, half its LLC)
// dense copies stream only above that, and above 1.5 times that on 2 threads or more:
// the two cores' plain stores kept a copy's output in the L3 past the size where one
// core's no longer did (measured on 1 and 2 threads). Elsewhere, and wherever a test has
// set the threshold, above the streaming threshold as every other path
// (docs/notes/copy-reduce.md, "Dense copies in the L3").
bool want_nt_dense(int64_t out_bytes) {
  const int64_t forced = g_nt_threshold.load(std::memory_order_relaxed);
  if (forced >= 0) return want_nt(out_bytes);
  const int64_t plain = cpu_tuning().copy_nt_bytes;
  return want_nt(out_bytes) && out_bytes > (get_num_threads() >= 2 ? plain + plain / 2 : plain);
}

template <typename D, typename S>
void copy_loop(const Tensor& dst, const Tensor& src) {
  const Shape& sizes = dst.sizes();
  const Shape& dst_st = dst.strides();
  const Shape sst = broadcast_strides(src, sizes);
  const int64_t nd = dst.dim();
  D* d = static_cast<D*>(dst.data_ptr());
  const S* s = static_cast<const S*>(src.data_ptr());
  if (nd == 0) {
    d[0] = convert<D>(s[0]);
    return;
  }
  const int64_t inner = sizes[nd - 1], dsi = dst_st[nd - 1], ssi = sst[nd - 1];
  Shape idx(nd, 0);
  const int64_t outer = dst.numel() / inner;
  int64_t doff = 0, soff = 0;
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) d[doff + i * dsi] = convert<D>(s[soff + i * ssi]);
    for (int64_t k = nd - 2; k >= 0; --k) {  // odometer step over the outer dims
      if (++idx[k] < sizes[k]) {
        doff += dst_st[k];
        soff += sst[k];
        break;
      }
      doff -= (sizes[k] - 1) * dst_st[k];
      soff -= (sizes[k] - 1) * sst[k];
      idx[k] = 0;
    }
  }
}

// ---------------------------------------------------------------- the plan

// The walk of Note [One dimension planner] (core/dim_plan.h) over (dst, src), slowest
// first: dst's fastest dim last. Strides in elements; no dims: one element.
// Dim lists inline (no allocation up to DimPlan::kInlineDims dims; Note [No allocation
// in the reduce driver], the same per-call cost)
using Dims = SmallVec<int64_t, DimPlan::kInlineDims>;

struct Plan {
  Dims size, dst, src;
  int64_t ndim() const { return static_cast<int64_t>(size.size()); }
};

Plan make_plan(const Shape& sizes, const Shape& dst_st, const Shape& src_st) {
  const DimPlan dp = plan_dims(sizes, {&dst_st, &src_st});
  Plan p;
  for (int d = dp.ndim() - 1; d >= 0; --d) {
    p.size.push_back(dp.sizes[d]);
    p.dst.push_back(dp.strides[d][0]);
    p.src.push_back(dp.strides[d][1]);
  }
  return p;
}

// Offsets (in elements) of outer index `o` over dims [0, n) of the plan, row-major.
inline void unravel_offsets(const Plan& p, int64_t n, int64_t o, int64_t& doff, int64_t& soff, Dims& idx) {
  doff = soff = 0;
  for (int64_t k = n - 1; k >= 0; --k) {
    idx[k] = o % p.size[k];
    o /= p.size[k];
    doff += idx[k] * p.dst[k];
    soff += idx[k] * p.src[k];
  }
}

inline void step_offsets(const Plan& p, int64_t n, int64_t& doff, int64_t& soff, Dims& idx) {
  for (int64_t k = n - 1; k >= 0; --k) {
    if (++idx[k] < p.size[k]) {
      doff += p.dst[k];
      soff += p.src[k];
      return;
    }
    doff -= (p.size[k] - 1) * p.dst[k];
    soff -= (p.size[k] - 1) * p.src[k];
    idx[k] = 0;
  }
}

// ---------------------------------------------------------------- byte copies

void copy_bytes(char* d, const char* s, int64_t n, bool nt) {
#ifdef SB_HAVE_AVX2
  if (nt && n >= 256) return detail::stream_copy(d, s, n);
#else
  (void)nt;
#endif
  std::memcpy(d, s, n);
}

inline void fence(bool nt) {
#ifdef SB_HAVE_AVX2
  if (nt) _mm_sfence();
#else
  (void)nt;
#endif
}

void memcpy_path(char* d, const char* s, int64_t nbytes, bool nt) {
  constexpr int64_t kBlock = 64;  // bytes: chunks start on cache-line multiples
  const int64_t nblk = (nbytes + kBlock - 1) / kBlock;
  parallel_for(0, nblk, kGrainSize * 4 / kBlock, [&](int64_t b, int64_t e) {
    const int64_t lo = b * kBlock, hi = std::min(nbytes, e * kBlock);
    copy_bytes(d + lo, s + lo, hi - lo, nt);
    fence(nt);
  });
}

void rows_path(char* d, const char* s, const Plan& p, int64_t esz, bool nt) {
  const int64_t n = p.ndim() - 1, inner = p.size[n], rows = std::accumulate(p.size.begin(), p.size.end() - 1,
                                                                             int64_t{1}, std::multiplies<>());
  parallel_for(0, rows, std::max<int64_t>(1, kGrainSize / inner), [&](int64_t b, int64_t e) {
    Dims idx(static_cast<size_t>(std::max<int64_t>(n, 1)));
    int64_t doff, soff;
    unravel_offsets(p, n, b, doff, soff, idx);
    for (int64_t r = b; r < e; ++r) {
      copy_bytes(d + doff * esz, s + soff * esz, inner * esz, nt);
      step_offsets(p, n, doff, soff, idx);
    }
    fence(nt);
  });
}

// Note [Vector conversions]: a unit-stride run between float32 and a 16-bit float
// converts a vector at a time, the values of convert<D, S> (the scalar conversion):
//   float16    F16C (vcvtph2ps / vcvtps2ph), 8 per instruction; 16 on AVX-512F
//   bfloat16   widening: a zero extension and a shift, 8 (16 on AVX-512F) at a time;
//              narrowing: vcvtneps2bf16, 16 per instruction, where the CPU has
//              AVX512_BF16 (it flushes subnormals: Note [bfloat16 NaN and subnormals]),
//              else vec::Vec<BFloat16>'s integer round to nearest even, 8 at a time
// A run streams (NT) where the whole output is above the streaming threshold, from its
// first 32-byte boundary; the head and the tail go through the scalar conversion.
// Returns the elements converted; the caller converts the rest.
template <typename D, typename S>
constexpr bool kVectorConvert = (std::is_same_v<S, float> && (std::is_same_v<D, Half> || std::is_same_v<D, BFloat16>)) ||
                                (std::is_same_v<D, float> && (std::is_same_v<S, Half> || std::is_same_v<S, BFloat16>));

#if defined(SB_HAVE_AVX2) && defined(SB_HAVE_AVX512)
template <typename D, typename S, bool NT>
__attribute__((target("avx512f,avx512bf16"))) int64_t convert_run512(D* d, const S* s, int64_t n) {
  using F = vec::Vec<float, 512>;
  using L = vec::Vec<std::conditional_t<std::is_same_v<D, float>, S, D>, 512>;
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    if constexpr (std::is_same_v<D, float>) {
      if constexpr (NT) F::stream(d + i, L::load(s + i));
      else F::store(d + i, L::load(s + i));
    } else {
      if constexpr (NT) L::stream(d + i, F::load(s + i));
      else L::store(d + i, F::load(s + i));
    }
  }
  return i;
}
#endif

template <typename D, typename S, bool NT>
int64_t convert_run(D* d, const S* s, int64_t n) {
#ifdef SB_HAVE_AVX2
  if constexpr (kVectorConvert<D, S>) {
    if (!use_avx2()) return 0;
#ifdef SB_HAVE_AVX512
    // AVX-512F for every pair but the narrowing to bfloat16, which needs AVX512_BF16
    if (std::is_same_v<D, BFloat16> ? use_avx512_bf16() : use_avx512()) return convert_run512<D, S, NT>(d, s, n);
#endif
    using F = vec::Vec<float>;
    using L = vec::Vec<std::conditional_t<std::is_same_v<D, float>, S, D>>;
    int64_t i = 0;
    if constexpr (std::is_same_v<D, BFloat16>) {  // 16 at a time: one pack and one permute
      for (; i + 16 <= n; i += 16) {
        const __m256i r = L::narrow16(F::load(s + i), F::load(s + i + 8));
        if constexpr (NT) vec::Bits256::stream(d + i, r);  // d 32-byte aligned (convert_dense)
        else vec::Bits256::store(d + i, r);
      }
    }
    for (; i + 8 <= n; i += 8) {
      if constexpr (std::is_same_v<D, float>) {
        if constexpr (NT) F::stream(d + i, L::load(s + i));
        else F::store(d + i, L::load(s + i));
      } else {
        if constexpr (NT) L::stream(d + i, F::load(s + i));
        else L::store(d + i, F::load(s + i));
      }
    }
    return i;
  }
#endif
  (void)d, (void)s, (void)n;
  return 0;
}

// d[0 .. n) = convert<D>(s[0 .. n)), unit strides (Note [Vector conversions]).
template <typename D, typename S>
void convert_dense(D* d, const S* s, int64_t n, bool nt) {
  int64_t i = 0;
  if constexpr (kVectorConvert<D, S>) {
    if (nt) {
      constexpr int64_t kAlign = std::is_same_v<D, float> ? 64 : 32;  // one full vector store
      const auto mis = static_cast<int64_t>(reinterpret_cast<uintptr_t>(d) % kAlign);
      int64_t head = mis ? (kAlign - mis) / static_cast<int64_t>(sizeof(D)) : 0;
      if (mis % static_cast<int64_t>(sizeof(D))) head = n;  // never aligned: scalar
      head = std::min(head, n);
      for (; i < head; ++i) d[i] = convert<D>(s[i]);
      i += convert_run<D, S, true>(d + i, s + i, n - i);
    } else {
      i = convert_run<D, S, false>(d, s, n);
    }
  }
  (void)nt;
  for (; i < n; ++i) d[i] = convert<D>(s[i]);
}

// Note [Every other element gathered]: d[i] = s[2i] for the same element type (a dense
// copy of a stepped slice x[..., ::2]), a vector at a time: two loads and a shuffle and
// lane permute (2- and 4-byte: the even halves packed), where the scalar loop took about
// a cycle an element. The loads stop at the run's last element (2n - 2). Returns the
// elements done.
template <typename U>
int64_t gather_even(U* d, const U* s, int64_t n) {
  int64_t i = 0;
#ifdef SB_HAVE_AVX2
  if (!use_avx2()) return 0;
  if constexpr (sizeof(U) == 4) {
    for (; i + 9 <= n; i += 8) {  // loads end at element 2i + 15 <= 2n - 3
      const __m256 a = _mm256_loadu_ps(reinterpret_cast<const float*>(s + 2 * i));
      const __m256 b = _mm256_loadu_ps(reinterpret_cast<const float*>(s + 2 * i + 8));
      _mm256_storeu_ps(reinterpret_cast<float*>(d + i), detail::even8_f32(a, b));
    }
  } else if constexpr (sizeof(U) == 2) {
    for (; i + 17 <= n; i += 16) {  // loads end at element 2i + 31 <= 2n - 3
      const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + 2 * i));
      const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + 2 * i + 16));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i), detail::even16_u16(a, b));
    }
  } else if constexpr (sizeof(U) == 8) {
    for (; i + 5 <= n; i += 4) {  // loads end at element 2i + 7 <= 2n - 3
      const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + 2 * i));
      const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + 2 * i + 4));
      const __m256i t = _mm256_unpacklo_epi64(a, b);  // a0 b0 | a2 b2
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i), _mm256_permute4x64_epi64(t, _MM_SHUFFLE(3, 1, 2, 0)));
    }
  }
#endif
  (void)d, (void)s, (void)n;
  return i;
}

// Any same-shape copy with convert<D, S>, strided rows, parallel over rows; unit-stride
// rows through convert_dense.
template <typename D, typename S>
void strided_rows(D* d, const S* s, const Plan& p, bool nt = false) {
  const int64_t n = p.ndim() - 1, inner = p.size[n], ds = p.dst[n], ss = p.src[n];
  const int64_t rows = std::accumulate(p.size.begin(), p.size.end() - 1, int64_t{1}, std::multiplies<>());
  parallel_for(0, rows, std::max<int64_t>(1, kGrainSize / inner), [&](int64_t b, int64_t e) {
    Dims idx(static_cast<size_t>(std::max<int64_t>(n, 1)));
    int64_t doff, soff;
    unravel_offsets(p, n, b, doff, soff, idx);
    for (int64_t r = b; r < e; ++r) {
      D* dr = d + doff;
      const S* sr = s + soff;
      if (ds == 1 && ss == 1) {
        convert_dense(dr, sr, inner, nt);
      } else if (ds == 1 && ss == 0) {
        const D v = convert<D>(sr[0]);
        for (int64_t i = 0; i < inner; ++i) dr[i] = v;
      } else if (std::is_same_v<D, S> && ds == 1 && ss == 2) {  // Note [Every other element gathered]
        int64_t i = 0;
        if constexpr (std::is_same_v<D, S>) i = gather_even(dr, sr, inner);
        for (; i < inner; ++i) dr[i] = convert<D>(sr[2 * i]);
      } else {
        for (int64_t i = 0; i < inner; ++i) dr[i * ds] = convert<D>(sr[i * ss]);
      }
      step_offsets(p, n, doff, soff, idx);
    }
    fence(nt);
  });
}

// The tiled transposes (tiles, bands, pipelined blocks, direct tile runs):
// copy/copy_tiles.h, a part of this file kept apart for its size; it uses the plan, the
// path records and the byte copies above.
#include "copy/copy_tiles.h"

template <typename F>
void dispatch_size(int64_t esz, const F& f) {
  switch (esz) {
    case 1: f(uint8_t{}); break;
    case 2: f(uint16_t{}); break;
    case 4: f(uint32_t{}); break;
    case 8: f(uint64_t{}); break;
    default: SB_INTERNAL_ASSERT(false, "copy: element size ", esz);
  }
}

}  // namespace

// Note [Vector conversions], for other families' float32 staging (normalize's 16-bit rows).
template <typename D, typename S>
void convert_unit_stride(D* d, const S* s, int64_t n, bool nt) {
  convert_dense(d, s, n, nt);
}
template void convert_unit_stride<float, Half>(float*, const Half*, int64_t, bool);
template void convert_unit_stride<float, BFloat16>(float*, const BFloat16*, int64_t, bool);
template void convert_unit_stride<Half, float>(Half*, const float*, int64_t, bool);
template void convert_unit_stride<BFloat16, float>(BFloat16*, const float*, int64_t, bool);

const char* copy_path_name(CopyPath p) {
  switch (p) {
    case CopyPath::Empty: return "empty";
    case CopyPath::Memcpy: return "memcpy";
    case CopyPath::Rows: return "rows";
    case CopyPath::Tiled: return "tiled";
    case CopyPath::Strided: return "strided";
    case CopyPath::Convert: return "convert";
    case CopyPath::Fill: return "fill";
    case CopyPath::FillStrided: return "fill_strided";
  }
  return "?";
}
CopyPath last_copy_path() { return g_last_path.load(); }
bool last_copy_used_nt() { return g_last_nt.load(); }
int last_copy_band_rows() { return g_last_band_rows.load(); }
bool last_copy_read_bands() { return g_last_read_bands.load(); }
void set_transpose_bands(int rows, bool source_rows_outer) {
  SB_CHECK(rows == 0 || rows == 16 || rows == 32 || rows == 64, "set_transpose_bands: rows must be 0, 16, 32 or 64, got ",
           rows);
  g_band_outer.store(source_rows_outer, std::memory_order_relaxed);
  g_band_rows.store(rows, std::memory_order_relaxed);
}

void set_nt_threshold_bytes(int64_t bytes) { g_nt_threshold.store(bytes < 0 ? -1 : bytes); }
int64_t nt_threshold_bytes() {
  const int64_t v = g_nt_threshold.load(std::memory_order_relaxed);
  return v < 0 ? default_nt_threshold() : v;
}

void copy_generic(const Tensor& dst, const Tensor& src) {
  if (dst.numel() == 0) return;
  SB_DISPATCH_ALL(dst.dtype(), "copy_", {
    using D = scalar_t;
    SB_DISPATCH_ALL(src.dtype(), "copy_", (copy_loop<D, scalar_t>(dst, src)));
  });
}

void copy_kernel(const Tensor& dst, const Tensor& src) {
  if (!dst.device().is_cpu() || !src.device().is_cpu()) {
#ifdef SB_WITH_CUDA
    cuda::copy(dst, src);
    return;
#else
    SB_CHECK(false, "copy_: ", src.device(), " -> ", dst.device(), " needs CUDA, and stridebench was built without it");
#endif
  }
  if (dst.numel() == 0) return record(CopyPath::Empty, false);
  // Tensor::copy_ decides overlap (Note [Overlap from strides]): src is dst itself or disjoint from it
  Plan p = make_plan(dst.sizes(), dst.strides(), broadcast_strides(src, dst.sizes()));
  if (p.size.empty()) {  // one element
    p.size.push_back(1);
    p.dst.push_back(1);
    p.src.push_back(1);
  }
  char* d = static_cast<char*>(dst.data_ptr());
  const char* s = static_cast<const char*>(src.data_ptr());
  if (dst.dtype() != src.dtype()) {
    const bool nt = want_nt(static_cast<int64_t>(dst.nbytes()));  // used by the vector conversions only
    SB_DISPATCH_ALL(dst.dtype(), "copy_", {
      using D = scalar_t;
      SB_DISPATCH_ALL(src.dtype(), "copy_",
                      (strided_rows<D, scalar_t>(reinterpret_cast<D*>(d), reinterpret_cast<const scalar_t*>(s), p, nt)));
    });
    return record(CopyPath::Convert, nt && p.dst[p.ndim() - 1] == 1 && p.src[p.ndim() - 1] == 1);
  }
  const int64_t esz = static_cast<int64_t>(dst.element_size()), last = p.ndim() - 1;
  const bool nt = want_nt(static_cast<int64_t>(dst.nbytes()));
  if (p.dst[last] == 1 && p.src[last] == 1) {
    const bool dnt = want_nt_dense(static_cast<int64_t>(dst.nbytes()));  // Note [Dense copies in the last-level cache]
    if (p.ndim() == 1) {
      memcpy_path(d, s, p.size[0] * esz, dnt);
      return record(CopyPath::Memcpy, dnt);
    }
    rows_path(d, s, p, esz, dnt);
    return record(CopyPath::Rows, dnt);
  }
  if (p.dst[last] == 1) {  // look for src's unit-stride dim among the outer dims
    int64_t a = -1;
    for (int64_t k = 0; k < last; ++k)
      if (p.src[k] == 1) a = k;
    if (a >= 0) {
      bool tnt = nt && esz != 1;  // 1-byte tiles stay scalar, with plain stores; tiled_path may clear it
      bool read_bands = false;
      int bands = 0;
      dispatch_size(esz, [&](auto u) {
        using U = decltype(u);
        bands = tiled_path<U>(reinterpret_cast<U*>(d), reinterpret_cast<const U*>(s), p, a, tnt, read_bands);
      });
      return record(CopyPath::Tiled, tnt, bands, read_bands);
    }
  }
  dispatch_size(esz, [&](auto u) {
    using U = decltype(u);
    strided_rows<U, U>(reinterpret_cast<U*>(d), reinterpret_cast<const U*>(s), p);
  });
  record(CopyPath::Strided, false);
}

namespace {

// Fill n bytes from d with a 32-byte pattern that repeats one element.
void fill_pattern(char* d, int64_t n, const char (&pat)[32], bool nt) {
  constexpr int64_t kBlock = 64;
  const int64_t nblk = (n + kBlock - 1) / kBlock;
  const bool simd = use_avx2();
  parallel_for(0, nblk, kGrainSize * 4 / kBlock, [&](int64_t b, int64_t e) {
    char* p = d + b * kBlock;
    const int64_t len = std::min(n, e * kBlock) - b * kBlock;
    int64_t i = 0;
#ifdef SB_HAVE_AVX2
    if (simd) {
      using B = vec::Bits256;
      const __m256i v = B::load(pat);
      if (nt) {  // head until 32-byte aligned: a multiple of the element size
        const int64_t head = std::min(len, static_cast<int64_t>((32 - (reinterpret_cast<uintptr_t>(p) & 31)) & 31));
        std::memcpy(p, pat, head);
        i = head;
        for (; i + 32 <= len; i += 32) B::stream(p + i, v);
        _mm_sfence();
      } else {
        for (; i + 128 <= len; i += 128) {
          B::store(p + i, v);
          B::store(p + i + 32, v);
          B::store(p + i + 64, v);
          B::store(p + i + 96, v);
        }
        for (; i + 32 <= len; i += 32) B::store(p + i, v);
      }
      std::memcpy(p + i, pat, len - i);  // pattern phase: i is a multiple of the element size
      return;
    }
#else
    (void)simd;
    (void)nt;
#endif
    for (; i + 32 <= len; i += 32) std::memcpy(p + i, pat, 32);
    std::memcpy(p + i, pat, len - i);
  });
}

}  // namespace

void fill_kernel(const Tensor& t, double value) {
  if (t.numel() == 0) return;
  if (!t.device().is_cpu()) {
#ifdef SB_WITH_CUDA
    cuda::fill(t, value);
    return;
#else
    SB_CHECK(false, "fill_: device ", t.device(), " needs CUDA, and stridebench was built without it");
#endif
  }
  const int64_t esz = static_cast<int64_t>(t.element_size());
  char elem[8];
  SB_DISPATCH_ALL(t.dtype(), "fill_", {
    const scalar_t v = convert<scalar_t>(value);
    std::memcpy(elem, &v, sizeof v);
  });
  bool positive = true;
  for (int64_t st : t.strides()) positive = positive && st >= 0;
  if (positive && t.is_non_overlapping_and_dense()) {
    char pat[32];
    for (int64_t i = 0; i < 32; i += esz) std::memcpy(pat + i, elem, esz);
    const bool nt = want_nt(static_cast<int64_t>(t.nbytes()));
    fill_pattern(static_cast<char*>(t.data_ptr()), static_cast<int64_t>(t.nbytes()), pat, nt);
    return record(CopyPath::Fill, nt);
  }
  Plan p = make_plan(t.sizes(), t.strides(), Shape(t.dim(), 0));
  if (p.size.empty()) p.size.push_back(1), p.dst.push_back(1), p.src.push_back(0);
  dispatch_size(esz, [&](auto u) {
    using U = decltype(u);
    U v;
    std::memcpy(&v, elem, sizeof v);
    strided_rows<U, U>(static_cast<U*>(t.data_ptr()), &v, p);
  });
  record(CopyPath::FillStrided, false);
}

}  // namespace sb
