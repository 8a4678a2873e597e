// reduce.cpp — sum, mean, max, var, std over any set of dims (CPU; CUDA via lib/cuda).
//
// Plan: the kept dims K and the reduced dims R each come from plan_dims (Note [One
// dimension planner]), K ordered by the input's strides then the output's, R by the
// input's. Results are computed per kept element in that K order into an accumulator
// array, then written through out's strides. Kernels:
//   horizontal  R's innermost dim is unit-stride: each kept element reduces runs of
//               contiguous memory, AVX2 with 4 independent vector accumulators.
//   vertical    K's innermost dim is unit-stride: whole rows of kept elements are
//               accumulated with SIMD into an L1 buffer (kColumns wide), kVRows input
//               rows per buffer pass, over every reduced index (Note [Vertical rows
//               per pass]); float32 and float64 sums and maxes also where that dim
//               steps by 2 (Note [Stride-2 kept columns]).
//   general     neither: the horizontal driver with a strided scalar inner loop; an
//               input with no unit-stride dim at all, up to the streaming threshold,
//               is copied dense first (Note [Stepped inputs reduced dense]).
// Parallel over kept elements (or column tasks); when there are too few of them the
// reduced range is split into one part per thread and the parts combined.
// Accumulation: float32, float16 (converted with F16C) and bfloat16 in float32 vectors flushed
// into float64 every kFlushElems elements or kFlushRows rows; float64 in float64;
// int32 sum in int64 (stored back as int32, wrapping), int32 max exactly. The scalar
// path (sb::use_avx2() false) accumulates in float64 (int64 for int32 sums).
// var/std: one read of x, moments merged as (count, mean, M2) triples (Note [One read
// for var]): one-pass shifted blocks (two passes where a guard says) on a unit-stride
// run, two-pass blocks on other horizontal ranges, register blocks of kVRows rows
// around a shift on the vertical path.
// max propagates NaN, as PyTorch does.
// Cost: one read of the input, one write of the (small) output.
#include "stridebench/reduce.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <limits>
#include <numeric>

#ifdef SB_HAVE_AVX2
#include <immintrin.h>
#endif

#include "core/convert.h"
#include "core/dim_plan.h"
#include "core/small_vec.h"
#include "copy/copy.h"
#include "stridebench/cpu_features.h"
#include "reduce/reduce_columns.h"
#include "reduce/reduce_kernels.h"
#include "reduce/reduce_rows.h"
#include "stridebench/parallel.h"

#ifdef SB_WITH_CUDA
#include "cuda/cuda_backend.h"
#endif

namespace sb {

namespace {

// ---------------------------------------------------------------- geometry

// Note [No allocation in the reduce driver]
// A small reduction's time is as much its driver's as its kernel's: with the plan's
// dim lists, the walkers' indices and the flags as std::vectors, each call made a
// malloc/free pair per list. The plan and the per-call lists are SmallVecs (inline up to
// DimPlan::kInlineDims dims), the CPU path reads out's strides without an unsqueezed
// Tensor, and the accumulators live in a per-thread buffer (AccBuffer). What still
// allocates: the result sizes and tensor of an out-of-place call, more accumulators
// than AccBuffer keeps, and the split paths' partial results (docs/notes/copy-reduce.md).
using Dims = SmallVec<int64_t, DimPlan::kInlineDims>;
using DimFlags = SmallVec<uint8_t, DimPlan::kInlineDims>;  // std::vector<bool> has no data()

struct ReducePlan {
  Dims ks, kst;    // kept dims for the kernels: sizes, input strides (inner last)
  Dims wks, wkost;  // kept dims for the write: sizes, out strides (inner last)
  Dims rs, rst;    // reduced dims: sizes, input strides (inner last)
  int64_t K = 1, R = 1;
};

// The kept dims planned over (x, out) and the reduced dims over x alone (Note [One
// dimension planner], core/dim_plan.h), each turned slowest first; no dims: one element.
// ost: out's strides aligned with x's dims (any value at a reduced dim).
// Note [Kept dims merged by x alone]: the kernels walk the kept elements in that order
// with the kept dims merged wherever x's strides allow, whatever out's are (a transposed
// x reduced over dim 1 into a dense out: x's kept elements one run of 4096, out's two
// dims of 64); the write walks the same order over the unmerged dims with out's strides.
// Merged over (x, out), such kept dims left the vertical kernel tasks of 64 columns.
ReducePlan make_reduce_plan(const Tensor& x, const int64_t* ost, const DimFlags& red) {
  ReducePlan g;
  const int64_t nd = x.dim();
  Dims ksizes(static_cast<size_t>(nd)), rsizes(static_cast<size_t>(nd));
  for (int64_t i = 0; i < nd; ++i) {
    ksizes[i] = red[i] ? 1 : x.sizes()[i];
    rsizes[i] = red[i] ? x.sizes()[i] : 1;
    (red[i] ? g.R : g.K) *= x.sizes()[i];
  }
  const int64_t* const st[2] = {x.strides().data(), ost};  // x's alone for the reduced dims
  const DimPlan kp = plan_dims(ksizes.data(), nd, st, 2);
  for (int d = kp.ndim() - 1; d >= 0; --d) {
    g.wks.push_back(kp.sizes[d]);
    g.wkost.push_back(kp.strides[d][1]);
    const int64_t sz = kp.sizes[d], st = kp.strides[d][0];
    if (!g.ks.empty() && g.kst.back() == st * sz) {  // Note [Kept dims merged by x alone]
      g.ks.back() *= sz;
      g.kst.back() = st;
    } else {
      g.ks.push_back(sz);
      g.kst.push_back(st);
    }
  }
  const DimPlan rp = plan_dims(rsizes.data(), nd, st, 1);
  for (int d = rp.ndim() - 1; d >= 0; --d) {
    g.rs.push_back(rp.sizes[d]);
    g.rst.push_back(rp.strides[d][0]);
  }
  if (g.ks.empty()) g.ks.push_back(1), g.kst.push_back(0), g.wks.push_back(1), g.wkost.push_back(0);
  if (g.rs.empty()) g.rs.push_back(1), g.rst.push_back(0);
  return g;
}

// Offsets of successive row-major indices over the first nd of (sizes, strides), from
// `begin`.
struct Walker {
  const int64_t* s;
  const int64_t* st;
  int64_t nd;
  Dims idx;
  int64_t off = 0;
  Walker(const Dims& sizes, const Dims& strides, int64_t begin)
      : Walker(sizes, strides, static_cast<int64_t>(sizes.size()), begin) {}
  Walker(const Dims& sizes, const Dims& strides, int64_t n, int64_t begin)
      : s(sizes.data()), st(strides.data()), nd(n), idx(static_cast<size_t>(n), 0) {
    for (int64_t k = nd - 1; k >= 0; --k) {
      idx[k] = begin % s[k];
      begin /= s[k];
      off += idx[k] * st[k];
    }
  }
  void next() {
    for (int64_t k = nd - 1; k >= 0; --k) {
      if (++idx[k] < s[k]) {
        off += st[k];
        return;
      }
      off -= (s[k] - 1) * st[k];
      idx[k] = 0;
    }
  }
};

// ---------------------------------------------------------------- drivers
// res[q*K + k]: accumulator q of kept element k (K order), pre-set to the identity.

template <class V, class Op>
void run_horizontal(const typename V::T* x, const ReducePlan& g, typename V::A* res) {
  using A = typename V::A;
  constexpr int N = Op::N;
  const int64_t K = g.K, R = g.R, nd = static_cast<int64_t>(g.rs.size());
  const int64_t li = g.rs[nd - 1], si = g.rst[nd - 1];
  // the runs' kernels (Notes [bfloat16 sums by dot products], [float32 sums in zmm])
  const RunKernels runs = run_kernels(K * R * static_cast<int64_t>(sizeof(typename V::T)));
  // reduce flat R indices [rb, re) of the kept element at xk into acc, by the op of opv
  auto reduce_range = [&](auto opv, const typename V::T* xk, int64_t rb, int64_t re, double m, A* acc) {
    if (rb >= re) return;
    using O = decltype(opv);
    if (re - rb <= kFlushElems && rb % li + (re - rb) <= li) {  // one run of one block at most
      DirectSink<O, A> direct{acc};
      const int64_t outer = rb / li == 0 ? 0 : Walker(g.rs, g.rst, nd - 1, rb / li).off;
      return h_kernel<V, O>(xk + outer + rb % li * si, re - rb, si, m, direct, runs);
    }
    Cascade<O, A> sink;  // Note [Cascaded accumulation]
    Walker w(g.rs, g.rst, nd - 1, rb / li);
    int64_t ii = rb % li;
    while (rb < re) {
      const int64_t seg = std::min(li - ii, re - rb);
      h_kernel<V, O>(xk + w.off + ii * si, seg, si, m, sink, runs);
      rb += seg;
      ii = 0;
      w.next();
    }
    sink.finish(acc);
  };
  // Op's reduction of [rb, re): var's in two-pass blocks (Note [One read for var])
  auto reduce = [&](const typename V::T* xk, int64_t rb, int64_t re, A* acc) {
    if constexpr (Op::kChan) {
      if (nd == 1 && si == 1) return h_var_run<V>(xk + rb, re - rb, acc, runs);  // one unit-stride run
      for (int64_t b = rb; b < re; b += kVarBlock) {
        const int64_t e = std::min(re, b + kVarBlock);
        const double nb = static_cast<double>(e - b);
        A s1 = 0, dev[2] = {0, 0};
        reduce_range(OpSum{}, xk, b, e, 0.0, &s1);
        const double m = static_cast<double>(static_cast<typename V::Acc>(s1 / nb));  // the lanes' centre
        reduce_range(OpSqDev{}, xk, b, e, m, dev);
        merge_block<A>(acc, nb, m, dev[0], dev[1]);
      }
    } else {
      reduce_range(Op{}, xk, rb, re, 0.0, acc);
    }
  };
  const int nt = get_num_threads();
  const bool split = K < 4 * nt && R >= 2 * kGrainSize && nt > 1;
  // Note [Short rows four at a time]: sum, max and var of unit-stride rows of W to kShortRow elements
  constexpr bool kRows4 = (std::is_same_v<Op, OpSum> || std::is_same_v<Op, OpMax> || std::is_same_v<Op, OpVar>) &&
                          std::is_same_v<A, double> && V::W > 1;
  // Note [Stride-2 rows four at a time]: float32 sums and maxes of rows of every other element
  constexpr bool kRows4S2 = std::is_same_v<typename V::T, float> && V::W > 1 &&
                            (std::is_same_v<Op, OpSum> || std::is_same_v<Op, OpMax>);
  [[maybe_unused]] const bool rows4_s2 = kRows4S2 && nd == 1 && si == 2 && R <= kShortRow && use_avx512();
  [[maybe_unused]] const bool rows4 = kRows4 && nd == 1 && ((si == 1 && R >= V::W) || rows4_s2) && R <= kShortRow;
  if (!split) {
    parallel_for(0, K, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(R, 1)), [&](int64_t b, int64_t e) {
      Walker w(g.ks, g.kst, b);
      // kept elements along one dim: their rows one stride apart, no Walker step a row
      const int64_t ks1 = g.ks.size() == 1 ? g.kst[0] : 0;
      int64_t k = b;
#ifdef SB_HAVE_AVX2
      if constexpr (kRows4) {
#ifdef SB_HAVE_AVX512
        // Note [Short rows in zmm]: max
        constexpr bool kZmm = std::is_same_v<Op, OpMax> && !std::is_same_v<typename V::T, double>;
        const bool zmm = kZmm && use_avx512();
        const bool dp16 = std::is_same_v<typename V::T, BFloat16> && use_avx512_bf16();
        int dp_skip = 0;  // var: groups left before the moments by dot products are tried again
        // Note [Short var rows in zmm]: float32 and float16 rows (bfloat16 rows take the dot products)
        constexpr bool kVarZmm = std::is_same_v<Op, OpVar> &&
                                 (std::is_same_v<typename V::T, float> || std::is_same_v<typename V::T, Half>);
        const bool var_zmm = kVarZmm && use_avx512() && cpu_tuning().var_rows_zmm;
        // Note [Short rows in address order]: sums of float and float16
        constexpr bool kInOrder = std::is_same_v<Op, OpSum> &&
                                  (std::is_same_v<typename V::T, float> || std::is_same_v<typename V::T, Half>);
        const bool in_order = kInOrder && R * static_cast<int64_t>(sizeof(typename V::T)) >= kInOrderRowBytes &&
                              use_avx512() && cpu_tuning().rows_in_order;
#endif
        for (; rows4 && k + 4 <= e; k += 4) {
          const typename V::T* p[4];
          if (ks1) {
            for (int r = 0; r < 4; ++r) p[r] = x + (k + r) * ks1;
          } else {
            for (int r = 0; r < 4; ++r, w.next()) p[r] = x + w.off;
          }
#ifdef SB_HAVE_AVX512
          if constexpr (kRows4S2)
            if (rows4_s2) {  // Note [Stride-2 rows four at a time]
              if constexpr (std::is_same_v<Op, OpSum>) h_sum_rows4_stride2_zmm(p, R, res + k);
              else h_max_rows4_stride2_zmm(p, R, res + k);
              continue;
            }
#endif
          if constexpr (std::is_same_v<Op, OpSum>) {
#ifdef SB_HAVE_AVX512
            if constexpr (std::is_same_v<typename V::T, BFloat16>)
              if (dp16) {  // Note [bfloat16 sums by dot products]
                h_sum_rows4_dp(p, R, res + k);
                continue;
              }
            if constexpr (kInOrder)
              if (in_order) {
                h_sum_rows4_in_order(p, R, res + k);
                continue;
              }
#endif
            h_sum_rows4<V>(p, R, res + k);
          } else if constexpr (std::is_same_v<Op, OpMax>) {
#ifdef SB_HAVE_AVX512
            if constexpr (kZmm)
              if (zmm) {
                h_max_rows4_zmm(p, R, res + k);
                continue;
              }
#endif
            h_max_rows4<V>(p, R, res + k);
          } else {  // h_var_run's one block per row: its centre, its guard, its merge
            const A nA = static_cast<A>(R);
#ifdef SB_HAVE_AVX512
            if constexpr (std::is_same_v<typename V::T, BFloat16>)
              // Note [bfloat16 moments by dot products]: around 0, where all four rows allow it
              if (dp16 && dp_skip-- <= 0) {
                double s1[4], s2[4];
                h_moments_rows4_dp(p, R, s1, s2);
                auto near = [nA](double s1, double s2) {  // sum(x^2) <= 16 M2; false for a NaN or an infinity
                  return s2 <= std::numeric_limits<A>::max() && s2 <= 16 * (s2 - s1 * (s1 / nA));
                };
                if (near(s1[0], s2[0]) && near(s1[1], s2[1]) && near(s1[2], s2[2]) && near(s1[3], s2[3])) {
                  for (int r = 0; r < 4; ++r) {
                    A acc[N];
                    Op::sinit(acc);
                    merge_block<A>(acc, nA, A(0), s2[r], s1[r]);
                    for (int q = 0; q < N; ++q) res[q * K + k + r] = acc[q];
                  }
                  continue;
                }
                dp_skip = kDpRetry;  // rows near each other are alike: try again after kDpRetry groups
              }
#endif
            typename V::Acc c[4];
            for (int r = 0; r < 4; ++r) c[r] = run_centre<V>(p[r], R);
            double s1[4], s2[4];
            bool zmm_done = false;
#ifdef SB_HAVE_AVX512
            if constexpr (kVarZmm)
              if (var_zmm) h_sqdev_rows4_zmm(p, R, c, s1, s2), zmm_done = true;
#endif
            if (!zmm_done) h_sqdev_rows4<V>(p, R, c, s1, s2);
            for (int r = 0; r < 4; ++r) {
              A acc[N];
              Op::sinit(acc);
              if (2 * s1[r] * s1[r] / nA <= s2[r] && s2[r] <= std::numeric_limits<A>::max())
                merge_block<A>(acc, nA, static_cast<A>(c[r]), s2[r], s1[r]);
              else
                h_var_run<V>(p[r], R, acc, runs);  // two passes for this row
              for (int q = 0; q < N; ++q) res[q * K + k + r] = acc[q];
            }
          }
        }
      }
#endif
      for (; k < e; ++k) {
        A acc[N];
        Op::sinit(acc);
        if (ks1) {
          reduce(x + k * ks1, 0, R, acc);
        } else {
          reduce(x + w.off, 0, R, acc);
          w.next();
        }
        for (int q = 0; q < N; ++q) res[q * K + k] = acc[q];
      }
    });
    return;
  }
  const int64_t P = nt;
  std::vector<A> parts(static_cast<size_t>(P * K * N));
  parallel_for(0, P, 1, [&](int64_t pb, int64_t pe) {
    for (int64_t p = pb; p < pe; ++p) {
      Walker w(g.ks, g.kst, 0);
      for (int64_t k = 0; k < K; ++k, w.next()) {
        A* acc = &parts[(p * K + k) * N];
        Op::sinit(acc);
        reduce(x + w.off, R * p / P, R * (p + 1) / P, acc);
      }
    }
  });
  for (int64_t p = 0; p < P; ++p)
    for (int64_t k = 0; k < K; ++k) {
      A acc[N];
      for (int q = 0; q < N; ++q) acc[q] = res[q * K + k];
      Op::scombine(acc, &parts[(p * K + k) * N]);
      for (int q = 0; q < N; ++q) res[q * K + k] = acc[q];
    }
}

// Note [Vertical rows per pass]
// The vertical kernel adds kVRows input rows into its L1 buffer per pass: each pass
// loads and stores the buffer once, so fewer rows mean more buffer traffic per input
// byte, more rows more streams side by side; wider tasks read each row in longer runs
// (a whole 32 KiB row, 8 adjacent rows per pass) although the float32 buffer (32 KiB)
// then lives in L2. 8 rows x 8192 columns measured fastest among 1-16 rows and
// 1024-8192 columns (docs/notes/copy-reduce.md).
// KS: the kept elements' stride along a row, 1 or 2 (Note [Stride-2 kept columns]:
// sums and maxes of float32 and float64).
template <class V, class Op, int KS = 1>
void run_vertical(const typename V::T* x, const ReducePlan& g, typename V::A* res) {
  using A = typename V::A;
  using Acc = typename V::Acc;
  constexpr int N = Op::N;
  const int64_t K = g.K, R = g.R, nk = static_cast<int64_t>(g.ks.size());
  const int64_t lk = g.ks[nk - 1], groups = K / lk;
  const int nt = get_num_threads();
  // Note [Column tasks for every thread]: a vertical task is up to kColumns kept elements
  // wide. Where there are fewer tasks than threads (a 512x256 input has one), the threads
  // split the rows and combine their partial results after. For var that combine is a
  // merge of (count, mean, M2) per kept element, serial, after an allocation: on 2
  // threads it made an L2-size var slower than on 1. var's inputs that are large enough
  // to split and come from the caches (not far) take narrower tasks instead, one per
  // thread, at least kMinTaskColumns wide, in whole 16-element vectors; the rows are
  // split only where the columns cannot be. Sums, narrower tasks and inputs from memory
  // keep the row split: there the narrower tasks ran slower (docs/notes/copy-reduce.md,
  // "Column tasks for var").
  constexpr int64_t kMinTaskColumns = 256;
  // x from memory, not the caches (Note [Prefetched 2-byte rows])
  const bool far = R * K * static_cast<int64_t>(sizeof(typename V::T)) > nt_threshold_bytes();
  int64_t cw = kColumns;
  if (Op::kChan && !far && nt > 1 && groups < nt && R * K >= 4 * kGrainSize) {
    const int64_t per = (nt + groups - 1) / groups;  // tasks a group needs
    cw = std::min(kColumns, std::max(kMinTaskColumns, ((lk + per - 1) / per + 15) / 16 * 16));
  }
  const int64_t nc = (lk + cw - 1) / cw, tasks = groups * nc;
#ifdef SB_HAVE_AVX512
  const bool dp16 = std::is_same_v<typename V::T, BFloat16> && V::W > 1 && use_avx512_bf16();
  const bool zvar = use_avx512();  // Note [Vertical var in zmm]
  const bool in_order = use_avx512() && cpu_tuning().rows_in_order;  // Note [Narrow columns in registers]
  const bool buf_in_order = cpu_tuning().buf_columns_in_order;
#endif
  // combine rows [rb, re) of column task t into out (laid out like res)
  auto task = [&](int64_t t, int64_t rb, int64_t re, A* out) {
    if (rb >= re) return;
    const int64_t ko = t / nc, c = t % nc, j0 = c * cw, L = std::min(cw, lk - j0);
    const typename V::T* base = x + Walker(g.ks, g.kst, nk - 1, ko).off + KS * j0;
    const int64_t k0 = ko * lk + j0;
#ifdef SB_HAVE_AVX512
    [[maybe_unused]] const bool reg_columns = in_order && L <= kRegColumns;
    [[maybe_unused]] const bool buf_columns = in_order && buf_in_order && L > kRegColumns && L <= kBufColumns;
#endif
    // the buffers per thread, not on the stack: N * kColumns accumulators are 192 KiB
    // for a float64 var, a large frame for a worker thread. var: buf = the run's mean of
    // y and M2, then the shift c (Note [One read for var]); others: N accumulators.
    static thread_local std::vector<Acc> store;
    const size_t need = static_cast<size_t>(N * kColumns) + 64 / sizeof(Acc);
    if (store.size() < need) store.resize(need);
    Acc* const buf = store.data() + (64 - reinterpret_cast<uintptr_t>(store.data()) % 64) % 64 / sizeof(Acc);
    Acc* const cb = Op::kChan ? buf + 2 * kColumns : nullptr;
    int64_t nrun = 0;  // var: rows in the float run
    Walker w(g.rs, g.rst, rb);
    if constexpr (Op::kChan)
      for (int64_t j = 0; j < L; ++j) cb[j] = to_acc<Acc>(base[w.off + KS * j]);
    auto reset = [&] {
      if constexpr (Op::kChan) {
        std::fill(buf, buf + L, Acc(0));
        std::fill(buf + kColumns, buf + kColumns + L, Acc(0));
        nrun = 0;
      } else {
        for (int64_t j = 0; j < L; ++j) {
          Acc a[N];
          Op::sinit(a);
          for (int q = 0; q < N; ++q) buf[q * kColumns + j] = a[q];
        }
      }
    };
    // Note [Cascaded accumulation], columns: each run of kFlushRows rows goes from buf
    // into a group of kGroupRuns runs (grp, in A), each group into out, so no sum in A
    // takes more than about kGroupRuns + R / (kFlushRows kGroupRuns) terms in a row
    static thread_local std::vector<A> group_store;
    if (group_store.size() < static_cast<size_t>(N * kColumns)) group_store.resize(static_cast<size_t>(N * kColumns));
    A* const grp = group_store.data();
    int64_t runs = 0;  // runs in grp
    auto flush_group = [&] {
      if (runs == 0) return;
      for (int64_t j = 0; j < L; ++j) {
        A o[N], b[N];
        for (int q = 0; q < N; ++q) o[q] = out[q * K + k0 + j], b[q] = grp[q * kColumns + j];
        Op::scombine(o, b);
        for (int q = 0; q < N; ++q) out[q * K + k0 + j] = o[q];
      }
      runs = 0;
    };
    auto flush = [&](bool into_out) {  // into_out: the task's only run, straight to out
      A* const dst = into_out ? out + k0 : grp;
      const int64_t ld = into_out ? K : kColumns;
      for (int64_t j = 0; j < L; ++j) {
        A o[N], b[N];
        if (runs == 0 && !into_out) Op::sinit(o);
        else for (int q = 0; q < N; ++q) o[q] = dst[q * ld + j];
        if constexpr (Op::kChan) {
          b[0] = static_cast<A>(nrun);
          b[1] = static_cast<A>(cb[j]) + static_cast<A>(buf[j]);
          b[2] = static_cast<A>(buf[kColumns + j]);
        } else {
          for (int q = 0; q < N; ++q) b[q] = static_cast<A>(buf[q * kColumns + j]);
        }
        Op::scombine(o, b);
        for (int q = 0; q < N; ++q) dst[q * ld + j] = o[q];
      }
      if (!into_out && ++runs == kGroupRuns) flush_group();
    };
    reset();
    const int64_t rs1 = g.rs.size() == 1 ? g.rst[0] : 0;
    int64_t off[kRowBatch], since = 0;
    for (int64_t r = rb; r < re;) {
      const int64_t n = std::min(kRowBatch, re - r);
      if (rs1) {  // one reduced dim: row r at r * its stride, no Walker step a row
        for (int64_t i = 0; i < n; ++i) off[i] = (r + i) * rs1;
      } else {
        for (int64_t i = 0; i < n; ++i, w.next()) off[i] = w.off;
      }
      if constexpr (KS == 2) {
#ifdef SB_HAVE_AVX512
        constexpr bool kZ = std::is_same_v<typename V::T, float> && V::W > 1 &&
                            (std::is_same_v<Op, OpSum> || std::is_same_v<Op, OpMax>);
        if constexpr (kZ) {
          if (std::is_same_v<Op, OpSum> && reg_columns)  // Note [Stride-2 kept columns in zmm], in registers
            v_sum_columns_fn<2>(L)(base, off, n, L, buf);
          else if (use_avx512()) v_kernel_stride2_zmm<Op>(base, off, n, L, buf);  // Note [Stride-2 kept columns in zmm]
          else v_kernel<V, Op, false, 2>(base, off, n, L, buf);
        } else
#endif
          v_kernel<V, Op, false, 2>(base, off, n, L, buf);
      } else if constexpr (Op::kChan) {
#ifdef SB_HAVE_AVX512
        if constexpr ((std::is_same_v<typename V::T, float> || std::is_same_v<typename V::T, BFloat16>) && V::W > 1) {
          if (zvar) v_var_kernel_zmm<typename V::T>(base, off, n, L, buf, cb, nrun);
          else v_var_kernel<V>(base, off, n, L, buf, cb, nrun);
        } else
#endif
          v_var_kernel<V>(base, off, n, L, buf, cb, nrun);
        nrun += n;
      } else {
        bool done = false;
#ifdef SB_HAVE_AVX512
        if constexpr (std::is_same_v<Op, OpSum> && std::is_same_v<typename V::T, float> && V::W > 1)
          if (reg_columns || buf_columns) {  // Note [Narrow columns in registers]
            if (reg_columns) v_sum_columns_fn(L)(base, off, n, L, buf);
            else v_sum_columns_buf(base, off, n, L, buf);
            done = true;
          }
        if constexpr (std::is_same_v<Op, OpSum> && std::is_same_v<typename V::T, BFloat16> && V::W > 1)
          if (reg_columns) {  // Note [Narrow columns in registers]
            v_sum_columns_bf16_fn(L)(base, off, n, L, buf);
            done = true;
          }
#endif
#ifdef SB_HAVE_AVX512
        if constexpr (std::is_same_v<Op, OpSum> && std::is_same_v<typename V::T, BFloat16> && V::W > 1)
          if (dp16 && !done) {  // Note [bfloat16 column sums by dot products]
            if (far) v_sum_bf16_dp<true>(base, off, n, L, buf);
            else v_sum_bf16_dp<false>(base, off, n, L, buf);
            done = true;
          }
#endif
        if (!done) {
          if constexpr (sizeof(typename V::T) == 2) {
            if (far) v_kernel<V, Op, true>(base, off, n, L, buf);
            else v_kernel<V, Op>(base, off, n, L, buf);
          } else {
            v_kernel<V, Op>(base, off, n, L, buf);
          }
        }
      }
      r += n;
      if ((since += n) >= kFlushRows && r < re) {
        flush(false);
        reset();
        since = 0;
      }
    }
    flush(runs == 0);
    flush_group();
  };
  const bool split = (tasks < nt || (tasks < 2 * nt && tasks % nt != 0)) && R >= 64 && R * K >= 4 * kGrainSize && nt > 1;
  if (!split) {
    const int64_t work = R * std::min(lk, cw);
    parallel_for(0, tasks, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(work, 1)), [&](int64_t b, int64_t e) {
      for (int64_t t = b; t < e; ++t) task(t, 0, R, res);
    });
    return;
  }
  const int64_t P = nt;
  std::vector<A> parts(static_cast<size_t>(P * K * N));
  for (int64_t p = 0; p < P; ++p)
    for (int64_t k = 0; k < K; ++k) {
      A a[N];
      Op::sinit(a);
      for (int q = 0; q < N; ++q) parts[p * K * N + q * K + k] = a[q];
    }
  parallel_for(0, P, 1, [&](int64_t pb, int64_t pe) {
    for (int64_t p = pb; p < pe; ++p)
      for (int64_t t = 0; t < tasks; ++t) task(t, R * p / P, R * (p + 1) / P, &parts[p * K * N]);
  });
  for (int64_t p = 0; p < P; ++p)
    for (int64_t k = 0; k < K; ++k) {
      A a[N], b[N];
      for (int q = 0; q < N; ++q) a[q] = res[q * K + k], b[q] = parts[p * K * N + q * K + k];
      Op::scombine(a, b);
      for (int q = 0; q < N; ++q) res[q * K + k] = a[q];
    }
}

// The accumulators of one call: up to kKept of them in a buffer that the thread keeps
// for its next call, more in one of their own (Note [No allocation in the reduce driver]).
// One AccBuffer of a type at a time on a thread: reduce_float's.
template <class A>
class AccBuffer {
 public:
  static constexpr size_t kKept = 4096;
  void resize(size_t n) {
    if (n <= kKept) {
      static thread_local std::vector<A> kept;
      if (kept.empty()) kept.resize(kKept);
      p_ = kept.data();
    } else {
      own_.resize(n);
      p_ = own_.data();
    }
  }
  A* data() { return p_; }
  A& operator[](int64_t i) { return p_[i]; }
  const A& operator[](int64_t i) const { return p_[i]; }

 private:
  A* p_ = nullptr;
  std::vector<A> own_;
};

template <class V, class Op>
void run(const typename V::T* x, const ReducePlan& g, AccBuffer<typename V::A>& res) {
  constexpr int N = Op::N;
  res.resize(static_cast<size_t>(g.K * N));
  for (int64_t k = 0; k < g.K; ++k) {
    typename V::A a[N];
    Op::sinit(a);
    for (int q = 0; q < N; ++q) res[q * g.K + k] = a[q];
  }
  if (g.K == 0 || g.R == 0) return;
  if (g.rst.back() != 1 && g.kst.back() == 1 && g.ks.back() > 1) return run_vertical<V, Op>(x, g, res.data());
  // Note [Stride-2 kept columns]
  constexpr bool kCols2 = (std::is_same_v<typename V::T, float> || std::is_same_v<typename V::T, double>) && V::W > 1 &&
                          !Op::kChan;
  if constexpr (kCols2)
    if (g.kst.back() == 2 && g.rst.back() > 2 && g.ks.back() > 1) return run_vertical<V, Op, 2>(x, g, res.data());
  run_horizontal<V, Op>(x, g, res.data());
}

// Write f(k) for each kept element k through out's strides.
// A dense result (one kept dim after the plan, unit stride) of float or bfloat16 goes
// 8 values at a time: f's doubles rounded to float, then to bfloat16 by Vec<BFloat16>'s
// narrow, which gives convert's bits (Note [bfloat16 NaN and subnormals]), in place of
// the odometer and one scalar rounding per value (docs/notes/copy-reduce.md, "Dense
// results eight at a time").
template <typename T, typename F>
void write_out(void* out, const ReducePlan& g, const F& f) {
  T* o = static_cast<T*>(out);
#ifdef SB_HAVE_AVX2
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, BFloat16>) {
    if (g.wks.size() == 1 && g.wkost[0] == 1 && use_avx2()) {
      return parallel_for(0, g.K, kGrainSize, [&](int64_t b, int64_t e) {
        int64_t k = b;
        for (; k + 8 <= e; k += 8) {
          const __m256 v = _mm256_set_m128(_mm256_cvtpd_ps(_mm256_setr_pd(f(k + 4), f(k + 5), f(k + 6), f(k + 7))),
                                           _mm256_cvtpd_ps(_mm256_setr_pd(f(k), f(k + 1), f(k + 2), f(k + 3))));
          if constexpr (std::is_same_v<T, float>) _mm256_storeu_ps(o + k, v);
          else vec::Vec<BFloat16>::store(o + k, v);
        }
        for (; k < e; ++k) o[k] = convert<T>(f(k));
      });
    }
  }
#endif
  parallel_for(0, g.K, kGrainSize, [&](int64_t b, int64_t e) {
    Walker w(g.wks, g.wkost, b);
    for (int64_t k = b; k < e; ++k, w.next()) o[w.off] = convert<T>(f(k));
  });
}

template <typename T, class VS, class VV>
void reduce_float(ReduceOp op, void* out_k, const Tensor& x, const ReducePlan& g, int64_t correction, bool simd) {
  const T* xp = static_cast<const T*>(x.data_ptr());
  const double n = static_cast<double>(g.R);
  AccBuffer<double> res;
  auto run_op = [&](auto opv) {
    using Op = decltype(opv);
    if (simd) run<VV, Op>(xp, g, res);
    else run<VS, Op>(xp, g, res);
  };
  if (op == ReduceOp::Max) {
    run_op(OpMax{});
    return write_out<T>(out_k, g, [&](int64_t k) { return res[k]; });
  }
  if (op == ReduceOp::Sum || op == ReduceOp::Mean) {
    run_op(OpSum{});
    if (op == ReduceOp::Sum) return write_out<T>(out_k, g, [&](int64_t k) { return res[k]; });
    return write_out<T>(out_k, g, [&](int64_t k) { return res[k] / n; });
  }
  run_op(OpVar{});  // res: counts, means, M2 (Note [One read for var])
  const double div = std::max(0.0, n - static_cast<double>(correction));
  const int64_t K = g.K;
  const bool sq = op == ReduceOp::Std;
  write_out<T>(out_k, g, [&](int64_t k) {
    const double m2 = g.R == 0 ? NAN : res[2 * K + k];
    const double v = m2 / div;
    return sq ? std::sqrt(v) : v;
  });
}

void reduce_cpu(ReduceOp op, void* out_k, const Tensor& x, const ReducePlan& g, int64_t correction) {
  const bool simd = use_avx2();
  (void)simd;  // unused without SB_HAVE_AVX2
  switch (x.dtype()) {
#ifdef SB_HAVE_AVX2
    case DType::Float32: return reduce_float<float, vec::Scalar<float, double>, vec::Simd<float>>(op, out_k, x, g, correction, simd);
    case DType::Float64: return reduce_float<double, vec::Scalar<double, double>, vec::Simd<double>>(op, out_k, x, g, correction, simd);
    case DType::Float16: return reduce_float<Half, vec::Scalar<Half, double>, vec::Simd<Half>>(op, out_k, x, g, correction, simd);
    case DType::BFloat16:
      return reduce_float<BFloat16, vec::Scalar<BFloat16, double>, vec::Simd<BFloat16>>(op, out_k, x, g, correction, simd);
#else
    case DType::Float32:
      return reduce_float<float, vec::Scalar<float, double>, vec::Scalar<float, double>>(op, out_k, x, g, correction, false);
    case DType::Float64:
      return reduce_float<double, vec::Scalar<double, double>, vec::Scalar<double, double>>(op, out_k, x, g, correction,
                                                                                     false);
    case DType::Float16:
      return reduce_float<Half, vec::Scalar<Half, double>, vec::Scalar<Half, double>>(op, out_k, x, g, correction, false);
    case DType::BFloat16:
      return reduce_float<BFloat16, vec::Scalar<BFloat16, double>, vec::Scalar<BFloat16, double>>(op, out_k, x, g,
                                                                                               correction, false);
#endif
    case DType::Int32: {
      const int32_t* xp = x.data<int32_t>();
      if (op == ReduceOp::Sum) {
        AccBuffer<int64_t> res;
        run<vec::Scalar<int32_t, int64_t>, OpSum>(xp, g, res);
        return write_out<int32_t>(out_k, g, [&](int64_t k) { return static_cast<int32_t>(res[k]); });
      }
      AccBuffer<double> res;  // max: int32 is exact in double
      run<vec::Scalar<int32_t, double>, OpMax>(xp, g, res);
      return write_out<int32_t>(out_k, g, [&](int64_t k) { return static_cast<int32_t>(res[k]); });
    }
    default: SB_INTERNAL_ASSERT(false, "reduce: dtype ", x.dtype());
  }
}

// ---------------------------------------------------------------- the public ops

Shape result_sizes(const Tensor& x, const DimFlags& red, bool keepdim) {
  Shape s;
  for (int64_t i = 0; i < x.dim(); ++i) {
    if (!red[i]) s.push_back(x.sizes()[i]);
    else if (keepdim) s.push_back(1);
  }
  return s;
}

// Checks everything, then fills `out` (allocating it when !out.defined()).
void reduce_impl(ReduceOp op, Tensor& out, bool have_out, const Tensor& x, const Shape& dims, int64_t correction,
                 bool keepdim) {
  const char* name = reduce_op_name(op);
  SB_CHECK(x.defined(), name, ": undefined input tensor");
  const DType dt = x.dtype();
  SB_CHECK(is_floating(dt) || dt == DType::Int32, name, ": dtype ", dt,
           " is not supported (float32, float64, float16, bfloat16, int32)");
  SB_CHECK(is_floating(dt) || op == ReduceOp::Sum || op == ReduceOp::Max, name,
           ": expected a floating dtype (float32, float64, float16, bfloat16), got ", dt);
  const int64_t nd = x.dim();
  DimFlags red(static_cast<size_t>(nd), dims.empty());
  DimFlags seen(static_cast<size_t>(std::max<int64_t>(nd, 1)), false);
  for (int64_t d : dims) {
    const int64_t w = wrap_dim(d, nd, name);
    SB_CHECK(!seen[w], name, ": dim ", w, " appears more than once in dims ", dims);
    seen[w] = true;
    if (nd > 0) red[w] = true;
  }
  Dims sorted;
  for (int64_t i = 0; i < nd; ++i)
    if (red[i]) sorted.push_back(i);
  if (op == ReduceOp::Max)
    for (int64_t d : sorted)
      SB_CHECK(x.sizes()[d] != 0, name, ": cannot reduce over dim ", d, " of size 0 (sizes ", x.sizes(),
               "): max has no identity");
  const Shape rsizes = result_sizes(x, red, keepdim);
  if (have_out) {
    SB_CHECK(out.defined(), name, "_out: undefined output tensor");
    SB_CHECK(out.device() == x.device(), name, "_out: output on ", out.device(), ", input on ", x.device());
    SB_CHECK(out.dtype() == dt, name, "_out: output dtype ", out.dtype(), " differs from the input dtype ", dt);
    SB_CHECK(out.sizes() == rsizes, name, "_out: output sizes ", out.sizes(), " differ from the result sizes ",
             rsizes, " (input sizes ", x.sizes(), ", dims ", dims, ", keepdim ", keepdim ? "true" : "false", ")");
    SB_CHECK(has_internal_overlap(out) != MemOverlap::Yes, name, "_out: more than one element of the output (sizes ",
             out.sizes(), ", strides ", out.strides(), ") refers to a single memory location");
    check_disjoint((std::string(name) + "_out").c_str(), out, x, "the input");
  } else {
    out = empty(rsizes, dt, x.device());
  }
  if (x.device().is_cuda()) {
#ifdef SB_WITH_CUDA
    Tensor out_k = out;
    if (!keepdim)
      for (int64_t d : sorted) out_k = out_k.unsqueeze(d);
    cuda::reduce(op, out_k, x, Shape(sorted.begin(), sorted.end()), correction);
    return;
#else
    SB_CHECK(false, name, have_out ? "_out" : "", ": input on ", x.device(), " needs CUDA, and stridebench was built without it");
#endif
  }
  // out's strides at x's dims; a reduced dim's entry is never read (its size is 1 in the plan)
  Dims ost(static_cast<size_t>(nd), 0);
  for (int64_t i = 0, j = 0; i < nd; ++i) {
    if (keepdim) ost[i] = out.strides()[i];
    else if (!red[i]) ost[i] = out.strides()[j++];
  }
  // Note [Stepped inputs reduced dense]: an input none of whose dims (of size > 1) is
  // unit-stride or expanded (a stepped slice x[..., ::2], a view of every other row and
  // column) leaves every path the strided scalar chains: horizontal runs of short steps
  // or columns a step apart, an element a cycle or more, 16-bit elements converted one
  // by one. It is copied dense first (Note [Every other element gathered] for steps of
  // 2) and reduced as its dense twin, with its twin's bits, where that measured faster
  // at 1 and 2 threads: 16-bit inputs, and float32 var and std up to the L2 size. The
  // float32 and float64 sums and maxes, and float32 past the L2, spent more on the copy
  // than the chains cost somewhere (docs/notes/copy-reduce.md). Up to the streaming
  // threshold only: the copy stays in the caches.
  const int64_t xbytes = x.numel() * static_cast<int64_t>(x.element_size());
  const bool moments = op == ReduceOp::Var || op == ReduceOp::Std;
  if (use_avx2() && x.numel() > 1 && xbytes <= nt_threshold_bytes() &&
      (x.element_size() == 2 ||
       (x.dtype() == DType::Float32 && moments && xbytes <= static_cast<int64_t>(cpu_caches().l2)))) {
    bool stepped = true;
    for (int64_t i = 0; i < nd; ++i)
      if (x.sizes()[i] > 1 && (x.strides()[i] == 1 || x.strides()[i] == 0)) stepped = false;
    if (stepped) {
      const Tensor xd = x.contiguous();
      return reduce_cpu(op, out.data_ptr(), xd, make_reduce_plan(xd, ost.data(), red), correction);
    }
  }
  reduce_cpu(op, out.data_ptr(), x, make_reduce_plan(x, ost.data(), red), correction);
}

Tensor reduce_new(ReduceOp op, const Tensor& x, const Shape& dims, int64_t correction, bool keepdim) {
  Tensor out;
  reduce_impl(op, out, false, x, dims, correction, keepdim);
  return out;
}

}  // namespace

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return "sum";
    case ReduceOp::Mean: return "mean";
    case ReduceOp::Max: return "max";
    case ReduceOp::Var: return "var";
    case ReduceOp::Std: return "std";
  }
  return "?";
}

Tensor sum(const Tensor& x, const Shape& dims, bool keepdim) { return reduce_new(ReduceOp::Sum, x, dims, 0, keepdim); }
Tensor mean(const Tensor& x, const Shape& dims, bool keepdim) { return reduce_new(ReduceOp::Mean, x, dims, 0, keepdim); }
Tensor max(const Tensor& x, const Shape& dims, bool keepdim) { return reduce_new(ReduceOp::Max, x, dims, 0, keepdim); }
Tensor var(const Tensor& x, const Shape& dims, int64_t correction, bool keepdim) {
  return reduce_new(ReduceOp::Var, x, dims, correction, keepdim);
}
Tensor std(const Tensor& x, const Shape& dims, int64_t correction, bool keepdim) {
  return reduce_new(ReduceOp::Std, x, dims, correction, keepdim);
}

Tensor& sum_out(Tensor& out, const Tensor& x, const Shape& dims, bool keepdim) {
  reduce_impl(ReduceOp::Sum, out, true, x, dims, 0, keepdim);
  return out;
}
Tensor& mean_out(Tensor& out, const Tensor& x, const Shape& dims, bool keepdim) {
  reduce_impl(ReduceOp::Mean, out, true, x, dims, 0, keepdim);
  return out;
}
Tensor& max_out(Tensor& out, const Tensor& x, const Shape& dims, bool keepdim) {
  reduce_impl(ReduceOp::Max, out, true, x, dims, 0, keepdim);
  return out;
}
Tensor& var_out(Tensor& out, const Tensor& x, const Shape& dims, int64_t correction, bool keepdim) {
  reduce_impl(ReduceOp::Var, out, true, x, dims, correction, keepdim);
  return out;
}
Tensor& std_out(Tensor& out, const Tensor& x, const Shape& dims, int64_t correction, bool keepdim) {
  reduce_impl(ReduceOp::Std, out, true, x, dims, correction, keepdim);
  return out;
}

}  // namespace sb
