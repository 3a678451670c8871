#include "gpucap/tune/bobd.hpp"

#include <gtest/gtest.h>

#include <functional>
#include <numeric>
#include <set>

#include "gpucap/core/error.hpp"
#include "gpucap/tune/registry.hpp"

namespace gpucap::tune {
namespace {

// A synthetic GPU whose constrained optimum is known: throughput f·u(b) with u(b) = b/(b+8)
// saturating in the batch, power 20 W + 100 W·(f/1500 MHz)²·u(b). Under an 80-W cap the best
// is batch 64 at 1200 MHz (1066.7 img/s): faster clocks only fit with much smaller batches.
SearchSpace synthetic_space() {
  SearchSpace space;
  space.batch_sizes.resize(64);
  std::iota(space.batch_sizes.begin(), space.batch_sizes.end(), 1);
  for (double f = 500; f <= 1500; f += 100) space.sm_clocks_mhz.push_back(f);
  return space;
}

TrialResult synthetic_measure(const ConfigPoint& p) {
  const double u = p.batch_size / (p.batch_size + 8.0);
  const double f = p.sm_clock_mhz / 1500.0;
  const double power_w = 20.0 + 100.0 * f * f * u;
  return TrialResult{p.sm_clock_mhz * u, power_w, power_w, 1.0};
}

// Runs the tuner for at most `budget` trials and returns them in order.
std::vector<Trial> run(Tuner& tuner, std::size_t budget,
                       const std::function<TrialResult(const ConfigPoint&)>& measure = synthetic_measure) {
  std::vector<Trial> trials;
  while (trials.size() < budget) {
    const auto point = tuner.propose();
    if (!point) break;
    const auto result = measure(*point);
    tuner.tell(*point, result);
    trials.push_back({*point, result});
  }
  return trials;
}

std::vector<ConfigPoint> points_of(const std::vector<Trial>& trials) {
  std::vector<ConfigPoint> points;
  for (const auto& t : trials) points.push_back(t.point);
  return points;
}

TEST(BobdTuner, TheSameSeedGivesTheSameProposals) {
  BobdOptions seeded;
  seeded.seed = 7;
  BobdTuner a(synthetic_space(), 80.0, seeded);
  BobdTuner b(synthetic_space(), 80.0, seeded);
  const auto first = points_of(run(a, 15));
  EXPECT_EQ(first, points_of(run(b, 15)));
  seeded.seed = 8;
  BobdTuner c(synthetic_space(), 80.0, seeded);
  EXPECT_NE(first, points_of(run(c, 15))) << "the seed shifts the Sobol design";
}

TEST(BobdTuner, NeverProposesAVisitedPointAndExhaustsATinySpace) {
  const SearchSpace tiny{{1, 2, 4}, {544, 1063}, {}};
  BobdTuner tuner(tiny, 80.0);
  const auto trials = run(tuner, 100);
  EXPECT_EQ(trials.size(), tiny.size());
  std::set<std::pair<int, double>> seen;
  for (const auto& t : trials) EXPECT_TRUE(seen.insert({t.point.batch_size, t.point.sm_clock_mhz}).second);
  EXPECT_FALSE(tuner.propose().has_value());

  BobdTuner single(SearchSpace{{8}, {1000}, {}}, 80.0);  // no axis varies: a GP of dimension 0
  EXPECT_EQ(run(single, 5).size(), 1u);

  BobdTuner larger(synthetic_space(), 80.0);
  std::set<std::pair<int, double>> distinct;
  for (const auto& t : run(larger, 40)) distinct.insert({t.point.batch_size, t.point.sm_clock_mhz});
  EXPECT_EQ(distinct.size(), 40u);
}

TEST(BobdTuner, FindsTheConstrainedOptimumOfASyntheticProblem) {
  const auto space = synthetic_space();
  std::vector<Trial> every;
  for (std::size_t i = 0; i < space.size(); ++i) every.push_back({space.point(i), synthetic_measure(space.point(i))});
  const auto optimum = best_feasible(every, 80.0);
  ASSERT_TRUE(optimum.has_value());
  ASSERT_EQ(optimum->point, (ConfigPoint{64, 1200, std::nullopt}));  // the construction above

  BobdTuner tuner(space, 80.0);
  const auto trials = run(tuner, 30);
  const auto found = best_feasible(trials, 80.0);
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->point, optimum->point) << describe(found->point);
}

TEST(BobdTuner, SearchesForFeasibilityWhenNothingMeasuredIsUnderTheCap) {
  // 22 W admits only small batches at low clocks (u ≤ 0.02/(f/1500)²); the Sobol design misses them.
  BobdTuner tuner(synthetic_space(), 22.5);
  const auto trials = run(tuner, 15);
  EXPECT_TRUE(best_feasible(trials, 22.5).has_value());
  EXPECT_FALSE(feasible(trials.front().result, 22.5));
}

TEST(BobdTuner, UsesOnlyTheAxesThatVary) {
  const BobdTuner two_axes(SearchSpace{{1, 16, 256}, {544, 1531}, {}}, 100.0);
  EXPECT_EQ(two_axes.unit_coordinates(0), (std::vector<double>{0.0, 0.0}));
  ASSERT_EQ(two_axes.unit_coordinates(1).size(), 2u);
  EXPECT_NEAR(two_axes.unit_coordinates(1)[0], 0.5, 1e-12);  // log scale: 16 is halfway from 1 to 256
  EXPECT_EQ(two_axes.unit_coordinates(5), (std::vector<double>{1.0, 1.0}));
  BobdOptions linear;
  linear.batch_scale = BatchScale::linear;
  const BobdTuner linear_batch(SearchSpace{{1, 16, 256}, {544, 1531}, {}}, 100.0, linear);
  EXPECT_NEAR(linear_batch.unit_coordinates(1)[0], 15.0 / 255.0, 1e-12);
  const BobdTuner memory(SearchSpace{{8}, {1000}, {5001, 9501}}, 100.0);
  EXPECT_EQ(memory.unit_coordinates(1), (std::vector<double>{1.0}));
}

TEST(BobdTuner, RejectsBadInput) {
  EXPECT_THROW(BobdTuner(SearchSpace{{}, {544}, {}}, 100.0), Error);
  EXPECT_THROW(BobdTuner(synthetic_space(), 0.0), Error);
  BobdOptions none;
  none.initial_design = 0;
  EXPECT_THROW(BobdTuner(synthetic_space(), 100.0, none), Error);
  BobdTuner tuner(synthetic_space(), 100.0);
  EXPECT_THROW(tuner.tell({3, 777, std::nullopt}, TrialResult{}), Error) << "not a clock of the space";
  EXPECT_THROW(tuner.tell({3, 500, 5001.0}, TrialResult{}), Error) << "the space has no memory axis";
  tuner.tell({3, 500, std::nullopt}, TrialResult{});
  EXPECT_THROW(tuner.tell({3, 500, std::nullopt}, TrialResult{}), Error) << "measured twice";
}

TEST(TunerRegistry, BuildsTunersByNameWithTheirBudgets) {
  const auto space = synthetic_space();
  EXPECT_EQ(make_tuner("bobd", space, 80.0, 1)->name(), "bobd");
  EXPECT_EQ(make_tuner("oracle", space, 80.0, 1)->name(), "oracle");
  EXPECT_EQ(tuner_info("bobd").default_budget, 50u);
  EXPECT_EQ(tuner_info("oracle").default_budget, 0u);
  try {
    (void)make_tuner("annealing", space, 80.0, 1);
    ADD_FAILURE() << "accepted an unknown name";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::usage);
    EXPECT_NE(std::string(e.what()).find("available: oracle, bobd"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace gpucap::tune
