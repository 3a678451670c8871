#pragma once
// Power samples and the statistics of a measurement window, accumulated as samples stream in so
// that a window's memory stays bounded however long it lasts or however fast the meter samples.

#include <cstddef>
#include <cstdint>
#include <vector>

namespace gpucap {

struct PowerSample {
  double time_s = 0.0;
  double power_w = 0.0;
};

struct WindowStats {
  double start_s = 0.0;
  double end_s = 0.0;
  std::size_t samples = 0;
  double max_w = 0.0;   // the statistic every seed controller acts on
  double mean_w = 0.0;
  double p95_w = 0.0;

  [[nodiscard]] double duration_s() const { return end_s - start_s; }
  [[nodiscard]] bool empty() const { return samples == 0; }
};

class WindowAccumulator {
 public:
  void add(double power_w);
  void reset();
  [[nodiscard]] std::size_t count() const { return count_; }
  [[nodiscard]] double max_w() const { return max_w_; }
  // Max and mean are exact. The 95th percentile (nearest rank) is exact up to kExactSamples
  // samples per window, and beyond that read from a 0.1-W histogram.
  [[nodiscard]] WindowStats stats(double start_s, double end_s) const;

  static constexpr std::size_t kExactSamples = 65536;

 private:
  [[nodiscard]] double p95_w() const;
  void spill_to_histogram();

  std::size_t count_ = 0;
  double sum_w_ = 0.0;
  double max_w_ = 0.0;
  std::vector<double> values_;           // while count_ <= kExactSamples
  std::vector<std::uint32_t> histogram_; // afterwards
};

}  // namespace gpucap
