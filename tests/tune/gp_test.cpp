#include "gpucap/tune/gp.hpp"

#include <gtest/gtest.h>

#include <cmath>

#include "gpucap/core/error.hpp"

namespace gpucap::tune {
namespace {

// A smooth function of the unit square that varies fast along x0 and slowly along x1.
double fast_then_slow(const std::vector<double>& x) { return std::sin(7.0 * x[0]) + 0.5 * x[1] * x[1]; }

// A regular n × n grid of the unit square.
std::vector<std::vector<double>> grid(int n) {
  std::vector<std::vector<double>> points;
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) points.push_back({i / (n - 1.0), j / (n - 1.0)});
  }
  return points;
}

std::vector<double> values_of(const std::vector<std::vector<double>>& points) {
  std::vector<double> y;
  for (const auto& p : points) y.push_back(fast_then_slow(p));
  return y;
}

TEST(GaussianProcess, InterpolatesNoiselessDataAndIsUncertainAwayFromIt) {
  const std::vector<std::vector<double>> x = {{0.1}, {0.3}, {0.5}, {0.7}, {0.9}};
  std::vector<double> y;
  // Targets in hundreds: the standardisation must hand predictions back in these units.
  for (const auto& p : x) y.push_back(300.0 + 100.0 * std::sin(4.0 * p[0]));
  const auto gp = GaussianProcess::fit(x, y);
  for (std::size_t i = 0; i < x.size(); ++i) {
    const auto at = gp.predict(x[i]);
    EXPECT_NEAR(at.mean, y[i], 1e-2) << "point " << i;
    EXPECT_LT(at.variance, 1e-2) << "point " << i;  // the jitter alone: 1e-6 of the targets' variance
  }
  const double near = gp.predict({0.4}).variance;
  const double far = gp.predict({2.0}).variance;
  EXPECT_GT(near, gp.predict({0.3}).variance);
  EXPECT_GT(far, 100.0 * near);
}

TEST(GaussianProcess, AnalyticGradientOfTheLogMarginalLikelihoodMatchesFiniteDifferences) {
  const auto x = grid(4);
  auto y = values_of(x);
  for (auto& v : y) v -= 0.2;  // not centred, so the mean's gradient is not trivially 0
  const GpParameterVector theta = {std::log(0.3), std::log(0.8), std::log(1.4), 0.1};
  std::vector<double> gradient;
  const double jitter = 1e-6;
  const double lml = log_marginal_likelihood(x, y, theta, jitter, &gradient);
  ASSERT_TRUE(std::isfinite(lml));
  ASSERT_EQ(gradient.size(), theta.size());
  for (std::size_t i = 0; i < theta.size(); ++i) {
    const double h = 1e-5;
    auto up = theta;
    auto down = theta;
    up[i] += h;
    down[i] -= h;
    const double numeric =
        (log_marginal_likelihood(x, y, up, jitter) - log_marginal_likelihood(x, y, down, jitter)) / (2 * h);
    EXPECT_NEAR(gradient[i], numeric, 1e-5 * std::max(1.0, std::abs(numeric))) << "parameter " << i;
  }
  // The priors' gradient is added to the same vector.
  const GpOptions options;
  std::vector<double> prior_gradient(theta.size(), 0.0);
  (void)log_prior(theta, options, &prior_gradient);
  for (std::size_t i = 0; i < theta.size(); ++i) {
    auto up = theta;
    up[i] += 1e-6;
    const double numeric = (log_prior(up, options) - log_prior(theta, options)) / 1e-6;
    EXPECT_NEAR(prior_gradient[i], numeric, 1e-4) << "parameter " << i;
  }
}

TEST(GaussianProcess, FittedLengthScalesFollowHowFastTheFunctionVaries) {
  const auto x = grid(6);
  const auto gp = GaussianProcess::fit(x, values_of(x));
  const auto& ls = gp.hyperparameters().length_scales;
  ASSERT_EQ(ls.size(), 2u);
  EXPECT_LT(ls[0], 0.5 * ls[1]) << "fast x0: " << ls[0] << ", slow x1: " << ls[1];
  // And the fit predicts between the grid points: one cell's centre.
  const std::vector<double> centre = {0.1, 0.5};
  EXPECT_NEAR(gp.predict(centre).mean, fast_then_slow(centre), 0.05);
}

TEST(GaussianProcess, TheFitBeatsItsStartingPoints) {
  const auto x = grid(5);
  const auto y = values_of(x);
  const GpOptions options;
  const auto fitted = GaussianProcess::fit(x, y, options).hyperparameters();
  // The targets as fit() standardises them.
  double mean = 0.0;
  for (const double v : y) mean += v / static_cast<double>(y.size());
  double variance = 0.0;
  for (const double v : y) variance += (v - mean) * (v - mean) / static_cast<double>(y.size());
  std::vector<double> standard;
  for (const double v : y) standard.push_back((v - mean) / std::sqrt(variance));
  const auto posterior = [&](const GpHyperparameters& h) {
    const auto theta = to_parameter_vector(h);
    return log_marginal_likelihood(x, standard, theta, options.jitter) + log_prior(theta, options);
  };
  for (const double l : options.restart_length_scales) {
    EXPECT_GT(posterior(fitted), posterior(GpHyperparameters{{l, l}, 1.0, 0.0})) << "start " << l;
  }
}

TEST(GaussianProcess, ParameterVectorRoundTrips) {
  const GpHyperparameters h{{0.2, 3.0}, 1.7, -0.4};
  const auto back = from_parameter_vector(to_parameter_vector(h), 2);
  EXPECT_NEAR(back.length_scales[0], 0.2, 1e-12);
  EXPECT_NEAR(back.length_scales[1], 3.0, 1e-12);
  EXPECT_NEAR(back.amplitude, 1.7, 1e-12);
  EXPECT_DOUBLE_EQ(back.mean, -0.4);
}

TEST(GaussianProcess, RejectsInconsistentData) {
  EXPECT_THROW((void)GaussianProcess::fit({}, {}), Error);
  EXPECT_THROW((void)GaussianProcess::fit({{0.1, 0.2}, {0.3}}, {1.0, 2.0}), Error);
  EXPECT_THROW((void)GaussianProcess::fit({{0.1}, {0.3}}, {1.0}), Error);
  const GaussianProcess gp({{0.1}, {0.3}}, {1.0, 2.0}, GpHyperparameters{{0.5}, 1.0, 0.0});
  EXPECT_THROW((void)gp.predict({0.1, 0.2}), Error);
  EXPECT_THROW(GaussianProcess({{0.1}}, {1.0}, GpHyperparameters{{0.5, 0.5}, 1.0, 0.0}), Error);
}

TEST(GaussianProcess, ASingleOrConstantTargetDoesNotDivideByZero) {
  const auto one = GaussianProcess::fit({{0.5, 0.5}}, {42.0});
  EXPECT_NEAR(one.predict({0.5, 0.5}).mean, 42.0, 1e-6);
  const auto flat = GaussianProcess::fit({{0.1}, {0.9}}, {7.0, 7.0});
  const auto middle = flat.predict({0.5});
  EXPECT_TRUE(std::isfinite(middle.mean));
  EXPECT_NEAR(middle.mean, 7.0, 1e-6);
}

}  // namespace
}  // namespace gpucap::tune
