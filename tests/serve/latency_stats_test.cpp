#include "gpucap/serve/latency_stats.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "gpucap/core/error.hpp"

namespace gpucap::serve {
namespace {

constexpr double kMs = 1e-3;
constexpr double kTolerance = 1.0 + LatencyStats::kRelativeError;

LatencyStatsConfig config_with(double window_s, int slots, double slo_s) {
  LatencyStatsConfig config;
  config.window_s = window_s;
  config.slots = slots;
  config.slo_s = slo_s;
  return config;
}

void expect_usage_error_naming(const LatencyStatsConfig& config, const std::string& field) {
  try {
    LatencyStats stats(config);
    FAIL() << "expected a usage error naming " << field;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::usage);
    EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
  }
}

// The reported percentile is never below the true nearest-rank value and at most 1 % above it.
void expect_within_bucket(double reported_s, double true_s) {
  EXPECT_GE(reported_s, true_s);
  EXPECT_LE(reported_s, true_s * kTolerance);
}

TEST(LatencyStats, ValidateNamesTheBadField) {
  expect_usage_error_naming(config_with(0.0, 10, 0.1), "window_s");
  expect_usage_error_naming(config_with(std::nan(""), 10, 0.1), "window_s");
  expect_usage_error_naming(config_with(10.0, 0, 0.1), "slots");
  expect_usage_error_naming(config_with(10.0, 1000000, 0.1), "slots");
  expect_usage_error_naming(config_with(10.0, 10, 0.0), "slo_s");
  EXPECT_NO_THROW(LatencyStats{config_with(10.0, 10, 0.1)});
}

TEST(LatencyStats, EmptyWindowReportsNothingAndFullAttainment) {
  const LatencyStats stats(config_with(10.0, 10, 0.1));
  const LatencySummary s = stats.summary(3.0);
  EXPECT_EQ(s.answered(), 0u);
  EXPECT_EQ(s.p99_s, 0.0);
  EXPECT_EQ(s.max_s, 0.0);
  EXPECT_EQ(s.slo_attainment, 1.0);
  EXPECT_EQ(s.arrival_rate_per_s, 0.0);
  EXPECT_EQ(stats.percentile_s(0.99, 3.0), 0.0);
}

TEST(LatencyStats, PercentilesOfOneToHundredMilliseconds) {
  LatencyStats stats(config_with(10.0, 10, 0.1));
  for (int i = 100; i >= 1; --i) stats.record(0.5, i * kMs, true);  // order must not matter
  const LatencySummary s = stats.summary(0.5);
  EXPECT_EQ(s.ok, 100u);
  expect_within_bucket(s.p50_s, 50 * kMs);
  expect_within_bucket(s.p95_s, 95 * kMs);
  expect_within_bucket(s.p99_s, 99 * kMs);
  EXPECT_DOUBLE_EQ(s.max_s, 100 * kMs) << "max is exact";
  EXPECT_NEAR(s.mean_s, 50.5 * kMs, 1e-12) << "mean is exact";
  EXPECT_DOUBLE_EQ(stats.percentile_s(1.0, 0.5), 100 * kMs);
  expect_within_bucket(stats.percentile_s(0.01, 0.5), 1 * kMs);
  EXPECT_EQ(stats.percentile_s(0.5, 0.5), s.p50_s);
  EXPECT_LT(s.p50_s, s.p95_s);
  EXPECT_LT(s.p95_s, s.p99_s);
}

TEST(LatencyStats, RandomLatenciesStayWithinOneBucketOfTheExactNearestRank) {
  LatencyStats stats(config_with(10.0, 10, 0.1));
  std::mt19937 rng(42);
  std::lognormal_distribution<double> latency(std::log(20 * kMs), 0.8);
  std::vector<double> values;
  for (int i = 0; i < 5000; ++i) {
    values.push_back(latency(rng));
    stats.record(1.0 + i * 1e-4, values.back(), true);  // 1.0 .. 1.5 s
  }
  std::sort(values.begin(), values.end());
  for (const double q : {0.1, 0.5, 0.9, 0.95, 0.99, 0.999}) {
    const auto rank = static_cast<std::size_t>(std::ceil(q * static_cast<double>(values.size()) - 1e-9));
    SCOPED_TRACE(q);
    expect_within_bucket(stats.percentile_s(q, 1.5), values[rank - 1]);
  }
}

TEST(LatencyStats, ValuesOnAndBesideBucketEdgesAreNeverUnderReported) {
  // Rounding in the logarithm can put a value just past an edge into the bucket below; the
  // reported percentile must still not be lower than the value. One window per probe: a tiny
  // latency (the exact minimum), the probe, and a large one (the exact maximum), so the median
  // is the probe and neither exact bound can hide a wrong bucket.
  LatencyStats stats(config_with(1.0, 1, 0.1));
  int under = 0;
  int probes = 0;
  for (std::size_t i = 1; i + 1 < LatencyStats::bucket_count(); ++i) {
    const double edge_s =
        LatencyStats::kSmallestLatencyS * std::pow(1.0 + LatencyStats::kRelativeError, static_cast<double>(i));
    for (const double probe_s : {std::nextafter(edge_s, 0.0), edge_s, std::nextafter(edge_s, 1e9)}) {
      const double t = static_cast<double>(++probes);
      stats.record(t, 1e-7, true);
      stats.record(t, probe_s, true);
      stats.record(t, 2e4, true);
      const double reported_s = stats.percentile_s(0.5, t);
      if (reported_s < probe_s || reported_s > probe_s * kTolerance * (1 + 1e-12)) ++under;
    }
  }
  EXPECT_GT(probes, 2000);
  EXPECT_EQ(under, 0);
}

TEST(LatencyStats, IdenticalLatenciesAreReportedExactly) {
  LatencyStats stats(config_with(10.0, 10, 0.1));
  for (int i = 0; i < 1000; ++i) stats.record(2.0, 7 * kMs, true);
  const LatencySummary s = stats.summary(2.0);
  EXPECT_DOUBLE_EQ(s.p50_s, 7 * kMs);
  EXPECT_DOUBLE_EQ(s.p99_s, 7 * kMs);
  LatencyStats huge(config_with(10.0, 10, 0.1));
  huge.record(2.0, 2e4, true);  // beyond the last bucket edge: the exact max still holds
  EXPECT_DOUBLE_EQ(huge.summary(2.0).p99_s, 2e4);
}

TEST(LatencyStats, SloAttainmentCountsFailuresAsMissesButKeepsThemOutOfPercentiles) {
  LatencyStats stats(config_with(10.0, 10, 50 * kMs));
  for (int i = 1; i <= 100; ++i) stats.record(1.0, i * kMs, true);
  LatencySummary s = stats.summary(1.0);
  EXPECT_EQ(s.within_slo, 50u) << "1..50 ms are within a 50-ms SLO (<=)";
  EXPECT_DOUBLE_EQ(s.slo_attainment, 0.5);
  const double p50_before_s = s.p50_s;

  for (int i = 0; i < 100; ++i) stats.record(1.0, 0.0, false);  // e.g. rejected at once
  s = stats.summary(1.0);
  EXPECT_EQ(s.failed, 100u);
  EXPECT_EQ(s.answered(), 200u);
  EXPECT_DOUBLE_EQ(s.slo_attainment, 0.25);
  EXPECT_EQ(s.p50_s, p50_before_s) << "fast failures do not lower the latency percentiles";
}

TEST(LatencyStats, WindowSlidesOneSlotAtATime) {
  // 10-s window of 1-s slots: 10 ms answers in [0, 1), 100 ms answers in [10, 11).
  LatencyStats stats(config_with(10.0, 10, 0.1));
  for (int i = 0; i < 100; ++i) stats.record(i * 0.01, 10 * kMs, true);
  stats.record(6.5, 50 * kMs, true);

  const LatencySummary at5 = stats.summary(5.0);
  EXPECT_EQ(at5.ok, 100u) << "the 6.5-s answer is in a later slot";
  EXPECT_DOUBLE_EQ(at5.p99_s, 10 * kMs);

  const LatencySummary at9 = stats.summary(9.99);
  EXPECT_EQ(at9.ok, 101u);
  EXPECT_DOUBLE_EQ(at9.window_start_s, 0.0);
  EXPECT_DOUBLE_EQ(at9.max_s, 50 * kMs);

  for (int i = 0; i < 100; ++i) stats.record(10.0 + i * 0.01, 100 * kMs, true);

  const LatencySummary at10 = stats.summary(10.5);
  EXPECT_DOUBLE_EQ(at10.window_start_s, 1.0) << "slot [0, 1) has left the window";
  EXPECT_EQ(at10.ok, 101u) << "the 6.5-s answer and the 100 in [10, 10.5]";
  EXPECT_DOUBLE_EQ(at10.p50_s, 100 * kMs);
  EXPECT_DOUBLE_EQ(at10.max_s, 100 * kMs);

  // The window is the current slot and the 9 before it: slot [6, 7) leaves when slot [16, 17) starts.
  EXPECT_EQ(stats.summary(15.99).ok, 101u);
  EXPECT_EQ(stats.summary(16.0).ok, 100u);

  const LatencySummary at21 = stats.summary(21.0);
  EXPECT_EQ(at21.ok, 0u) << "everything has slid out";
  EXPECT_EQ(at21.p99_s, 0.0);
}

TEST(LatencyStats, SamplesOlderThanTheWindowAreDroppedLateOnesInsideAreKept) {
  LatencyStats stats(config_with(10.0, 10, 0.1));
  stats.record(25.0, 20 * kMs, true);
  stats.record(3.0, 900 * kMs, true);   // its slot was reused long ago: dropped
  stats.record(24.0, 30 * kMs, true);   // one second late, still in the window: kept
  const LatencySummary s = stats.summary(25.0);
  EXPECT_EQ(s.ok, 2u);
  EXPECT_DOUBLE_EQ(s.max_s, 30 * kMs);
}

TEST(LatencyStats, ArrivalRateOverTheWindow) {
  LatencyStats stats(config_with(10.0, 10, 0.1));
  EXPECT_EQ(stats.summary(0.0).arrival_rate_per_s, 0.0);
  for (int i = 0; i <= 200; ++i) stats.record_arrival(i * 0.01);  // 100 per second, 0..2 s
  // Warm-up: the window would reach back to -7 s, but nothing arrived before 0: 201 in 2 s.
  EXPECT_NEAR(stats.summary(2.0).arrival_rate_per_s, 100.5, 1e-9);
  for (int i = 201; i < 2000; ++i) stats.record_arrival(i * 0.01);  // on to 19.99 s
  const LatencySummary s = stats.summary(20.0);
  EXPECT_DOUBLE_EQ(s.window_start_s, 11.0);
  EXPECT_NEAR(static_cast<double>(s.arrivals), 900.0, 1.0) << "arrivals in [11, 20)";
  EXPECT_NEAR(s.arrival_rate_per_s, 100.0, 0.2);
  EXPECT_EQ(stats.summary(40.0).arrival_rate_per_s, 0.0) << "nothing arrived in the last window";
}

TEST(LatencyStats, MemoryStaysBoundedUnderManyRecords) {
  LatencyStats stats(config_with(10.0, 10, 0.1));
  const std::size_t bytes = stats.storage_bytes();
  EXPECT_GT(bytes, 0u);
  EXPECT_LT(bytes, std::size_t{256} * 1024) << "10 slots x ~2300 buckets";
  // 1,000,000 answers over 1000 s, 1000 per second.
  for (int i = 0; i < 1000000; ++i) {
    const double t = i * 1e-3;
    stats.record(t, (1 + i % 100) * kMs, true);
    stats.record_arrival(t);
  }
  EXPECT_EQ(stats.storage_bytes(), bytes);
  const LatencySummary s = stats.summary(999.9995);
  EXPECT_NEAR(static_cast<double>(s.ok), 10000.0, 2.0) << "only the last 10 one-second slots";
  EXPECT_NEAR(s.arrival_rate_per_s, 1000.0, 1.0);
  expect_within_bucket(s.p99_s, 99 * kMs);
}

TEST(LatencyStats, BadInputsAreUsageErrors) {
  LatencyStats stats(config_with(10.0, 10, 0.1));
  EXPECT_THROW(stats.record(1.0, -1 * kMs, true), Error);
  EXPECT_THROW(stats.record(std::nan(""), 1 * kMs, true), Error);
  EXPECT_THROW(stats.record(1.0, INFINITY, true), Error);
  EXPECT_THROW(stats.record_arrival(INFINITY), Error);
  EXPECT_THROW((void)stats.percentile_s(0.0, 1.0), Error);
  EXPECT_THROW((void)stats.percentile_s(1.5, 1.0), Error);
  EXPECT_EQ(stats.summary(1.0).answered(), 0u) << "rejected samples were not counted";
}

}  // namespace
}  // namespace gpucap::serve
