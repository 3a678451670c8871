#include "gpucap/calibrate/fit.hpp"

#include <ceres/ceres.h>
#include <fmt/format.h>

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
  std::vector<double> x = x0;

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
