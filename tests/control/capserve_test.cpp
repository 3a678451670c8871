#include "gpucap/control/capserve.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <optional>

#include "gpucap/core/error.hpp"

namespace gpucap::control {
namespace {

// A toy GPU: two SM clocks, batches 1..64 profiled at powers of two. At 1000 MHz batch 64 runs
// 889 items/s (72 ms a batch) at 147 W; at 500 MHz half the throughput at 94 W.
std::shared_ptr<const predict::ProfileModel> toy_profile(const std::vector<double>& clocks_mhz = {500.0, 1000.0}) {
  std::vector<predict::ProfileSample> samples;
  for (const double mhz : clocks_mhz) {
    for (int b = 1; b <= 64; b *= 2) {
      const double fill = static_cast<double>(b) / (b + 8.0);
      samples.push_back({b, mhz, std::nullopt, 1000.0 * fill * mhz / 1000.0, 40.0 + 120.0 * fill * mhz / 1000.0});
    }
  }
  return std::make_shared<const predict::ProfileModel>(samples);
}

CapserveParams toy_params(double slo_s = 0.2) {
  CapserveParams p;
  p.profile = toy_profile();
  p.slo_s = slo_s;
  p.max_batch_size = 64;
  p.limits.power_limit_min_w = 50.0;
  p.limits.power_limit_max_w = 300.0;
  return p;
}

ServingObservation window(const ServingKnobs& knobs, double cap_w, double arrival_rps, double max_w, double p99_s,
                          double busy = 0.9) {
  ServingObservation o;
  o.time_s = 1.0;
  o.window_s = 1.0;
  o.cap_w = cap_w;
  o.slo_s = 0.2;
  o.power.start_s = 0.0;
  o.power.end_s = 1.0;
  o.power.samples = 100;
  o.power.max_w = max_w;
  o.power.mean_w = max_w * 0.9;
  o.settled_power = o.power;  // the readings show the window's own configuration
  o.arrival_rps = arrival_rps;
  o.answered_rps = arrival_rps;
  o.p99_s = p99_s;
  o.busy_fraction = busy;
  o.knobs = knobs;
  return o;
}

TEST(Capserve, ChoosesTheLeastEnergyPerItemThatCarriesTheLoadUnderTheCapAndTheSlo) {
  const CapserveController c(toy_params());
  // 200 items/s under 200 W: several configurations carry it; the least energy per item wins.
  const auto light = c.choose(200.0, 200.0);
  ASSERT_TRUE(light);
  EXPECT_TRUE(light->carries_load);
  EXPECT_GE(light->throughput_items_s * 0.85, 200.0);
  EXPECT_LE(2.0 * light->batch_time_s, 0.7 * 0.2 + 1e-12);
  // No candidate that also carries it under the cap and the SLO uses less energy per item.
  const auto profile = toy_profile();
  const double chosen_j = light->power_w / light->throughput_items_s;
  int feasible = 0;
  for (const auto& column : profile->columns()) {
    for (int b = 1; b <= 64; ++b) {
      const auto p = profile->predict(column, b);
      ASSERT_TRUE(p);
      const double batch_s = b / p->throughput_img_s;
      if (p->max_power_w > 200.0 * 0.98 || 2.0 * batch_s > 0.7 * 0.2 || p->throughput_img_s * 0.85 < 200.0) continue;
      ++feasible;
      EXPECT_GE(p->max_power_w / p->throughput_img_s, chosen_j - 1e-12) << b << " at " << column.sm_clock_mhz;
    }
  }
  EXPECT_GT(feasible, 1);
  // A cap of 100 W rules out the high clock's large batches: the choice stays under the budget.
  const auto capped = c.choose(100.0, 200.0);
  ASSERT_TRUE(capped);
  EXPECT_TRUE(capped->carries_load);
  EXPECT_LE(capped->power_w, 100.0 * 0.98 + 1e-9);
  EXPECT_GT(light->power_w, 100.0 * 0.98);
  // Below anything the GPU draws: nothing fits.
  EXPECT_FALSE(c.choose(30.0, 10.0).has_value());
}

TEST(Capserve, UnderOverloadItRunsTheMostCapacityAndBoundsTheQueueToTheSlo) {
  CapserveController c(toy_params());
  const auto first = c.initial_knobs(200.0);
  EXPECT_EQ(first.power_limit_w, 200.0);
  // 5000 requests/s: beyond anything under the cap and the SLO.
  const auto next = c.decide(window(first, 200.0, 5000.0, 150.0, 0.05));
  const auto best = c.choose(200.0, std::numeric_limits<double>::infinity());
  ASSERT_TRUE(best);
  EXPECT_FALSE(best->carries_load);
  EXPECT_EQ(next.max_batch_size, best->batch_cap);  // the configuration with the most capacity
  // The queue holds what the GPU drains within the latency budget after the batch in flight: an
  // arrival beyond it is shed.
  ASSERT_TRUE(std::isfinite(next.max_queued_items));
  EXPECT_NEAR(next.max_queued_items, best->throughput_items_s * (0.7 * 0.2 - best->batch_time_s), 1e-6);
  // No candidate has more capacity under the cap and the SLO.
  for (double rate = 100.0; rate <= 1000.0; rate += 100.0) {
    const auto other = c.choose(200.0, rate);
    if (other) {
      EXPECT_LE(other->throughput_items_s, best->throughput_items_s + 1e-9);
    }
  }
}

TEST(Capserve, BacksOffWhenTheP99NearsTheSloAndWidensTheMarginAfterAnOvershoot) {
  CapserveController c(toy_params());
  auto knobs = c.initial_knobs(200.0);
  const double kappa = c.latency_fraction();
  knobs = c.decide(window(knobs, 200.0, 300.0, 150.0, 0.19));  // p99 at 95 % of the SLO
  EXPECT_LT(c.latency_fraction(), kappa);
  const auto before = c.choose(150.0, 300.0);
  ASSERT_TRUE(before);
  (void)c.decide(window(knobs, 150.0, 300.0, 160.0, 0.05));  // a window over the cap
  const auto after = c.choose(150.0, 300.0);
  ASSERT_TRUE(after);
  EXPECT_LE(after->power_w, 150.0 * (1.0 - 0.04) + 1e-9);  // the margin grew from 2 to 4 %
  EXPECT_GT(before->power_w, 150.0 * (1.0 - 0.04));        // so the first choice is now ruled out
}

// A cap change cuts the window short, often to milliseconds: the rate it measured (none, or one
// arrival in 10 µs) is filled out to a whole window with the rate measured before it, so the plan
// for the next second is not made for no load or for 100,000 requests/s.
TEST(Capserve, AWindowACapChangeCutShortIsFilledOutWithTheRateBeforeIt) {
  CapserveController c(toy_params());
  auto knobs = c.decide(window(c.initial_knobs(200.0), 200.0, 400.0, 150.0, 0.05));
  auto cut = window(knobs, 120.0, 0.0, 150.0, 0.05);
  cut.window_s = 0.002;
  cut.cap_transition = true;
  EXPECT_NEAR(c.arrival_rate(cut), 400.0 * 0.998, 1e-9);
  knobs = c.decide(cut);
  const auto carrying = c.choose(120.0, c.planned_rate(400.0 * 0.998));
  ASSERT_TRUE(carrying);
  ASSERT_TRUE(carrying->carries_load);
  EXPECT_EQ(knobs.max_batch_size, carrying->batch_cap) << "planned for the load, not for none";
  EXPECT_GE(carrying->throughput_items_s * 0.85, 400.0);
  auto burst = window(knobs, 120.0, 1.0 / 1e-5, 150.0, 0.05);
  burst.window_s = 1e-5;
  EXPECT_NEAR(c.arrival_rate(burst), (1.0 + 400.0 * 0.998 * (1.0 - 1e-5)) / 1.0, 1e-6);
  // A whole window is taken as it measured.
  EXPECT_DOUBLE_EQ(c.arrival_rate(window(knobs, 120.0, 50.0, 100.0, 0.05)), 50.0);
}

// Windows over the cap widen the margin only up to its ceiling, and not while nothing fit under
// the cap at all (the fallback is over it whatever the margin): once the cap rises again, capserve
// plans with a margin of a few per cent, not one that rules out everything for minutes.
TEST(Capserve, TheMarginHasACeilingAndTheFallbackDoesNotWidenIt) {
  CapserveController c(toy_params());
  auto knobs = c.initial_knobs(200.0);
  for (int i = 0; i < 60; ++i) knobs = c.decide(window(knobs, 200.0, 300.0, 210.0, 0.05));
  EXPECT_DOUBLE_EQ(c.power_margin(), 0.2);
  CapserveController low(toy_params());
  knobs = low.decide(window(low.initial_knobs(200.0), 200.0, 300.0, 150.0, 0.05));
  const double margin = low.power_margin();
  for (int i = 0; i < 60; ++i) knobs = low.decide(window(knobs, 30.0, 300.0, 45.0, 0.05));  // below batch 1's power
  EXPECT_LE(low.power_margin(), margin + 0.02 + 1e-12) << "at most the window that ran before the fallback";
  EXPECT_TRUE(low.choose(300.0, 300.0).has_value());
}

// Nothing fits under the cap: batch 1 at the lowest clock, and a queue of what batches of one
// drain within κ·SLO. A profile swept from batch 8 bounds a batch of one by batch 8's time (not by
// batch 8's throughput, eight times too many items).
TEST(Capserve, TheFallbacksQueueIsSizedForBatchesOfOne) {
  std::vector<predict::ProfileSample> samples;
  for (int b = 8; b <= 64; b *= 2) samples.push_back({b, 1000.0, std::nullopt, 100.0 * b / (b + 8.0) * 10.0, 60.0 + b});
  auto params = toy_params();
  params.profile = std::make_shared<const predict::ProfileModel>(samples);
  CapserveController c(params);
  ASSERT_FALSE(c.choose(40.0, 100.0).has_value());
  const auto knobs = c.decide(window(c.initial_knobs(40.0), 40.0, 100.0, 50.0, 0.05));
  EXPECT_EQ(knobs.max_batch_size, 1);
  const double batch8_s = 8.0 / (100.0 * 8.0 / 16.0 * 10.0);
  EXPECT_NEAR(knobs.max_queued_items, 0.7 * 0.2 / batch8_s, 1e-9);
}

TEST(Capserve, BacksOffOncePerSpanOfTheP99ItReads) {
  CapserveController c(toy_params());
  auto knobs = c.initial_knobs(200.0);
  const double start = c.latency_fraction();
  auto near_slo = [&](double at_s) {
    auto o = window(knobs, 200.0, 300.0, 150.0, 0.19);  // p99 at 95 % of the SLO
    o.time_s = at_s;
    knobs = c.decide(o);
  };
  near_slo(1.0);
  const double once = c.latency_fraction();
  EXPECT_NEAR(once, start * 0.85, 1e-12);
  // The p99 covers the last 10 s: it still shows the requests before the backoff until 11 s.
  for (double t = 2.0; t < 11.0; t += 1.0) near_slo(t);
  EXPECT_EQ(c.latency_fraction(), once);
  near_slo(11.0);
  EXPECT_NEAR(c.latency_fraction(), once * 0.85, 1e-12);
}

// Windows of an overload (5000 requests/s, far beyond the toy GPU under 200 W) at given times.
class Overload {
 public:
  explicit Overload(CapserveController& c)
      : c_(c), knobs_(c.initial_knobs(200.0)), best_(c.choose(200.0, std::numeric_limits<double>::infinity())) {
    if (!best_) ADD_FAILURE() << "no configuration under 200 W";
  }
  // Items the queue may hold for a budget of `slo_share` of the SLO (0.2 s) less one batch of the
  // configuration with the most capacity under 200 W (as chosen at the start).
  [[nodiscard]] double bound(double slo_share) const {
    return best_ ? best_->throughput_items_s * (slo_share * 0.2 - best_->batch_time_s) : std::nan("");
  }
  ServingKnobs at(double time_s, double p99_s, double shed_rps) {
    auto o = window(knobs_, 200.0, 5000.0, 150.0, p99_s);
    o.time_s = time_s;
    o.answered_rps = 800.0;
    o.shed_rps = shed_rps;
    knobs_ = c_.decide(o);
    return knobs_;
  }

 private:
  CapserveController& c_;
  ServingKnobs knobs_;
  std::optional<CapserveChoice> best_;
};

TEST(Capserve, AQueueThatShedsWhileTheP99HasRoomGrowsAndIsHalvedThenClearedBeforeKappaMoves) {
  CapserveController c(toy_params());
  Overload overload(c);
  const auto bound = [&overload](double slo_share) { return overload.bound(slo_share); };
  // Requests shed with a p99 at 40 % of the SLO: each window adds 2 % of the SLO to the budget.
  EXPECT_NEAR(overload.at(1.0, 0.08, 4000.0).max_queued_items, bound(0.72), 1e-6);
  EXPECT_NEAR(overload.at(2.0, 0.08, 4000.0).max_queued_items, bound(0.74), 1e-6);
  // Up to κ + room = 0.9 of the SLO, no further.
  for (int i = 3; i < 20; ++i) (void)overload.at(i, 0.08, 4000.0);
  EXPECT_NEAR(overload.at(20.0, 0.08, 4000.0).max_queued_items, bound(0.9), 1e-6);
  // A p99 at 88 % of the SLO (past 85 %, not 90 %) holds the room where it is.
  EXPECT_NEAR(overload.at(21.0, 0.176, 4000.0).max_queued_items, bound(0.9), 1e-6);
  // A p99 past 90 % halves the room (0.2 of the SLO to 0.1) and leaves κ.
  EXPECT_NEAR(overload.at(22.0, 0.19, 4000.0).max_queued_items, bound(0.8), 1e-6);
  EXPECT_EQ(c.latency_fraction(), 0.7);
  // For the p99's span (10 s) nothing moves on it: it still shows the requests before the cut.
  EXPECT_NEAR(overload.at(27.0, 0.08, 4000.0).max_queued_items, bound(0.8), 1e-6);
  EXPECT_NEAR(overload.at(31.0, 0.19, 4000.0).max_queued_items, bound(0.8), 1e-6);
  EXPECT_EQ(c.latency_fraction(), 0.7);
  // Still near the SLO after the hold: the room is cleared; only the next cut would lower κ.
  EXPECT_NEAR(overload.at(32.0, 0.19, 4000.0).max_queued_items, bound(0.7), 1e-6);
  EXPECT_EQ(c.latency_fraction(), 0.7);
  // Room again once the p99 has room. Windows that shed nothing keep it for a while (near the
  // capacity the next burst comes within a few); the tenth in a row gives a step back, and so on.
  EXPECT_NEAR(overload.at(42.0, 0.08, 4000.0).max_queued_items, bound(0.72), 1e-6);
  EXPECT_NEAR(overload.at(43.0, 0.08, 4000.0).max_queued_items, bound(0.74), 1e-6);
  for (int i = 44; i < 53; ++i) EXPECT_NEAR(overload.at(i, 0.08, 0.0).max_queued_items, bound(0.74), 1e-6) << i;
  EXPECT_NEAR(overload.at(53.0, 0.08, 0.0).max_queued_items, bound(0.72), 1e-6);
  EXPECT_NEAR(overload.at(54.0, 0.08, 0.0).max_queued_items, bound(0.7), 1e-6);
  // A shed starts the count again.
  (void)overload.at(55.0, 0.08, 4000.0);
  for (int i = 56; i < 65; ++i) EXPECT_NEAR(overload.at(i, 0.08, 0.0).max_queued_items, bound(0.72), 1e-6) << i;
}

// Windows that shed nothing count towards the ten also while the p99's hold keeps everything else
// still: the step goes back at the hold's end.
TEST(Capserve, ShedFreeWindowsWithinTheHoldCountTowardsGivingTheRoomBack) {
  CapserveController c(toy_params());
  Overload overload(c);
  const auto bound = [&overload](double slo_share) { return overload.bound(slo_share); };
  (void)overload.at(1.0, 0.08, 4000.0);
  EXPECT_NEAR(overload.at(2.0, 0.08, 4000.0).max_queued_items, bound(0.74), 1e-6);
  EXPECT_NEAR(overload.at(3.0, 0.19, 4000.0).max_queued_items, bound(0.72), 1e-6);  // halved: 0.04 to 0.02
  for (int i = 4; i < 13; ++i) EXPECT_NEAR(overload.at(i, 0.08, 0.0).max_queued_items, bound(0.72), 1e-6) << i;
  EXPECT_NEAR(overload.at(13.0, 0.08, 0.0).max_queued_items, bound(0.7), 1e-6);  // the tenth, after the hold
}

TEST(Capserve, ABackedOffKappaRecoversUnderOverloadBeforeTheQueueGrows) {
  CapserveController c(toy_params());
  Overload overload(c);
  (void)overload.at(1.0, 0.19, 4000.0);  // no room yet: κ backs off
  EXPECT_NEAR(c.latency_fraction(), 0.7 * 0.85, 1e-12);
  // Shedding windows with the p99 far below the SLO, after the hold: κ climbs back 2 % a window.
  double t = 11.0;
  (void)overload.at(t, 0.06, 4000.0);
  EXPECT_NEAR(c.latency_fraction(), 0.7 * 0.85 * 1.02, 1e-12);
  while (c.latency_fraction() < 0.7 && t < 40.0) (void)overload.at(t += 1.0, 0.06, 4000.0);
  EXPECT_EQ(c.latency_fraction(), 0.7);
  // Then the queue's room grows.
  const auto best = c.choose(200.0, std::numeric_limits<double>::infinity());
  ASSERT_TRUE(best);
  EXPECT_NEAR(overload.at(t + 1.0, 0.06, 4000.0).max_queued_items,
              best->throughput_items_s * (0.72 * 0.2 - best->batch_time_s), 1e-6);
}

TEST(Capserve, TheRoomThatGrewWhileKappaWasBackedOffIsCutWhenKappaRecovers) {
  CapserveController c(toy_params());
  Overload overload(c);
  (void)overload.at(1.0, 0.19, 4000.0);  // κ backs off to 0.595
  // A p99 at 70 % of the SLO: too high for κ to recover, room enough for the queue to grow, up to
  // κ + room = 0.9.
  double t = 11.0;
  for (; t < 40.0; t += 1.0) (void)overload.at(t, 0.14, 4000.0);
  const double backed_off = c.latency_fraction();
  EXPECT_NEAR(backed_off, 0.7 * 0.85, 1e-12);
  const auto best = c.choose(200.0, std::numeric_limits<double>::infinity());
  ASSERT_TRUE(best);
  EXPECT_NEAR(overload.at(t, 0.14, 4000.0).max_queued_items, best->throughput_items_s * (0.9 * 0.2 - best->batch_time_s), 1e-6);
  // The p99 falls far below: κ recovers, and the room shrinks with it so the budget stays at 0.9.
  const auto after = overload.at(t + 1.0, 0.06, 4000.0);
  EXPECT_GT(c.latency_fraction(), backed_off);
  const auto now_best = c.choose(200.0, std::numeric_limits<double>::infinity());
  ASSERT_TRUE(now_best);
  EXPECT_NEAR(after.max_queued_items, now_best->throughput_items_s * (0.9 * 0.2 - now_best->batch_time_s), 1e-6);
}

TEST(Capserve, AConfigurationThatCarriesTheLoadQueuesABurstWithinMostOfTheSlo) {
  CapserveController c(toy_params());
  auto light = [&](double time_s, double p99_s) {
    auto o = window(c.initial_knobs(200.0), 200.0, 200.0, 100.0, p99_s);
    o.time_s = time_s;
    return c.decide(o);
  };
  auto knobs = light(1.0, 0.03);
  auto chosen = c.choose(200.0, c.planned_rate(200.0));
  ASSERT_TRUE(chosen);
  ASSERT_TRUE(chosen->carries_load);
  EXPECT_EQ(knobs.max_batch_size, chosen->batch_cap);
  EXPECT_NEAR(knobs.max_queued_items,
              std::max<double>(chosen->batch_cap, chosen->throughput_items_s * (0.9 * 0.2 - chosen->batch_time_s)), 1e-6);
  // A p99 near the SLO takes the extra room away for the p99's span.
  knobs = light(2.0, 0.19);
  chosen = c.choose(200.0, c.planned_rate(200.0));
  ASSERT_TRUE(chosen);
  ASSERT_TRUE(chosen->carries_load);
  const double kappa = c.latency_fraction();
  EXPECT_LT(kappa, 0.7);
  EXPECT_NEAR(knobs.max_queued_items,
              std::max<double>(chosen->batch_cap, chosen->throughput_items_s * (kappa * 0.2 - chosen->batch_time_s)), 1e-6);
  knobs = light(7.0, 0.03);  // still within the p99's span: κ's budget alone
  EXPECT_EQ(c.latency_fraction(), kappa);
  EXPECT_NEAR(knobs.max_queued_items,
              std::max<double>(chosen->batch_cap, chosen->throughput_items_s * (kappa * 0.2 - chosen->batch_time_s)), 1e-6);
  knobs = light(12.0, 0.03);
  chosen = c.choose(200.0, c.planned_rate(200.0));
  ASSERT_TRUE(chosen);
  EXPECT_NEAR(knobs.max_queued_items,
              std::max<double>(chosen->batch_cap, chosen->throughput_items_s * (0.9 * 0.2 - chosen->batch_time_s)), 1e-6);
}

TEST(Capserve, AConfigurationThatKeepsUpWithTheArrivalsAndABurstQueuesWithinMostOfTheSlo) {
  // Near the capacity no configuration carries the load as rule 4 plans it (ρ_max and 3 σ), but
  // one whose capacity covers the measured rate and a burst of one σ still drains a burst: its
  // queue gets the whole budget. Above that it gets κ's alone, and bursts are shed.
  const auto bound_at = [](double arrival_rps, bool expect_keeps_up) {
    CapserveController c(toy_params());
    const auto knobs = c.decide(window(c.initial_knobs(200.0), 200.0, arrival_rps, 150.0, 0.05));
    const auto chosen = c.choose(200.0, c.planned_rate(arrival_rps), c.keep_up_rate(arrival_rps));
    EXPECT_TRUE(chosen.has_value());
    if (!chosen) return std::pair{0.0, 0.0};
    EXPECT_FALSE(chosen->carries_load) << arrival_rps;
    EXPECT_EQ(chosen->keeps_up, expect_keeps_up) << arrival_rps;
    EXPECT_EQ(knobs.max_batch_size, chosen->batch_cap);
    const double budget_s = (expect_keeps_up ? 0.9 : 0.7) * 0.2 - chosen->batch_time_s;
    return std::pair{knobs.max_queued_items, chosen->throughput_items_s * budget_s};
  };
  // The toy's most capacity under 200 W within κ·SLO: batch 61 at 1000 MHz (2 · 69 ms ≤ 0.7 · 200
  // ms), 883 items/s.
  const auto [keeps_up, keeps_up_expected] = bound_at(700.0, true);   // 700 + 26 ≤ 883 < (700 + 79) / 0.85
  EXPECT_NEAR(keeps_up, keeps_up_expected, 1e-6);
  // One σ, not rule 4's three: 840 + 29 ≤ 883 < 840 + 87.
  const auto [one_sigma, one_sigma_expected] = bound_at(840.0, true);
  EXPECT_NEAR(one_sigma, one_sigma_expected, 1e-6);
  const auto [behind, behind_expected] = bound_at(880.0, false);      // 880 + 30 > 883
  EXPECT_NEAR(behind, behind_expected, 1e-6);
  EXPECT_GT(keeps_up, behind);
}

TEST(Capserve, LearnsThePowerRatioOnlyFromBusySettledWindowsOutsideCapTransitions) {
  CapserveController c(toy_params());
  const auto knobs = c.initial_knobs(200.0);
  (void)c.decide(window(knobs, 200.0, 100.0, 60.0, 0.02, /*busy=*/0.1));  // mostly idle: nothing learnt
  EXPECT_EQ(c.power_ratio(), 1.0);
  auto unsettled = window(knobs, 200.0, 100.0, 1e3, 0.02, /*busy=*/0.9);
  unsettled.settled_power = {};  // the readings still showed the configuration before
  (void)c.decide(unsettled);
  EXPECT_EQ(c.power_ratio(), 1.0);
  auto transition = window(knobs, 200.0, 100.0, 1e3, 0.02, /*busy=*/0.9);
  transition.cap_transition = true;  // the GPU as it ran under the old cap
  (void)c.decide(transition);
  EXPECT_EQ(c.power_ratio(), 1.0);
  (void)c.decide(window(knobs, 200.0, 100.0, 1e3, 0.02, /*busy=*/0.9));  // ran hotter than predicted
  EXPECT_GT(c.power_ratio(), 1.0);
}

// A real server spends time per item that the profile (inputs already on the GPU) leaves out: the
// batches' measured time teaches it, and the capacity planned for every batch size shrinks with it.
TEST(Capserve, LearnsTheServersOwnTimePerItemFromBatchesSlowerThanTheProfile) {
  auto p = toy_params();
  p.profile = toy_profile({1000.0});
  p.gpu_writes = false;
  CapserveController c(p);
  auto knobs = c.initial_knobs(300.0);
  knobs.max_batch_size = 16;  // the window's batches of 16 are full
  const auto profile = toy_profile({1000.0});
  const double batch16_s = 16.0 / profile->predict(profile->columns().front(), 16)->throughput_img_s;  // 24 ms
  const auto timed = [&](int batches, double batch_s) {
    auto o = window(knobs, 300.0, 100.0, 100.0, 0.02);
    o.batches = batches;
    o.mean_batch_items = 16.0;
    o.busy_fraction = batches * batch_s / o.window_s;
    return o;
  };
  (void)c.decide(timed(40, batch16_s * 1.04));  // within the profile's scatter: nothing learnt
  EXPECT_EQ(c.host_s_per_item(), 0.0);
  (void)c.decide(timed(4, batch16_s * 2.0));  // too few batches to time
  EXPECT_EQ(c.host_s_per_item(), 0.0);
  auto transition = timed(40, batch16_s * 2.0);
  transition.cap_transition = true;  // batches ran at the clocks before a cap change
  (void)c.decide(transition);
  EXPECT_EQ(c.host_s_per_item(), 0.0);
  auto sparse = timed(40, batch16_s * 2.0);
  sparse.knobs.max_batch_size = 64;  // batches of 16 under a cap of 64: a cost per batch, not per item
  (void)c.decide(sparse);
  EXPECT_EQ(c.host_s_per_item(), 0.0);
  const auto before = c.choose(300.0, 100.0);
  // Batches of 16 take 16 ms more than the profile's 24: 1 ms an item, learnt at the learning rate.
  for (int k = 0; k < 30; ++k) (void)c.decide(timed(20, batch16_s + 0.016));
  EXPECT_NEAR(c.host_s_per_item(), 0.001, 1e-5);
  const auto after = c.choose(300.0, 100.0);
  ASSERT_TRUE(before && after);
  EXPECT_NEAR(after->batch_time_s, after->batch_cap / profile->predict(profile->columns().front(), after->batch_cap)->throughput_img_s +
                                       0.001 * after->batch_cap, 1e-6);
  EXPECT_NEAR(after->throughput_items_s, after->batch_cap / after->batch_time_s, 1e-9);
  // The SLO bounds the batch by its real time now: two batches within 0.7 × 0.2 s.
  EXPECT_LE(2.0 * after->batch_time_s, 0.7 * 0.2 + 1e-12);
  EXPECT_LT(after->batch_cap, before->batch_cap);
  // Batches back at the profile's time: the learnt time decays away.
  for (int k = 0; k < 40; ++k) (void)c.decide(timed(20, batch16_s));
  EXPECT_LT(c.host_s_per_item(), 1e-8);
}

TEST(Capserve, RefusesWhatItCannotRunFrom) {
  CapserveParams no_profile;
  EXPECT_THROW(CapserveController{no_profile}, Error);
  auto p = toy_params();
  p.slo_s = 0.0;
  EXPECT_THROW(CapserveController{p}, Error);
  auto no_hold = toy_params();
  no_hold.queue_room_hold_windows = 0;  // the room would be given back in the window that grew it
  EXPECT_THROW(CapserveController{no_hold}, Error);
  // A configuration that carries the planned rate would not keep up, and lose its queue's room.
  auto wide_burst = toy_params();
  wide_burst.burst_sigmas = wide_burst.poisson_sigmas + 1.0;
  EXPECT_THROW(CapserveController{wide_burst}, Error);
  auto negative_burst = toy_params();
  negative_burst.burst_sigmas = -1.0;
  EXPECT_THROW(CapserveController{negative_burst}, Error);
  // Without GPU writes the clocks are the GPU's own: a profile that varies them cannot be followed.
  auto software = toy_params();
  software.gpu_writes = false;
  EXPECT_THROW(CapserveController{software}, Error);
}

// A software cap (a real GPU without --allow-gpu-control): the knobs hold the batch cap, the delay
// and the queue's bound, never a clock or a power limit, and nothing is asked of the GPU.
TEST(Capserve, UnderASoftwareCapItMovesOnlyTheBatcherAtTheGpusOwnClocks) {
  auto p = toy_params();
  p.profile = toy_profile({1000.0});  // a profile at the GPU's own clocks: one column
  p.gpu_writes = false;
  CapserveController c(p);
  const auto requirements = c.requirements();
  EXPECT_FALSE(requirements.sm_clock || requirements.memory_clock || requirements.power_limit);
  for (const auto& knobs : {c.initial_knobs(120.0), c.decide(window(c.initial_knobs(120.0), 120.0, 300.0, 110.0, 0.05)),
                            c.decide(window(c.initial_knobs(120.0), 45.0, 300.0, 110.0, 0.05))}) {
    EXPECT_FALSE(knobs.sm_clock_mhz.has_value());
    EXPECT_FALSE(knobs.memory_clock_mhz.has_value());
    EXPECT_FALSE(knobs.power_limit_w.has_value());
    EXPECT_GE(knobs.max_batch_size, 1);
  }
  // The batch cap still follows the cap: under 120 W less 2 % (117.6 W) batches up to 15 draw
  // little enough (the profile's power between batch 8, 100 W, and 16, 120 W, interpolated); at
  // 300 W the SLO alone bounds it (two batches of 61 take under 0.7 × 0.2 s).
  EXPECT_EQ(c.initial_knobs(120.0).max_batch_size, 15);
  EXPECT_EQ(c.initial_knobs(300.0).max_batch_size, 61);
}

}  // namespace
}  // namespace gpucap::control
