#include "gpucap/sched/cap_share.hpp"

#include <gtest/gtest.h>

#include "gpucap/core/error.hpp"
#include "gpucap/sim/share_twin.hpp"
#include "support/paths.hpp"

namespace gpucap::sched {
namespace {

ShareScenario scenario(const sim::ShareTwin& twin, std::vector<std::string> jobs) {
  ShareScenario s;
  s.gpu = twin.device("rtx2080ti");
  for (const auto& text : jobs) s.jobs.push_back(parse_job_spec(text));
  s.cap = CapSchedule::constant(150);
  return s;
}

const std::vector<std::string> kJobs = {"bg=train:keras_vgg16:batch=32:until=fg",
                                        "fg=infer:keras_resnet50:batch=1:priority=high:rate=50:requests=500:slo_ms=20:start=1"};

TEST(CapShare, TheTableHasEveryClockAndHalvedBatches) {
  const sim::ShareTwin twin(test::data_dir());
  const auto t = build_cap_share_table(scenario(twin, kJobs), twin);
  EXPECT_EQ(t.foreground, "fg");
  EXPECT_EQ(t.background, "bg");
  EXPECT_EQ(t.fg.size(), twin.clock_levels_mhz(twin.device("rtx2080ti")).size());
  EXPECT_EQ(t.bg.size(), 4 * t.fg.size());  // batch 32, 16, 8, 4
  // A lower clock: slower, and less power.
  EXPECT_GT(t.fg.front().latency_s, t.fg.back().latency_s);
  EXPECT_LT(t.fg.front().busy_power_w, t.fg.back().busy_power_w);
}

TEST(CapShare, TheDrainAtAQuantileIsTheKernelInFlightPlusTheOneBehindIt) {
  // Two kernels of 1 s: half the time the first runs (left: uniform in 0–1 s, the second behind
  // it: 1–2 s), half the time the last (0–1 s, nothing behind). P(drain > x) = (2 − x) / 2 on 1–2.
  EXPECT_NEAR(drain_quantile_s({1.0, 1.0}, 2, 0.99), 1.98, 1e-9);
  EXPECT_NEAR(drain_quantile_s({1.0, 1.0}, 2, 0.75), 1.5, 1e-9);
  // One long kernel among short ones is hit in proportion to its length.
  const std::vector<double> kernels = {0.001, 0.001, 0.1, 0.001, 0.001};
  EXPECT_GT(drain_quantile_s(kernels, 2, 0.99), 0.09);
  EXPECT_DOUBLE_EQ(drain_quantile_s({}, 2, 0.99), 0.0);
  // A window of 1: only the kernel in flight, uniform over 0–1 s.
  EXPECT_NEAR(drain_quantile_s({1.0, 1.0}, 1, 0.9), 0.9, 1e-9);
  // A window of 3 over three kernels: the first in flight has both others behind it (2–3 s).
  EXPECT_NEAR(drain_quantile_s({1.0, 1.0, 1.0}, 3, 0.99), 2.97, 1e-9);
}

TEST(CapShare, AHostPacedRequestHoldsTheGpuLongerThanItsKernelsRun) {
  const sim::ShareTwin twin(test::data_dir());
  const auto t = build_cap_share_table(scenario(twin, kJobs), twin);
  // ResNet50 BS-1 on the twin: its 7.7 GFLOP at 5 TFLOP/s, the rest of its 8.25 ms dispatch.
  EXPECT_LT(t.fg.back().busy_s, 0.3 * t.fg.back().gpu_s);
  for (const auto& bg : t.bg) {
    EXPECT_GT(bg.busy_s, 0.9 * bg.gpu_s);  // training keeps the GPU busy
    EXPECT_GT(bg.drain_p99_s, 0.0);
  }
}

TEST(CapShare, ATighterCapOrALiveForegroundNeverGetsMoreBackground) {
  const sim::ShareTwin twin(test::data_dir());
  const CapShareController c(build_cap_share_table(scenario(twin, kJobs), twin));
  const auto alone = c.best(200, false, 0.03);
  const auto shared = c.best(200, true, 0.03);
  const auto tight = c.best(130, true, 0.03);
  ASSERT_TRUE(alone && shared && tight);
  EXPECT_GE(alone->background_items_s, shared->background_items_s);
  EXPECT_GE(shared->background_items_s, tight->background_items_s);
  EXPECT_LE(tight->mean_power_w, 130 * 0.97 + 1e-9);
  EXPECT_FALSE(c.best(60, true, 0.03).has_value());  // below what the foreground alone draws
}

TEST(CapShare, NeedsAnSloJobWithARateAndATrainingJob) {
  const sim::ShareTwin twin(test::data_dir());
  EXPECT_THROW((void)build_cap_share_table(scenario(twin, {"a=train:keras_vgg16"}), twin), Error);
  EXPECT_THROW((void)build_cap_share_table(
                   scenario(twin, {"bg=train:keras_vgg16", "fg=infer:keras_resnet50:batch=1:requests=5:slo_ms=20"}), twin),
               Error);
}

TEST(CapShare, UnderTheCapInEveryWindowAndOnTime) {
  const sim::ShareTwin twin(test::data_dir());
  auto s = scenario(twin, kJobs);
  s.resume_preempted = true;
  CapShareController controller(build_cap_share_table(s, twin));
  s.controller = &controller;
  const auto r = simulate_share(s, twin);
  EXPECT_EQ(cap_figures(s, r).over, 0);
  EXPECT_GE(*slo_attainment(s.jobs[1], r.jobs[1]), 0.99);
  EXPECT_GT(r.jobs[0].throughput_items_s, 20.0);
  EXPECT_FALSE(r.knob_changes.empty());
}

}  // namespace
}  // namespace gpucap::sched
