#include "gpucap/control/pctodl_batchdvfs.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "gpucap/control/thermo.hpp"
#include "gpucap/core/error.hpp"

namespace gpucap::control {

namespace {

int top_batch(const PctodlBatchDvfsParams& params) { return static_cast<int>(params.batch_sizes.size()) - 1; }
int top_clock(const PctodlBatchDvfsParams& params) { return static_cast<int>(params.clocks_mhz.size()) - 1; }

int ceil_half(int a, int b) { return (a + b + 1) / 2; }
int floor_half(int a, int b) { return (a + b) / 2; }

// The search step of §2.10, before FreqGuard.
PctodlBatchDvfsState search_step(const PctodlBatchDvfsParams& params, PctodlBatchDvfsState s, double p, double c) {
  const bool converged = s.hi - s.lo <= 1;
  const int step = std::abs(p - c) <= params.near_cap_w ? 1 : params.far_clock_step;
  const auto clock_up = [&] { s.clock_index = std::min(s.clock_index + step, top_clock(params)); };
  const auto clock_down = [&] { s.clock_index = std::max(s.clock_index - step, 0); };
  if (p >= params.alpha * c && p < c) return s;  // in the band: hold
  if (p < params.alpha * c) {
    if (converged) {
      if (s.clock_index < top_clock(params)) {
        clock_up();
      } else if (s.batch_index < top_batch(params)) {
        s.hi = top_batch(params);
      }
    } else if (s.batch_index < top_batch(params)) {
      s.lo = s.batch_index;
      int next = ceil_half(s.lo, s.hi);
      if (next == s.batch_index) ++next;
      s.batch_index = std::min(next, top_batch(params));
    } else {
      clock_up();
    }
    return s;
  }
  // At or over the cap.
  if (converged) {
    s.batch_index = s.lo;
    clock_down();
  } else if (s.batch_index > 0) {
    s.hi = s.batch_index;
    int next = floor_half(s.lo, s.hi);
    if (next == s.batch_index) --next;
    s.batch_index = std::max(next, 0);
  } else {
    clock_down();
  }
  return s;
}

}  // namespace

PctodlBatchDvfsState pctodl_batchdvfs_initial(const PctodlBatchDvfsParams& params, double cap_w) {
  return {0, top_batch(params), params.start_batch_index, params.start_clock_index, cap_w};
}

PctodlBatchDvfsState pctodl_batchdvfs_step(const PctodlBatchDvfsParams& params, const PctodlBatchDvfsState& state,
                                           double window_max_w, double cap_w) {
  auto s = state;
  if (cap_w != s.cap_w) {
    // The upstream bug fixed: a new cap re-opens the search over the whole ladder.
    s.lo = 0;
    s.hi = top_batch(params);
    s.cap_w = cap_w;
  }
  auto next = search_step(params, s, window_max_w, cap_w);
  const auto& clocks = params.clocks_mhz;
  const double current_mhz = clocks[static_cast<std::size_t>(s.clock_index)];
  const double next_mhz = clocks[static_cast<std::size_t>(next.clock_index)];
  const double guarded_mhz = freq_guard(next_mhz, current_mhz, window_max_w, cap_w, clocks);
  next.clock_index = static_cast<int>(std::lower_bound(clocks.begin(), clocks.end(), guarded_mhz) - clocks.begin());
  return next;
}

PctodlBatchDvfsController::PctodlBatchDvfsController(PctodlBatchDvfsParams params) : params_(std::move(params)) {
  if (params_.batch_sizes.empty()) throw usage_error("pctodl-batchdvfs: the batch ladder is empty");
  if (params_.clocks_mhz.empty()) throw usage_error("pctodl-batchdvfs: no supported SM clocks");
  if (!std::is_sorted(params_.clocks_mhz.begin(), params_.clocks_mhz.end())) {
    throw usage_error("pctodl-batchdvfs: SM clocks must be ascending");
  }
  if (params_.start_batch_index < 0 || params_.start_batch_index > top_batch(params_) ||
      params_.start_clock_index < 0 || params_.start_clock_index > top_clock(params_)) {
    throw usage_error("pctodl-batchdvfs: the start batch or clock is outside the ladder");
  }
}

Knobs PctodlBatchDvfsController::knobs_of(const PctodlBatchDvfsState& state) const {
  return single_tenant_knobs(params_.batch_sizes[static_cast<std::size_t>(state.batch_index)],
                             params_.clocks_mhz[static_cast<std::size_t>(state.clock_index)]);
}

Knobs PctodlBatchDvfsController::initial_knobs(double cap_w) const {
  return knobs_of(pctodl_batchdvfs_initial(params_, cap_w));
}

Knobs PctodlBatchDvfsController::decide(const Observation& observation) {
  if (!started_) {
    state_ = pctodl_batchdvfs_initial(params_, observation.cap_w);
    started_ = true;
  }
  state_ = pctodl_batchdvfs_step(params_, state_, observation.power.max_w, observation.cap_w);
  return knobs_of(state_);
}

std::string PctodlBatchDvfsController::describe_state() const {
  return fmt::format("batch={} [lo={} hi={}] sm={:g}MHz", params_.batch_sizes[static_cast<std::size_t>(state_.batch_index)],
                     params_.batch_sizes[static_cast<std::size_t>(state_.lo)],
                     params_.batch_sizes[static_cast<std::size_t>(state_.hi)],
                     params_.clocks_mhz[static_cast<std::size_t>(state_.clock_index)]);
}

}  // namespace gpucap::control
