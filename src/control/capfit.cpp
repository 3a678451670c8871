#include "gpucap/control/capfit.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "gpucap/control/margin.hpp"
#include "gpucap/core/error.hpp"

namespace gpucap::control {

namespace {

std::vector<CapfitCandidate> build_candidates(const predict::ProfileModel& profile, const std::vector<int>& sizes) {
  std::vector<CapfitCandidate> out;
  for (const auto& column : profile.columns()) {
    const auto add = [&](int batch) {
      if (const auto p = profile.predict(column, batch)) {
        out.push_back(CapfitCandidate{batch, column.sm_clock_mhz, column.memory_clock_mhz, *p});
      }
    };
    if (sizes.empty()) {
      for (int b = column.min_batch(); b <= column.max_batch(); ++b) add(b);
    } else {
      for (const int b : sizes) add(b);
    }
  }
  return out;
}

}  // namespace

CapfitController::CapfitController(CapfitParams params) : params_(std::move(params)) {
  if (!params_.profile) {
    throw usage_error("capfit needs a profile of the model on this GPU (--profile FILE; on the twin gpucap measures one)");
  }
  if (!params_.lock_clocks && params_.profile->columns().size() > 1) {
    throw usage_error("capfit without clock control needs a profile at the GPU's own clocks (one SM clock; 'gpucap tune "
                      "--platform nvml' without --allow-gpu-control), not one that varies the clocks");
  }
  candidates_ = build_candidates(*params_.profile, params_.batch_sizes);
  if (candidates_.empty()) throw usage_error("capfit: no batch size of the set lies within the profile's batch sizes");
  measured_.assign(candidates_.size(), CapfitPointStats{});
}

Requirements CapfitController::requirements() const {
  return {.sm_clock = params_.lock_clocks, .memory_clock = params_.lock_clocks && params_.profile->has_memory_clocks()};
}

predict::ProfilePrediction CapfitController::predicted(std::size_t i) const {
  if (measured_[i].windows > 0) return {measured_[i].throughput_img_s, measured_[i].max_power_w};
  return {candidates_[i].profile.throughput_img_s * throughput_ratio_,
          candidates_[i].profile.max_power_w * power_ratio_};
}

double CapfitController::power_budget_w(double cap_w, bool measured) const {
  const double window = pooled_spread(spread_sum_sq_, spread_count_, params_.prior_spread);
  // An unmeasured configuration's prediction is also off by the profile's own error.
  const double prediction = measured ? 0.0 : pooled_spread(error_sum_sq_, error_count_, params_.prior_profile_error);
  return control::power_budget_w(cap_w, window, prediction, params_.spread_sigmas, params_.min_margin, extra_margin_);
}

namespace {

bool dominates(const CapfitCandidate& a, const CapfitCandidate& b) {
  return a.memory_clock_mhz.value_or(0.0) >= b.memory_clock_mhz.value_or(0.0) && a.sm_clock_mhz >= b.sm_clock_mhz &&
         a.batch_size >= b.batch_size;
}

}  // namespace

std::size_t CapfitController::choose(double cap_w) const {
  const double measured_budget_w = power_budget_w(cap_w, true);
  const double predicted_budget_w = power_budget_w(cap_w, false);
  std::optional<std::size_t> best;
  double best_throughput = -1.0;
  std::size_t coolest = 0;
  double coolest_w = std::numeric_limits<double>::infinity();
  for (std::size_t i = 0; i < candidates_.size(); ++i) {
    const auto p = predicted(i);
    double max_w = p.max_power_w;
    for (const auto v : visited_) {
      if (v != i && dominates(candidates_[i], candidates_[v])) max_w = std::max(max_w, measured_[v].max_power_w);
    }
    if (max_w < coolest_w) {
      coolest_w = max_w;
      coolest = i;
    }
    const double budget_w = measured_[i].windows > 0 ? measured_budget_w : predicted_budget_w;
    if (max_w <= budget_w && p.throughput_img_s > best_throughput) {
      best_throughput = p.throughput_img_s;
      best = i;
    }
  }
  // Nothing predicted to fit: the configuration predicted to draw least.
  return best.value_or(coolest);
}

Knobs CapfitController::knobs(std::size_t i) const {
  if (!params_.lock_clocks) return single_tenant_knobs(candidates_[i].batch_size);
  auto k = single_tenant_knobs(candidates_[i].batch_size, candidates_[i].sm_clock_mhz);
  k.mem_clock_mhz = candidates_[i].memory_clock_mhz;
  return k;
}

Knobs CapfitController::initial_knobs(double cap_w) const { return knobs(choose(cap_w)); }

std::optional<std::size_t> CapfitController::candidate_of(const Knobs& knobs) const {
  for (std::size_t i = 0; i < candidates_.size(); ++i) {
    const auto& c = candidates_[i];
    const bool same_clocks = !params_.lock_clocks || (knobs.sm_clock_mhz == c.sm_clock_mhz && knobs.mem_clock_mhz == c.memory_clock_mhz);
    if (c.batch_size == knobs.batch_size() && same_clocks) {
      return i;
    }
  }
  return std::nullopt;
}

void CapfitController::learn(std::size_t ran, const Observation& observation) {
  auto& stats = measured_[ran];
  // The settled samples: right after a change the sensor still averages in the old configuration.
  const double max_w = observation.settled_power.max_w;
  if (stats.windows > 0 && stats.max_power_w > 0.0) {
    const double deviation = max_w / stats.max_power_w - 1.0;
    spread_sum_sq_ += deviation * deviation;
    ++spread_count_;
  }
  if (stats.windows == 0) {
    visited_.push_back(ran);
    const double predicted_w = predicted(ran).max_power_w;
    if (predicted_w > 0.0) {
      const double error = max_w / predicted_w - 1.0;
      error_sum_sq_ += error * error;
      ++error_count_;
    }
  }
  ++stats.windows;
  update_running_mean(stats.max_power_w, max_w, stats.windows);
  update_running_mean(stats.throughput_img_s, observation.throughput_img_s, stats.windows);
  const auto& profile = candidates_[ran].profile;
  const double rate = params_.learning_rate;
  if (profile.max_power_w > 0.0) power_ratio_ += rate * (max_w / profile.max_power_w - power_ratio_);
  if (profile.throughput_img_s > 0.0) {
    throughput_ratio_ += rate * (observation.throughput_img_s / profile.throughput_img_s - throughput_ratio_);
  }
}

Knobs CapfitController::decide(const Observation& observation) {
  const bool cap_changed = observation.cap_w != last_cap_w_ && last_cap_w_ > 0.0;
  const auto ran = candidate_of(observation.knobs);
  if (ran && !observation.settled_power.empty() && full_window(observation, params_.period)) learn(*ran, observation);
  // Samples above a cap that only fell during the window, or that still show the configuration
  // before, say nothing about the margin.
  extra_margin_ = next_extra_margin(extra_margin_, observation.settled_power.max_w > observation.cap_w && !cap_changed,
                                    params_.overshoot_margin, params_.margin_decay);
  last_cap_w_ = observation.cap_w;
  current_ = choose(observation.cap_w);
  return knobs(current_);
}

std::string CapfitController::describe_state() const {
  return fmt::format("point={} power_ratio={:.3f} throughput_ratio={:.3f} extra_margin={:.3f} spread_n={}",
                     current_, power_ratio_, throughput_ratio_, extra_margin_, spread_count_);
}

}  // namespace gpucap::control
