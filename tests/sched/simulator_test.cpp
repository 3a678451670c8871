// The scheduler's policies on a small hand-made step model, with timelines worked out by hand.

#include "gpucap/sched/simulator.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>

#include "gpucap/core/error.hpp"
#include "hand_models.hpp"

namespace gpucap::sched {
namespace {

using namespace test;  // NOLINT(google-build-using-namespace): the hand models and helpers


// Every job: a 10 ms input pipeline, then one 1 ms kernel, on a host that runs one pipeline at
// full speed.
const ScriptedModel pipelines(
    [](const JobSpec&) {
      StepProfile p;
      p.host_s = 0.010;
      p.input_pipeline = true;
      p.kernels_s = {0.001};
      return p;
    },
    1.0);

TEST(ShareSwitchflow, PreemptsAtTheKernelInFlightMigratesAndComesBack) {
  // bg's second step runs its kernels from 0.052 s, 5 ms each; fg asks for the GPU at 0.0905 s
  // (arrival 0.09 + 0.5 ms host), during kernel 7 (0.087–0.092) with kernel 8 launched behind it:
  // both drain, until 0.097.
  const auto r = simulate_share(scenario(Policy::switchflow,
                                         {"bg=train:train:steps=20", "fg=infer:infer:batch=1:priority=high:requests=100:start=0.09"},
                                         gpu("slow")),
                                model);
  ASSERT_EQ(r.preemptions.size(), 1U);
  const auto& p = r.preemptions[0];
  EXPECT_EQ(p.by, "fg");
  EXPECT_EQ(p.victim, "bg");
  EXPECT_NEAR(p.at_s, 0.0905, eps);
  EXPECT_NEAR(p.drain_s, 0.0065, eps);
  EXPECT_NEAR(p.latency_s, 0.0065, eps);
  EXPECT_DOUBLE_EQ(p.state_bytes, 1e9);
  EXPECT_EQ(p.state_variables, 100);
  EXPECT_NEAR(p.transfer_s, 0.11, eps);

  const auto& fg = job(r, "fg");
  ASSERT_EQ(fg.latencies.samples().size(), 100U);
  EXPECT_NEAR(fg.latencies.samples()[0], 0.011, eps);  // host, drain, its own 4 ms
  for (std::size_t i = 1; i < fg.latencies.samples().size(); ++i) EXPECT_NEAR(fg.latencies.samples()[i], 0.0045, eps) << i;
  EXPECT_NEAR(nearest_rank_percentile(fg.latencies.samples(), 95), 0.0045, eps);

  const auto& bg = job(r, "bg");
  EXPECT_TRUE(bg.finished);
  EXPECT_EQ(bg.steps_done, 20);
  EXPECT_EQ(bg.steps_redone, 1);
  EXPECT_EQ(bg.migrations, 2);  // away at its next step, back after fg ended
  EXPECT_GT(bg.steps_on_lpu, 0);
  ASSERT_EQ(r.migrations.size(), 2U);
  EXPECT_EQ(r.migrations[0].from, "fast");
  EXPECT_EQ(r.migrations[0].to, "slow");
  EXPECT_NEAR(r.migrations[0].at_s, 0.097, eps);
  EXPECT_EQ(r.migrations[1].to, "fast");
  EXPECT_GE(r.migrations[1].at_s, fg.end_s);
}

TEST(ShareSwitchflow, APreemptionDuringTheLastKernelsLetsTheStepFinish) {
  // fg asks at 0.0925 s: bg's kernel 8 runs (0.092–0.097) and its last, 9, is launched: the drain
  // ends the step at 0.102 s, which counts as done, not redone.
  const auto r = simulate_share(scenario(Policy::switchflow,
                                         {"bg=train:train:steps=20", "fg=infer:infer:batch=1:priority=high:requests=10:start=0.092"},
                                         gpu("slow")),
                                model);
  ASSERT_EQ(r.preemptions.size(), 1U);
  EXPECT_NEAR(r.preemptions[0].drain_s, 0.0095, eps);
  EXPECT_NEAR(r.preemptions[0].latency_s, 0.0095, eps);
  EXPECT_EQ(job(r, "bg").steps_redone, 0);
  EXPECT_EQ(job(r, "bg").steps_done, 20);
}

TEST(ShareSwitchflow, ALaunchBoundJobRunsNoFasterThanItsLaunches) {
  const ScriptedModel slow([](const JobSpec&) {
    StepProfile p;
    p.kernels_s.assign(100, 0.00001);
    p.launch_s = 0.0001;  // 10 µs kernels, 100 µs launches
    return p;
  });
  const auto r = simulate_share(scenario(Policy::switchflow, {"a=train:x:steps=10"}), slow);
  EXPECT_NEAR(job(r, "a").end_s, 10 * (100 * 0.0001 + 0.00001), 1e-9);
}

TEST(ShareTimeslice, TheHighJobWaitsForTheWholeStepInProgress) {
  // bg holds the slot for its second step (0.051–0.102 s); fg gets it next: 0.102 + 0.5 + 4 ms.
  const auto r = simulate_share(
      scenario(Policy::timeslice, {"bg=train:train:steps=20", "fg=infer:infer:batch=1:priority=high:requests=5:start=0.09"}), model);
  const auto& fg = job(r, "fg");
  EXPECT_NEAR(fg.latencies.samples()[0], 0.0165, eps);
  EXPECT_GT(nearest_rank_percentile(fg.latencies.samples(), 95), 0.05);  // later requests wait for bg's steps
  EXPECT_TRUE(r.preemptions.empty());
  EXPECT_EQ(job(r, "bg").steps_done, 20);
}

TEST(ShareSwitchflow, WithoutALowPriorityDeviceThePreemptedJobWaitsAndRedoes) {
  const auto r = simulate_share(
      scenario(Policy::switchflow, {"bg=train:train:steps=20", "fg=infer:infer:batch=1:priority=high:requests=50:start=0.09"}),
      model);
  const auto& fg = job(r, "fg");
  // Each request: its host stage, at most bg's two launched kernels to drain, its own kernels.
  for (const double latency : fg.latencies.samples()) EXPECT_LE(latency, 0.0005 + 0.010 + 0.004 + eps);
  EXPECT_GT(r.preemptions.size(), 1U);
  const auto& bg = job(r, "bg");
  EXPECT_EQ(bg.migrations, 0);
  EXPECT_EQ(bg.steps_done, 20);
  EXPECT_EQ(bg.steps_redone, static_cast<std::int64_t>(r.preemptions.size()));
}

TEST(ShareSwitchflow, TwoLowJobsShareTheLowPriorityGpuOneExecutorAtATime) {
  const auto r = simulate_share(scenario(Policy::switchflow,
                                         {"a=train:train:steps=30", "b=train:train:steps=30",
                                          "fg=infer:infer:batch=1:priority=high:requests=200:start=0.2"},
                                         gpu("slow")),
                                model);
  const auto& fg = job(r, "fg");
  const auto& a = job(r, "a");
  const auto& b = job(r, "b");
  EXPECT_GT(a.steps_on_lpu, 0);
  EXPECT_GT(b.steps_on_lpu, 0);
  EXPECT_EQ(a.steps_done, 30);
  EXPECT_EQ(b.steps_done, 30);
  // Exclusive on the LPU too: its busy time is at most the time fg was there plus the transfers.
  ASSERT_EQ(r.devices.size(), 2U);
  EXPECT_LE(r.devices[1].busy_s, r.makespan_s);
  // fg after its first request never waits for a low job's kernel on the shared GPU.
  for (std::size_t i = 2; i < fg.latencies.samples().size(); ++i) EXPECT_NEAR(fg.latencies.samples()[i], 0.0045, eps) << i;
}

TEST(ShareSwitchflow, RepeatedPreemptionsMoveTheJobAwayAndBackEachTime) {
  const auto r = simulate_share(scenario(Policy::switchflow,
                                         {"bg=train:train:steps=60", "fg1=infer:infer:batch=1:priority=high:requests=20:start=0.09",
                                          "fg2=infer:infer:batch=1:priority=high:requests=20:start=1.5"},
                                         gpu("slow")),
                                model);
  const auto& bg = job(r, "bg");
  EXPECT_EQ(bg.migrations, 4);
  EXPECT_EQ(bg.steps_done, 60);
  EXPECT_GE(bg.steps_redone, 1);
  EXPECT_EQ(r.migrations.size(), 4U);
  for (std::size_t i = 0; i < r.migrations.size(); ++i) EXPECT_EQ(r.migrations[i].to, i % 2 == 0 ? "slow" : "fast") << i;
}

TEST(ShareSwitchflow, ACpuLowPriorityDeviceSlowsTheHostOfTheOthers) {
  const auto r = simulate_share(
      scenario(Policy::switchflow, {"bg=train:train:steps=10", "fg=infer:infer:batch=1:priority=high:requests=100:start=0.09"},
               cpu()),
      model);
  const auto& fg = job(r, "fg");
  // While bg computes on the CPU (12× slower), fg's host stage takes 1.5 × 0.5 ms.
  EXPECT_NEAR(nearest_rank_percentile(fg.latencies.samples(), 50), 0.00075 + 0.004, eps);
  EXPECT_GT(job(r, "bg").steps_on_lpu, 0);
}

TEST(ShareMemory, ThreadsDieTogetherMpsFailsTheNewcomerSwitchflowFits) {
  // bg needs 1 + 2 GB, fg 0.1 + 0.1 GB.
  auto s = scenario(Policy::threads, {"bg=train:train:steps=20", "fg=infer:infer:batch=1:priority=high:requests=5:start=0.09"});
  s.gpu = gpu("fast", 3.1e9);
  auto r = simulate_share(s, model);
  EXPECT_TRUE(job(r, "bg").out_of_memory);
  EXPECT_TRUE(job(r, "fg").out_of_memory);
  EXPECT_NEAR(job(r, "bg").end_s, 0.09, eps);

  s.policy = Policy::mps;  // bg alone: 3 GB + a 0.5 GB process; fg's process does not fit beside it
  s.gpu = gpu("fast", 3.6e9);
  r = simulate_share(s, model);
  EXPECT_FALSE(job(r, "bg").out_of_memory);
  EXPECT_TRUE(job(r, "bg").finished);
  EXPECT_TRUE(job(r, "fg").out_of_memory);

  s.policy = Policy::switchflow;  // 1.1 GB of weights + the larger step's 2 GB
  s.gpu = gpu("fast", 3.1e9);
  r = simulate_share(s, model);
  EXPECT_FALSE(job(r, "bg").out_of_memory);
  EXPECT_FALSE(job(r, "fg").out_of_memory);
  EXPECT_TRUE(job(r, "fg").finished);
}

TEST(ShareMps, ConcurrentJobsShareTheCapacity) {
  const auto r = simulate_share(scenario(Policy::mps, {"a=train:pure:steps=10", "b=train:pure:steps=10"}), model);
  // Both always busy: each at 1.4 / 2 of its speed.
  EXPECT_NEAR(job(r, "a").end_s, 10 * 0.05 / 0.7, 1e-9);
  EXPECT_NEAR(job(r, "b").end_s, 10 * 0.05 / 0.7, 1e-9);
  EXPECT_NEAR(job(r, "a").throughput_items_s, 320.0 / (0.5 / 0.7), 1e-6);
}

TEST(ShareEnergy, IdleAndBusyPowerIntegrateOverTheRun) {
  const auto r = simulate_share(scenario(Policy::switchflow, {"bg=train:train:steps=20"}), model);
  ASSERT_EQ(r.devices.size(), 1U);
  EXPECT_NEAR(r.makespan_s, 20 * 0.051, eps);
  EXPECT_NEAR(r.devices[0].busy_s, 1.0, eps);
  EXPECT_NEAR(r.devices[0].energy_j, 200.0 * 1.0 + 50.0 * 0.02, 1e-6);
}

TEST(ShareJobs, UntilAndWarmup) {
  const auto r = simulate_share(
      scenario(Policy::threads, {"bg=train:train:until=fg", "fg=infer:infer:batch=1:requests=13:warmup=3:start=0.5"}), model);
  const auto& fg = job(r, "fg");
  EXPECT_EQ(fg.steps_done, 13);
  EXPECT_EQ(fg.latencies.samples().size(), 10U);  // the 3 warm-up requests are not measured
  const auto& bg = job(r, "bg");
  EXPECT_TRUE(bg.finished);
  EXPECT_GE(bg.end_s, fg.end_s);           // it ran until fg ended, to its next step boundary
  EXPECT_LT(bg.end_s, fg.end_s + 0.052);
}

TEST(ShareJobs, OpenLoopRequestsArriveOnScheduleAndQueue) {
  // 4.5 ms per request alone; at 100/s each is served at once; at 400/s they queue.
  const auto slow = simulate_share(scenario(Policy::switchflow, {"fg=infer:infer:batch=1:requests=20:rate=100"}), model);
  const auto& a = job(slow, "fg");
  for (const double latency : a.latencies.samples()) EXPECT_NEAR(latency, 0.0045, eps);
  EXPECT_NEAR(a.end_s, 19 * 0.01 + 0.0045, eps);
  const auto fast = simulate_share(scenario(Policy::switchflow, {"fg=infer:infer:batch=1:requests=20:rate=400"}), model);
  const auto& b = job(fast, "fg");
  EXPECT_NEAR(b.latencies.samples().back(), 20 * 0.0045 - 19 * 0.0025, eps);  // the queue grew by 2 ms a request
}

TEST(ShareHost, InputPipelinesShareTheHostsCores) {
  // Two jobs whose 10 ms host stage is an input pipeline, on a host that runs one at full speed.
  // switchflow: both pipelines at half speed until 20 ms, then the two kernels one after the other.
  const auto flow = simulate_share(scenario(Policy::switchflow, {"a=infer:x:requests=1", "b=infer:x:requests=1"}), pipelines);
  EXPECT_NEAR(job(flow, "a").end_s, 0.021, eps);
  EXPECT_NEAR(job(flow, "b").end_s, 0.022, eps);
  // timeslice: one whole step (host and kernel) at a time.
  const auto slices = simulate_share(scenario(Policy::timeslice, {"a=infer:x:requests=1", "b=infer:x:requests=1"}), pipelines);
  EXPECT_NEAR(job(slices, "a").end_s, 0.011, eps);
  EXPECT_NEAR(job(slices, "b").end_s, 0.022, eps);
}

TEST(ShareHost, AReuseGroupRunsOnePipelinePerBatchInLockStep) {
  // Each with its own pipeline: both at half speed, 20 ms, then a's kernel (20-21 ms) and b's (21-22 ms).
  // Each next pipeline starts when its job's kernel ends, so a's runs alone for 1 ms, then both share:
  // a's ends at 40 ms, b's at 41 ms, kernels 40-41 and 41-42 ms; the third batch the same, 20 ms later.
  const auto own = simulate_share(scenario(Policy::switchflow, {"a=infer:x:requests=3", "b=infer:x:requests=3"}), pipelines);
  EXPECT_NEAR(job(own, "a").end_s, 0.061, eps);
  EXPECT_NEAR(job(own, "b").end_s, 0.062, eps);
  // One shared pipeline per batch (10 ms), then a's kernel and b's; the next batch when both are done.
  const auto shared = simulate_share(
      scenario(Policy::switchflow, {"a=infer:x:requests=3:reuse=g", "b=infer:x:requests=3:reuse=g"}), pipelines);
  EXPECT_NEAR(job(shared, "a").end_s, 3 * 0.012 - 0.001, eps);
  EXPECT_NEAR(job(shared, "b").end_s, 3 * 0.012, eps);
}

TEST(ShareHost, AReuseGroupsPipelineCostsWhatItsDearestMembersWould) {
  const ScriptedModel sizes([](const JobSpec& job) {
    StepProfile p;
    p.host_s = job.model == "big" ? 0.020 : 0.010;  // e.g. 299 x 299 images against 224 x 224
    p.kernels_s = {0.001};
    return p;
  });
  // Whichever member comes last, each batch takes the 20 ms pipeline, then a's and b's kernels.
  const auto r = simulate_share(
      scenario(Policy::switchflow, {"a=infer:small:requests=2:reuse=g", "b=infer:big:requests=2:reuse=g"}), sizes);
  EXPECT_NEAR(job(r, "a").end_s, 2 * 0.022 - 0.001, eps);
  EXPECT_NEAR(job(r, "b").end_s, 2 * 0.022, eps);
}

// "gapped": one 10 ms kernel, then 5 ms of the step's own host work holding the device; "infer":
// one 1 ms kernel. No host stages.
const ScriptedModel gaps([](const JobSpec& job) {
  StepProfile p;
  if (job.model == "gapped") {
    p.kernels_s = {0.010};
    p.device_gap_s = 0.005;
  } else {
    p.kernels_s = {0.001};
  }
  return p;
});

TEST(ShareDeviceGap, AnExclusiveStepHoldsTheGpuThroughItsGapOneStreamDoesNot) {
  // timeslice: a owns the GPU 0-15 ms (kernel, then its gap), b 15-30 ms.
  const auto slices = simulate_share(scenario(Policy::timeslice, {"a=train:gapped:steps=1", "b=train:gapped:steps=1"}), gaps);
  EXPECT_NEAR(job(slices, "a").end_s, 0.015, eps);
  EXPECT_NEAR(job(slices, "b").end_s, 0.030, eps);
  // threads: b's kernel runs in a's gap (10-20 ms); a ends at 15 ms, b at 25.
  const auto threads = simulate_share(scenario(Policy::threads, {"a=train:gapped:steps=1", "b=train:gapped:steps=1"}), gaps);
  EXPECT_NEAR(job(threads, "a").end_s, 0.015, eps);
  EXPECT_NEAR(job(threads, "b").end_s, 0.025, eps);
}

TEST(ShareDeviceGap, APreemptionDuringTheGapLetsTheStepEndInsteadOfRedoingIt) {
  // bg's kernel runs 0-10 ms, its gap 10-15; fg asks at 12 ms and gets the GPU when the gap
  // ends (15-16 ms); bg's second step follows: 16-26 ms, gap to 31.
  const auto r = simulate_share(
      scenario(Policy::switchflow, {"bg=train:gapped:steps=2", "fg=infer:infer:batch=1:priority=high:requests=1:start=0.012"}), gaps);
  EXPECT_EQ(job(r, "bg").steps_redone, 0);
  ASSERT_EQ(job(r, "fg").latencies.samples().size(), 1U);
  EXPECT_NEAR(job(r, "fg").latencies.samples()[0], 0.004, eps);
  ASSERT_EQ(r.preemptions.size(), 1U);
  EXPECT_NEAR(r.preemptions[0].drain_s, 0.003, eps);
  EXPECT_NEAR(r.preemptions[0].latency_s, 0.003, eps);
  EXPECT_NEAR(job(r, "bg").end_s, 0.031, eps);
}

TEST(ShareDeterminism, TheSameScenarioGivesTheSameResult) {
  const auto s = scenario(Policy::switchflow,
                          {"a=train:train:steps=30", "b=train:train:steps=30", "fg=infer:infer:batch=1:priority=high:requests=70:start=0.2"},
                          gpu("slow"));
  const auto r1 = simulate_share(s, model);
  const auto r2 = simulate_share(s, model);
  ASSERT_EQ(r1.jobs.size(), r2.jobs.size());
  for (std::size_t i = 0; i < r1.jobs.size(); ++i) {
    EXPECT_EQ(r1.jobs[i].latencies, r2.jobs[i].latencies);
    EXPECT_EQ(r1.jobs[i].end_s, r2.jobs[i].end_s);
  }
  EXPECT_EQ(r1.devices[0].energy_j, r2.devices[0].energy_j);
}

// Records what it is shown; changes nothing.
class RecordingObserver final : public ShareObserver {
 public:
  void on_time(double now_s) override { times.push_back(now_s); }
  void on_window(const ShareProgress& progress) override { windows.push_back(progress); }
  std::vector<double> times;
  std::vector<ShareProgress> windows;
};

TEST(ShareObserver, WatchingChangesNoResultAndTheWindowsEndWithTheLastJob) {
  auto s = scenario(Policy::switchflow,
                    {"a=train:train:steps=30", "fg=infer:infer:batch=1:priority=high:requests=70:start=0.2"}, gpu("slow"));
  s.window_s = 0.07;  // not a divisor of the makespan: the last window is partial
  const auto unobserved = simulate_share(s, model);
  RecordingObserver observer;
  s.observer = &observer;
  const auto observed = simulate_share(s, model);
  ASSERT_EQ(unobserved.jobs.size(), observed.jobs.size());
  for (std::size_t i = 0; i < observed.jobs.size(); ++i) {
    EXPECT_EQ(unobserved.jobs[i].latencies, observed.jobs[i].latencies);
    EXPECT_EQ(unobserved.jobs[i].end_s, observed.jobs[i].end_s);
    EXPECT_EQ(unobserved.jobs[i].throughput_items_s, observed.jobs[i].throughput_items_s);
  }
  EXPECT_EQ(unobserved.makespan_s, observed.makespan_s);
  EXPECT_EQ(unobserved.devices[0].energy_j, observed.devices[0].energy_j);  // no idle tail after the last job
  EXPECT_EQ(unobserved.devices[0].busy_s, observed.devices[0].busy_s);
  EXPECT_EQ(unobserved.preemptions.size(), observed.preemptions.size());
  EXPECT_TRUE(observed.windows.empty());  // the observer's windows are not results

  // Back to back from 0 to the end of the last job; their energy is the GPU's.
  ASSERT_GE(observer.windows.size(), 10U);
  EXPECT_EQ(observer.windows.front().window.start_s, 0.0);
  for (std::size_t i = 1; i < observer.windows.size(); ++i) {
    EXPECT_EQ(observer.windows[i].window.start_s, observer.windows[i - 1].window.end_s);
  }
  EXPECT_EQ(observer.windows.back().window.end_s, observed.makespan_s);
  EXPECT_NEAR(observer.windows.back().gpu_energy_j, observed.devices[0].energy_j, 1e-9);
  double energy_j = 0.0;
  for (const auto& w : observer.windows) energy_j += w.window.mean_power_w * (w.window.end_s - w.window.start_s);
  EXPECT_NEAR(energy_j, observed.devices[0].energy_j, 1e-9);
  EXPECT_EQ(observer.windows.back().preemptions, static_cast<std::int64_t>(observed.preemptions.size()));
  EXPECT_TRUE(std::is_sorted(observer.times.begin(), observer.times.end()));
}

// A job of many requests beside a training job it preempts at every request (no LPU). The memory
// bound checked is on what the result holds, not the process's RSS: the first kListedEvents (1000)
// preemptions in full, every one counted and timed in a LatencyRecord, and the requests' latencies
// in a LatencyRecord, which never holds more than kExactSamples doubles (exact here). The figures
// still cover every request and every preemption. (Before, the result kept one record per
// preemption and one double per request: 10^8 of each for requests=100000000.)
TEST(ShareMemory, ManyRequestsKeepABoundedResult) {
  constexpr int requests = 3000;
  const auto s = scenario(Policy::switchflow,
                          {"bg=train:train:until=fg", "fg=infer:infer:batch=1:priority=high:requests=" + std::to_string(requests)});
  const auto r = simulate_share(s, model);
  const auto& fg = job(r, "fg");
  const auto& bg = job(r, "bg");
  EXPECT_EQ(fg.latencies.count(), requests);
  EXPECT_TRUE(fg.latencies.exact());
  EXPECT_LE(fg.latencies.storage_bytes(), LatencyRecord::kExactSamples * sizeof(double));
  // Every request: its host stage, at most bg's two launched kernels to drain, its own kernels.
  EXPECT_LE(fg.latencies.max_s(), 0.0005 + 0.010 + 0.004 + eps);

  ASSERT_GT(r.preemption_count, static_cast<std::int64_t>(kListedEvents));
  EXPECT_EQ(r.preemptions.size(), kListedEvents);
  EXPECT_EQ(r.preemption_count, bg.steps_redone);  // each one made bg redo its step
  EXPECT_EQ(r.preemption_latencies.count(), r.preemption_count);
  EXPECT_GT(r.preemption_latencies.min_s(), 0.0);
  EXPECT_LE(r.preemption_latencies.max_s(), 0.010 + eps);  // ask → first kernel: bg's drain at most
  for (std::size_t i = 1; i < r.preemptions.size(); ++i) EXPECT_LT(r.preemptions[i - 1].at_s, r.preemptions[i].at_s) << i;
  // The listed ones are the first: the same as in a run of fewer requests.
  const auto few = simulate_share(scenario(Policy::switchflow, {"bg=train:train:until=fg", "fg=infer:infer:batch=1:priority=high:requests=500"}),
                                  model);
  ASSERT_EQ(few.preemption_count, static_cast<std::int64_t>(few.preemptions.size()));
  for (std::size_t i = 0; i + 1 < few.preemptions.size(); ++i) {
    EXPECT_EQ(few.preemptions[i].at_s, r.preemptions[i].at_s) << i;
    EXPECT_EQ(few.preemptions[i].latency_s, r.preemptions[i].latency_s) << i;
    EXPECT_EQ(few.preemptions[i].drain_s, r.preemptions[i].drain_s) << i;
  }
}

// Steps reach a StepSink as they complete (gpucap share --trace streams them to its file): the
// same steps record_steps keeps, and none kept when only the sink is given.
TEST(ShareTrace, AStepSinkGetsEveryStepAndTheResultKeepsNone) {
  class Collect final : public StepSink {
   public:
    void on_step(const StepRecord& step) override { steps.push_back(step); }
    std::vector<StepRecord> steps;
  };
  auto s = scenario(Policy::switchflow, {"bg=train:train:steps=20", "fg=infer:infer:batch=1:priority=high:requests=50:start=0.09"});
  s.record_steps = true;
  const auto recorded = simulate_share(s, model);
  s.record_steps = false;
  Collect sink;
  s.step_sink = &sink;
  const auto streamed = simulate_share(s, model);
  EXPECT_TRUE(streamed.steps.empty());
  ASSERT_EQ(sink.steps.size(), recorded.steps.size());
  ASSERT_EQ(sink.steps.size(), 70U);
  for (std::size_t i = 0; i < sink.steps.size(); ++i) {
    EXPECT_EQ(sink.steps[i].job, recorded.steps[i].job) << i;
    EXPECT_EQ(sink.steps[i].step, recorded.steps[i].step) << i;
    EXPECT_EQ(sink.steps[i].end_s, recorded.steps[i].end_s) << i;
  }
}

TEST(ShareScenario, BadScenariosAreUsageErrors) {
  auto s = scenario(Policy::switchflow, {"bg=train:train"}, gpu("fast"));
  EXPECT_THROW((void)simulate_share(s, model), Error);  // the LPU is the GPU itself
  s.lpu.reset();
  s.gpu = cpu();
  EXPECT_THROW((void)simulate_share(s, model), Error);
  EXPECT_THROW((void)parse_policy("gandiva"), Error);
  EXPECT_EQ(parse_policy("mps"), Policy::mps);
}

TEST(SharePercentile, NearestRank) {
  EXPECT_DOUBLE_EQ(nearest_rank_percentile({5, 1, 4, 2, 3}, 50), 3);
  EXPECT_DOUBLE_EQ(nearest_rank_percentile({5, 1, 4, 2, 3}, 95), 5);
  EXPECT_DOUBLE_EQ(nearest_rank_percentile({5, 1, 4, 2, 3}, 20), 1);
  EXPECT_DOUBLE_EQ(nearest_rank_percentile({}, 95), 0);
}

}  // namespace
}  // namespace gpucap::sched
