// gpucap share --platform torch's runner on the CPU: real threads, real LibTorch steps, real
// preemption at stage boundaries and real moves of the state (tiny_cnn, exported in 3 stages for
// training by the torch_train_models fixture).

#include "gpucap/runtime/share_real.hpp"

#include <gtest/gtest.h>

#include <cstdlib>

#include "gpucap/core/error.hpp"

namespace gpucap::runtime {
namespace {

std::vector<RealShareJob> jobs(const std::vector<std::string>& specs) {
  setenv("GPUCAP_TORCH_ENGINE", GPUCAP_TORCH_PLUGIN_PATH, 1);
  std::vector<RealShareJob> out;
  for (const auto& text : specs) out.push_back(find_real_share_model(sched::parse_job_spec(text), GPUCAP_TEST_TRAIN_MODELS_DIR));
  return out;
}

const std::vector<std::string> kPair = {"bg=train:tiny_cnn:batch=16:until=fg",
                                        "fg=infer:tiny_cnn:batch=1:priority=high:requests=40:warmup=2:start=0.2"};

TEST(RealShare, SwitchflowPreemptsMovesTheJobAwayAndRunsItThere) {
  RealShareOptions o;
  o.policy = sched::Policy::switchflow;
  o.lpu = "cpu";
  o.threads = 1;
  const auto r = run_real_share(jobs(kPair), o);
  ASSERT_EQ(r.jobs.size(), 2U);
  const auto& bg = r.jobs[0];
  const auto& fg = r.jobs[1];
  EXPECT_EQ(fg.steps_done, 40);
  EXPECT_EQ(fg.latencies.count(), 38);
  EXPECT_GT(bg.steps_done, 0);
  EXPECT_GE(bg.migrations, 1);      // away when fg came (and back if fg ended before bg's last step)
  EXPECT_GT(bg.steps_on_lpu, 0);
  ASSERT_FALSE(r.migrations.empty());
  EXPECT_EQ(r.migrations[0].job, "bg");
  EXPECT_EQ(r.migrations[0].state_bytes, 51816.0);  // tiny_cnn: weights, BN statistics, momentum (worked out in torch_trainer_test)
  for (const auto& p : r.preemptions) {
    EXPECT_EQ(p.victim, "bg");
    EXPECT_GE(p.latency_s, 0.0);
  }
}

TEST(RealShare, ThreadsLetBothRunWithoutPreemption) {
  RealShareOptions o;
  o.policy = sched::Policy::threads;
  o.threads = 1;
  const auto r = run_real_share(jobs(kPair), o);
  EXPECT_TRUE(r.preemptions.empty());
  EXPECT_TRUE(r.migrations.empty());
  EXPECT_EQ(r.jobs[1].steps_done, 40);
  EXPECT_GT(r.jobs[0].steps_done, 0);
}

TEST(RealShare, BadInputIsAnError) {
  RealShareOptions o;
  o.policy = sched::Policy::mps;
  EXPECT_THROW((void)run_real_share(jobs(kPair), o), Error);
  EXPECT_THROW((void)find_real_share_model(sched::parse_job_spec("x=train:no_such_model"), GPUCAP_TEST_TRAIN_MODELS_DIR), Error);
  o.policy = sched::Policy::switchflow;
  EXPECT_THROW((void)run_real_share(jobs({"a=train:tiny_cnn:duration=2"}), o), Error);
  EXPECT_THROW((void)run_real_share(jobs({"a=infer:tiny_cnn:input=jpeg"}), o), Error);
  EXPECT_THROW((void)run_real_share(jobs({"a=infer:tiny_cnn:reuse=g", "b=infer:tiny_cnn:reuse=g"}), o), Error);
}

}  // namespace
}  // namespace gpucap::runtime
