#include "gpucap/control/directcap.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "gpucap/core/error.hpp"

namespace gpucap::control {

DirectcapController::DirectcapController(DirectcapParams params) : params_(std::move(params)) {
  if (!params_.planning) throw usage_error("directcap needs a partition planner (a predictor for this GPU and model)");
  memory_clock_mhz_ = params_.planning->memory_clocks_mhz.back();
}

void DirectcapController::replan(double cap_w) {
  plan_ = plan_or_smallest(*params_.planning, cap_w);
  cap_w_ = cap_w;
  streak_ = 0;
}

Knobs DirectcapController::knobs() const {
  Knobs k;
  k.tenants = plan_.tenants;
  if (params_.planning->chooses_memory_clock()) k.mem_clock_mhz = memory_clock_mhz_;
  k.power_limit_w = std::clamp(cap_w_, params_.power_limit_min_w, params_.power_limit_max_w);
  return k;
}

Knobs DirectcapController::initial_knobs(double cap_w) const {
  DirectcapController first(params_);
  first.replan(cap_w);
  return first.knobs();
}

Knobs DirectcapController::decide(const Observation& observation) {
  if (observation.cap_w != cap_w_) {
    replan(observation.cap_w);
    return knobs();
  }
  streak_ = observation.power.mean_w > params_.over_factor * cap_w_ ? streak_ + 1 : 0;
  if (streak_ >= params_.over_streak) {
    const auto& clocks = params_.planning->memory_clocks_mhz;
    const auto below = std::lower_bound(clocks.begin(), clocks.end(), memory_clock_mhz_);
    if (below != clocks.begin()) memory_clock_mhz_ = *std::prev(below);
    streak_ = 0;
  }
  return knobs();
}

std::string DirectcapController::describe_state() const {
  return fmt::format("tenants=[{}] limit={:g}W mem={:g}MHz over_streak={}", describe(plan_.tenants), cap_w_,
                     memory_clock_mhz_, streak_);
}

}  // namespace gpucap::control
