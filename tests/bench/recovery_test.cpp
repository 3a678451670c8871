#include "gpucap/bench/recovery.hpp"

#include <gtest/gtest.h>

namespace gpucap::bench {
namespace {

runtime::TraceRow row(double start_s, double end_s, bool over, double throughput, bool transition = false) {
  runtime::TraceRow r;
  r.cap_transition = transition;
  r.window_start_s = start_s;
  r.time_s = end_s;
  r.over_cap = over;
  r.throughput_img_s = throughput;
  return r;
}

const CapSchedule kDown = CapSchedule::parse("0:200,10:100");

TEST(Recovery, SteadyShareLeavesOutTheWindowsOfCapTransitions) {
  const std::vector<runtime::TraceRow> rows = {row(0, 3, false, 1), row(3, 6, false, 1), row(6, 9, false, 1),
                                               row(9, 10.5, true, 1, true),  // holds the step at 10 s
                                               row(10.5, 13.5, false, 1), row(13.5, 16.5, true, 1)};
  EXPECT_NEAR(steady_over_cap_windows_pct(rows), 100.0 / 5.0, 1e-9);
  EXPECT_EQ(steady_over_cap_windows_pct({}), 0.0);
}

TEST(Recovery, CountsWindowsFromTheStepToUnderTheCapAndTo95PercentOfTheOracle) {
  const std::vector<runtime::TraceRow> rows = {row(0, 3, false, 100), row(3, 10.2, true, 100, true),
                                               row(10.2, 10.4, true, 60, true),  // the sensor still lags
                                               row(10.4, 13, true, 50),   // 1: still over
                                               row(13, 16, false, 40),    // 2: under, slow
                                               row(16, 19, false, 48)};   // 3: under, 96 % of 50
  const auto steps = cap_step_recoveries(rows, kDown, [](double cap_w) {
    return cap_w == 100 ? std::optional<double>(50.0) : std::nullopt;
  });
  ASSERT_EQ(steps.size(), 1u);
  EXPECT_EQ(steps[0].from_w, 200);
  EXPECT_EQ(steps[0].to_w, 100);
  EXPECT_EQ(steps[0].windows_to_under_cap, 2);
  EXPECT_EQ(steps[0].windows_to_95pct_oracle, 3);
  const auto no_oracle = cap_step_recoveries(rows, kDown, [](double) { return std::optional<double>(); });
  EXPECT_FALSE(no_oracle[0].windows_to_95pct_oracle.has_value());
  EXPECT_TRUE(cap_step_recoveries(rows, CapSchedule::constant(100), [](double) { return 1.0; }).empty());
}

TEST(Recovery, AStepNeverRecoveredBeforeTheNextIsReportedAsSuch) {
  const auto schedule = CapSchedule::parse("0:200,10:100,16:150");
  const std::vector<runtime::TraceRow> rows = {row(0, 10.1, false, 1, true), row(10.1, 13, true, 1),
                                               row(13, 16, true, 1), row(16, 19, false, 1)};
  const auto steps = cap_step_recoveries(rows, schedule, [](double) { return 1.0; });
  ASSERT_EQ(steps.size(), 2u);
  EXPECT_FALSE(steps[0].windows_to_under_cap.has_value());
  EXPECT_EQ(steps[1].windows_to_under_cap, 1);
}

}  // namespace
}  // namespace gpucap::bench
