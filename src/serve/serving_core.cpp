#include "gpucap/serve/serving_core.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "gpucap/core/error.hpp"

namespace gpucap::serve {
namespace {

// The shortest burst the bucket holds: the bursts a Poisson stream brings at the rate.
constexpr double kMinBurstSeconds = 0.05;

}  // namespace

TokenBucket::TokenBucket(double rate_per_s, double burst_s)
    : rate_(rate_per_s), burst_s_(burst_s), burst_(burst_of(rate_per_s)), tokens_(burst_) {
  if (!(rate_per_s >= 0.0)) throw usage_error(fmt::format("admit rate {:g}/s must be >= 0", rate_per_s));
  if (!(burst_s > 0.0 && std::isfinite(burst_s))) throw usage_error(fmt::format("a burst of {:g} s must be positive", burst_s));
}

double TokenBucket::burst_of(double rate_per_s) const {
  return std::isinf(rate_per_s) ? 0.0 : std::max(1.0, rate_per_s * burst_s_);
}

void TokenBucket::refill(double now_s) {
  if (now_s > last_s_) {
    tokens_ = std::min(burst_, tokens_ + (now_s - last_s_) * rate_);
    last_s_ = now_s;
  }
}

void TokenBucket::set_rate(double rate_per_s, double now_s) {
  if (!(rate_per_s >= 0.0)) throw usage_error(fmt::format("admit rate {:g}/s must be >= 0", rate_per_s));
  if (!std::isinf(rate_)) refill(now_s);
  last_s_ = std::max(last_s_, now_s);
  const bool was_unlimited = std::isinf(rate_);
  rate_ = rate_per_s;
  burst_ = burst_of(rate_per_s);
  tokens_ = was_unlimited ? burst_ : std::min(tokens_, burst_);
}

bool TokenBucket::take(double now_s) {
  if (std::isinf(rate_)) return true;
  refill(now_s);
  if (tokens_ < 1.0) return false;
  tokens_ -= 1.0;
  return true;
}

double TokenBucket::wait_s(double now_s) const {
  if (std::isinf(rate_)) return 0.0;
  const double tokens = std::min(burst_, tokens_ + std::max(0.0, now_s - last_s_) * rate_);
  if (tokens >= 1.0) return 0.0;
  return rate_ > 0.0 ? (1.0 - tokens) / rate_ : std::numeric_limits<double>::infinity();
}

ServingCore::ServingCore(BatcherConfig config, LatencyStatsConfig stats, const control::ServingKnobs& knobs,
                         double start_s)
    : config_(std::move(config)),
      queue_(config_),
      stats_(stats),
      admit_(control::kAdmitEverything, std::max(kMinBurstSeconds, 0.5 * stats.slo_s)) {
  set_knobs(knobs, start_s);
}

void ServingCore::count(std::uint64_t WindowCounts::*field, std::uint64_t n) {
  window_.*field += n;
  totals_.*field += n;
}

void ServingCore::set_knobs(const control::ServingKnobs& knobs, double now_s) {
  control::ServingKnobs clamped = knobs;
  clamped.max_batch_size = std::clamp(knobs.max_batch_size, 1, config_.max_batch_size);
  batcher_knobs_ = effective_knobs(BatcherKnobs{clamped.max_batch_size, clamped.max_queue_delay_s}, config_);
  admit_.set_rate(clamped.admit_rate_rps, now_s);
  knobs_ = clamped;
}

bool ServingCore::queue_over_bound(int items, int priority) const {
  // Nothing it would wait behind, and nothing held: one request is let in whatever the bound (a
  // bound below its size).
  const bool empty = queue_.items_up_to(priority) == 0 && held_places_ == 0;
  return static_cast<double>(queue_.items_up_to(priority) + held_places_ + items) > knobs_.max_queued_items && !empty;
}

Admission ServingCore::shed(bool queue_full, double now_s) {
  count(&WindowCounts::shed);
  const double wait = queue_full ? stats_.config().slo_s : admit_.wait_s(now_s);
  return {AdmissionResult::shed, wait,
          queue_full ? fmt::format("the server is shedding load: its queue holds what it can serve within the SLO "
                                   "under the power cap ({:.0f} items)",
                                   knobs_.max_queued_items)
                     : fmt::format("the server is shedding load: demand is above what it serves within its SLO under "
                                   "the power cap ({:.0f} requests/s admitted)",
                                   admit_.rate_per_s())};
}

std::optional<Admission> ServingCore::shed_on_arrival(double now_s) {
  const bool queue_full = queue_over_bound(1, 1);
  if (!queue_full && admit_.wait_s(now_s) <= 0.0) return std::nullopt;
  count(&WindowCounts::arrivals);
  stats_.record_arrival(now_s);
  return shed(queue_full, now_s);
}

std::optional<Admission> ServingCore::shed_or_hold(double now_s) {
  if (auto shed = shed_on_arrival(now_s)) return shed;
  (void)admit_.take(now_s);  // there is a token: shed_on_arrival found one
  ++held_places_;
  return std::nullopt;
}

bool ServingCore::may_hold() const {
  // In double: the bound is infinite when everything is admitted.
  return static_cast<double>(held_places_) < std::max(1.0, std::floor(knobs_.max_queued_items / 2.0));
}

void ServingCore::give_back_place() { held_places_ = std::max(0, held_places_ - 1); }

Admission ServingCore::admit(const PendingRequest& request, double now_s, bool held) {
  // The room held apart for it goes back to the count it is checked against below; the token it
  // took stays spent.
  if (held) give_back_place();
  count(&WindowCounts::arrivals);
  stats_.record_arrival(now_s);
  if (request.items > config_.max_batch_size) {
    // A bad request is the client's to fix (400), whatever the load: not shed.
    count(&WindowCounts::refused);
    return {AdmissionResult::too_large, 0.0,
            fmt::format("the request's batch of {} is above the model's max_batch_size {}", request.items,
                        config_.max_batch_size)};
  }
  // A held place was counted against the bound when the others were let in: a request of one item
  // of the highest level is in (even if the bound was lowered since); a larger one, or one of a
  // lower level (its arrival was checked against the highest level's items only), is checked as
  // any other.
  const bool checked_on_arrival = request.items == 1 && queue_.items_up_to(request.priority) == queue_.items_up_to(1);
  const bool queue_full = (!held || !checked_on_arrival) && queue_over_bound(request.items, request.priority);
  if (queue_full || (!held && !admit_.take(now_s))) return shed(queue_full, now_s);
  const auto outcome = queue_.enqueue(request, now_s);
  if (outcome == EnqueueOutcome::accepted) {
    count(&WindowCounts::admitted);
    return {};
  }
  count(&WindowCounts::refused);
  switch (outcome) {
    case EnqueueOutcome::queue_full: return {AdmissionResult::queue_full, 0.0, describe(outcome)};
    case EnqueueOutcome::too_large:
      return {AdmissionResult::too_large, 0.0,
              fmt::format("the request's batch of {} is above the model's max_batch_size {}", request.items,
                          config_.max_batch_size)};
    case EnqueueOutcome::bad_priority:
      return {AdmissionResult::bad_priority, 0.0,
              fmt::format("priority {} is negative (0, or above the model's {} levels, is the default level)",
                          request.priority, std::max(1, config_.priority_levels))};
    default: return {AdmissionResult::invalid, 0.0, describe(outcome)};
  }
}

CoreStep ServingCore::step(double now_s) {
  CoreStep out;
  for (const auto id : queue_.expire(now_s).rejected_ids) {
    out.timed_out.push_back(id);
    stats_.record(now_s, 0.0, false);
    count(&WindowCounts::failed);
  }
  const auto decision = decide(queue_, batcher_knobs_, config_, now_s);
  if (decision.launch()) {
    Launch launch;
    launch.requests = queue_.pop_batch(decision.requests);
    launch.items = decision.items;
    launch.reason = decision.reason;
    out.launch = std::move(launch);
  } else if (decision.wait()) {
    out.wake_s = decision.wake_s;
  }
  return out;
}

bool ServingCore::withdraw(std::uint64_t id, double now_s) {
  if (!queue_.remove(id)) return false;
  stats_.record(now_s, 0.0, false);
  count(&WindowCounts::failed);
  return true;
}

void ServingCore::finished(const Launch& launch, double start_s, double end_s, bool ok) {
  count(&WindowCounts::batches);
  window_.busy_s += end_s - start_s;
  totals_.busy_s += end_s - start_s;
  for (const auto& r : launch.requests) {
    const double latency_s = std::max(0.0, end_s - r.arrival_s);
    stats_.record(end_s, latency_s, ok);
    if (!ok) {
      count(&WindowCounts::failed);
      continue;
    }
    count(&WindowCounts::answered);
    count(&WindowCounts::items, static_cast<std::uint64_t>(r.items));
    if (latency_s <= stats_.config().slo_s) count(&WindowCounts::good);
  }
}

WindowCounts ServingCore::take_window() {
  const auto out = window_;
  window_ = WindowCounts{};
  return out;
}

}  // namespace gpucap::serve
