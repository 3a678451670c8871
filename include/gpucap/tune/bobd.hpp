#pragma once
// BOBD: Bayesian optimisation of batch size and DVFS, offline (seed-systems.md §1.6). Upstream
// ran Spearmint with two noiseless tasks — throughput (the objective) and cap − max power (a
// constraint, feasible when ≥ 0) — 2 Sobol initial points and constrained expected improvement,
// for 50 evaluations. This is the same method on gpucap's discrete search space; deviations
// from Spearmint are listed in docs/algorithms.md (section bobd).

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "gpucap/tune/gp.hpp"
#include "gpucap/tune/tuner.hpp"

namespace gpucap::tune {

// How batch sizes map onto the GP's unit interval. Upstream declared BS an INT in [1, 256],
// which Spearmint scales linearly; throughput and power saturate roughly with log(batch), and
// the log scale finds the optimum in fewer evaluations (measurements in docs/algorithms.md).
enum class BatchScale { linear, log };

struct BobdOptions {
  std::uint64_t seed = 1;               // randomises the Sobol initial design (a digital shift)
  std::size_t initial_design = 2;       // Spearmint's default
  BatchScale batch_scale = BatchScale::log;
  GpOptions gp;
};

class BobdTuner final : public Tuner {
 public:
  // Validates the space (Error(usage)); `cap_w` decides feasibility (max power ≤ cap).
  BobdTuner(SearchSpace space, double cap_w, BobdOptions options = {});
  [[nodiscard]] std::string_view name() const override { return "bobd"; }
  // The next Sobol design point, then the unvisited grid point with the highest constrained
  // EI; nullopt once every point was measured.
  [[nodiscard]] std::optional<ConfigPoint> propose() override;
  // Throws Error(usage) for a point outside the space.
  void tell(const ConfigPoint& point, const TrialResult& result) override;

  // The point's coordinates in the GP's unit cube: one per axis with more than one value
  // (batch, SM clock, memory clock, in that order).
  [[nodiscard]] const std::vector<double>& unit_coordinates(std::size_t index) const { return coordinates_[index]; }

 private:
  [[nodiscard]] std::optional<std::size_t> next_design_point() const;
  [[nodiscard]] std::size_t snap_to_grid(const std::vector<double>& unit_point) const;
  [[nodiscard]] std::size_t most_promising_point();

  SearchSpace space_;
  double cap_w_;
  BobdOptions options_;
  std::vector<std::vector<double>> axis_coordinates_;  // per axis (batch, SM, memory): each value in [0, 1]
  std::vector<std::vector<double>> coordinates_;       // per grid point, the active axes only
  std::vector<bool> visited_;
  std::size_t visited_count_ = 0;
  std::vector<std::vector<double>> observed_inputs_;
  std::vector<double> observed_throughput_img_s_;
  std::vector<double> observed_constraint_w_;  // cap − max power
  std::optional<double> best_feasible_img_s_;
  std::optional<GpHyperparameters> objective_warm_start_;
  std::optional<GpHyperparameters> constraint_warm_start_;
};

}  // namespace gpucap::tune
