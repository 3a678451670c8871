#include "gpucap/control/thermo.hpp"

#include <gtest/gtest.h>

#include <cmath>

namespace gpucap::control {
namespace {

ThermoParams params() {
  ThermoParams p;
  p.f_min_mhz = 210;
  p.f_max_mhz = 1950;
  p.delta1 = 0.02;
  p.delta0 = 30.0;
  p.gamma_p = 1.2;
  p.p_base_w = 20.0;
  return p;
}

// The power model with a dynamic part of 150 W at f_ref: 30 + 0.02 f + 20 + 130·x^1.2.
double model_w(double f) {
  const double x = std::clamp((f - 210.0) / (1950.0 - 210.0), 0.0, 1.0);
  return 30.0 + 0.02 * f + 20.0 + 130.0 * std::pow(x, 1.2);
}

TEST(Thermo, ANewCapJumpsToTheFeedForwardClock) {
  ThermoState state;
  const double f = thermo_step(params(), state, 150.0, 120.0, 1000.0, model_w);
  EXPECT_GT(f, 210.0);
  EXPECT_LT(f, 1950.0);
  EXPECT_NEAR(model_w(f), 150.0, 10.0) << "the feed-forward clock is where the model meets the cap";
  ThermoState fresh;
  EXPECT_EQ(thermo_step(params(), fresh, 400.0, 120.0, 1000.0, model_w), 1950.0) << "cap above the model's top";
  ThermoState low;
  EXPECT_EQ(thermo_step(params(), low, 40.0, 120.0, 1000.0, model_w), 210.0) << "cap below the model's bottom";
}

TEST(Thermo, FarFromTheCapANewtonStepNearItOneNotch) {
  ThermoState state;
  state.last_cap_w = 150.0;
  const double up = thermo_step(params(), state, 150.0, 100.0, 1000.0, model_w);  // 50 W under
  EXPECT_GT(up, 1000.0 + 14.9);
  EXPECT_LE(up, 1000.0 + 300.0);
  const double down = thermo_step(params(), state, 150.0, 400.0, 1000.0, model_w);  // far over
  EXPECT_DOUBLE_EQ(down, 700.0) << "at most 300 MHz";
  EXPECT_DOUBLE_EQ(thermo_step(params(), state, 150.0, 145.0, 1000.0, model_w), 1015.0);
  EXPECT_DOUBLE_EQ(thermo_step(params(), state, 150.0, 153.0, 1000.0, model_w), 985.0);
  EXPECT_DOUBLE_EQ(thermo_step(params(), state, 150.0, 150.0, 1000.0, model_w), 1000.0);
}

TEST(Thermo, SettlesNearTheCapWhenTheModelUnderstatesThePower) {
  // The GPU draws 10 W more than the model says: feed-forward overshoots, then feedback corrects.
  ThermoState state;
  double f = 1000.0;
  double measured = model_w(f) + 10.0;
  for (int i = 0; i < 20; ++i) {
    f = thermo_step(params(), state, 160.0, measured, f, model_w);
    measured = model_w(f) + 10.0;
  }
  EXPECT_NEAR(measured, 160.0, 7.0 + 1.5) << "within the proximity band plus one notch";
}

TEST(FreqGuard, StepsOneSupportedClockDownOnlyWhenOverTheCapAndUnchanged) {
  const std::vector<double> clocks = {1410, 1395, 1380, 210};
  EXPECT_EQ(freq_guard(1395, 1395, 151, 150, clocks), 1380);
  EXPECT_EQ(freq_guard(1410, 1395, 151, 150, clocks), 1410) << "the controller moved: left alone";
  EXPECT_EQ(freq_guard(1395, 1395, 149, 150, clocks), 1395) << "under the cap";
  EXPECT_EQ(freq_guard(210, 210, 200, 150, clocks), 210) << "nothing lower";
}

}  // namespace
}  // namespace gpucap::control
