// PctoDL's shadow optimizer (seed-systems.md §2.9): candidates, threshold schedule, proposals.
#include "gpucap/tune/shadow.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "gpucap/core/error.hpp"

namespace gpucap::tune {
namespace {

int total(const std::vector<Tenant>& tenants) {
  int sum = 0;
  for (const auto& t : tenants) sum += t.share_pct;
  return sum;
}

// Throughput grows with every tenant's batch and share; power 100 W plus 0.2 W per image of batch.
PartitionPrediction model(const std::vector<Tenant>& tenants, double, double) {
  double throughput = 0.0, power = 100.0;
  for (const auto& t : tenants) {
    throughput += 10.0 * t.share_pct * t.batch / (t.batch + 32.0);
    power += 0.2 * t.batch;
  }
  return {throughput, power};
}

TEST(Shadow, CandidatesAreOneMoveAwayAndStayOnTheShareGrid) {
  const ShadowOptimizer shadow({}, model);
  const std::vector<Tenant> current = {{50, 64}, {30, 32}, {20, 16}};
  const auto candidates = shadow.candidates(current);
  ASSERT_FALSE(candidates.empty());
  bool merged = false, split = false, share_move = false, batch_move = false;
  for (const auto& c : candidates) {
    EXPECT_LE(total(c), 100);
    for (const auto& t : c) {
      EXPECT_EQ(t.share_pct % 5, 0);
      EXPECT_GE(t.share_pct, 5);
    }
    EXPECT_NE(c, current);
    merged = merged || (c.size() == 2 && std::find(c.begin(), c.end(), Tenant{50, 32}) != c.end());
    split = split || (c.size() == 4 && std::count(c.begin(), c.end(), Tenant{25, 64}) == 2);
    share_move = share_move || (c.size() == 3 && c[0].share_pct == 45 && c[1].share_pct == 35);
    batch_move = batch_move || (c.size() == 3 && c[0].share_pct == 50 && c[0].batch != 64 && c[1] == current[1]);
  }
  EXPECT_TRUE(merged) << "the two smallest merged, the larger batch kept";
  EXPECT_TRUE(split) << "the largest split in halves";
  EXPECT_TRUE(share_move) << "a share step moved to a tenant from the largest other";
  EXPECT_TRUE(batch_move);
}

TEST(Shadow, TheAdaptiveThresholdAcceptsLossesEarlyThenAsksForGains) {
  ShadowParams params;
  params.refit_every = 1000;  // the threshold needs no GP
  ShadowOptimizer shadow(params, model);
  EXPECT_DOUBLE_EQ(shadow.threshold(), -0.10);
  const ShadowPoint point{{{50, 64}, {50, 64}}, 1200.0, 5001.0};
  for (int i = 0; i < 500; ++i) shadow.update(point, 500.0 + (i % 7), 150.0 + (i % 5));
  EXPECT_NEAR(shadow.threshold(), 0.0, 1e-12);
  for (int i = 0; i < 1000; ++i) shadow.update(point, 500.0, 150.0);
  EXPECT_NEAR(shadow.threshold(), 0.02 * (1.0 - std::exp(-4.0)), 1e-12);
  ShadowParams fixed;
  fixed.adaptive_threshold = false;
  EXPECT_DOUBLE_EQ(ShadowOptimizer(fixed, model).threshold(), 0.003);
}

TEST(Shadow, ProposesOnlyOnceFittedAndPrefersAGainUnderTheCap) {
  ShadowOptimizer shadow({}, model);
  const ShadowPoint current{{{50, 32}, {50, 32}}, 1200.0, 5001.0};
  const auto truth = model(current.tenants, 0, 0);
  EXPECT_FALSE(shadow.propose(current, truth.throughput_img_s, 200.0).has_value()) << "no GP yet";
  // The predictor is right at the current partition (residuals ~0, a little noise).
  for (int i = 0; i < 6; ++i) {
    shadow.update(current, truth.throughput_img_s + 0.5 * (i % 2), truth.power_w + 0.1 * (i % 3));
  }
  ASSERT_TRUE(shadow.fitted());
  const auto proposal = shadow.propose(current, truth.throughput_img_s, 200.0);
  ASSERT_TRUE(proposal.has_value());
  EXPECT_GT(proposal->expected_img_s, truth.throughput_img_s);
  EXPECT_LT(proposal->expected_w, 200.0);
  EXPECT_DOUBLE_EQ(proposal->threshold, shadow.threshold());
}

TEST(Shadow, RejectsAStepThatDoesNotDivide100) {
  ShadowParams params;
  params.mps_step_pct = 7;
  EXPECT_THROW(ShadowOptimizer(params, model), Error);
}

}  // namespace
}  // namespace gpucap::tune
