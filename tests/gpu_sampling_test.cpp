// gpu_sampling_test.cpp — the GPU rows' stopping rule (Note [GPU rows stop on their
// noise], benchmarks/gpu_sampling.h) on synthetic samples: it stops on its noise, not
// before min_samples, at its time cap when the noise stays high, leaves throttled
// samples out, and reports the median, spread and standard error of what it kept.
#include "gpu_sampling.h"

#include <gtest/gtest.h>

#include <random>

namespace sb::bench {
namespace {

TEST(GpuSampling, SteadySamplesStopAtMinSamples) {
  int calls = 0;
  const SampleSummary s = sample_until_steady([&] { return Sample{1e-3 * (1 + 1e-4 * (calls++ % 3)), false}; }, StopRule{});
  EXPECT_EQ(calls, 10);
  EXPECT_TRUE(s.steady);
  EXPECT_EQ(s.kept, 10);
  EXPECT_EQ(s.throttled, 0);
  EXPECT_NEAR(s.median, 1.0001e-3, 1e-12);
  EXPECT_NEAR(s.spread, 1e-4, 1e-7);
  EXPECT_LT(s.rse, 0.005);
}

TEST(GpuSampling, NoisySamplesRunUntilTheErrorIsSmall) {
  std::mt19937_64 rng(3);
  std::normal_distribution<double> noise(1.0, 0.05);  // 5% per sample: rse 0.5% needs ~100
  int calls = 0;
  StopRule rule;
  rule.max_seconds = 1e9;
  const SampleSummary s = sample_until_steady([&] { ++calls; return Sample{1e-3 * noise(rng), false}; }, rule);
  EXPECT_TRUE(s.steady);
  EXPECT_GT(calls, 50);
  EXPECT_LT(calls, 200);
  EXPECT_LE(s.rse, 0.005);
  EXPECT_NEAR(s.median, 1e-3, 3e-5);
}

TEST(GpuSampling, TimeCapStopsANoisyRowAndSaysSo) {
  int calls = 0;
  StopRule rule;
  rule.max_seconds = 0.05;  // 50 samples of 1 ms
  const SampleSummary s = sample_until_steady([&] { return Sample{(calls++ % 2 ? 0.5e-3 : 1.5e-3), false}; }, rule);
  EXPECT_FALSE(s.steady);
  EXPECT_EQ(calls, 50);
  EXPECT_EQ(s.kept, 50);
  EXPECT_NEAR(s.spread, 0.5, 1e-12);  // range 1 ms over a median of 1 ms
}

TEST(GpuSampling, MinSamplesBeforeTheTimeCap) {
  int calls = 0;
  StopRule rule;
  rule.max_seconds = 1e-3;  // spent by the first sample
  const SampleSummary s = sample_until_steady([&] { return Sample{(++calls % 2 ? 1e-3 : 3e-3), false}; }, rule);
  EXPECT_EQ(calls, 10);
  EXPECT_FALSE(s.steady);
}

TEST(GpuSampling, ThrottledSamplesAreLeftOutAndCounted) {
  int calls = 0;
  const SampleSummary s = sample_until_steady(
      [&] {
        const bool slow = calls++ % 4 == 3;  // every fourth sample at a low clock, twice as long
        return Sample{slow ? 2e-3 : 1e-3, slow};
      },
      StopRule{});
  EXPECT_TRUE(s.steady);
  EXPECT_EQ(s.kept, 10);
  EXPECT_EQ(s.throttled, 3);
  EXPECT_EQ(s.median, 1e-3);
  EXPECT_EQ(s.spread, 0);
}

TEST(GpuSampling, AllThrottledKeepsThemAllAndIsNotSteady) {
  StopRule rule;
  rule.max_seconds = 0.02;
  const SampleSummary s = sample_until_steady([&] { return Sample{1e-3, true}; }, rule);
  EXPECT_FALSE(s.steady);
  EXPECT_EQ(s.kept, 0);
  EXPECT_EQ(s.throttled, 20);
  EXPECT_EQ(s.median, 1e-3);
}

}  // namespace
}  // namespace sb::bench
