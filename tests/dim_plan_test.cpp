// dim_plan_test.cpp — the one dimension planner (lib/core/dim_plan.*): its order and
// merges on known layouts (permutations, ties, size-0 and size-1 dims, broadcast,
// channels-last), and, on random layouts, that the plan's walk visits exactly the
// operands' original (offset, ..., offset) tuples, each once, the output's in memory
// order whenever the output is dense.
#include "core/dim_plan.h"
#include "core/small_vec.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <random>
#include <vector>

#include "test_util.h"

namespace sb {
namespace {

using Tuple = std::vector<int64_t>;

// Every index of `sizes`, row-major, as one tuple of per-operand offsets (elements).
std::vector<Tuple> reference_walk(const Shape& sizes, const std::vector<Shape>& strides) {
  std::vector<Tuple> out;
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  Shape idx(sizes.size(), 0);
  for (int64_t f = 0; f < n; ++f) {
    int64_t r = f;
    for (int64_t d = static_cast<int64_t>(sizes.size()) - 1; d >= 0; --d) {
      idx[d] = r % sizes[d];
      r /= sizes[d];
    }
    Tuple t(strides.size(), 0);
    for (size_t i = 0; i < strides.size(); ++i)
      for (size_t d = 0; d < sizes.size(); ++d) t[i] += idx[d] * strides[i][d];
    out.push_back(t);
  }
  return out;
}

// The plan's walk: dim 0 fastest.
std::vector<Tuple> plan_walk(const DimPlan& p) {
  std::vector<Tuple> out;
  const int64_t n = p.numel();
  Shape idx(p.ndim(), 0);
  for (int64_t f = 0; f < n; ++f) {
    int64_t r = f;
    for (int d = 0; d < p.ndim(); ++d) {
      idx[d] = r % p.sizes[d];
      r /= p.sizes[d];
    }
    Tuple t(p.nops, 0);
    for (int i = 0; i < p.nops; ++i)
      for (int d = 0; d < p.ndim(); ++d) t[i] += idx[d] * p.strides[d][i];
    out.push_back(t);
  }
  return out;
}

DimPlan plan_of(const Shape& sizes, const std::vector<Shape>& strides) {
  std::vector<const int64_t*> st;
  for (const Shape& s : strides) st.push_back(s.data());
  return plan_dims(sizes.data(), static_cast<int64_t>(sizes.size()), st.data(), static_cast<int>(st.size()));
}

Shape plan_sizes(const DimPlan& p) { return Shape(p.sizes.begin(), p.sizes.end()); }
Shape plan_strides(const DimPlan& p, int op) {
  Shape s;
  for (int d = 0; d < p.ndim(); ++d) s.push_back(p.strides[d][op]);
  return s;
}

// SmallVec (core/small_vec.h), the plan's dim lists, against std::vector over random
// operations on a vector of 4 inline slots: across the inline/heap boundary both ways,
// and copies and moves (constructed and assigned) from either mode, the source of a move
// left empty and usable.
TEST(SmallVec, MatchesStdVectorAcrossTheInlineLimit) {
  std::mt19937_64 rng(23);
  using V = SmallVec<int64_t, 4>;
  auto same = [](const V& v, const std::vector<int64_t>& r) {
    return v.size() == r.size() && v.empty() == r.empty() && std::equal(v.begin(), v.end(), r.begin());
  };
  V v;
  std::vector<int64_t> ref;
  int heap_moves = 0, inline_moves = 0;
  for (int step = 0; step < 20000; ++step) {
    const int op = static_cast<int>(rng() % 9);
    const int64_t x = static_cast<int64_t>(rng() % 1000);
    const size_t n = static_cast<size_t>(rng() % 9);  // 0 .. 8: either side of 4
    switch (op) {
      case 0: case 1: v.push_back(x); ref.push_back(x); break;
      case 2: v.resize(n, x); ref.resize(n, x); break;
      case 3: v.assign(n, x); ref.assign(n, x); break;
      case 4:
        v.resize_for_overwrite(n);
        ref.resize(n);
        for (size_t i = 0; i < n; ++i) v[i] = ref[i] = x + static_cast<int64_t>(i);
        break;
      case 5: { V c(v); ASSERT_TRUE(same(c, ref)) << "copy-constructed at step " << step; v = c; break; }
      case 6: {
        (v.size() > 4 ? heap_moves : inline_moves) += 1;
        V m(std::move(v));
        ASSERT_TRUE(same(m, ref)) << "move-constructed at step " << step;
        ASSERT_TRUE(v.empty()) << "moved-from at step " << step;  // NOLINT(bugprone-use-after-move)
        v.push_back(7);  // the moved-from vector is usable
        ASSERT_EQ(v.size(), 1u);
        v = std::move(m);
        ASSERT_TRUE(m.empty()) << "move-assigned from at step " << step;  // NOLINT(bugprone-use-after-move)
        break;
      }
      case 7: { V c; c.push_back(-1); c = v; ASSERT_TRUE(same(c, ref)) << "copy-assigned at step " << step; break; }
      case 8: if (!ref.empty()) { ASSERT_EQ(v.back(), ref.back()) << "back at step " << step; v.back() = x; ref.back() = x; } break;
    }
    ASSERT_TRUE(same(v, ref)) << "after op " << op << " at step " << step;
  }
  EXPECT_GT(heap_moves, 100);
  EXPECT_GT(inline_moves, 100);
  const V one(6, 9);  // the sized constructor, past the inline slots
  EXPECT_TRUE(same(one, std::vector<int64_t>(6, 9)));
}

TEST(DimPlan, DenseTensorOfAnyRankBecomesOneDim) {
  for (const Shape& sizes : {Shape{7}, Shape{3, 4}, Shape{2, 3, 4, 5}, Shape{2, 1, 3, 1, 4}}) {
    const Shape st = contiguous_strides(sizes);
    const DimPlan p = plan_dims(sizes, {&st, &st});
    int64_t n = 1;
    for (int64_t v : sizes) n *= v;
    EXPECT_EQ(plan_sizes(p), Shape({n})) << detail::str_cat(sizes);
    EXPECT_EQ(plan_strides(p, 0), Shape({1})) << detail::str_cat(sizes);
    EXPECT_EQ(plan_strides(p, 1), Shape({1})) << detail::str_cat(sizes);
  }
}

TEST(DimPlan, EveryPermutationOfADenseOutputIsWalkedInMemoryOrder) {
  const Shape base{2, 3, 4, 5};
  std::vector<int64_t> perm{0, 1, 2, 3};
  do {
    Shape sizes(4), st(4);
    for (int d = 0; d < 4; ++d) sizes[d] = base[perm[d]];
    // a dense tensor whose logical dims are a permutation of its memory order
    const Shape dense = contiguous_strides(base);
    for (int d = 0; d < 4; ++d) st[d] = dense[perm[d]];
    const DimPlan p = plan_dims(sizes, {&st});
    EXPECT_EQ(plan_sizes(p), Shape({120})) << "perm " << detail::str_cat(perm);
    EXPECT_EQ(plan_strides(p, 0), Shape({1}));
  } while (std::next_permutation(perm.begin(), perm.end()));
}

TEST(DimPlan, ChannelsLastAgainstContiguousGivesThreeDims) {
  const Shape sizes{2, 8, 5, 6};  // NCHW -> NHWC
  const Shape out = channels_last_strides(sizes), in = contiguous_strides(sizes);
  const DimPlan p = plan_dims(sizes, {&out, &in});
  // fastest first by the output: C, then H*W merged, then N
  EXPECT_EQ(plan_sizes(p), Shape({8, 30, 2}));
  EXPECT_EQ(plan_strides(p, 0), Shape({1, 8, 240}));
  EXPECT_EQ(plan_strides(p, 1), Shape({30, 1, 240}));
}

TEST(DimPlan, TheOutputDecidesTheOrderAndTheInputsBreakItsTies) {
  const Shape sizes{4, 5};
  const Shape row{5, 1}, col{1, 4}, zero{0, 0};
  EXPECT_EQ(plan_sizes(plan_dims(sizes, {&col, &row})), Shape({4, 5}));  // column-major out: dim 0 inside
  EXPECT_EQ(plan_sizes(plan_dims(sizes, {&row, &col})), Shape({5, 4}));
  // a broadcast (all-zero) output never decides: the input does (columns 8 apart: no merge)
  const Shape col8{1, 8};
  EXPECT_EQ(plan_sizes(plan_dims(sizes, {&zero, &col8})), Shape({4, 5}));
  EXPECT_EQ(plan_strides(plan_dims(sizes, {&zero, &col8}), 1), Shape({1, 8}));
}

TEST(DimPlan, ABroadcastDimIsOrderedByTheOperandsThatMoveAlongIt) {
  // x[4, 1].expand(4, 5) + y[4, 5] into a row-major out: the expanded input defers
  const Shape sizes{4, 5}, out{5, 1}, x{1, 0}, y{5, 1};
  const DimPlan p = plan_dims(sizes, {&out, &x, &y});
  EXPECT_EQ(plan_sizes(p), Shape({5, 4}));
  EXPECT_EQ(plan_strides(p, 1), Shape({0, 1}));
  // a stride-0 dim merges with its neighbour when every operand continues
  const Shape zz{0, 0}, yy{1, 0};
  const DimPlan q = plan_dims(Shape{3, 4}, {&yy, &zz});  // out stride 0 along dim 1 too
  EXPECT_EQ(plan_sizes(q), Shape({4, 3}));  // logical order: no operand orders the dims
}

TEST(DimPlan, EqualStridesPutTheSmallerSizeInside) {
  // an overlapping view with equal strides along two dims (as as_strided can make)
  const Shape sizes{5, 3}, st{1, 1};
  const DimPlan p = plan_dims(sizes, {&st});
  EXPECT_EQ(plan_sizes(p), Shape({3, 5}));
}

TEST(DimPlan, NoOperandDecidesKeepsTheLogicalOrder) {
  const Shape sizes{3, 4, 5}, z{0, 0, 0};
  const DimPlan p = plan_dims(sizes, {&z});
  EXPECT_EQ(plan_sizes(p), Shape({60}));  // all stride 0: one merged dim
  const Shape a{0, 7, 0}, b{0, 0, 9};
  const DimPlan q = plan_dims(sizes, {&a, &b});  // no pair has two non-zero strides
  EXPECT_EQ(plan_sizes(q), Shape({5, 4, 3}));
}

TEST(DimPlan, SizeOneDimsDropAndSizeZeroDimsStay) {
  const Shape sizes{1, 3, 1, 0, 2}, st{99, 2, 77, 6, 1};
  const DimPlan p = plan_dims(sizes, {&st});
  EXPECT_EQ(p.numel(), 0);
  EXPECT_EQ(std::count(p.sizes.begin(), p.sizes.end(), 0), 1);
  for (int d = 0; d < p.ndim(); ++d) EXPECT_NE(p.strides[d][0], 99);
  const Shape ones{1, 1, 1}, any{5, 6, 7};
  const DimPlan one = plan_dims(ones, {&any});
  EXPECT_EQ(one.ndim(), 0);
  EXPECT_EQ(one.numel(), 1);
  const Shape none{};
  EXPECT_EQ(plan_dims(none, {&none}).ndim(), 0);  // a 0-D tensor
}

TEST(DimPlan, SteppedDimsDoNotMerge) {
  // x[:, :6] of a 4 x 8 tensor beside a dense one: rows do not continue
  const Shape sizes{4, 6}, narrowed{8, 1}, dense{6, 1};
  const DimPlan p = plan_dims(sizes, {&narrowed, &dense});
  EXPECT_EQ(plan_sizes(p), Shape({6, 4}));
  EXPECT_EQ(plan_strides(p, 0), Shape({1, 8}));
  // x[:, ::2] of a 4 x 12 tensor: each row ends where the next begins, so one dim
  const Shape stepped{12, 2}, dense2{6, 1};
  const DimPlan q = plan_dims(sizes, {&stepped, &dense2});
  EXPECT_EQ(plan_sizes(q), Shape({24}));
  EXPECT_EQ(plan_strides(q, 0), Shape({2}));
  EXPECT_EQ(plan_strides(q, 1), Shape({1}));
}

TEST(DimPlan, ManyDimsBeyondTheInlineCapacity) {
  Shape sizes(12, 2);
  const Shape st = contiguous_strides(sizes);
  Shape tr = st;
  std::swap(tr[0], tr[11]);  // the first and last dims swapped
  const DimPlan p = plan_dims(sizes, {&tr, &st});
  EXPECT_EQ(reference_walk(sizes, {tr, st}).size(), plan_walk(p).size());
}

TEST(DimPlan, RandomLayoutsWalkTheSameTuplesAndADenseOutputInOrder) {
  std::mt19937_64 rng(12345);
  for (int c = 0; c < 3000; ++c) {
    const int nd = static_cast<int>(rng() % 6);
    const int nops = 1 + static_cast<int>(rng() % 4);
    Shape sizes(nd);
    for (int64_t& s : sizes) s = static_cast<int64_t>(rng() % 5);  // 0..4: size 0 and 1 both occur
    if (rng() % 4 != 0)
      for (int64_t& s : sizes) s = std::max<int64_t>(s, 1);
    std::vector<Shape> st(nops);
    // operand 0: a dense permutation (an output); the others: random views
    {
      std::vector<int64_t> perm(nd);
      std::iota(perm.begin(), perm.end(), 0);
      std::shuffle(perm.begin(), perm.end(), rng);
      st[0].assign(nd, 0);
      int64_t z = 1;
      for (int k = nd - 1; k >= 0; --k) {
        st[0][perm[k]] = z;
        z *= std::max<int64_t>(sizes[perm[k]], 1);
      }
    }
    for (int i = 1; i < nops; ++i) {
      st[i].assign(nd, 0);
      for (int d = 0; d < nd; ++d) {
        const int kind = static_cast<int>(rng() % 4);
        st[i][d] = kind == 0 ? 0 : static_cast<int64_t>(1 + rng() % 40);
      }
      if (rng() % 3 == 0) st[i] = st[0];  // sometimes a twin of the output
    }
    const DimPlan p = plan_of(sizes, st);
    std::vector<Tuple> want = reference_walk(sizes, st), got = plan_walk(p);
    // the output's walk is increasing: a dense output is written in memory order
    for (size_t k = 1; k < got.size(); ++k) ASSERT_LT(got[k - 1][0], got[k][0]) << "case " << c << " sizes " << detail::str_cat(sizes);
    std::sort(want.begin(), want.end());
    std::sort(got.begin(), got.end());
    ASSERT_EQ(want, got) << "case " << c << " sizes " << detail::str_cat(sizes);
    for (int d = 0; d < p.ndim(); ++d) ASSERT_NE(p.sizes[d], 1) << "case " << c;
  }
}

TEST(DimPlan, BroadcastStridesAreZeroForNewAndSizeOneDims) {
  Tensor t = empty({3, 1, 4});
  EXPECT_EQ(broadcast_strides(t, {2, 3, 5, 4}), Shape({0, 4, 0, 1}));
  Tensor tt = empty({4, 3}).t();
  EXPECT_EQ(broadcast_strides(tt, {3, 4}), Shape({1, 3}));
}

TEST(DimPlan, OutputStridesFollowTheFirstInputThatOrdersADimPair) {
  const Shape sizes{2, 3, 4, 5};
  const Shape cl = channels_last_strides(sizes), ex{0, 0, 0, 0};
  EXPECT_EQ(output_strides_like(sizes, {&ex, &cl}), cl);
  const Shape at{1, 4}, b{5, 1};
  EXPECT_EQ(output_strides_like({4, 5}, {&at, &b}), Shape({1, 4}));
  EXPECT_EQ(output_strides_like({4, 5}, {&b, &at}), Shape({5, 1}));
}

}  // namespace
}  // namespace sb
