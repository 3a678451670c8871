#pragma once
// Power samples and the statistics of a measurement window.

#include <cstddef>
#include <span>

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

// Statistics of the samples (already restricted to [start_s, end_s]). An empty span gives an
// empty window (samples == 0, powers 0).
[[nodiscard]] WindowStats summarize_window(std::span<const PowerSample> samples, double start_s, double end_s);

}  // namespace gpucap
