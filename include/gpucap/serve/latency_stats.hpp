#pragma once
// SLO accounting for `gpucap serve`: latency percentiles, SLO attainment and the arrival rate over
// a sliding time window (the last window_s seconds), which the serving controller reads to set
// the batcher's knobs.
//
// Method, and why. Memory must stay bounded however high the request rate, and the answer must
// still mean "the last window_s seconds" (a ring of the last N samples stops meaning that once
// more than N requests arrive per window). So the window is a ring of `slots` time slots of
// window_s / slots seconds each, and every slot keeps a histogram of latencies with logarithmic
// buckets (each bucket's upper edge is (1 + kRelativeError) times the one below, from
// kSmallestLatencyS to kLargestLatencyS), plus exact counts, sum, minimum and maximum. Memory is
// slots x buckets counters, fixed at construction (storage_bytes()).
//   - Window: the slot holding now_s and the slots - 1 before it, so between window_s - slot and
//     window_s seconds of history; it slides one slot at a time.
//   - Percentiles: nearest rank (the ceil(q * n)-th smallest latency of the successful requests),
//     reported as the upper edge of the bucket holding it, clamped to the window's exact minimum
//     and maximum. So for latencies in [kSmallestLatencyS, kLargestLatencyS] the reported value v
//     satisfies  true <= v <= true * (1 + kRelativeError): never optimistic, at most 1 % high,
//     which is the safe side for an SLO controller. max_s and mean_s are exact.
//   - SLO attainment: exact, counted as requests are recorded: requests answered ok with
//     latency_s <= slo_s, over all answered requests. Failed requests (rejected, timed out,
//     engine errors) count as misses but are left out of the percentiles, whose meaning is the
//     latency of the answers users got (a fast rejection would otherwise lower the p99).
//   - Arrival rate: arrivals in the window divided by the time it covers, from the window's start
//     or the first arrival ever recorded, whichever is later (so it is right from the start).
// Samples older than the window when they are recorded are dropped; samples in slots after the
// one holding now_s are not counted by summary(now_s). summary() describes the present: once a
// later sample has reused a slot, what that slot held is gone, so asking about an earlier now_s
// does not bring it back. Pure: time comes in as arguments.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

namespace gpucap::serve {

struct LatencyStatsConfig {
  double window_s = 10.0;  // how much history the figures cover
  int slots = 10;          // the window slides in steps of window_s / slots
  double slo_s = 0.1;      // the latency SLO: ok and latency_s <= slo_s counts as attained
};

// Throws Error(usage) naming the first bad field.
void validate(const LatencyStatsConfig& config);

struct LatencySummary {
  double window_start_s = 0.0;  // the span the counts cover: [window_start_s, window_end_s]
  double window_end_s = 0.0;
  std::size_t ok = 0;          // answered successfully
  std::size_t failed = 0;      // answered with an error
  std::size_t within_slo = 0;  // ok and latency_s <= slo_s
  std::size_t arrivals = 0;
  // Latency of the successful requests; all 0 when there are none.
  double p50_s = 0.0;
  double p95_s = 0.0;
  double p99_s = 0.0;
  double max_s = 0.0;
  double mean_s = 0.0;
  double slo_attainment = 1.0;  // within_slo / answered; 1 when nothing was answered
  double arrival_rate_per_s = 0.0;

  [[nodiscard]] std::size_t answered() const { return ok + failed; }
};

class LatencyStats {
 public:
  static constexpr double kRelativeError = 0.01;
  static constexpr double kSmallestLatencyS = 1e-6;  // smaller latencies share the first bucket
  static constexpr double kLargestLatencyS = 1e4;    // larger ones share the last (max_s stays exact)

  // Validates the config (Error(usage)) and allocates all the memory the stats will ever use.
  explicit LatencyStats(const LatencyStatsConfig& config);

  // A request answered at completion_s after latency_s; ok = false for an error answer.
  // Error(usage) for a non-finite time or a negative or non-finite latency.
  void record(double completion_s, double latency_s, bool ok);
  void record_arrival(double now_s);

  [[nodiscard]] LatencySummary summary(double now_s) const;
  // One nearest-rank percentile, quantile in (0, 1]; 0 when no request succeeded in the window.
  [[nodiscard]] double percentile_s(double quantile, double now_s) const;

  [[nodiscard]] const LatencyStatsConfig& config() const { return config_; }
  [[nodiscard]] double slot_s() const { return slot_s_; }
  // Bytes held by the slots and histograms; constant after construction.
  [[nodiscard]] std::size_t storage_bytes() const;
  [[nodiscard]] static std::size_t bucket_count();

 private:
  struct Slot {
    std::int64_t epoch = 0;  // floor(time / slot_s) of the samples it holds
    std::uint64_t ok = 0;
    std::uint64_t failed = 0;
    std::uint64_t within_slo = 0;
    std::uint64_t arrivals = 0;
    double sum_s = 0.0;
    double min_s = 0.0;
    double max_s = 0.0;
  };
  struct Totals {
    std::uint64_t ok = 0;
    std::uint64_t failed = 0;
    std::uint64_t within_slo = 0;
    std::uint64_t arrivals = 0;
    double sum_s = 0.0;
    double min_s = 0.0;
    double max_s = 0.0;
  };

  [[nodiscard]] std::int64_t epoch_of(double time_s) const;
  [[nodiscard]] std::size_t position_of(std::int64_t epoch) const;
  // The slot for a sample at time_s, reset if it held an older epoch; nullptr if the ring has
  // already moved past time_s (the sample is older than the window).
  Slot* slot_for(double time_s);
  void reset(std::size_t position, std::int64_t epoch);
  [[nodiscard]] bool live(const Slot& slot, std::int64_t now_epoch) const;
  [[nodiscard]] Totals totals(std::int64_t now_epoch) const;
  void fill_percentiles(std::int64_t now_epoch, const Totals& totals, const std::vector<double>& quantiles,
                        std::vector<double>& values_s) const;

  LatencyStatsConfig config_;
  double slot_s_;
  std::vector<Slot> slots_;
  std::vector<std::uint32_t> counts_;  // slots x bucket_count(), row = slot position
  std::optional<double> first_arrival_s_;
};

}  // namespace gpucap::serve
