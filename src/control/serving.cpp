#include "gpucap/control/serving.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "gpucap/core/error.hpp"

namespace gpucap::control {

std::string describe(const ServingKnobs& knobs) {
  auto clock = knobs.sm_clock_mhz ? fmt::format("{:g}MHz", *knobs.sm_clock_mhz) : std::string("auto");
  if (knobs.memory_clock_mhz) clock += fmt::format(" mem={:g}MHz", *knobs.memory_clock_mhz);
  const auto limit = knobs.power_limit_w ? fmt::format("{:.0f}W", *knobs.power_limit_w) : std::string("auto");
  const auto admit = std::isinf(knobs.admit_rate_rps) ? std::string("all") : fmt::format("{:.0f}/s", knobs.admit_rate_rps);
  const auto queue = std::isinf(knobs.max_queued_items) ? std::string("any") : fmt::format("{:.0f}", knobs.max_queued_items);
  return fmt::format("batch<={} delay={:g}ms sm={} pl={} admit={} queue<={}", knobs.max_batch_size,
                     knobs.max_queue_delay_s * 1e3, clock, limit, admit, queue);
}

namespace {

void check_batcher(const BatcherDefaults& batcher) {
  if (batcher.max_batch_size < 1) throw usage_error(fmt::format("max batch size {} must be >= 1", batcher.max_batch_size));
  if (!(std::isfinite(batcher.max_queue_delay_s) && batcher.max_queue_delay_s >= 0.0)) {
    throw usage_error(fmt::format("max queue delay {:g} s must be >= 0", batcher.max_queue_delay_s));
  }
}

}  // namespace

StaticServing::StaticServing(BatcherDefaults batcher, const PlatformLimits& limits, bool limit_follows_cap,
                             std::optional<double> sm_clock_mhz)
    : batcher_(batcher), limits_(limits), limit_follows_cap_(limit_follows_cap), sm_clock_mhz_(sm_clock_mhz) {
  check_batcher(batcher_);
}

Requirements StaticServing::requirements() const {
  return Requirements{sm_clock_mhz_.has_value(), false, limit_follows_cap_};
}

ServingKnobs StaticServing::initial_knobs(double cap_w) const {
  ServingKnobs knobs;
  knobs.max_batch_size = batcher_.max_batch_size;
  knobs.max_queue_delay_s = batcher_.max_queue_delay_s;
  knobs.sm_clock_mhz = sm_clock_mhz_;
  if (limit_follows_cap_) knobs.power_limit_w = std::clamp(cap_w, limits_.power_limit_min_w, limits_.power_limit_max_w);
  return knobs;
}

ServingKnobs StaticServing::decide(const ServingObservation& observation) { return initial_knobs(observation.cap_w); }

std::string StaticServing::describe_state() const {
  return fmt::format("static batch<={} delay={:g}ms{}{}", batcher_.max_batch_size, batcher_.max_queue_delay_s * 1e3,
                     sm_clock_mhz_ ? fmt::format(" sm={:g}MHz", *sm_clock_mhz_) : std::string(),
                     limit_follows_cap_ ? ", power limit = cap" : "");
}

SeedServing::SeedServing(std::unique_ptr<Controller> inner, BatcherDefaults batcher)
    : inner_(std::move(inner)), batcher_(batcher) {
  if (!inner_) throw Error(ErrorCode::internal, "SeedServing needs a controller");
  check_batcher(batcher_);
}

ServingKnobs SeedServing::serving_knobs(const Knobs& knobs) const {
  ServingKnobs out;
  out.max_batch_size = std::max(1, knobs.batch_size());
  out.max_queue_delay_s = batcher_.max_queue_delay_s;
  out.sm_clock_mhz = knobs.sm_clock_mhz;
  out.memory_clock_mhz = knobs.mem_clock_mhz;
  out.power_limit_w = knobs.power_limit_w;
  return out;
}

ServingKnobs SeedServing::initial_knobs(double cap_w) const { return serving_knobs(inner_->initial_knobs(cap_w)); }

Observation SeedServing::batch_observation(const ServingObservation& observation, const Knobs& knobs) {
  Observation out;
  out.time_s = observation.time_s;
  out.cap_w = observation.cap_w;
  out.power = observation.power;
  out.settled_power = observation.power;
  out.throughput_img_s = observation.throughput_items_s;
  out.tenant_throughput_img_s = {observation.throughput_items_s};
  out.mean_batch_latency_s =
      observation.batches > 0 ? observation.busy_fraction * observation.window_s / observation.batches : 0.0;
  out.batches = observation.batches;
  out.knobs = knobs;
  return out;
}

ServingKnobs SeedServing::decide(const ServingObservation& observation) {
  // The seed's own view of the window: the knobs it set (its batch size, not the batches the
  // queue happened to fill), so its state machine steps from where it was.
  auto ran = single_tenant_knobs(observation.knobs.max_batch_size, observation.knobs.sm_clock_mhz);
  ran.mem_clock_mhz = observation.knobs.memory_clock_mhz;
  ran.power_limit_w = observation.knobs.power_limit_w;
  return serving_knobs(inner_->decide(batch_observation(observation, ran)));
}

}  // namespace gpucap::control
