// PctoDL's BatchDVFS (seed-systems.md §2.10) on the RTX 3080 Ti's clock list and PctoDL's ladder.
#include "gpucap/control/pctodl_batchdvfs.hpp"

#include <gtest/gtest.h>

#include "gpucap/control/morak.hpp"
#include "gpucap/control/registry.hpp"
#include "gpucap/core/error.hpp"

namespace gpucap::control {
namespace {

std::vector<double> rtx3080ti_clocks() {
  std::vector<double> clocks;
  for (double f = 210.0; f <= 2100.0; f += 15.0) clocks.push_back(f);
  return clocks;
}

PlatformLimits limits() { return PlatformLimits{{500, 1000}, rtx3080ti_clocks(), 100.0, 350.0}; }

PctodlBatchDvfsParams params() {
  PctodlBatchDvfsParams p;
  p.batch_sizes = pctodl_batch_ladder();  // 1, 2, 4, 8, 16, 32, 48, ..., 256: 20 sizes
  p.clocks_mhz = rtx3080ti_clocks();
  p.start_batch_index = 19;
  p.start_clock_index = 63;  // 1155 MHz
  return p;
}

int batch(const PctodlBatchDvfsState& s) { return pctodl_batch_ladder()[static_cast<std::size_t>(s.batch_index)]; }
double clock(const PctodlBatchDvfsState& s) { return rtx3080ti_clocks()[static_cast<std::size_t>(s.clock_index)]; }

TEST(PctodlBatchDvfs, StartsAtBatch256AndTheMedianClock) {
  const auto c = make_controller("pctodl-batchdvfs", {}, limits());
  const auto knobs = c->initial_knobs(130.0);
  EXPECT_EQ(knobs.batch_size(), 256);
  EXPECT_EQ(knobs.sm_clock_mhz, 1155.0);
  EXPECT_FALSE(knobs.mem_clock_mhz.has_value()) << "the memory clock stays with the driver";
  EXPECT_TRUE(pctodl_suite_only("pctodl-batchdvfs"));
  EXPECT_FALSE(pctodl_suite_only("batchdvfs"));
  ControllerOptions o;
  o.fixed_batch = 64;
  EXPECT_THROW((void)make_controller("pctodl-batchdvfs", o, limits()), Error);
}

TEST(PctodlBatchDvfs, OverTheCapHalvesTheBatchAndFreqGuardTakesOneClock) {
  const auto p = params();
  auto s = pctodl_batchdvfs_initial(p, 130.0);
  s = pctodl_batchdvfs_step(p, s, 196.0, 130.0);
  EXPECT_EQ(s.hi, 19);
  EXPECT_EQ(batch(s), 96);       // ladder index floor(19 / 2) = 9
  EXPECT_EQ(clock(s), 1140.0);   // the search left the clock; power over the cap: one down
}

TEST(PctodlBatchDvfs, InTheBandItHolds) {
  const auto p = params();
  const auto s = pctodl_batchdvfs_initial(p, 200.0);
  EXPECT_EQ(pctodl_batchdvfs_step(p, s, 197.0, 200.0), s);  // 0.98 * 200 = 196 <= 197 < 200
}

TEST(PctodlBatchDvfs, BelowTheBandTheSearchMovesUpThenTheClockByOneOrFourSteps) {
  const auto p = params();
  auto s = pctodl_batchdvfs_initial(p, 200.0);
  s.batch_index = 9;
  s = pctodl_batchdvfs_step(p, s, 150.0, 200.0);
  EXPECT_EQ(s.lo, 9);
  EXPECT_EQ(s.batch_index, 14);  // ceil((9 + 19) / 2)
  EXPECT_EQ(clock(s), 1155.0);
  // Converged: the clock rises by 4 when far below, by 1 within 15 W.
  s.lo = 18;
  s.hi = 19;
  s = pctodl_batchdvfs_step(p, s, 150.0, 200.0);
  EXPECT_EQ(clock(s), 1215.0);
  s = pctodl_batchdvfs_step(p, s, 190.0, 200.0);
  EXPECT_EQ(clock(s), 1230.0);
}

TEST(PctodlBatchDvfs, ConvergedAtTheTopClockReopensTheSearchUpward) {
  auto p = params();
  p.start_clock_index = static_cast<int>(p.clocks_mhz.size()) - 1;
  auto s = pctodl_batchdvfs_initial(p, 300.0);
  s.batch_index = 5;
  s.lo = 4;
  s.hi = 5;
  s = pctodl_batchdvfs_step(p, s, 200.0, 300.0);
  EXPECT_EQ(s.hi, 19);
  EXPECT_EQ(s.batch_index, 5);
}

TEST(PctodlBatchDvfs, ConvergedOverTheCapTakesTheLowerBoundAndLowersTheClock) {
  const auto p = params();
  auto s = pctodl_batchdvfs_initial(p, 130.0);
  s.batch_index = 6;
  s.lo = 5;
  s.hi = 6;
  s = pctodl_batchdvfs_step(p, s, 160.0, 130.0);
  EXPECT_EQ(s.batch_index, 5);
  EXPECT_EQ(clock(s), 1095.0);  // 4 clocks down (30 W over); the clock moved, so no FreqGuard
}

TEST(PctodlBatchDvfs, ACapChangeReopensTheBoundsUpstreamKept) {
  const auto p = params();
  auto s = pctodl_batchdvfs_initial(p, 130.0);
  s.batch_index = 3;
  s.lo = 2;
  s.hi = 3;
  // Upstream writes min_bs/max_bs, which its scheduler never reads: it would stay converged and
  // only raise the clock. Here the search starts over on the whole ladder.
  s = pctodl_batchdvfs_step(p, s, 150.0, 250.0);
  EXPECT_EQ(s.lo, 3);
  EXPECT_EQ(s.hi, 19);
  EXPECT_EQ(s.batch_index, 11);  // ceil((3 + 19) / 2)
  EXPECT_EQ(s.cap_w, 250.0);
}

}  // namespace
}  // namespace gpucap::control
