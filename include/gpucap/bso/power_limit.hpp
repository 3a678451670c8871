#pragma once
// Zeus's just-in-time power-limit optimizer (NSDI'23 §4.3; zeus/_legacy/policy JITPowerLimitOptimizer):
// the first time a job runs a batch size, it profiles every power limit for a short while in the
// first epoch — highest limit first — and from then on runs that batch size at the limit whose
// cost per unit of work, η·energy + (1−η)·max_power·time, was lowest. Pure: the caller sets the
// limits and measures; this only keeps the books.

#include <map>
#include <optional>
#include <vector>

namespace gpucap::bso {

class JitPowerLimitOptimizer {
 public:
  // `power_limits_w`: the limits to profile (any order; kept highest first). Throws Error(usage)
  // if empty or not positive, or if eta is outside [0, 1] or max_power_w is not positive.
  JitPowerLimitOptimizer(std::vector<double> power_limits_w, double eta, double max_power_w);

  [[nodiscard]] const std::vector<double>& profile_order() const { return limits_w_; }
  // The limit to profile next for this batch size, or nullopt once every limit is profiled.
  [[nodiscard]] std::optional<double> next_to_profile(int batch_size) const;
  // A profiling window: `work` units (steps, samples or epochs) took time_s and energy_j at
  // power_limit_w. Throws Error(usage) for a limit not in the list or a non-positive/NaN figure.
  void observe(int batch_size, double power_limit_w, double time_s, double energy_j, double work);
  // The cheapest limit once every limit was profiled for this batch size; nullopt before.
  [[nodiscard]] std::optional<double> best(int batch_size) const;
  // Cost per unit of work measured at a limit (nullopt if not profiled).
  [[nodiscard]] std::optional<double> cost_per_work(int batch_size, double power_limit_w) const;

 private:
  std::vector<double> limits_w_;  // descending
  double eta_;
  double max_power_w_;
  std::map<int, std::map<double, double>> cost_per_work_;  // batch size → limit → cost/work
};

}  // namespace gpucap::bso
