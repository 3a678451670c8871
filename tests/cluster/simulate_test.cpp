// cluster::simulate on small clusters: the same scenario under every policy, the optimum above
// them all, no budget violations, deterministic from the seed; the twin's curves; bad options.

#include "gpucap/cluster/simulate.hpp"

#include <gtest/gtest.h>

#include "support/expect_error.hpp"
#include "support/paths.hpp"

namespace gpucap::cluster {
namespace {

const sim::Catalog& catalog() {
  static const auto c = sim::Catalog::load(test::data_dir());
  return c;
}

SimulateOptions small(std::size_t nodes = 40) {
  SimulateOptions o;
  o.nodes = nodes;
  o.duration_s = 120.0;
  o.seed = 3;
  return o;
}

TEST(TwinCurves, CapacityGrowsWithTheCapAndStopsAtTheGpusLimits) {
  const auto capacity = twin_capacity(catalog().gpu("a100"), catalog().model("resnet50"));
  ASSERT_TRUE(capacity.has_value());
  EXPECT_EQ(capacity->caps_w.front(), catalog().gpu("a100").power_limit_min_w);
  EXPECT_EQ(capacity->caps_w.back(), catalog().gpu("a100").power_limit_max_w);
  for (std::size_t i = 1; i < capacity->throughput_rps.size(); ++i) {
    EXPECT_GE(capacity->throughput_rps[i], capacity->throughput_rps[i - 1]);  // a running maximum
  }
  EXPECT_GT(capacity->tdp_rps, 0.0);
  EXPECT_GT(capacity->throughput_rps.back(), capacity->throughput_rps.front());
}

TEST(Simulate, EveryPolicyStaysWithinTheBudgetAndTheOptimumBoundsThemAll) {
  const auto report = simulate(catalog(), small());
  ASSERT_EQ(report.runs.size(), all_policies().size());
  EXPECT_EQ(report.initial_nodes, 40U);
  EXPECT_NEAR(report.budget_w, 0.7 * report.sum_tdp_w, 1e-6);
  for (const auto& run : report.runs) {
    EXPECT_EQ(run.budget_violations, 0U) << to_string(run.policy);
    EXPECT_GT(run.throughput, 0.0) << to_string(run.policy);
    // The optimum is an upper bound with no protocol delays: no policy can beat it (1 % for the
    // moments a lost node's power is still counted by the bound but not yet reclaimable).
    EXPECT_LE(run.throughput, report.optimum * 1.01) << to_string(run.policy);
    EXPECT_GT(run.rounds, 0U);
    EXPECT_GT(run.realloc_samples, 0U);
  }
  EXPECT_GE(report.run(Policy::gpucap).throughput, report.run(Policy::equal).throughput);
  EXPECT_GT(report.joined + report.left + report.died + report.partitioned, 0U) << "no churn: a weak test";
}

TEST(Simulate, TheSameSeedGivesTheSameFiguresAndTheJsonHasTheIssuesKeys) {
  auto options = small(20);
  options.duration_s = 60.0;
  const auto a = to_json(simulate(catalog(), options));
  const auto b = to_json(simulate(catalog(), options));
  for (const char* key : {"throughput", "budget_violations", "max_realloc_s", "nodes", "baselines"}) {
    ASSERT_TRUE(a.contains(key)) << key;
    EXPECT_EQ(a[key], b[key]) << key;
  }
  for (const char* key : {"equal_split", "tdp_proportional", "power_balancer", "optimum"}) {
    EXPECT_TRUE(a["baselines"].contains(key)) << key;
  }
  EXPECT_EQ(a["platform"], "simulated");
  EXPECT_EQ(a["nodes"], 20);
  options.seed = 4;
  EXPECT_NE(to_json(simulate(catalog(), options))["throughput"], a["throughput"]);
}

TEST(Simulate, ABudgetStepDownIsFollowedWithoutAViolation) {
  auto options = small(30);
  options.budget_steps = {{40.0, 0.49, true}, {80.0, 0.7, true}};  // -30 %, then back
  options.broken_curve_fraction = 0.1;
  const auto report = simulate(catalog(), options);
  for (const auto& run : report.runs) EXPECT_EQ(run.budget_violations, 0U) << to_string(run.policy);
  EXPECT_GT(report.run(Policy::gpucap).ignored, 0U) << "the broken curves were not noticed";
}

TEST(Simulate, BadOptionsAreRefused) {
  auto o = small();
  o.nodes = 0;
  test::expect_error_from([&] { validate(o); }, ErrorCode::usage, "--nodes 0 must be between 1 and 100000");
  o = small();
  o.budget = -1.0;
  test::expect_error_from([&] { validate(o); }, ErrorCode::usage, "budget -1 must be positive");
  o = small();
  o.budget = 3.0;
  test::expect_error_from([&] { validate(o); }, ErrorCode::usage, "is absurd");
  o = small();
  o.budget_steps = {{500.0, 0.5, true}};
  test::expect_error_from([&] { validate(o); }, ErrorCode::usage, "must lie inside the run");
  o = small();
  o.leave_fraction = 0.6;
  o.death_fraction = 0.6;
  test::expect_error_from([&] { validate(o); }, ErrorCode::usage, "must sum to at most 1");
  o = small();
  o.gpus = {"no-such-gpu"};
  test::expect_error_from([&] { (void)simulate(catalog(), o); }, ErrorCode::usage, "no-such-gpu");
}

}  // namespace
}  // namespace gpucap::cluster
