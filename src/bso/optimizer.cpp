#include "gpucap/bso/optimizer.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "gpucap/bso/cost.hpp"
#include "gpucap/bso/gaussian_ts.hpp"
#include "gpucap/bso/gpucap_policy.hpp"
#include "gpucap/bso/pruning.hpp"
#include "gpucap/bso/random.hpp"

namespace gpucap::bso {
namespace {

Trial& append_trial(JobState& job, int batch_size, TrialType type) {
  Trial trial;
  trial.trial_number = static_cast<int>(job.trials.size()) + 1;
  trial.batch_size = batch_size;
  trial.type = type;
  job.trials.push_back(trial);
  return job.trials.back();
}

std::vector<double> rewards_of(const JobState& job, const std::vector<const Trial*>& trials) {
  std::vector<double> rewards;
  for (const auto* trial : trials) rewards.push_back(-trial_cost(job, *trial));
  return rewards;
}

// Pruning is over: one arm per surviving size, fitted on its exploration trials.
void construct_arms(JobState& job, const std::vector<int>& survivors) {
  const auto explored = explorations_per_batch_size(job);
  job.arms.clear();
  for (const int b : survivors) {
    const auto it = explored.find(b);
    if (it == explored.end() || it->second.empty()) {
      // No pruning rounds: the arm starts at the prior and is explored first.
      job.arms.push_back({b, job.spec.mab_prior_mean, job.spec.mab_prior_precision, 0.0, 0});
    } else {
      job.arms.push_back(fit_arm(b, rewards_of(job, it->second), job.spec.mab_prior_mean, job.spec.mab_prior_precision));
    }
  }
  job.stage = Stage::mab;
}

int zeus_next_batch_size(JobState& job, TrialType& type) {
  if (job.stage == Stage::pruning) {
    const auto step = next_pruning_step(job);
    if (step.kind == PruningStep::Kind::explore) {
      type = TrialType::exploration;
      return step.batch_size;
    }
    if (step.kind == PruningStep::Kind::concurrent) {
      type = TrialType::concurrent;
      return step.batch_size;
    }
    construct_arms(job, step.survivors);
  }
  type = TrialType::mab;
  auto rng = BsoRandom::from_state(job.rng_state);
  const int b = predict_arm(job.arms, job.spec.mab_num_explorations, rng);
  job.rng_state = rng.state();
  return b;
}

// Zeus's MAB report: refit the arm on its last window_size results and this one.
void update_arm(JobState& job, const Trial& finished) {
  const auto arm = std::find_if(job.arms.begin(), job.arms.end(),
                                [&](const ArmState& a) { return a.batch_size == finished.batch_size; });
  // A Concurrent trial of the pruning stage that ends after the bandit was built, at a size that
  // did not survive pruning, has no arm (Zeus refuses such a report and loses it; it is kept here).
  if (arm == job.arms.end()) return;
  std::vector<const Trial*> history;  // newest first
  for (auto it = job.trials.rbegin(); it != job.trials.rend(); ++it) {
    if (it->trial_number == finished.trial_number) continue;
    if (it->batch_size == finished.batch_size && it->status == TrialStatus::succeeded) history.push_back(&*it);
  }
  const auto window = static_cast<std::size_t>(job.spec.window_size);
  if (window > 0 && history.size() >= window) history.resize(window - 1);
  std::reverse(history.begin(), history.end());
  history.push_back(&finished);
  *arm = fit_arm(finished.batch_size, rewards_of(job, history), job.spec.mab_prior_mean, job.spec.mab_prior_precision);
}

bool reached_target(const JobSpec& spec, double metric) {
  return spec.higher_is_better_metric ? metric >= spec.target_metric : metric <= spec.target_metric;
}

void check_report(const TrainingResult& r) {
  const auto bad = [](const std::string& message) { return Refusal(RefusalKind::bad_request, message); };
  if (!std::isfinite(r.time_s) || r.time_s < 0.0) throw bad(fmt::format("time must be a finite number >= 0, not {}", r.time_s));
  if (!std::isfinite(r.energy_j) || r.energy_j < 0.0) {
    throw bad(fmt::format("energy must be a finite number >= 0, not {}", r.energy_j));
  }
  if (!std::isfinite(r.metric)) throw bad("metric must be a finite number");
  if (r.current_epoch < 1) throw bad(fmt::format("current_epoch must be 1 or more, not {}", r.current_epoch));
}

Trial& dispatched_trial(JobState& job, const TrialId& id) {
  const Trial* found = find_trial(job, id.trial_number);
  if (found == nullptr || found->batch_size != id.batch_size) {
    throw Refusal(RefusalKind::bad_request,
                  fmt::format("unknown trial {} with batch size {} of job {}", id.trial_number, id.batch_size, job.spec.job_id));
  }
  return job.trials[static_cast<std::size_t>(id.trial_number - 1)];
}

}  // namespace

double trial_cost(const JobState& job, const Trial& trial) {
  return zeus_cost(trial.energy_j, trial.time_s, job.spec.eta_knob, job.spec.max_power);
}

TrialId next_trial(JobState& job) {
  JobState next = job;
  TrialType type = TrialType::exploration;
  int b = 0;
  if (next.spec.optimizer == OptimizerKind::zeus) {
    b = zeus_next_batch_size(next, type);
  } else {
    const auto choice = gpucap_next_trial(next);
    b = choice.batch_size;
    type = choice.type;
  }
  const Trial& trial = append_trial(next, b, type);
  TrialId id{next.spec.job_id, trial.batch_size, trial.trial_number};
  job = std::move(next);
  return id;
}

ReportResponse report(JobState& job, const TrainingResult& result) {
  check_report(result);
  JobState next = job;
  Trial& trial = dispatched_trial(next, result.trial);
  if (trial.status == TrialStatus::failed) {
    throw Refusal(RefusalKind::bad_request,
                  fmt::format("trial {} was ended before it reported (Failed); ask for a new batch size", trial.trial_number));
  }
  if (trial.status == TrialStatus::succeeded) {
    return {true, trial.converged.value_or(false),
            fmt::format("Result for this trial({}) is already reported.", trial.trial_number)};
  }
  if (result.current_epoch < trial.epochs) {
    throw Refusal(RefusalKind::bad_request, fmt::format("epoch {} is behind the last report (epoch {}) of trial {}",
                                                        result.current_epoch, trial.epochs, trial.trial_number));
  }
  if (result.current_epoch == trial.epochs) {
    return {false, false, "Stop condition not met, keep training"};  // a repeated report
  }
  if (result.time_s < trial.time_s || result.energy_j < trial.energy_j) {
    throw Refusal(RefusalKind::bad_request, "time and energy are cumulative and cannot go down between reports");
  }

  trial.last_epoch_time_s = (result.time_s - trial.time_s) / (result.current_epoch - trial.epochs);
  trial.last_epoch_energy_j = (result.energy_j - trial.energy_j) / (result.current_epoch - trial.epochs);
  trial.epochs = result.current_epoch;
  trial.time_s = result.time_s;
  trial.energy_j = result.energy_j;

  const double cost = trial_cost(next, trial);
  const bool early_stop = next.spec.beta_knob.has_value() && next.min_cost.has_value();
  const double cost_bound = early_stop ? *next.spec.beta_knob * *next.min_cost : 0.0;
  const bool within = !early_stop || cost <= cost_bound;
  const bool reached = reached_target(next.spec, result.metric);
  std::optional<std::string> policy_stop;
  if (within && !reached && early_stop && result.current_epoch < next.spec.max_epochs) {
    // Zeus's simulator never starts an epoch that would take the cost past the bound (the next
    // epoch costs what the last one did); Zeus's server runs that epoch and stops after it.
    const double next_epoch_cost = zeus_cost(trial.last_epoch_energy_j, trial.last_epoch_time_s, next.spec.eta_knob,
                                             next.spec.max_power);
    if (cost + next_epoch_cost > cost_bound) {
      policy_stop = fmt::format(
          "Batch Size({}) would exceed the cost upper bound with its next epoch: current cost({}) + epoch cost({}) > "
          "beta_knob({})*min_cost({})",
          trial.batch_size, cost, next_epoch_cost, *next.spec.beta_knob, *next.min_cost);
    }
  }
  if (within && !reached && !policy_stop && next.spec.optimizer == OptimizerKind::gpucap) {
    policy_stop = gpucap_early_stop(next, trial);
  }

  if (within && !reached && result.current_epoch < next.spec.max_epochs && !policy_stop) {
    job = std::move(next);
    return {false, false, "Stop condition not met, keep training"};
  }

  std::string message;
  if (reached && within) {
    message = "Train succeeded";
  } else if (!within) {
    message = fmt::format("Batch Size({}) exceeded the cost upper bound: current cost({}) > beta_knob({})*min_cost({})",
                          trial.batch_size, cost, *next.spec.beta_knob, *next.min_cost);
  } else if (policy_stop) {
    message = *policy_stop;
  } else {
    message = fmt::format("Train failed to converge within max_epoch({})", next.spec.max_epochs);
  }
  trial.status = TrialStatus::succeeded;
  trial.converged = reached && within;
  if (*trial.converged && (!next.min_cost || cost < *next.min_cost)) {
    next.min_cost = cost;
    next.min_cost_batch_size = trial.batch_size;
  }
  if (next.stage == Stage::mab) update_arm(next, trial);
  ReportResponse response{true, *trial.converged, message};
  job = std::move(next);
  return response;
}

void end_trial(JobState& job, const TrialId& id) {
  const Trial* found = find_trial(job, id.trial_number);
  if (found == nullptr || found->batch_size != id.batch_size) {
    throw Refusal(RefusalKind::not_found, fmt::format("Could not find the trial: job {} trial {} batch size {}", job.spec.job_id,
                                                      id.trial_number, id.batch_size));
  }
  auto& trial = job.trials[static_cast<std::size_t>(id.trial_number - 1)];
  if (trial.status == TrialStatus::dispatched) trial.status = TrialStatus::failed;
}

}  // namespace gpucap::bso
