// Free sharing in one stream: the feed barrier, the shared launch queue and sync points, on
// timelines worked out by hand (docs/simulator.md, "Free sharing").

#include <gtest/gtest.h>

#include "gpucap/sched/simulator.hpp"
#include "hand_models.hpp"

namespace gpucap::sched {
namespace {

using namespace test;  // NOLINT(google-build-using-namespace): the hand models and helpers

TEST(ShareThreads, ARequestsFeedWaitsForTheStreamAndItsKernelsQueueBehindTheOthers) {
  // fg's input is ready at 0.0905 s, when bg's kernel 7 runs (until 0.092) and kernel 8 is
  // launched: its feed waits for both (0.097). Meanwhile bg launched kernel 9 (at 0.092, its
  // window of 2 free again): fg's four kernels run after it, 0.102–0.106.
  const auto r = simulate_share(
      scenario(Policy::threads, {"bg=train:train:steps=20", "fg=infer:infer:batch=1:priority=high:requests=5:start=0.09"}), model);
  const auto& fg = job(r, "fg");
  ASSERT_EQ(fg.latencies.samples().size(), 5U);
  EXPECT_NEAR(fg.latencies.samples()[0], 0.016, eps);
  EXPECT_TRUE(r.preemptions.empty());
  EXPECT_EQ(job(r, "bg").steps_redone, 0);
  EXPECT_EQ(job(r, "bg").steps_done, 20);
}

// A launch queue of three kernels, shared: bg (ten kernels of 1 ms, launched as fast as the host
// can, no window of its own) fills it at 0; its fourth launch blocks. fg (two kernels of 0.1 ms)
// is ready at 0.5 ms: its feed waits for bg's three queued kernels (until 3 ms). Its launches then
// take turns with bg's blocked ones, in the order they blocked: fg's first enters at 4 ms (bg's
// sixth entered at 3), bg's seventh at 5, fg's second at 6; fg's kernels run 6–6.1 and 7.1–7.2.
TEST(ShareThreads, TheLaunchQueueIsSharedAndBlockedLaunchesEnterInTurn) {
  const ScriptedModel queued(
      [](const JobSpec& job) {
        StepProfile p;
        p.kernels_s.assign(job.mode == Mode::training ? 10 : 2, job.mode == Mode::training ? 0.001 : 0.0001);
        return p;
      },
      0.0, 3);
  const auto r = simulate_share(
      scenario(Policy::threads, {"bg=train:a:steps=1", "fg=infer:b:batch=1:priority=high:requests=1:start=0.0005"}), queued);
  const auto& fg = job(r, "fg");
  ASSERT_EQ(fg.latencies.samples().size(), 1U);
  EXPECT_NEAR(fg.latencies.samples()[0], 0.0072 - 0.0005, eps);
  EXPECT_NEAR(job(r, "bg").end_s, 0.0102, eps);  // ten kernels and fg's two in between
  // Without a queue limit bg launches all ten at once, and fg's kernels wait behind them all.
  const ScriptedModel unlimited(
      [](const JobSpec& job) {
        StepProfile p;
        p.kernels_s.assign(job.mode == Mode::training ? 10 : 2, job.mode == Mode::training ? 0.001 : 0.0001);
        return p;
      });
  const auto u = simulate_share(
      scenario(Policy::threads, {"bg=train:a:steps=1", "fg=infer:b:batch=1:priority=high:requests=1:start=0.0005"}), unlimited);
  EXPECT_NEAR(job(u, "fg").latencies.samples()[0], 0.0102 - 0.0005, eps);
}

// Under switchflow the same queue bounds what a preemption drains: bg (ten kernels of 1 ms) fills
// a queue of two at 0 and its third launch blocks; fg asks at 0.5 ms, bg stops launching (its
// blocked launch never enters), its two kernels drain by 2 ms and fg's kernel runs 2–3 ms.
TEST(ShareSwitchflow, APreemptionDrainsOnlyWhatTheLaunchQueueHeld) {
  const auto profile = [](const JobSpec& job) {
    StepProfile p;
    p.kernels_s.assign(job.mode == Mode::training ? 10 : 1, 0.001);
    return p;
  };
  const std::vector<std::string> jobs = {"bg=train:a:steps=1", "fg=infer:b:batch=1:priority=high:requests=1:start=0.0005"};
  const ScriptedModel queued(profile, 0.0, 2);
  const auto r = simulate_share(scenario(Policy::switchflow, jobs), queued);
  ASSERT_EQ(r.preemptions.size(), 1U);
  EXPECT_NEAR(r.preemptions[0].drain_s, 0.0015, eps);
  EXPECT_NEAR(job(r, "fg").latencies.samples().at(0), 0.0025, eps);
  EXPECT_EQ(job(r, "bg").steps_redone, 1);
  EXPECT_EQ(job(r, "bg").steps_done, 1);
  // Unbounded, bg had launched all ten: the drain takes the rest of its step.
  const ScriptedModel unbounded(profile);
  const auto u = simulate_share(scenario(Policy::switchflow, jobs), unbounded);
  ASSERT_EQ(u.preemptions.size(), 1U);
  EXPECT_NEAR(u.preemptions[0].drain_s, 0.0095, eps);
}

TEST(ShareThreads, EachSyncPointWaitsBehindWhatTheOthersLaunched) {
  const auto threads = simulate_share(
      scenario(Policy::threads, {"bg=train:pure:steps=400", "fg=infer:rnn:batch=1:priority=high:requests=20:start=0.0021"}),
      model);
  const auto flow = simulate_share(scenario(Policy::switchflow,
                                            {"bg=train:pure:steps=400", "fg=infer:rnn:batch=1:priority=high:requests=20:start=0.0021"},
                                            gpu("slow")),
                                   model);
  // Under threads each of the 4 segments enters the stream behind at least one 5 ms bg kernel.
  for (const double latency : job(threads, "fg").latencies.samples()) EXPECT_GE(latency, 4 * 0.005);
  // Under switchflow fg holds the GPU through its sync points, and bg has moved to the LPU: after
  // the first request's drain, 2 ms each.
  const auto& fg = job(flow, "fg");
  EXPECT_LE(fg.latencies.samples()[0], 0.002 + 0.010 + eps);
  for (std::size_t i = 1; i < fg.latencies.samples().size(); ++i) EXPECT_NEAR(fg.latencies.samples()[i], 0.002, eps) << i;
}

}  // namespace
}  // namespace gpucap::sched
