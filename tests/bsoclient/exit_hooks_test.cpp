// A training process that goes away mid-trial — SIGTERM, SIGINT, std::exit, an exception that
// escapes main — still ends its trial on the server; a signal then kills it as it would have
// without the client.

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <sstream>

#include "bsoclient/fake_bso_server.hpp"
#include "support/child_process.hpp"

namespace gpucap::bsoclient {
namespace {

struct Ready {
  std::string job_id;
  int trial_number = 0;
};

// Skips the client's log lines up to "READY JOB_ID TRIAL".
Ready wait_ready(test::ChildProcess& child) {
  for (;;) {
    const auto line = child.read_line(20.0);
    if (!line) throw std::runtime_error("the victim never got its trial");
    std::istringstream in(*line);
    std::string word;
    Ready ready;
    in >> word >> ready.job_id >> ready.trial_number;
    if (word == "READY") return ready;
  }
}

class ExitHooksTest : public ::testing::Test {
 protected:
  test::FakeBsoServer server;

  void expect_trial_failed(const Ready& ready) {
    const auto job = server.job(ready.job_id);
    ASSERT_TRUE(job.has_value());
    EXPECT_EQ(job->trials.at(static_cast<std::size_t>(ready.trial_number - 1)).status, bso::TrialStatus::failed);
  }
};

TEST_F(ExitHooksTest, SigtermEndsTheTrialThenKillsTheProcess) {
  for (const int signal_number : {SIGTERM, SIGINT}) {
    test::ChildProcess child({GPUCAP_BSO_CLIENT_VICTIM_PATH, server.url(), "sig", "signal"});
    const auto ready = wait_ready(child);
    const auto before = server.job(ready.job_id);
    ASSERT_EQ(before->trials.at(0).status, bso::TrialStatus::dispatched);
    child.signal(signal_number);
    const auto status = child.wait(20.0);
    ASSERT_TRUE(status.has_value()) << "the victim did not die";
    EXPECT_TRUE(WIFSIGNALED(*status)) << "status " << *status;
    EXPECT_EQ(WTERMSIG(*status), signal_number);
    expect_trial_failed(ready);
  }
}

TEST_F(ExitHooksTest, StdExitEndsTheTrial) {
  test::ChildProcess child({GPUCAP_BSO_CLIENT_VICTIM_PATH, server.url(), "exit", "exit"});
  const auto ready = wait_ready(child);
  const auto status = child.wait(20.0);
  ASSERT_TRUE(status.has_value());
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << "status " << *status;
  expect_trial_failed(ready);
}

TEST_F(ExitHooksTest, AnExceptionThatEscapesMainEndsTheTrial) {
  test::ChildProcess child({GPUCAP_BSO_CLIENT_VICTIM_PATH, server.url(), "crash", "terminate"});
  const auto ready = wait_ready(child);
  const auto status = child.wait(20.0);
  ASSERT_TRUE(status.has_value());
  EXPECT_TRUE(WIFSIGNALED(*status) && WTERMSIG(*status) == SIGABRT) << "status " << *status;
  expect_trial_failed(ready);
}

}  // namespace
}  // namespace gpucap::bsoclient
