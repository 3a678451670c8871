#include "gpucap/control/batchdvfs.hpp"

#include <gtest/gtest.h>

namespace gpucap::control {
namespace {

constexpr double kCap = 131.0;  // job 1; band [104.8, 131]

BatchDvfsState state(int lo, int hi, int cur, int clock) { return BatchDvfsState{{lo, hi, cur}, clock}; }

TEST(BatchDvfs, StartsAtBatchOneAnd1063MHz) {
  const BatchDvfsParams params;
  EXPECT_EQ(batchdvfs_initial(params), state(0, 254, 0, 5));
  BatchDvfsController controller(params);
  const auto knobs = controller.initial_knobs(100.0);
  EXPECT_EQ(knobs.batch_size(), 1);
  EXPECT_EQ(knobs.sm_clock_mhz, 1063.0);
  EXPECT_TRUE(controller.requirements().sm_clock);
}

TEST(BatchDvfs, ReproducesTheFirstStepsOfTheJob1Log) {
  // 01_InceptionV1_BatchDVFS.csv: power 67.04 → bs 128 [0,254,127]; 104.46 → bs 192 [127,254,191];
  // 122.87 (in band) → hold.
  const BatchDvfsParams params;
  auto s = batchdvfs_step(params, batchdvfs_initial(params), 67.04, kCap);
  EXPECT_EQ(s, state(0, 254, 127, 5));
  s = batchdvfs_step(params, s, 104.46, kCap);
  EXPECT_EQ(s, state(127, 254, 191, 5));
  EXPECT_EQ(batchdvfs_step(params, s, 122.87, kCap), s);
}

TEST(BatchDvfs, BandEdgesHold) {
  const BatchDvfsParams params;
  const auto s = state(0, 254, 100, 5);
  EXPECT_EQ(batchdvfs_step(params, s, 0.8 * kCap, kCap), s);
  EXPECT_EQ(batchdvfs_step(params, s, kCap, kCap), s);
  EXPECT_NE(batchdvfs_step(params, s, kCap + 0.01, kCap), s);
  EXPECT_NE(batchdvfs_step(params, s, 0.8 * kCap - 0.01, kCap), s);
}

TEST(BatchDvfs, ShrinksByBisectionAndRestartsWhenStuck) {
  const BatchDvfsParams params;
  auto s = batchdvfs_step(params, state(127, 254, 191, 5), 140, kCap);
  EXPECT_EQ(s, state(127, 191, 159, 5));
  // Over the cap at cur == lo: the lower half [0, lo] is searched again.
  s = batchdvfs_step(params, state(127, 191, 127, 5), 140, kCap);
  EXPECT_EQ(s, state(0, 127, 63, 5));
}

TEST(BatchDvfs, ReopensTheUpperHalfAtTheSearchTop) {
  const BatchDvfsParams params;
  EXPECT_EQ(batchdvfs_step(params, state(0, 63, 63, 5), 50, kCap), state(63, 254, 159, 5));
}

TEST(BatchDvfs, ClockMovesOnlyAtTheExtremes) {
  const BatchDvfsParams params;
  // Largest batch and still below the band: one level up (log rows 63-65 of job 1).
  EXPECT_EQ(batchdvfs_step(params, state(253, 254, 254, 5), 47.15, kCap), state(253, 254, 254, 6));
  EXPECT_EQ(batchdvfs_step(params, state(253, 254, 254, 9), 47.15, kCap), state(253, 254, 254, 9));
  // Batch 1 and still over the cap: one level down.
  EXPECT_EQ(batchdvfs_step(params, state(0, 1, 0, 5), 90, 84), state(0, 1, 0, 4));
  EXPECT_EQ(batchdvfs_step(params, state(0, 1, 0, 0), 90, 84), state(0, 1, 0, 0));
}

TEST(BatchDvfs, ControllerUsesTheWindowMaximum) {
  BatchDvfsController controller{BatchDvfsParams{}};
  Observation obs;
  obs.cap_w = kCap;
  obs.power.max_w = 140.0;  // over the cap …
  obs.power.mean_w = 90.0;  // … although the mean is far below
  const auto knobs = controller.decide(obs);
  EXPECT_EQ(knobs.batch_size(), 1);
  EXPECT_EQ(knobs.sm_clock_mhz, 949.0) << "batch already 1: the clock goes down one level";
}

}  // namespace
}  // namespace gpucap::control
