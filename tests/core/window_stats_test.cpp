#include "gpucap/core/window_stats.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace gpucap {
namespace {

TEST(WindowStats, MaxMeanAndP95) {
  std::vector<PowerSample> samples;
  for (int i = 1; i <= 100; ++i) samples.push_back({i * 0.01, static_cast<double>(i)});
  const auto stats = summarize_window(samples, 0.0, 1.0);
  EXPECT_EQ(stats.samples, 100u);
  EXPECT_DOUBLE_EQ(stats.max_w, 100.0);
  EXPECT_DOUBLE_EQ(stats.mean_w, 50.5);
  EXPECT_DOUBLE_EQ(stats.p95_w, 95.0);
  EXPECT_DOUBLE_EQ(stats.duration_s(), 1.0);
}

TEST(WindowStats, EmptyWindowHasNoSamples) {
  const auto stats = summarize_window({}, 2.0, 3.0);
  EXPECT_TRUE(stats.empty());
  EXPECT_DOUBLE_EQ(stats.max_w, 0.0);
}

}  // namespace
}  // namespace gpucap
