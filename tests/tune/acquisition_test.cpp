#include "gpucap/tune/acquisition.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

namespace gpucap::tune {
namespace {

// E[max(f − best, 0)] by the midpoint rule over ±12 sd: an independent check of the closed form.
double numeric_ei(double mean, double sd, double best) {
  const int steps = 200000;
  const double low = mean - 12 * sd;
  const double step = 24 * sd / steps;
  double sum = 0.0;
  for (int i = 0; i < steps; ++i) {
    const double f = low + (i + 0.5) * step;
    const double z = (f - mean) / sd;
    sum += std::max(f - best, 0.0) * std::exp(-0.5 * z * z) / (sd * std::sqrt(2 * std::numbers::pi)) * step;
  }
  return sum;
}

TEST(Acquisition, ExpectedImprovementMatchesNumericIntegration) {
  for (const double mean : {80.0, 100.0, 103.0, 130.0}) {
    for (const double sd : {0.5, 5.0, 20.0}) {
      EXPECT_NEAR(expected_improvement(mean, sd, 100.0), numeric_ei(mean, sd, 100.0), 1e-6 * (1 + mean))
          << mean << " ± " << sd;
    }
  }
  EXPECT_NEAR(expected_improvement(100.0, 2.0, 100.0), 2.0 / std::sqrt(2 * std::numbers::pi), 1e-12);
}

TEST(Acquisition, ExpectedImprovementGrowsWithMeanAndUncertainty) {
  EXPECT_GT(expected_improvement(101.0, 5.0, 100.0), expected_improvement(99.0, 5.0, 100.0));
  EXPECT_GT(expected_improvement(95.0, 10.0, 100.0), expected_improvement(95.0, 2.0, 100.0));
  EXPECT_GE(expected_improvement(50.0, 1.0, 100.0), 0.0);
  // Certain values: the improvement itself.
  EXPECT_DOUBLE_EQ(expected_improvement(110.0, 0.0, 100.0), 10.0);
  EXPECT_EQ(expected_improvement(90.0, 0.0, 100.0), 0.0);
}

TEST(Acquisition, LogFormsStayOrderedFarInTheTailWhereTheValuesUnderflow) {
  // 60 sd below the incumbent EI underflows to 0, but the log still ranks the points.
  EXPECT_EQ(expected_improvement(0.0, 1.0, 60.0), 0.0);
  const double a = log_expected_improvement(0.0, 1.0, 60.0);
  const double b = log_expected_improvement(0.0, 1.0, 50.0);
  EXPECT_TRUE(std::isfinite(a));
  EXPECT_LT(a, b);
  EXPECT_EQ(probability_feasible(-60.0, 1.0), 0.0);
  EXPECT_LT(log_probability_feasible(-60.0, 1.0), log_probability_feasible(-50.0, 1.0));
  // The series and the direct formula agree where they meet (z = −10).
  EXPECT_NEAR(log_expected_improvement(0.0, 1.0, 10.0 - 1e-9), log_expected_improvement(0.0, 1.0, 10.0 + 1e-9), 1e-5);
  EXPECT_NEAR(log_probability_feasible(-10.0 + 1e-9, 1.0), log_probability_feasible(-10.0 - 1e-9, 1.0), 1e-5);
  EXPECT_NEAR(std::exp(log_expected_improvement(0.0, 1.0, 3.0)), expected_improvement(0.0, 1.0, 3.0), 1e-15);
}

TEST(Acquisition, ProbabilityFeasibleIsTheNormalCdfOfTheMargin) {
  EXPECT_DOUBLE_EQ(probability_feasible(0.0, 3.0), 0.5);
  EXPECT_NEAR(probability_feasible(1.0, 1.0), 0.841344746, 1e-9);
  EXPECT_NEAR(probability_feasible(-2.0, 1.0), 0.022750132, 1e-9);
  EXPECT_GT(probability_feasible(5.0, 10.0), probability_feasible(5.0, 20.0));
  EXPECT_EQ(probability_feasible(0.0, 0.0), 1.0);  // c ≥ 0 includes the boundary, as feasible() does
  EXPECT_EQ(probability_feasible(-0.1, 0.0), 0.0);
}

}  // namespace
}  // namespace gpucap::tune
