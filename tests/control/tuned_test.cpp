#include "gpucap/control/tuned.hpp"

#include <gtest/gtest.h>

#include "gpucap/control/registry.hpp"
#include "gpucap/core/error.hpp"

namespace gpucap::control {
namespace {

Knobs knobs(int batch, double sm_mhz) { return single_tenant_knobs(batch, sm_mhz); }

std::shared_ptr<const CapTable> three_caps() {
  return std::make_shared<const CapTable>(
      CapTable{{150.0, knobs(128, 1303)}, {100.0, knobs(32, 835)}, {125.0, knobs(64, 1063)}});
}

TEST(TunedTable, TheCapsOwnEntryElseTheHighestCapBelowElseTheLowest) {
  const auto table = three_caps();
  EXPECT_EQ(entry_for_cap(*table, 125.0).knobs.batch_size(), 64);
  EXPECT_EQ(entry_for_cap(*table, 125.0004).knobs.batch_size(), 64) << "within a milliwatt: the same cap";
  EXPECT_EQ(entry_for_cap(*table, 140.0).knobs.batch_size(), 64) << "125 W's configuration stays under 140 W";
  EXPECT_EQ(entry_for_cap(*table, 400.0).knobs.batch_size(), 128);
  EXPECT_EQ(entry_for_cap(*table, 60.0).knobs.batch_size(), 32) << "below every tuned cap: the lowest cap's";
  EXPECT_THROW((void)entry_for_cap(CapTable{}, 100.0), Error);
}

TEST(Tuned, HoldsTheTunedConfigurationAndSwitchesAtOnceWhenTheCapChanges) {
  ControllerOptions options;
  options.tuned_table = three_caps();
  const auto controller = make_controller("bobd", options, PlatformLimits{});
  EXPECT_EQ(controller->name(), "bobd");
  EXPECT_TRUE(controller->reacts_to_cap_changes());
  EXPECT_TRUE(controller->requirements().sm_clock);
  EXPECT_FALSE(controller->requirements().power_limit);
  EXPECT_EQ(controller->initial_knobs(150.0), knobs(128, 1303));
  Observation window;
  window.cap_w = 150.0;
  window.knobs = knobs(128, 1303);
  window.power.max_w = 170.0;  // over the cap: bobd does not correct itself online
  EXPECT_EQ(controller->decide(window), knobs(128, 1303));
  window.cap_w = 100.0;
  EXPECT_EQ(controller->decide(window), knobs(32, 835));
  EXPECT_EQ(controller->describe_state(), "tuned_for=100W");
}

TEST(Tuned, NeedsATableAndRejectsKnobsItsSearchSets) {
  EXPECT_THROW((void)make_controller("bobd", ControllerOptions{}, PlatformLimits{}), Error);
  ControllerOptions empty;
  empty.tuned_table = std::make_shared<const CapTable>();
  EXPECT_THROW((void)make_controller("bobd", empty, PlatformLimits{}), Error);
  ControllerOptions alpha;
  alpha.tuned_table = three_caps();
  alpha.alpha = 0.9;
  EXPECT_THROW((void)make_controller("bobd", alpha, PlatformLimits{}), Error);
  ControllerOptions batches;
  batches.tuned_table = three_caps();
  batches.batch_sizes = std::vector<int>{1, 2, 4};
  EXPECT_THROW((void)make_controller("bobd", batches, PlatformLimits{}), Error);
  ControllerOptions other;
  other.tuned_table = three_caps();
  EXPECT_THROW((void)make_controller("batchdvfs", other, PlatformLimits{{500, 1000}, {}, 0.0, 1e9}), Error)
      << "only bobd runs from a tuned table";
  EXPECT_TRUE(needs_offline_search("bobd"));
  EXPECT_FALSE(needs_offline_search("capfit"));
  EXPECT_FALSE(uses_power_band("bobd"));
}

}  // namespace
}  // namespace gpucap::control
