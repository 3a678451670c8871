#include "gpucap/control/powercap.hpp"

#include <gtest/gtest.h>

#include "gpucap/control/registry.hpp"
#include "gpucap/core/error.hpp"

namespace gpucap::control {
namespace {

TEST(Powercap, SetsTheBoardLimitToTheCapClampedToTheBoardRange) {
  const PlatformLimits limits{{500, 1000}, {}, 125.0, 250.0};
  const auto controller = make_controller("powercap", {}, limits);
  EXPECT_TRUE(controller->requirements().power_limit);
  EXPECT_FALSE(controller->requirements().sm_clock) << "the SM clock stays with the GPU's boost";
  EXPECT_TRUE(controller->reacts_to_cap_changes());
  const auto knobs = controller->initial_knobs(180.0);
  EXPECT_EQ(knobs.power_limit_w, 180.0);
  EXPECT_EQ(knobs.batch_size(), 256);
  EXPECT_FALSE(knobs.sm_clock_mhz.has_value());
  EXPECT_EQ(controller->initial_knobs(80.0).power_limit_w, 125.0) << "below the lowest settable limit: clamped";
  Observation obs;
  obs.cap_w = 140.0;
  EXPECT_EQ(controller->decide(obs).power_limit_w, 140.0) << "follows the cap";
}

TEST(Powercap, TakesAFixedBatchAndRejectsKnobsItDoesNotTurn) {
  const PlatformLimits limits{{500, 1000}, {}, 125.0, 250.0};
  ControllerOptions o;
  o.fixed_batch = 32;
  EXPECT_EQ(make_controller("powercap", o, limits)->initial_knobs(150.0).batch_size(), 32);
  ControllerOptions alpha;
  alpha.alpha = 0.9;
  EXPECT_THROW((void)make_controller("powercap", alpha, limits), Error);
  ControllerOptions clocks;
  clocks.clock_levels_mhz = std::vector<double>{500, 1000};
  EXPECT_THROW((void)make_controller("powercap", clocks, limits), Error);
}

}  // namespace
}  // namespace gpucap::control
