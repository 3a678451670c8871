#pragma once
// What a GPU can serve under each cap, from the twin: the simulator's nodes publish their curves
// from these. For one GPU × model, under a cap c the capacity is the highest throughput of any
// batch size × SM clock whose time-averaged power (what the board's limiter regulates) stays at or
// under c and whose batch latency leaves room for the SLO (at most half of it: a request may wait
// one batch and then run in the next). That is the steady state a capfit profile measures, without
// the sensor's noise; it is computed once per pair — there are few pairs and many nodes.

#include <optional>
#include <string>
#include <vector>

#include "gpucap/sim/catalog.hpp"

namespace gpucap::cluster {

struct TwinCurveOptions {
  double slo_s = 0.1;               // the serving SLO; batches may take half of it
  std::size_t grid_points = 26;     // caps from the GPU's lowest power limit to its highest
  std::vector<int> batch_sizes = {1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256};
};

struct TwinCapacity {
  std::string gpu;
  std::string model;
  double min_cap_w = 0.0;  // the GPU's lowest power limit
  double max_cap_w = 0.0;  // its highest
  double tdp_w = 0.0;      // its default power limit
  std::vector<double> caps_w;          // the grid, ascending
  std::vector<double> throughput_rps;  // capacity under each cap (0: nothing meets the SLO under it)
  double tdp_rps = 0.0;                // capacity at the TDP

  // Linear between grid points, clamped to the ends.
  [[nodiscard]] double rps(double cap_w) const;
};

// nullopt when no configuration meets the SLO even at the highest cap (the pair cannot serve).
// Error(usage) for a training-only model.
[[nodiscard]] std::optional<TwinCapacity> twin_capacity(const sim::GpuSpec& gpu, const sim::ModelSpec& model,
                                                        const TwinCurveOptions& options = {});

}  // namespace gpucap::cluster
