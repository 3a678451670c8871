// simulate_serving (serve/simulation.hpp): requests through the serving core and loop on the twin
// in virtual time, reported per segment of the cap schedule.

#include "gpucap/serve/simulation.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "gpucap/control/capserve.hpp"
#include "gpucap/control/serving.hpp"
#include "gpucap/runtime/sim_job.hpp"
#include "gpucap/runtime/sim_platform.hpp"
#include "gpucap/sim/catalog.hpp"
#include "gpucap/sim/noise.hpp"
#include "support/paths.hpp"

namespace gpucap::serve {
namespace {

const sim::Catalog& catalog() {
  static const auto c = sim::Catalog::load(test::data_dir());
  return c;
}

std::unique_ptr<runtime::SimPlatform> a100_vgg19(std::uint64_t seed) {
  const auto& model = catalog().model("vgg19");
  runtime::SimOptions options;
  options.seed = seed;
  return std::make_unique<runtime::SimPlatform>(catalog().gpu("a100"), model, model.precision, options);
}

std::unique_ptr<control::CapserveController> capserve(const runtime::SimPlatform& platform) {
  static const auto profile = runtime::measure_default_profile(catalog(), "a100", "vgg19", 100.0,
                                                               sim::derive_seed(1, runtime::kProfileSeedStream));
  control::CapserveParams params;
  params.profile = profile;
  params.slo_s = 0.1;
  params.max_batch_size = 256;
  params.limits = platform.controller_limits();
  return std::make_unique<control::CapserveController>(params);
}

SimulationConfig config(const std::string& schedule, double duration_s) {
  SimulationConfig c;
  c.duration_s = duration_s;
  c.drain_s = 5.0;
  c.cap = CapSchedule::parse(schedule);
  c.slo_s = 0.1;
  c.batcher.max_batch_size = 256;
  return c;
}

ArrivalProcess poisson(double rate_rps, double duration_s, std::uint64_t seed = 1) {
  return ArrivalProcess::from_schedule(RateSchedule::constant(rate_rps), ArrivalSpacing::poisson, seed, duration_s,
                                       10'000'000);
}

TEST(SimulateServing, ARequestBelongsToTheSegmentItArrivedIn) {
  auto platform = a100_vgg19(1);
  // A 20-ms queue delay: a request alone at 9.995 s is answered after the cap step at 10 s.
  control::StaticServing controller(control::BatcherDefaults{32, 0.02}, platform->controller_limits());
  std::vector<double> times;
  for (int i = 0; i < 100; ++i) times.push_back(0.1 * i);  // 0 .. 9.9 s
  times.push_back(9.995);
  for (int i = 0; i < 50; ++i) times.push_back(10.0 + 0.2 * i);  // 10 .. 19.8 s
  const auto report =
      simulate_serving(*platform, controller, ArrivalProcess::from_trace(times, 20.0, 1000), config("0:250,10:180", 20.0));
  ASSERT_EQ(report.segments.size(), 2U);
  EXPECT_EQ(report.segments[0].cap_w, 250.0);
  EXPECT_EQ(report.segments[1].cap_w, 180.0);
  EXPECT_EQ(report.segments[0].arrivals, 101U);
  EXPECT_EQ(report.segments[0].answered, 101U);  // the one answered after 10 s too
  EXPECT_EQ(report.segments[1].arrivals, 50U);
  EXPECT_EQ(report.segments[1].answered, 50U);
  EXPECT_EQ(report.total.arrivals, 151U);
  EXPECT_DOUBLE_EQ(report.segments[0].goodput_rps, 101.0 / 10.0);
  EXPECT_DOUBLE_EQ(report.segments[1].goodput_rps, 50.0 / 10.0);
  // The lone request waited its delay: the segment's slowest answer.
  EXPECT_GE(report.segments[0].p99_s, 0.02);
}

TEST(SimulateServing, ACapStepClosesCapservesWindowAtOnce) {
  auto platform = a100_vgg19(1);
  auto controller = capserve(*platform);
  const auto report = simulate_serving(*platform, *controller, poisson(600.0, 20.0), config("0:250,10.5:180", 20.0));
  // The window that holds the step ends at it (or at the end of the batch then in flight), not at
  // the next whole second, and the knobs that follow are decided under the new cap.
  const auto step = std::find_if(report.windows.begin(), report.windows.end(),
                                 [](const ServingWindow& w) { return w.end_s >= 10.5; });
  ASSERT_NE(step, report.windows.end());
  EXPECT_LT(step->end_s, 10.5 + 0.1);
  EXPECT_LT(step->end_s - step->start_s, 1.0);
  EXPECT_EQ(step->cap_w, 180.0);
  EXPECT_EQ(step->knobs.power_limit_w, 250.0);  // what ran during it
  ASSERT_NE(step + 1, report.windows.end());
  EXPECT_EQ((step + 1)->knobs.power_limit_w, 180.0);
  EXPECT_EQ(report.loop.windows_over_cap_outside_transitions, 0);
}

TEST(SimulateServing, SheddingKeepsTheQueueBoundedAtTwiceTheCapacity) {
  // VGG-19 on the A100 serves about 1,450 requests/s within a 100-ms SLO under 180 W.
  constexpr double kCapacityRps = 1450.0;
  constexpr double kBound = kCapacityRps * 0.1;  // what the GPU answers in one SLO
  auto platform = a100_vgg19(1);
  auto controller = capserve(*platform);
  const auto report = simulate_serving(*platform, *controller, poisson(2.0 * kCapacityRps, 20.0), config("0:180", 20.0));
  EXPECT_GT(report.total.shed, report.total.arrivals / 3);
  EXPECT_LE(static_cast<double>(report.total.max_queued_requests), kBound);
  EXPECT_EQ(report.total.failed, 0U);
  EXPECT_GE(report.total.slo_attainment, 0.99);
  EXPECT_GE(report.total.goodput_rps, 0.8 * kCapacityRps);
  // Without shedding the queue grows for as long as the overload lasts.
  auto static_platform = a100_vgg19(1);
  control::StaticServing static_serving(control::BatcherDefaults{32, 0.002}, static_platform->controller_limits());
  const auto unshed =
      simulate_serving(*static_platform, static_serving, poisson(2.0 * kCapacityRps, 20.0), config("0:180", 20.0));
  EXPECT_EQ(unshed.total.shed, 0U);
  EXPECT_GT(static_cast<double>(unshed.total.max_queued_requests), 20.0 * kBound);
}

TEST(SimulateServing, TheSameSeedsGiveTheSameReport) {
  const auto run = [](std::uint64_t twin_seed, std::uint64_t arrival_seed) {
    auto platform = a100_vgg19(twin_seed);
    auto controller = capserve(*platform);
    return simulate_serving(*platform, *controller, poisson(1000.0, 15.0, arrival_seed), config("0:250,5:180,10:220", 15.0));
  };
  const auto a = run(7, 3);
  const auto b = run(7, 3);
  ASSERT_EQ(a.segments.size(), 3U);
  ASSERT_EQ(a.windows.size(), b.windows.size());
  for (std::size_t k = 0; k < a.segments.size(); ++k) {
    EXPECT_EQ(a.segments[k].arrivals, b.segments[k].arrivals);
    EXPECT_EQ(a.segments[k].good, b.segments[k].good);
    EXPECT_EQ(a.segments[k].p99_s, b.segments[k].p99_s);
    EXPECT_EQ(a.segments[k].max_power_w, b.segments[k].max_power_w);
    EXPECT_EQ(a.segments[k].windows_over_cap, b.segments[k].windows_over_cap);
  }
  EXPECT_EQ(a.loop.energy_j, b.loop.energy_j);
  // Another twin seed: other noise, other power readings.
  const auto c = run(8, 3);
  EXPECT_EQ(c.total.arrivals, a.total.arrivals);
  EXPECT_NE(c.loop.energy_j, a.loop.energy_j);
  // Other arrivals.
  EXPECT_NE(run(7, 4).total.arrivals, a.total.arrivals);
}

}  // namespace
}  // namespace gpucap::serve
