// gpu_sampling.h — the GPU rows' stopping rule (Note [GPU rows stop on their noise]),
// kept free of CUDA so that tests/gpu_sampling_test.cpp checks it on any machine.
//
// Note [GPU rows stop on their noise]
// As nvbench does (docs/benchmarks.md there: --max-noise, --min-samples, --timeout), a
// GPU row takes samples until its noise is measured, not a fixed number of them: each
// sample is one batched event interval (Note [Batched GPU timing]); sampling stops once
// at least min_samples are kept and the relative standard error of their mean,
// s / (mean sqrt(n)), is at most max_rse, or when the samples' own time passes
// max_seconds (then the row is reported as not steady), or at max_samples. A sample
// whose SM clock, read before or after it (NVML), sat below throttle x the maximum SM
// clock is flagged as throttled and left out; if every sample is, they are all kept and
// the row is not steady. The row reports the median of the kept samples, their count,
// the throttled count, the relative standard error and half the range over the median.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace sb::bench {

struct StopRule {
  int min_samples = 10;
  double max_rse = 0.005;     // relative standard error of the mean
  double max_seconds = 1.0;   // of sampled time
  int max_samples = 100000;
};

struct Sample {
  double seconds;
  bool throttled;
};

struct SampleSummary {
  double median = 0, rse = 0, spread = 0;  // spread: half the range over the median
  int kept = 0, throttled = 0;
  bool steady = false;  // stopped on its noise, with unthrottled samples
};

// The summary of `samples`: over the unthrottled ones, or over all when none is.
inline SampleSummary summarize(const std::vector<Sample>& samples, double max_rse) {
  SampleSummary r;
  std::vector<double> v;
  for (const Sample& s : samples) {
    if (s.throttled) ++r.throttled;
    else v.push_back(s.seconds);
  }
  const bool all_throttled = v.empty();
  if (all_throttled)
    for (const Sample& s : samples) v.push_back(s.seconds);
  r.kept = all_throttled ? 0 : static_cast<int>(v.size());
  if (v.empty()) return r;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  r.median = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
  double mean = 0;
  for (double x : v) mean += x;
  mean /= static_cast<double>(n);
  double ss = 0;
  for (double x : v) ss += (x - mean) * (x - mean);
  const double sd = n > 1 ? std::sqrt(ss / static_cast<double>(n - 1)) : 0.0;
  r.rse = n > 1 && mean > 0 ? sd / (mean * std::sqrt(static_cast<double>(n))) : INFINITY;
  r.spread = r.median > 0 ? (v.back() - v.front()) / 2 / r.median : 0;
  r.steady = !all_throttled && r.rse <= max_rse;
  return r;
}

// Takes samples with take() (a Sample) until the rule says stop; returns their summary.
// The rule is checked on running sums of the kept samples (Welford), so each check is
// O(1).
template <typename F>
SampleSummary sample_until_steady(F&& take, const StopRule& rule) {
  std::vector<Sample> samples;
  double spent = 0, mean = 0, m2 = 0;
  int64_t kept = 0;
  while (static_cast<int>(samples.size()) < rule.max_samples) {
    const Sample s = take();
    samples.push_back(s);
    spent += s.seconds;
    if (!s.throttled) {
      ++kept;
      const double d = s.seconds - mean;
      mean += d / static_cast<double>(kept);
      m2 += d * (s.seconds - mean);
    }
    if (kept >= rule.min_samples && kept > 1 && mean > 0) {
      const double rse = std::sqrt(m2 / static_cast<double>(kept - 1)) / (mean * std::sqrt(static_cast<double>(kept)));
      if (rse <= rule.max_rse) return summarize(samples, rule.max_rse);
    }
    if (spent >= rule.max_seconds && static_cast<int>(samples.size()) >= rule.min_samples) break;
  }
  SampleSummary r = summarize(samples, rule.max_rse);
  r.steady = false;
  return r;
}

}  // namespace sb::bench
