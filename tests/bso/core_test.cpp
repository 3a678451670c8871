// The optimizer core: random stream, job spec, Gaussian TS, and the state's storage form.

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <set>

#include "gpucap/bso/gaussian_ts.hpp"
#include "gpucap/bso/job_spec.hpp"
#include "gpucap/bso/power_limit.hpp"
#include "gpucap/bso/random.hpp"
#include "gpucap/bso/state.hpp"
#include "gpucap/core/error.hpp"

namespace gpucap::bso {
namespace {

nlohmann::json zeus_client_job() {
  // As Zeus's client sends it (pydantic .json()): job_id null, max_power a float.
  return nlohmann::json::parse(R"({"job_id": null, "job_id_prefix": "mnist", "batch_sizes": [64, 8, 32, 16],
    "default_batch_size": 32, "eta_knob": 0.5, "beta_knob": 2.0, "target_metric": 0.9,
    "higher_is_better_metric": true, "max_epochs": 10, "num_pruning_rounds": 2, "window_size": 0,
    "mab_prior_mean": 0.0, "mab_prior_precision": 0.0, "mab_num_explorations": 2, "mab_seed": 7,
    "max_power": 250.0, "number_of_gpus": 1, "gpu_model": "Tesla V100"})");
}

TEST(BsoRandom, StateRoundTripContinuesTheSameStream) {
  BsoRandom a(42);
  for (int i = 0; i < 5; ++i) (void)a.next();
  BsoRandom b = BsoRandom::from_state(a.state());
  for (int i = 0; i < 100; ++i) EXPECT_EQ(a.next(), b.next());
  EXPECT_NE(BsoRandom(1).next(), BsoRandom(2).next());
}

TEST(BsoRandom, RejectsDamagedState) {
  EXPECT_THROW((void)BsoRandom::from_state("x256ss:00"), Error);
  EXPECT_THROW((void)BsoRandom::from_state("mt:0000000000000001:0000000000000001:0000000000000001:0000000000000001"), Error);
  EXPECT_THROW((void)BsoRandom::from_state("x256ss:0000000000000000:0000000000000000:0000000000000000:0000000000000000"), Error);
  EXPECT_THROW((void)BsoRandom::from_state("x256ss:zz00000000000001:0000000000000001:0000000000000001:0000000000000001"), Error);
}

TEST(BsoRandom, DrawsHaveTheRightDistribution) {
  BsoRandom rng(3);
  double sum = 0.0, squares = 0.0;
  constexpr int n = 20000;
  for (int i = 0; i < n; ++i) {
    const double x = rng.normal(10.0, 2.0);
    sum += x;
    squares += x * x;
  }
  const double mean = sum / n;
  EXPECT_NEAR(mean, 10.0, 0.1);
  EXPECT_NEAR(std::sqrt(squares / n - mean * mean), 2.0, 0.1);
  EXPECT_EQ(rng.normal(5.0, 0.0), 5.0);
  const auto p = rng.permutation({1, 2, 3, 4, 5});
  EXPECT_EQ(std::set<int>(p.begin(), p.end()), (std::set<int>{1, 2, 3, 4, 5}));
}

TEST(JobSpec, ParsesZeusClientRequestWithZeusDefaults) {
  auto body = zeus_client_job();
  body.erase("window_size");
  body.erase("mab_num_explorations");
  body["unknown_extra_field"] = 1;  // pydantic ignores extras
  const auto spec = job_spec_from_json(body);
  EXPECT_EQ(spec.batch_sizes, (std::vector<int>{8, 16, 32, 64}));  // sorted, as Zeus's validator does
  EXPECT_EQ(spec.window_size, 0);
  EXPECT_EQ(spec.mab_num_explorations, 2);
  EXPECT_EQ(spec.max_power, 250.0);
  EXPECT_EQ(spec.mab_seed, 7);
  EXPECT_TRUE(spec.job_id.empty());
  const auto back = to_json(spec);
  EXPECT_TRUE(back["job_id"].is_string());
  EXPECT_EQ(back["gpu_model"], "Tesla V100");
  EXPECT_EQ(job_spec_from_json(back), spec);
}

TEST(JobSpec, RefusesWhatZeusRefuses) {
  const auto refused = [](const char* key, const nlohmann::json& value, const char* fragment) {
    auto body = zeus_client_job();
    body[key] = value;
    try {
      (void)job_spec_from_json(body);
      ADD_FAILURE() << key << " accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    }
  };
  refused("default_batch_size", 48, "not in batch_sizes");
  refused("batch_sizes", nlohmann::json::array(), "must not be empty");
  refused("batch_sizes", {8, 8, 32}, "repeat");
  refused("eta_knob", 1.5, "[0, 1]");
  refused("beta_knob", 0.0, "positive");
  refused("max_epochs", 0, "greater than 0");
  refused("max_power", 0, "greater than 0");
  refused("gpu_model", "", "must not be empty");
  refused("job_id", "other-1", "does not start with prefix");
  refused("batch_sizes", "32", "list");
  refused("default_batch_size", 32.5, "whole number");
  refused("optimizer", "bohb", "unknown optimizer");
  auto missing = zeus_client_job();
  missing.erase("job_id_prefix");
  EXPECT_THROW((void)job_spec_from_json(missing), Error);
  auto null_beta = zeus_client_job();
  null_beta["beta_knob"] = nullptr;
  EXPECT_FALSE(job_spec_from_json(null_beta).beta_knob.has_value());
}

TEST(GaussianTs, OneObservationIsTheMeanWithInfinitePrecision) {
  const auto arm = fit_arm(32, {-5.0}, 0.0, 0.0);
  EXPECT_TRUE(std::isinf(arm.param_precision));
  EXPECT_TRUE(std::isinf(arm.reward_precision));
  EXPECT_EQ(arm.param_mean, -5.0);
  EXPECT_EQ(arm.num_observations, 1);
}

TEST(GaussianTs, ConjugateUpdateFromPrior) {
  // rewards -4 and -6: var 1 → reward precision 1; prior N(0, precision 2).
  const auto arm = fit_arm(16, {-4.0, -6.0}, 0.0, 2.0);
  EXPECT_DOUBLE_EQ(arm.reward_precision, 1.0);
  EXPECT_DOUBLE_EQ(arm.param_precision, 4.0);
  EXPECT_DOUBLE_EQ(arm.param_mean, -10.0 / 4.0);
}

TEST(GaussianTs, ExploresUnderObservedArmsFirstThenSamples) {
  BsoRandom rng(1);
  std::vector<ArmState> arms = {fit_arm(8, {-1.0, -1.2}, 0, 0), fit_arm(16, {-3.0}, 0, 0)};
  EXPECT_EQ(predict_arm(arms, 2, rng), 16);  // fewer than two observations
  arms[1] = fit_arm(16, {-3.0, -3.1}, 0, 0);
  int eights = 0;
  for (int i = 0; i < 200; ++i) eights += predict_arm(arms, 2, rng) == 8;
  EXPECT_GT(eights, 190);  // arm 8's reward is far higher and both are sharp
}

TEST(JobState, StorageFormKeepsInfinityAndRng) {
  JobSpec spec = job_spec_from_json(zeus_client_job());
  spec.job_id = "mnist-1";
  JobState job = new_job_state(spec, 99);
  job.stage = Stage::mab;
  job.min_cost = 123.0;
  job.arms = {fit_arm(8, {-1.0}, 0, 0), fit_arm(16, {-3.0, -2.0}, 0, 0)};
  const auto stored = job_fields_to_json(job).dump();
  JobState back;
  back.spec = spec;
  job_fields_from_json(nlohmann::json::parse(stored), back);
  EXPECT_EQ(back, job);
  EXPECT_THROW(job_fields_from_json(nlohmann::json::parse(R"({"stage":"Nope"})"), back), Error);
  EXPECT_EQ(parse_trial_status(trial_status_name(TrialStatus::failed)), TrialStatus::failed);
  EXPECT_THROW((void)parse_trial_type("Other"), Error);
}

TEST(JitPowerLimit, ProfilesEveryLimitHighestFirstAndKeepsTheCheapest) {
  JitPowerLimitOptimizer plo({100, 250, 175}, 0.5, 250);
  EXPECT_EQ(plo.profile_order(), (std::vector<double>{250, 175, 100}));
  EXPECT_EQ(plo.next_to_profile(32), 250);
  EXPECT_FALSE(plo.best(32));
  // cost/work = (0.5·P + 0.5·250)·t
  plo.observe(32, 250, 10.0, 10.0 * 240, 1);  // 2450
  plo.observe(32, 175, 11.0, 11.0 * 170, 1);  // 2310
  EXPECT_FALSE(plo.best(32));
  plo.observe(32, 100, 16.0, 16.0 * 100, 1);  // 2800
  EXPECT_EQ(plo.best(32), 175);
  EXPECT_FALSE(plo.best(64));
  EXPECT_THROW(plo.observe(32, 150, 1, 1, 1), Error);
  EXPECT_THROW(plo.observe(32, 100, std::nan(""), 1, 1), Error);
  EXPECT_THROW(JitPowerLimitOptimizer({}, 0.5, 250), Error);
}

}  // namespace
}  // namespace gpucap::bso
