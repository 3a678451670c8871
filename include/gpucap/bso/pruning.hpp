#pragma once
// Zeus's pruning rounds (zeus/optimizer/batch_size/server/explorer.py), recomputed from the
// job's trials on every request — so several servers, or a restarted one, agree on where the
// walk stands. Each round starts at the round's default batch size and walks down through
// smaller sizes, then up through larger ones, one Exploration trial each, and stops a direction
// at the first size that did not converge; the sizes that converged go on to the next round,
// with the cheapest as its default. A size whose trial of this round is still running makes the
// request a Concurrent trial at the best batch size so far.

#include <map>
#include <vector>

#include "gpucap/bso/state.hpp"

namespace gpucap::bso {

struct PruningStep {
  enum class Kind { explore, concurrent, done };
  Kind kind = Kind::explore;
  int batch_size = 0;            // explore: the size to try; concurrent: min_cost_batch_size
  std::vector<int> survivors;    // done: the sizes that converged in the last round (ascending)
};

// Exploration trials that did not fail (a dead client's trial is explored again), per batch
// size, in trial order.
[[nodiscard]] std::map<int, std::vector<const Trial*>> explorations_per_batch_size(const JobState& job);

// The next step of pruning. Throws Refusal(failed) when a round ends with no converged size
// ("Reconfigure batch_sizes"), as Zeus does.
[[nodiscard]] PruningStep next_pruning_step(const JobState& job);

}  // namespace gpucap::bso
