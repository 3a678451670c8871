#include "gpucap/bso/pruning.hpp"

#include <algorithm>
#include <limits>

#include "gpucap/bso/optimizer.hpp"

namespace gpucap::bso {

std::map<int, std::vector<const Trial*>> explorations_per_batch_size(const JobState& job) {
  std::map<int, std::vector<const Trial*>> per_size;
  for (const auto& trial : job.trials) {
    if (trial.type == TrialType::exploration && trial.status != TrialStatus::failed) {
      per_size[trial.batch_size].push_back(&trial);
    }
  }
  return per_size;
}

PruningStep next_pruning_step(const JobState& job) {
  const auto explored = explorations_per_batch_size(job);
  std::vector<int> sizes = job.spec.batch_sizes;
  int round_default = job.spec.default_batch_size;

  for (int round = 0; round < job.spec.num_pruning_rounds; ++round) {
    std::sort(sizes.begin(), sizes.end());
    const auto at = std::find(sizes.begin(), sizes.end(), round_default);
    std::vector<int> down(sizes.begin(), at + 1);
    std::reverse(down.begin(), down.end());
    std::vector<int> up(at + 1, sizes.end());

    std::vector<int> converged;
    double round_min_cost = std::numeric_limits<double>::infinity();
    int round_best = 0;
    for (const auto* direction : {&down, &up}) {
      for (const int b : *direction) {
        const auto it = explored.find(b);
        if (it == explored.end() || it->second.size() <= static_cast<std::size_t>(round)) {
          return {PruningStep::Kind::explore, b, {}};
        }
        const Trial& trial = *it->second[static_cast<std::size_t>(round)];
        if (trial.status == TrialStatus::dispatched) {
          return {PruningStep::Kind::concurrent, job.min_cost_batch_size, {}};
        }
        if (!trial.converged.value_or(false)) break;  // this direction ends here
        converged.push_back(b);
        const double cost = trial_cost(job, trial);
        if (cost < round_min_cost) {
          round_min_cost = cost;
          round_best = b;
        }
      }
    }
    if (converged.empty()) {
      throw Refusal(RefusalKind::failed,
                    "no batch size converged in a pruning round; reconfigure batch_sizes and register a new job");
    }
    round_default = round_best;
    sizes = converged;
  }
  std::sort(sizes.begin(), sizes.end());
  return {PruningStep::Kind::done, 0, sizes};
}

}  // namespace gpucap::bso
