#include "gpucap/control/batchsizer.hpp"

#include <fmt/format.h>

namespace gpucap::control {

BatchSearch batchsizer_initial(const BatchSizerParams& params) {
  const int top = static_cast<int>(params.batch_sizes.size()) - 1;
  return BatchSearch{0, top, params.start_index};
}

BatchSearch batchsizer_step(const BatchSizerParams& params, const BatchSearch& state, double window_max_w,
                            double cap_w) {
  const int top = static_cast<int>(params.batch_sizes.size()) - 1;
  switch (classify_power(window_max_w, cap_w, params.alpha)) {
    case PowerBand::inside: return state;
    case PowerBand::below: return state.cur == top ? state : search_up(state, top);
    case PowerBand::above: return search_down(state);  // at index 0 nothing more can be done
  }
  return state;
}

BatchSizerController::BatchSizerController(BatchSizerParams params)
    : params_(std::move(params)), state_(batchsizer_initial(params_)) {}

Knobs BatchSizerController::knobs() const {
  return single_tenant_knobs(params_.batch_sizes[static_cast<std::size_t>(state_.cur)]);
}

Knobs BatchSizerController::initial_knobs(double /*cap_w*/) const { return knobs(); }

Knobs BatchSizerController::decide(const Observation& observation) {
  state_ = batchsizer_step(params_, state_, observation.power.max_w, observation.cap_w);
  return knobs();
}

std::string BatchSizerController::describe_state() const {
  return fmt::format("lo={} hi={} cur={}", state_.lo, state_.hi, state_.cur);
}

}  // namespace gpucap::control
