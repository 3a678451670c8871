// The trace-driven simulation on Zeus's NSDI'23 V100 trace: the trace oracle matches the anchor
// (../shared/reference/zeus-bso-anchor.md), Zeus's policy lands within ±20 % of Zeus's own regret,
// and gpucap's policy beats it as docs/benchmarks.md states. Simulated figures, deterministic.

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "gpucap/bench/zeus_trace.hpp"
#include "gpucap/bso/simulate.hpp"
#include "gpucap/bso/state.hpp"
#include "gpucap/core/error.hpp"
#include "support/paths.hpp"

namespace gpucap::bso {
namespace {

std::string trace(const std::string& file) { return test::shared_file("zeus/nsdi23/" + file); }

TraceWorkload v100(const std::string& name) {
  return bench::load_zeus_workload(trace("summary_train.csv"), trace("summary_power_v100.csv"), name);
}

struct Anchor {
  int optimum_bs;
  double optimum_w;
  double optimum_cost;
  double default_cost;
  double zeus_regret;  // seed-averaged, in optimum costs (Zeus's simulator, seeds 1-5)
};

// ../shared/reference/zeus-bso-anchor.md, V100, η = 0.5, β = 2.
const std::map<std::string, Anchor> kAnchor = {
    {"cifar100/shufflenetv2", {128, 100, 5.664e4, 1.311e5, 9.78}},
    {"imagenet/resnet50", {360, 175, 1.663e7, 1.752e7, 3.93}},
    {"librispeech/deepspeech2", {48, 150, 8.646e6, 1.218e7, 7.08}},
    {"movielens-1m/ncf", {16384, 175, 4420, 1.223e4, 13.68}},
    {"squad/bert_base_uncased", {12, 200, 1.565e6, 1.699e6, 1.74}},
    {"sentiment140/bert_base_uncased", {64, 175, 2.764e6, 2.922e6, 1.70}},
};

double mean_regret(const TraceWorkload& w, OptimizerKind kind, double* late = nullptr) {
  double sum = 0.0, late_sum = 0.0;
  for (std::uint64_t seed = 1; seed <= 5; ++seed) {
    SimOptions o;
    o.optimizer = kind;
    o.seed = seed;
    const auto r = simulate(w, o);
    sum += r.regret_in_optimum_costs();
    late_sum += *late_cost_fraction(r, 40, 50);
  }
  if (late != nullptr) *late = late_sum / 5.0;
  return sum / 5.0;
}

TEST(ZeusTrace, OptimumAndDefaultCostMatchTheAnchor) {
  for (const auto& [name, a] : kAnchor) {
    const auto w = v100(name);
    const auto opt = trace_optimum(w, 0.5);
    EXPECT_EQ(opt.batch_size, a.optimum_bs) << name;
    EXPECT_EQ(opt.power_limit_w, a.optimum_w) << name;
    // The anchor prints four significant figures.
    EXPECT_NEAR(opt.cost / a.optimum_cost, 1.0, 5e-4) << name;
    EXPECT_NEAR(default_cost(w, 0.5) / a.default_cost, 1.0, 5e-4) << name;
  }
}

TEST(ZeusTrace, FaithfulPortIsWithinTwentyPercentOfZeusRegret) {
  for (const auto& [name, a] : kAnchor) {
    const double regret = mean_regret(v100(name), OptimizerKind::zeus);
    EXPECT_GT(regret, 0.8 * a.zeus_regret) << name << " regret " << regret;
    EXPECT_LT(regret, 1.2 * a.zeus_regret) << name << " regret " << regret;
  }
}

TEST(ZeusTrace, GpucapBeatsZeusOnTheV100Trace) {
  int well_below = 0;
  for (const auto& [name, a] : kAnchor) {
    const auto w = v100(name);
    double late = 0.0;
    const double gpucap = mean_regret(w, OptimizerKind::gpucap, &late);
    const double zeus = mean_regret(w, OptimizerKind::zeus);
    EXPECT_LE(gpucap, 1.05 * zeus) << name << ": gpucap " << gpucap << " zeus " << zeus;
    EXPECT_LE(late, 1.01) << name << ": recurrences 40-50 cost " << late << " of the optimum";
    well_below += gpucap <= 0.6 * zeus;
  }
  EXPECT_GE(well_below, 5);
}

TEST(Simulate, SameSeedSameRunAndTheStateSurvivesARestart) {
  const auto w = v100("squad/bert_base_uncased");
  SimOptions o;
  o.seed = 3;
  o.recurrences = 30;
  const auto a = simulate(w, o);
  const auto b = simulate(w, o);
  ASSERT_EQ(a.recurrences.size(), b.recurrences.size());
  for (std::size_t i = 0; i < a.recurrences.size(); ++i) EXPECT_EQ(a.recurrences[i].cost, b.recurrences[i].cost);
  o.seed = 4;
  EXPECT_NE(simulate(w, o).regret, a.regret);
}

TEST(Simulate, RegretIsTheSumOfExcessCosts) {
  SimOptions o;
  o.recurrences = 10;
  const auto r = simulate(v100("sentiment140/bert_base_uncased"), o);
  double sum = 0.0;
  for (const auto& rec : r.recurrences) {
    double tries = 0.0;
    for (const auto& t : rec.tries) tries += t.cost;
    EXPECT_DOUBLE_EQ(tries, rec.cost);
    EXPECT_TRUE(rec.tries.back().reached);
    sum += rec.cost - r.optimum.cost;
  }
  EXPECT_NEAR(sum, r.regret, 1e-6 * r.optimum.cost);
  EXPECT_TRUE(r.recurrences.front().tries.front().profiled);
  EXPECT_EQ(r.recurrences.front().tries.front().batch_size, 128);  // b0
}

TEST(ZeusTrace, BadInputIsOneClearError) {
  EXPECT_THROW((void)v100("mnist/lenet"), Error);
  EXPECT_THROW((void)v100("nonsense"), Error);
  EXPECT_THROW((void)bench::load_zeus_workload(test::shared_data_dir() + "/zeus/nsdi23/missing.csv", trace("summary_power_v100.csv"), "squad/bert_base_uncased"),
               Error);
  bench::ZeusWorkloadOverrides o;
  o.default_batch_size = 33;
  try {
    (void)bench::load_zeus_workload(trace("summary_train.csv"), trace("summary_power_v100.csv"), "squad/bert_base_uncased", o);
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("default batch size 33"), std::string::npos) << e.what();
  }
  // The power trace as the train trace: columns are missing.
  try {
    (void)bench::load_zeus_workload(trace("summary_power_v100.csv"), trace("summary_power_v100.csv"), "squad/bert_base_uncased");
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_data);
    EXPECT_NE(std::string(e.what()).find("no column"), std::string::npos) << e.what();
  }
}

TEST(ZeusTrace, OtherGpusTracesWork) {
  const auto w = bench::load_zeus_workload(trace("summary_train.csv"), trace("summary_power_p100.csv"), "cifar100/shufflenetv2");
  EXPECT_EQ(w.gpu, "p100");
  SimOptions o;
  o.optimizer = OptimizerKind::gpucap;
  o.recurrences = 20;
  EXPECT_EQ(simulate(w, o).recurrences.size(), 20U);
}

}  // namespace
}  // namespace gpucap::bso
