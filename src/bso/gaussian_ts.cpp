#include "gpucap/bso/gaussian_ts.hpp"

#include <cmath>
#include <limits>

#include "gpucap/core/error.hpp"

namespace gpucap::bso {

ArmState fit_arm(int batch_size, const std::vector<double>& rewards, double prior_mean, double prior_precision) {
  if (rewards.empty()) throw Error(ErrorCode::internal, "fit_arm: no rewards to fit the arm");
  double sum = 0.0;
  for (const double r : rewards) sum += r;
  const double n = static_cast<double>(rewards.size());
  const double mean = sum / n;
  double squares = 0.0;
  for (const double r : rewards) squares += (r - mean) * (r - mean);
  const double variance = squares / n;  // numpy's var: the population variance

  ArmState arm;
  arm.batch_size = batch_size;
  arm.num_observations = static_cast<int>(rewards.size());
  if (variance == 0.0) {
    arm.reward_precision = std::numeric_limits<double>::infinity();
    arm.param_precision = std::numeric_limits<double>::infinity();
    arm.param_mean = mean;
  } else {
    arm.reward_precision = 1.0 / variance;
    arm.param_precision = prior_precision + n * arm.reward_precision;
    arm.param_mean = (prior_precision * prior_mean + arm.reward_precision * sum) / arm.param_precision;
  }
  return arm;
}

int predict_arm(const std::vector<ArmState>& arms, int num_explorations, BsoRandom& rng) {
  if (arms.empty()) throw Error(ErrorCode::internal, "predict_arm: no arms");
  std::vector<int> batch_sizes;
  for (const auto& arm : arms) batch_sizes.push_back(arm.batch_size);
  // A random order, so that concurrent recurrences explore different arms.
  for (const int b : rng.permutation(batch_sizes)) {
    for (const auto& arm : arms) {
      if (arm.batch_size == b && arm.num_observations < num_explorations) return b;
    }
  }
  int best = arms.front().batch_size;
  double best_draw = -std::numeric_limits<double>::infinity();
  bool first = true;
  for (const auto& arm : arms) {
    const double stddev = std::isinf(arm.param_precision) ? 0.0 : 1.0 / std::sqrt(arm.param_precision);
    const double draw = rng.normal(arm.param_mean, stddev);
    if (first || draw > best_draw) {
      best = arm.batch_size;
      best_draw = draw;
      first = false;
    }
  }
  return best;
}

}  // namespace gpucap::bso
