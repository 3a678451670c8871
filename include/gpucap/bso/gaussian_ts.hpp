#pragma once
// Zeus's Gaussian Thompson-sampling bandit (zeus/optimizer/batch_size/server/mab.py): one arm per
// batch size, reward = −cost, the reward precision of an arm learned as 1/var of its rewards
// (infinite for one observation or identical ones: the posterior is then the sample mean), and a
// conjugate normal update of the arm's mean from the job's prior.

#include <vector>

#include "gpucap/bso/random.hpp"
#include "gpucap/bso/state.hpp"

namespace gpucap::bso {

// The arm's state after fitting `rewards` (at least one) from the prior (mean, precision).
[[nodiscard]] ArmState fit_arm(int batch_size, const std::vector<double>& rewards, double prior_mean,
                               double prior_precision);

// Zeus's predict: visit the arms in a random order and return the first with fewer than
// `num_explorations` observations; otherwise draw one N(mean, 1/sqrt(precision)) per arm (in
// ascending batch size) and return the arm of the largest draw. `arms` must not be empty.
[[nodiscard]] int predict_arm(const std::vector<ArmState>& arms, int num_explorations, BsoRandom& rng);

}  // namespace gpucap::bso
