#include "gpucap/core/window_stats.hpp"

#include <gtest/gtest.h>

namespace gpucap {
namespace {

TEST(WindowAccumulator, MaxMeanAndP95) {
  WindowAccumulator acc;
  for (int i = 100; i >= 1; --i) acc.add(static_cast<double>(i));
  const auto stats = acc.stats(0.0, 1.0);
  EXPECT_EQ(stats.samples, 100u);
  EXPECT_DOUBLE_EQ(stats.max_w, 100.0);
  EXPECT_DOUBLE_EQ(stats.mean_w, 50.5);
  EXPECT_DOUBLE_EQ(stats.p95_w, 95.0);
  EXPECT_DOUBLE_EQ(stats.duration_s(), 1.0);
}

TEST(WindowAccumulator, EmptyWindowHasNoSamplesAndResetStartsOver) {
  WindowAccumulator acc;
  EXPECT_TRUE(acc.stats(2.0, 3.0).empty());
  acc.add(120.0);
  acc.reset();
  acc.add(60.0);
  EXPECT_DOUBLE_EQ(acc.stats(0, 1).max_w, 60.0);
  EXPECT_EQ(acc.count(), 1u);
}

TEST(WindowAccumulator, HugeWindowsStayBoundedAndAccurate) {
  // Past kExactSamples the percentile comes from a 0.1-W histogram: within one bin.
  WindowAccumulator acc;
  const std::size_t n = 3000 * 100;  // well past kExactSamples
  ASSERT_GT(n, WindowAccumulator::kExactSamples);
  for (std::size_t i = 0; i < n; ++i) acc.add(50.0 + 100.0 * static_cast<double>(i % 1000) / 1000.0);
  const auto stats = acc.stats(0, 1);
  EXPECT_EQ(stats.samples, n);
  EXPECT_NEAR(stats.p95_w, 144.9, 0.11);  // exact value 144.9, one 0.1-W bin of tolerance
  EXPECT_DOUBLE_EQ(stats.max_w, 149.9);
  EXPECT_NEAR(stats.mean_w, 99.95, 1e-9);
}

}  // namespace
}  // namespace gpucap
