#include "gpucap/control/batchdvfs.hpp"

#include <fmt/format.h>

namespace gpucap::control {

const std::vector<double>& seed_p40_clock_levels_mhz() {
  static const std::vector<double> levels = {544, 632, 734, 835, 949, 1063, 1189, 1303, 1430, 1531};
  return levels;
}

std::vector<int> consecutive_batch_sizes(int n) {
  std::vector<int> sizes;
  for (int b = 1; b <= n; ++b) sizes.push_back(b);
  return sizes;
}

BatchDvfsState batchdvfs_initial(const BatchDvfsParams& params) {
  const int top = static_cast<int>(params.batch_sizes.size()) - 1;
  return BatchDvfsState{BatchSearch{0, top, params.start_batch_index}, params.start_clock_index};
}

BatchDvfsState batchdvfs_step(const BatchDvfsParams& params, const BatchDvfsState& state, double window_max_w,
                              double cap_w) {
  const int top = static_cast<int>(params.batch_sizes.size()) - 1;
  const int top_clock = static_cast<int>(params.clock_levels_mhz.size()) - 1;
  BatchDvfsState next = state;
  switch (classify_power(window_max_w, cap_w, params.alpha)) {
    case PowerBand::inside: break;
    case PowerBand::below:
      if (state.search.cur == top) {
        if (state.clock_index < top_clock) ++next.clock_index;
      } else {
        next.search = search_up(state.search, top);
      }
      break;
    case PowerBand::above:
      if (state.search.cur == 0) {
        if (state.clock_index > 0) --next.clock_index;
      } else {
        next.search = search_down(state.search);
      }
      break;
  }
  return next;
}

BatchDvfsController::BatchDvfsController(BatchDvfsParams params)
    : params_(std::move(params)), state_(batchdvfs_initial(params_)) {}

Knobs BatchDvfsController::knobs() const {
  return single_tenant_knobs(params_.batch_sizes[static_cast<std::size_t>(state_.search.cur)],
                             params_.clock_levels_mhz[static_cast<std::size_t>(state_.clock_index)]);
}

Knobs BatchDvfsController::initial_knobs(double /*cap_w*/) const { return knobs(); }

Knobs BatchDvfsController::decide(const Observation& observation) {
  state_ = batchdvfs_step(params_, state_, observation.power.max_w, observation.cap_w);
  return knobs();
}

std::string BatchDvfsController::describe_state() const {
  return fmt::format("lo={} hi={} cur={} clock_index={}", state_.search.lo, state_.search.hi, state_.search.cur,
                     state_.clock_index);
}

}  // namespace gpucap::control
