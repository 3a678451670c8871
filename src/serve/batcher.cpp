#include "gpucap/serve/batcher.hpp"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>

#include <fmt/format.h>

#include "gpucap/core/error.hpp"
#include "gpucap/serve/request_queue.hpp"

namespace gpucap::serve {

namespace {

void validate_policy(const QueuePolicy& policy, const std::string& field) {
  if (!std::isfinite(policy.default_timeout_s) || policy.default_timeout_s < 0.0) {
    throw usage_error(fmt::format("{}.default_timeout_s must be a finite number of seconds >= 0, not {}", field,
                                  policy.default_timeout_s));
  }
}

void validate_priorities(const BatcherConfig& config) {
  if (config.priority_levels < 0) {
    throw usage_error(fmt::format("priority_levels must be >= 0, not {}", config.priority_levels));
  }
  const int levels = level_count(config);
  // Triton: with priority levels, the default level must be one of them; with none it is unused.
  const int lowest_default = config.priority_levels >= 2 ? 1 : 0;
  if (config.default_priority_level < lowest_default || config.default_priority_level > levels) {
    throw usage_error(fmt::format("default_priority_level must be in {}..{}, not {}", lowest_default, levels,
                                  config.default_priority_level));
  }
  for (const auto& [level, policy] : config.priority_queue_policy) {
    if (level < 1 || level > levels) {
      throw usage_error(fmt::format("priority_queue_policy has level {}, outside the priority levels 1..{}", level,
                                    levels));
    }
    validate_policy(policy, fmt::format("priority_queue_policy[{}]", level));
  }
}

// The longest prefix of the queue that fits the batch cap, and what decide() needs to know of it.
struct Candidate {
  std::size_t requests = 0;
  int items = 0;
  bool oversized = false;  // its only request alone exceeds the cap
  bool saturated = false;  // reaches the cap, or the next request would not fit
  double oldest_arrival_s = 0.0;
  std::optional<double> earliest_deadline_s;
  std::size_t preferred_requests = 0;  // the largest prefix of exactly a preferred size
  int preferred_items = 0;
};

bool is_preferred(int items, const std::vector<int>& preferred_sizes) {
  return std::find(preferred_sizes.begin(), preferred_sizes.end(), items) != preferred_sizes.end();
}

void add_to_candidate(Candidate& candidate, const QueuedRequest& queued) {
  if (candidate.requests == 0 || queued.request.arrival_s < candidate.oldest_arrival_s) {
    candidate.oldest_arrival_s = queued.request.arrival_s;
  }
  if (queued.deadline_s && (!candidate.earliest_deadline_s || *queued.deadline_s < *candidate.earliest_deadline_s)) {
    candidate.earliest_deadline_s = queued.deadline_s;
  }
  ++candidate.requests;
  candidate.items += queued.request.items;
}

Candidate scan_candidate(const RequestQueue& queue, int cap, const std::vector<int>& preferred_sizes) {
  Candidate candidate;
  queue.visit_in_order([&](const QueuedRequest& queued) {
    const int items = queued.request.items;
    if (candidate.requests == 0 && items > cap) {
      add_to_candidate(candidate, queued);
      candidate.oversized = true;
      return false;
    }
    if (candidate.items + items > cap) {  // requests never split: the batch stops here
      candidate.saturated = true;
      return false;
    }
    add_to_candidate(candidate, queued);
    // Prefix sums only grow, so the last match is the largest preferred size that can be formed.
    if (is_preferred(candidate.items, preferred_sizes)) {
      candidate.preferred_requests = candidate.requests;
      candidate.preferred_items = candidate.items;
    }
    if (candidate.items == cap) {
      candidate.saturated = true;
      return false;
    }
    return true;
  });
  return candidate;
}

BatchDecision launch(std::size_t requests, int items, LaunchReason reason) {
  BatchDecision decision;
  decision.kind = BatchDecision::Kind::launch;
  decision.requests = requests;
  decision.items = items;
  decision.reason = reason;
  return decision;
}

BatchDecision wait_until(double wake_s) {
  BatchDecision decision;
  decision.kind = BatchDecision::Kind::wait;
  decision.wake_s = wake_s;
  return decision;
}

}  // namespace

int level_count(const BatcherConfig& config) { return std::max(1, config.priority_levels); }

void validate(const BatcherConfig& config) {
  if (config.max_batch_size < 1) {
    throw usage_error(fmt::format("max_batch_size must be >= 1, not {}", config.max_batch_size));
  }
  for (const int size : config.preferred_batch_sizes) {
    if (size < 1 || size > config.max_batch_size) {
      throw usage_error(fmt::format("preferred_batch_sizes has {}, outside 1..max_batch_size ({})", size,
                                    config.max_batch_size));
    }
  }
  if (!std::isfinite(config.max_queue_delay_s) || config.max_queue_delay_s < 0.0) {
    throw usage_error(
        fmt::format("max_queue_delay_s must be a finite number of seconds >= 0, not {}", config.max_queue_delay_s));
  }
  validate_priorities(config);
  validate_policy(config.default_queue_policy, "default_queue_policy");
}

BatcherKnobs initial_knobs(const BatcherConfig& config) {
  return BatcherKnobs{config.max_batch_size, config.max_queue_delay_s};
}

BatcherKnobs effective_knobs(const BatcherKnobs& knobs, const BatcherConfig& config) {
  if (knobs.max_batch_size <= 0) {
    throw usage_error(fmt::format("knob max_batch_size must be >= 1, not {}", knobs.max_batch_size));
  }
  if (!std::isfinite(knobs.max_queue_delay_s) || knobs.max_queue_delay_s < 0.0) {
    throw usage_error(fmt::format("knob max_queue_delay_s must be a finite number of seconds >= 0, not {}",
                                  knobs.max_queue_delay_s));
  }
  return BatcherKnobs{std::min(knobs.max_batch_size, config.max_batch_size), knobs.max_queue_delay_s};
}

BatchDecision decide(const RequestQueue& queue, const BatcherKnobs& knobs, const BatcherConfig& config,
                     double now_s) {
  if (!std::isfinite(now_s)) throw usage_error(fmt::format("decide: now_s must be finite, not {}", now_s));
  const BatcherKnobs effective = effective_knobs(knobs, config);
  if (queue.empty()) return BatchDecision{};

  const Candidate candidate = scan_candidate(queue, effective.max_batch_size, config.preferred_batch_sizes);
  if (candidate.oversized) return launch(1, candidate.items, LaunchReason::oversized);

  const double delay_s = effective.max_queue_delay_s;
  // Compared as `now >= arrival + delay`, the very sum returned as wake_s below, so that a
  // caller woken at wake_s always launches (a difference `now - arrival` can round below delay).
  const double delay_end_s = candidate.oldest_arrival_s + delay_s;
  if (delay_s > 0.0 && now_s >= delay_end_s) {
    return launch(candidate.requests, candidate.items, LaunchReason::delay_expired);
  }
  if (candidate.preferred_requests > 0) {
    return launch(candidate.preferred_requests, candidate.preferred_items, LaunchReason::preferred);
  }
  if (candidate.saturated) return launch(candidate.requests, candidate.items, LaunchReason::full);
  if (delay_s == 0.0) return launch(candidate.requests, candidate.items, LaunchReason::no_delay);

  // A timeout changes the queue (REJECT removes, DELAY reorders), so wake for it too, as Triton
  // does; one already passed means the caller skipped expire(): wake now.
  double wake_s = delay_end_s;
  if (candidate.earliest_deadline_s) wake_s = std::min(wake_s, std::max(now_s, *candidate.earliest_deadline_s));
  return wait_until(wake_s);
}

const char* to_string(LaunchReason reason) noexcept {
  switch (reason) {
    case LaunchReason::oversized: return "oversized";
    case LaunchReason::delay_expired: return "delay_expired";
    case LaunchReason::preferred: return "preferred";
    case LaunchReason::full: return "full";
    case LaunchReason::no_delay: return "no_delay";
  }
  return "unknown";
}

}  // namespace gpucap::serve
