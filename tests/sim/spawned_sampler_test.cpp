// The BatchDVFS harness's spawned nvidia-smi sampler: its schedule, the stalls it puts into a
// step, and the closed forms the calibration fits through, checked against brute force.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

#include "gpucap/core/error.hpp"
#include "gpucap/sim/spawned_sampler.hpp"

namespace gpucap::sim {
namespace {

// Processes start at 0, 0.1, 0.3, 0.4, 0.6, 0.7, ... (period 0.3 s).
const SpawnedSampler kSampler{0.1, 0.04, 0.1};

TEST(SpawnedSampler, ProcessesStartInPairsOncePerPeriod) {
  EXPECT_DOUBLE_EQ(kSampler.period_s(), 0.3);
  EXPECT_EQ(kSampler.process_starts(0.0, 0.35), 3);  // 0, 0.1, 0.3
  EXPECT_EQ(kSampler.process_starts(0.05, 0.09), 0);
  EXPECT_EQ(kSampler.process_starts(0.05, 0.11), 1);
  EXPECT_EQ(kSampler.process_starts(0.11, 0.29), 0) << "the sleep between the pairs";
  EXPECT_EQ(kSampler.process_starts(0.0, 3.0), 20);
  EXPECT_EQ(kSampler.process_starts(0.2, 0.2), 0);
  EXPECT_DOUBLE_EQ(kSampler.reading_time_s(0), 0.1) << "the controller's reading: the first process exits";
  EXPECT_DOUBLE_EQ(kSampler.reading_time_s(2), 0.7);
}

TEST(SpawnedSampler, WorkThatFeelsAShareOfEachStallIsLengthenedByThatShare) {
  EXPECT_DOUBLE_EQ(kSampler.stall_rate_hz(), 2.0 / 0.3);
  EXPECT_DOUBLE_EQ(kSampler.stalled_duration_s(0.05, 0.06, 0.5), 0.08) << "the start at 0.1, half of 40 ms";
  EXPECT_DOUBLE_EQ(kSampler.stalled_duration_s(0.05, 0.06, 0.0), 0.06) << "rides through";
  EXPECT_DOUBLE_EQ(kSampler.stalled_duration_s(0.05, 0.06, 1.0), kSampler.stalled_duration_s(0.05, 0.06));
  // Over a long stretch the work holds every start: 20 before 2.9 s, each 10 ms at a quarter share.
  EXPECT_NEAR(kSampler.stalled_duration_s(0.0, 2.7, 0.25), 2.9, 1e-12);
}

TEST(SpawnedSampler, AStepStallsOnceForEachProcessThatStartsInIt) {
  EXPECT_DOUBLE_EQ(kSampler.stalled_duration_s(0.12, 0.1), 0.1) << "[0.12, 0.22) holds no start";
  EXPECT_DOUBLE_EQ(kSampler.stalled_duration_s(0.02, 0.05), 0.05);
  EXPECT_DOUBLE_EQ(kSampler.stalled_duration_s(0.05, 0.06), 0.10) << "the start at 0.1";
  // From 0.25: the start at 0.3 stretches it to 0.35, then 0.39 s, which the start at 0.4 misses...
  EXPECT_DOUBLE_EQ(kSampler.stalled_duration_s(0.25, 0.1), 0.14);
  // ... and a little more work reaches it: two stalls.
  EXPECT_DOUBLE_EQ(kSampler.stalled_duration_s(0.25, 0.12), 0.20);
}

// Brute force over many start phases.
std::vector<double> stalled_steps(double work_s) {
  std::vector<double> steps;
  const int n = 30000;
  for (int i = 0; i < n; ++i) steps.push_back(kSampler.stalled_duration_s(kSampler.period_s() * (i + 0.5) / n, work_s));
  return steps;
}

TEST(SpawnedSampler, TheStallCountsDistributionMatchesBruteForce) {
  for (const double work_s : {0.03, 0.08, 0.15, 0.42, 1.7}) {
    const auto steps = stalled_steps(work_s);
    for (int k = 1; k <= 8; ++k) {
      const double at_least = static_cast<double>(std::count_if(steps.begin(), steps.end(), [&](double s) {
                                return s > work_s + (k - 0.5) * kSampler.stall_s;
                              })) / static_cast<double>(steps.size());
      EXPECT_NEAR(kSampler.stalled_at_least(k, work_s), at_least, 1e-3) << "work " << work_s << " s, k " << k;
    }
    EXPECT_DOUBLE_EQ(kSampler.stalled_at_least(0, work_s), 1.0);
  }
}

TEST(SpawnedSampler, TheMedianStepIsWithinHalfAStallOfBruteForceAndMovesContinuously) {
  for (const double work_s : {0.03, 0.08, 0.15, 0.42, 1.7}) {
    auto steps = stalled_steps(work_s);
    const auto middle = steps.begin() + static_cast<std::ptrdiff_t>(steps.size() / 2);
    std::nth_element(steps.begin(), middle, steps.end());
    EXPECT_NEAR(kSampler.median_step_s(work_s), *middle, kSampler.stall_s / 2 + 1e-9) << work_s;
  }
  // No jump anywhere: 1-µs steps in the work move the median by little.
  double previous = kSampler.median_step_s(0.01);
  for (double work_s = 0.01 + 1e-6; work_s < 0.6; work_s += 1e-3) {
    const double median = kSampler.median_step_s(work_s);
    EXPECT_LT(std::abs(median - previous), 0.02) << work_s;
    EXPECT_GE(median, work_s);
    previous = median;
  }
  const SpawnedSampler no_stall{0.1, 0.0, 0.1};
  EXPECT_DOUBLE_EQ(no_stall.median_step_s(0.2), 0.2);
}

TEST(SpawnedSampler, BackToBackStepsCatchEveryProcessStart) {
  // Each process lands in some step, so a second of stepping holds 2 / period stalls, whatever
  // the step (a little jitter keeps the steps from locking to the sampler's phase).
  for (const double work_s : {0.04, 0.09, 0.5}) {
    double t = 0.0, stalls = 0.0;
    for (int i = 0; i < 40000; ++i) {
      const double work = work_s * (1.0 + 0.2 * ((i * 7919) % 101 - 50) / 50.0);
      const double step = kSampler.stalled_duration_s(t, work);
      stalls += (step - work) / kSampler.stall_s;
      t += step;
    }
    EXPECT_NEAR(stalls / t, 2.0 / kSampler.period_s(), 0.02 * 2.0 / kSampler.period_s()) << work_s;
  }
}

TEST(SpawnedSampler, ImpossibleTimingsAreRejected) {
  EXPECT_NO_THROW(check_spawned_sampler(kSampler));
  EXPECT_THROW(check_spawned_sampler({0.0, 0.0, 0.1}), Error);
  EXPECT_THROW(check_spawned_sampler({0.1, 0.1, 0.1}), Error) << "a stall as long as a process";
  EXPECT_THROW(check_spawned_sampler({0.1, -0.01, 0.1}), Error);
  EXPECT_THROW(check_spawned_sampler({0.1, 0.05, -1.0}), Error);
}

}  // namespace
}  // namespace gpucap::sim
