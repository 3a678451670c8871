#include "gpucap/control/capserve.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>

#include "gpucap/core/error.hpp"

namespace gpucap::control {
namespace {

// κ moves toward the SLO's edge slowly and away from it fast.
constexpr double kLatencyBackoff = 0.85;
constexpr double kLatencyRecovery = 1.02;
constexpr double kP99Close = 0.9;  // p99 above this share of the SLO lowers κ
constexpr double kP99Far = 0.6;    // below it (with traffic) raises κ again
constexpr double kP99Room = 0.85;  // below it, a window that shed lets the queue hold more
// Measured batch times within this share above the profile's teach no host time: a profile's own
// points scatter by about as much (and a mix of batch sizes is timed against its mean's).
constexpr double kHostTimeTolerance = 0.05;
constexpr int kBatchesForHostTime = 5;  // fewer batches in a window time too little
// h is learnt from batches at least this full (mean items / batch cap): small batches' excess is
// mostly a cost per batch, which counted per item would inflate large batches' planned time.
constexpr double kFullnessForHostTime = 0.5;

}  // namespace

CapserveController::CapserveController(CapserveParams params)
    : params_(std::move(params)), kappa_(params_.latency_fraction), margin_(params_.power_margin) {
  if (!params_.profile) throw usage_error("capserve needs a profile of the model on this GPU");
  if (!(params_.slo_s > 0.0 && std::isfinite(params_.slo_s))) {
    throw usage_error(fmt::format("capserve: the latency SLO {:g} s must be positive", params_.slo_s));
  }
  if (params_.max_batch_size < 1) throw usage_error("capserve: the model's max batch size must be >= 1");
  if (!(params_.window_s > 0.0)) throw usage_error("capserve: the window must be positive");
  if (params_.queue_room_hold_windows < 1) throw usage_error("capserve: the queue room's hold must be at least one window");
  // A configuration that carries the planned rate (ρ_max ≤ 1, poisson_sigmas σ) must also keep up.
  if (!(params_.burst_sigmas >= 0.0 && params_.burst_sigmas <= params_.poisson_sigmas)) {
    throw usage_error(fmt::format("capserve: the burst's sigmas {:g} must be within 0 and the planned rate's {:g}",
                                  params_.burst_sigmas, params_.poisson_sigmas));
  }
  if (!params_.gpu_writes && params_.profile->columns().size() > 1) {
    throw usage_error("capserve without GPU control needs a profile at the GPU's own clocks (one SM and memory clock; 'gpucap "
                      "tune --platform nvml' without --allow-gpu-control), not one that varies the clocks");
  }
  for (const auto& column : params_.profile->columns()) {
    for (int b = column.min_batch(); b <= std::min(column.max_batch(), params_.max_batch_size); ++b) {
      if (const auto p = params_.profile->predict(column, b); p && p->throughput_img_s > 0.0) {
        candidates_.push_back({b, column.sm_clock_mhz, column.memory_clock_mhz, *p});
      }
    }
  }
  if (candidates_.empty()) {
    throw usage_error(fmt::format("capserve: the profile has no batch size up to the model's bound {}", params_.max_batch_size));
  }
}

Requirements CapserveController::requirements() const {
  return Requirements{params_.gpu_writes, false, params_.gpu_writes};
}

namespace {
double rate_with_sigmas(double measured_rps, double sigmas, double window_s) {
  const double rate = std::max(0.0, measured_rps);
  return rate + sigmas * std::sqrt(rate / window_s);
}
}  // namespace

double CapserveController::planned_rate(double measured_rps) const {
  return rate_with_sigmas(measured_rps, params_.poisson_sigmas, params_.window_s);
}

double CapserveController::keep_up_rate(double measured_rps) const {
  return rate_with_sigmas(measured_rps, params_.burst_sigmas, params_.window_s);
}

std::optional<CapserveChoice> CapserveController::choose(double cap_w, double planned_items_s,
                                                         double keep_up_items_s) const {
  const double budget_w = cap_w * (1.0 - margin_);
  const double latency_budget_s = kappa_ * params_.slo_s;
  std::optional<CapserveChoice> best_carrying;   // least energy per item among those that carry the load
  std::optional<CapserveChoice> best_capacity;   // otherwise the most capacity
  std::optional<CapserveChoice> least_power;     // if nothing meets the latency bound
  for (const auto& c : candidates_) {
    CapserveChoice choice;
    choice.batch_cap = c.batch;
    choice.sm_clock_mhz = c.sm_clock_mhz;
    choice.memory_clock_mhz = c.memory_clock_mhz;
    choice.batch_time_s = c.batch / c.profile.throughput_img_s + host_s_per_item_ * c.batch;
    choice.throughput_items_s = c.batch / choice.batch_time_s;
    choice.power_w = c.profile.max_power_w * power_ratio_;
    if (choice.power_w > budget_w) continue;
    if (!least_power || choice.power_w < least_power->power_w) least_power = choice;
    if (2.0 * choice.batch_time_s > latency_budget_s) continue;
    choice.carries_load = choice.throughput_items_s * params_.max_utilisation >= planned_items_s;
    choice.keeps_up = choice.throughput_items_s >= keep_up_items_s;
    if (choice.carries_load) {
      const double energy = choice.power_w / choice.throughput_items_s;
      if (!best_carrying || energy < best_carrying->power_w / best_carrying->throughput_items_s) best_carrying = choice;
    } else if (!best_capacity || choice.throughput_items_s > best_capacity->throughput_items_s) {
      best_capacity = choice;
    }
  }
  if (best_carrying) return best_carrying;
  if (best_capacity) return best_capacity;
  return least_power;
}

ServingKnobs CapserveController::knobs_for(const std::optional<CapserveChoice>& choice, double cap_w,
                                           double planned_items_s) const {
  ServingKnobs knobs;
  if (params_.gpu_writes) {
    knobs.power_limit_w = std::clamp(cap_w, params_.limits.power_limit_min_w, params_.limits.power_limit_max_w);
  }
  if (!choice) {
    // Nothing fits under the cap: the smallest batch at the lowest clock, and the board's limit
    // holds the power (with GPU writes); admit what that can serve (κ alone: no room, whatever learn() holds for
    // when a configuration fits again).
    const auto lowest = std::min_element(candidates_.begin(), candidates_.end(), [](const Candidate& a, const Candidate& b) {
      return std::tie(a.sm_clock_mhz, a.batch) < std::tie(b.sm_clock_mhz, b.batch);
    });
    knobs.max_batch_size = 1;
    if (params_.gpu_writes) {
      knobs.sm_clock_mhz = lowest->sm_clock_mhz;
      knobs.memory_clock_mhz = lowest->memory_clock_mhz;
    }
    // A batch of one takes no longer than the profile's smallest batch (the host's time for its
    // item added): the queue holds what such batches drain within κ·SLO.
    const double batch_of_one_s = lowest->batch / lowest->profile.throughput_img_s + host_s_per_item_;
    knobs.max_queued_items = std::max(1.0, kappa_ * params_.slo_s / batch_of_one_s);
    return knobs;
  }
  knobs.max_batch_size = choice->batch_cap;
  if (params_.gpu_writes) {
    knobs.sm_clock_mhz = choice->sm_clock_mhz;
    knobs.memory_clock_mhz = choice->memory_clock_mhz;
  }
  const double slack_s = kappa_ * params_.slo_s - 2.0 * choice->batch_time_s;
  const double fill_s = planned_items_s > 0.0 ? choice->batch_cap / planned_items_s : 0.0;
  knobs.max_queue_delay_s = std::max(0.0, std::min(slack_s, fill_s));
  // The queue holds no more than the GPU drains within the latency budget left after the batch in
  // flight and the request's own batch, widened by the queue's room (learn()). A configuration
  // that keeps up with the arrivals and a burst sees bursts only, which its spare capacity drains:
  // its queue may hold what the GPU drains within max_queue_fraction of the SLO less one batch, so
  // a burst is not shed — unless the p99 came near the SLO within its span (latency_pressed_).
  // (Planned at ρ_max and 3 σ, as rule 4 plans, a configuration 5-10 % above the load lost its
  // room in every window of a few σ, just when the burst came: maxvit_t on the A100 at 220 W.)
  double room = queue_room_slo_share_;
  if (choice->keeps_up && !latency_pressed_) room = std::max(room, params_.max_queue_fraction - kappa_);
  const double budget_s = slack_s + choice->batch_time_s + room * params_.slo_s;
  knobs.max_queued_items = std::max(static_cast<double>(choice->batch_cap), choice->throughput_items_s * std::max(0.0, budget_s));
  return knobs;
}

ServingKnobs CapserveController::initial_knobs(double cap_w) const {
  // Before any traffic is measured: the configuration with the most capacity that meets the cap
  // and the SLO (the first window measures the load).
  return knobs_for(choose(cap_w, std::numeric_limits<double>::infinity()), cap_w, 0.0);
}

std::optional<double> CapserveController::profiled_batch_time_s(double items, const ServingKnobs& knobs) const {
  const auto time_of = [&](int batch) -> std::optional<double> {
    const auto it = std::find_if(candidates_.begin(), candidates_.end(), [&](const Candidate& c) {
      return c.batch == batch && (!knobs.sm_clock_mhz || c.sm_clock_mhz == *knobs.sm_clock_mhz) &&
             c.memory_clock_mhz == knobs.memory_clock_mhz;
    });
    if (it == candidates_.end()) return std::nullopt;
    return batch / it->profile.throughput_img_s;
  };
  const int low = std::max(1, static_cast<int>(std::floor(items)));
  const auto low_s = time_of(low);
  const auto high_s = time_of(low + 1);
  if (!low_s) return std::nullopt;
  if (!high_s || items <= low) return *low_s;
  return *low_s + (items - low) * (*high_s - *low_s);
}

void CapserveController::learn_host_time(const ServingObservation& o) {
  // A window in a cap transition ran batches at the clocks before the change.
  if (o.cap_transition || o.batches < kBatchesForHostTime || o.window_s <= 0.0) return;
  if (o.mean_batch_items < kFullnessForHostTime * o.knobs.max_batch_size || o.mean_batch_items <= 0.0) return;
  const auto profiled_s = profiled_batch_time_s(o.mean_batch_items, o.knobs);
  if (!profiled_s) return;
  const double measured_s = o.busy_fraction * o.window_s / o.batches;
  const double excess_s = measured_s - *profiled_s;
  const double target = excess_s > kHostTimeTolerance * *profiled_s ? excess_s / o.mean_batch_items : 0.0;
  host_s_per_item_ = host_s_per_item_ * (1.0 - params_.learning_rate) + target * params_.learning_rate;
}

void CapserveController::learn(const ServingObservation& o) {
  learn_host_time(o);
  // A window in a cap transition shows the GPU as it ran under the old cap: it teaches nothing
  // about power, and its readings over the new cap are not an overshoot of the rule's.
  const bool power_speaks = !o.power.empty() && !o.cap_transition;
  // Power: the settled window maximum (the readings of the configuration that ran, not of the one
  // before it) against the prediction for that configuration, when the GPU was busy enough for the
  // maximum to show a batch's power rather than idle gaps.
  if (power_speaks && !o.settled_power.empty() && o.busy_fraction >= params_.busy_for_learning) {
    const auto ran = std::find_if(candidates_.begin(), candidates_.end(), [&o](const Candidate& c) {
      return c.batch == o.knobs.max_batch_size && (!o.knobs.sm_clock_mhz || c.sm_clock_mhz == *o.knobs.sm_clock_mhz) &&
             c.memory_clock_mhz == o.knobs.memory_clock_mhz;
    });
    if (ran != candidates_.end() && ran->profile.max_power_w > 0.0) {
      const double ratio = o.settled_power.max_w / ran->profile.max_power_w;
      power_ratio_ = std::max(power_ratio_ * (1.0 - params_.learning_rate) + ratio * params_.learning_rate, 0.5);
    }
  }
  // Margin: a window over the cap widens it (up to its ceiling); windows under it give it back
  // slowly. A window that ran the fallback (nothing fit under the cap: batch 1 at the lowest clock)
  // is over the cap whatever the margin, and widening it would only keep capserve there for
  // minutes after the cap rises again.
  if (power_speaks && o.power.max_w > o.cap_w) {
    if (!fallback_in_force_) margin_ = std::min(params_.max_power_margin, margin_ + params_.overshoot_margin);
  } else if (power_speaks) {
    margin_ = std::max(params_.power_margin, margin_ - params_.margin_decay);
  }
  windows_without_shedding_ = o.shed_rps > 0.0 ? 0 : windows_without_shedding_ + 1;
  // Latency: back off fast when the p99 comes close to the SLO, recover slowly when far below.
  // The p99 covers the last p99_memory_s: for that long after a backoff it still shows the
  // requests served before it, and any move on it would answer the past (backing off again on it
  // cascaded: 0.76 -> 0.24 in seven windows in a trial).
  if (o.time_s - last_backoff_s_ < params_.p99_memory_s) return;
  latency_pressed_ = false;
  if (o.p99_s > kP99Close * o.slo_s) {
    // The queue's room goes first (it is what lengthened the waits), κ only once it is gone. The
    // first cut halves it (additive increase, multiplicative decrease): cleared at once, the
    // queue held one batch again and a load near the capacity was shed by the dozen each window
    // until the room grew back (maxvit_t at 180 W on the A100: 20 to 50 a window for 10 s). A p99
    // still near the SLO after that cut's hold clears it, and the next lowers κ.
    if (queue_room_slo_share_ > 0.0 && !room_halved_) {
      queue_room_slo_share_ *= 0.5;
      room_halved_ = true;
    } else if (queue_room_slo_share_ > 0.0) {
      queue_room_slo_share_ = 0.0;
    } else {
      kappa_ = std::max(params_.min_latency_fraction, kappa_ * kLatencyBackoff);
    }
    last_backoff_s_ = o.time_s;
    latency_pressed_ = true;
    return;
  }
  room_halved_ = false;  // the p99 has come away from the SLO: a later cut halves again
  if (o.answered_rps > 0.0 && o.p99_s < kP99Far * o.slo_s && kappa_ < params_.latency_fraction) {
    // A backed-off κ recovers first: under overload a larger batch is more capacity.
    kappa_ = std::min(params_.latency_fraction, kappa_ * kLatencyRecovery);
  } else if (o.shed_rps > 0.0 && o.answered_rps > 0.0 && o.p99_s < kP99Room * o.slo_s) {
    // Requests were shed while the p99 had room: at a load near the capacity the bursts, not the
    // mean, fill the queue, and letting it hold a little more answers them within the SLO.
    queue_room_slo_share_ += params_.queue_room_step;
  }
  // The room goes back a step a window once nothing has been shed for a while.
  if (windows_without_shedding_ >= params_.queue_room_hold_windows) {
    queue_room_slo_share_ = std::max(0.0, queue_room_slo_share_ - params_.queue_room_step);
  }
  // κ + room stays within max_queue_fraction, also when κ has just recovered.
  queue_room_slo_share_ = std::min(queue_room_slo_share_, std::max(0.0, params_.max_queue_fraction - kappa_));
}

double CapserveController::arrival_rate(const ServingObservation& o) const {
  const double measured_rps = std::max(0.0, o.arrival_rps);
  if (!last_arrival_rps_ || !(o.window_s < params_.window_s)) return measured_rps;
  const double measured_s = std::max(0.0, o.window_s);
  return (measured_rps * measured_s + *last_arrival_rps_ * (params_.window_s - measured_s)) / params_.window_s;
}

ServingKnobs CapserveController::decide(const ServingObservation& observation) {
  learn(observation);
  const double arrival_rps = arrival_rate(observation);
  last_arrival_rps_ = arrival_rps;
  last_planned_rps_ = planned_rate(arrival_rps);
  last_keep_up_rps_ = keep_up_rate(arrival_rps);
  const double items_per_request = std::max(1.0, observation.items_per_request);
  const double planned_items_s = last_planned_rps_ * items_per_request;
  const auto choice = choose(observation.cap_w, planned_items_s, last_keep_up_rps_ * items_per_request);
  fallback_in_force_ = !choice;
  return knobs_for(choice, observation.cap_w, planned_items_s);
}

std::string CapserveController::describe_state() const {
  return fmt::format(
      "planned {:.0f}/s, keep-up {:.0f}/s, kappa {:.2f}, queue room {:.2f}, power ratio {:.3f}, margin {:.1f} %, host {:.0f} us/item",
      last_planned_rps_, last_keep_up_rps_, kappa_, queue_room_slo_share_, power_ratio_, 100.0 * margin_,
      1e6 * host_s_per_item_);
}

}  // namespace gpucap::control
