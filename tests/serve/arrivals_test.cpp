// Arrival processes: Poisson and constant spacing at a rate or a rate schedule, and trace files.
// Statistical checks use fixed seeds and bounds of several standard deviations, so they are
// deterministic and far from flaky.

#include "gpucap/serve/arrivals.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "gpucap/core/error.hpp"

namespace gpucap::serve {
namespace {

void expect_error(const std::function<void()>& call, ErrorCode code, const std::string& fragment) {
  try {
    call();
    ADD_FAILURE() << "no error; expected one containing: " << fragment;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

std::vector<double> poisson(double rate, double end_s, std::uint64_t seed, std::uint64_t max = 10'000'000) {
  return all_arrivals(
      ArrivalProcess::from_schedule(RateSchedule::constant(rate), ArrivalSpacing::poisson, seed, end_s, max));
}

std::size_t count_in(const std::vector<double>& times, double from_s, double to_s) {
  return static_cast<std::size_t>(
      std::count_if(times.begin(), times.end(), [&](double t) { return t >= from_s && t < to_s; }));
}

// --- RateSchedule ---

TEST(RateScheduleTest, ParsesSecondsColonRate) {
  const auto schedule = RateSchedule::parse("0:50, 30:100,45:0");
  ASSERT_EQ(schedule.steps().size(), 3U);
  EXPECT_EQ(schedule.steps()[1], (RateStep{30.0, 100.0}));
  EXPECT_DOUBLE_EQ(schedule.rate_at(0.0), 50.0);
  EXPECT_DOUBLE_EQ(schedule.rate_at(29.99), 50.0);
  EXPECT_DOUBLE_EQ(schedule.rate_at(30.0), 100.0);
  EXPECT_DOUBLE_EQ(schedule.rate_at(1000.0), 0.0);
  EXPECT_DOUBLE_EQ(schedule.expected_arrivals(40.0), 30 * 50.0 + 10 * 100.0);
  EXPECT_DOUBLE_EQ(schedule.expected_arrivals(100.0), 30 * 50.0 + 15 * 100.0);
  EXPECT_EQ(schedule.to_string(), "0:50,30:100,45:0");
  EXPECT_EQ(RateSchedule::constant(12.5).to_string(), "12.5/s");
}

TEST(RateScheduleTest, RefusesBadSchedulesNamingTheProblem) {
  expect_error([] { (void)RateSchedule::parse(""); }, ErrorCode::usage, "empty");
  expect_error([] { (void)RateSchedule::parse("0:50,abc"); }, ErrorCode::usage, "'abc' is not TIME_S:RATE");
  expect_error([] { (void)RateSchedule::parse("5:50"); }, ErrorCode::usage, "must start at time 0");
  expect_error([] { (void)RateSchedule::parse("0:50,10:60,10:70"); }, ErrorCode::usage, "times must increase");
  expect_error([] { (void)RateSchedule::parse("0:-1"); }, ErrorCode::usage, "step 1: rate");
  expect_error([] { (void)RateSchedule::parse("0:0,10:0"); }, ErrorCode::usage, "no positive rate");
  expect_error([] { (void)RateSchedule::constant(0.0); }, ErrorCode::usage, "positive");
  expect_error([] { (void)parse_arrival_spacing("uniform"); }, ErrorCode::usage, "poisson or constant");
  EXPECT_EQ(parse_arrival_spacing("constant"), ArrivalSpacing::constant);
}

// --- Poisson ---

TEST(PoissonArrivalsTest, SameSeedSameTimesOtherSeedOtherTimes) {
  const auto a = poisson(100.0, 5.0, 7);
  const auto b = poisson(100.0, 5.0, 7);
  const auto c = poisson(100.0, 5.0, 8);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_TRUE(std::is_sorted(a.begin(), a.end()));
  EXPECT_GE(a.front(), 0.0);
  EXPECT_LT(a.back(), 5.0);
}

TEST(PoissonArrivalsTest, CountAndGapsFollowThePoissonProcess) {
  const double rate = 200.0;
  const double end_s = 100.0;
  const auto times = poisson(rate, end_s, 1);
  const double mean = rate * end_s;  // 20000; standard deviation sqrt(mean) ~ 141
  EXPECT_NEAR(static_cast<double>(times.size()), mean, 5.0 * std::sqrt(mean));
  // Exponential gaps: P(gap < 1/rate) = 1 - 1/e, P(gap < 3/rate) = 1 - e^-3.
  std::size_t short_gaps = 0;
  std::size_t under_three = 0;
  double previous = 0.0;
  for (const double t : times) {
    const double gap = t - previous;
    previous = t;
    short_gaps += gap < 1.0 / rate ? 1 : 0;
    under_three += gap < 3.0 / rate ? 1 : 0;
  }
  const double n = static_cast<double>(times.size());
  EXPECT_NEAR(static_cast<double>(short_gaps) / n, 1.0 - std::exp(-1.0), 0.015);
  EXPECT_NEAR(static_cast<double>(under_three) / n, 1.0 - std::exp(-3.0), 0.01);
  // Counts in disjoint windows are independent Poisson(rate * window): their variance ~ mean.
  std::vector<double> counts;
  for (int w = 0; w < 100; ++w) counts.push_back(static_cast<double>(count_in(times, w, w + 1.0)));
  double sum = 0.0;
  double sum_sq = 0.0;
  for (const double c : counts) {
    sum += c;
    sum_sq += c * c;
  }
  const double window_mean = sum / 100.0;
  const double variance = sum_sq / 100.0 - window_mean * window_mean;
  EXPECT_NEAR(variance / window_mean, 1.0, 0.45);
}

TEST(PoissonArrivalsTest, RateScheduleChangesTheRateAtItsSteps) {
  const auto schedule = RateSchedule::parse("0:100,20:0,30:400");
  const auto times =
      all_arrivals(ArrivalProcess::from_schedule(schedule, ArrivalSpacing::poisson, 3, 40.0, 1'000'000));
  EXPECT_NEAR(static_cast<double>(count_in(times, 0, 20)), 2000.0, 5.0 * std::sqrt(2000.0));
  EXPECT_EQ(count_in(times, 20, 30), 0U);  // paused
  EXPECT_NEAR(static_cast<double>(count_in(times, 30, 40)), 4000.0, 5.0 * std::sqrt(4000.0));
  EXPECT_TRUE(std::is_sorted(times.begin(), times.end()));
}

TEST(PoissonArrivalsTest, BoundedByCountAndEndTime) {
  EXPECT_EQ(poisson(1000.0, 100.0, 1, 50).size(), 50U);
  auto process = ArrivalProcess::from_schedule(RateSchedule::constant(1000.0), ArrivalSpacing::poisson, 1, 100.0, 3);
  EXPECT_TRUE(process.next());
  EXPECT_TRUE(process.next());
  EXPECT_TRUE(process.next());
  EXPECT_FALSE(process.next());
  EXPECT_FALSE(process.next());
  EXPECT_EQ(process.produced(), 3U);
  // A schedule whose last rate is 0 ends by itself.
  const auto ends = all_arrivals(ArrivalProcess::from_schedule(RateSchedule::parse("0:100,1:0"),
                                                               ArrivalSpacing::poisson, 1, 1e9, 1'000'000));
  EXPECT_LT(ends.back(), 1.0);
  expect_error([] { (void)poisson(10.0, 0.0, 1); }, ErrorCode::usage, "positive number of seconds");
}

// --- Constant spacing ---

TEST(ConstantArrivalsTest, EvenlySpacedFromTimeZeroWithExactCounts) {
  const auto times = all_arrivals(
      ArrivalProcess::from_schedule(RateSchedule::constant(10.0), ArrivalSpacing::constant, 1, 1.0, 1000));
  ASSERT_EQ(times.size(), 10U);  // 0, 0.1, ..., 0.9: rounding must not add an 11th at 0.99999
  for (std::size_t i = 0; i < times.size(); ++i) EXPECT_NEAR(times[i], 0.1 * static_cast<double>(i), 1e-12);
  const auto many = all_arrivals(
      ArrivalProcess::from_schedule(RateSchedule::constant(1000.0), ArrivalSpacing::constant, 1, 30.0, 1'000'000));
  EXPECT_EQ(many.size(), 30'000U);
}

TEST(ConstantArrivalsTest, CarriesTheSpacingAcrossRateSteps) {
  // 4/s for 0.5 s (0, 0.25), then 8/s: the next is due one expected arrival after 0.25 s, i.e.
  // 0.25 s at 4/s brings it to 0.5 s, then every 0.125 s.
  const auto times = all_arrivals(ArrivalProcess::from_schedule(RateSchedule::parse("0:4,0.5:8"),
                                                                ArrivalSpacing::constant, 1, 1.0, 1000));
  const std::vector<double> expected = {0.0, 0.25, 0.5, 0.625, 0.75, 0.875};
  ASSERT_EQ(times.size(), expected.size());
  for (std::size_t i = 0; i < times.size(); ++i) EXPECT_NEAR(times[i], expected[i], 1e-12);
  // A pause in the middle: nothing in [0.5, 1), then 4/s again.
  const auto paused = all_arrivals(ArrivalProcess::from_schedule(RateSchedule::parse("0:4,0.5:0,1:4"),
                                                                 ArrivalSpacing::constant, 1, 1.5, 1000));
  const std::vector<double> expected_paused = {0.0, 0.25, 1.0, 1.25};
  ASSERT_EQ(paused.size(), expected_paused.size());
  for (std::size_t i = 0; i < paused.size(); ++i) EXPECT_NEAR(paused[i], expected_paused[i], 1e-12);
}

// --- Traces ---

TEST(ArrivalTraceTest, ReadsOneTimePerLine) {
  const auto times = parse_arrival_trace("# arrivals of a test\n0\n0.5\r\n\n0.5\n  2.25  \n", "t.txt");
  EXPECT_EQ(times, (std::vector<double>{0.0, 0.5, 0.5, 2.25}));
}

TEST(ArrivalTraceTest, ReadsTheTimeColumnOfCsv) {
  const auto times = parse_arrival_trace("request_id, time_s ,model\n1,0.1,a\n2,0.2,b\n3,1.5,c\n", "trace.csv");
  EXPECT_EQ(times, (std::vector<double>{0.1, 0.2, 1.5}));
  EXPECT_EQ(parse_arrival_trace("time_s\n3\n4\n", "x.csv"), (std::vector<double>{3.0, 4.0}));
  // Only the first max_times are kept, and every line is still checked.
  EXPECT_EQ(parse_arrival_trace("0\n1\n2\n3\n", "t.txt", 2), (std::vector<double>{0.0, 1.0}));
  expect_error([] { (void)parse_arrival_trace("0\n1\n2\n1.5\n", "t.txt", 2); }, ErrorCode::invalid_data, "t.txt:4:");
}

TEST(ArrivalTraceTest, RefusesBadTracesWithFileAndLine) {
  expect_error([] { (void)parse_arrival_trace("0\n1\n0.5\n", "t.txt"); }, ErrorCode::invalid_data,
               "t.txt:3: arrival times must not decrease");
  expect_error([] { (void)parse_arrival_trace("0\n-1\n", "t.txt"); }, ErrorCode::invalid_data, "t.txt:2:");
  expect_error([] { (void)parse_arrival_trace("0\nsoon\n", "t.txt"); }, ErrorCode::invalid_data,
               "t.txt:2: arrival time 'soon' is not a number");
  expect_error([] { (void)parse_arrival_trace("id,when\n1,0\n", "t.csv"); }, ErrorCode::invalid_data,
               "t.csv:1: expected an arrival time in seconds or a CSV header with a time_s column");
  expect_error([] { (void)parse_arrival_trace("id,time_s\n1\n", "t.csv"); }, ErrorCode::invalid_data,
               "t.csv:2: row has 1 fields; time_s is field 2");
  expect_error([] { (void)parse_arrival_trace("# nothing\n\n", "empty.txt"); }, ErrorCode::invalid_data,
               "empty.txt: the trace has no arrival times");
  expect_error([] { (void)parse_arrival_trace("0\ninf\n", "t.txt"); }, ErrorCode::invalid_data, "t.txt:2:");
}

TEST(ArrivalTraceTest, ProcessStopsAtTheEndTimeAndTheCount) {
  const std::vector<double> trace = {0.0, 0.1, 0.2, 0.3, 5.0};
  EXPECT_EQ(all_arrivals(ArrivalProcess::from_trace(trace, 1.0, 100)), (std::vector<double>{0.0, 0.1, 0.2, 0.3}));
  EXPECT_EQ(all_arrivals(ArrivalProcess::from_trace(trace, 10.0, 2)), (std::vector<double>{0.0, 0.1}));
  expect_error([] { (void)ArrivalProcess::from_trace({0.2, 0.1}, 1.0, 10); }, ErrorCode::usage, "trace arrival 2");
}

}  // namespace
}  // namespace gpucap::serve
