#include "gpucap/tune/acquisition.hpp"

#include <cmath>
#include <limits>
#include <numbers>

namespace gpucap::tune {

namespace {

constexpr double kMinusInfinity = -std::numeric_limits<double>::infinity();
// Below this z the direct formulas lose φ(z) to underflow; asymptotic series take over.
constexpr double kTailZ = -10.0;

double log_normal_density(double z) { return -0.5 * z * z - 0.5 * std::log(2.0 * std::numbers::pi); }

// log Φ(z). In the lower tail Φ(z) ≈ φ(z)/|z| · (1 − 1/z² + 3/z⁴ − 15/z⁶), relative error
// < 1e-6 for z < −10.
double log_normal_cdf(double z) {
  if (z >= kTailZ) return std::log(0.5 * std::erfc(-z / std::numbers::sqrt2));
  const double u = 1.0 / (z * z);
  return log_normal_density(z) - std::log(-z) + std::log(1.0 - u + 3.0 * u * u - 15.0 * u * u * u);
}

// log(z Φ(z) + φ(z)), EI in units of sd. Directly the sum cancels to φ(z)/z² with a relative
// error of about ε·z², harmless above the tail; in the tail the series
// φ(z)/z² · (1 − 3/z² + 15/z⁴ − 105/z⁶) takes over.
double log_improvement_factor(double z) {
  if (z >= kTailZ) return std::log(z * 0.5 * std::erfc(-z / std::numbers::sqrt2) + std::exp(log_normal_density(z)));
  const double u = 1.0 / (z * z);
  return log_normal_density(z) + std::log(u) + std::log(1.0 - 3.0 * u + 15.0 * u * u - 105.0 * u * u * u);
}

}  // namespace

double log_expected_improvement(double mean, double sd, double best) {
  if (!(sd > 0.0)) return mean > best ? std::log(mean - best) : kMinusInfinity;
  return std::log(sd) + log_improvement_factor((mean - best) / sd);
}

double expected_improvement(double mean, double sd, double best) {
  return std::exp(log_expected_improvement(mean, sd, best));
}

double log_probability_feasible(double mean, double sd) {
  if (!(sd > 0.0)) return mean >= 0.0 ? 0.0 : kMinusInfinity;
  return log_normal_cdf(mean / sd);
}

double probability_feasible(double mean, double sd) { return std::exp(log_probability_feasible(mean, sd)); }

}  // namespace gpucap::tune
