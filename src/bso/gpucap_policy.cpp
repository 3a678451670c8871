#include "gpucap/bso/gpucap_policy.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <vector>

#include "gpucap/bso/cost.hpp"

namespace gpucap::bso {
namespace {

// A size is trusted once it has this many converged runs.
constexpr std::size_t kSettleRuns = 3;

// What the finished trials of one batch size say.
struct SizeEvidence {
  int first_trial = std::numeric_limits<int>::max();  // the size's first trial (search order)
  double epoch_cost = 0.0;                            // cost of one steady epoch
  int epoch_cost_epochs = 0;                          // epochs of the trial it came from
  std::vector<int> epochs_to_target;                  // converged trials
  bool tried = false;                                 // any trial ended with a result

  [[nodiscard]] bool converged() const { return !epochs_to_target.empty(); }
  [[nodiscard]] double mean_epochs() const {
    double sum = 0.0;
    for (const int e : epochs_to_target) sum += e;
    return sum / static_cast<double>(epochs_to_target.size());
  }
};

double epoch_cost_of(const JobState& job, const Trial& trial) {
  return zeus_cost(trial.last_epoch_energy_j, trial.last_epoch_time_s, job.spec.eta_knob, job.spec.max_power);
}

std::map<int, SizeEvidence> evidence_of(const JobState& job) {
  std::map<int, SizeEvidence> evidence;
  for (const auto& trial : job.trials) {
    if (trial.status == TrialStatus::failed) continue;
    auto& e = evidence[trial.batch_size];
    e.first_trial = std::min(e.first_trial, trial.trial_number);
    if (trial.status != TrialStatus::succeeded) continue;
    e.tried = true;
    // The longest trial's last epoch is the steadiest figure (the first epoch of a new size also
    // profiles power limits).
    if (trial.epochs > e.epoch_cost_epochs) {
      e.epoch_cost = epoch_cost_of(job, trial);
      e.epoch_cost_epochs = trial.epochs;
    }
    if (trial.converged.value_or(false)) e.epochs_to_target.push_back(trial.epochs);
  }
  return evidence;
}

// Epochs to target vary from run to run, often more than between neighbouring batch sizes, while
// the cost of an epoch is exact. So a size's epochs are estimated with its neighbours' help: its
// own runs plus kPriorRuns pseudo-runs at the value interpolated (log–log) from the nearest
// converged sizes — unless its own runs clearly disagree (by more than kPoolingLogGap in log),
// which means a real trend (e.g. CIFAR-100's epochs doubling with the batch size), not noise.
constexpr double kPriorRuns = 2.0;
constexpr double kPoolingLogGap = 0.25;

double interpolated_epochs(const std::map<int, SizeEvidence>& evidence, int b) {
  const SizeEvidence* below = nullptr;
  const SizeEvidence* above = nullptr;
  int b_below = 0, b_above = 0;
  for (const auto& [other, e] : evidence) {
    if (other == b || !e.converged()) continue;
    if (other < b) {
      below = &e;
      b_below = other;
    } else if (above == nullptr) {
      above = &e;
      b_above = other;
    }
  }
  if (below == nullptr && above == nullptr) return 0.0;
  if (below == nullptr) return above->mean_epochs();
  if (above == nullptr) return below->mean_epochs();
  const double t = std::log(static_cast<double>(b) / b_below) / std::log(static_cast<double>(b_above) / b_below);
  return std::exp(std::log(below->mean_epochs()) * (1.0 - t) + std::log(above->mean_epochs()) * t);
}

double pooled_epochs(const std::map<int, SizeEvidence>& evidence, int b) {
  const auto& e = evidence.at(b);
  const double prior = interpolated_epochs(evidence, b);
  double sum = 0.0;
  for (const int n : e.epochs_to_target) sum += n;
  const double own = static_cast<double>(e.epochs_to_target.size());
  if (prior <= 0.0 || std::abs(std::log(sum / own / prior)) > kPoolingLogGap) return sum / own;
  return (sum + kPriorRuns * prior) / (own + kPriorRuns);
}

double expected_cost(const std::map<int, SizeEvidence>& evidence, int b) {
  return evidence.at(b).epoch_cost * pooled_epochs(evidence, b);
}

// The converged size of lowest expected cost, or nullopt before any converged.
std::optional<int> cheapest(const std::map<int, SizeEvidence>& evidence, std::optional<int> excluding = std::nullopt) {
  std::optional<int> best;
  double best_cost = std::numeric_limits<double>::infinity();
  for (const auto& [b, e] : evidence) {
    if (!e.converged() || (excluding && b == *excluding)) continue;
    const double cost = expected_cost(evidence, b);
    if (cost < best_cost) {
      best_cost = cost;
      best = b;
    }
  }
  return best;
}

int index_of(const std::vector<int>& sizes, int b) {
  return static_cast<int>(std::lower_bound(sizes.begin(), sizes.end(), b) - sizes.begin());
}

bool is_tried(const std::map<int, SizeEvidence>& evidence, int b) {
  const auto it = evidence.find(b);
  return it != evidence.end() && it->second.tried;
}

// The next size of the galloping local search around `best`, or nullopt when both directions
// are closed (the nearest tried size on each side is adjacent).
std::optional<int> next_search_size(const JobState& job, const std::map<int, SizeEvidence>& evidence, int best) {
  const auto& sizes = job.spec.batch_sizes;
  const int n = static_cast<int>(sizes.size());
  const int at = index_of(sizes, best);
  const auto nearest_tried = [&](int direction) -> std::optional<int> {
    for (int i = at + direction; i >= 0 && i < n; i += direction) {
      if (is_tried(evidence, sizes[static_cast<std::size_t>(i)])) return i;
    }
    return std::nullopt;
  };
  const int best_first_trial = evidence.at(best).first_trial;
  for (const int direction : {-1, +1}) {
    const auto frontier = nearest_tried(direction);
    if (frontier) {
      const int gap = std::abs(*frontier - at);
      if (gap <= 1) continue;  // closed: the neighbour on this side is known and worse
      return sizes[static_cast<std::size_t>(at + direction * (gap / 2))];
    }
    if (at + direction < 0 || at + direction >= n) continue;  // the end of the list
    // Open side: one step, or — if the best was reached by stepping away from the other side —
    // twice that step (galloping), clamped to the end of the list.
    int step = 1;
    if (const auto behind = nearest_tried(-direction)) {
      const int behind_first_trial = evidence.at(sizes[static_cast<std::size_t>(*behind)]).first_trial;
      if (behind_first_trial < best_first_trial) step = 2 * std::abs(*behind - at);
    }
    const int target = std::clamp(at + direction * step, 0, n - 1);
    return sizes[static_cast<std::size_t>(target)];
  }
  return std::nullopt;
}

// Run-to-run spread of the epochs to target, relative to their mean, pooled over the sizes with
// two or more runs; 15 % until there are such sizes.
double epochs_spread(const std::map<int, SizeEvidence>& evidence) {
  double sum = 0.0;
  int sizes = 0;
  for (const auto& [b, e] : evidence) {
    if (e.epochs_to_target.size() < 2) continue;
    const double mean = e.mean_epochs();
    double squares = 0.0;
    for (const int n : e.epochs_to_target) squares += (n - mean) * (n - mean);
    sum += std::sqrt(squares / static_cast<double>(e.epochs_to_target.size() - 1)) / mean;
    ++sizes;
  }
  return sizes == 0 ? 0.15 : std::clamp(sum / sizes, 0.05, 0.5);
}

// Once the search is over: the cheapest size — or, while some size with fewer than kSettleRuns
// runs could still be cheaper (its optimistic estimate, kOptimism spreads below its mean, beats
// the cheapest), that size, so that one lucky or unlucky run does not decide.
constexpr double kOptimism = 1.5;

int settled_size(const std::map<int, SizeEvidence>& evidence, int best) {
  const double best_cost = expected_cost(evidence, best);
  const double spread = epochs_spread(evidence);
  int pick = best;
  double lowest = std::numeric_limits<double>::infinity();
  for (const auto& [b, e] : evidence) {
    if (!e.converged() || e.epochs_to_target.size() >= kSettleRuns) continue;
    const double runs = static_cast<double>(e.epochs_to_target.size());
    const double optimistic = expected_cost(evidence, b) * (1.0 - kOptimism * spread / std::sqrt(runs));
    if (optimistic < best_cost && optimistic < lowest) {
      lowest = optimistic;
      pick = b;
    }
  }
  return pick;
}

// A lower bound on the epochs `b` needs to reach the target, from the converged sizes: a smaller
// batch needs at least (b / b') of the epochs of a larger one b' (at most the same number of
// steps), and a larger batch at least a third of a smaller one's (it rarely needs fewer).
double epochs_lower_bound(const std::map<int, SizeEvidence>& evidence, int b) {
  double bound = 1.0;
  for (const auto& [other, e] : evidence) {
    if (other == b || !e.converged()) continue;
    const double fewest = *std::min_element(e.epochs_to_target.begin(), e.epochs_to_target.end());
    const double implied = b < other ? fewest * static_cast<double>(b) / other : fewest / 3.0;
    bound = std::max(bound, implied);
  }
  return bound;
}

}  // namespace

PolicyChoice gpucap_next_trial(const JobState& job) {
  const auto evidence = evidence_of(job);
  const auto best = cheapest(evidence);
  if (!best) {
    // Nothing converged yet: the default (again, if its run failed, as Zeus assumes it converges).
    for (const auto& trial : job.trials) {
      if (trial.status == TrialStatus::dispatched) return {job.spec.default_batch_size, TrialType::concurrent};
    }
    return {job.spec.default_batch_size, TrialType::exploration};
  }
  const bool exploring_now = std::any_of(job.trials.begin(), job.trials.end(), [](const Trial& t) {
    return t.status == TrialStatus::dispatched && t.type == TrialType::exploration;
  });
  if (exploring_now) return {*best, TrialType::concurrent};
  if (const auto next = next_search_size(job, evidence, *best)) return {*next, TrialType::exploration};
  return {settled_size(evidence, *best), TrialType::mab};
}

std::optional<std::string> gpucap_early_stop(const JobState& job, const Trial& running) {
  if (running.type != TrialType::exploration) return std::nullopt;
  const auto evidence = evidence_of(job);
  const auto best = cheapest(evidence, running.batch_size);
  if (!best) return std::nullopt;
  const double fresh_run_cost = expected_cost(evidence, *best);
  const double epochs_left = std::max(1.0, epochs_lower_bound(evidence, running.batch_size) - running.epochs);
  const double remaining_cost = epoch_cost_of(job, running) * epochs_left;
  if (remaining_cost <= fresh_run_cost) return std::nullopt;
  return fmt::format(
      "gpucap: finishing batch size {} would cost at least {:.4g} more, over the {:.4g} of a fresh run at batch size {}",
      running.batch_size, remaining_cost, fresh_run_cost, *best);
}

}  // namespace gpucap::bso
