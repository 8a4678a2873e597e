// cuda_stream_test.cpp — the GPU's STREAM kernels (lib/cuda/stream.cu, Note [GPU stream
// kernels]), the ceilings of the memory-bound GPU rows: every op on sizes around the
// float4 groups and the grid (tails of 1-3 elements, more elements than threads),
// outputs poisoned, against float64 (float for the products the kernel rounds);
// bad tensors refused. Skipped without a GPU, or in a build without CUDA.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "test_util.h"

#ifdef SB_WITH_CUDA
#include "cuda/cuda_backend.h"
#endif

namespace sb {
namespace {

#ifdef SB_WITH_CUDA
TEST(CudaStream, EveryOpMatchesTheReference) {
  SB_SKIP_WITHOUT_DEVICE(Device::cuda(0));
  const Device g = Device::cuda(0);
  using cuda::StreamOp;
  for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{3}, int64_t{4}, int64_t{1001}, int64_t{4099}, (int64_t{1} << 20) + 3}) {
    const std::vector<double> va = test::random_values({n}, 1 + n, DType::Float32, -1, 1);
    const std::vector<double> vb = test::random_values({n}, 2 + n, DType::Float32, -1, 1);
    const Tensor a = test::host_tensor(va, {n}, DType::Float32).to(g), b = test::host_tensor(vb, {n}, DType::Float32).to(g);
    const std::vector<double> fa = a.to(Device::cpu()).to_vector(), fb = b.to(Device::cpu()).to_vector();
    for (StreamOp op : {StreamOp::Read, StreamOp::Copy, StreamOp::Scale, StreamOp::Add, StreamOp::Triad}) {
      const int64_t m = op == StreamOp::Read ? std::max<int64_t>(n, cuda::stream_blocks()) : n;
      Tensor c = empty({m}, DType::Float32, g);
      test::poison(c);
      if (op == StreamOp::Read) c.zero_();  // blocks with no work leave their sums alone
      cuda::stream(op, c, a, b, 0.5);
      const std::vector<double> vc = test::naive_values(c);
      const std::string what = "op " + std::to_string(static_cast<int>(op)) + " n " + std::to_string(n);
      if (op == StreamOp::Read) {
        double sum = 0, ref = 0, l1 = 0;
        for (double x : vc) sum += x;
        for (double x : fa) ref += x, l1 += std::fabs(x);
        EXPECT_NEAR(sum, ref, 1e-6 * l1 + 1e-12) << what;
        continue;
      }
      for (int64_t i = 0; i < n; ++i) {
        const float x = static_cast<float>(fa[i]), y = static_cast<float>(fb[i]);
        const float want = op == StreamOp::Copy ? x : op == StreamOp::Scale ? 0.5f * x : op == StreamOp::Add ? x + y : x + 0.5f * y;
        ASSERT_EQ(static_cast<float>(vc[i]), want) << what << " at " << i;
      }
    }
  }
}

TEST(CudaStream, BadTensorsAreRefused) {
  SB_SKIP_WITHOUT_DEVICE(Device::cuda(0));
  const Device g = Device::cuda(0);
  const Tensor a = zeros({8}, DType::Float32, g), small = zeros({4}, DType::Float32, g);
  Tensor c = zeros({8}, DType::Float32, g), host = zeros({8});
  test::expect_msg([&] { cuda::stream(cuda::StreamOp::Copy, c, a.to(DType::Float64), a, 1); }, "cuda::stream: a must be");
  test::expect_msg([&] { cuda::stream(cuda::StreamOp::Add, c, a, small, 1); }, "cuda::stream: b must be");
  test::expect_msg([&] { cuda::stream(cuda::StreamOp::Copy, host, a, a, 1); }, "cuda::stream: c must be");
}
#else
TEST(CudaStream, NeedsACudaBuild) { GTEST_SKIP() << "built without CUDA"; }
#endif

}  // namespace
}  // namespace sb
