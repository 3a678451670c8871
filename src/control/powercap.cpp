#include "gpucap/control/powercap.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace gpucap::control {

Knobs PowercapController::knobs(double cap_w) const {
  auto k = single_tenant_knobs(params_.batch_size);
  k.power_limit_w = std::clamp(cap_w, params_.power_limit_min_w, params_.power_limit_max_w);
  return k;
}

Knobs PowercapController::initial_knobs(double cap_w) const { return knobs(cap_w); }

Knobs PowercapController::decide(const Observation& observation) {
  const auto k = knobs(observation.cap_w);
  limit_w_ = *k.power_limit_w;
  return k;
}

std::string PowercapController::describe_state() const { return fmt::format("power_limit={:g}W", limit_w_); }

}  // namespace gpucap::control
