#include "gpucap/control/mpsfit.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>

#include "gpucap/control/margin.hpp"
#include "gpucap/core/error.hpp"

namespace gpucap::control {

MpsfitController::MpsfitController(MpsfitParams params) : params_(std::move(params)) {
  if (!params_.planning) throw usage_error("mpsfit needs a partition planner (a fitted predictor for this GPU and model)");
  if (params_.planning->sm_clocks_mhz.empty()) throw usage_error("mpsfit needs the GPU's supported SM clocks");
}

double MpsfitController::power_budget_w(double cap_w, bool measured) const {
  const double window = pooled_spread(spread_sum_sq_, spread_count_, params_.prior_spread);
  const double prediction = measured ? 0.0 : pooled_spread(error_sum_sq_, error_count_, params_.prior_model_error);
  return control::power_budget_w(cap_w, window, prediction, params_.spread_sigmas, params_.min_margin, extra_margin_);
}

double MpsfitController::predicted_w(double sm_clock_mhz) const {
  return params_.planning->power_w(plan_.tenants, sm_clock_mhz, plan_.memory_clock_mhz);
}

double MpsfitController::correction_at(double sm_clock_mhz) const {
  // The measured/predicted ratio of the nearest measured clocks on either side, interpolated:
  // where the predictor's curve has the wrong shape, one ratio for all clocks would not do.
  const auto ratio = [this](const auto& it) { return it->second.max_power_w / std::max(predicted_w(it->first), 1e-9); };
  const auto above = measured_.lower_bound(sm_clock_mhz);
  if (above == measured_.begin()) return above == measured_.end() ? power_ratio_ : ratio(above);
  const auto below = std::prev(above);
  if (above == measured_.end()) return ratio(below);
  const double t = (sm_clock_mhz - below->first) / (above->first - below->first);
  return ratio(below) + t * (ratio(above) - ratio(below));
}

double MpsfitController::expected_power_w(double sm_clock_mhz) const {
  const auto at = measured_.find(sm_clock_mhz);
  double expected = at != measured_.end() ? at->second.max_power_w : correction_at(sm_clock_mhz) * predicted_w(sm_clock_mhz);
  // Power does not fall as the clock rises: a lower clock's measurement bounds this one.
  for (auto it = measured_.begin(); it != measured_.end() && it->first < sm_clock_mhz; ++it) {
    expected = std::max(expected, it->second.max_power_w);
  }
  return expected;
}

double MpsfitController::choose_clock(double cap_w) const {
  const auto& clocks = params_.planning->sm_clocks_mhz;
  // A partition not measured yet starts lower: its first window is the one most likely to be
  // over the cap, and a window over the cap costs more than one a few percent slower.
  const double first_w = cap_w * (1.0 - params_.first_window_margin);
  // From the top: the first clock expected to fit. Power rises with the clock, so none above it would.
  for (auto it = clocks.rbegin(); it != clocks.rend(); ++it) {
    double budget_w = power_budget_w(cap_w, measured_.count(*it) > 0);
    if (measured_.empty()) budget_w = std::min(budget_w, first_w);
    if (expected_power_w(*it) <= budget_w) return *it;
  }
  return clocks.front();
}

void MpsfitController::replan(double cap_w) {
  // The planner predicts raw power; the corrected prediction is raw × ratio, so its budget is
  // the corrected one divided by the ratio.
  // The ratio was learnt on other partitions; if nothing is predicted to fit under the budget it
  // implies, the partition planned for the budget alone (or the cap) still beats the smallest one
  // — the SM clock feedback keeps it under the cap.
  const double budget_w = power_budget_w(cap_w, false);
  std::optional<PartitionPlan> planned;
  for (const double w : {budget_w / std::max(power_ratio_, 1e-6), budget_w, cap_w}) {
    if ((planned = params_.planning->plan(w))) break;
  }
  const auto next = planned ? *planned : plan_or_smallest(*params_.planning, cap_w);
  if (next.tenants != plan_.tenants || next.memory_clock_mhz != plan_.memory_clock_mhz) measured_.clear();
  plan_ = next;
}

Knobs MpsfitController::knobs() const {
  Knobs k;
  k.tenants = plan_.tenants;
  k.sm_clock_mhz = sm_clock_mhz_;
  if (chooses_memory_clock()) k.mem_clock_mhz = plan_.memory_clock_mhz;
  return k;
}

Knobs MpsfitController::initial_knobs(double cap_w) const {
  MpsfitController first(params_);
  first.replan(cap_w);
  first.sm_clock_mhz_ = first.choose_clock(cap_w);
  return first.knobs();
}

bool MpsfitController::learnable(const Observation& observation) const {
  // The first window of a new partition holds the workers' restart (idle power).
  return !restart_in_window_ && observation.knobs.tenants == plan_.tenants && observation.knobs.sm_clock_mhz &&
         observation.knobs.mem_clock_mhz == knobs().mem_clock_mhz && !observation.settled_power.empty() &&
         full_window(observation, params_.period);
}

void MpsfitController::learn(const Observation& observation) {
  const double clock_mhz = *observation.knobs.sm_clock_mhz;
  const double max_w = observation.settled_power.max_w;
  if (!measured_.contains(clock_mhz)) {
    // How far off the corrected prediction this window acted on was.
    const double error = max_w / expected_power_w(clock_mhz) - 1.0;
    error_sum_sq_ += error * error;
    ++error_count_;
  }
  auto& stats = measured_[clock_mhz];
  if (stats.windows > 0 && stats.max_power_w > 0.0) {
    const double deviation = max_w / stats.max_power_w - 1.0;
    spread_sum_sq_ += deviation * deviation;
    ++spread_count_;
  }
  ++stats.windows;
  update_running_mean(stats.max_power_w, max_w, stats.windows);
  const double raw_w = predicted_w(clock_mhz);
  if (raw_w > 0.0) power_ratio_ += params_.learning_rate * (max_w / raw_w - power_ratio_);
}

Knobs MpsfitController::decide(const Observation& observation) {
  const double cap_w = observation.cap_w;
  if (!started_) {
    // The plan initial_knobs made (a pure function of the first cap).
    replan(cap_w);
    sm_clock_mhz_ = choose_clock(cap_w);
    started_ = true;
    last_cap_w_ = cap_w;
  }
  const bool cap_changed = cap_w != last_cap_w_;
  if (learnable(observation)) learn(observation);
  // Samples above a cap that only fell during the window say nothing about the margin.
  extra_margin_ = next_extra_margin(extra_margin_, observation.settled_power.max_w > cap_w && !cap_changed,
                                    params_.overshoot_margin, params_.margin_decay);
  if (cap_changed) replan(cap_w);
  last_cap_w_ = cap_w;
  sm_clock_mhz_ = choose_clock(cap_w);
  // New shares restart the MPS workers at the start of the next window.
  restart_in_window_ = plan_.tenants != observation.knobs.tenants;
  return knobs();
}

std::string MpsfitController::describe_state() const {
  return fmt::format("tenants=[{}] sm={:g}MHz mem={:g}MHz power_ratio={:.3f} extra_margin={:.3f} spread_n={}",
                     describe(plan_.tenants), sm_clock_mhz_, plan_.memory_clock_mhz, power_ratio_, extra_margin_,
                     spread_count_);
}

}  // namespace gpucap::control
