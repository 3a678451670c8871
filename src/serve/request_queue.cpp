#include "gpucap/serve/request_queue.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "gpucap/core/error.hpp"

namespace gpucap::serve {

namespace {

bool request_is_well_formed(const PendingRequest& request, double now_s) {
  if (request.items < 1) return false;
  if (!std::isfinite(request.arrival_s) || !std::isfinite(now_s)) return false;
  if (request.timeout_s && (std::isnan(*request.timeout_s) || *request.timeout_s < 0.0)) return false;
  return true;
}

// The timeout length in seconds, or nullopt for none. As in Triton's PolicyQueue::Enqueue an
// override counts only when allowed and shorter than the default; unlike Triton, a default of 0
// ("no timeout") counts as infinitely long, so an allowed override can still set one - Triton's
// `override < default` test would ignore every override there.
std::optional<double> timeout_length_s(const PendingRequest& request, const QueuePolicy& policy) {
  std::optional<double> length_s;
  if (policy.default_timeout_s > 0.0) length_s = policy.default_timeout_s;
  if (policy.allow_timeout_override && request.timeout_s && *request.timeout_s > 0.0 &&
      (!length_s || *request.timeout_s < *length_s)) {
    length_s = *request.timeout_s;
  }
  return length_s;
}

bool expired(const QueuedRequest& queued, double now_s) {
  // >= (not Triton's >): a batcher told to wake at the deadline must see it expired then.
  return queued.deadline_s && now_s >= *queued.deadline_s;
}

}  // namespace

const char* describe(EnqueueOutcome outcome) noexcept {
  switch (outcome) {
    case EnqueueOutcome::accepted: return "accepted";
    case EnqueueOutcome::queue_full: return "Exceeds maximum queue size";
    case EnqueueOutcome::bad_priority: return "priority is not one of the model's priority levels";
    case EnqueueOutcome::too_large: return "batch size exceeds the model's max_batch_size";
    case EnqueueOutcome::invalid: return "request has no items, a bad time or a bad timeout";
  }
  return "unknown";
}

RequestQueue::RequestQueue(const BatcherConfig& config) : max_batch_size_(config.max_batch_size) {
  validate(config);
  const int levels = serve::level_count(config);
  levels_.resize(static_cast<std::size_t>(levels));
  for (int level = 1; level <= levels; ++level) {
    const auto found = config.priority_queue_policy.find(level);
    levels_[static_cast<std::size_t>(level - 1)].policy =
        found == config.priority_queue_policy.end() ? config.default_queue_policy : found->second;
  }
  // With one level the default level is that level whatever validate() let through (0 or 1).
  default_level_index_ = levels == 1 ? 0 : static_cast<std::size_t>(config.default_priority_level - 1);
}

std::optional<std::size_t> RequestQueue::level_index(int priority) const {
  // Triton: a priority of 0, or above the model's levels, is the default level.
  if (priority == 0 || priority > level_count()) return default_level_index_;
  if (priority < 0) return std::nullopt;
  return static_cast<std::size_t>(priority - 1);
}

EnqueueOutcome RequestQueue::enqueue(const PendingRequest& request, double now_s) {
  if (!request_is_well_formed(request, now_s)) return EnqueueOutcome::invalid;
  if (request.items > max_batch_size_) return EnqueueOutcome::too_large;
  const auto index = level_index(request.priority);
  if (!index) return EnqueueOutcome::bad_priority;
  Level& level = levels_[*index];
  if (level.policy.max_queue_size != 0 && level.size() >= level.policy.max_queue_size) {
    return EnqueueOutcome::queue_full;
  }
  std::optional<double> deadline_s;
  if (const auto length_s = timeout_length_s(request, level.policy)) deadline_s = now_s + *length_s;
  if (deadline_s) ++level.waiting_with_deadline;
  level.waiting.push_back(QueuedRequest{request, deadline_s});
  ++size_;
  total_items_ += request.items;
  level.items += request.items;
  return EnqueueOutcome::accepted;
}

void RequestQueue::count_out(Level& level, const PendingRequest& request) {
  --size_;
  total_items_ -= request.items;
  level.items -= request.items;
}

long long RequestQueue::items_up_to(int priority) const {
  const auto index = level_index(priority);
  if (!index) return total_items_;
  long long items = 0;
  for (std::size_t i = 0; i <= *index; ++i) items += levels_[i].items;
  return items;
}

void RequestQueue::expire_level(Level& level, double now_s, ExpiredRequests& out) {
  // Deadlines are not in FIFO order (overrides shorten some), so every waiting request is looked
  // at: O(level size), which max_queue_size bounds.
  std::deque<QueuedRequest> kept;
  for (QueuedRequest& queued : level.waiting) {
    if (!expired(queued, now_s)) {
      kept.push_back(std::move(queued));
      continue;
    }
    --level.waiting_with_deadline;
    if (level.policy.timeout_action == TimeoutAction::delay) {
      out.delayed_ids.push_back(queued.request.id);
      queued.deadline_s.reset();  // a delayed request has nothing left to expire
      level.delayed.push_back(std::move(queued));
    } else {
      out.rejected_ids.push_back(queued.request.id);
      count_out(level, queued.request);
    }
  }
  level.waiting.swap(kept);
}

ExpiredRequests RequestQueue::expire(double now_s) {
  ExpiredRequests out;
  for (Level& level : levels_) {
    if (level.waiting_with_deadline == 0) continue;
    const bool any = std::any_of(level.waiting.begin(), level.waiting.end(),
                                 [now_s](const QueuedRequest& queued) { return expired(queued, now_s); });
    if (any) expire_level(level, now_s, out);  // most calls expire nothing: no copying then
  }
  return out;
}

PendingRequest RequestQueue::pop_front() {
  for (Level& level : levels_) {
    std::deque<QueuedRequest>& from = level.waiting.empty() ? level.delayed : level.waiting;
    if (from.empty()) continue;
    PendingRequest request = from.front().request;
    if (from.front().deadline_s) --level.waiting_with_deadline;  // delayed ones have none
    from.pop_front();
    count_out(level, request);
    return request;
  }
  throw Error(ErrorCode::internal, "RequestQueue::pop_front on an empty queue");
}

bool RequestQueue::remove(std::uint64_t id) {
  for (Level& level : levels_) {
    for (auto* from : {&level.waiting, &level.delayed}) {
      const auto it = std::find_if(from->begin(), from->end(),
                                   [id](const QueuedRequest& queued) { return queued.request.id == id; });
      if (it == from->end()) continue;
      if (it->deadline_s) --level.waiting_with_deadline;  // delayed ones have none
      count_out(level, it->request);
      from->erase(it);
      return true;
    }
  }
  return false;
}

std::vector<PendingRequest> RequestQueue::pop_batch(std::size_t n_requests) {
  if (n_requests > size_) {
    throw Error(ErrorCode::internal, "RequestQueue::pop_batch asked for " + std::to_string(n_requests) +
                                         " requests, " + std::to_string(size_) + " queued");
  }
  std::vector<PendingRequest> batch;
  batch.reserve(n_requests);
  for (std::size_t i = 0; i < n_requests; ++i) batch.push_back(pop_front());
  return batch;
}

std::size_t RequestQueue::size_at_level(int level) const {
  if (level < 1 || level > level_count()) {
    throw usage_error("priority level " + std::to_string(level) + " is not in 1.." + std::to_string(level_count()));
  }
  return levels_[static_cast<std::size_t>(level - 1)].size();
}

std::size_t RequestQueue::delayed_count() const {
  std::size_t count = 0;
  for (const Level& level : levels_) count += level.delayed.size();
  return count;
}

std::optional<double> RequestQueue::oldest_arrival_s() const {
  std::optional<double> oldest_s;
  visit_in_order([&oldest_s](const QueuedRequest& queued) {
    if (!oldest_s || queued.request.arrival_s < *oldest_s) oldest_s = queued.request.arrival_s;
    return true;
  });
  return oldest_s;
}

std::optional<double> RequestQueue::next_deadline_s() const {
  std::optional<double> next_s;
  for (const Level& level : levels_) {
    if (level.waiting_with_deadline == 0) continue;  // delayed requests have no deadline
    for (const QueuedRequest& queued : level.waiting) {
      if (queued.deadline_s && (!next_s || *queued.deadline_s < *next_s)) next_s = queued.deadline_s;
    }
  }
  return next_s;
}

std::vector<std::uint64_t> RequestQueue::ids_in_order() const {
  std::vector<std::uint64_t> ids;
  ids.reserve(size_);
  visit_in_order([&ids](const QueuedRequest& queued) {
    ids.push_back(queued.request.id);
    return true;
  });
  return ids;
}

}  // namespace gpucap::serve
