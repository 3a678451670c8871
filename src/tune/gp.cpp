#include "gpucap/tune/gp.hpp"

#include <ceres/gradient_problem.h>
#include <ceres/gradient_problem_solver.h>
#include <fmt/format.h>

#include <Eigen/Cholesky>
#include <Eigen/Core>
#include <cmath>
#include <limits>
#include <numbers>
#include <utility>

#include "gpucap/core/error.hpp"

namespace gpucap::tune {

namespace {

const double kSqrt5 = std::sqrt(5.0);

// Matérn-5/2 correlation at scaled distance r: (1 + √5 r + 5/3 r²) exp(−√5 r).
double matern52(double r) { return (1.0 + kSqrt5 * r + 5.0 / 3.0 * r * r) * std::exp(-kSqrt5 * r); }

double scaled_distance(const double* a, const double* b, const std::vector<double>& length_scales) {
  double r2 = 0.0;
  for (std::size_t d = 0; d < length_scales.size(); ++d) {
    const double z = (a[d] - b[d]) / length_scales[d];
    r2 += z * z;
  }
  return std::sqrt(r2);
}

// Inputs as rows of a matrix, checked for a consistent dimension.
Eigen::MatrixXd to_matrix(const std::vector<std::vector<double>>& inputs) {
  if (inputs.empty()) throw usage_error("Gaussian process: no training points");
  const auto dimensions = inputs.front().size();
  Eigen::MatrixXd x(static_cast<Eigen::Index>(inputs.size()), static_cast<Eigen::Index>(dimensions));
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].size() != dimensions) {
      throw usage_error(fmt::format("Gaussian process: point {} has {} coordinates, not {}", i, inputs[i].size(),
                                    dimensions));
    }
    for (std::size_t d = 0; d < dimensions; ++d) {
      x(static_cast<Eigen::Index>(i), static_cast<Eigen::Index>(d)) = inputs[i][d];
    }
  }
  return x;
}

// Row-major copy, so that a row is a contiguous double* for scaled_distance.
using RowMatrix = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// The squared coordinate differences of every pair i > j, per dimension: they do not change
// while the optimiser varies the hyper-parameters, so the fit computes them once.
struct PairDifferences {
  Eigen::Index points = 0;
  std::size_t dimensions = 0;
  std::vector<Eigen::Index> first, second;
  std::vector<double> squared;  // pair-major: squared[pair * dimensions + d]

  explicit PairDifferences(const Eigen::MatrixXd& x)
      : points(x.rows()), dimensions(static_cast<std::size_t>(x.cols())) {
    for (Eigen::Index i = 0; i < points; ++i) {
      for (Eigen::Index j = 0; j < i; ++j) {
        first.push_back(i);
        second.push_back(j);
        for (Eigen::Index d = 0; d < x.cols(); ++d) squared.push_back((x(i, d) - x(j, d)) * (x(i, d) - x(j, d)));
      }
    }
  }
};

// The kernel matrix and, per pair, what the gradient reuses: the scaled distance r and exp(−√5 r).
struct KernelTerms {
  Eigen::MatrixXd k;
  std::vector<double> distance;
  std::vector<double> decay;
  std::vector<double> inverse_squared_scales;  // 1/ℓ_d²
};

// Matérn-5/2 correlation (1 + s + s²/3) exp(−s), s = √5 r, with exp(−s) given.
double matern52_from(double s, double decay) { return (1.0 + s + s * s / 3.0) * decay; }

KernelTerms kernel_terms(const PairDifferences& pairs, const GpHyperparameters& hyper, double jitter) {
  KernelTerms t;
  for (const double l : hyper.length_scales) t.inverse_squared_scales.push_back(1.0 / (l * l));
  const std::size_t pair_count = pairs.first.size();
  t.distance.resize(pair_count);
  t.decay.resize(pair_count);
  t.k.resize(pairs.points, pairs.points);
  t.k.diagonal().setConstant(hyper.amplitude + jitter);
  for (std::size_t p = 0; p < pair_count; ++p) {
    double r2 = 0.0;
    for (std::size_t d = 0; d < pairs.dimensions; ++d) {
      r2 += pairs.squared[p * pairs.dimensions + d] * t.inverse_squared_scales[d];
    }
    t.distance[p] = std::sqrt(r2);
    t.decay[p] = std::exp(-kSqrt5 * t.distance[p]);
    const double k_ij = hyper.amplitude * matern52_from(kSqrt5 * t.distance[p], t.decay[p]);
    t.k(pairs.first[p], pairs.second[p]) = k_ij;
    t.k(pairs.second[p], pairs.first[p]) = k_ij;
  }
  return t;
}

// d lml / dθ = ½ tr((ααᵀ − K⁻¹) dK/dθ), W the bracket; the sum over i ≠ j is twice the sum over
// pairs i > j. dK_ij/d log ℓ_d = amplitude · 5/3 (1 + √5 r) exp(−√5 r) · (Δ_d/ℓ_d)², finite at
// r = 0; dK_ij/d log amplitude = K_ij without the jitter; d lml / d mean = Σ α.
std::vector<double> lml_gradient(const PairDifferences& pairs, const KernelTerms& terms,
                                 const GpHyperparameters& hyper, const Eigen::LLT<Eigen::MatrixXd>& llt,
                                 const Eigen::VectorXd& alpha) {
  const auto n = pairs.points;
  const auto dimensions = pairs.dimensions;
  const Eigen::MatrixXd w = alpha * alpha.transpose() - llt.solve(Eigen::MatrixXd::Identity(n, n));
  std::vector<double> gradient(dimensions + 2, 0.0);
  double amplitude_gradient = 0.5 * w.diagonal().sum() * hyper.amplitude;
  for (std::size_t p = 0; p < pairs.first.size(); ++p) {
    const double w_ij = w(pairs.first[p], pairs.second[p]);
    const double s = kSqrt5 * terms.distance[p];
    const double length_factor = w_ij * hyper.amplitude * 5.0 / 3.0 * (1.0 + s) * terms.decay[p];
    for (std::size_t d = 0; d < dimensions; ++d) {
      gradient[d] += length_factor * pairs.squared[p * dimensions + d] * terms.inverse_squared_scales[d];
    }
    amplitude_gradient += w_ij * hyper.amplitude * matern52_from(s, terms.decay[p]);
  }
  gradient[dimensions] = amplitude_gradient;
  gradient[dimensions + 1] = alpha.sum();
  return gradient;
}

double lml_from_pairs(const PairDifferences& pairs, const std::vector<double>& y, const GpParameterVector& theta,
                      double jitter, std::vector<double>* gradient) {
  const auto hyper = from_parameter_vector(theta, pairs.dimensions);
  const auto terms = kernel_terms(pairs, hyper, jitter);
  const Eigen::LLT<Eigen::MatrixXd> llt(terms.k);
  if (llt.info() != Eigen::Success) return -std::numeric_limits<double>::infinity();
  const Eigen::VectorXd residual = Eigen::Map<const Eigen::VectorXd>(y.data(), pairs.points).array() - hyper.mean;
  const Eigen::VectorXd alpha = llt.solve(residual);
  const double log_det = 2.0 * llt.matrixLLT().diagonal().array().log().sum();
  if (gradient) *gradient = lml_gradient(pairs, terms, hyper, llt, alpha);
  return -0.5 * residual.dot(alpha) - 0.5 * log_det -
         0.5 * static_cast<double>(pairs.points) * std::log(2.0 * std::numbers::pi);
}

struct Standardisation {
  double offset = 0.0;
  double scale = 1.0;
};

// Zero mean and unit variance; a constant (or single) target keeps scale 1 so nothing divides by 0.
Standardisation standardisation_of(const std::vector<double>& targets) {
  Standardisation s;
  double sum = 0.0;
  for (const double t : targets) sum += t;
  s.offset = sum / static_cast<double>(targets.size());
  double squares = 0.0;
  for (const double t : targets) squares += (t - s.offset) * (t - s.offset);
  const double sd = std::sqrt(squares / static_cast<double>(targets.size()));
  if (sd > 1e-12 * std::max(1.0, std::abs(s.offset))) s.scale = sd;
  return s;
}

std::vector<double> standardise(const std::vector<double>& targets, const Standardisation& s) {
  std::vector<double> y(targets.size());
  for (std::size_t i = 0; i < targets.size(); ++i) y[i] = (targets[i] - s.offset) / s.scale;
  return y;
}

// Ceres' view of the fit: minimise −(log marginal likelihood + log prior).
class NegativeLogPosterior final : public ceres::FirstOrderFunction {
 public:
  NegativeLogPosterior(const PairDifferences& pairs, const std::vector<double>& y, const GpOptions& options)
      : pairs_(pairs), y_(y), options_(options), size_(static_cast<int>(pairs.dimensions) + 2) {}

  bool Evaluate(const double* parameters, double* cost, double* gradient) const override {
    const GpParameterVector theta(parameters, parameters + size_);
    std::vector<double> g;
    const double lml = lml_from_pairs(pairs_, y_, theta, options_.jitter, gradient ? &g : nullptr);
    if (!std::isfinite(lml)) return false;  // not positive definite here: Ceres shortens the step
    const double prior = log_prior(theta, options_, gradient ? &g : nullptr);
    *cost = -(lml + prior);
    if (gradient) {
      for (int i = 0; i < size_; ++i) gradient[i] = -g[static_cast<std::size_t>(i)];
    }
    return true;
  }
  [[nodiscard]] int NumParameters() const override { return size_; }

 private:
  const PairDifferences& pairs_;
  const std::vector<double>& y_;
  const GpOptions& options_;
  int size_;
};

// One L-BFGS run from `theta` (updated in place); returns the final cost, +inf if it failed.
double minimise_from(const PairDifferences& pairs, const std::vector<double>& y, const GpOptions& options,
                     GpParameterVector& theta) {
  const ceres::GradientProblem problem(new NegativeLogPosterior(pairs, y, options));
  double start_cost = 0.0;
  if (!problem.Evaluate(theta.data(), &start_cost, nullptr)) return std::numeric_limits<double>::infinity();
  ceres::GradientProblemSolver::Options solver;
  solver.line_search_direction_type = ceres::LBFGS;
  solver.max_num_iterations = options.max_iterations;
  solver.logging_type = ceres::SILENT;
  ceres::GradientProblemSolver::Summary summary;
  ceres::Solve(solver, problem, theta.data(), &summary);
  return std::isfinite(summary.final_cost) ? summary.final_cost : std::numeric_limits<double>::infinity();
}

}  // namespace

GpParameterVector to_parameter_vector(const GpHyperparameters& hyper) {
  GpParameterVector theta;
  for (const double l : hyper.length_scales) theta.push_back(std::log(l));
  theta.push_back(std::log(hyper.amplitude));
  theta.push_back(hyper.mean);
  return theta;
}

GpHyperparameters from_parameter_vector(const GpParameterVector& theta, std::size_t dimensions) {
  if (theta.size() != dimensions + 2) {
    throw Error(ErrorCode::internal,
                fmt::format("GP parameters: {} values for {} dimensions", theta.size(), dimensions));
  }
  GpHyperparameters hyper;
  for (std::size_t d = 0; d < dimensions; ++d) hyper.length_scales.push_back(std::exp(theta[d]));
  hyper.amplitude = std::exp(theta[dimensions]);
  hyper.mean = theta[dimensions + 1];
  return hyper;
}

double log_marginal_likelihood(const std::vector<std::vector<double>>& inputs, const std::vector<double>& y,
                               const GpParameterVector& theta, double jitter, std::vector<double>* gradient) {
  const PairDifferences pairs(to_matrix(inputs));
  if (static_cast<Eigen::Index>(y.size()) != pairs.points) {
    throw usage_error("Gaussian process: targets and points differ in number");
  }
  return lml_from_pairs(pairs, y, theta, jitter, gradient);
}

double log_prior(const GpParameterVector& theta, const GpOptions& options, std::vector<double>* gradient) {
  const std::size_t dimensions = theta.size() - 2;
  const double median_log = std::log(options.length_scale_prior_median);
  double lp = 0.0;
  // A Gaussian in the log-space parameter: −½ ((θ − μ)/σ)², gradient −(θ − μ)/σ².
  const auto gaussian = [&](std::size_t i, double mu, double sd) {
    const double z = (theta[i] - mu) / sd;
    lp -= 0.5 * z * z;
    if (gradient) (*gradient)[i] -= z / sd;
  };
  for (std::size_t d = 0; d < dimensions; ++d) gaussian(d, median_log, options.length_scale_prior_sd);
  gaussian(dimensions, 0.0, options.amplitude_prior_sd);
  gaussian(dimensions + 1, 0.0, options.mean_prior_sd);
  return lp;
}

struct GaussianProcess::State {
  RowMatrix x;
  GpHyperparameters hyper;
  Standardisation standardisation;
  Eigen::LLT<Eigen::MatrixXd> llt;
  Eigen::VectorXd alpha;  // K⁻¹ (y − mean), standardised
};

namespace {

// Factorises K at the options' jitter, raising it tenfold while the matrix is not positive definite.
Eigen::LLT<Eigen::MatrixXd> factorise(const PairDifferences& pairs, const GpHyperparameters& hyper, double jitter) {
  for (int attempt = 0; attempt <= 6; ++attempt, jitter *= 10.0) {
    Eigen::LLT<Eigen::MatrixXd> llt(kernel_terms(pairs, hyper, jitter).k);
    if (llt.info() == Eigen::Success) return llt;
  }
  throw Error(ErrorCode::internal, "Gaussian process: the kernel matrix is not positive definite");
}

}  // namespace

GaussianProcess::GaussianProcess(const std::vector<std::vector<double>>& inputs, const std::vector<double>& targets,
                                 GpHyperparameters hyper, const GpOptions& options) {
  auto state = std::make_shared<State>();
  const auto x = to_matrix(inputs);
  state->x = x;
  if (targets.size() != inputs.size()) throw usage_error("Gaussian process: targets and points differ in number");
  if (hyper.length_scales.size() != static_cast<std::size_t>(state->x.cols())) {
    throw usage_error("Gaussian process: one length scale per input dimension");
  }
  state->hyper = std::move(hyper);
  state->standardisation = standardisation_of(targets);
  const auto y = standardise(targets, state->standardisation);
  state->llt = factorise(PairDifferences(x), state->hyper, options.jitter);
  const Eigen::VectorXd residual =
      Eigen::Map<const Eigen::VectorXd>(y.data(), static_cast<Eigen::Index>(y.size())).array() - state->hyper.mean;
  state->alpha = state->llt.solve(residual);
  state_ = std::move(state);
}

GaussianProcess GaussianProcess::fit(const std::vector<std::vector<double>>& inputs,
                                     const std::vector<double>& targets, const GpOptions& options,
                                     const GpHyperparameters* warm_start) {
  const PairDifferences pairs(to_matrix(inputs));
  const auto dimensions = pairs.dimensions;
  if (targets.size() != inputs.size()) throw usage_error("Gaussian process: targets and points differ in number");
  const auto y = standardise(targets, standardisation_of(targets));

  std::vector<GpParameterVector> starts;
  for (const double l : options.restart_length_scales) {
    starts.push_back(to_parameter_vector(GpHyperparameters{std::vector<double>(dimensions, l), 1.0, 0.0}));
  }
  if (warm_start && warm_start->length_scales.size() == dimensions) starts.push_back(to_parameter_vector(*warm_start));

  // The best of the restarts; the first start is the fallback if every run failed.
  GpParameterVector best = starts.front();
  double best_cost = std::numeric_limits<double>::infinity();
  for (auto& theta : starts) {
    const double cost = minimise_from(pairs, y, options, theta);
    if (cost < best_cost) {
      best_cost = cost;
      best = theta;
    }
  }
  return GaussianProcess(inputs, targets, from_parameter_vector(best, dimensions), options);
}

GpPrediction GaussianProcess::predict(const std::vector<double>& x) const {
  const auto& s = *state_;
  if (x.size() != static_cast<std::size_t>(s.x.cols())) {
    throw usage_error(fmt::format("Gaussian process: a point with {} coordinates, not {}", x.size(), s.x.cols()));
  }
  const auto n = s.x.rows();
  Eigen::VectorXd k_star(n);
  for (Eigen::Index i = 0; i < n; ++i) {
    k_star(i) = s.hyper.amplitude * matern52(scaled_distance(x.data(), s.x.row(i).data(), s.hyper.length_scales));
  }
  const double mean = s.hyper.mean + k_star.dot(s.alpha);
  const Eigen::VectorXd v = s.llt.matrixL().solve(k_star);
  const double variance = std::max(0.0, s.hyper.amplitude - v.squaredNorm());
  const double scale = s.standardisation.scale;
  return GpPrediction{s.standardisation.offset + scale * mean, scale * scale * variance};
}

const GpHyperparameters& GaussianProcess::hyperparameters() const { return state_->hyper; }

std::size_t GaussianProcess::dimensions() const { return static_cast<std::size_t>(state_->x.cols()); }

}  // namespace gpucap::tune
