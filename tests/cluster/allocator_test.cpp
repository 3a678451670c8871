#include "gpucap/cluster/allocator.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "support/expect_error.hpp"

namespace gpucap::cluster {
namespace {

// A random node: a cap range somewhere in 60-700 W, 2-8 points, a TDP inside the range.
// concave: value increments that only shrink; otherwise any non-negative values.
NodeCurve random_curve(std::mt19937_64& rng, bool concave) {
  std::uniform_real_distribution<double> u(0.0, 1.0);
  NodeCurve c;
  c.min_cap_w = 60.0 + 200.0 * u(rng);
  c.max_cap_w = c.min_cap_w + 20.0 + 400.0 * u(rng);
  c.tdp_w = c.min_cap_w + (c.max_cap_w - c.min_cap_w) * (0.5 + 0.5 * u(rng));
  c.priority = 0.5 + 2.0 * u(rng);
  const auto points = 2 + static_cast<int>(u(rng) * 7.0);
  double value = 5.0 * u(rng);
  double slope = 0.2 * u(rng) + 0.01;
  for (int k = 0; k < points; ++k) {
    const double cap = k == points - 1 ? c.max_cap_w : c.min_cap_w + (c.max_cap_w - c.min_cap_w) * k / (points - 1);
    if (k > 0) {
      const double width = (c.max_cap_w - c.min_cap_w) / (points - 1);
      if (concave) {
        slope *= u(rng);  // never steeper than before
        value += slope * width;
      } else {
        value = 30.0 * u(rng);
      }
    }
    c.points.push_back({cap, value, 1.0});
  }
  return c;
}

std::vector<PreparedCurve> random_cluster(std::mt19937_64& rng, std::size_t n, bool concave) {
  std::vector<PreparedCurve> nodes;
  for (std::size_t i = 0; i < n; ++i) nodes.emplace_back(random_curve(rng, concave));
  return nodes;
}

// The steepest slope of any node's real curve (value per W): what a watt of rounding can cost.
double steepest_slope(const std::vector<PreparedCurve>& nodes) {
  double steepest = 0.0;
  for (const auto& node : nodes) {
    const auto& p = node.points();
    for (std::size_t k = 0; k + 1 < p.size(); ++k) {
      steepest = std::max(steepest, std::abs(p[k + 1].value - p[k].value) / (p[k + 1].cap_w - p[k].cap_w));
    }
  }
  return steepest;
}

std::vector<const PreparedCurve*> pointers(const std::vector<PreparedCurve>& nodes) {
  std::vector<const PreparedCurve*> out;
  for (const auto& n : nodes) out.push_back(&n);
  return out;
}

double sum_of_minima(const std::vector<PreparedCurve>& nodes) {
  return std::accumulate(nodes.begin(), nodes.end(), 0.0, [](double s, const PreparedCurve& n) { return s + n.min_cap_w(); });
}

void expect_valid(const Allocation& a, double budget_w, const std::vector<PreparedCurve>& nodes, Policy policy) {
  ASSERT_EQ(a.caps_w.size(), nodes.size());
  double sum = 0.0;
  std::size_t standby = 0;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const double cap = a.caps_w[i];
    sum += cap;
    if (cap == 0.0) {
      ++standby;
      continue;
    }
    EXPECT_GE(cap, nodes[i].min_cap_w()) << to_string(policy) << " node " << i;
    EXPECT_LE(cap, nodes[i].max_cap_w()) << to_string(policy) << " node " << i;
    if (cap != nodes[i].min_cap_w()) {
      EXPECT_EQ(cap, std::floor(cap * 1000.0 + 1e-6) / 1000.0) << "rounded down to mW";
    }
  }
  EXPECT_LE(sum, budget_w) << to_string(policy);
  EXPECT_NEAR(a.allocated_w, sum, 1e-6);
  EXPECT_EQ(a.standby, standby);
}

TEST(Allocator, PoliciesParseAndPrint) {
  for (const auto policy : all_policies()) EXPECT_EQ(parse_policy(to_string(policy)), policy);
  EXPECT_EQ(parse_policy("water"), std::nullopt);
  EXPECT_EQ(all_policies().size(), 4U);
}

TEST(Allocator, ABadBudgetOrANullNodeIsRefused) {
  std::mt19937_64 rng(1);
  const auto nodes = random_cluster(rng, 2, true);
  const auto ptrs = pointers(nodes);
  test::expect_error_from([&] { (void)allocate(-1.0, ptrs, Policy::gpucap); }, ErrorCode::invalid_data,
                          "budget -1 W must be a finite, non-negative number");
  test::expect_error_from([&] { (void)allocate(std::nan(""), ptrs, Policy::equal); }, ErrorCode::invalid_data, "budget");
  const std::vector<const PreparedCurve*> with_null = {ptrs[0], nullptr};
  test::expect_error_from([&] { (void)allocate(500.0, with_null, Policy::tdp); }, ErrorCode::invalid_data,
                          "node 1 has no curve");
}

TEST(Allocator, NoPolicyEverExceedsTheBudgetOnRandomClusters) {
  std::mt19937_64 rng(42);
  for (int trial = 0; trial < 300; ++trial) {
    const std::size_t n = 1 + static_cast<std::size_t>(trial % 17);
    const auto nodes = random_cluster(rng, n, trial % 2 == 0);
    const auto ptrs = pointers(nodes);
    double maxima = 0.0;
    for (const auto& node : nodes) maxima += node.max_cap_w();
    // From nothing, through "not every minimum", to more than every maximum.
    const double budget = std::uniform_real_distribution<double>(0.0, 1.2 * maxima)(rng);
    for (const auto policy : all_policies()) {
      const auto a = allocate(budget, ptrs, policy);
      expect_valid(a, budget, nodes, policy);
      if (budget >= sum_of_minima(nodes)) {
        EXPECT_EQ(a.standby, 0U) << "every node can serve";
      }
    }
  }
}

TEST(Allocator, AnEmptyClusterOrAZeroBudgetGetsNothing) {
  EXPECT_TRUE(allocate(1000.0, {}, Policy::gpucap).caps_w.empty());
  std::mt19937_64 rng(3);
  const auto nodes = random_cluster(rng, 3, true);
  const auto a = allocate(0.0, pointers(nodes), Policy::gpucap);
  EXPECT_EQ(a.standby, 3U);
  EXPECT_EQ(a.allocated_w, 0.0);
}

NodeCurve flat_curve(double min_w, double max_w, double priority, double value_per_w) {
  NodeCurve c;
  c.min_cap_w = min_w;
  c.max_cap_w = max_w;
  c.tdp_w = max_w;
  c.priority = priority;
  c.points = {{min_w, value_per_w * min_w, 1.0}, {max_w, value_per_w * max_w, 1.0}};
  return c;
}

TEST(Allocator, BelowTheMinimaTheHighestPriorityServesFirstAndTheRestStandBy) {
  // Minima 100 + 150 + 120 = 370 W; a budget of 260 W: priority 3 (150 W) first, then priority 2
  // (100 W); the 120-W node of priority 1 no longer fits and stands by.
  const std::vector<PreparedCurve> nodes = {PreparedCurve(flat_curve(100, 200, 2.0, 0.1)),
                                            PreparedCurve(flat_curve(150, 300, 3.0, 0.1)),
                                            PreparedCurve(flat_curve(120, 250, 1.0, 0.1))};
  const auto ptrs = pointers(nodes);
  EXPECT_EQ(serving_nodes(260.0, ptrs), (std::vector<bool>{true, true, false}));
  for (const auto policy : all_policies()) {
    const auto a = allocate(260.0, ptrs, policy);
    expect_valid(a, 260.0, nodes, policy);
    EXPECT_EQ(a.standby, 1U);
    EXPECT_EQ(a.caps_w[2], 0.0);
  }
  // A smaller node further down the order still fits when a larger one did not: 160 W serves the
  // 150-W node only (100 W does not fit after it), 90 W serves nobody.
  EXPECT_EQ(serving_nodes(160.0, ptrs), (std::vector<bool>{false, true, false}));
  EXPECT_EQ(serving_nodes(90.0, ptrs), (std::vector<bool>{false, false, false}));
  const std::vector<PreparedCurve> skip = {PreparedCurve(flat_curve(200, 300, 3.0, 0.1)),
                                           PreparedCurve(flat_curve(100, 200, 2.0, 0.1))};
  EXPECT_EQ(serving_nodes(150.0, pointers(skip)), (std::vector<bool>{false, true}));
  // Equal priority: the better value per watt at the minimum serves first.
  const std::vector<PreparedCurve> ties = {PreparedCurve(flat_curve(100, 200, 1.0, 0.1)),
                                           PreparedCurve(flat_curve(100, 200, 1.0, 0.3))};
  EXPECT_EQ(serving_nodes(150.0, pointers(ties)), (std::vector<bool>{false, true}));
}

TEST(Allocator, GpucapMatchesTheGridOptimumOnRandomConcaveClusters) {
  std::mt19937_64 rng(7);
  const double step = 1.0;
  for (int trial = 0; trial < 40; ++trial) {
    const auto nodes = random_cluster(rng, 2 + static_cast<std::size_t>(trial % 4), true);
    const auto ptrs = pointers(nodes);
    double maxima = 0.0;
    double steepest = 0.0;
    for (const auto& node : nodes) {
      maxima += node.max_cap_w();
      const auto& h = node.hull();
      for (std::size_t k = 0; k + 1 < h.size(); ++k) {
        steepest = std::max(steepest, (h[k + 1].value - h[k].value) / (h[k + 1].cap_w - h[k].cap_w));
      }
    }
    const double minima = sum_of_minima(nodes);
    const double budget = std::uniform_real_distribution<double>(minima, maxima)(rng);
    const auto a = allocate(budget, ptrs, Policy::gpucap);
    const double grid = grid_optimum(budget, ptrs, step);
    const double bound = hull_upper_bound(budget, ptrs);
    EXPECT_EQ(a.snapped, 0U);
    // Exact for concave curves: at least the grid's optimum (a feasible allocation), at most the
    // bound, and within one step per node of each (the mW rounding costs less than that).
    EXPECT_GE(a.value, grid - steepest * 0.002 * static_cast<double>(nodes.size()) - 1e-9) << "trial " << trial;
    EXPECT_LE(a.value, bound + 1e-9) << "trial " << trial;
    EXPECT_NEAR(a.value, bound, steepest * 0.002 * static_cast<double>(nodes.size()) + 1e-9) << "trial " << trial;
    EXPECT_LE(bound - grid, steepest * step * static_cast<double>(nodes.size()) + 1e-9) << "trial " << trial;
  }
}

TEST(Allocator, OnNonConcaveCurvesGpucapLosesAtMostOneNodesHullGap) {
  std::mt19937_64 rng(11);
  std::size_t snapped = 0;
  for (int trial = 0; trial < 200; ++trial) {
    const auto nodes = random_cluster(rng, 2 + static_cast<std::size_t>(trial % 9), false);
    const auto ptrs = pointers(nodes);
    double maxima = 0.0;
    double gap = 0.0;
    for (const auto& node : nodes) {
      maxima += node.max_cap_w();
      gap = std::max(gap, node.max_hull_gap());
    }
    const double budget = std::uniform_real_distribution<double>(sum_of_minima(nodes), maxima)(rng);
    const auto a = allocate(budget, ptrs, Policy::gpucap);
    const double bound = hull_upper_bound(budget, ptrs);
    snapped += a.snapped;
    // H − g, less what rounding down to mW can cost (1 mW per node, and 1 mW more for drift).
    const double rounding = 2.0 * static_cast<double>(nodes.size()) * 0.001 * steepest_slope(nodes);
    EXPECT_GE(a.value, bound - gap - rounding - 1e-9) << "trial " << trial;
    EXPECT_LE(a.value, bound + 1e-9);
  }
  EXPECT_GT(snapped, 0U) << "the random curves never needed a snap: the test proves nothing";
}

TEST(Allocator, GpucapNeverDoesWorseThanTheGridOnSmallNonConcaveClustersByMoreThanTheGap) {
  // The grid's optimum is the real (non-hull) optimum to within a step per node.
  std::mt19937_64 rng(5);
  for (int trial = 0; trial < 30; ++trial) {
    const auto nodes = random_cluster(rng, 3, false);
    const auto ptrs = pointers(nodes);
    double maxima = 0.0;
    double gap = 0.0;
    for (const auto& node : nodes) {
      maxima += node.max_cap_w();
      gap = std::max(gap, node.max_hull_gap());
    }
    const double budget = std::uniform_real_distribution<double>(sum_of_minima(nodes), maxima)(rng);
    const auto a = allocate(budget, ptrs, Policy::gpucap);
    const double rounding = 2.0 * 3.0 * 0.001 * steepest_slope(nodes);
    EXPECT_GE(a.value, grid_optimum(budget, ptrs, 1.0) - gap - rounding - 1e-9) << "trial " << trial;
  }
}

TEST(Allocator, GpucapPutsThePowerWhereItBuysTheMostAndBeatsEqualSplit) {
  // Node 0 saturates at 150 W (little load); node 1 keeps gaining up to 300 W.
  NodeCurve light;
  light.min_cap_w = 100;
  light.max_cap_w = 300;
  light.tdp_w = 300;
  light.points = {{100, 8, 1}, {150, 10, 1}, {300, 10, 1}};
  NodeCurve busy = light;
  busy.points = {{100, 8, 1}, {200, 16, 1}, {300, 22, 1}};
  const std::vector<PreparedCurve> nodes = {PreparedCurve(light), PreparedCurve(busy)};
  const auto ptrs = pointers(nodes);
  const auto gpucap = allocate(400.0, ptrs, Policy::gpucap);
  const auto equal = allocate(400.0, ptrs, Policy::equal);
  EXPECT_NEAR(equal.caps_w[0], 200.0, 1e-3);
  EXPECT_NEAR(equal.caps_w[1], 200.0, 1e-3);
  // The busy node's segments (0.08 and 0.06 per W) are steeper than the light one's (0.04 per W).
  EXPECT_NEAR(gpucap.caps_w[0], 100.0, 1e-3);
  EXPECT_NEAR(gpucap.caps_w[1], 300.0, 1e-3);
  EXPECT_NEAR(gpucap.value, 8.0 + 22.0, 1e-2);
  EXPECT_NEAR(equal.value, 10.0 + 16.0, 1e-2);
  EXPECT_GT(gpucap.value, 1.1 * equal.value);
  // With more budget than buys anything, the rest goes out evenly as headroom, never losing value.
  const auto loose = allocate(600.0, ptrs, Policy::gpucap);
  EXPECT_NEAR(loose.caps_w[0], 300.0, 1e-3);
  EXPECT_NEAR(loose.caps_w[1], 300.0, 1e-3);
}

TEST(Allocator, HeadroomNeverMovesANodeOntoAFallingPartOfItsCurve) {
  // Node 0 peaks at 200 W and falls after it (attainment drops: batches too large for the SLO).
  NodeCurve peaked;
  peaked.min_cap_w = 100;
  peaked.max_cap_w = 300;
  peaked.tdp_w = 300;
  peaked.points = {{100, 5, 1}, {200, 10, 1}, {300, 10, 0.5}};
  NodeCurve flat = peaked;
  flat.points = {{100, 5, 1}, {150, 6, 1}, {300, 6, 1}};
  const std::vector<PreparedCurve> nodes = {PreparedCurve(peaked), PreparedCurve(flat)};
  const auto a = allocate(600.0, pointers(nodes), Policy::gpucap);
  EXPECT_NEAR(a.caps_w[0], 200.0, 1e-3);
  EXPECT_NEAR(a.caps_w[1], 300.0, 1e-3);
  EXPECT_NEAR(a.value, 16.0, 1e-9);
}

TEST(Allocator, TdpProportionalFollowsTheTdpAndEqualSharesWhatClampedNodesCannotTake) {
  const std::vector<PreparedCurve> nodes = {PreparedCurve(flat_curve(100, 250, 1.0, 0.1)),
                                            PreparedCurve(flat_curve(100, 500, 1.0, 0.1))};
  const auto ptrs = pointers(nodes);
  const auto tdp = allocate(600.0, ptrs, Policy::tdp);
  EXPECT_NEAR(tdp.caps_w[0], 200.0, 1e-3);
  EXPECT_NEAR(tdp.caps_w[1], 400.0, 1e-3);
  const auto equal = allocate(650.0, ptrs, Policy::equal);
  EXPECT_NEAR(equal.caps_w[0], 250.0, 1e-3);  // clamped at its maximum
  EXPECT_NEAR(equal.caps_w[1], 400.0, 1e-3);  // takes what the other could not
}

TEST(Allocator, TheBalancerGivesEveryNodeTheSameFractionOfWhatItCanDo) {
  NodeCurve a;
  a.min_cap_w = 100;
  a.max_cap_w = 300;
  a.tdp_w = 300;
  a.points = {{100, 0, 1}, {300, 20, 1}};  // half of its best at 200 W
  NodeCurve b = a;
  b.points = {{100, 0, 1}, {200, 10, 1}, {300, 10, 1}};  // half of its best at 150 W
  const std::vector<PreparedCurve> nodes = {PreparedCurve(a), PreparedCurve(b)};
  const auto alloc = allocate(350.0, pointers(nodes), Policy::balancer);
  EXPECT_NEAR(alloc.caps_w[0], 200.0, 1e-2);
  EXPECT_NEAR(alloc.caps_w[1], 150.0, 1e-2);
  EXPECT_NEAR(nodes[0].value(alloc.caps_w[0]) / 20.0, nodes[1].value(alloc.caps_w[1]) / 10.0, 1e-3);
}

TEST(Allocator, TheHullBoundCoversEveryPolicyAlsoWhenNodesMustStandBy) {
  std::mt19937_64 rng(9);
  for (int trial = 0; trial < 100; ++trial) {
    const auto nodes = random_cluster(rng, 1 + static_cast<std::size_t>(trial % 6), trial % 3 != 0);
    const auto ptrs = pointers(nodes);
    const double budget = std::uniform_real_distribution<double>(0.0, 1.5 * sum_of_minima(nodes))(rng);
    const double bound = hull_upper_bound(budget, ptrs);
    for (const auto policy : all_policies()) EXPECT_LE(allocate(budget, ptrs, policy).value, bound + 1e-9);
  }
}

TEST(Allocator, TheGridOptimumRefusesWhatItCannotDo) {
  std::mt19937_64 rng(2);
  const auto nodes = random_cluster(rng, 2, true);
  const auto ptrs = pointers(nodes);
  test::expect_error_from([&] { (void)grid_optimum(1e6, ptrs, 0.0); }, ErrorCode::usage, "grid step 0 W must be positive");
  test::expect_error_from([&] { (void)grid_optimum(10.0, ptrs, 1.0); }, ErrorCode::usage, "to cover every minimum");
}

}  // namespace
}  // namespace gpucap::cluster
