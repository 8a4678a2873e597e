// errors_test.cpp — bad inputs to the core (lib/core/tensor.*): each throws sb::Error
// whose message names the op and the offending values, and leaves the tensor as it
// was (sizes, strides, offset, values, storage use count).
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "stridebench/stridebench.h"
#include "test_util.h"

namespace sb {
namespace {

// Runs f, expects sb::Error containing every fragment, and checks t unchanged.
void expect_error(const Tensor& t, const std::function<void()>& f, const std::vector<std::string>& fragments) {
  const Shape sizes = t.sizes(), strides = t.strides();
  const int64_t off = t.storage_offset();
  const std::vector<double> vals = t.to_vector();
  const long uses = t.storage_use_count();
  try {
    f();
    ADD_FAILURE() << "expected sb::Error with '" << fragments[0] << "'";
  } catch (const Error& e) {
    const std::string msg = e.what();
    for (const auto& frag : fragments)
      EXPECT_NE(msg.find(frag), std::string::npos) << "message '" << msg << "' lacks '" << frag << "'";
  }
  EXPECT_EQ(t.sizes(), sizes);
  EXPECT_EQ(t.strides(), strides);
  EXPECT_EQ(t.storage_offset(), off);
  EXPECT_EQ(t.to_vector(), vals);
  EXPECT_EQ(t.storage_use_count(), uses);
}

TEST(Errors, OutOfRangeDims) {
  Tensor a = arange(24).view({2, 3, 4});
  expect_error(a, [&] { a.transpose(0, 3); }, {"transpose", "dimension 3", "3-D"});
  expect_error(a, [&] { a.transpose(-4, 0); }, {"transpose", "-4"});
  expect_error(a, [&] { a.select(5, 0); }, {"select", "5"});
  expect_error(a, [&] { a.select(1, 3); }, {"select", "index 3", "size 3"});
  expect_error(a, [&] { a.narrow(2, 3, 2); }, {"narrow", "exceeds dimension 2 of size 4"});
  expect_error(a, [&] { a.squeeze(3); }, {"squeeze", "3"});
  expect_error(a, [&] { a.unsqueeze(5); }, {"unsqueeze", "5"});
  expect_error(a, [&] { a.narrow(0, 0, -1); }, {"narrow", "length -1 must be >= 0"});
  Tensor m = zeros({2, 3});
  expect_error(m, [&] { m.unsqueeze(4); }, {"unsqueeze", "dimension 4", "2-D tensor", "[-3, 2]"});
  expect_error(a, [&] { a.flatten(2, 1); }, {"flatten", "start_dim (2)", "end_dim (1)"});
  expect_error(a, [&] { a.size(3); }, {"size", "3"});
  expect_error(a, [&] { a.slice(-5, 0, 1); }, {"slice", "-5"});
  expect_error(a, [&] { a.t(); }, {"t:", "3-D", "[2, 3, 4]"});
}

TEST(Errors, InvalidPermutations) {
  Tensor a = arange(24).view({2, 3, 4});
  expect_error(a, [&] { a.permute({0, 0, 1}); }, {"permute", "[0, 0, 1]", "not a permutation"});
  expect_error(a, [&] { a.permute({0, 1}); }, {"permute", "[0, 1]", "3 dims"});
  expect_error(a, [&] { a.permute({0, 1, 3}); }, {"permute", "3"});
}

TEST(Errors, ViewOnIncompatibleStridesSaysUseReshape) {
  Tensor a = arange(12).view({3, 4});
  Tensor t = a.t();
  expect_error(t, [&] { t.view({12}); }, {"view", "[12]", "strides [1, 4]", "reshape"});
  expect_error(a, [&] { a.view({5, 3}); }, {"view", "[5, 3]", "12 elements"});
  expect_error(a, [&] { a.view({-1, -1}); }, {"view", "only one dimension can be -1"});
  expect_error(a, [&] { a.view({-2, 6}); }, {"view", "invalid size -2"});
  EXPECT_NO_THROW(t.reshape({12}));
}

TEST(Errors, SliceStepMustBePositive) {
  Tensor a = arange(10);
  expect_error(a, [&] { a.slice(0, 0, 10, 0); }, {"slice", "step must be positive, got 0"});
  expect_error(a, [&] { a.slice(0, 0, 10, -1); }, {"slice", "got -1"});
}

TEST(Errors, ExpandOfNonSingletonDim) {
  Tensor a = arange(6).view({2, 3});
  expect_error(a, [&] { a.expand({4, 3}); }, {"expand", "expanded size (4)", "existing size (2)", "dimension 0"});
  expect_error(a, [&] { a.expand({3}); }, {"expand", "number of sizes provided (1)"});
}

TEST(Errors, NegativeSizesAndOverflow) {
  EXPECT_THROW(empty({2, -3}), Error);
  try {
    empty({2, -3});
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("negative size"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("[2, -3]"), std::string::npos);
  }
  const int64_t big = int64_t{1} << 40;
  try {
    empty({big, big});
    ADD_FAILURE() << "expected an overflow error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("overflow"), std::string::npos) << e.what();
  }
  try {  // element count fits, byte count does not
    empty({int64_t{1} << 61, 2}, DType::Float64);
    ADD_FAILURE() << "expected an overflow error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("overflow"), std::string::npos) << e.what();
  }
  Tensor a = arange(4);
  expect_error(a, [&] { a.expand({big, big, 4}); }, {"expand", "overflow"});
}

TEST(Errors, AsStridedOutsideStorage) {
  Tensor a = arange(10);
  expect_error(a, [&] { a.as_strided({4, 3}, {3, 1}, 0); }, {"as_strided", "[4, 3]", "[3, 1]", "element 11",
                                                               "storage of 10 elements"});
  expect_error(a, [&] { a.as_strided({2}, {1}, 9); }, {"as_strided", "element 10"});
  expect_error(a, [&] { a.as_strided({2}, {-1}, 5); }, {"as_strided", "negative strides"});
  expect_error(a, [&] { a.as_strided({2, 2}, {1}); }, {"as_strided", "different lengths"});
  EXPECT_NO_THROW(a.as_strided({0, 5}, {100, 100}, 10));  // empty: no element is read
}

TEST(Errors, DtypeMismatchWhereRequired) {
  Tensor a = arange(4, DType::Float64);
  expect_error(a, [&] { a.data<float>(); }, {"data<float32>", "float64"});
  expect_error(a, [&] { (void)from_vector<float>({1, 2, 3}, {2, 2}); }, {"from_vector", "3 values", "[2, 2]"});
}

// CLAIMS.md V4: broadcasting a size-3 tensor with a size-2 one is an error.
TEST(Errors, BroadcastThreeWithTwo) {
  Tensor a = arange(3), b = arange(2);
  EXPECT_THROW(broadcast_shapes(a.sizes(), b.sizes(), "add"), Error);
  try {
    broadcast_shapes({4, 3}, {2}, "add");
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("add"), std::string::npos);
    EXPECT_NE(m.find("[4, 3]"), std::string::npos);
    EXPECT_NE(m.find("[2]"), std::string::npos);
    EXPECT_NE(m.find("not broadcastable"), std::string::npos);
  }
  expect_error(a, [&] { a.copy_(b); }, {"copy_", "[2]", "[3]"});
  expect_error(a, [&] { a.expand({2}); }, {"expand"});
  EXPECT_EQ(broadcast_shapes({3, 1}, {2}, "add"), (Shape{3, 2}));
}

TEST(Errors, WritesIntoOverlappingTensorsAreRefused) {
  Tensor row = arange(3);
  Tensor e = row.expand({4, 3});
  expect_error(e, [&] { e.fill_(1); }, {"fill_", "single memory location", "[0, 1]"});
  expect_error(e, [&] { e.copy_(zeros({4, 3})); }, {"copy_", "single memory location"});
  Tensor sq = arange(16).view({4, 4});
  expect_error(sq, [&] { sq.copy_(sq.t()); }, {"copy_", "shares elements with the destination", "strides [1, 4]"});
  EXPECT_NO_THROW(sq.copy_(sq));
  // the same rule on a CUDA tensor, decided before any kernel (fake_cuda: host memory)
  Tensor g = test::fake_cuda({4, 4});
  test::expect_msg([&] { g.copy_(g.t()); }, "copy_: the source (sizes [4, 4], strides [1, 4], offset 0) shares elements with the destination");
  // disjoint views whose addresses interleave copy as PyTorch copies them
  Tensor v = arange(24).view({2, 12});
  Tensor even = v.slice(1, 0, std::nullopt, 2), odd_ = v.slice(1, 1, std::nullopt, 2);
  even.copy_(odd_);
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 12; ++j) EXPECT_EQ(v.get({i, j}), 12 * i + (j | 1)) << i << ", " << j;
  Tensor w = arange(24).view({2, 12});
  w.narrow(1, 6, 6).copy_(w.narrow(1, 0, 6));
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 12; ++j) EXPECT_EQ(w.get({i, j}), 12 * i + j % 6) << i << ", " << j;
}

TEST(Errors, ChannelsLastNeeds4D) {
  Tensor a = zeros({2, 3, 4});
  expect_error(a, [&] { a.contiguous(MemoryFormat::ChannelsLast); }, {"contiguous", "ChannelsLast", "[2, 3, 4]"});
  EXPECT_THROW(empty({2, 3}, DType::Float32, Device::cpu(), MemoryFormat::ChannelsLast), Error);
}

TEST(Errors, ElementAccess) {
  Tensor a = zeros({2, 2});
  expect_error(a, [&] { a.get({2, 0}); }, {"get", "[2, 0]", "[2, 2]"});
  expect_error(a, [&] { a.get({0}); }, {"get", "1 entries", "2-D"});
  expect_error(a, [&] { a.item(); }, {"item", "4 elements"});
}

TEST(Errors, InternalAssertIsADifferentType) {
  EXPECT_THROW(SB_INTERNAL_ASSERT(1 == 2, "x"), InternalError);
  try {
    SB_INTERNAL_ASSERT(1 == 2);
  } catch (const InternalError& e) {
    EXPECT_NE(std::string(e.what()).find("1 == 2"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("bug in stridebench"), std::string::npos);
  }
}

// bfloat16 (issue: every op names the op and the dtypes): mixed dtypes are refused as for
// every dtype (no type promotion: PyTorch would promote some of these, see
// docs/LIBRARY.md), and the ops without a bfloat16 kernel say so; every tensor stays as it was.
TEST(Errors, Bfloat16MixedAndUnsupported) {
  Tensor h = ones({2, 3}, DType::BFloat16), f = ones({2, 3});
  expect_error(h, [&] { add(h, f); }, {"add", "dtype mismatch", "bfloat16", "float32"});
  expect_error(h, [&] { h.mul_(f); }, {"mul", "bfloat16", "float32"});
  Tensor out32 = zeros({2, 3});
  expect_error(out32, [&] { add_out(out32, h, h); }, {"add_out", "output dtype float32", "result dtype bfloat16"});
  Tensor hm = ones({3, 2}, DType::BFloat16);
  expect_error(h, [&] { matmul(h, ones({3, 2})); }, {"matmul", "dtype mismatch bfloat16 vs float32"});
  Tensor o22 = zeros({2, 2});
  expect_error(o22, [&] { matmul_out(o22, h, hm); }, {"matmul_out", "out dtype float32", "expected bfloat16"});
  Tensor img = ones({1, 2, 5, 5}, DType::BFloat16);
  expect_error(img, [&] { conv2d(img, ones({3, 2, 3, 3})); }, {"conv2d", "weight dtype float32", "input dtype bfloat16"});
  expect_error(img, [&] { conv2d(img, ones({3, 2, 3, 3}, DType::BFloat16), ones({3}, DType::Float16)); },
               {"conv2d", "bias dtype float16", "input dtype bfloat16"});
  expect_error(img, [&] { max_pool2d(img, Pool2dParams{2, 2}); }, {"max_pool2d", "expected float32, got bfloat16"});
  const Linear lin(ones({4, 3}), Tensor(), Precision::F32);
  expect_error(h, [&] { lin.forward(h); }, {"Linear", "float32", "bfloat16"});
}

}  // namespace
}  // namespace sb
