#include "gpucap/control/clipper.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "gpucap/control/batchdvfs.hpp"

namespace gpucap::control {

ClipperParams::ClipperParams() : batch_sizes(consecutive_batch_sizes(256)) {}

ClipperState clipper_initial(const ClipperParams& params) { return ClipperState{params.start_index}; }

ClipperState clipper_step(const ClipperParams& params, const ClipperState& state, double window_max_w, double cap_w) {
  const int top = static_cast<int>(params.batch_sizes.size()) - 1;
  switch (classify_power(window_max_w, cap_w, params.alpha)) {
    case PowerBand::inside: return state;
    case PowerBand::below: return ClipperState{std::min(state.index + params.additive_step, top)};
    case PowerBand::above:
      return ClipperState{static_cast<int>(std::floor(params.multiplicative_factor * state.index))};
  }
  return state;
}

ClipperController::ClipperController(ClipperParams params)
    : params_(std::move(params)), state_(clipper_initial(params_)) {}

Knobs ClipperController::knobs() const {
  return single_tenant_knobs(params_.batch_sizes[static_cast<std::size_t>(state_.index)]);
}

Knobs ClipperController::initial_knobs(double /*cap_w*/) const { return knobs(); }

Knobs ClipperController::decide(const Observation& observation) {
  state_ = clipper_step(params_, state_, observation.power.max_w, observation.cap_w);
  return knobs();
}

std::string ClipperController::describe_state() const { return fmt::format("index={}", state_.index); }

}  // namespace gpucap::control
