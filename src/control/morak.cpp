#include "gpucap/control/morak.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace gpucap::control {

namespace {

// Above the band's top, 1.02·cap, upstream steps down; between the cap and it, it holds (and
// FreqGuard steps the clock).
constexpr double kUpperBandFactor = 1.02;

}  // namespace

std::vector<int> pctodl_batch_ladder() {
  std::vector<int> ladder = {1, 2, 4, 8, 16};
  for (int b = 32; b <= 256; b += 16) ladder.push_back(b);
  return ladder;
}

int morak_clock_step(double gap) {
  if (gap > 0.20) return 10;
  if (gap > 0.10) return 5;
  if (gap > 0.05) return 2;
  return 1;
}

MorakState morak_step(const MorakParams& params, const MorakState& state, double window_max_w, double cap_w,
                      double batch_latency_ms) {
  const int top_batch = static_cast<int>(params.batch_sizes.size()) - 1;
  const int top_clock = static_cast<int>(params.clocks_mhz.size()) - 1;
  const int step = morak_clock_step(std::abs(window_max_w - cap_w) / cap_w);
  const bool latency_ok = !params.latency_slo_ms || batch_latency_ms <= params.beta * *params.latency_slo_ms;
  MorakState next = state;
  if (window_max_w <= params.alpha * cap_w) {
    if (latency_ok && state.batch_index < top_batch) {
      next.batch_index += 1;
    } else {
      next.clock_index = std::min(state.clock_index + step, top_clock);
    }
  } else if (window_max_w > kUpperBandFactor * cap_w) {
    if (!latency_ok) {
      next.batch_index = std::max(state.batch_index - step, 0);
    } else {
      next.clock_index = std::max(state.clock_index - step, 0);
    }
  }
  // FreqGuard: over the cap and the clock did not move → one supported clock down.
  if (window_max_w > cap_w && next.clock_index == state.clock_index) next.clock_index = std::max(next.clock_index - 1, 0);
  return next;
}

MorakController::MorakController(MorakParams params)
    : params_(std::move(params)), state_{params_.start_batch_index, params_.start_clock_index} {}

Knobs MorakController::knobs() const {
  auto k = single_tenant_knobs(params_.batch_sizes[static_cast<std::size_t>(state_.batch_index)],
                               params_.clocks_mhz[static_cast<std::size_t>(state_.clock_index)]);
  const int batch = k.batch_size();
  k.tenants.clear();
  for (const double share : params_.shares_pct) k.tenants.push_back(TenantKnobs{share, batch});
  return k;
}

namespace {
// Upstream: latency = max over workers of batch / throughput (one worker: the mean batch latency).
double batch_latency_ms(const Observation& observation) {
  if (observation.knobs.tenants.size() <= 1) return observation.mean_batch_latency_s * 1000.0;
  double worst_ms = 0.0;
  for (std::size_t i = 0; i < observation.knobs.tenants.size(); ++i) {
    const double rate = i < observation.tenant_throughput_img_s.size() ? observation.tenant_throughput_img_s[i] : 0.0;
    const double batch = observation.knobs.tenants[i].batch_size;
    worst_ms = std::max(worst_ms, rate > 0.0 ? 1000.0 * batch / rate : 1e9);
  }
  return worst_ms;
}
}  // namespace

Knobs MorakController::initial_knobs(double /*cap_w*/) const { return knobs(); }

Knobs MorakController::decide(const Observation& observation) {
  state_ = morak_step(params_, state_, observation.power.max_w, observation.cap_w, batch_latency_ms(observation));
  return knobs();
}

std::string MorakController::describe_state() const {
  return fmt::format("batch_index={} clock_index={}", state_.batch_index, state_.clock_index);
}

}  // namespace gpucap::control
