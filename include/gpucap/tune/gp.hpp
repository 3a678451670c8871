#pragma once
// Gaussian-process regression for Bayesian optimisation (BOBD, seed-systems.md §1.6): the
// surrogate Spearmint fits to each task. Matérn-5/2 kernel with one length scale per input
// dimension (ARD), an amplitude and a constant mean; the tasks are noiseless, so the noise is
// a small fixed jitter that only keeps the Cholesky factor well defined.
//
// The caller scales inputs to the unit cube. Targets are standardised internally (zero mean,
// unit variance), so the hyper-parameters' priors and starting points need not know the units
// of throughput or power; predictions come back in the targets' units.

#include <cstddef>
#include <memory>
#include <vector>

namespace gpucap::tune {

// Hyper-parameters in the standardised target units.
struct GpHyperparameters {
  std::vector<double> length_scales;  // one per input dimension, in unit-cube units
  double amplitude = 1.0;             // signal variance of the kernel
  double mean = 0.0;                  // the constant prior mean
};

struct GpOptions {
  // Fixed noise variance in standardised units: Spearmint's NOISELESS tasks still carry a tiny
  // jitter. Raised tenfold at a time (at most 6 times) if the Cholesky factorisation fails.
  double jitter = 1e-6;
  // Weak log-normal priors (MAP instead of Spearmint's slice sampling of the posterior): they
  // only matter with few points, where the likelihood alone would drive a length scale to 0
  // or to infinity. log(length scale) ~ N(log(length_scale_prior_median), length_scale_prior_sd²).
  double length_scale_prior_median = 0.5;
  double length_scale_prior_sd = 1.0;
  // log(amplitude) ~ N(0, amplitude_prior_sd²), mean ~ N(0, mean_prior_sd²), both standardised.
  double amplitude_prior_sd = 1.0;
  double mean_prior_sd = 1.0;
  // Starting length scales of the deterministic restarts (every dimension the same), plus
  // the warm start if fit() is given one.
  std::vector<double> restart_length_scales = {0.1, 0.4, 1.5};
  int max_iterations = 100;  // per restart
};

// The hyper-parameters as the optimiser sees them: [log ℓ_1 … log ℓ_D, log amplitude, mean].
using GpParameterVector = std::vector<double>;
[[nodiscard]] GpParameterVector to_parameter_vector(const GpHyperparameters& hyper);
[[nodiscard]] GpHyperparameters from_parameter_vector(const GpParameterVector& theta, std::size_t dimensions);

// The log marginal likelihood of standardised targets `y` at `inputs` (rows: points) under
// `theta`, and its gradient with respect to theta if `gradient` is not null. Returns -inf if
// the kernel matrix is not positive definite at this jitter.
[[nodiscard]] double log_marginal_likelihood(const std::vector<std::vector<double>>& inputs,
                                             const std::vector<double>& y, const GpParameterVector& theta,
                                             double jitter, std::vector<double>* gradient = nullptr);
// The log density of the priors (up to a constant); its gradient is added to `gradient`, which
// must already hold theta.size() values.
[[nodiscard]] double log_prior(const GpParameterVector& theta, const GpOptions& options,
                               std::vector<double>* gradient = nullptr);

struct GpPrediction {
  double mean = 0.0;
  double variance = 0.0;  // of the latent function, without the jitter
};

class GaussianProcess {
 public:
  // Fits the hyper-parameters by maximising log marginal likelihood + log prior (Ceres L-BFGS
  // from each restart, and from `warm_start` if given), then factorises. Throws Error(usage)
  // for no points, ragged inputs or sizes that do not match.
  static GaussianProcess fit(const std::vector<std::vector<double>>& inputs, const std::vector<double>& targets,
                             const GpOptions& options = {}, const GpHyperparameters* warm_start = nullptr);
  // A GP with given hyper-parameters (no fitting).
  GaussianProcess(const std::vector<std::vector<double>>& inputs, const std::vector<double>& targets,
                  GpHyperparameters hyper, const GpOptions& options = {});

  // The posterior at `x` (unit-cube coordinates), in the targets' units.
  [[nodiscard]] GpPrediction predict(const std::vector<double>& x) const;
  [[nodiscard]] const GpHyperparameters& hyperparameters() const;
  [[nodiscard]] std::size_t dimensions() const;

 private:
  struct State;  // Eigen stays out of the header: the library links Eigen (through Ceres) privately
  std::shared_ptr<const State> state_;
};

}  // namespace gpucap::tune
