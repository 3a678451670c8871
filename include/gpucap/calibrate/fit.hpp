#pragma once
// Least-squares fit of twin parameters to observations, with Ceres Solver (Levenberg–Marquardt,
// central numeric differences, bounds). Parameters are fitted in log space; each residual is the
// observation's weighted relative error passed through a Huber loss, so that a few outlying
// measurements cannot dominate; parameters with a prior get a weak log-normal pull toward their
// starting value (keeping those the data cannot identify where they were).

#include <string>
#include <vector>

#include "gpucap/calibrate/model.hpp"

namespace gpucap::calibrate {

struct FitOptions {
  int max_iterations = 200;
  double huber_delta = 0.05;  // relative error beyond which a residual counts linearly
  // Fits with several local minima: also start from extra_starts points around the start (each
  // parameter moved by ±start_spread in log space) and keep the lowest cost. The priors still
  // pull toward the start.
  int extra_starts = 0;
  double start_spread = 0.2;
};

struct FitReport {
  bool converged = false;     // Ceres reported CONVERGENCE
  std::string message;        // Ceres's summary line
  int iterations = 0;
  double initial_cost = 0.0;
  double final_cost = 0.0;
  std::size_t residuals = 0;
};

struct FitResult {
  FitReport report;
  TwinParams params;  // the fitted parameters (the start if nothing could be fitted)
};

// Error(usage) if a parameter's starting value lies outside its bounds or is not positive, or if
// there are no observations.
[[nodiscard]] FitResult fit_twin(const TwinParams& start, const std::vector<FitParameter>& parameters,
                                 const std::vector<Observation>& observations, const FitOptions& options = {});

}  // namespace gpucap::calibrate
