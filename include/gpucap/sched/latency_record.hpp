#pragma once
// Latencies in bounded memory: the measured requests of a `gpucap share` job, or a run's
// preemptions, however many there are (a job of requests=100000000 once kept 10^8 doubles).
//
// Every sample is kept, in the order recorded, up to kExactSamples (2^20, 8 MiB); the figures are
// then exact: nearest-rank percentiles, as sched::nearest_rank_percentile gives them. At the next
// sample they are folded into a histogram with logarithmic buckets (each bucket's upper edge
// (1 + kRelativeError) times the one below, from kSmallestS to kLargestS: bucket_count()
// counters, about 22 KiB) and the samples are freed. A percentile is then the upper edge of the
// bucket that holds the nearest-rank sample, clamped to the exact minimum and maximum: for
// latencies in [kSmallestS, kLargestS], true <= reported <= true * (1 + kRelativeError); below
// kSmallestS it is at most kSmallestS, past kLargestS the exact maximum (never low). The
// count, minimum, maximum, mean and the count within an SLO given at construction stay exact. So
// the memory a record holds (storage_bytes()) never exceeds kExactSamples doubles.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

namespace gpucap::sched {

class LatencyRecord {
 public:
  static constexpr std::size_t kExactSamples = std::size_t{1} << 20;
  static constexpr double kRelativeError = 0.01;
  static constexpr double kSmallestS = 1e-6;  // smaller latencies share the first bucket
  static constexpr double kLargestS = 1e6;    // larger ones share the last (max_s() stays exact)

  LatencyRecord() = default;
  // Counts the samples with latency_s * 1e3 <= slo_ms exactly (within_slo()).
  explicit LatencyRecord(std::optional<double> slo_ms) : slo_ms_(slo_ms) {}

  // Error(internal) for a negative or non-finite latency.
  void add(double latency_s);

  [[nodiscard]] std::int64_t count() const { return count_; }
  // Every sample kept (count() <= kExactSamples): the figures are exact.
  [[nodiscard]] bool exact() const { return histogram_.empty(); }
  // The samples in the order they were recorded while exact(); empty once folded.
  [[nodiscard]] const std::vector<double>& samples() const { return samples_; }
  // Nearest-rank percentile, p in (0, 100]; 0 without samples.
  [[nodiscard]] double percentile(double p) const;
  [[nodiscard]] double min_s() const { return min_s_; }
  [[nodiscard]] double max_s() const { return max_s_; }
  [[nodiscard]] double mean_s() const { return count_ > 0 ? sum_s_ / static_cast<double>(count_) : 0.0; }
  [[nodiscard]] const std::optional<double>& slo_ms() const { return slo_ms_; }
  [[nodiscard]] std::int64_t within_slo() const { return within_slo_; }
  // Bytes the samples or the histogram hold (their capacity): at most kExactSamples doubles.
  [[nodiscard]] std::size_t storage_bytes() const;
  [[nodiscard]] static std::size_t bucket_count();

  bool operator==(const LatencyRecord&) const = default;

 private:
  void fold();

  std::optional<double> slo_ms_;
  std::int64_t count_ = 0;
  std::int64_t within_slo_ = 0;
  double sum_s_ = 0.0;
  double min_s_ = 0.0;
  double max_s_ = 0.0;
  std::vector<double> samples_;
  std::vector<std::uint64_t> histogram_;  // bucket_count() counters once folded
};

}  // namespace gpucap::sched
