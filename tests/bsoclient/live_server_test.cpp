// The BSO client against a live `gpucap bso serve` (the built binary, on 127.0.0.1 and a port it
// picks, over a fresh SQLite file): recurring runs, a run that throws, a run killed by SIGTERM,
// and — where LibTorch is — the example training program run a few times, reaching the target.

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <sstream>

#include "bsoclient/training_model.hpp"
#include "gpucap/bsoclient/client.hpp"
#include "gpucap/service/store.hpp"
#include "support/child_process.hpp"
#include "support/fake_gpu.hpp"
#include "support/paths.hpp"

namespace gpucap::bsoclient {
namespace {

// `gpucap bso serve` on a free port; SIGTERM (its clean stop) at the end.
class LiveServer {
 public:
  explicit LiveServer(const std::string& db_path)
      : db_path_(db_path),
        process_({GPUCAP_CLI_PATH, "bso", "serve", "--db", "sqlite:" + db_path, "--listen", "127.0.0.1:0"}) {
    const auto line = process_.read_line(20.0);
    if (!line) throw std::runtime_error("gpucap bso serve printed no address");
    const auto at = line->find("http://");
    if (at == std::string::npos) throw std::runtime_error("no address in: " + *line);
    url_ = line->substr(at, line->find(' ', at) - at);
  }
  ~LiveServer() {
    process_.signal(SIGTERM);
    (void)process_.wait(10.0);
  }
  LiveServer(const LiveServer&) = delete;
  LiveServer& operator=(const LiveServer&) = delete;

  [[nodiscard]] const std::string& url() const { return url_; }
  // The job as the server stored it (the test reads the same SQLite file).
  [[nodiscard]] bso::JobState job(const std::string& job_id) const {
    auto job = service::open_sqlite_store(db_path_)->load_job(job_id);
    if (!job) throw std::runtime_error("no job " + job_id);
    return *job;
  }

 private:
  std::string db_path_;
  test::ChildProcess process_;
  std::string url_;
};

bso::JobSpec recurring_job(const std::string& job_id) {
  bso::JobSpec job;
  job.job_id = job_id;
  job.job_id_prefix = "live";
  job.batch_sizes = {8, 16, 32, 64};
  job.default_batch_size = 16;
  job.max_epochs = 6;
  job.mab_seed = 3;
  return job;
}

class LiveServerTest : public ::testing::Test {
 protected:
  test::TempDir dir;
  LiveServer server{dir.file("bso.db")};
  test::FakeGpu gpu{"Fake GPU", true, 300.0};
  test::FakeClock clock;
  monitor::Monitor meter{{&gpu}, clock.function()};

  [[nodiscard]] ClientOptions options() const {
    ClientOptions o;
    o.http.server_url = server.url();
    o.end_trial_on_signal = false;
    return o;
  }
};

TEST_F(LiveServerTest, RecurringRunsPruneThenReachTheBandit) {
  const auto job = recurring_job("live-recurring");
  int failures = 0;
  for (int run = 1; run <= 12; ++run) {
    const auto outcome = test::train_once(options(), job, meter, gpu, clock);
    EXPECT_EQ(outcome.trial_number, run);
    failures += outcome.failed ? 1 : 0;
  }
  EXPECT_GE(failures, 1);
  const auto state = server.job("live-recurring");
  EXPECT_EQ(state.stage, bso::Stage::mab);
  ASSERT_EQ(state.trials.size(), 12u);
  for (const auto& trial : state.trials) {
    EXPECT_NE(trial.status, bso::TrialStatus::dispatched) << "trial " << trial.trial_number;
    EXPECT_NEAR(trial.time_s, trial.epochs * test::epoch_time_s(trial.batch_size), 1e-9);
    EXPECT_NEAR(trial.energy_j, trial.time_s * test::kTrainingPowerW, 1e-6);
  }
}

TEST_F(LiveServerTest, ARunThatThrowsEndsItsTrialAndTheServerRefusesItsReports) {
  const auto job = recurring_job("live-throws");
  bso::TrialId ended;
  try {
    BsoClient client(options(), job, meter);
    (void)client.get_batch_size();
    ended = *client.trial();
    client.on_train_begin();
    throw std::runtime_error("CUDA out of memory");
  } catch (const std::runtime_error&) {
  }
  EXPECT_EQ(server.job("live-throws").trials.at(0).status, bso::TrialStatus::failed);
  // The ended trial takes no more reports ...
  const JsonHttp http(options().http);
  const bso::TrainingResult late{ended, 10.0, 2000.0, 0.9, 1};
  try {
    (void)http.post("/report", to_json(late));
    FAIL() << "the server took a report for an ended trial";
  } catch (const BsoServerError& e) {
    EXPECT_GE(e.status(), 400);
    EXPECT_LT(e.status(), 500);
    EXPECT_FALSE(e.server_message().empty());
  }
  // ... and the next run gets a trial of its own.
  const auto next = test::train_once(options(), job, meter, gpu, clock);
  EXPECT_EQ(next.trial_number, 2);
}

TEST_F(LiveServerTest, SigtermEndsTheTrialOfAKilledRun) {
  test::ChildProcess victim({GPUCAP_BSO_CLIENT_VICTIM_PATH, server.url(), "live", "signal"});
  std::string job_id;
  int trial_number = 0;
  for (;;) {
    const auto line = victim.read_line(20.0);
    ASSERT_TRUE(line.has_value()) << "the victim never got its trial";
    std::istringstream in(*line);
    std::string word;
    in >> word >> job_id >> trial_number;
    if (word == "READY") break;
  }
  EXPECT_EQ(server.job(job_id).trials.at(0).status, bso::TrialStatus::dispatched);
  victim.signal(SIGTERM);
  const auto status = victim.wait(20.0);
  ASSERT_TRUE(status.has_value());
  EXPECT_TRUE(WIFSIGNALED(*status) && WTERMSIG(*status) == SIGTERM) << "status " << *status;
  EXPECT_EQ(server.job(job_id).trials.at(static_cast<std::size_t>(trial_number - 1)).status,
            bso::TrialStatus::failed);
}

#ifdef GPUCAP_BSO_TRAIN_PATH
// The example program, as a user runs it: a few recurrences on the CPU with the twin's meter.
TEST_F(LiveServerTest, TheExampleTrainingReachesItsTargetRunAfterRun) {
  int reached = 0;
  for (int run = 1; run <= 4; ++run) {
    test::ChildProcess train({GPUCAP_BSO_TRAIN_PATH, "--server", server.url(), "--job-prefix", "example",
                              "--batch-sizes", "16,32,64,128", "--default-batch-size", "32", "--target-metric",
                              "0.88", "--max-epochs", "12", "--seed", "1", "--mab-seed", "1", "--data-dir",
                              test::data_dir(), "--json"});
    std::string last;
    while (const auto line = train.read_line(60.0)) last = *line;
    const auto status = train.wait(60.0);
    ASSERT_TRUE(status.has_value() && WIFEXITED(*status)) << "run " << run;
    const int code = WEXITSTATUS(*status);
    EXPECT_TRUE(code == 0 || code == 3) << "run " << run << " exit " << code;  // 3: the optimizer stopped it
    const auto summary = nlohmann::json::parse(last);
    EXPECT_EQ(summary.at("trial_number").get<int>(), run);
    EXPECT_TRUE(summary.at("simulated").get<bool>());
    EXPECT_GT(summary.at("energy_j").get<double>(), 0.0);
    if (summary.at("reached_target").get<bool>()) {
      ++reached;
      EXPECT_GE(summary.at("accuracy").get<double>(), 0.88);
    }
  }
  EXPECT_GE(reached, 2);
  for (const auto& trial : server.job("example-example").trials) {
    EXPECT_NE(trial.status, bso::TrialStatus::dispatched) << "trial " << trial.trial_number;
  }
}
#endif

}  // namespace
}  // namespace gpucap::bsoclient
