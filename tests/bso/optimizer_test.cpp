// Zeus's policy through the core operations: pruning order, concurrency, the bandit stage,
// early stopping, repeated and bad reports — and gpucap's policy on the same synthetic job.

#include <gtest/gtest.h>

#include <map>

#include "gpucap/bso/optimizer.hpp"
#include "gpucap/bso/state.hpp"

namespace gpucap::bso {
namespace {

struct SizeModel {
  double epoch_time_s;
  double power_w;
  int epochs_to_target;  // 0: never reaches the target
};

// Cheapest at 32 (fewest joules per epoch × epochs); 8 never converges.
const std::map<int, SizeModel> kModel = {
    {8, {30.0, 150.0, 0}}, {16, {12.0, 180.0, 6}}, {32, {7.0, 200.0, 7}}, {64, {5.0, 220.0, 11}}, {128, {4.5, 230.0, 16}}};

JobState synthetic_job(OptimizerKind kind) {
  JobSpec spec;
  spec.job_id_prefix = "t";
  spec.job_id = "t-1";
  spec.batch_sizes = {8, 16, 32, 64, 128};
  spec.default_batch_size = 32;
  spec.target_metric = 0.9;
  spec.max_epochs = 20;
  spec.mab_seed = 5;
  spec.max_power = 250.0;
  spec.number_of_gpus = 1;
  spec.gpu_model = "synthetic";
  spec.optimizer = kind;
  validate(spec);
  return new_job_state(spec, 0);
}

// Trains one trial to the end; returns the final response.
ReportResponse train(JobState& job, const TrialId& id) {
  const auto& m = kModel.at(id.batch_size);
  for (int epoch = 1;; ++epoch) {
    const bool reached = m.epochs_to_target > 0 && epoch >= m.epochs_to_target;
    const auto r = report(job, {id, epoch * m.epoch_time_s, epoch * m.epoch_time_s * m.power_w, reached ? 0.95 : 0.5, epoch});
    if (r.stop_train) return r;
  }
}

TEST(ZeusPolicy, PrunesDownThenUpFromTheDefaultThenBuildsTheBandit) {
  auto job = synthetic_job(OptimizerKind::zeus);
  std::vector<int> order;
  for (int i = 0; i < 10 && job.stage == Stage::pruning; ++i) {
    const auto id = next_trial(job);
    order.push_back(id.batch_size);
    (void)train(job, id);
  }
  // Round 1: 32, 16, 8 (fails: the direction ends), then 64, 128. Round 2 walks from 32 again;
  // 8 is gone. The ninth request built the bandit and dispatched its first trial.
  ASSERT_GE(order.size(), 9U);
  EXPECT_EQ(std::vector<int>(order.begin(), order.begin() + 5), (std::vector<int>{32, 16, 8, 64, 128}));
  EXPECT_EQ(std::vector<int>(order.begin() + 5, order.begin() + 9), (std::vector<int>{32, 16, 64, 128}));
  EXPECT_EQ(job.stage, Stage::mab);
  ASSERT_EQ(job.arms.size(), 4U);
  EXPECT_EQ(job.arms.front().batch_size, 16);
  EXPECT_EQ(job.min_cost_batch_size, 32);
  EXPECT_EQ(job.trials.back().type, TrialType::mab);
  for (std::size_t i = 0; i + 1 < job.trials.size(); ++i) EXPECT_EQ(job.trials[i].trial_number, static_cast<int>(i) + 1);
}

TEST(ZeusPolicy, ConcurrentRequestGetsTheBestSizeWhileAnExplorationRuns) {
  auto job = synthetic_job(OptimizerKind::zeus);
  const auto first = next_trial(job);
  const auto second = next_trial(job);
  EXPECT_EQ(job.trials[0].type, TrialType::exploration);
  EXPECT_EQ(job.trials[1].type, TrialType::concurrent);
  EXPECT_EQ(second.batch_size, 32);
  EXPECT_EQ(second.trial_number, first.trial_number + 1);
}

TEST(ZeusPolicy, EndedTrialFailsAndItsSizeIsExploredAgain) {
  auto job = synthetic_job(OptimizerKind::zeus);
  const auto id = next_trial(job);
  end_trial(job, id);
  EXPECT_EQ(job.trials[0].status, TrialStatus::failed);
  end_trial(job, id);  // idempotent
  EXPECT_EQ(next_trial(job).batch_size, 32);
  EXPECT_EQ(job.trials[1].type, TrialType::exploration);
  try {
    end_trial(job, {"t-1", 32, 99});
    ADD_FAILURE();
  } catch (const Refusal& r) {
    EXPECT_EQ(r.kind(), RefusalKind::not_found);
  }
}

TEST(ZeusPolicy, StopsATryBeforeItsNextEpochWouldPassBetaTimesTheMinimum) {
  auto job = synthetic_job(OptimizerKind::zeus);
  ASSERT_TRUE(train(job, next_trial(job)).converged);  // 32: the minimum so far
  const double min_cost = *job.min_cost;
  const auto id = next_trial(job);                      // 16
  ASSERT_EQ(id.batch_size, 16);
  const auto r = train(job, id);
  const auto& t = job.trials[1];
  // 16 needs 6 epochs of 12 s at 180 W: cost 6·(0.5·2160 + 0.5·3000) = 15480 ≤ 2 × 7·(0.5·1400+0.5·1750)
  EXPECT_TRUE(r.converged) << r.message;
  EXPECT_LE(trial_cost(job, t), 2.0 * min_cost);
  // 8 never converges: it stops at the last epoch whose successor would pass 2 × min cost.
  const auto eight = next_trial(job);
  ASSERT_EQ(eight.batch_size, 8);
  const auto stopped = train(job, eight);
  EXPECT_FALSE(stopped.converged);
  const auto& e = job.trials[2];
  EXPECT_LE(trial_cost(job, e), 2.0 * *job.min_cost);
  EXPECT_GT(trial_cost(job, e) * (e.epochs + 1) / e.epochs, 2.0 * *job.min_cost);
}

TEST(Report, RepeatsAreIdempotentAndBadReportsChangeNothing) {
  auto job = synthetic_job(OptimizerKind::zeus);
  const auto id = next_trial(job);
  const auto keep = report(job, {id, 7.0, 1400.0, 0.5, 1});
  EXPECT_FALSE(keep.stop_train);
  const JobState before = job;
  EXPECT_FALSE(report(job, {id, 7.0, 1400.0, 0.5, 1}).stop_train);  // a retried report
  EXPECT_EQ(job, before);
  const auto refused = [&](TrainingResult r, RefusalKind kind) {
    try {
      (void)report(job, r);
      ADD_FAILURE() << "accepted";
    } catch (const Refusal& e) {
      EXPECT_EQ(e.kind(), kind) << e.what();
    }
    EXPECT_EQ(job, before);
  };
  refused({id, std::nan(""), 1.0, 0.5, 2}, RefusalKind::bad_request);
  refused({id, 14.0, -1.0, 0.5, 2}, RefusalKind::bad_request);
  refused({id, 14.0, 2800.0, std::numeric_limits<double>::infinity(), 2}, RefusalKind::bad_request);
  refused({id, 14.0, 2800.0, 0.5, 0}, RefusalKind::bad_request);
  refused({{"t-1", 64, id.trial_number}, 14.0, 2800.0, 0.5, 2}, RefusalKind::bad_request);  // wrong batch size
  refused({{"t-1", 32, 7}, 14.0, 2800.0, 0.5, 2}, RefusalKind::bad_request);                // no such trial
  refused({id, 3.0, 2800.0, 0.5, 2}, RefusalKind::bad_request);                             // time went down
  const auto done = report(job, {id, 49.0, 9800.0, 0.95, 7});
  EXPECT_TRUE(done.stop_train);
  EXPECT_TRUE(done.converged);
  const auto again = report(job, {id, 49.0, 9800.0, 0.95, 7});
  EXPECT_TRUE(again.stop_train);
  EXPECT_TRUE(again.converged);
  const auto failed = next_trial(job);
  end_trial(job, failed);
  try {
    (void)report(job, {failed, 1.0, 1.0, 0.5, 1});
    ADD_FAILURE();
  } catch (const Refusal& e) {
    EXPECT_EQ(e.kind(), RefusalKind::bad_request);
  }
}

TEST(Report, LowerIsBetterMetric) {
  auto job = synthetic_job(OptimizerKind::zeus);
  job.spec.higher_is_better_metric = false;
  job.spec.target_metric = 40.0;
  const auto id = next_trial(job);
  EXPECT_FALSE(report(job, {id, 7.0, 1400.0, 45.0, 1}).stop_train);
  EXPECT_TRUE(report(job, {id, 14.0, 2800.0, 39.0, 2}).converged);
}

TEST(GpucapPolicy, FindsTheCheapestSizeAndSettlesOnIt) {
  auto job = synthetic_job(OptimizerKind::gpucap);
  job.spec.default_batch_size = 128;  // start far from the optimum (32)
  std::vector<int> sizes;
  for (int r = 0; r < 15; ++r) {
    for (int attempt = 0; attempt < 5; ++attempt) {
      const auto id = next_trial(job);
      sizes.push_back(id.batch_size);
      if (train(job, id).converged) break;
    }
  }
  EXPECT_EQ(sizes.front(), 128);
  EXPECT_EQ(sizes.back(), 32);
  // Settled: the last five recurrences ran 32 only.
  EXPECT_EQ(std::vector<int>(sizes.end() - 5, sizes.end()), std::vector<int>(5, 32));
  EXPECT_EQ(job.trials.back().type, TrialType::mab);
  // It never tried 8, which its search ruled out without a run.
  EXPECT_EQ(std::count(sizes.begin(), sizes.end(), 8), 0);
}

TEST(GpucapPolicy, ConcurrentRequestWhileExploring) {
  auto job = synthetic_job(OptimizerKind::gpucap);
  ASSERT_TRUE(train(job, next_trial(job)).converged);
  const auto exploring = next_trial(job);
  EXPECT_EQ(job.trials.back().type, TrialType::exploration);
  const auto concurrent = next_trial(job);
  EXPECT_EQ(job.trials.back().type, TrialType::concurrent);
  EXPECT_EQ(concurrent.batch_size, 32);
  EXPECT_NE(exploring.batch_size, 32);
}

}  // namespace
}  // namespace gpucap::bso
