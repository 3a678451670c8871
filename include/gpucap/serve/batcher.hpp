#pragma once
// The dynamic batcher of `gpucap serve`: its configuration (Triton's names and meanings) and the
// batching decision, a pure function of the queue, the run-time knobs and the time.
//
// Source of the rules: Triton's batcher documentation (server docs/user_guide/batcher.md, the
// ModelDynamicBatching / ModelQueuePolicy messages of model_config.proto) and the behaviour of its
// dynamic batch scheduler. The one difference from Triton on purpose: Triton's batch size and
// queue delay are static per model config; here a controller rewrites them at run time
// (BatcherKnobs) under the power cap and the p99 latency SLO. The config's max_batch_size stays
// the hard bound the queue admits requests against.
//
// decide() never sleeps and reads no clock: it answers "launch these requests now", "nothing can
// launch before wake_s" or "idle", and the caller (the serving loop, or the simulator in virtual
// time) arranges to call it again at wake_s or at the next arrival, whichever comes first.

#include <cstddef>
#include <map>
#include <vector>

namespace gpucap::serve {

class RequestQueue;  // request_queue.hpp

// What happens to a request whose queue timeout expires (Triton's ModelQueuePolicy.TimeoutAction).
enum class TimeoutAction {
  reject,  // removed from the queue and answered with an error (Triton: "Request timeout expired")
  delay,   // kept, but batched only after every request of its level that has not timed out
};

// Triton's ModelQueuePolicy, with microseconds turned into seconds.
struct QueuePolicy {
  std::size_t max_queue_size = 0;  // per priority level; 0 = unbounded
  TimeoutAction timeout_action = TimeoutAction::reject;
  double default_timeout_s = 0.0;  // 0 = requests never time out (unless they ask, see below)
  bool allow_timeout_override = false;  // a request may SHORTEN its timeout, never lengthen it
};

// Triton's `max_batch_size` plus its `dynamic_batching { ... }` block.
struct BatcherConfig {
  int max_batch_size = 1;                  // the model's bound; requests with more items are refused
  std::vector<int> preferred_batch_sizes;  // each in 1..max_batch_size; order and repeats ignored
  double max_queue_delay_s = 0.0;          // max_queue_delay_microseconds / 1e6; 0 = never wait
  int priority_levels = 0;                 // 0 or 1: one level; N >= 2: levels 1..N, 1 = highest
  int default_priority_level = 0;          // the level of a request with priority 0; 1..N when N >= 2
  QueuePolicy default_queue_policy;
  std::map<int, QueuePolicy> priority_queue_policy;  // level -> policy; other levels get the default
};

// Throws gpucap::Error(usage) naming the first bad field.
void validate(const BatcherConfig& config);

// Number of FIFO queues the config asks for (priority_levels 0 and 1 both mean one).
[[nodiscard]] int level_count(const BatcherConfig& config);

// The values a controller rewrites at run time.
struct BatcherKnobs {
  int max_batch_size = 1;          // the batch cap in items; clamped to the config's max_batch_size
  double max_queue_delay_s = 0.0;  // the queue delay; 0 = launch whatever is there at once
};

// The config's own values, the knobs a server starts with.
[[nodiscard]] BatcherKnobs initial_knobs(const BatcherConfig& config);

// The knobs decide() uses: max_batch_size clamped to config.max_batch_size. Throws Error(usage)
// for a knob max_batch_size <= 0 or a negative or non-finite delay: a controller that asks for
// those has a bug, and silently launching batches of 1 would hide it.
[[nodiscard]] BatcherKnobs effective_knobs(const BatcherKnobs& knobs, const BatcherConfig& config);

// Why a batch launches (for metrics, traces and tests).
enum class LaunchReason {
  oversized,      // the first request alone has more items than the knob batch cap (sent alone)
  delay_expired,  // the oldest request in the candidate batch waited max_queue_delay_s
  preferred,      // a prefix of the queue adds up exactly to a preferred batch size
  full,           // the candidate batch cannot grow: the cap is reached or the next request does not fit
  no_delay,       // max_queue_delay_s is 0: Triton sends what it has at once
};

struct BatchDecision {
  enum class Kind { idle, launch, wait };
  Kind kind = Kind::idle;
  // launch: pop the first `requests` requests (RequestQueue::pop_batch); `items` is their total.
  std::size_t requests = 0;
  int items = 0;
  LaunchReason reason = LaunchReason::full;
  // wait: the earliest time the decision can change without a new arrival or a knob change:
  // the oldest candidate's arrival + delay, or an earlier queue timeout of a candidate.
  double wake_s = 0.0;

  [[nodiscard]] bool launch() const { return kind == Kind::launch; }
  [[nodiscard]] bool wait() const { return kind == Kind::wait; }
  [[nodiscard]] bool idle() const { return kind == Kind::idle; }
};

// The batching decision, Triton's rules with run-time knobs. Requests are taken in queue order
// (priority level 1 first, FIFO inside a level, timed-out DELAY requests last in their level) and
// never split. The candidate batch is the longest prefix whose items fit the knob batch cap.
//   1. The first request alone exceeds the knob cap: launch it alone at once (it fits the config
//      max, which the queue enforced at enqueue, so the engine can run it; holding it back
//      forever would be worse than one batch over the controller's cap).
//   2. The candidate's oldest request has waited max_queue_delay_s (> 0): launch the candidate.
//   3. Some prefix adds up exactly to a preferred batch size (<= the knob cap): launch the
//      largest such prefix.
//   4. The candidate cannot grow (it reaches the cap, or the next request would not fit):
//      launch it.
//   5. max_queue_delay_s is 0: launch the candidate.
//   6. Otherwise wait until min(oldest arrival + delay, earliest queue timeout of a candidate).
// Where the docs leave room, Triton's scheduler (dynamic_batch_scheduler.cc) settles it:
//   - 2 before 3: once the delay has expired Triton sends all it has (up to the cap), not a
//     preferred size; with delay 0 the delay never "expires", so a preferred size wins (rule 3).
//   - 3 before 4: batcher.md says a preferred size is sent if one can be formed, otherwise the
//     largest batch <= max; so with preferred {4}, cap 8 and eight 1-item requests, 4 launch.
//   - Not copied: Triton also sends at once when the queue holds more items than the largest
//     preferred size even if no prefix matches one exactly (preferred {4}, requests of 3 and 3
//     items: Triton sends 3); here that pair waits for the delay or for a full batch.
//   - Preferred sizes above the knob cap cannot be formed and are ignored while the cap is low.
// Cost: it looks at the candidate's requests and one more, however long the queue is.
// Precondition: queue.expire(now_s) was called first; a timeout already passed gives a wait with
// wake_s == now_s, which means "expire, then decide again".
[[nodiscard]] BatchDecision decide(const RequestQueue& queue, const BatcherKnobs& knobs, const BatcherConfig& config,
                                   double now_s);

[[nodiscard]] const char* to_string(LaunchReason reason) noexcept;

}  // namespace gpucap::serve
