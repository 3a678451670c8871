#include "gpucap/runtime/tuning.hpp"

#include <gtest/gtest.h>

#include "gpucap/core/error.hpp"
#include "gpucap/runtime/sim_job.hpp"
#include "gpucap/tune/oracle.hpp"
#include "support/paths.hpp"

namespace gpucap::runtime {
namespace {

const sim::Catalog& catalog() {
  static const auto instance = sim::Catalog::load(test::data_dir());
  return instance;
}

TEST(Tuning, DefaultSpaceIsBobdsBatchRangeTimesTheClockLadder) {
  const auto p40 = default_search_space(catalog().gpu("p40"));
  EXPECT_EQ(p40.batch_sizes.front(), 1);
  EXPECT_EQ(p40.batch_sizes.back(), 256);
  EXPECT_EQ(p40.sm_clocks_mhz, catalog().gpu("p40").dvfs_levels_mhz);
  EXPECT_TRUE(p40.memory_clocks_mhz.empty());
  EXPECT_EQ(default_search_space(catalog().gpu("rtx3080ti")).memory_clocks_mhz.size(), 5u);
}

TEST(Tuning, MeasurementsFollowTheKnobsAndAreReproducible) {
  const SimTrialRunner runner(catalog(), "p40", "resnet_v2_50", TrialOptions{});
  const auto slow = runner.measure({8, 544, std::nullopt});
  const auto fast = runner.measure({8, 1531, std::nullopt});
  const auto big = runner.measure({128, 1531, std::nullopt});
  EXPECT_GT(fast.throughput_img_s, slow.throughput_img_s);
  EXPECT_GT(fast.max_power_w, slow.max_power_w);
  EXPECT_GT(big.throughput_img_s, fast.throughput_img_s);
  EXPECT_GE(slow.cost_s, 3.0);
  EXPECT_GE(slow.max_power_w, slow.mean_power_w);
  const auto again = runner.measure({8, 544, std::nullopt});
  EXPECT_EQ(again.throughput_img_s, slow.throughput_img_s);
  EXPECT_EQ(again.max_power_w, slow.max_power_w);
  EXPECT_THROW((void)runner.measure({8, 100, std::nullopt}), Error) << "not a P40 clock";
  EXPECT_THROW(SimTrialRunner(catalog(), "p40", "resnet_v2_50", TrialOptions{0.0, 100.0, 1}), Error);
}

TEST(Tuning, RunTunerKeepsTheBestFeasibleAndHonoursTheBudget) {
  // A synthetic GPU: throughput b·f, power 40 W + 0.001·b·f; the best under 100 W is b·f ≤ 60,000.
  tune::SearchSpace space{{1, 2, 4, 8, 16, 32, 64}, {500, 1000, 1500}, {}};
  const MeasureFn measure = [](const tune::ConfigPoint& p) {
    const double work = p.batch_size * p.sm_clock_mhz;
    return tune::TrialResult{work, 40.0 + 0.001 * work, 40.0, 1.0};
  };
  tune::OracleTuner oracle(space);
  std::size_t calls = 0;
  const auto outcome = run_tuner(oracle, measure, 100.0, 0, [&calls](const auto& trials, const auto& best) {
    ++calls;
    EXPECT_EQ(trials.size(), calls);
    if (best) {
      EXPECT_LE(best->result.max_power_w, 100.0);
    }
  });
  EXPECT_EQ(outcome.trials.size(), space.size());
  EXPECT_EQ(calls, space.size());
  EXPECT_DOUBLE_EQ(outcome.cost_s, static_cast<double>(space.size()));
  ASSERT_TRUE(outcome.best.has_value());
  EXPECT_DOUBLE_EQ(outcome.best->result.throughput_img_s, 48000.0);  // 32 × 1500
  tune::OracleTuner limited(space);
  EXPECT_EQ(run_tuner(limited, measure, 100.0, 5).trials.size(), 5u);
}

TEST(Tuning, SearchEachCapRunsOneSearchPerCapAndTheTableHoldsEachCapsBest) {
  // The synthetic GPU above: the best under 100 W is 32 × 1500 = 48,000; under 70 W, b·f ≤ 30,000:
  // 16 × 1500 = 24,000 (and 16 × 1000 = 16,000 < 24,000).
  tune::SearchSpace space{{1, 2, 4, 8, 16, 32, 64}, {500, 1000, 1500}, {}};
  const MeasureFn measure = [](const tune::ConfigPoint& p) {
    const double work = p.batch_size * p.sm_clock_mhz;
    return tune::TrialResult{work, 40.0 + 0.001 * work, 40.0, 1.0};
  };
  const auto searches = search_each_cap("oracle", space, {100.0, 70.0, 40.2}, measure, 0, 1);
  ASSERT_EQ(searches.size(), 3u);
  EXPECT_EQ(searches[0].cap_w, 100.0);
  EXPECT_EQ(searches[1].outcome.trials.size(), space.size()) << "the oracle's default budget: the whole space";
  const auto table = cap_table(searches);
  ASSERT_EQ(table.size(), 3u);
  EXPECT_EQ(table[0].knobs, single_tenant_knobs(32, 1500.0));
  EXPECT_EQ(table[1].cap_w, 70.0);
  EXPECT_EQ(table[1].knobs, single_tenant_knobs(16, 1500.0));
  // Nothing is under 40.2 W (the least is 40.5 W at 1 × 500): the closest the search came.
  EXPECT_FALSE(searches[2].outcome.best.has_value());
  EXPECT_EQ(table[2].knobs, single_tenant_knobs(1, 500.0));
  EXPECT_EQ(search_each_cap("bobd", space, {100.0}, measure, 7, 1).front().outcome.trials.size(), 7u);
  EXPECT_THROW((void)search_each_cap("annealing", space, {100.0}, measure, 0, 1), Error);
}

TEST(Tuning, TheOracleIsAtLeastAsGoodAsAnOnlineControllerUnderTheSameCap) {
  const double cap_w = 131.0;
  const SimTrialRunner runner(catalog(), "p40", "inception_v1", TrialOptions{});
  tune::OracleTuner oracle(default_search_space(runner.gpu()));
  const auto outcome =
      run_tuner(oracle, [&runner](const tune::ConfigPoint& p) { return runner.measure(p); }, cap_w, 0);
  ASSERT_TRUE(outcome.best.has_value());
  EXPECT_LE(outcome.best->result.max_power_w, cap_w);

  SimJobSpec spec;
  spec.gpu = "p40";
  spec.model = "inception_v1";
  spec.dataset = "imagenet";
  spec.algorithm = "batchdvfs";
  spec.schedule = CapSchedule::constant(cap_w);
  const auto online = SimJob(catalog(), spec).run();
  EXPECT_GT(online.throughput_img_s, 0.5 * outcome.best->result.throughput_img_s);
  EXPECT_LE(online.throughput_img_s, outcome.best->result.throughput_img_s);
}

TEST(Tuning, VerifiedBestTakesTheFirstCandidateThatStaysUnderTheCapWhenMeasuredLonger) {
  const auto trial = [](int batch, double throughput, double max_w) {
    return tune::Trial{tune::ConfigPoint{batch, 1000.0, std::nullopt}, tune::TrialResult{throughput, max_w, max_w, 3}};
  };
  const std::vector<tune::Trial> grid = {trial(1, 100, 90), trial(2, 300, 99.9), trial(3, 250, 98), trial(4, 400, 120)};
  std::vector<int> verified;
  // Measured longer, batch 2 shows a sample over the cap; batch 3 stays under.
  const auto verify = [&](const tune::ConfigPoint& p) {
    verified.push_back(p.batch_size);
    const double max_w = p.batch_size == 2 ? 100.4 : 99.0;
    return tune::TrialResult{p.batch_size * 80.0, max_w, 95.0, 30};
  };
  const auto best = verified_best(grid, 100.0, verify);
  ASSERT_TRUE(best.has_value());
  EXPECT_EQ(best->point.batch_size, 3);
  EXPECT_DOUBLE_EQ(best->result.throughput_img_s, 240.0) << "the longer measurement is the result";
  EXPECT_EQ(verified, (std::vector<int>{2, 3})) << "best first; batch 4 was never feasible";
  EXPECT_FALSE(verified_best(grid, 100.0, verify, 1).has_value()) << "only one check allowed";
  EXPECT_FALSE(verified_best(grid, 50.0, verify).has_value());
}

TEST(Tuning, TheDefaultProfileIsSparseInBatchSize) {
  const auto space = default_profile_space(catalog().gpu("p40"));
  EXPECT_EQ(space.batch_sizes.size(), 16u);
  EXPECT_EQ(space.batch_sizes.front(), 1);
  EXPECT_EQ(space.batch_sizes.back(), 256);
  EXPECT_EQ(space.size(), 160u);
}

}  // namespace
}  // namespace gpucap::runtime
