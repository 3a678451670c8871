#include "gpucap/core/window_stats.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

namespace gpucap {

WindowStats summarize_window(std::span<const PowerSample> samples, double start_s, double end_s) {
  WindowStats stats;
  stats.start_s = start_s;
  stats.end_s = end_s;
  stats.samples = samples.size();
  if (samples.empty()) return stats;

  double sum_w = 0.0;
  double max_w = samples.front().power_w;
  std::vector<double> powers;
  powers.reserve(samples.size());
  for (const auto& sample : samples) {
    sum_w += sample.power_w;
    max_w = std::max(max_w, sample.power_w);
    powers.push_back(sample.power_w);
  }
  stats.max_w = max_w;
  stats.mean_w = sum_w / static_cast<double>(samples.size());
  // Nearest-rank 95th percentile.
  const auto rank = static_cast<std::size_t>(std::ceil(0.95 * static_cast<double>(powers.size())));
  const auto index = std::clamp<std::size_t>(rank, 1, powers.size()) - 1;
  std::nth_element(powers.begin(), powers.begin() + static_cast<std::ptrdiff_t>(index), powers.end());
  stats.p95_w = powers[index];
  return stats;
}

}  // namespace gpucap
