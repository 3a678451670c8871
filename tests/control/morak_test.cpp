#include "gpucap/control/morak.hpp"

#include <gtest/gtest.h>

#include "gpucap/control/registry.hpp"
#include "gpucap/core/error.hpp"

namespace gpucap::control {
namespace {

MorakParams params(std::optional<double> slo_ms = std::nullopt) {
  MorakParams p;
  for (int mhz = 500; mhz <= 1500; mhz += 50) p.clocks_mhz.push_back(mhz);  // 21 clocks
  p.latency_slo_ms = slo_ms;
  p.start_batch_index = 9;  // 96
  p.start_clock_index = 10;
  return p;
}

TEST(Morak, ClockStepGrowsWithTheGap) {
  EXPECT_EQ(morak_clock_step(0.30), 10);
  EXPECT_EQ(morak_clock_step(0.15), 5);
  EXPECT_EQ(morak_clock_step(0.07), 2);
  EXPECT_EQ(morak_clock_step(0.01), 1);
  EXPECT_EQ(pctodl_batch_ladder().front(), 1);
  EXPECT_EQ(pctodl_batch_ladder()[9], 96);
  EXPECT_EQ(pctodl_batch_ladder().back(), 256);
}

TEST(Morak, BelowTheBandGrowsTheBatchFirstThenTheClock) {
  const auto p = params();
  const MorakState start{9, 10};
  EXPECT_EQ(morak_step(p, start, 100, 200, 10), (MorakState{10, 10}));
  const MorakState top{static_cast<int>(p.batch_sizes.size()) - 1, 10};
  EXPECT_EQ(morak_step(p, top, 100, 200, 10), (MorakState{top.batch_index, 20})) << "gap 50 %: ten clocks up";
  EXPECT_EQ(morak_step(p, MorakState{top.batch_index, 18}, 100, 200, 10).clock_index, 20) << "clamped at the top";
}

TEST(Morak, InsideTheBandHoldsAndFreqGuardStepsDownAboveTheCap) {
  const auto p = params();
  const MorakState s{9, 10};
  EXPECT_EQ(morak_step(p, s, 198, 200, 10), s);
  EXPECT_EQ(morak_step(p, s, 202, 200, 10), (MorakState{9, 9})) << "over the cap, under 1.02·cap: FreqGuard";
  EXPECT_EQ(morak_step(p, s, 230, 200, 10), (MorakState{9, 5})) << "gap 15 %: five clocks down";
}

TEST(Morak, TheLatencySloDecidesWhichKnobMoves) {
  const auto p = params(100.0);
  const MorakState s{9, 10};
  EXPECT_EQ(morak_step(p, s, 100, 200, 95), (MorakState{9, 20})) << "latency over beta·SLO: the clock rises instead";
  EXPECT_EQ(morak_step(p, s, 230, 200, 95), (MorakState{4, 9})) << "over the band, latency too high: batch down, and "
                                                                  "FreqGuard since the clock did not move";
}

TEST(Morak, RegistryStartsAtBatch96AndTheMedianClock) {
  const PlatformLimits limits{{500, 1000}, {500, 750, 1000}};
  const auto controller = make_controller("morak", {}, limits);
  const auto knobs = controller->initial_knobs(150.0);
  EXPECT_EQ(knobs.batch_size(), 96);
  EXPECT_EQ(knobs.sm_clock_mhz, 750.0) << "median of every supported clock, not the DVFS ladder";
  ControllerOptions bad;
  bad.latency_slo_ms = -1.0;
  EXPECT_THROW((void)make_controller("morak", bad, limits), Error);
  ControllerOptions slo;
  slo.latency_slo_ms = 50.0;
  EXPECT_THROW((void)make_controller("batchdvfs", slo, limits), Error) << "--slo-ms only applies to morak";
}

}  // namespace
}  // namespace gpucap::control
