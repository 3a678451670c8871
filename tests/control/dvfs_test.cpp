#include "gpucap/control/dvfs.hpp"

#include <gtest/gtest.h>

namespace gpucap::control {
namespace {

TEST(Dvfs, WalksOneLevelPerWindowAndClamps) {
  const DvfsParams params;
  EXPECT_EQ(params.batch_size, 256);
  auto s = dvfs_initial(params);
  EXPECT_EQ(s.clock_index, 5);
  s = dvfs_step(params, s, 50, 131);
  EXPECT_EQ(s.clock_index, 6);
  s = dvfs_step(params, s, 120, 131);
  EXPECT_EQ(s.clock_index, 6) << "in band: hold";
  s = dvfs_step(params, s, 140, 131);
  EXPECT_EQ(s.clock_index, 5);
  EXPECT_EQ(dvfs_step(params, DvfsState{9}, 50, 131).clock_index, 9);
  EXPECT_EQ(dvfs_step(params, DvfsState{0}, 200, 131).clock_index, 0);
}

TEST(Dvfs, KnobsCarryTheFixedBatchAndClock) {
  DvfsController controller{DvfsParams{}};
  const auto start = controller.initial_knobs(100.0);
  EXPECT_EQ(start.batch_size(), 256);
  EXPECT_EQ(start.sm_clock_mhz, 1063.0);
  Observation obs;
  obs.cap_w = 131;
  obs.power.max_w = 200;
  EXPECT_EQ(controller.decide(obs).sm_clock_mhz, 949.0);
}

}  // namespace
}  // namespace gpucap::control
