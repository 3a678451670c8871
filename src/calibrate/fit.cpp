#include "gpucap/calibrate/fit.hpp"

#include <ceres/ceres.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "gpucap/core/error.hpp"

namespace gpucap::calibrate {

namespace {

// sqrt of the Huber loss with the sign kept: least squares on these values minimises Σ huber(r).
double robust(double r, double delta) {
  const double a = std::abs(r);
  if (a <= delta) return r;
  return std::copysign(std::sqrt(2.0 * delta * a - delta * delta), r);
}

class Residuals {
 public:
  Residuals(const TwinParams& start, const std::vector<FitParameter>& parameters,
            const std::vector<Observation>& observations, const std::vector<double>& x0, double delta)
      : params_(start), parameters_(parameters), observations_(observations), x0_(x0), delta_(delta) {}

  bool operator()(double const* const* x, double* residuals) const {
    for (std::size_t i = 0; i < parameters_.size(); ++i) parameter_field(params_, parameters_[i]) = std::exp(x[0][i]);
    std::size_t k = 0;
    for (const auto& observation : observations_) {
      const double predicted = observation.predict(params_);
      if (!std::isfinite(predicted)) return false;  // Ceres rejects the step
      const double r = observation.weight * (predicted - observation.target) / observation.target;
      residuals[k++] = robust(r, delta_);
    }
    for (std::size_t i = 0; i < parameters_.size(); ++i) {
      if (parameters_[i].prior_sigma > 0.0) residuals[k++] = (x[0][i] - x0_[i]) / parameters_[i].prior_sigma;
    }
    return true;
  }

 private:
  mutable TwinParams params_;  // scratch copy the parameters are written into
  const std::vector<FitParameter>& parameters_;
  const std::vector<Observation>& observations_;
  const std::vector<double>& x0_;
  double delta_;
};

// Where Levenberg–Marquardt ends from x (in place), and Ceres's summary.
ceres::Solver::Summary solve_from(std::vector<double>& x, const TwinParams& start,
                                  const std::vector<FitParameter>& parameters,
                                  const std::vector<Observation>& observations, const std::vector<double>& x0,
                                  std::size_t priors, const FitOptions& options) {
  auto* cost = new ceres::DynamicNumericDiffCostFunction<Residuals, ceres::CENTRAL>(
      new Residuals(start, parameters, observations, x0, options.huber_delta));
  cost->AddParameterBlock(static_cast<int>(x.size()));
  cost->SetNumResiduals(static_cast<int>(observations.size() + priors));

  ceres::Problem problem;
  problem.AddResidualBlock(cost, nullptr, x.data());
  for (std::size_t i = 0; i < parameters.size(); ++i) {
    problem.SetParameterLowerBound(x.data(), static_cast<int>(i), std::log(parameters[i].lower));
    problem.SetParameterUpperBound(x.data(), static_cast<int>(i), std::log(parameters[i].upper));
  }

  ceres::Solver::Options solver;
  solver.minimizer_type = ceres::TRUST_REGION;
  solver.trust_region_strategy_type = ceres::LEVENBERG_MARQUARDT;
  solver.linear_solver_type = ceres::DENSE_QR;
  solver.max_num_iterations = options.max_iterations;
  solver.num_threads = 1;  // deterministic
  solver.logging_type = ceres::SILENT;
  solver.minimizer_progress_to_stdout = false;
  ceres::Solver::Summary summary;
  ceres::Solve(solver, &problem, &summary);
  return summary;
}

// The k-th extra starting point: every parameter moved by ±spread in log space (alternating signs,
// the pattern flipped for each k and shifted by k), kept within its bounds. Deterministic.
std::vector<double> perturbed_start(const std::vector<double>& x0, const std::vector<FitParameter>& parameters,
                                    int k, double spread) {
  std::vector<double> x = x0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const bool up = ((i / static_cast<std::size_t>(k)) + static_cast<std::size_t>(k)) % 2 == 0;
    x[i] = std::clamp(x0[i] + (up ? spread : -spread), std::log(parameters[i].lower), std::log(parameters[i].upper));
  }
  return x;
}

}  // namespace

FitResult fit_twin(const TwinParams& start, const std::vector<FitParameter>& parameters,
                   const std::vector<Observation>& observations, const FitOptions& options) {
  if (observations.empty()) throw usage_error("calibration: no observations to fit");
  FitResult result;
  result.params = start;
  if (parameters.empty()) throw usage_error("calibration: no parameters to fit");

  std::vector<double> x0;
  std::size_t priors = 0;
  for (const auto& p : parameters) {
    const double value = parameter_value(start, p);
    if (!(p.lower > 0.0) || !(p.upper >= p.lower) || !(value >= p.lower && value <= p.upper)) {
      throw usage_error(fmt::format("calibration: {} starts at {:g}, outside its bounds [{:g}, {:g}]", p.name(), value,
                                    p.lower, p.upper));
    }
    x0.push_back(std::log(value));
    if (p.prior_sigma > 0.0) ++priors;
  }

  // From the start, then from each extra start; the lowest cost among the converged fits wins (the
  // first on a tie), so an extra start that stops early never turns a converged fit into a failed one.
  std::vector<double> x = x0;
  auto summary = solve_from(x, start, parameters, observations, x0, priors, options);
  const auto converged = [](const ceres::Solver::Summary& s) { return s.termination_type == ceres::CONVERGENCE; };
  for (int k = 1; k <= options.extra_starts; ++k) {
    auto candidate = perturbed_start(x0, parameters, k, options.start_spread);
    const auto other = solve_from(candidate, start, parameters, observations, x0, priors, options);
    if (converged(other) && (!converged(summary) || other.final_cost < summary.final_cost)) {
      x = std::move(candidate);
      summary = other;
    }
  }

  result.report.converged = summary.termination_type == ceres::CONVERGENCE;
  result.report.message = summary.message;
  result.report.iterations = static_cast<int>(summary.iterations.size());
  result.report.initial_cost = summary.initial_cost;
  result.report.final_cost = summary.final_cost;
  result.report.residuals = observations.size() + priors;
  if (summary.IsSolutionUsable()) {
    for (std::size_t i = 0; i < parameters.size(); ++i) {
      parameter_field(result.params, parameters[i]) = std::exp(x[i]);
    }
  }
  return result;
}

}  // namespace gpucap::calibrate
