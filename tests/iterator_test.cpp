// iterator_test.cpp — the shared strided iterator (lib/elementwise/iterator.*): its coalescing,
// ordering and path decisions on known layouts, and, on random layouts, that every
// output element is visited exactly once with the right input elements, serially and
// split over 2 threads.
#include "elementwise/iterator.h"
#include "core/test_hooks.h"

#include "copy/copy.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <numeric>

#include "stridebench/cpu_features.h"
#include "test_util.h"

namespace sb {
namespace {

using Path = StridedIter::Path;

const char* path_name(Path p) {
  switch (p) {
    case Path::Contiguous: return "contiguous";
    case Path::Broadcast: return "broadcast";
    case Path::Tiled: return "tiled";
    case Path::Strided: return "strided";
  }
  return "?";
}

TEST(Iterator, DenseOperandsCoalesceToOneContiguousDim) {
  Tensor o = empty({4, 5, 6}), a = empty({4, 5, 6}), b = empty({4, 5, 6});
  StridedIter it = StridedIter::from_tensors({o, a, b});
  EXPECT_EQ(it.path(), Path::Contiguous);
  EXPECT_EQ(it.sizes(), Shape({120}));
  EXPECT_EQ(it.stride_bytes(0, 0), 4);
}

TEST(Iterator, OfTakesTheDirectContiguousSetUpOnlyForContiguousOperands) {
  Tensor o = empty({1, 4, 1, 6}), a = empty({1, 4, 1, 6}), b = empty({4, 6}).t().t().unsqueeze(0).unsqueeze(2);
  StridedIter it = StridedIter::of({&o, &a, &b});
  EXPECT_EQ(it.path(), Path::Contiguous);
  EXPECT_EQ(it.sizes(), Shape({24}));
  EXPECT_EQ(it.num_operands(), 3);
  EXPECT_EQ(it.stride_bytes(2, 0), 4);
  Tensor o2 = empty({16, 24}), t = empty({24, 16}).t();  // transposed: the general set-up, Tiled
  EXPECT_EQ(StridedIter::of({&o2, &t}).path(), Path::Tiled);
  Tensor e = empty({0, 3});
  EXPECT_EQ(StridedIter::of({&e, &e}).numel(), 0);
}

TEST(Iterator, TransposedAndChannelsLastOutputsIterateInMemoryOrder) {
  Tensor o = empty({5, 4}).t(), a = empty({5, 4}).t();  // column-major 4x5
  StridedIter it = StridedIter::from_tensors({o, a});
  EXPECT_EQ(it.path(), Path::Contiguous);
  EXPECT_EQ(it.sizes(), Shape({20}));
  Tensor c = empty({2, 3, 4, 5}, DType::Float64, Device::cpu(), MemoryFormat::ChannelsLast);
  Tensor d = empty({2, 3, 4, 5}, DType::Float64, Device::cpu(), MemoryFormat::ChannelsLast);
  StridedIter it2 = StridedIter::from_tensors({c, d});
  EXPECT_EQ(it2.path(), Path::Contiguous);
  EXPECT_EQ(it2.sizes(), Shape({120}));
  EXPECT_EQ(it2.stride_bytes(1, 0), 8);
}

TEST(Iterator, OneTransposedInputTakesTheTiledPath) {
  Tensor o = empty({64, 48}), b = empty({64, 48}), a = empty({48, 64}).t();
  StridedIter it = StridedIter::from_tensors({o, a, b});
  EXPECT_EQ(it.path(), Path::Tiled);
  EXPECT_EQ(it.sizes(), Shape({48, 64}));  // dim 0: the output's fastest
  EXPECT_EQ(it.stride_bytes(0, 0), 4);
  EXPECT_EQ(it.stride_bytes(1, 1), 4);  // dim 1 of the tile: a's fastest
  EXPECT_EQ(it.tile0(), 48);  // the whole row: shorter than kTileBytes0
  EXPECT_EQ(it.tile1(), 64);  // all of dim 1 (kTileElems would allow more)
  EXPECT_TRUE(it.staged(1));   // a goes through the tile buffer
  EXPECT_FALSE(it.staged(2));  // b is dense in the output order already
  // tile shapes: kTileBytes0 of a long row x kTileRows; short rows take more rows, up to
  // kTileElems elements (a whole 128 x 128 plane: the staged source read in long runs)
  {
    Tensor ol = empty({3, 40, 1000}), al = empty({3, 1000, 40}).transpose(1, 2);
    StridedIter itl = StridedIter::from_tensors({ol, ol, al});
    EXPECT_EQ(itl.tile0(), StridedIter::kTileBytes0 / 4);
    EXPECT_EQ(itl.tile1(), 40);  // kTileRows, clipped to dim 1
    Tensor op = empty({5, 128, 128}), ap = empty({5, 128, 128}).transpose(1, 2);
    StridedIter itp = StridedIter::from_tensors({op, ap});
    EXPECT_EQ(itp.tile0(), 128);
    EXPECT_EQ(itp.tile1(), 128);
    EXPECT_TRUE(itp.tiles_write_dense_blocks());
    Tensor os = empty({5, 300, 16}), as = empty({5, 16, 300}).transpose(1, 2);
    StridedIter its = StridedIter::from_tensors({os, as});
    EXPECT_EQ(its.tile0(), 16);
    EXPECT_EQ(its.tile1(), 300);  // kTileElems / 16 = 1024 rows, clipped to 300
  }
  // too small to tile: the plain strided walk
  Tensor o2 = empty({4, 6}), a2 = empty({6, 4}).t();
  EXPECT_EQ(StridedIter::from_tensors({o2, a2}).path(), Path::Strided);
  // 3-D: a permuted input whose fastest dim is the output's outermost
  Tensor o3 = empty({16, 3, 20}), a3 = empty({3, 20, 16}).permute({2, 0, 1});
  StridedIter it3 = StridedIter::from_tensors({o3, a3});
  EXPECT_EQ(it3.path(), Path::Tiled);
  EXPECT_EQ(it3.sizes(), Shape({60, 16}));  // 3x20 coalesced for both, then the 16
}

TEST(Iterator, BroadcastAndStridedDecisions) {
  Tensor o = empty({8, 16});
  Tensor col = empty({8, 1}).expand({8, 16});
  StridedIter it = StridedIter::from_tensors({o, o, col});
  EXPECT_EQ(it.path(), Path::Broadcast);
  EXPECT_EQ(it.sizes(), Shape({16, 8}));
  EXPECT_EQ(it.stride_bytes(2, 0), 0);
  Tensor row = empty({1, 16}).expand({8, 16});
  StridedIter it2 = StridedIter::from_tensors({o, row});
  EXPECT_EQ(it2.path(), Path::Strided);
  EXPECT_EQ(it2.sizes(), Shape({16, 8}));
  Tensor scalar = empty({}).expand({8, 16});  // stride-0 scalar: still the fast path
  StridedIter it3 = StridedIter::from_tensors({o, o, scalar});
  EXPECT_EQ(it3.path(), Path::Contiguous);
  EXPECT_EQ(it3.sizes(), Shape({128}));
  EXPECT_EQ(it3.stride_bytes(2, 0), 0);
  // a stepped slice output: rows merge (32 == 2 * 16), the step stays
  Tensor sl = empty({8, 32}).slice(1, 0, std::nullopt, 2);
  StridedIter it4 = StridedIter::from_tensors({sl, o});
  EXPECT_EQ(it4.path(), Path::Strided);
  EXPECT_EQ(it4.sizes(), Shape({128}));
  EXPECT_EQ(it4.stride_bytes(0, 0), 8);
  // size-1 dims are dropped; all size 1 is one element
  Tensor one = empty({1, 1, 1});
  StridedIter it5 = StridedIter::from_tensors({one, one});
  EXPECT_EQ(it5.path(), Path::Contiguous);
  EXPECT_EQ(it5.numel(), 1);
}

TEST(Iterator, OutputStridesFollowPyTorchsRule) {
  Tensor cl = empty({2, 3, 4, 5}, DType::Float32, Device::cpu(), MemoryFormat::ChannelsLast);
  Tensor ex = empty({1, 3, 1, 1}).expand({2, 3, 4, 5});
  EXPECT_EQ(output_strides_like(cl.sizes(), {&cl.strides(), &cl.strides()}), channels_last_strides(cl.sizes()));
  EXPECT_EQ(output_strides_like(cl.sizes(), {&ex.strides(), &cl.strides()}), channels_last_strides(cl.sizes()));
  Tensor at = empty({5, 4}).t(), b = empty({4, 5});
  EXPECT_EQ(output_strides_like({4, 5}, {&at.strides(), &b.strides()}), Shape({1, 4}));  // first input wins
  EXPECT_EQ(output_strides_like({4, 5}, {&b.strides(), &at.strides()}), Shape({5, 1}));
}

// A random view of a fresh buffer holding `vals` (Note [One layout builder] in
// cases/layout.h): a random storage order with random steps and starts, or
// (allow_expand) the Expanded layout.
// expanded: set when the result is test::with_layout(vals, Expanded) (it then holds
// test::layout_values(vals, Expanded)).
Tensor random_layout(std::mt19937_64& rng, const Tensor& vals, bool allow_expand, bool* expanded = nullptr) {
  const int64_t nd = vals.dim();
  const int kind = static_cast<int>(rng() % (allow_expand ? 4 : 3));
  if (expanded) *expanded = false;
  if (kind == 3 && nd > 0 && vals.size(0) > 0) {
    if (expanded) *expanded = true;
    return test::with_layout(vals, test::Layout::Expanded);
  }
  cases::Placement p = cases::dense(vals.sizes());
  std::shuffle(p.order.begin(), p.order.end(), rng);
  if (kind >= 1)
    for (int64_t d : p.order) {
      p.step[d] = 1 + static_cast<int64_t>(rng() % 3);
      p.start[d] = kind == 2 ? 1 : 0;
      p.pad[d] = p.step[d] - p.start[d];
    }
  const cases::Placed placed = cases::place(vals.sizes(), p, vals.dtype());
  test::poison(placed.buffer);
  Tensor v = placed.view;
  v.copy_(vals);
  return v;
}

TEST(Iterator, EveryElementVisitedOnceWithItsInputs) {
  std::mt19937_64 rng(11);
  std::map<Path, int> seen;
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    for (int trial = 0; trial < 300; ++trial) {
      const int nd = static_cast<int>(rng() % 5);
      Shape sz = test::random_shape(rng, nd, trial % 3 == 0 && nd <= 2 ? 70 : 9);
      const int64_t n = checked_numel(sz, "test");
      std::vector<double> av(n), bv(n);
      for (int64_t i = 0; i < n; ++i) av[i] = static_cast<double>(i);
      bv = rand(sz, rng(), DType::Float64).to_vector();
      for (double& x : bv) x = std::floor(x * 100);
      bool b_expanded = false;
      Tensor a = random_layout(rng, from_vector(av, sz).to(DType::Int64), false);
      Tensor b = random_layout(rng, from_vector(bv, sz).to(DType::Int64), true, &b_expanded);
      if (b_expanded) bv = test::layout_values(bv, sz, test::Layout::Expanded);
      Tensor out = random_layout(rng, zeros(sz, DType::Int64), false);
      out.zero_();
      // of() (no tensor copies, a direct Contiguous set-up) must decide as from_tensors does
      const StridedIter full = StridedIter::from_tensors({out, a, b});
      const StridedIter fast = StridedIter::of({&out, &a, &b});
      ASSERT_EQ(fast.path(), full.path()) << "trial " << trial;
      ASSERT_EQ(fast.sizes(), full.sizes()) << "trial " << trial;
      for (int op = 0; op < 3; ++op)
        for (int d = 0; d < full.ndim(); ++d) ASSERT_EQ(fast.stride_bytes(op, d), full.stride_bytes(op, d));
      const StridedIter& it = (trial / 2) % 2 ? fast : full;
      seen[it.path()]++;
      const int64_t grain = trial % 2 ? 1 : kGrainSize;  // grain 1: split even tiny work
      it.for_each(
          [](char* const* p, const int64_t* s, int64_t len) {
            for (int64_t j = 0; j < len; ++j) {
              auto* o = reinterpret_cast<int64_t*>(p[0] + j * s[0]);
              *o += 1 + *reinterpret_cast<const int64_t*>(p[1] + j * s[1]) +
                    1000000 * *reinterpret_cast<const int64_t*>(p[2] + j * s[2]);
            }
          },
          grain);
      std::vector<double> ref(n);
      for (int64_t i = 0; i < n; ++i) ref[i] = 1 + av[i] + 1000000 * bv[i];
      ASSERT_TRUE(test::all_close(out, ref, 0, 0))
          << "trial " << trial << " path " << path_name(it.path()) << " out " << out.str() << " a " << a.str()
          << " b " << b.str();
    }
  }
  set_num_threads(2);
  for (Path p : {Path::Contiguous, Path::Broadcast, Path::Tiled, Path::Strided})
    EXPECT_GT(seen[p], 0) << "random layouts never took the " << path_name(p) << " path";
}

// More dims than the iterator holds inline (StridedIter::kInlineDims): its dim lists
// move to the heap part-way through the set-up. Operands are permuted views (no two
// dims coalesce) with a stepped slice and a stride-0 dim; every element's storage
// position is computed here by an N-D odometer over the views' own strides.
TEST(Iterator, MoreDimsThanHeldInlineVisitEveryElementOnce) {
  std::mt19937_64 rng(23);
  int held_on_heap = 0;  // trials whose iteration dims (after coalescing) overflowed too
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    for (int trial = 0; trial < 12; ++trial) {
      const int nd = StridedIter::kInlineDims + 2 + static_cast<int>(rng() % 4);
      Shape sz(nd);
      for (int64_t& s : sz) s = 2 + static_cast<int64_t>(rng() % 2);
      auto permuted = [&](bool sliced) {  // an Int64 view of sizes sz whose storage holds 0, 1, 2, ...
        Shape perm(nd);
        std::iota(perm.begin(), perm.end(), 0);
        std::shuffle(perm.begin(), perm.end(), rng);
        Shape base_sz(nd), inv(nd);
        for (int d = 0; d < nd; ++d) base_sz[d] = sz[perm[d]] * (sliced && d == nd - 1 ? 2 : 1);
        for (int d = 0; d < nd; ++d) inv[perm[d]] = d;
        Tensor base = arange(checked_numel(base_sz, "test"), DType::Int64).view(base_sz);
        if (sliced) base = base.slice(nd - 1, 1, std::nullopt, 2);
        return base.permute(inv);
      };
      Tensor a = permuted(true);
      Shape bsz = sz;
      bsz[rng() % nd] = 1;
      Tensor b = arange(checked_numel(bsz, "test"), DType::Int64).view(bsz).expand(sz);
      Tensor out = permuted(false);
      test::poison(out);
      const StridedIter it = (trial % 2) ? StridedIter::of({&out, &a, &b}) : StridedIter::from_tensors({out, a, b});
      held_on_heap += it.ndim() > StridedIter::kInlineDims;
      it.for_each(
          [](char* const* p, const int64_t* s, int64_t len) {
            for (int64_t j = 0; j < len; ++j)
              *reinterpret_cast<int64_t*>(p[0] + j * s[0]) =
                  *reinterpret_cast<const int64_t*>(p[1] + j * s[1]) +
                  1000000 * *reinterpret_cast<const int64_t*>(p[2] + j * s[2]);
          },
          trial % 3 ? kGrainSize : 1);
      // reference: walk every index; each operand's storage holds its own position
      const auto* o = static_cast<const int64_t*>(out.data_ptr());
      Shape idx(nd, 0);
      for (int64_t i = 0, n = out.numel(); i < n; ++i) {
        int64_t po = 0, pa = a.storage_offset(), pb = 0;
        for (int d = 0; d < nd; ++d) {
          po += idx[d] * out.stride(d);
          pa += idx[d] * a.stride(d);
          pb += idx[d] * b.stride(d);
        }
        ASSERT_EQ(o[po], pa + 1000000 * pb) << "trial " << trial << " threads " << threads << " element " << i;
        for (int d = nd - 1; d >= 0 && ++idx[d] == sz[d]; --d) idx[d] = 0;
      }
    }
  }
  set_num_threads(2);
  EXPECT_GE(held_on_heap, 12) << "most trials should keep more than kInlineDims dims after coalescing";
}

TEST(Iterator, TiledPathSplitsAcrossThreadsExactlyOnce) {
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    Tensor o = zeros({300, 517}, DType::Int64);
    Tensor a = arange(300 * 517, DType::Int64).view({517, 300}).t();
    StridedIter it = StridedIter::from_tensors({o, a});
    ASSERT_EQ(it.path(), Path::Tiled);
    it.for_each(
        [](char* const* p, const int64_t* s, int64_t len) {
          for (int64_t j = 0; j < len; ++j)
            *reinterpret_cast<int64_t*>(p[0] + j * s[0]) += 1 + *reinterpret_cast<const int64_t*>(p[1] + j * s[1]);
        },
        1);
    std::vector<double> ref = a.to_vector();
    for (double& x : ref) x += 1;
    ASSERT_TRUE(test::all_close(o, ref, 0, 0)) << threads << " threads";
  }
  set_num_threads(2);
}


// A [n1, n0] tensor of distinct values (exact in every dtype up to 2048) viewed as its
// transpose [n0, n1], starting `offset` elements into its storage and taking every
// `step`-th element along its fast dim.
Tensor transposed_source(int64_t n0, int64_t n1, DType dt, int64_t offset, int64_t step) {
  cases::Placement p = cases::dense({n1, n0});
  p.step[1] = step;
  p.pad[1] = step - 1;  // rows n0 * step apart
  p.offset = offset;
  const cases::Placed placed = cases::place({n1, n0}, p, dt);
  test::poison(placed.buffer);
  std::vector<double> v(static_cast<size_t>(n0 * n1));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(i % 2039) - 1000;
  Tensor a = placed.view;
  a.copy_(from_vector(v, {n1, n0}).to(dt));
  return a.t();
}

// Staging (the AVX2 8x8 / 4x4 transposes and the scalar copies): ragged sizes around
// the 8x8 micro-tiles and the tile edges, misaligned starts, a stepped source (scalar
// staging), every element size, both SIMD levels, 1 and 2 threads, tiles split to one
// per task (grain 1) or not. The kernel copies operand 1's bytes into operand 0, so
// any misplaced element shows.
TEST(Iterator, TiledStagingEverySizeDtypeSimdThreads) {
  const std::vector<std::pair<int64_t, int64_t>> shapes = {{8, 8}, {9, 13}, {31, 67}, {261, 41}, {300, 517}, {1031, 17}};
  for (int64_t nt : {int64_t{-1}, int64_t{0}})  // 0: every tile prefetches the next (Note [Tile prefetch])
  for (SimdLevel simd : {SimdLevel::AVX2, SimdLevel::Scalar}) {
    if (simd > compiled_simd_level()) continue;
    set_simd_level(simd);
    set_nt_threshold_bytes(nt);
    for (int threads : {1, 2}) {
      set_num_threads(threads);
      for (DType dt : {DType::Float32, DType::Float64, DType::Float16, DType::Int32, DType::Int64}) {
        const int64_t es = static_cast<int64_t>(dtype_size(dt));
        for (auto [n0, n1] : shapes) {
          for (int variant = 0; variant < 4; ++variant) {
            const int64_t offset = variant % 2, step = variant >= 2 ? 2 : 1;
            const std::string what = "nt threshold " + std::to_string(nt) + ", " + simd_level_name(simd) + ", " + std::to_string(threads) +
                                     " threads, " + dtype_name(dt) + ", " + std::to_string(n0) + "x" +
                                     std::to_string(n1) + ", variant " + std::to_string(variant);
            Tensor a = transposed_source(n0, n1, dt, offset, step);
            Tensor obuf = empty({n0 * n1 + 1}, dt);
            Tensor out = obuf.as_strided({n0, n1}, {n1, 1}, offset);  // misaligned when offset = 1
            test::poison(obuf);
            StridedIter it = StridedIter::from_tensors({out, a});
            ASSERT_EQ(it.path(), Path::Tiled) << what;
            ASSERT_TRUE(it.staged(1)) << what;
            it.for_each(
                [es](char* const* p, const int64_t* s, int64_t len) {
                  for (int64_t j = 0; j < len; ++j) std::memcpy(p[0] + j * s[0], p[1] + j * s[1], es);
                },
                (variant + n0) % 3 ? 1 : kGrainSize);
            ASSERT_TRUE(test::all_close(out, a.to_vector(), 0, 0)) << what;
            if (offset) {  // the element before the output is untouched
              const std::vector<double> head = obuf.narrow(0, 0, 1).to_vector();
              ASSERT_TRUE(head[0] != head[0] || dt == DType::Int32 || dt == DType::Int64) << what;
            }
          }
        }
      }
    }
  }
  set_simd_level(compiled_simd_level());
  set_nt_threshold_bytes(-1);
  set_num_threads(2);
}

// Note [Tile prefetch]: the prefetching walk (operands beyond the streaming threshold,
// forced here with threshold 0) stages in steps of kStageRows source rows and prefetches
// the next tile of the staged and of the dense inputs; it must still pair every output
// element with its inputs exactly once: a transposed (staged) input, a dense one and an
// expanded one, ragged tiles, whole 128 x 128 planes (tile1 128), 1 and 2 threads.
// With the dense input replaced by a second transposed one, every streaming input is
// staged and the walk stages the tuning's stage_chunk_strips strips at a time (Note
// [Chunked staging]): 8 and 16, the designs' values, and 5, which leaves ragged chunks.
TEST(Iterator, PrefetchingTiledWalkPairsEveryElementOnce) {
  test::TuningScope tuning_scope;
  for (int64_t chunk : {int64_t{8}, int64_t{16}, int64_t{5}}) {
  tuning_scope.tuning().stage_chunk_strips = chunk;
  tuning_scope.set();
  for (bool all_staged : {false, true})
  for (int64_t nt : {int64_t{-1}, int64_t{0}})
    for (int threads : {1, 2}) {
      set_num_threads(threads);
      set_nt_threshold_bytes(nt);
      for (const Shape& sz : {Shape{3, 128, 128}, Shape{2, 37, 301}, Shape{5, 260, 19}, Shape{1, 9, 1030}}) {
        const int64_t n = checked_numel(sz, "test");
        Tensor o = zeros(sz, DType::Int64);
        Tensor a = arange(n, DType::Int64).view({sz[0], sz[2], sz[1]}).transpose(1, 2);  // staged
        Tensor b = all_staged ? arange(n, DType::Int64).view({sz[2], sz[0], sz[1]}).permute({1, 2, 0})  // staged
                              : arange(n, DType::Int64).view(sz);                                      // dense
        Tensor c = arange(sz[2], DType::Int64).view({1, 1, sz[2]}).expand(sz);           // stride 0
        StridedIter it = StridedIter::from_tensors({o, a, b, c});
        const std::string what = "chunk " + std::to_string(chunk) + ", " + std::string(all_staged ? "two staged, " : "") + "nt " + std::to_string(nt) + ", " + std::to_string(threads) + " threads, " +
                                 std::to_string(sz[0]) + "x" + std::to_string(sz[1]) + "x" + std::to_string(sz[2]);
        ASSERT_EQ(it.path(), Path::Tiled) << what;
        ASSERT_TRUE(it.staged(1)) << what;
        ASSERT_EQ(it.staged(2), all_staged) << what;
        it.for_each(
            [](char* const* p, const int64_t* s, int64_t len) {
              for (int64_t j = 0; j < len; ++j)
                *reinterpret_cast<int64_t*>(p[0] + j * s[0]) +=
                    1 + *reinterpret_cast<const int64_t*>(p[1] + j * s[1]) * 1000000 +
                    *reinterpret_cast<const int64_t*>(p[2] + j * s[2]) * 1000 +
                    *reinterpret_cast<const int64_t*>(p[3] + j * s[3]);
            },
            sz[1] % 2 ? 1 : kGrainSize);
        const std::vector<double> av = a.to_vector(), bv = b.to_vector(), cv = c.to_vector();
        std::vector<double> ref(av.size());
        for (size_t i = 0; i < ref.size(); ++i) ref[i] = 1 + av[i] * 1000000 + bv[i] * 1000 + cv[i];
        ASSERT_TRUE(test::all_close(o, ref, 0, 0)) << what;
      }
    }
  }
  set_nt_threshold_bytes(-1);
  set_num_threads(2);
}

// The staging tests' operands and kernel, for any element size: pattern values below
// `mod`, o = ka a + kb b + c over (o, a, b, c) element by element, checked exactly
// against the same sum in double (int8: a, b < 16 and ka = 4, kb = 2 keep it < 128;
// wider: 10000 and 10 keep it < 2^31).
Tensor pattern_values(int64_t count, int64_t mod, DType dt) {
  std::vector<double> v(static_cast<size_t>(count));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>((i * 7 + i / 13) % static_cast<size_t>(mod));
  return from_vector(v).to(dt);
}

void run_weighted_sum(const StridedIter& it, const Tensor& o, const Tensor& a, const Tensor& b, const Tensor& c,
                      int64_t grain, bool fence, const std::string& what) {
  const int64_t es = static_cast<int64_t>(o.element_size());
  const int64_t ka = es == 1 ? 4 : 10000, kb = es == 1 ? 2 : 10;
  it.for_each(
      [es, ka, kb](char* const* p, const int64_t* s, int64_t len) {
        for (int64_t j = 0; j < len; ++j) {
          int64_t v[3] = {0, 0, 0};
          for (int k = 0; k < 3; ++k) std::memcpy(&v[k], p[k + 1] + j * s[k + 1], static_cast<size_t>(es));
          const int64_t r = v[0] * ka + v[1] * kb + v[2];  // non-negative: no sign extension needed
          std::memcpy(p[0] + j * s[0], &r, static_cast<size_t>(es));
        }
      },
      grain, fence);
  const std::vector<double> av = a.to_vector(), bv = b.to_vector(), cv = c.to_vector();
  std::vector<double> ref(av.size());
  for (size_t i = 0; i < ref.size(); ++i) ref[i] = av[i] * ka + bv[i] * kb + cv[i];
  ASSERT_TRUE(test::all_close(o, ref, 0, 0)) << what;
}

// Note [Grouped staging]: whole planes per tile beyond the streaming threshold (forced
// with threshold 0), a transposed (staged) input beside a dense one: the walk stages
// group() planes, then hands the kernel the group in pieces while touching the next
// group's source. Groups must stop at the end of dim 2 where dim 3 does not follow on
// (a stepped outer dim), at the end of each thread's range (grain 1 splits the planes
// anywhere) and at ragged group counts; planes of 128 x 128 (8x8 and 16-strip staging
// steps), 37 x 19 and 9 x 100 (ragged), every staging element size (int64 through the
// AVX2 4x4 path, int32 through the 8x8 one, int8 scalar), a stride-0 scalar operand.
// The staged source's rows lie end to end (its next group read as one range) or 3
// elements apart (read row by row, line by line).
TEST(Iterator, GroupedStagingPairsEveryElementOnce) {
  set_nt_threshold_bytes(0);
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    for (DType dt : {DType::Int64, DType::Int32, DType::Int8})
      for (const Shape& sz : {Shape{3, 5, 128, 128}, Shape{2, 11, 37, 19}, Shape{1, 7, 9, 100}})
        for (int64_t grain : {int64_t{1}, kGrainSize})
          for (int64_t gap : {0, 3}) {
            const int64_t n = checked_numel(sz, "test");
            const std::string what = std::string(dtype_name(dt)) + ", " + std::to_string(threads) + " threads, grain " +
                                     std::to_string(grain) + ", " + std::to_string(sz[0]) + "x" + std::to_string(sz[1]) +
                                     "x" + std::to_string(sz[2]) + "x" + std::to_string(sz[3]) + ", rows " +
                                     std::to_string(gap) + " apart";
            const int64_t es = static_cast<int64_t>(dtype_size(dt));
            const auto vals = [&](int64_t count, int64_t mod) { return pattern_values(count, mod, dt); };
            Tensor o = empty(sz, dt);
            test::poison(o);
            // staged: the last two dims transposed, dim 0 stepped (dims 2 and 3 of the walk
            // do not coalesce), the source rows gap elements apart
            const int64_t m = 2 * sz[0] * sz[1] * sz[3] * (sz[2] + gap);
            Tensor a = vals(m, es == 1 ? 16 : 9973)
                           .view({2 * sz[0], sz[1], sz[3], sz[2] + gap})
                           .narrow(3, 0, sz[2])
                           .slice(0, 0, 2 * sz[0], 2)
                           .transpose(2, 3);
            Tensor b = vals(n, es == 1 ? 16 : 997).view(sz);  // dense
            Tensor c = from_vector(std::vector<double>{5}).to(dt).view({1, 1, 1, 1}).expand(sz);  // stride 0 everywhere
            StridedIter it = StridedIter::from_tensors({o, a, b, c});
            ASSERT_EQ(it.path(), Path::Tiled) << what;
            ASSERT_TRUE(it.staged(1)) << what;
            ASSERT_GT(it.group(), 1) << what;
            run_weighted_sum(it, o, a, b, c, grain, /*fence=*/false, what);
          }
  }
  set_nt_threshold_bytes(-1);
  set_num_threads(2);
}

// Note [Staged source read ahead]: beyond the streaming threshold (forced with 0), an
// NHWC input whose tiles span its channels beside dense NCHW ones reads the next tile's
// staged source during each tile where the output streams (for_each's fence), and takes
// Note [Tile prefetch] where it does not. Either way every output element pairs with its
// inputs once: ragged last tiles (300 pixels: 256 + 44 4-byte elements, 2 x 128 + 44
// 8-byte ones; int8 tiles of 1024 take whole planes, so Note [Grouped staging]), tiles
// running from one image into the next, grain 1 (each thread's range ends anywhere), a
// stride-0 operand; 65 channels of 1-, 2- or 4-byte elements are more than a tile's 64
// rows (no read-ahead).
TEST(Iterator, StagedSourceReadAheadPairsEveryElementOnce) {
  set_nt_threshold_bytes(0);
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    for (DType dt : {DType::Int64, DType::Int32, DType::Int8})
      for (const Shape& sz : {Shape{3, 64, 15, 20}, Shape{2, 8, 10, 30}, Shape{2, 65, 10, 30}})
        for (int64_t grain : {int64_t{1}, kGrainSize})
          for (bool fence : {true, false}) {
            const int64_t n = checked_numel(sz, "test");
            const std::string what = std::string(dtype_name(dt)) + ", " + std::to_string(threads) + " threads, grain " +
                                     std::to_string(grain) + ", fence " + std::to_string(fence) + ", " +
                                     test::shape_str(sz);
            const int64_t es = static_cast<int64_t>(dtype_size(dt));
            const auto vals = [&](int64_t count, int64_t mod) { return pattern_values(count, mod, dt); };
            Tensor o = empty(sz, dt);
            test::poison(o);
            Tensor a = vals(n, es == 1 ? 16 : 9973).view(sz).contiguous(MemoryFormat::ChannelsLast);  // staged
            Tensor b = vals(n, es == 1 ? 16 : 997).view(sz);  // dense
            Tensor c = from_vector(std::vector<double>{5}).to(dt).view({1, 1, 1, 1}).expand(sz);
            StridedIter it = StridedIter::from_tensors({o, a, b, c});
            ASSERT_EQ(it.path(), Path::Tiled) << what;
            ASSERT_TRUE(it.staged(1)) << what;
            // int8 tiles of 64 channels are whole planes (1024 bytes of pixels): Note [Grouped staging]
            const bool planes = es == 1 && sz[1] <= 64;
            EXPECT_EQ(it.group() > 1, planes) << what;
            EXPECT_EQ(it.reads_ahead(), !planes && sz[1] <= (es == 8 ? 128 : 64)) << what;
            run_weighted_sum(it, o, a, b, c, grain, fence, what);
          }
  }
  set_nt_threshold_bytes(-1);
  set_num_threads(2);
}

// The group size comes from the tuning (Note [Tuning by microarchitecture]): bytes of
// staged planes per group, at least group_min planes and at most 16.
TEST(Iterator, GroupedStagingSizeFollowsTheTuning) {
  set_nt_threshold_bytes(0);
  struct Restore {
    ~Restore() {
      set_cpu_tuning(nullptr);
      set_nt_threshold_bytes(-1);
    }
  } restore;
  const Shape sz{2, 20, 64, 64};  // staged int32 planes of 16 KiB
  Tensor o = empty(sz, DType::Int32), b = zeros(sz, DType::Int32);
  Tensor a = zeros({2, 20, 64, 64}, DType::Int32).transpose(2, 3);
  struct Case {
    int64_t bytes;
    int min, want;
  };
  for (const Case& c : {Case{512 << 10, 1, 16}, Case{128 << 10, 2, 8}, Case{4096, 2, 2}, Case{4096, 1, 1},
                        Case{48 << 10, 1, 3}, Case{int64_t{1} << 30, 1, 16}}) {
    CpuTuning t = cpu_tuning();
    t.group_bytes = c.bytes;
    t.group_min = c.min;
    set_cpu_tuning(&t);
    StridedIter it = StridedIter::from_tensors({o, a, b});
    ASSERT_EQ(it.path(), Path::Tiled);
    EXPECT_EQ(it.group(), c.want) << describe_tuning(t);
    set_cpu_tuning(nullptr);
  }
}

}  // namespace
}  // namespace sb
