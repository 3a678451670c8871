// The BSO client against the in-process server (fake_bso_server.hpp): registration, the
// lifecycle over many recurrences, errors, and the trial ending when a run goes away.

#include "gpucap/bsoclient/client.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>

#include "bsoclient/fake_bso_server.hpp"
#include "bsoclient/training_model.hpp"
#include "support/fake_gpu.hpp"

namespace gpucap::bsoclient {
namespace {

using test::FakeBsoServer;
using test::FakeClock;
using test::FakeGpu;

bso::JobSpec small_job(const std::string& prefix = "mlp") {
  bso::JobSpec job;
  job.job_id_prefix = prefix;
  job.batch_sizes = {8, 16, 32, 64};
  job.default_batch_size = 16;
  job.target_metric = 0.5;
  job.max_epochs = 6;
  job.mab_seed = 1;
  return job;
}

ClientOptions options_for(const FakeBsoServer& server) {
  ClientOptions options;
  options.http.server_url = server.url();
  options.end_trial_on_signal = false;
  return options;
}

TEST(GpuConfig, IsZeusesAndRefusesMixedModels) {
  FakeGpu a("A100", true, 400.9);
  FakeGpu b("A100", true, 400.9);
  const auto config = gpu_config_of({&a, &b});
  EXPECT_DOUBLE_EQ(config.max_power_w, 800.0);
  EXPECT_EQ(config.number_of_gpus, 2);
  EXPECT_EQ(config.gpu_model, "A100");
  FakeGpu v("V100");
  EXPECT_THROW((void)gpu_config_of({&a, &v}), Error);
  EXPECT_THROW((void)gpu_config_of({}), Error);
}

class ClientTest : public ::testing::Test {
 protected:
  FakeBsoServer server;
  FakeGpu gpu{"Fake GPU", true, 250.7};
  FakeClock clock;
  monitor::Monitor meter{{&gpu}, clock.function()};
};

TEST_F(ClientTest, RegistersTheJobWithTheGpusItMeasures) {
  FakeGpu second{"Fake GPU", true, 250.7};
  monitor::Monitor two{{&gpu, &second}, clock.function()};
  BsoClient client(options_for(server), small_job(), two);
  EXPECT_EQ(client.register_status(), 201);
  EXPECT_TRUE(client.job().job_id.starts_with("mlp-")) << client.job().job_id;
  EXPECT_DOUBLE_EQ(client.job().max_power, 500.0);  // floor(250.7 W) × 2, as Zeus does
  EXPECT_EQ(client.job().number_of_gpus, 2);
  EXPECT_EQ(client.job().gpu_model, "Fake GPU");
  ASSERT_TRUE(server.job(client.job().job_id).has_value());
}

TEST_F(ClientTest, RegistersAgainWhenTheJobExistsAndRefusesAnotherConfig) {
  auto job = small_job();
  job.job_id = "mlp-fixed";
  { BsoClient first(options_for(server), job, meter); EXPECT_EQ(first.register_status(), 201); }
  { BsoClient again(options_for(server), job, meter); EXPECT_EQ(again.register_status(), 200); }
  job.max_epochs = 7;
  try {
    BsoClient mismatch(options_for(server), job, meter);
    FAIL() << "a changed config was accepted";
  } catch (const BsoServerError& e) {
    EXPECT_EQ(e.status(), 409);
    EXPECT_EQ(e.code(), ErrorCode::usage);
    EXPECT_NE(e.server_message().find("another config"), std::string::npos) << e.what();
  }
}

TEST_F(ClientTest, RecurringRunsExploreEndEveryTrialAndReachTheBandit) {
  const auto job_id = [&] {
    BsoClient c(options_for(server), small_job(), meter);
    return c.job().job_id;
  }();
  auto job = small_job();
  job.job_id = job_id;
  int failures = 0;
  for (int run = 1; run <= 12; ++run) {
    const auto outcome = test::train_once(options_for(server), job, meter, gpu, clock);
    failures += outcome.failed ? 1 : 0;
    EXPECT_EQ(outcome.trial_number, run);
    const auto state = server.job(job_id);
    ASSERT_TRUE(state.has_value());
    const auto& trial = state->trials.at(static_cast<std::size_t>(run - 1));
    EXPECT_NE(trial.status, bso::TrialStatus::dispatched) << "run " << run;
    // What the server holds is the client's cumulative time and energy.
    EXPECT_EQ(trial.epochs, outcome.epochs);
    EXPECT_NEAR(trial.time_s, outcome.epochs * test::epoch_time_s(trial.batch_size), 1e-9);
    EXPECT_NEAR(trial.energy_j, trial.time_s * test::kTrainingPowerW, 1e-6);
  }
  EXPECT_GE(failures, 1);  // batch size 64 never reaches the target
  EXPECT_EQ(server.job(job_id)->stage, bso::Stage::mab);
  EXPECT_EQ(held_trial_count(), 0u);
}

TEST_F(ClientTest, AStopThatDidNotConvergeThrowsTheTrainFailedError) {
  auto job = small_job();
  job.batch_sizes = {64};
  job.default_batch_size = 64;
  job.max_epochs = 2;
  BsoClient client(options_for(server), job, meter);
  EXPECT_EQ(client.get_batch_size(), 64);
  client.on_train_begin();
  EXPECT_FALSE(client.on_evaluate(0.1));
  EXPECT_THROW((void)client.on_evaluate(0.2), BsoTrainFailedError);
  EXPECT_TRUE(client.training_finished());
  EXPECT_TRUE(client.on_evaluate(0.3));  // after the stop: nothing more is reported
  EXPECT_EQ(server.job(client.job().job_id)->trials.at(0).epochs, 2);
}

TEST_F(ClientTest, AnExceptionThatUnwindsEndsTheTrial) {
  std::string job_id;
  try {
    BsoClient client(options_for(server), small_job(), meter);
    job_id = client.job().job_id;
    (void)client.get_batch_size();
    client.on_train_begin();
    EXPECT_EQ(held_trial_count(), 1u);
    throw std::runtime_error("out of memory");
  } catch (const std::runtime_error&) {
  }
  EXPECT_EQ(server.job(job_id)->trials.at(0).status, bso::TrialStatus::failed);
  EXPECT_EQ(held_trial_count(), 0u);
}

TEST_F(ClientTest, OperationsOutOfOrderAndOtherRanksAreRefused) {
  BsoClient client(options_for(server), small_job(), meter);
  EXPECT_THROW((void)client.on_evaluate(0.5), Error);
  (void)client.get_batch_size();
  EXPECT_THROW((void)client.on_evaluate(0.5), Error);  // no on_train_begin
  auto other_rank = options_for(server);
  other_rank.rank = 1;
  BsoClient worker(other_rank, small_job(), meter);
  EXPECT_THROW((void)worker.get_batch_size(), Error);
}

TEST_F(ClientTest, GetBatchSizeHandsOutOneTrialPerRun) {
  BsoClient client(options_for(server), small_job(), meter);
  const int first = client.get_batch_size();
  EXPECT_EQ(client.get_batch_size(), first);
  EXPECT_EQ(server.job(client.job().job_id)->trials.size(), 1u);
}

TEST_F(ClientTest, ExplicitEndTrialIsIdempotent) {
  BsoClient client(options_for(server), small_job(), meter);
  (void)client.get_batch_size();
  client.end_trial();
  client.end_trial();
  EXPECT_EQ(server.job(client.job().job_id)->trials.at(0).status, bso::TrialStatus::failed);
}

TEST(ClientAuth, TheBearerTokenIsSentAndAWrongOneIsRefused) {
  FakeBsoServer server("s3cret");
  FakeGpu gpu;
  FakeClock clock;
  monitor::Monitor meter({&gpu}, clock.function());
  auto options = options_for(server);
  try {
    BsoClient client(options, small_job(), meter);
    FAIL() << "no token was accepted";
  } catch (const BsoServerError& e) {
    EXPECT_EQ(e.status(), 401);
    EXPECT_EQ(e.server_message(), "missing or wrong bearer token");
  }
  options.http.token = "s3cret";
  BsoClient client(options, small_job(), meter);
  EXPECT_GT(client.get_batch_size(), 0);
}

TEST(ClientErrors, NoServerIsAnIoErrorWithStatusZero) {
  FakeGpu gpu;
  FakeClock clock;
  monitor::Monitor meter({&gpu}, clock.function());
  ClientOptions options;
  options.http.server_url = "http://127.0.0.1:1";  // nothing listens on port 1
  options.http.connect_timeout_s = 1.0;
  try {
    BsoClient client(options, small_job(), meter);
    FAIL() << "registered with no server";
  } catch (const BsoServerError& e) {
    EXPECT_EQ(e.status(), 0);
    EXPECT_EQ(e.code(), ErrorCode::io);
  }
}

TEST(ClientErrors, ABadJobIsRefusedBeforeAnyRequest) {
  FakeGpu gpu;
  FakeClock clock;
  monitor::Monitor meter({&gpu}, clock.function());
  ClientOptions options;
  options.http.server_url = "http://127.0.0.1:1";
  auto job = small_job();
  job.default_batch_size = 12;  // not in batch_sizes
  try {
    BsoClient client(options, job, meter);
    FAIL();
  } catch (const BsoServerError&) {
    FAIL() << "the request was sent";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::usage);
    EXPECT_NE(std::string(e.what()).find("default_batch_size"), std::string::npos);
  }
}

TEST(ClientJson, ZeusShapes) {
  bso::TrainingResult r{{"j-1", 32, 3}, 12.5, 3000.0, 0.7, 2};
  EXPECT_EQ(to_json(r), nlohmann::json::parse(R"({"job_id":"j-1","batch_size":32,"trial_number":3,
      "time":12.5,"energy":3000.0,"metric":0.7,"current_epoch":2})"));
  auto job = small_job();
  job.max_power = 300;
  job.number_of_gpus = 1;
  job.gpu_model = "x";
  EXPECT_TRUE(job_request_json(job).at("job_id").is_null());
  EXPECT_THROW((void)trial_id_from_json({{"job_id", "j"}}), Error);
  const auto response = report_response_from_json({{"stop_train", true}, {"converged", false}, {"message", "m"}});
  EXPECT_TRUE(response.stop_train);
  EXPECT_FALSE(response.converged);
  EXPECT_EQ(response.message, "m");
}

}  // namespace
}  // namespace gpucap::bsoclient
