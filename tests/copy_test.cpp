// copy_test.cpp — the strided copy (lib/ops/copy.*) against element-by-element
// reference reads, for every layout pair and dtype pair.
#include "ops/copy.h"

#include "core/convert.h"
#include "test_util.h"

namespace sb {
namespace {

using test::Layout;

TEST(Copy, EveryLayoutPairMatchesReference) {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 60; ++trial) {
    const int nd = 1 + static_cast<int>(rng() % 4);
    const Shape sz = test::random_shape(rng, nd, 9);
    Tensor src_vals = test::expandable_rand(sz, rng(), DType::Float64);
    const std::vector<double> ref = src_vals.to_vector();
    for (Layout ls : test::all_layouts()) {
      for (Layout ld : {Layout::Contiguous, Layout::Transposed, Layout::Sliced, Layout::ChannelsLast, Layout::Offset}) {
        Tensor src = test::with_layout(src_vals, ls);
        Tensor dst = test::with_layout(zeros(sz, DType::Float64), ld);
        test::poison(dst);
        dst.copy_(src);
        ASSERT_TRUE(test::all_close(dst, ref, 0, 0)) << test::layout_name(ls) << " -> " << test::layout_name(ld);
      }
    }
  }
}

TEST(Copy, DtypeConversionsMatchReference) {
  const std::vector<double> vals = {-3.75, -1.5, -0.25, 0.0, 0.5, 1.0, 2.25, 7.0, 100.5, -100.5};
  const Tensor src64 = from_vector(vals);
  for (DType to : {DType::Float32, DType::Float64, DType::Float16, DType::Int8, DType::Int32, DType::Int64}) {
    Tensor out = empty({static_cast<int64_t>(vals.size())}, to);
    test::poison(out);
    out.copy_(src64);
    std::vector<double> ref;
    for (double v : vals) ref.push_back(is_floating(to) ? v : static_cast<double>(static_cast<int64_t>(v)));
    EXPECT_TRUE(test::all_close(out, ref, 0, 0)) << dtype_name(to);
    // and back to float64 through a transposed-like strided view
    Tensor back = empty({static_cast<int64_t>(vals.size())}, DType::Float64);
    test::poison(back);
    back.copy_(out);
    EXPECT_TRUE(test::all_close(back, ref, 0, 0)) << dtype_name(to) << " -> float64";
  }
}

TEST(Copy, HalfRoundsToNearestEven) {
  // 2049 lies halfway between the halves 2048 and 2050: round to even (2048)
  EXPECT_EQ(static_cast<float>(Half(2049.0f)), 2048.0f);
  EXPECT_EQ(static_cast<float>(Half(2051.0f)), 2052.0f);
  EXPECT_EQ(static_cast<float>(Half(65504.0f)), 65504.0f);
  EXPECT_TRUE(std::isinf(static_cast<float>(Half(65520.0f))));
  EXPECT_EQ(static_cast<float>(Half(5.960464477539063e-08f)), 5.960464477539063e-08f);  // smallest subnormal
  EXPECT_EQ(static_cast<float>(Half(2.98023223876953125e-08f)), 0.0f);  // half of it ties to even 0
  EXPECT_TRUE(std::isnan(static_cast<float>(Half(std::nanf("")))));
  for (int bits = 0; bits < 0x7c00; ++bits) {  // every finite half survives a round trip
    Half h;
    h.bits = static_cast<uint16_t>(bits);
    ASSERT_EQ(Half(static_cast<float>(h)).bits, h.bits) << bits;
  }
}

TEST(Copy, BroadcastSourceFillsDestination) {
  Tensor row = from_vector<float>({1, 2, 3});
  Tensor dst = empty({4, 3});
  test::poison(dst);
  dst.copy_(row);
  std::vector<double> ref;
  for (int i = 0; i < 4; ++i) ref.insert(ref.end(), {1, 2, 3});
  EXPECT_TRUE(test::all_close(dst, ref, 0, 0));
}

}  // namespace
}  // namespace sb
