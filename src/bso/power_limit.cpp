#include "gpucap/bso/power_limit.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>

#include "gpucap/bso/cost.hpp"
#include "gpucap/core/error.hpp"

namespace gpucap::bso {

JitPowerLimitOptimizer::JitPowerLimitOptimizer(std::vector<double> power_limits_w, double eta, double max_power_w)
    : limits_w_(std::move(power_limits_w)), eta_(eta), max_power_w_(max_power_w) {
  if (limits_w_.empty()) throw usage_error("the power-limit optimizer needs at least one power limit");
  for (const double w : limits_w_) {
    if (!(w > 0.0) || !std::isfinite(w)) throw usage_error(fmt::format("power limit {} W is not positive", w));
  }
  if (!(eta_ >= 0.0 && eta_ <= 1.0)) throw usage_error("eta must be in [0, 1]");
  if (!(max_power_w_ > 0.0) || !std::isfinite(max_power_w_)) throw usage_error("max power must be positive");
  std::sort(limits_w_.begin(), limits_w_.end(), std::greater<>());
  limits_w_.erase(std::unique(limits_w_.begin(), limits_w_.end()), limits_w_.end());
}

std::optional<double> JitPowerLimitOptimizer::next_to_profile(int batch_size) const {
  const auto it = cost_per_work_.find(batch_size);
  for (const double w : limits_w_) {
    if (it == cost_per_work_.end() || !it->second.contains(w)) return w;
  }
  return std::nullopt;
}

void JitPowerLimitOptimizer::observe(int batch_size, double power_limit_w, double time_s, double energy_j, double work) {
  if (std::find(limits_w_.begin(), limits_w_.end(), power_limit_w) == limits_w_.end()) {
    throw usage_error(fmt::format("power limit {} W is not one the optimizer profiles", power_limit_w));
  }
  if (!(time_s > 0.0) || !(energy_j >= 0.0) || !(work > 0.0) || !std::isfinite(time_s) || !std::isfinite(energy_j) ||
      !std::isfinite(work)) {
    throw usage_error("a power-limit profile needs positive time and work and non-negative energy");
  }
  cost_per_work_[batch_size][power_limit_w] = zeus_cost(energy_j, time_s, eta_, max_power_w_) / work;
}

std::optional<double> JitPowerLimitOptimizer::best(int batch_size) const {
  if (next_to_profile(batch_size)) return std::nullopt;
  const auto& costs = cost_per_work_.at(batch_size);
  // Highest limit first on ties, as Zeus keeps the first of equal costs in its profiling order.
  double best_w = limits_w_.front();
  for (const double w : limits_w_) {
    if (costs.at(w) < costs.at(best_w)) best_w = w;
  }
  return best_w;
}

std::optional<double> JitPowerLimitOptimizer::cost_per_work(int batch_size, double power_limit_w) const {
  const auto it = cost_per_work_.find(batch_size);
  if (it == cost_per_work_.end()) return std::nullopt;
  const auto c = it->second.find(power_limit_w);
  if (c == it->second.end()) return std::nullopt;
  return c->second;
}

}  // namespace gpucap::bso
