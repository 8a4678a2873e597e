// tensor_test.cpp — Tensor metadata, views, layouts and factories (lib/core/tensor.*):
// CLAIMS.md V1–V3, channels-last strides including the ambiguous cases (decided as
// PyTorch decides), reshape's view-or-copy rule, dtype/device basics.
#include "stridebench/tensor.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <optional>
#include <random>

#include "test_util.h"

namespace sb {
namespace {

TEST(DType, SizesAndNames) {
  EXPECT_EQ(dtype_size(DType::Float32), 4u);
  EXPECT_EQ(dtype_size(DType::Float64), 8u);
  EXPECT_EQ(dtype_size(DType::Float16), 2u);
  EXPECT_EQ(dtype_size(DType::Int8), 1u);
  EXPECT_EQ(dtype_size(DType::Int32), 4u);
  EXPECT_EQ(dtype_size(DType::Int64), 8u);
  EXPECT_EQ(dtype_size(DType::BFloat16), 2u);
  EXPECT_STREQ(dtype_name(DType::Float16), "float16");
  EXPECT_STREQ(dtype_name(DType::BFloat16), "bfloat16");
  EXPECT_TRUE(is_floating(DType::BFloat16));
  EXPECT_EQ(Device::cpu().str(), "cpu");
  EXPECT_EQ(Device::cuda(1).str(), "cuda:1");
}

TEST(Tensor, FactoriesFillEveryElement) {
  for (DType dt : {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16, DType::Int8, DType::Int32,
                   DType::Int64}) {
    Tensor z = zeros({3, 5}, dt), o = ones({3, 5}, dt), f = full({3, 5}, 7, dt);
    EXPECT_TRUE(test::all_close(z, std::vector<double>(15, 0.0), 0, 0)) << dtype_name(dt);
    EXPECT_TRUE(test::all_close(o, std::vector<double>(15, 1.0), 0, 0)) << dtype_name(dt);
    EXPECT_TRUE(test::all_close(f, std::vector<double>(15, 7.0), 0, 0)) << dtype_name(dt);
    EXPECT_EQ(z.dtype(), dt);
  }
  Tensor a = arange(6);
  EXPECT_TRUE(test::all_close(a, {0, 1, 2, 3, 4, 5}, 0, 0));
  EXPECT_TRUE(test::all_close(arange(1.0, 2.0, 0.25, DType::Float64), {1, 1.25, 1.5, 1.75}, 0, 0));
}

// Note [bfloat16 NaN and subnormals]: BFloat16::from_float against round_to_bf16 (a
// value-arithmetic reference) on every float32 of a coarse sweep of the bit patterns
// and on the cases at the edges: ties both ways, carries into the exponent, overflow
// to infinity, subnormals, signed zeros, infinities and NaN payloads.
TEST(BFloat16, RoundsToNearestEven) {
  auto check = [](uint32_t x) {
    float f;
    std::memcpy(&f, &x, 4);
    const uint16_t got = BFloat16::from_float(f);
    if (std::isnan(f)) {  // a quiet NaN of the input's sign and upper payload (vcvtneps2bf16's bits)
      EXPECT_EQ(got, static_cast<uint16_t>((x >> 16) | 0x40u)) << std::hex << x;
      return;
    }
    const double want = test::round_to_bf16(f);
    const double back = BFloat16::to_float(got);
    EXPECT_TRUE(back == want && std::signbit(back) == std::signbit(f))
        << std::hex << "0x" << x << ": got 0x" << got << " (" << back << "), want " << want;
  };
  for (uint64_t x = 0; x <= 0xffffffffull; x += 65521) check(static_cast<uint32_t>(x));  // a prime step
  for (uint32_t hi : {0x0000u, 0x0001u, 0x007fu, 0x0080u, 0x3f80u, 0x3f81u, 0x7f7fu, 0x7f80u, 0x7fc0u, 0xff80u})
    for (uint32_t lo : {0x0000u, 0x0001u, 0x7fffu, 0x8000u, 0x8001u, 0xffffu})
      for (uint32_t sign : {0u, 0x80000000u}) check(sign | (hi << 16) | lo);
  EXPECT_EQ(BFloat16::from_float(1.0f + 0x1p-8f), 0x3f80);   // a tie rounds to even (down)
  EXPECT_EQ(BFloat16::from_float(1.0f + 0x3p-8f), 0x3f82);   // a tie rounds to even (up)
  EXPECT_EQ(BFloat16::from_float(3.4e38f), 0x7f80);          // past the largest bfloat16: infinity
  EXPECT_EQ(BFloat16::from_float(-0.0f), 0x8000);
  for (uint16_t b = 0; b < 0xffff; ++b) {  // widening is exact and round trips
    const float f = BFloat16::to_float(b);
    if (!std::isnan(f)) {
      EXPECT_EQ(BFloat16::from_float(f), b);
    }
  }
}

// The vector conversions of the copy (float32 <-> bfloat16 at every SIMD level) give the
// scalar conversion's values, NaN as NaN.
TEST(BFloat16, VectorConversionsMatchScalar) {
  std::vector<float> v;
  std::mt19937 rng(7);
  for (int i = 0; i < 4099; ++i) {
    uint32_t x = static_cast<uint32_t>(rng());
    if (i % 7 == 0) x = (x & 0x807fffffu) | 0x3f800000u;  // [1, 2): ties and carries
    if (i % 11 == 0) x &= 0x807fffffu;                      // subnormal
    if (i % 3 == 0) {  // the low half at the rounding edges: below, at and above a tie, all ones
      const uint32_t edge[] = {0x7fffu, 0x8000u, 0x8001u, 0xffffu, 0x0000u};
      x = (x & 0xffff0000u) | edge[(i / 3) % 5];
    }
    float f;
    std::memcpy(&f, &x, 4);
    v.push_back(f);
  }
  const Tensor src = from_vector(v);
  for (const test::Modes& m : test::all_kernel_modes()) {
    test::ModeGuard g(m);
    const Tensor b = src.to(DType::BFloat16);
    const Tensor back = b.to(DType::Float32);
    for (size_t i = 0; i < v.size(); ++i) {
      const uint16_t got = b.data<BFloat16>()[i].bits;
      const float wide = back.data<float>()[i];
      if (std::isnan(v[i])) {  // every path: the same quiet NaN bits
        EXPECT_EQ(got, BFloat16::from_float(v[i])) << simd_level_name(m.simd) << " at " << i;
        EXPECT_TRUE(std::isnan(wide)) << i;
        continue;
      }
      // Note [bfloat16 NaN and subnormals]: vcvtneps2bf16 flushes subnormals to zero
      const uint16_t want = BFloat16::from_float(v[i]);
      const bool may_flush = use_avx512_bf16() && std::fabs(v[i]) < 0x1p-126f;
      if (!(may_flush && got == (want & 0x8000u))) {
        EXPECT_EQ(got, want) << simd_level_name(m.simd) << " at " << i << ": " << v[i];
      }
      EXPECT_EQ(wide, BFloat16::to_float(got)) << i;
    }
  }
}

TEST(Tensor, StorageIsAligned) {
  for (int i = 1; i < 40; i += 7) {
    Tensor t = empty({i}, DType::Int8);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.storage()->data()) % kCpuAlignment, 0u);
  }
}

TEST(Tensor, RandIsSeededAndInRange) {
  Tensor a = rand({1000}, 42), b = rand({1000}, 42), c = rand({1000}, 43);
  EXPECT_EQ(a.to_vector(), b.to_vector());
  EXPECT_NE(a.to_vector(), c.to_vector());
  double mean = 0;
  for (double v : a.to_vector()) {
    EXPECT_GE(v, 0.0);
    EXPECT_LT(v, 1.0);
    mean += v / 1000;
  }
  EXPECT_NEAR(mean, 0.5, 0.05);
  for (DType dt : {DType::Float16, DType::BFloat16})  // below 1 after rounding, too
    for (double v : rand({1000}, 42, dt).to_vector()) EXPECT_LT(v, 1.0) << dtype_name(dt);
  const auto n = randn({20000}, 5, DType::Float64).to_vector();
  double m = 0, v2 = 0;
  for (double x : n) m += x / n.size();
  for (double x : n) v2 += (x - m) * (x - m) / n.size();
  EXPECT_NEAR(m, 0.0, 0.05);
  EXPECT_NEAR(v2, 1.0, 0.05);
}

// ---- CLAIMS.md V1: a transpose shares storage; writes are seen through both
TEST(Views, TransposeSharesStorage) {
  Tensor a = arange(12).view({3, 4});
  Tensor t = a.t();
  EXPECT_TRUE(t.shares_storage_with(a));
  EXPECT_EQ(t.sizes(), (Shape{4, 3}));
  EXPECT_EQ(t.strides(), (Shape{1, 4}));
  t.set({2, 1}, 100);
  EXPECT_EQ(a.get({1, 2}), 100);
  a.set({0, 3}, -5);
  EXPECT_EQ(t.get({3, 0}), -5);
  EXPECT_FALSE(t.is_contiguous());
}

// ---- V2: a slice shares storage; an in-place op on it changes the source
TEST(Views, SliceSharesStorage) {
  Tensor a = arange(10);
  Tensor s = a.slice(0, 2, 9, 3);  // 2, 5, 8
  EXPECT_TRUE(s.shares_storage_with(a));
  EXPECT_EQ(s.sizes(), (Shape{3}));
  EXPECT_EQ(s.strides(), (Shape{3}));
  EXPECT_EQ(s.storage_offset(), 2);
  s.fill_(-1);
  EXPECT_TRUE(test::all_close(a, {0, 1, -1, 3, 4, -1, 6, 7, -1, 9}, 0, 0));
}

// ---- V3: clone and contiguous of a non-contiguous tensor own new storage
TEST(Views, CloneAndContiguousOwnNewStorage) {
  Tensor a = arange(12).view({3, 4});
  const long before = a.storage_use_count();
  Tensor c = a.t().contiguous();
  EXPECT_FALSE(c.shares_storage_with(a));
  EXPECT_TRUE(c.is_contiguous());
  EXPECT_TRUE(test::all_close(c, a.t().to_vector(), 0, 0));
  Tensor k = a.clone();
  EXPECT_FALSE(k.shares_storage_with(a));
  k.set({0, 0}, 99);
  EXPECT_EQ(a.get({0, 0}), 0);
  // contiguous() of a contiguous tensor is the tensor itself: no new storage
  Tensor same = a.contiguous();
  EXPECT_TRUE(same.shares_storage_with(a));
  EXPECT_EQ(a.storage_use_count(), before + 1);
}

TEST(Views, UseCountTracksViews) {
  Tensor a = zeros({4, 4});
  EXPECT_EQ(a.storage_use_count(), 1);
  {
    Tensor v1 = a.view({16}), v2 = a.t(), v3 = a.slice(1, 0, 2);
    EXPECT_EQ(a.storage_use_count(), 4);
  }
  EXPECT_EQ(a.storage_use_count(), 1);
}

TEST(Views, SliceClampsAndWrapsLikePyTorch) {
  Tensor a = arange(10);
  EXPECT_EQ(a.slice(0, -3, std::nullopt).to_vector(), (std::vector<double>{7, 8, 9}));
  EXPECT_EQ(a.slice(0, 8, 100).to_vector(), (std::vector<double>{8, 9}));
  EXPECT_EQ(a.slice(0, 5, 2).numel(), 0);
  EXPECT_EQ(a.slice(0, std::nullopt, std::nullopt, 4).to_vector(), (std::vector<double>{0, 4, 8}));
  EXPECT_EQ(a.slice(0, -100, 2).to_vector(), (std::vector<double>{0, 1}));
}

TEST(Views, SelectNarrowSqueezeUnsqueeze) {
  Tensor a = arange(24).view({2, 3, 4});
  Tensor s = a.select(1, -1);
  EXPECT_EQ(s.sizes(), (Shape{2, 4}));
  EXPECT_EQ(s.get({1, 2}), 12 + 8 + 2);
  Tensor n = a.narrow(2, 1, 2);
  EXPECT_EQ(n.sizes(), (Shape{2, 3, 2}));
  EXPECT_EQ(n.get({1, 2, 1}), 12 + 8 + 2);
  Tensor u = a.unsqueeze(1);
  EXPECT_EQ(u.sizes(), (Shape{2, 1, 3, 4}));
  EXPECT_EQ(u.strides(), (Shape{12, 12, 4, 1}));
  EXPECT_EQ(a.unsqueeze(-1).strides(), (Shape{12, 4, 1, 1}));
  EXPECT_EQ(u.squeeze().sizes(), (Shape{2, 3, 4}));
  EXPECT_EQ(u.squeeze(1).sizes(), (Shape{2, 3, 4}));
  EXPECT_EQ(u.squeeze(0).sizes(), (Shape{2, 1, 3, 4}));  // size 2: unchanged
}

TEST(Views, ExpandUsesStrideZero) {
  Tensor row = from_vector<float>({1, 2, 3});
  Tensor e = row.expand({4, 3});
  EXPECT_EQ(e.strides(), (Shape{0, 1}));
  EXPECT_TRUE(e.shares_storage_with(row));
  EXPECT_EQ(e.get({3, 2}), 3);
  Tensor col = from_vector<float>({5, 6}).view({2, 1});
  EXPECT_EQ(col.expand({2, -1, 4}).sizes(), (Shape{2, 2, 4}));  // a new leading dim
  EXPECT_EQ(col.broadcast_to({3, 2, 5}).strides(), (Shape{0, 1, 0}));
}

// PyTorch's inferExpandGeometry: a new leading dim of size 1 takes the next dim's
// size x stride (what a contiguous tensor would have), one of any other size stride 0.
TEST(Views, ExpandNewLeadingSizeOneDimTakesContiguousStride) {
  Tensor row = zeros({3});
  EXPECT_EQ(row.expand({1, 3}).strides(), (Shape{3, 1}));
  EXPECT_EQ(row.expand({2, 1, 3}).strides(), (Shape{0, 3, 1}));
  EXPECT_EQ(zeros({2, 3}).slice(1, 0, 1).expand({1, 2, 1}).strides(), (Shape{6, 3, 1}));
  EXPECT_EQ(zeros({3, 1}).expand({1, 3, 4}).strides(), (Shape{3, 1, 0}));
  EXPECT_EQ(zeros({0, 2}).expand({1, 0, 2}).strides(), (Shape{0, 2, 1}));
  EXPECT_EQ(full({}, 1.0).expand({1}).strides(), (Shape{0}));
  EXPECT_EQ(full({}, 1.0).expand({1, 1}).strides(), (Shape{0, 0}));
}

TEST(Views, PermuteAndFlattenUnflatten) {
  Tensor a = arange(24).view({2, 3, 4});
  Tensor p = a.permute({2, 0, 1});
  EXPECT_EQ(p.sizes(), (Shape{4, 2, 3}));
  EXPECT_EQ(p.strides(), (Shape{1, 12, 4}));
  EXPECT_EQ(p.get({3, 1, 2}), 12 + 8 + 3);
  Tensor f = a.flatten();
  EXPECT_TRUE(f.shares_storage_with(a));
  EXPECT_EQ(f.sizes(), (Shape{24}));
  Tensor f2 = a.flatten(1);
  EXPECT_EQ(f2.sizes(), (Shape{2, 12}));
  Tensor pf = p.flatten();  // not viewable: a copy
  EXPECT_FALSE(pf.shares_storage_with(a));
  EXPECT_TRUE(test::all_close(pf, p.to_vector(), 0, 0));
  Tensor u = f.unflatten(0, {4, -1});
  EXPECT_EQ(u.sizes(), (Shape{4, 6}));
  EXPECT_TRUE(u.shares_storage_with(a));
}

TEST(Views, ReshapeViewsWhenStridesAllowElseCopies) {
  Tensor a = arange(24).view({2, 3, 4});
  Tensor r = a.reshape({6, 4});
  EXPECT_TRUE(r.shares_storage_with(a));
  // a transposed tensor whose merged dims are still one chunk: view
  Tensor t = a.transpose(0, 1);  // [3,2,4] strides [4,12,1]
  Tensor r2 = t.reshape({3, 8});
  EXPECT_FALSE(r2.shares_storage_with(a));
  EXPECT_TRUE(test::all_close(r2, t.to_vector(), 0, 0));
  Tensor r3 = t.reshape({3, 2, 2, 2});  // splitting the last dim only: a view
  EXPECT_TRUE(r3.shares_storage_with(a));
  EXPECT_EQ(r3.strides(), (Shape{4, 12, 2, 1}));
  Tensor s = a.slice(2, 0, 4, 2);  // [2,3,2] strides [12,4,2]
  Tensor r4 = s.reshape({6, 2});   // dims 0,1 merge (12 == 3*4)
  EXPECT_TRUE(r4.shares_storage_with(a));
  EXPECT_EQ(r4.strides(), (Shape{4, 2}));
  EXPECT_TRUE(test::all_close(r4, s.to_vector(), 0, 0));
  // size-0 reshape
  Tensor z = empty({0, 4});
  EXPECT_EQ(z.reshape({4, 0, 3}).sizes(), (Shape{4, 0, 3}));
}

TEST(Views, AsStridedWithinStorage) {
  Tensor a = arange(10);
  Tensor w = a.as_strided({4, 3}, {2, 1}, 1);  // sliding windows
  EXPECT_EQ(w.get({3, 2}), 1 + 6 + 2);
  EXPECT_TRUE(w.shares_storage_with(a));
  EXPECT_EQ(has_internal_overlap(w), MemOverlap::TooHard);
  EXPECT_EQ(has_internal_overlap(a.expand({3, 10})), MemOverlap::Yes);
  EXPECT_EQ(has_internal_overlap(a.view({2, 5}).t()), MemOverlap::No);
}

TEST(Views, OverlapStatus) {
  Tensor a = arange(16).view({4, 4});
  EXPECT_EQ(get_overlap_status(a, a), MemOverlapStatus::Full);
  EXPECT_EQ(get_overlap_status(a, a.t()), MemOverlapStatus::Partial);
  EXPECT_EQ(get_overlap_status(a.narrow(0, 0, 2), a.narrow(0, 2, 2)), MemOverlapStatus::No);
  EXPECT_EQ(get_overlap_status(a, zeros({4, 4})), MemOverlapStatus::No);
  // interleaved address ranges, disjoint elements (Note [Overlap from strides])
  Tensor b = arange(48).view({4, 12});
  EXPECT_EQ(get_overlap_status(b.slice(1, 0, std::nullopt, 2), b.slice(1, 1, std::nullopt, 2)), MemOverlapStatus::No);
  EXPECT_EQ(get_overlap_status(b.narrow(1, 0, 6), b.narrow(1, 6, 6)), MemOverlapStatus::No);
  EXPECT_EQ(get_overlap_status(b.narrow(1, 0, 7), b.narrow(1, 6, 6)), MemOverlapStatus::Partial);
  Tensor odd = arange(15).view({3, 5});  // odd rows: the two parities interleave across rows too
  EXPECT_EQ(get_overlap_status(odd.slice(1, 0, std::nullopt, 2), odd.slice(1, 1, std::nullopt, 2)),
            MemOverlapStatus::No);
  EXPECT_EQ(get_overlap_status(odd.narrow(0, 1, 2).slice(1, 0, std::nullopt, 2), odd.reshape({15}).slice(0, 1, std::nullopt, 2)),
            MemOverlapStatus::Partial);  // element 7: row 1 col 2, and odd index 7
}

// get_overlap_status against brute force: random views of one small storage, the
// elements of each enumerated as byte ranges, also between dtypes of different sizes
// (a float32 view and an int8 view of the same bytes).
TEST(Views, OverlapStatusMatchesBruteForce) {
  std::mt19937_64 rng(11);
  Tensor base = zeros({96});
  auto rnd = [&](int64_t lo, int64_t hi) { return lo + static_cast<int64_t>(rng() % static_cast<uint64_t>(hi - lo + 1)); };
  auto random_view = [&](const Tensor& t) {
    const int nd = static_cast<int>(rnd(1, 3));
    Shape sz(nd), st(nd);
    int64_t span = 0;
    for (int d = 0; d < nd; ++d) {
      sz[d] = rnd(1, 4);
      st[d] = rnd(1, 12);
      span += (sz[d] - 1) * st[d];
    }
    const int64_t cap = t.numel() - 1 - span;
    if (cap < 0) return t.as_strided({1}, {1}, 0);
    return t.as_strided(sz, st, rnd(0, cap));
  };
  auto bytes = [](const Tensor& t) {
    std::vector<char> used(96 * 4, 0);
    const int64_t es = static_cast<int64_t>(t.element_size());
    for (int64_t f = 0; f < t.numel(); ++f) {
      const Shape idx = test::unravel(f, t.sizes());
      int64_t off = t.storage_offset();
      for (int64_t d = 0; d < t.dim(); ++d) off += idx[d] * t.strides()[d];
      for (int64_t k = 0; k < es; ++k) used[off * es + k] = 1;
    }
    return used;
  };
  Tensor as_int8 = Tensor(base.storage(), {384}, {1}, 0, DType::Int8);
  int overlapping = 0, disjoint = 0;
  for (int trial = 0; trial < 4000; ++trial) {
    const Tensor x = random_view(base);
    const Tensor y = random_view(trial % 4 == 3 ? as_int8 : base);
    const std::vector<char> bx = bytes(x), by = bytes(y);
    bool shared = false;
    for (size_t i = 0; i < bx.size(); ++i) shared |= bx[i] && by[i];
    const MemOverlapStatus st = get_overlap_status(x, y);
    ASSERT_NE(st, MemOverlapStatus::TooHard) << "sizes " << ::testing::PrintToString(x.sizes()) << " strides " << ::testing::PrintToString(x.strides());
    const bool same = x.storage_offset() == y.storage_offset() && x.sizes() == y.sizes() && x.strides() == y.strides() &&
                      x.dtype() == y.dtype();
    if (same) {
      EXPECT_EQ(st, MemOverlapStatus::Full);
      continue;
    }
    EXPECT_EQ(st, shared ? MemOverlapStatus::Partial : MemOverlapStatus::No)
        << "x sizes " << ::testing::PrintToString(x.sizes()) << " strides " << ::testing::PrintToString(x.strides()) << " offset " << x.storage_offset() << ", y sizes "
        << ::testing::PrintToString(y.sizes()) << " strides " << ::testing::PrintToString(y.strides()) << " offset " << y.storage_offset() << " " << dtype_name(y.dtype());
    (shared ? overlapping : disjoint) += 1;
  }
  EXPECT_GT(overlapping, 500);  // both answers are exercised
  EXPECT_GT(disjoint, 500);
}

// Lattices of 3 to 5 dims with unrelated even strides, one at an even offset and one at
// an odd one (float32, and an int8 view of the same bytes): the elements of the two never
// meet, however their addresses interleave, yet only the last term of the search (the
// bytes within an element) tells the offsets apart. Each pair is decided, never
// TooHard, and against brute force when the offsets share a parity.
TEST(Views, OverlapStatusDecidesInterleavedLattices) {
  std::mt19937_64 rng(5);
  auto rnd = [&](int64_t lo, int64_t hi) { return lo + static_cast<int64_t>(rng() % static_cast<uint64_t>(hi - lo + 1)); };
  Tensor base = zeros({1 << 16});
  Tensor as_int8 = Tensor(base.storage(), {4 << 16}, {1}, 0, DType::Int8);
  auto lattice = [&](const Tensor& t, int64_t parity) {
    const int nd = static_cast<int>(rnd(3, 5));
    Shape sz(nd), st(nd);
    for (int d = 0; d < nd; ++d) sz[d] = rnd(2, 5), st[d] = 2 * rnd(20, 400);
    return t.as_strided(sz, st, parity + 2 * rnd(0, 8));
  };
  auto elements = [](const Tensor& t) {  // byte ranges [first, last] of every element
    std::vector<std::pair<int64_t, int64_t>> r;
    const int64_t es = static_cast<int64_t>(t.element_size());
    for (int64_t f = 0; f < t.numel(); ++f) {
      const Shape idx = test::unravel(f, t.sizes());
      int64_t off = t.storage_offset();
      for (int64_t d = 0; d < t.dim(); ++d) off += idx[d] * t.strides()[d];
      r.emplace_back(off * es, off * es + es - 1);
    }
    std::sort(r.begin(), r.end());
    return r;
  };
  auto shared = [&](const Tensor& x, const Tensor& y) {
    const auto ex = elements(x), ey = elements(y);
    size_t j = 0;
    for (const auto& [lo, hi] : ex) {
      while (j < ey.size() && ey[j].second < lo) ++j;
      for (size_t k = j; k < ey.size() && ey[k].first <= hi; ++k) return true;
    }
    return false;
  };
  int decided_apart = 0, same_parity = 0;
  for (int trial = 0; trial < 600; ++trial) {
    const bool bytes = trial % 3 == 2;
    const Tensor x = lattice(base, 0);
    // an odd float32 offset, or the int8 view's bytes of an odd float32 element
    const Tensor y = bytes ? [&] {
      const Tensor f = lattice(base, 1);
      Shape st = f.strides();
      for (int64_t& s : st) s *= 4;
      return as_int8.as_strided(f.sizes(), st, f.storage_offset() * 4 + rnd(0, 3));
    }()
                           : lattice(base, trial % 2);
    const bool apart = bytes || trial % 2 == 1;
    const MemOverlapStatus st = get_overlap_status(x, y);
    const std::string what = "x sizes " + ::testing::PrintToString(x.sizes()) + " strides " +
                             ::testing::PrintToString(x.strides()) + " offset " + std::to_string(x.storage_offset()) +
                             ", y sizes " + ::testing::PrintToString(y.sizes()) + " strides " +
                             ::testing::PrintToString(y.strides()) + " offset " + std::to_string(y.storage_offset()) +
                             " " + dtype_name(y.dtype());
    if (apart) {
      ASSERT_EQ(st, MemOverlapStatus::No) << what;
      ++decided_apart;
    } else if (st != MemOverlapStatus::TooHard) {  // the same parity: decided where the search can
      ASSERT_EQ(st, shared(x, y) ? MemOverlapStatus::Partial : MemOverlapStatus::No) << what;
      ++same_parity;
    }
  }
  EXPECT_EQ(decided_apart, 400);
  EXPECT_GT(same_parity, 100);
}

// ---- memory formats
TEST(ChannelsLast, StridesAndRoundTrip) {
  Tensor x = rand({2, 3, 4, 5}, 1);
  Tensor cl = x.contiguous(MemoryFormat::ChannelsLast);
  EXPECT_EQ(cl.strides(), (Shape{60, 1, 15, 3}));
  EXPECT_TRUE(cl.is_contiguous(MemoryFormat::ChannelsLast));
  EXPECT_FALSE(cl.is_contiguous());
  EXPECT_EQ(cl.suggest_memory_format(), MemoryFormat::ChannelsLast);
  EXPECT_EQ(x.suggest_memory_format(), MemoryFormat::Contiguous);
  EXPECT_TRUE(test::all_close(cl, x.to_vector(), 0, 0));
  EXPECT_TRUE(cl.contiguous(MemoryFormat::ChannelsLast).shares_storage_with(cl));  // itself
  Tensor back = cl.contiguous();
  EXPECT_EQ(back.strides(), (Shape{60, 20, 5, 1}));
  EXPECT_TRUE(test::all_close(back, x.to_vector(), 0, 0));
  // clone preserves a dense layout, and otherwise gives dense strides in the input's
  // stride order (values checked against PyTorch 1.13)
  EXPECT_EQ(cl.clone().strides(), cl.strides());
  Tensor sliced_cl = cl.slice(3, 0, 5, 2);  // [2,3,4,3] @ [60,1,15,6]
  EXPECT_EQ(sliced_cl.suggest_memory_format(), MemoryFormat::Contiguous);
  EXPECT_EQ(sliced_cl.clone().strides(), (Shape{36, 1, 9, 3}));
  EXPECT_TRUE(test::all_close(sliced_cl.clone(), sliced_cl.to_vector(), 0, 0));
  EXPECT_EQ(empty({1, 1, 1, 1}).expand({2, 3, 4, 5}).clone().strides(), (Shape{60, 20, 5, 1}));
  EXPECT_EQ(arange(10).as_strided({4, 3}, {2, 1}, 1).clone().strides(), (Shape{3, 1}));
  EXPECT_EQ(empty({1, 3, 1, 4}).transpose(1, 3).clone().strides(), (Shape{12, 1, 4, 4}));
  // an NHWC permute of an NHWC-contiguous buffer is channels-last
  Tensor nhwc = rand({2, 4, 5, 3}, 2).permute({0, 3, 1, 2});
  EXPECT_TRUE(nhwc.is_contiguous(MemoryFormat::ChannelsLast));
}

// Note [Ambiguous channels-last strides]: the cases PyTorch decides by its rules.
TEST(ChannelsLast, AmbiguousNC11) {
  Tensor a = empty({2, 3, 1, 1});  // contiguous strides [3,1,1,1]
  EXPECT_EQ(a.strides(), (Shape{3, 1, 1, 1}));
  EXPECT_TRUE(a.is_contiguous());
  EXPECT_TRUE(a.is_contiguous(MemoryFormat::ChannelsLast));
  EXPECT_EQ(a.suggest_memory_format(), MemoryFormat::Contiguous);
  Tensor b = empty({2, 3, 1, 1}, DType::Float32, Device::cpu(), MemoryFormat::ChannelsLast);
  EXPECT_EQ(b.strides(), (Shape{3, 1, 3, 3}));
  EXPECT_TRUE(b.is_contiguous());
  EXPECT_TRUE(b.is_contiguous(MemoryFormat::ChannelsLast));
  EXPECT_EQ(b.suggest_memory_format(), MemoryFormat::ChannelsLast);
}

TEST(ChannelsLast, AmbiguousC1) {
  Tensor a = empty({2, 1, 4, 4});
  EXPECT_EQ(a.strides(), (Shape{16, 16, 4, 1}));
  EXPECT_TRUE(a.is_contiguous(MemoryFormat::ChannelsLast));
  EXPECT_EQ(a.suggest_memory_format(), MemoryFormat::Contiguous);
  Tensor b = empty({2, 1, 4, 4}, DType::Float32, Device::cpu(), MemoryFormat::ChannelsLast);
  EXPECT_EQ(b.strides(), (Shape{16, 1, 4, 1}));
  EXPECT_TRUE(b.is_contiguous());
  EXPECT_EQ(b.suggest_memory_format(), MemoryFormat::ChannelsLast);
}

TEST(ChannelsLast, AmbiguousN111AndTrivialC) {
  Tensor a = empty({2, 1, 1, 1});  // [1,1,1,1]
  EXPECT_EQ(a.strides(), (Shape{1, 1, 1, 1}));
  EXPECT_EQ(a.suggest_memory_format(), MemoryFormat::Contiguous);
  EXPECT_TRUE(a.is_contiguous(MemoryFormat::ChannelsLast));
  Tensor e = empty({1, 1, 1, 1}).expand({2, 3, 4, 5});  // stride 0 channels: NCHW
  EXPECT_EQ(e.suggest_memory_format(), MemoryFormat::Contiguous);
  // 1xCx1xW transposed to 1xWx1xC must not look channels-last
  Tensor t = empty({1, 3, 1, 4}).transpose(1, 3);
  EXPECT_EQ(t.suggest_memory_format(), MemoryFormat::Contiguous);
}

TEST(Tensor, ToDtypeConvertsAndKeepsLayout) {
  Tensor x = rand({2, 3, 4, 5}, 3).contiguous(MemoryFormat::ChannelsLast);
  Tensor d = x.to(DType::Float64);
  EXPECT_EQ(d.dtype(), DType::Float64);
  EXPECT_TRUE(d.is_contiguous(MemoryFormat::ChannelsLast));
  EXPECT_TRUE(test::all_close(d, x.to_vector(), 0, 0));
  EXPECT_TRUE(x.to(DType::Float32).shares_storage_with(x));
  EXPECT_TRUE(x.to(Device::cpu()).shares_storage_with(x));
}

// to() keeps a dense tensor's strides (MemoryFormat::Preserve), as PyTorch does; a
// non-dense one gets dense strides in the same order (PyTorch's infer_dense_strides, as
// clone() does), not its suggested format: PyTorch gives x[:, ::2].t() of a 4 x 6 tensor
// the strides (1, 3) (tests/torch_parity.py's random layouts found the difference).
// is_non_overlapping_and_dense against its definition: with elements, their offsets are
// exactly 0 .. numel - 1; without, PyTorch's rule (dims of size 0 or 1 ignored, the rest
// sorted by stride must be dense). Strides dense in a random order of the dims, some
// then stretched, repeated or zeroed.
TEST(Tensor, NonOverlappingAndDenseMatchesItsDefinition) {
  std::mt19937_64 rng(5);
  int dense_seen = 0, not_dense_seen = 0;
  for (int trial = 0; trial < 4000; ++trial) {
    const size_t nd = rng() % 6;
    Shape sizes(nd), strides(nd), order(nd);
    for (size_t d = 0; d < nd; ++d) sizes[d] = static_cast<int64_t>(rng() % 8 == 0 ? rng() % 2 : 1 + rng() % 4);
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    int64_t z = 1;
    for (int64_t d : order) {
      strides[d] = z;
      z *= std::max<int64_t>(sizes[d], 1);
    }
    if (nd > 0 && rng() % 3 == 0) {
      const size_t d = rng() % nd;
      const int kind = static_cast<int>(rng() % 3);
      strides[d] = kind == 0 ? 2 * strides[d] + 1 : kind == 1 ? strides[(d + 1) % nd] : 0;
    }
    int64_t numel = 1;
    for (int64_t s : sizes) numel *= s;
    bool want;
    if (numel > 0) {
      std::vector<int64_t> offs;
      Shape idx(nd, 0);
      for (int64_t i = 0; i < numel; ++i) {
        int64_t o = 0;
        for (size_t d = 0; d < nd; ++d) o += idx[d] * strides[d];
        offs.push_back(o);
        for (size_t d = nd; d-- > 0;) {
          if (++idx[d] < sizes[d]) break;
          idx[d] = 0;
        }
      }
      std::sort(offs.begin(), offs.end());
      want = true;
      for (int64_t i = 0; i < numel; ++i) want = want && offs[i] == i;
    } else {
      std::vector<size_t> perm(nd);
      std::iota(perm.begin(), perm.end(), 0);
      std::stable_sort(perm.begin(), perm.end(), [&](size_t a, size_t b) {
        return sizes[a] >= 2 && (sizes[b] < 2 || strides[a] < strides[b]);
      });
      want = true;
      int64_t require = 1;
      for (size_t i = 0; i < nd && sizes[perm[i]] >= 2 && want; ++i) {
        want = strides[perm[i]] == require;
        require *= sizes[perm[i]];
      }
    }
    (want ? dense_seen : not_dense_seen)++;
    EXPECT_EQ(is_non_overlapping_and_dense(sizes, strides), want)
        << "sizes " << ::testing::PrintToString(sizes) << " strides " << ::testing::PrintToString(strides);
  }
  EXPECT_GT(dense_seen, 500);
  EXPECT_GT(not_dense_seen, 500);
}

TEST(Tensor, ToKeepsDenseStrides) {
  const Tensor t = arange(20).view({4, 5}).t();  // integers: exact in every dtype
  for (DType dt : {DType::Float64, DType::Float16, DType::BFloat16, DType::Int32}) {
    const Tensor d = t.to(dt);
    EXPECT_EQ(d.strides(), (Shape{1, 5})) << dtype_name(dt);
    EXPECT_TRUE(test::all_close(d, test::naive_values(t), 0, 0)) << dtype_name(dt);
  }
  const Tensor p = rand({2, 3, 4, 5}, 3).permute({0, 2, 1, 3});  // dense, neither format
  EXPECT_EQ(p.to(DType::Float64).strides(), p.strides());
  const Tensor stepped = rand({4, 10}, 4).slice(1, 0, std::nullopt, 2);
  EXPECT_EQ(stepped.to(DType::Float64).strides(), (Shape{5, 1}));
  const Tensor cl_stepped = rand({2, 3, 8, 5}, 5).contiguous(MemoryFormat::ChannelsLast).slice(2, 0, std::nullopt, 2);
  EXPECT_TRUE(cl_stepped.to(DType::Float64).is_contiguous(MemoryFormat::ChannelsLast));
  const Tensor stepped_t = rand({4, 6}, 6).slice(1, 0, std::nullopt, 2).t();  // sizes 3 x 4, strides (2, 6)
  for (DType dt : {DType::Float64, DType::BFloat16}) {
    const Tensor d = stepped_t.to(dt);
    EXPECT_EQ(d.strides(), (Shape{1, 3})) << dtype_name(dt);
    EXPECT_EQ(d.strides(), stepped_t.clone().strides()) << dtype_name(dt);
    EXPECT_TRUE(test::all_close(d, test::naive_values(stepped_t), 1e-2, 0)) << dtype_name(dt);
  }
  // a stepped 4-D tensor whose dims lie in an order that is neither format: that order kept
  const Tensor odd = rand({2, 8, 4, 4}, 7).slice(1, 0, std::nullopt, 2).permute({0, 2, 3, 1});
  EXPECT_EQ(odd.to(DType::Float64).strides(), (Shape{64, 4, 1, 16}));
}

// PyTorch: contiguous(Preserve) returns a contiguous tensor itself and refuses others.
TEST(Tensor, ContiguousPreserve) {
  const Tensor c = rand({3, 4}, 1);
  EXPECT_TRUE(c.contiguous(MemoryFormat::Preserve).shares_storage_with(c));
  EXPECT_THROW(c.t().contiguous(MemoryFormat::Preserve), Error);
}

// A zero-size 4-D tensor is channels-last only when its strides say so (PyTorch checks
// the strides there, unlike is_contiguous, which a zero-size tensor always is).
TEST(ChannelsLast, ZeroSizeTensorsAreDecidedByStrides) {
  for (const Shape& sz : {Shape{0, 3, 4, 5}, Shape{2, 0, 4, 5}, Shape{2, 3, 0, 5}}) {
    const Tensor nchw = empty(sz);
    EXPECT_TRUE(nchw.is_contiguous()) << ::testing::PrintToString(sz);
    EXPECT_FALSE(nchw.is_contiguous(MemoryFormat::ChannelsLast)) << ::testing::PrintToString(sz) << " strides " << ::testing::PrintToString(nchw.strides());
    const Tensor cl = nchw.contiguous(MemoryFormat::ChannelsLast);
    EXPECT_TRUE(cl.is_contiguous(MemoryFormat::ChannelsLast)) << ::testing::PrintToString(sz);
    EXPECT_EQ(cl.strides()[1], 1) << ::testing::PrintToString(sz);
  }
  // PyTorch's strides for empty channels-last tensors
  EXPECT_EQ(empty({2, 0, 4, 5}, DType::Float32, Device::cpu(), MemoryFormat::ChannelsLast).strides(), (Shape{0, 1, 0, 0}));
  EXPECT_EQ(empty({2, 3, 0, 5}, DType::Float32, Device::cpu(), MemoryFormat::ChannelsLast).strides(), (Shape{0, 1, 15, 3}));
  EXPECT_EQ(empty({0, 3, 4, 5}, DType::Float32, Device::cpu(), MemoryFormat::ChannelsLast).strides(), (Shape{60, 1, 15, 3}));
}

TEST(Tensor, ZeroDimTensors) {
  Tensor s = full({}, 3.5);
  EXPECT_EQ(s.dim(), 0);
  EXPECT_EQ(s.numel(), 1);
  EXPECT_EQ(s.item(), 3.5);
  EXPECT_EQ(s.unsqueeze(0).sizes(), (Shape{1}));
  EXPECT_EQ(s.flatten().sizes(), (Shape{1}));
  EXPECT_EQ(s.view({1, 1}).sizes(), (Shape{1, 1}));
  EXPECT_EQ(s.expand({2, 2}).get({1, 1}), 3.5);
  // squeeze of a 0-dim tensor, as PyTorch: dims 0 and -1 give it back, others are errors
  EXPECT_EQ(s.squeeze(0).dim(), 0);
  EXPECT_EQ(s.squeeze(-1).item(), 3.5);
  test::expect_msg([&] { s.squeeze(1); }, "squeeze");
  test::expect_msg([&] { s.squeeze(-2); }, "squeeze");
}

}  // namespace
}  // namespace sb
