#pragma once
// Seeded noise for the twin. std::mt19937_64's output sequence is fixed by the C++ standard,
// and the Gaussian transform is ours (std::normal_distribution differs between standard
// libraries), so a seed gives the same run on every platform.

#include <cstdint>
#include <random>

namespace gpucap::sim {

class Noise {
 public:
  explicit Noise(std::uint64_t seed) : engine_(seed) {}

  // Uniform in [0, 1).
  double uniform();
  // Standard normal (Box–Muller; one value per call, the pair's second value is kept).
  double gaussian();

 private:
  std::mt19937_64 engine_;
  double spare_ = 0.0;
  bool has_spare_ = false;
};

// Independent seeds for the twin's separate noise streams (sensor, latency, ...).
[[nodiscard]] std::uint64_t derive_seed(std::uint64_t seed, std::uint64_t stream);

}  // namespace gpucap::sim
