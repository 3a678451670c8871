#pragma once
// The serving queue: one FIFO queue per priority level with Triton's queue policies (maximum
// size, timeout with REJECT or DELAY, request-level timeout override). It holds only what the
// batcher decides on (id, items, times); the server keeps request payloads keyed by id.
//
// Semantics follow Triton's PriorityQueue / PolicyQueue (triton-inference-server/core,
// scheduler_utils) as documented in batcher.md and model_config.proto:
//   - Order: level 1 before level 2 ... (a higher priority bypasses everything below it); FIFO
//     inside a level; inside a level, requests whose timeout expired under the DELAY action come
//     after every request that has not timed out, in the order they timed out.
//   - max_queue_size counts every request of the level, timed-out DELAY ones included; a full
//     level refuses the request ("Exceeds maximum queue size", UNAVAILABLE in Triton), so the
//     queue's memory is bounded by the sum of the levels' sizes.
//   - A request's queue timeout starts when it is enqueued (now_s), as in Triton. Its length is the
//     level's default_timeout_s, or the request's own timeout_s when the policy allows overrides
//     and the request's value is shorter. A timeout expires once now_s >= its deadline.
//   - Nothing expires by itself: expire(now_s) applies the timeouts; call it before decide().
// Pure: no clock, no threads, no I/O; times are seconds on the caller's clock.

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <vector>

#include "gpucap/serve/batcher.hpp"

namespace gpucap::serve {

struct PendingRequest {
  std::uint64_t id = 0;  // the caller's; not checked for uniqueness
  int items = 1;         // the request's own batch dimension, >= 1
  double arrival_s = 0.0;  // when the server received it; the queue delay is measured from here
  int priority = 0;        // 1..priority_levels; 0 or above them: the config's default level (as in Triton)
  std::optional<double> timeout_s;  // the request's "timeout" parameter; 0 = none, as in Triton
};

enum class EnqueueOutcome {
  accepted,
  queue_full,    // the level holds max_queue_size requests (Triton: UNAVAILABLE)
  bad_priority,  // priority < 0 (Triton's is unsigned: no such request reaches its queue)
  too_large,     // items > the config's max_batch_size (Triton: INVALID_ARG)
  invalid,       // items < 1, a non-finite arrival_s or now_s, a negative or NaN timeout_s
};

[[nodiscard]] const char* describe(EnqueueOutcome outcome) noexcept;

// One request in the queue, as decide() sees it.
struct QueuedRequest {
  PendingRequest request;
  std::optional<double> deadline_s;  // when its timeout expires; none once delayed, or if no timeout
};

// What one expire() call did.
struct ExpiredRequests {
  std::vector<std::uint64_t> rejected_ids;  // removed (REJECT): answer them with an error
  std::vector<std::uint64_t> delayed_ids;   // moved behind their level (DELAY): still queued
};

class RequestQueue {
 public:
  // Validates the config (Error(usage)) and keeps what the queue needs of it.
  explicit RequestQueue(const BatcherConfig& config);

  [[nodiscard]] EnqueueOutcome enqueue(const PendingRequest& request, double now_s);

  // Applies the queue timeouts that expired at or before now_s (see the header comment).
  ExpiredRequests expire(double now_s);

  // Removes and returns the first n_requests in queue order. Error(internal) if fewer are queued.
  std::vector<PendingRequest> pop_batch(std::size_t n_requests);
  // Takes the queued request `id` out (its caller gave up on it); false if it is not queued.
  bool remove(std::uint64_t id);

  [[nodiscard]] std::size_t size() const { return size_; }
  [[nodiscard]] bool empty() const { return size_ == 0; }
  [[nodiscard]] long long total_items() const { return total_items_; }
  [[nodiscard]] std::size_t size_at_level(int level) const;  // level 1..level_count()
  // Items queued at the levels a request of `priority` would wait behind or beside (1 up to its
  // own level; every level for a priority that is none).
  [[nodiscard]] long long items_up_to(int priority) const;
  [[nodiscard]] int level_count() const { return static_cast<int>(levels_.size()); }
  [[nodiscard]] std::size_t delayed_count() const;  // timed out under DELAY, still queued

  // Earliest arrival_s over the queue; nullopt when empty. O(size).
  [[nodiscard]] std::optional<double> oldest_arrival_s() const;
  // Earliest timeout deadline still to expire; nullopt when none. O(size).
  [[nodiscard]] std::optional<double> next_deadline_s() const;
  // Ids in queue order (for logs and tests).
  [[nodiscard]] std::vector<std::uint64_t> ids_in_order() const;

  // Calls visit(const QueuedRequest&) in queue order until it returns false.
  template <typename Visitor>
  void visit_in_order(Visitor&& visit) const {
    for (const Level& level : levels_) {
      for (const QueuedRequest& queued : level.waiting) {
        if (!visit(queued)) return;
      }
      for (const QueuedRequest& queued : level.delayed) {
        if (!visit(queued)) return;
      }
    }
  }

 private:
  struct Level {
    QueuePolicy policy;
    std::deque<QueuedRequest> waiting;  // not timed out, FIFO
    std::deque<QueuedRequest> delayed;  // timed out under DELAY, in the order they timed out
    // Waiting requests with a deadline: with none (no timeout configured, the usual case) expire()
    // and next_deadline_s() skip the level instead of scanning a queue that may be long.
    std::size_t waiting_with_deadline = 0;
    long long items = 0;
    [[nodiscard]] std::size_t size() const { return waiting.size() + delayed.size(); }
  };

  [[nodiscard]] std::optional<std::size_t> level_index(int priority) const;
  void expire_level(Level& level, double now_s, ExpiredRequests& expired);
  PendingRequest pop_front();
  void count_out(Level& level, const PendingRequest& request);

  int max_batch_size_;
  std::size_t default_level_index_;
  std::vector<Level> levels_;  // index 0 = level 1, the highest priority
  std::size_t size_ = 0;
  long long total_items_ = 0;
};

}  // namespace gpucap::serve
