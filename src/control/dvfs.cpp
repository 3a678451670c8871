#include "gpucap/control/dvfs.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace gpucap::control {

DvfsState dvfs_initial(const DvfsParams& params) { return DvfsState{params.start_clock_index}; }

DvfsState dvfs_step(const DvfsParams& params, const DvfsState& state, double window_max_w, double cap_w) {
  const int top_clock = static_cast<int>(params.clock_levels_mhz.size()) - 1;
  switch (classify_power(window_max_w, cap_w, params.alpha)) {
    case PowerBand::inside: return state;
    case PowerBand::below: return DvfsState{std::min(state.clock_index + 1, top_clock)};
    case PowerBand::above: return DvfsState{std::max(state.clock_index - 1, 0)};
  }
  return state;
}

DvfsController::DvfsController(DvfsParams params) : params_(std::move(params)), state_(dvfs_initial(params_)) {}

Knobs DvfsController::knobs() const {
  return single_tenant_knobs(params_.batch_size, params_.clock_levels_mhz[static_cast<std::size_t>(state_.clock_index)]);
}

Knobs DvfsController::initial_knobs(double /*cap_w*/) const { return knobs(); }

Knobs DvfsController::decide(const Observation& observation) {
  state_ = dvfs_step(params_, state_, observation.power.max_w, observation.cap_w);
  return knobs();
}

std::string DvfsController::describe_state() const { return fmt::format("clock_index={}", state_.clock_index); }

}  // namespace gpucap::control
