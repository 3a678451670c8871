#include "gpucap/control/capfit.hpp"

#include <gtest/gtest.h>

#include "gpucap/control/registry.hpp"
#include "gpucap/core/error.hpp"

namespace gpucap::control {
namespace {

// A toy GPU: two SM clocks, batch sizes 1..64 profiled at powers of two. Power and throughput
// rise with batch and clock; at 1000 MHz batch 64 draws 160 W.
std::vector<predict::ProfileSample> toy_profile(double power_scale = 1.0) {
  std::vector<predict::ProfileSample> samples;
  for (const double mhz : {500.0, 1000.0}) {
    for (int b = 1; b <= 64; b *= 2) {
      const double fill = static_cast<double>(b) / (b + 8.0);
      const double power_w = (40.0 + 120.0 * fill * mhz / 1000.0) * power_scale;
      const double throughput = 1000.0 * fill * mhz / 1000.0;
      samples.push_back({b, mhz, std::nullopt, throughput, power_w});
    }
  }
  return samples;
}

CapfitParams params_for(const std::vector<predict::ProfileSample>& samples) {
  CapfitParams p;
  p.profile = std::make_shared<const predict::ProfileModel>(samples);
  return p;
}

Observation window(const Knobs& knobs, double cap_w, double max_w, double throughput, double seconds = 3.0) {
  Observation obs;
  obs.cap_w = cap_w;
  obs.knobs = knobs;
  obs.power.start_s = 0.0;
  obs.power.end_s = seconds;
  obs.power.samples = 300;
  obs.power.max_w = max_w;
  obs.settled_power = obs.power;
  obs.throughput_img_s = throughput;
  obs.batches = 10;
  return obs;
}

TEST(Capfit, NeedsAProfileAndCoversEveryBatchSizeInIt) {
  EXPECT_THROW(CapfitController{CapfitParams{}}, Error);
  const CapfitController controller(params_for(toy_profile()));
  EXPECT_EQ(controller.candidates().size(), 2u * 64u) << "batch sizes 1..64 at two clocks";
  EXPECT_TRUE(controller.reacts_to_cap_changes());
  EXPECT_TRUE(controller.requirements().sm_clock);
  EXPECT_FALSE(controller.requirements().memory_clock) << "the profile has no memory clocks";
}

TEST(Capfit, WithoutClockControlItMovesTheBatchSizeOnlyAndLearnsFromItsWindows) {
  std::vector<predict::ProfileSample> own_clocks;
  for (const auto& s : toy_profile()) {
    if (s.sm_clock_mhz == 1000.0) own_clocks.push_back(s);
  }
  auto p = params_for(own_clocks);
  p.lock_clocks = false;
  CapfitController controller(p);
  EXPECT_FALSE(controller.requirements().sm_clock);
  EXPECT_FALSE(controller.requirements().memory_clock);
  const auto knobs = controller.initial_knobs(200.0);
  EXPECT_EQ(knobs.batch_size(), 64);
  EXPECT_FALSE(knobs.sm_clock_mhz.has_value()) << "the clock stays with the GPU";
  // A window of batch 64 at 150 W (the profile said 136 W) is matched to its candidate and
  // lowers the batch size under a 150 W cap.
  const auto next = controller.decide(window(knobs, 150.0, 150.0, 880.0));
  EXPECT_LT(next.batch_size(), 64);
  EXPECT_FALSE(next.sm_clock_mhz.has_value());
  // A profile that varies the clock cannot be followed without clock control.
  auto both = params_for(toy_profile());
  both.lock_clocks = false;
  EXPECT_THROW(CapfitController{both}, Error);
}

TEST(Capfit, StartsAtTheBestPredictedConfigurationUnderTheCapWithAMargin) {
  const CapfitController controller(params_for(toy_profile()));
  const auto knobs = controller.initial_knobs(200.0);
  EXPECT_EQ(knobs.batch_size(), 64) << "everything fits under 200 W";
  EXPECT_EQ(knobs.sm_clock_mhz, 1000.0);
  // Under 130 W the largest configuration that keeps the unmeasured margin fits.
  const auto tight = controller.initial_knobs(130.0);
  const double budget_w = controller.power_budget_w(130.0, false);
  EXPECT_LT(budget_w, 130.0 * 0.97) << "an unmeasured prediction keeps a margin of several percent";
  std::optional<predict::ProfilePrediction> chosen;
  for (std::size_t i = 0; i < controller.candidates().size(); ++i) {
    const auto& c = controller.candidates()[i];
    if (c.batch_size == tight.batch_size() && c.sm_clock_mhz == *tight.sm_clock_mhz) chosen = controller.predicted(i);
  }
  ASSERT_TRUE(chosen.has_value());
  EXPECT_LE(chosen->max_power_w, budget_w);
  for (std::size_t i = 0; i < controller.candidates().size(); ++i) {
    const auto p = controller.predicted(i);
    if (p.max_power_w <= budget_w) {
      EXPECT_LE(p.throughput_img_s, chosen->throughput_img_s);
    }
  }
}

TEST(Capfit, LearnsFromItsWindowsWhenTheProfileUnderstatesPower) {
  // The profile says 10 % less power than the GPU draws.
  const auto truth = toy_profile(1.0);
  CapfitController controller(params_for(toy_profile(0.9)));
  const double cap_w = 130.0;
  auto knobs = controller.initial_knobs(cap_w);
  // The GPU's true power and throughput at every batch size: the true profile, interpolated.
  const CapfitController gpu(params_for(truth));
  int over = 0;
  for (int w = 0; w < 30; ++w) {
    double power_w = 0.0, throughput = 0.0;
    for (std::size_t i = 0; i < gpu.candidates().size(); ++i) {
      const auto& c = gpu.candidates()[i];
      if (c.batch_size == knobs.batch_size() && c.sm_clock_mhz == *knobs.sm_clock_mhz) {
        power_w = c.profile.max_power_w;
        throughput = c.profile.throughput_img_s;
      }
    }
    ASSERT_GT(power_w, 0.0);
    if (power_w > cap_w) ++over;
    knobs = controller.decide(window(knobs, cap_w, power_w, throughput));
    if (w >= 3) {
      EXPECT_LE(power_w, cap_w) << "window " << w;
    }
  }
  EXPECT_LE(over, 1) << "at most the first window, chosen before anything was measured";
}

TEST(Capfit, AMeasuredHotConfigurationBlocksItsLargerNeighbours) {
  CapfitController controller(params_for(toy_profile()));
  const double cap_w = 150.0;
  const auto start = controller.initial_knobs(cap_w);
  // The GPU draws far more than predicted at the start point: over the cap.
  const auto next = controller.decide(window(start, cap_w, 170.0, 500.0));
  EXPECT_TRUE(next.batch_size() < start.batch_size() || *next.sm_clock_mhz < *start.sm_clock_mhz)
      << "moved to a configuration smaller in some knob";
  for (std::size_t i = 0; i < controller.candidates().size(); ++i) {
    const auto& c = controller.candidates()[i];
    const bool larger = c.sm_clock_mhz >= *start.sm_clock_mhz && c.batch_size >= start.batch_size();
    EXPECT_FALSE(larger && c.batch_size == next.batch_size() && c.sm_clock_mhz == *next.sm_clock_mhz);
  }
}

TEST(Capfit, ACapChangeMovesAtOnceToTheBestPointUnderTheNewCap) {
  CapfitController controller(params_for(toy_profile()));
  auto knobs = controller.initial_knobs(200.0);
  knobs = controller.decide(window(knobs, 200.0, 158.0, 889.0));
  EXPECT_EQ(knobs.batch_size(), 64);
  // The cap falls to 100 W during the next window (cut short at the change).
  const auto after = controller.decide(window(knobs, 100.0, 158.0, 889.0, 0.4));
  EXPECT_EQ(after, controller.initial_knobs(100.0)) << "same choice as a fresh start under 100 W (nothing new learned "
                                                        "from a short window)";
  EXPECT_LT(after.batch_size() * *after.sm_clock_mhz, 64 * 1000.0);
}

TEST(Capfit, AWindowOverTheCapWidensTheMarginAndCalmWindowsNarrowIt) {
  CapfitController controller(params_for(toy_profile()));
  const double cap_w = 150.0;
  auto knobs = controller.initial_knobs(cap_w);
  const double before = controller.power_budget_w(cap_w, true);
  knobs = controller.decide(window(knobs, cap_w, 151.0, 800.0));
  EXPECT_LT(controller.power_budget_w(cap_w, true), before - 0.009 * cap_w);
  for (int i = 0; i < 10; ++i) knobs = controller.decide(window(knobs, cap_w, 120.0, 700.0));
  EXPECT_GT(controller.power_budget_w(cap_w, true), before - 0.005 * cap_w);
}

TEST(Capfit, RegistryBuildsItOnlyWithAProfileAndRejectsSeedOptions) {
  ControllerOptions o;
  const PlatformLimits limits{{500, 1000}, {500, 1000}};
  EXPECT_THROW((void)make_controller("capfit", o, limits), Error);
  o.profile = std::make_shared<const predict::ProfileModel>(toy_profile());
  EXPECT_EQ(make_controller("capfit", o, limits)->name(), "capfit");
  auto with_alpha = o;
  with_alpha.alpha = 0.8;
  EXPECT_THROW((void)make_controller("capfit", with_alpha, limits), Error);
  EXPECT_THROW((void)make_controller("batchdvfs", o, limits), Error) << "--profile only applies to capfit";
  auto sizes = o;
  sizes.batch_sizes = std::vector<int>{1, 2, 4};
  const auto controller = make_controller("capfit", sizes, limits);
  EXPECT_LE(controller->initial_knobs(300.0).batch_size(), 4);
}

}  // namespace
}  // namespace gpucap::control
