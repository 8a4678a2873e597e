// errors_test.cpp — bad inputs to the core (lib/core/tensor.*): each throws sb::Error
// whose message names the op and the offending values, and leaves the tensor as it
// was (sizes, strides, offset, values, storage use count).
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "core/test_hooks.h"
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

// Where the overlap search runs out of steps (TooHard: Note [Overlap from strides]),
// copy_ and the elementwise ops read a copy of the input, and the out= ops of the other
// families refuse ("may overlap"), leaving every tensor as it was. A search bound of 0
// steps makes every pair of views that are not the same view TooHard; the views below
// share rows (one row apart), so a kernel that read the input in place would read rows it
// had already written.
TEST(Errors, UndecidedOverlapReadsACopyOrIsRefused) {
  struct SearchSteps {
    SearchSteps() { set_overlap_search_steps(0); }
    ~SearchSteps() { set_overlap_search_steps(-1); }
  } steps;
  auto fresh = [] {  // 5 rows of 8; the source rows 0-3 from column 0, the destination rows 1-4 from column 1
    Tensor s = arange(40).view({5, 8});
    s.mul_(0.5).sub_(7.0);
    return s;
  };
  auto check = [&](const char* what, const std::function<void(Tensor&, const Tensor&)>& f,
                   const std::function<double(double, double)>& ref) {
    Tensor s = fresh();
    Tensor dst = s.narrow(0, 1, 4).narrow(1, 1, 6), src = s.narrow(0, 0, 4).narrow(1, 0, 6);
    ASSERT_EQ(get_overlap_status(dst, src), MemOverlapStatus::TooHard) << what;
    const std::vector<double> before = s.to_vector();
    f(dst, src);
    for (int64_t r = 0; r < 5; ++r)
      for (int64_t c = 0; c < 8; ++c) {
        const bool in_dst = r >= 1 && c >= 1 && c <= 6;  // dst's element (r - 1, c - 1) reads s(r - 1, c - 1)
        const double want = in_dst ? ref(before[8 * r + c], before[8 * (r - 1) + c - 1]) : before[8 * r + c];
        ASSERT_EQ(s.get({r, c}), want) << what << " at row " << r << ", column " << c;
      }
  };
  check("dst.copy_(src)", [](Tensor& d, const Tensor& x) { d.copy_(x); }, [](double, double x) { return x; });
  check("neg_out(dst, src)", [](Tensor& d, const Tensor& x) { neg_out(d, x); }, [](double, double x) { return -x; });
  check("add_out(dst, src, src)", [](Tensor& d, const Tensor& x) { add_out(d, x, x); },
        [](double, double x) { return x + x; });
  check("add_out(dst, dst, src)", [](Tensor& d, const Tensor& x) { add_out(d, d, x); },
        [](double d, double x) { return d + x; });
  check("dst.sub_(src)", [](Tensor& d, const Tensor& x) { d.sub_(x); }, [](double d, double x) { return d - x; });
  check("mul_out(dst, src, 3)", [](Tensor& d, const Tensor& x) { mul_out(d, x, 3.0); },
        [](double, double x) { return 3 * x; });
  {  // normalize: the same kernel over a clone made beforehand is the reference of the aliasing
    Tensor s = fresh();
    Tensor dst = s.narrow(0, 1, 4), src = s.narrow(0, 0, 4);
    const Tensor want = normalize(src.clone(), 1);
    const std::vector<double> row0 = s.narrow(0, 0, 1).to_vector();
    normalize_out(dst, src, 1);
    EXPECT_EQ(dst.to_vector(), want.to_vector());
    EXPECT_EQ(s.narrow(0, 0, 1).to_vector(), row0);
  }
  // the other families' out= ops refuse
  Tensor s = fresh();
  Tensor sq_out = s.narrow(0, 1, 4).narrow(1, 0, 4), sq_in = s.narrow(0, 0, 4).narrow(1, 0, 4);
  expect_error(s, [&] { matmul_out(sq_out, sq_in, ones({4, 4})); }, {"matmul_out", "may overlap", "operand a"});
  expect_error(s, [&] { matmul_out(sq_out, ones({4, 4}), sq_in); }, {"matmul_out", "may overlap", "operand b"});
  Tensor sums = s.narrow(0, 1, 1).view({8}).narrow(0, 0, 4);
  expect_error(s, [&] { sum_out(sums, sq_in, {1}); }, {"sum_out", "may overlap", "the input"});
  Tensor img_out = sq_out.view({1, 1, 4, 4}), img_in = sq_in.view({1, 1, 4, 4});
  expect_error(s, [&] { conv2d_out(img_out, img_in, ones({1, 1, 1, 1})); }, {"conv2d_out", "may overlap", "the input"});
  Tensor pooled = s.narrow(0, 1, 1).view({8}).narrow(0, 0, 4).view({1, 1, 2, 2});
  expect_error(s, [&] { max_pool2d_out(pooled, img_in, Pool2dParams{}); }, {"max_pool2d_out", "may overlap", "the input"});
}

// The bad inputs no other test gives (each check's own message, not one raised before
// it): undefined tensors, impossible shapes, 0-D tensors where a dim is needed, storage
// bounds, memory formats that are not layouts, tensors on two devices (fake_cuda: host
// memory under a CUDA device, refused before any kernel), and each family's own rules.
// Every CPU tensor named is left as it was.
TEST(Errors, EveryCheckNamesTheOpAndTheValues) {
  const Tensor u;  // undefined
  Tensor a = arange(6);
  Tensor s = full({}, 2.0);
  Tensor g = test::fake_cuda({2, 3});
  // the core
  test::expect_msg([&] { u.data_ptr(); }, "data_ptr: undefined tensor");
  expect_error(a, [&] { a.view({4, -1}); }, {"view", "[4, -1]", "invalid for input of 6 elements"});
  expect_error(a, [&] { a.reshape({0, -1}); }, {"reshape", "[0, -1]", "invalid for input of 6 elements"});
  expect_error(a, [&] { a.view({int64_t{1} << 62, 4, -1}); }, {"view", "overflows int64"});
  expect_error(s, [&] { s.slice(0, 0, 1); }, {"slice: cannot slice a 0-D tensor"});
  expect_error(s, [&] { s.select(0, 0); }, {"select: cannot select on a 0-D tensor"});
  expect_error(s, [&] { s.narrow(0, 0, 1); }, {"narrow: cannot narrow a 0-D tensor"});
  expect_error(a, [&] { a.narrow(0, 7, 0); }, {"narrow: start 7", "dimension 0 of size 6"});
  expect_error(a, [&] { a.narrow(0, -7, 1); }, {"narrow: start -7"});
  expect_error(a, [&] { a.expand({-1, 6}); }, {"expand: new leading size -1 at dimension 0", "[-1, 6]"});
  Tensor row = ones({1, 6});
  expect_error(row, [&] { row.expand({-2, 6}); }, {"expand: invalid size -2 at dimension 0"});
  expect_error(a, [&] { a.unflatten(0, {}); }, {"unflatten: sizes must be non-empty"});
  expect_error(a, [&] { a.as_strided({2}, {1}, -1); }, {"as_strided: negative storage offset -1"});
  expect_error(a, [&] { a.as_strided({int64_t{1} << 40, 2}, {int64_t{1} << 40, 1}, 0); },
               {"as_strided", "overflow int64"});
  expect_error(a, [&] { a.as_strided({0}, {1}, 7); }, {"as_strided: offset 7 is outside the storage of 6 elements"});
  expect_error(a, [&] { a.is_contiguous(MemoryFormat::Preserve); }, {"is_contiguous: memory format", "is not a layout"});
  expect_error(a, [&] { a.copy_(u); }, {"copy_: undefined tensor"});
  expect_error(a, [&] { a.copy_(ones({2, 6})); }, {"copy_: source sizes [2, 6]", "destination sizes [6]"});
  test::expect_msg([&] { Tensor(u).fill_(1); }, "fill_: undefined tensor");
  test::expect_msg([&] { g.get({0, 0}); }, "get: element access needs a CPU tensor, this one is on cuda");
  test::expect_msg([&] { empty({2}, DType::Float32, Device::cpu(), MemoryFormat::Preserve); },
                   "empty: memory format Preserve");
  test::expect_msg([&] { empty_strided({2, 3}, {1}); }, "empty_strided: sizes [2, 3] and strides [1]");
  test::expect_msg([&] { empty_strided({2, 3}, {-3, 1}); }, "empty_strided: negative strides");
  test::expect_msg([&] { empty_strided({int64_t{1} << 40, 2}, {int64_t{1} << 40, 1}); },
                   "empty_strided: sizes [1099511627776, 2] with strides [1099511627776, 1] overflow int64");
  test::expect_msg([&] { arange(0.0, 5.0, 0.0); }, "arange: step must be nonzero");
  test::expect_msg([&] { arange(5.0, 0.0, 1.0); }, "arange: upper bound 0 and lower bound 5 inconsistent with step sign 1");
  // elementwise and normalize
  Tensor x = ones({2, 3}), out = zeros({2, 3});
  Tensor uo;
  expect_error(x, [&] { add_out(uo, x, x); }, {"add_out: undefined output tensor"});
  expect_error(x, [&] { add(u, x); }, {"add: undefined input tensor"});
  expect_error(x, [&] { add_out(out, u, 1.0); }, {"add_out: undefined input tensor"});
  expect_error(x, [&] { add(u, 1.0); }, {"add: undefined input tensor"});
  expect_error(x, [&] { relu_out(out, u); }, {"relu_out: undefined input tensor"});
  expect_error(x, [&] { relu(u); }, {"relu: undefined input tensor"});
  expect_error(x, [&] { add_out(g, x, x); }, {"add_out: output is on cuda", "inputs are on cpu"});
  expect_error(x, [&] { add(x, g); }, {"add: expected both inputs on one device, got cpu and cuda"});
  expect_error(out, [&] { normalize_out(out, u, 1); }, {"normalize_out: undefined input tensor"});
  expect_error(out, [&] { normalize_out(out, x, 1, -1e-5); }, {"normalize_out: eps must be >= 0, got -1e-05"});
  test::expect_msg([&] { normalize(u, 1); }, "normalize: undefined input tensor");
  test::expect_msg([&] { normalize(x, 1, -1.0); }, "normalize: eps must be >= 0, got -1");
  // matmul, conv2d, reductions
  Tensor sq = ones({3, 3}), sq_out = zeros({3, 3});
  test::expect_msg([&] { matmul(u, sq); }, "matmul: undefined operand");
  test::expect_msg([] { gemm_workspace_bytes(4, 4, 4, DType::Int32, 1); },
                   "gemm_workspace_bytes: expected float32, float64 or bfloat16, got int32");
  expect_error(sq, [&] { matmul_out(uo, sq, sq); }, {"matmul_out: undefined out"});
  Tensor img = ones({1, 4, 5, 5}), w = ones({6, 1, 3, 3});
  test::expect_msg([&] { conv2d(u, w); }, "conv2d: undefined input or weight");
  Conv2dParams groups4;
  groups4.groups = 4;
  test::expect_msg([&] { conv2d(img, w, Tensor(), groups4); }, "conv2d: output channels 6 not divisible by groups 4");
  Tensor w4 = ones({4, 4, 3, 3});
  test::expect_msg([&] { conv2d(img, w4, test::fake_cuda({4})); }, "conv2d: device mismatch: input on cpu, bias on cuda");
  Tensor gimg = test::fake_cuda({1, 4, 3, 3});
  expect_error(img, [&] { conv2d_out(gimg, img, w4); }, {"conv2d_out: out on cuda", "input on cpu"});
  Tensor spread = ones({1, 4, 1, 1}).expand({1, 4, 3, 3});
  expect_error(spread, [&] { conv2d_out(spread, img, w4); }, {"conv2d_out: out has overlapping elements"});
  Tensor gsum = test::fake_cuda({2});
  expect_error(x, [&] { sum_out(gsum, x, {1}); }, {"sum_out: output on cuda", "input on cpu"});
  // Linear and Mlp
  Tensor wl = ones({4, 3}), bl = zeros({4});
  test::expect_msg([&] { Linear(wl.to(DType::Float64), bl, Precision::F32); }, "Linear: expected a float32 weight, got float64");
  test::expect_msg([&] { Linear(wl, bl.to(DType::Float64), Precision::F32); },
                   "Linear: expected a float32 bias on cpu (the weight's device), got float64 on cpu");
  const Linear lin(wl, bl, Precision::F32);
  test::expect_msg([&] { lin.forward(test::fake_cuda({2, 3})); }, "expected the input on cpu");
  test::expect_msg([&] { Mlp({wl, wl}, {bl, bl}, Precision::F32); }, "Mlp: expected 3 weights and 3 biases, got 2 and 2");
  test::expect_msg([&] { relative_error(ones({2}), ones({3})); }, "relative_error: sizes [2] vs [3]");
}

#ifndef SB_WITH_CUDA
// A build without CUDA (the sanitizer and portable builds of `scripts/run test`): a
// tensor on a CUDA device (fake_cuda: host memory under the device's name) gets each
// family's "no CUDA" error, naming the op and the device, before any work; out= forms
// reach the families' own checks, as an out-of-place op stops at allocating its output.
TEST(Errors, WithoutCudaEveryFamilySaysSo) {
  const Tensor x = ones({2, 3});
  const Tensor g = test::fake_cuda({2, 3}), g33 = test::fake_cuda({3, 3});
  Tensor g1 = test::fake_cuda({2});
  Tensor go = test::fake_cuda({2, 3}), go22 = test::fake_cuda({2, 2});
  test::expect_msg([&] { empty({2}, DType::Float32, Device::cuda()); },
                   "device cuda:0: stridebench was built without CUDA (meson option cuda)");
  test::expect_msg([&] { go.copy_(x); }, "copy_: cpu -> cuda:0 needs CUDA, and stridebench was built without it");
  test::expect_msg([&] { go.fill_(1.0); }, "fill_: device cuda:0 needs CUDA");
  test::expect_msg([&] { relu_out(go, g); }, "relu_out: tensor on cuda:0 needs CUDA");
  test::expect_msg([&] { add_out(go, g, g); }, "add_out: tensor on cuda:0 needs CUDA");
  test::expect_msg([&] { normalize_out(go, g, 1); }, "normalize_out: tensor on cuda:0 needs CUDA");
  test::expect_msg([&] { sum_out(g1, g, {1}); }, "sum_out: input on cuda:0 needs CUDA");
  test::expect_msg([&] { matmul_out(go22, g, test::fake_cuda({3, 2})); }, "matmul: no backend for device cuda:0 in this build");
  Tensor gimg = test::fake_cuda({1, 3, 4, 4}), gw = test::fake_cuda({4, 3, 3, 3}), gy = test::fake_cuda({1, 4, 2, 2});
  test::expect_msg([&] { conv2d_out(gy, gimg, gw); }, "conv2d: no backend for device cuda:0 in this build");
  Tensor gp = test::fake_cuda({1, 3, 2, 2});
  test::expect_msg([&] { max_pool2d_out(gp, gimg, Pool2dParams{}); }, "max_pool2d_out: expected a CPU tensor, got cuda:0");
  test::expect_msg([&] { Linear(g33, g33.narrow(0, 0, 1).view({3}), Precision::F32); },
                   "Linear: weight on cuda:0 in a build without CUDA");
}
#endif

TEST(Errors, ChannelsLastNeeds4D) {
  Tensor a = zeros({2, 3, 4});
  expect_error(a, [&] { a.contiguous(MemoryFormat::ChannelsLast); }, {"contiguous", "ChannelsLast", "[2, 3, 4]"});
  EXPECT_THROW(empty({2, 3}, DType::Float32, Device::cpu(), MemoryFormat::ChannelsLast), Error);
  test::expect_msg([] { channels_last_strides({2, 3, 4}); }, "ChannelsLast: expected a 4-D (NCHW) tensor, got 3-D sizes [2, 3, 4]");
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
