// pctodl, directcap, mpsfit and morak's multi-tenant form, on a planner and power model written here.
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <vector>

#include "gpucap/control/directcap.hpp"
#include "gpucap/control/morak.hpp"
#include "gpucap/control/mpsfit.hpp"
#include "gpucap/control/pctodl.hpp"
#include "gpucap/control/registry.hpp"
#include "gpucap/core/error.hpp"

namespace gpucap::control {
namespace {

// Power 100 W at 210 MHz rising linearly to 300 W at 1950 MHz for any partition; the plan for a
// cap is two tenants whose batch is the cap in tens of watts (so tests can tell plans apart).
std::shared_ptr<const MpsPlanning> planning() {
  auto p = std::make_shared<MpsPlanning>();
  p->predictor = "test";
  p->plan = [](double cap_w) -> std::optional<PartitionPlan> {
    if (cap_w < 100.0) return std::nullopt;
    PartitionPlan plan;
    plan.tenants = {TenantKnobs{50.0, static_cast<int>(cap_w / 10.0)}, TenantKnobs{50.0, 8}};
    plan.sm_clock_mhz = 1500.0;
    plan.memory_clock_mhz = 9501.0;
    return plan;
  };
  p->power_w = [](const std::vector<TenantKnobs>&, double f, double) { return 100.0 + 200.0 * (f - 210.0) / 1740.0; };
  // Throughput grows with the batches and the clock.
  p->throughput_img_s = [](const std::vector<TenantKnobs>& tenants, double f, double) {
    double sum = 0.0;
    for (const auto& t : tenants) sum += t.mps_share_pct * t.batch_size / (t.batch_size + 16.0);
    return sum * f / 1000.0;
  };
  p->thermo = [](double) {
    ThermoParams t;
    t.f_min_mhz = 210.0;
    t.f_max_mhz = 1950.0;
    t.delta1 = 0.0;
    t.delta0 = 100.0;
    t.gamma_p = 1.0;
    t.p_base_w = 0.0;
    return t;
  };
  for (double f = 210.0; f <= 2100.0; f += 15.0) p->sm_clocks_mhz.push_back(f);
  p->memory_clocks_mhz = {405.0, 810.0, 5001.0, 9251.0, 9501.0};
  return p;
}

// Not inlined: GCC 12 warns (falsely) of an uninitialised Knobs when it is.
[[gnu::noinline]] Observation window(double cap_w, double max_w, const Knobs& knobs) {
  Observation o;
  o.cap_w = cap_w;
  o.power.max_w = max_w;
  o.power.mean_w = max_w - 2.0;
  o.knobs = knobs;
  return o;
}

TEST(Pctodl, StartsFromThePlanThenJumpsToTheFeedForwardClock) {
  PctodlController c({DecisionPeriod::every_seconds(5.0), planning()});
  const auto first = c.initial_knobs(200.0);
  ASSERT_EQ(first.tenants.size(), 2u);
  EXPECT_EQ(first.tenants[0].batch_size, 20);
  EXPECT_EQ(first.sm_clock_mhz, 1500.0);
  EXPECT_EQ(first.mem_clock_mhz, 9501.0);
  // First step: feed-forward to where the model reaches 200 W (1080 MHz), snapped.
  const auto next = c.decide(window(200.0, 240.0, first));
  EXPECT_NEAR(*next.sm_clock_mhz, 1080.0, 7.5);
  EXPECT_EQ(next.tenants, first.tenants);
}

TEST(Pctodl, ANewCapIsRePlannedAndThePlanTakesOverAtTheNextIteration) {
  PctodlController c({DecisionPeriod::every_seconds(5.0), planning()});
  auto knobs = c.initial_knobs(200.0);
  knobs = c.decide(window(200.0, 199.0, knobs));
  knobs = c.decide(window(200.0, 199.0, knobs));
  // The cap drops: the thermo controller chases it with the old partition...
  knobs = c.decide(window(150.0, 199.0, knobs));
  EXPECT_EQ(knobs.tenants[0].batch_size, 20);
  EXPECT_LT(*knobs.sm_clock_mhz, 1080.0);
  // ...and the plan for 150 W arrives at the next iteration.
  knobs = c.decide(window(150.0, 149.0, knobs));
  EXPECT_EQ(knobs.tenants[0].batch_size, 15);
  EXPECT_EQ(knobs.sm_clock_mhz, 1500.0);
}

TEST(Pctodl, JustOverTheCapStepsOneNotchDown) {
  PctodlController c({DecisionPeriod::every_seconds(5.0), planning()});
  auto knobs = c.initial_knobs(200.0);
  knobs = c.decide(window(200.0, 200.0, knobs));  // feed-forward
  const double f = *knobs.sm_clock_mhz;
  // 0.5 W over: a 15-MHz notch down (stage 3 of the thermo controller).
  knobs = c.decide(window(200.0, 200.5, knobs));
  EXPECT_EQ(*knobs.sm_clock_mhz, f - 15.0);
}

TEST(Pctodl, NothingFitsStartsFromTheSmallestPartition) {
  PctodlController c({DecisionPeriod::every_seconds(5.0), planning()});
  const auto knobs = c.initial_knobs(50.0);
  ASSERT_EQ(knobs.tenants.size(), 1u);
  EXPECT_EQ(knobs.tenants[0].mps_share_pct, 5.0);
  EXPECT_EQ(knobs.sm_clock_mhz, 210.0);
}

TEST(Pctodl, TheShadowOptimizerMayChangeThePartitionEveryThirdIterationUnderTheCap) {
  PctodlController c({DecisionPeriod::every_seconds(5.0), planning(), /*shadow=*/true, /*shadow_interval=*/3});
  auto knobs = c.initial_knobs(200.0);
  const auto first = knobs.tenants;
  int changes = 0;
  for (int i = 0; i < 12; ++i) {
    // The GPU runs as the planner predicts, under the cap on average.
    const double f = *knobs.sm_clock_mhz;
    auto o = window(200.0, 100.0 + 200.0 * (f - 210.0) / 1740.0, knobs);
    o.power.mean_w = 190.0;
    o.throughput_img_s = planning()->throughput_img_s(knobs.tenants, f, *knobs.mem_clock_mhz);
    const auto next = c.decide(o);
    if (next.tenants != knobs.tenants) {
      ++changes;
      EXPECT_EQ((i + 1) % 3, 0) << "only every third iteration";
    }
    knobs = next;
  }
  EXPECT_GT(changes, 0);
  EXPECT_NE(knobs.tenants, first);
  ControllerOptions o;
  o.mps_planning = planning();
  o.shadow = true;
  const PlatformLimits limits{{500, 1000}, {}, 100.0, 350.0};
  EXPECT_EQ(make_controller("pctodl", o, limits)->name(), "pctodl");
  EXPECT_THROW((void)make_controller("directcap", o, limits), Error) << "only pctodl has a shadow optimizer";
}

TEST(Directcap, SetsThePowerLimitToTheCapAndRePlansOnAChange) {
  DirectcapController c({DecisionPeriod::every_seconds(5.0), planning(), 100.0, 350.0});
  auto knobs = c.initial_knobs(200.0);
  EXPECT_EQ(knobs.power_limit_w, 200.0);
  EXPECT_FALSE(knobs.sm_clock_mhz.has_value()) << "the SM clock is left to the boost governor";
  EXPECT_EQ(knobs.mem_clock_mhz, 9501.0);
  EXPECT_EQ(knobs.tenants[0].batch_size, 20);
  knobs = c.decide(window(200.0, 190.0, knobs));
  knobs = c.decide(window(90.0, 190.0, knobs));
  EXPECT_EQ(knobs.power_limit_w, 100.0) << "clamped to the board's lowest limit";
  EXPECT_TRUE(c.reacts_to_cap_changes());
}

TEST(Directcap, FiveWindowsOverTheCapLowerTheMemoryClock) {
  DirectcapController c({DecisionPeriod::every_seconds(5.0), planning(), 100.0, 350.0});
  auto knobs = c.initial_knobs(200.0);
  knobs = c.decide(window(200.0, 190.0, knobs));
  for (int i = 0; i < 4; ++i) knobs = c.decide(window(200.0, 210.0, knobs));  // mean 208 W > 204 W
  EXPECT_EQ(knobs.mem_clock_mhz, 9501.0);
  knobs = c.decide(window(200.0, 210.0, knobs));
  EXPECT_EQ(knobs.mem_clock_mhz, 9251.0);
}

// The planner's power model: 100 W at 210 MHz to 300 W at 1950 MHz.
double model_w(double f) { return 100.0 + 200.0 * (f - 210.0) / 1740.0; }

// A full 3-s window whose settled samples peak at `max_w`.
[[gnu::noinline]] Observation settled_window(double cap_w, double max_w, const Knobs& knobs) {
  auto o = window(cap_w, max_w, knobs);
  o.settled_power = o.power;
  o.settled_power.start_s = 0.0;
  o.settled_power.end_s = 3.0;
  o.settled_power.samples = 300;
  return o;
}

// Runs mpsfit on a GPU that draws `truth(f)` for `windows` windows at a constant cap; returns the
// clocks it ran, and counts windows over the cap.
std::vector<double> run_mpsfit(MpsfitController& c, Knobs& knobs, double cap_w, int windows,
                               const std::function<double(double)>& truth, int& over) {
  std::vector<double> clocks;
  for (int i = 0; i < windows; ++i) {
    const double drawn_w = truth(*knobs.sm_clock_mhz);
    if (drawn_w > cap_w) ++over;
    clocks.push_back(*knobs.sm_clock_mhz);
    knobs = c.decide(settled_window(cap_w, drawn_w, knobs));
  }
  return clocks;
}

TEST(Mpsfit, FirstWindowOfAPartitionKeepsAWideMarginThenClimbsToTheCap) {
  MpsfitController c({.planning = planning()});
  auto knobs = c.initial_knobs(200.0);
  ASSERT_EQ(knobs.tenants.size(), 2u);
  EXPECT_EQ(knobs.tenants[0].batch_size, 19) << "planned for the cap less its margin (3.4 % before any window)";
  EXPECT_EQ(knobs.mem_clock_mhz, 9501.0);
  // The first window keeps 8 % below the cap: the highest clock predicted at <= 184 W.
  EXPECT_LE(model_w(*knobs.sm_clock_mhz), 184.0);
  EXPECT_GT(model_w(*knobs.sm_clock_mhz + 15.0), 184.0);
  int over = 0;
  const auto clocks = run_mpsfit(c, knobs, 200.0, 12, model_w, over);
  EXPECT_EQ(over, 0);
  EXPECT_GT(clocks.back(), clocks.front());
  // Once measured, the margin shrinks to the 3-sigma spread (about 3.4 % of the cap here).
  EXPECT_GE(model_w(clocks.back()), 0.95 * 200.0);
}

TEST(Mpsfit, APredictorThatUnderestimatesIsCorrectedByTheWindows) {
  MpsfitController c({.planning = planning()});
  auto knobs = c.initial_knobs(200.0);
  // The GPU draws 6 % more than predicted: the first window (8 % margin) is still under the cap,
  // and the next clocks follow the corrected prediction.
  const auto truth = [](double f) { return 1.06 * model_w(f); };
  int over = 0;
  const auto clocks = run_mpsfit(c, knobs, 200.0, 15, truth, over);
  EXPECT_EQ(over, 0);
  EXPECT_NEAR(c.power_ratio(), 1.06, 0.01);
  EXPECT_GE(truth(clocks.back()), 0.93 * 200.0);
  EXPECT_LE(c.expected_power_w(clocks.back()), 200.0);
}

TEST(Mpsfit, AWindowOverTheCapWidensTheMarginAndLowersTheClock) {
  MpsfitController c({.planning = planning()});
  auto knobs = c.initial_knobs(200.0);
  int over = 0;
  (void)run_mpsfit(c, knobs, 200.0, 10, model_w, over);
  const double settled = *knobs.sm_clock_mhz;
  // A spike: this clock drew 205 W once.
  knobs = c.decide(settled_window(200.0, 205.0, knobs));
  EXPECT_LT(*knobs.sm_clock_mhz, settled);
  EXPECT_LT(c.power_budget_w(200.0, true), 0.96 * 200.0);
}

TEST(Mpsfit, ACapChangeRePlansAtOnceAndStartsTheNewPartitionCautiously) {
  MpsfitController c({.planning = planning()});
  EXPECT_TRUE(c.reacts_to_cap_changes());
  auto knobs = c.initial_knobs(200.0);
  int over = 0;
  (void)run_mpsfit(c, knobs, 200.0, 6, model_w, over);
  knobs = c.decide(settled_window(150.0, model_w(*knobs.sm_clock_mhz), knobs));
  EXPECT_EQ(knobs.tenants[0].batch_size, 14) << "planned for the 150-W cap less its margin";
  EXPECT_LE(model_w(*knobs.sm_clock_mhz), 0.92 * 150.0);
  // The first window of the new partition holds the workers' restart: it is not learnt from.
  EXPECT_DOUBLE_EQ(c.power_ratio(), 1.0);
  (void)c.decide(settled_window(150.0, 110.0, knobs));
  EXPECT_DOUBLE_EQ(c.power_ratio(), 1.0);
  // The next one is.
  (void)c.decide(settled_window(150.0, 0.9 * model_w(*knobs.sm_clock_mhz), knobs));
  EXPECT_LT(c.power_ratio(), 1.0);
}

TEST(Mpsfit, NothingPredictedToFitFallsBackToTheSmallestPartitionAtTheLowestClock) {
  MpsfitController c({.planning = planning()});
  const auto knobs = c.initial_knobs(60.0);
  ASSERT_EQ(knobs.tenants.size(), 1u);
  EXPECT_EQ(knobs.tenants[0].mps_share_pct, 5.0);
  EXPECT_EQ(knobs.sm_clock_mhz, 210.0);
}

TEST(MpsControllers, NeedAPlannerAndRejectOptionsTheyDoNotUse) {
  const PlatformLimits limits{{500, 1000}, {}, 100.0, 350.0};
  EXPECT_THROW((void)make_controller("pctodl", {}, limits), Error);
  ControllerOptions o;
  o.mps_planning = planning();
  EXPECT_EQ(make_controller("pctodl", o, limits)->name(), "pctodl");
  EXPECT_EQ(make_controller("directcap", o, limits)->name(), "directcap");
  EXPECT_EQ(make_controller("mpsfit", o, limits)->name(), "mpsfit");
  EXPECT_THROW((void)make_controller("mpsfit", {}, limits), Error);
  EXPECT_TRUE(plans_with_fitted_predictor("mpsfit"));
  EXPECT_FALSE(plans_with_fitted_predictor("pctodl"));
  EXPECT_TRUE(needs_mps_planning("mpsfit"));
  EXPECT_FALSE(uses_power_band("mpsfit"));
  EXPECT_THROW((void)make_controller("capfit", o, limits), Error);
  o.alpha = 0.9;
  EXPECT_THROW((void)make_controller("pctodl", o, limits), Error);
  EXPECT_TRUE(needs_mps_planning("PctoDL"));
  EXPECT_FALSE(needs_mps_planning("morak"));
}

TEST(MorakMps, RunsItsSharesAtOneBatchAndJudgesTheSlowestTenant) {
  ControllerOptions o;
  o.mps_shares_pct = std::vector<double>{40.0, 40.0};
  o.latency_slo_ms = 100.0;
  const PlatformLimits limits{{500, 1000}, {500, 750, 1000}, 100.0, 350.0};
  auto c = make_controller("morak", o, limits);
  const auto knobs = c->initial_knobs(200.0);
  ASSERT_EQ(knobs.tenants.size(), 2u);
  EXPECT_EQ(knobs.tenants[0].mps_share_pct, 40.0);
  EXPECT_EQ(knobs.tenants[1].batch_size, knobs.tenants[0].batch_size);
  // Below the band: a tenant at 96 images / 480 img/s = 200 ms breaks the 90-ms line, so the clock
  // rises instead of the batch.
  auto obs = window(200.0, 150.0, knobs);
  obs.tenant_throughput_img_s = {4800.0, 480.0};
  const auto next = c->decide(obs);
  EXPECT_EQ(next.tenants[0].batch_size, knobs.tenants[0].batch_size);
  EXPECT_GT(*next.sm_clock_mhz, *knobs.sm_clock_mhz);
  o.mps_shares_pct = std::vector<double>{60.0, 50.0};
  EXPECT_THROW((void)make_controller("morak", o, limits), Error);
  o.mps_shares_pct = std::vector<double>{42.0};
  EXPECT_THROW((void)make_controller("morak", o, limits), Error);
}

}  // namespace
}  // namespace gpucap::control
