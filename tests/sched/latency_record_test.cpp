// LatencyRecord: exact figures while it keeps every sample, bounded memory and figures at most
// 1 % high once it has folded them into its histogram.

#include "gpucap/sched/latency_record.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "gpucap/core/error.hpp"
#include "gpucap/sched/simulator.hpp"

namespace gpucap::sched {
namespace {

TEST(LatencyRecord, ExactWhileItKeepsEverySample) {
  LatencyRecord record(5.0);  // slo 5 ms
  EXPECT_EQ(record.count(), 0);
  EXPECT_EQ(record.percentile(99), 0.0);
  const std::vector<double> samples = {0.005, 0.001, 0.004, 0.002, 0.003, 0.0051};
  for (const double s : samples) record.add(s);
  EXPECT_TRUE(record.exact());
  EXPECT_EQ(record.samples(), samples);  // in the order recorded
  for (const double p : {1.0, 20.0, 50.0, 95.0, 100.0}) EXPECT_EQ(record.percentile(p), nearest_rank_percentile(samples, p)) << p;
  EXPECT_EQ(record.within_slo(), 5);
  EXPECT_EQ(record.min_s(), 0.001);
  EXPECT_EQ(record.max_s(), 0.0051);
  EXPECT_NEAR(record.mean_s(), 0.0201 / 6, 1e-15);
  EXPECT_THROW(record.add(-1.0), Error);
  EXPECT_THROW(record.add(std::nan("")), Error);
}

// Three times kExactSamples latencies spread over five decades. The memory bound checked: what the
// record holds (storage_bytes(), the capacity of its vectors) never passes kExactSamples doubles
// (8 MiB) on the way, and is the histogram's bucket_count() counters (about 22 KiB) after the
// fold; the percentiles stay within [true, true × 1.01]; count, min, max, mean and the SLO count
// stay exact.
TEST(LatencyRecord, BoundedMemoryAndFiguresAtMostOnePercentHighPastTheExactSamples) {
  const std::size_t n = 3 * LatencyRecord::kExactSamples;
  std::mt19937_64 random(7);
  std::uniform_real_distribution<double> exponent(-5.0, 0.0);
  std::vector<double> all;
  all.reserve(n);
  LatencyRecord record(10.0);
  std::int64_t within = 0;
  double sum = 0.0;
  std::size_t largest_storage = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double s = std::pow(10.0, exponent(random));
    all.push_back(s);
    sum += s;
    if (s * 1e3 <= 10.0) ++within;
    record.add(s);
    if (i + 1 == LatencyRecord::kExactSamples) {
      EXPECT_TRUE(record.exact());
      EXPECT_EQ(record.percentile(99), nearest_rank_percentile(all, 99));
    }
    if ((i & 0xffff) == 0 || i + 1 == LatencyRecord::kExactSamples) largest_storage = std::max(largest_storage, record.storage_bytes());
  }
  EXPECT_LE(largest_storage, LatencyRecord::kExactSamples * sizeof(double));
  EXPECT_FALSE(record.exact());
  EXPECT_TRUE(record.samples().empty());
  EXPECT_EQ(record.storage_bytes(), LatencyRecord::bucket_count() * sizeof(std::uint64_t));
  EXPECT_LT(record.storage_bytes(), 32U * 1024U);
  EXPECT_EQ(record.count(), static_cast<std::int64_t>(n));
  EXPECT_EQ(record.within_slo(), within);
  EXPECT_EQ(record.min_s(), *std::min_element(all.begin(), all.end()));
  EXPECT_EQ(record.max_s(), *std::max_element(all.begin(), all.end()));
  EXPECT_NEAR(record.mean_s(), sum / static_cast<double>(n), 1e-12);
  std::sort(all.begin(), all.end());
  for (const double p : {0.001, 1.0, 50.0, 95.0, 99.0, 99.9, 100.0}) {
    const double truth = nearest_rank_percentile(all, p);
    EXPECT_GE(record.percentile(p), truth) << p;
    EXPECT_LE(record.percentile(p), truth * (1.0 + LatencyRecord::kRelativeError) * (1.0 + 1e-12)) << p;
  }
  EXPECT_EQ(record.percentile(100), record.max_s());
}

TEST(LatencyRecord, LatenciesOutsideTheBucketsStayWithinTheExactExtremes) {
  LatencyRecord record;
  for (std::size_t i = 0; i <= LatencyRecord::kExactSamples; ++i) record.add(i % 2 == 0 ? 0.0 : 5e6);
  ASSERT_FALSE(record.exact());
  // Below kSmallestS: the first bucket's edge, at most kSmallestS high. Past kLargestS: the exact
  // maximum, never lower than the truth.
  EXPECT_EQ(record.percentile(40), LatencyRecord::kSmallestS);
  EXPECT_EQ(record.percentile(60), 5e6);
  EXPECT_EQ(record.percentile(100), 5e6);
  EXPECT_EQ(record.within_slo(), 0);  // no SLO given
}

}  // namespace
}  // namespace gpucap::sched
