// BOBD against the oracle on the GPU twin: the claim that 20 evaluations get close to what an
// exhaustive search of 2,560 finds.

#include <gtest/gtest.h>

#include "gpucap/runtime/tuning.hpp"
#include "gpucap/tune/bobd.hpp"
#include "gpucap/tune/oracle.hpp"
#include "support/paths.hpp"

namespace gpucap::tune {
namespace {

const sim::Catalog& catalog() {
  static const auto instance = sim::Catalog::load(test::data_dir());
  return instance;
}

struct Job {
  const char* model;
  double cap_w;
};

class BobdOnTheTwin : public ::testing::TestWithParam<Job> {};

// Measured with seed 1 (docs/algorithms.md): after 20 evaluations these jobs reach 98.5 %
// (inception_v1: the optimum lies inside the space, on the cap), 100 % (resnet_v2_50: batch 256
// at 1303 MHz) and 99.9 % (mobilenet_v2_1.0: a low clock, 835 MHz) of the oracle; over the 30
// P40 jobs and five seeds no job was below 96.9 % after 20. 95 % leaves room for recalibrations
// of the twin, while a search that stalls (or ignores the cap) falls well short of it.
TEST_P(BobdOnTheTwin, TwentyEvaluationsComeWithinFivePercentOfTheOracle) {
  const auto job = GetParam();
  const runtime::SimTrialRunner runner(catalog(), "p40", job.model, runtime::TrialOptions{});
  const auto measure = [&runner](const ConfigPoint& p) { return runner.measure(p); };
  const auto space = runtime::default_search_space(runner.gpu());
  OracleTuner oracle(space);
  const auto exhaustive = runtime::run_tuner(oracle, measure, job.cap_w, 0);
  BobdTuner bobd(space, job.cap_w);
  const auto searched = runtime::run_tuner(bobd, measure, job.cap_w, 20);
  ASSERT_TRUE(exhaustive.best.has_value());
  ASSERT_TRUE(searched.best.has_value());
  EXPECT_EQ(searched.trials.size(), 20u);
  EXPECT_LE(searched.best->result.max_power_w, job.cap_w);
  EXPECT_GE(searched.best->result.throughput_img_s, 0.95 * exhaustive.best->result.throughput_img_s)
      << describe(searched.best->point) << " vs the oracle's " << describe(exhaustive.best->point);
}

INSTANTIATE_TEST_SUITE_P(P40, BobdOnTheTwin,
                         ::testing::Values(Job{"inception_v1", 131}, Job{"resnet_v2_50", 143},
                                           Job{"mobilenet_v2_1.0", 89}));

}  // namespace
}  // namespace gpucap::tune
