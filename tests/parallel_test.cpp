// parallel_test.cpp — sb::parallel_for (include/stridebench/parallel.h): every index of
// the range exactly once, in contiguous chunks of at least the grain, for teams of 1-4
// threads; and the kernels that split over it (an add, a GEMM's stripes) against
// references. meson runs this suite twice: as it is, and under OMP_THREAD_LIMIT=1,
// where OpenMP gives a region fewer threads than it asks for (the test
// parallel_thread_limit).
#include "stridebench/parallel.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <vector>

#include "stridebench/elementwise.h"
#include "stridebench/matmul.h"
#include "stridebench/tensor.h"
#include "test_util.h"

namespace sb {
namespace {

struct ThreadsGuard {
  explicit ThreadsGuard(int n) : prev(get_num_threads()) { set_num_threads(n); }
  ~ThreadsGuard() { set_num_threads(prev); }
  int prev;
};

TEST(Parallel, ForCoversEveryIndexOnce) {
  for (int threads : {1, 2, 3, 4})
    for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{7}, int64_t{1000}, int64_t{100003}})
      for (int64_t grain : {int64_t{1}, int64_t{64}, kGrainSize}) {
        ThreadsGuard g(threads);
        std::vector<std::atomic<int>> hits(static_cast<size_t>(n) + 2);
        std::atomic<int> chunks{0};
        parallel_for(1, n + 1, grain, [&](int64_t b, int64_t e) {
          EXPECT_LT(b, e);
          chunks.fetch_add(1);
          for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
        });
        for (int64_t i = 0; i < n + 2; ++i)
          ASSERT_EQ(hits[static_cast<size_t>(i)].load(), i >= 1 && i <= n ? 1 : 0)
              << "index " << i << " of [1, " << n + 1 << "), " << threads << " threads, grain " << grain;
        EXPECT_LE(chunks.load(), std::max<int64_t>(1, (n + grain - 1) / grain));
      }
}

TEST(Parallel, KernelsSplitOverThreadsCoverTheirOutputs) {
  ThreadsGuard g(2);
  const int64_t n = 1 << 20;  // above every grain: the add splits
  const Tensor x = randn({n}, 1), y = randn({n}, 2);
  Tensor out = empty({n});
  test::poison(out);
  add_out(out, x, y);
  const std::vector<double> vx = x.to_vector(), vy = y.to_vector(), vo = out.to_vector();
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(vo[static_cast<size_t>(i)], static_cast<double>(static_cast<float>(vx[i] + vy[i]))) << "add, element " << i;
  // a GEMM in stripes, one a thread
  const int64_t M = 64, K = 40, N = 512;
  const Tensor a = randn({M, K}, 3), b = randn({K, N}, 4);
  Tensor c = empty({M, N});
  test::poison(c);
  matmul_out(c, a, b);
  const std::vector<double> va = a.to_vector(), vb = b.to_vector(), vc = c.to_vector();
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double s = 0;
      for (int64_t k = 0; k < K; ++k) s += va[i * K + k] * vb[k * N + j];
      ASSERT_NEAR(vc[i * N + j], s, 1e-4 * (1 + std::abs(s))) << "matmul, C(" << i << ", " << j << ")";
    }
}

}  // namespace
}  // namespace sb
