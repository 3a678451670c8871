#include "gpucap/calibrate/fit.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "gpucap/calibrate/p40_observations.hpp"
#include "gpucap/core/error.hpp"
#include "gpucap/sim/catalog.hpp"
#include "support/paths.hpp"

namespace gpucap::calibrate {
namespace {

// Observations made by the twin itself with known parameters: a fit from elsewhere must find them.
std::vector<Observation> synthetic(const TwinParams& truth) {
  std::vector<Observation> observations;
  for (const double f : {544.0, 835.0, 1063.0, 1303.0, 1531.0}) {
    observations.push_back({"test", "idle_power_w", "idle", "g", p40_idle_power_w(truth, f), 1.0,
                            [f](const TwinParams& p) { return p40_idle_power_w(p, f); }});
    for (const int b : {1, 8, 64}) {
      observations.push_back({"test", "busy_power_w", "busy", "g", p40_busy_power_w(truth, "resnet_v2_50", b, f), 1.0,
                              [f, b](const TwinParams& p) { return p40_busy_power_w(p, "resnet_v2_50", b, f); }});
    }
  }
  return observations;
}

TEST(Fit, RecoversParametersFromTheirOwnPredictions) {
  const auto catalog = sim::Catalog::load(test::data_dir());
  auto truth = TwinParams::from(catalog);
  truth.gpus.at("p40").power.sm_dynamic_w = 150.0;
  truth.gpus.at("p40").power.constant_w = 25.0;
  const std::vector<FitParameter> parameters = {{FileKind::gpu, "p40", "power_model.sm_dynamic_w", 20, 400, 0},
                                                {FileKind::gpu, "p40", "power_model.constant_w", 1, 80, 0}};
  auto start = truth;
  start.gpus.at("p40").power.sm_dynamic_w = 90.0;
  start.gpus.at("p40").power.constant_w = 40.0;
  const auto result = fit_twin(start, parameters, synthetic(truth));
  EXPECT_TRUE(result.report.converged) << result.report.message;
  EXPECT_NEAR(result.params.gpus.at("p40").power.sm_dynamic_w, 150.0, 0.15);
  EXPECT_NEAR(result.params.gpus.at("p40").power.constant_w, 25.0, 0.05);
  EXPECT_LT(result.report.final_cost, 1e-6);
  EXPECT_DOUBLE_EQ(start.gpus.at("p40").power.sm_dynamic_w, 90.0) << "the start is not modified";
}

TEST(Fit, BoundsAndPriorsHold) {
  const auto catalog = sim::Catalog::load(test::data_dir());
  auto truth = TwinParams::from(catalog);
  truth.gpus.at("p40").power.sm_dynamic_w = 300.0;
  const auto observations = synthetic(truth);
  auto start = truth;
  start.gpus.at("p40").power.sm_dynamic_w = 100.0;
  // The truth lies beyond the upper bound: the fit stops at the bound.
  const auto bounded = fit_twin(start, {{FileKind::gpu, "p40", "power_model.sm_dynamic_w", 20, 200, 0}}, observations);
  EXPECT_NEAR(bounded.params.gpus.at("p40").power.sm_dynamic_w, 200.0, 1e-6);
  // A tight prior keeps the value near its start.
  const auto held = fit_twin(start, {{FileKind::gpu, "p40", "power_model.sm_dynamic_w", 20, 400, 0.001}}, observations);
  EXPECT_NEAR(held.params.gpus.at("p40").power.sm_dynamic_w, 100.0, 1.0);
}

TEST(Fit, ExtraStartsKeepTheLowestCost) {
  // One residual with two minima in y = log(x / 100): a local one at y = 0 (residual 0.71) and
  // the global one at y = -1.5 (residual 0). From x = 100 the fit stays in the local one; the
  // first extra start (1.2 lower in log space) reaches the global one.
  const auto catalog = sim::Catalog::load(test::data_dir());
  auto start = TwinParams::from(catalog);
  start.gpus.at("p40").power.sm_dynamic_w = 100.0;
  const FitParameter sm{FileKind::gpu, "p40", "power_model.sm_dynamic_w", 10, 10000, 0};
  const auto two_wells = [](const TwinParams& p) {
    const double y = std::log(p.gpus.at("p40").power.sm_dynamic_w / 100.0);
    return 1.0 + std::min(std::sqrt(0.5) + y * y, std::abs(y + 1.5));
  };
  const std::vector<Observation> observations = {{"test", "q", "two wells", "g", 1.0, 1.0, two_wells}};
  FitOptions one_start;
  one_start.huber_delta = 10.0;
  const auto single = fit_twin(start, {sm}, observations, one_start);
  FitOptions more = one_start;
  more.extra_starts = 1;
  more.start_spread = 1.2;
  const auto multi = fit_twin(start, {sm}, observations, more);
  EXPECT_NEAR(single.params.gpus.at("p40").power.sm_dynamic_w, 100.0, 1.0);
  EXPECT_NEAR(single.report.final_cost, 0.25, 1e-3);
  EXPECT_LT(multi.report.final_cost, 1e-4);
  EXPECT_NEAR(std::log(multi.params.gpus.at("p40").power.sm_dynamic_w / 100.0), -1.5, 0.02);
}

TEST(Fit, BadProblemsAreRejectedAndNonConvergenceIsReported) {
  const auto catalog = sim::Catalog::load(test::data_dir());
  const auto params = TwinParams::from(catalog);
  const FitParameter sm{FileKind::gpu, "p40", "power_model.sm_dynamic_w", 20, 400, 0};
  EXPECT_THROW((void)fit_twin(params, {sm}, {}), Error);
  EXPECT_THROW((void)fit_twin(params, {}, synthetic(params)), Error);
  const FitParameter outside{FileKind::gpu, "p40", "power_model.sm_dynamic_w", 500, 600, 0};
  EXPECT_THROW((void)fit_twin(params, {outside}, synthetic(params)), Error);
  const FitParameter unknown{FileKind::gpu, "p40", "power_model.flux_w", 1, 2, 0};
  EXPECT_THROW((void)fit_twin(params, {unknown}, synthetic(params)), Error);

  auto truth = params;
  truth.gpus.at("p40").power.sm_dynamic_w = 150.0;
  auto start = params;
  start.gpus.at("p40").power.sm_dynamic_w = 30.0;
  FitOptions one_step;
  one_step.max_iterations = 1;
  const auto result = fit_twin(start, {sm}, synthetic(truth), one_step);
  EXPECT_FALSE(result.report.converged);
  EXPECT_FALSE(result.report.message.empty());
}

}  // namespace
}  // namespace gpucap::calibrate
