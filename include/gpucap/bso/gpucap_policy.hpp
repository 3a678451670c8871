#pragma once
// gpucap's batch-size policy for recurring jobs (docs/algorithms.md, "bso: gpucap's optimizer").
// Where Zeus walks every batch size twice (pruning) and then samples among the survivors, this
// policy
//  - learns the exact cost of one epoch of a batch size from the first epochs of its first try,
//    and the epochs it needs to reach the target from the tries that converged, so the expected
//    cost of a size is (cost of an epoch) × (mean epochs to target);
//  - searches the sorted batch sizes from the default as a galloping local search: one step
//    away, doubling the step while each step is better, bisecting back once one is worse, down
//    first and then up, and stops a direction at a worse neighbour instead of walking on;
//  - stops an exploratory try as soon as finishing it is expected to cost more than a fresh run
//    at the best size so far (a lower bound on its remaining epochs comes from its neighbours:
//    halving the batch size at most halves the epochs to target);
//  - settles: once the search is over it runs the cheapest size, sampling sizes within 5 % of
//    it until each has 3 converged runs, so near-ties do not keep it alternating.
// Pure: decisions are functions of the job's trials, so every replica of the service agrees.

#include <optional>
#include <string>

#include "gpucap/bso/state.hpp"

namespace gpucap::bso {

struct PolicyChoice {
  int batch_size = 0;
  TrialType type = TrialType::exploration;
};

// The batch size of the next trial (Exploration while searching, MAB once settled, Concurrent
// at the best size while an exploration is still running).
[[nodiscard]] PolicyChoice gpucap_next_trial(const JobState& job);

// After an epoch of `running` (a dispatched trial whose last report is filled in, not yet at its
// target): a message if the try should stop now because finishing it would cost more than a
// fresh run at the best size; nullopt to keep training. Only exploratory tries are stopped.
[[nodiscard]] std::optional<std::string> gpucap_early_stop(const JobState& job, const Trial& running);

}  // namespace gpucap::bso
