#pragma once
// The serving core: what happens to requests between their arrival and the GPU — admission (the
// controller's admit rate, enforced by a token bucket; over it a request is shed at once with
// 429 and a Retry-After), the priority queue and its policy, the dynamic batcher's decision under
// the controller's knobs, and the SLO accounting of every answer. No clock and no threads: times
// come in as arguments, the caller serialises the calls (the HTTP server holds a mutex; the
// virtual-time simulation is single-threaded), and request payloads stay with the caller, keyed
// by id.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gpucap/control/serving.hpp"
#include "gpucap/serve/batcher.hpp"
#include "gpucap/serve/latency_stats.hpp"
#include "gpucap/serve/request_queue.hpp"

namespace gpucap::serve {

// Requests per second with a burst: a request is admitted when a token is there; tokens come at
// the rate, up to `burst_s` seconds of them (at least one). An infinite rate admits everything.
class TokenBucket {
 public:
  explicit TokenBucket(double rate_per_s = control::kAdmitEverything, double burst_s = 0.05);
  // Changes the rate from now_s on (the tokens earned so far are kept, up to the new burst).
  void set_rate(double rate_per_s, double now_s);
  // Takes a token if one is there at now_s (non-decreasing times).
  [[nodiscard]] bool take(double now_s);
  // Seconds from now_s until a token will be there (0 if one is).
  [[nodiscard]] double wait_s(double now_s) const;
  [[nodiscard]] double rate_per_s() const { return rate_; }

 private:
  void refill(double now_s);
  [[nodiscard]] double burst_of(double rate_per_s) const;
  double rate_;
  double burst_s_;
  double burst_;
  double tokens_;
  double last_s_ = 0.0;
};

enum class AdmissionResult { accepted, shed, queue_full, too_large, bad_priority, invalid };

struct Admission {
  AdmissionResult result = AdmissionResult::accepted;
  double retry_after_s = 0.0;  // shed: when to try again
  std::string message;         // not accepted: why, for the client's error body

  [[nodiscard]] bool accepted() const { return result == AdmissionResult::accepted; }
};

// A batch the batcher launched: its requests in queue order and their items.
struct Launch {
  std::vector<PendingRequest> requests;
  int items = 0;
  LaunchReason reason = LaunchReason::full;
};

struct CoreStep {
  std::optional<Launch> launch;             // run this batch now
  std::vector<std::uint64_t> timed_out;     // answer these with an error: their queue timeout expired
  std::optional<double> wake_s;             // nothing to launch before then (without an arrival)
  // Neither a launch nor a wake time: the queue is empty.
};

// Counts since the last take_window().
struct WindowCounts {
  std::uint64_t arrivals = 0;   // offered: admitted or refused
  std::uint64_t admitted = 0;
  std::uint64_t shed = 0;       // refused by the admit rate (429)
  std::uint64_t refused = 0;    // refused by the queue (full, too large, bad priority, invalid)
  std::uint64_t answered = 0;   // answered successfully
  std::uint64_t good = 0;       // answered within the SLO
  std::uint64_t failed = 0;     // answered with an error after admission (timeout, engine error)
  std::uint64_t batches = 0;
  std::uint64_t items = 0;      // items of the answered requests
  double busy_s = 0.0;          // time batches ran
};

class ServingCore {
 public:
  // Validates the batcher config and the stats config (Error(usage)). The admission bucket holds
  // half the SLO's worth of requests at the admit rate: a burst the queue serves within the SLO.
  ServingCore(BatcherConfig config, LatencyStatsConfig stats, const control::ServingKnobs& knobs, double start_s = 0.0);

  // A request arriving at now_s (its arrival_s). Not accepted: nothing of it is kept. held: a
  // place was held for it (shed_or_hold): it is admitted on that place, its token already taken.
  Admission admit(const PendingRequest& request, double now_s, bool held = false);
  // Whether a request that arrives at now_s is shed whatever its size and priority: the admit rate
  // has no token for it, or the queue is over its bound even for one item of the highest level. A
  // server asks this once a request's headers are in, before it reads the body (a 429 need not
  // wait for megabytes of images). Shed: it is counted as an arrival and shed, as admit() counts
  // it. Not shed: nothing is counted and no token is taken; admit() follows with the parsed
  // request.
  std::optional<Admission> shed_on_arrival(double now_s);
  // shed_on_arrival, deciding for good: not shed, the request is let through now. Its token is
  // taken and one item of the queue's room is held for it while its body arrives, so that others
  // arriving meanwhile cannot take it: admit(..., held = true) then admits it on that place, or
  // give_back_place() returns the room if its body never comes.
  std::optional<Admission> shed_or_hold(double now_s);
  void give_back_place();
  // Places held and not yet admitted or given back.
  [[nodiscard]] int held_places() const { return held_places_; }
  // Whether another place may be held: at most half the queue's bound (at least one) is held for
  // bodies still coming, so that the other half stays for requests that arrive whole.
  [[nodiscard]] bool may_hold() const;
  // Applies expired queue timeouts, then the batcher's decision at now_s.
  CoreStep step(double now_s);
  // Takes a queued request out, counted as failed (its caller answered it without a batch); false
  // if it is not queued.
  bool withdraw(std::uint64_t id, double now_s);
  // A launched batch ran from start_s to end_s; ok = false: it failed (an engine error), and its
  // requests are answered with an error.
  void finished(const Launch& launch, double start_s, double end_s, bool ok);
  // The controller's knobs from now_s on (the admit rate and the batcher's cap and delay).
  void set_knobs(const control::ServingKnobs& knobs, double now_s);

  [[nodiscard]] const control::ServingKnobs& knobs() const { return knobs_; }
  [[nodiscard]] const BatcherConfig& config() const { return config_; }
  [[nodiscard]] LatencySummary slo(double now_s) const { return stats_.summary(now_s); }
  [[nodiscard]] std::size_t queued_requests() const { return queue_.size(); }
  [[nodiscard]] long long queued_items() const { return queue_.total_items(); }
  // The counts since the last call, and a fresh start for the next window.
  WindowCounts take_window();
  // Every count since the start (for reports).
  [[nodiscard]] const WindowCounts& totals() const { return totals_; }

 private:
  void count(std::uint64_t WindowCounts::*field, std::uint64_t n = 1);
  // Whether `items` more of a request of `priority` would pass the queue's bound: it counts the
  // items the request would wait behind or beside (its own level and those above it, as Triton
  // bounds each level's queue: a high-priority request is not shed behind a low one's backlog) and
  // the places held.
  [[nodiscard]] bool queue_over_bound(int items, int priority) const;
  // Counts a shed arrival and says why (the queue's bound, or the admit rate).
  Admission shed(bool queue_full, double now_s);

  BatcherConfig config_;
  RequestQueue queue_;
  LatencyStats stats_;
  control::ServingKnobs knobs_;
  BatcherKnobs batcher_knobs_;
  TokenBucket admit_;
  WindowCounts window_;
  WindowCounts totals_;
  int held_places_ = 0;  // one item each, counted against the queue's bound
};

}  // namespace gpucap::serve
