#pragma once
// The discrete configuration space offline search explores, and what one trial measured.
// A tuner proposes configurations and is told what they measured (DESIGN.md: tune/); it never
// runs anything itself, so the same tuner works on the twin and on a real GPU.

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace gpucap::tune {

// One fixed configuration: a batch size, an SM clock and, where the GPU has several, a memory clock.
struct ConfigPoint {
  int batch_size = 1;
  double sm_clock_mhz = 0.0;
  std::optional<double> memory_clock_mhz;  // nullopt: the driver's default

  bool operator==(const ConfigPoint&) const = default;
};

// "batch=64 sm=1063MHz" (+ " mem=5001MHz").
[[nodiscard]] std::string describe(const ConfigPoint& point);

// The grid batch sizes × SM clocks × memory clocks. Points are numbered memory clock slowest,
// then SM clock, then batch size fastest.
struct SearchSpace {
  std::vector<int> batch_sizes;
  std::vector<double> sm_clocks_mhz;
  std::vector<double> memory_clocks_mhz;  // empty: the driver's default only

  [[nodiscard]] std::size_t size() const;
  [[nodiscard]] ConfigPoint point(std::size_t index) const;
  // The inverse of point(): nullopt for a point outside the grid (clocks match within 1e-6 MHz; a
  // memory clock on a space without that axis, or none on a space with it, is outside).
  [[nodiscard]] std::optional<std::size_t> index_of(const ConfigPoint& point) const;
  // Throws Error(usage) naming the problem: an empty axis, a batch size < 1, a clock <= 0,
  // unsorted or repeated values.
  void validate() const;
};

// What a fixed-configuration measurement of the configuration returned.
struct TrialResult {
  double throughput_img_s = 0.0;
  double max_power_w = 0.0;   // the highest power sample of the measurement (the seeds' window max)
  double mean_power_w = 0.0;  // energy / duration
  double cost_s = 0.0;        // how long the measurement took (virtual seconds on the twin)
};

struct Trial {
  ConfigPoint point;
  TrialResult result;
};

// Feasible under the cap: the measurement's highest power sample stays at or below it.
[[nodiscard]] inline bool feasible(const TrialResult& result, double cap_w) { return result.max_power_w <= cap_w; }

// Whether `result` is feasible and beats `best` (strictly higher throughput, so ties keep the earlier trial).
[[nodiscard]] bool improves(const TrialResult& result, const std::optional<Trial>& best, double cap_w);

// The feasible trial with the highest throughput (ties: the earlier one); nullopt if none is feasible.
[[nodiscard]] std::optional<Trial> best_feasible(const std::vector<Trial>& trials, double cap_w);

}  // namespace gpucap::tune
