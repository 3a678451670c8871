// The real MPS path (runtime/mps.hpp) against a fake MPS control binary and fake worker processes
// (tests/support/fake_mps_control.cpp, fake_mps_worker.cpp): real processes, real pipes and
// signals, no GPU. Each test checks that nothing is left behind: no worker, no zombie, no daemon,
// no private directory.

#include "gpucap/runtime/mps.hpp"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "gpucap/core/error.hpp"
#include "gpucap/runtime/mps_protocol.hpp"
#include "gpucap/runtime/mps_worker.hpp"
#include "support/expect_error.hpp"
#include "support/paths.hpp"
#include "support/scoped_env.hpp"

namespace gpucap::runtime {
namespace {

using test::expect_error_from;
using test::ScopedEnv;
using test::TempDir;

constexpr const char* kFakeControl = GPUCAP_FAKE_MPS_CONTROL_PATH;
constexpr const char* kFakeWorker = GPUCAP_FAKE_MPS_WORKER_PATH;

// The fakes' rate at 100 %, in images/s (their default).
constexpr double kFakeRateImgS = 1000.0;

std::vector<std::string> lines_of(const std::string& path) {
  std::vector<std::string> lines;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) lines.push_back(line);
  return lines;
}

bool pid_gone(pid_t pid) { return kill(pid, 0) != 0 && errno == ESRCH; }

// This test process has no child left: every worker and control process was reaped.
bool no_children_left() {
  errno = 0;
  return waitpid(-1, nullptr, WNOHANG) == -1 && errno == ECHILD;
}

std::vector<std::string> private_dirs_in(const std::string& dir) {
  std::vector<std::string> found;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().filename().string().rfind("gpucap-mps-", 0) == 0) found.push_back(entry.path().string());
  }
  return found;
}

const MpsRunRequest kQuickRound{0.0, 0.02};

// A temporary directory, the fake daemon's state file in it, and pool options that use the fakes.
class MpsTest : public ::testing::Test {
 protected:
  MpsTest() : state_env_("GPUCAP_FAKE_MPS_STATE", dir_.file("mps-state.txt")) {}

  [[nodiscard]] MpsDaemonOptions daemon_options() const {
    MpsDaemonOptions options;
    options.control_binary = kFakeControl;
    options.base_dir = dir_.path();
    options.start_timeout_s = 5.0;
    options.stop_timeout_s = 5.0;
    return options;
  }

  [[nodiscard]] MpsPoolOptions pool_options(const std::string& faults = "") const {
    MpsPoolOptions options;
    options.worker_command = {kFakeWorker};
    options.worker_env = {{"GPUCAP_FAKE_MPS_WORKER_LOG", worker_log()}};
    if (!faults.empty()) options.worker_env.emplace_back("GPUCAP_FAKE_MPS_FAULT", faults);
    options.daemon = daemon_options();
    options.ready_timeout_s = 5.0;
    options.reply_slack_s = 2.0;
    options.quit_timeout_s = 2.0;
    return options;
  }

  [[nodiscard]] std::string worker_log() const { return dir_.file("workers.log"); }
  [[nodiscard]] std::vector<std::string> daemon_events() const { return lines_of(dir_.file("mps-state.txt")); }

  // The pool's failure or end left nothing behind.
  void expect_all_stopped(const std::vector<pid_t>& workers) const {
    for (const pid_t pid : workers) {
      EXPECT_TRUE(pid_gone(pid)) << "worker " << pid << " still exists";
    }
    EXPECT_TRUE(no_children_left());
    EXPECT_EQ(daemon_events(), (std::vector<std::string>{"start", "quit", "stopped"}));
    EXPECT_TRUE(private_dirs_in(dir_.path()).empty());
  }

  TempDir dir_;

 private:
  ScopedEnv state_env_;
};

std::vector<tune::Tenant> three_tenants() { return {{50, 16}, {25, 8}, {25, 4}}; }


// ---------------------------------------------------------------------------------------------
// The daemon

TEST_F(MpsTest, DaemonStartsInAPrivateDirectoryAndQuitsWhenStopped) {
  pid_t daemon_pid = 0;
  {
    MpsDaemon daemon(daemon_options());
    EXPECT_TRUE(daemon.running());
    daemon_pid = daemon.pid();
    EXPECT_GT(daemon_pid, 0);
    EXPECT_EQ(std::filesystem::path(daemon.directory()).parent_path(), std::filesystem::path(dir_.path()));
    EXPECT_TRUE(std::filesystem::is_directory(daemon.pipe_dir()));
    EXPECT_TRUE(std::filesystem::is_directory(daemon.log_dir()));
    EXPECT_EQ(daemon_events(), std::vector<std::string>{"start"});
    daemon.stop();
    EXPECT_FALSE(daemon.running());
    EXPECT_NO_THROW(daemon.stop()) << "idempotent";
  }
  EXPECT_TRUE(pid_gone(daemon_pid) || !process_alive(daemon_pid));
  EXPECT_EQ(daemon_events(), (std::vector<std::string>{"start", "quit", "stopped"}));
  EXPECT_TRUE(private_dirs_in(dir_.path()).empty());
}

TEST_F(MpsTest, DaemonDestructorStopsIt) {
  pid_t daemon_pid = 0;
  {
    const MpsDaemon daemon(daemon_options());
    daemon_pid = daemon.pid();
  }
  EXPECT_FALSE(process_alive(daemon_pid));
  EXPECT_EQ(daemon_events(), (std::vector<std::string>{"start", "quit", "stopped"}));
}

TEST_F(MpsTest, ADaemonLeftByAKilledGpucapIsStoppedByTheNextStart) {
  // A child plays a gpucap that starts its daemon and is then SIGKILLed: its daemon lives on.
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t victim = fork();
  if (victim == 0) {
    close(ready[0]);
    try {
      const MpsDaemon daemon(daemon_options());
      const std::string pid = std::to_string(daemon.pid()) + "\n";
      (void)!write(ready[1], pid.data(), pid.size());
      pause();
    } catch (...) {
    }
    _exit(1);
  }
  close(ready[1]);
  std::string said;
  char c = 0;
  while (said.find('\n') == std::string::npos && read(ready[0], &c, 1) == 1) said += c;
  close(ready[0]);
  ASSERT_FALSE(said.empty()) << "the victim did not start its daemon";
  const pid_t orphan_pid = std::stoi(said);
  kill(victim, SIGKILL);
  int status = 0;
  waitpid(victim, &status, 0);
  ASSERT_TRUE(process_alive(orphan_pid)) << "killed, the gpucap stopped nothing";
  ASSERT_EQ(private_dirs_in(dir_.path()).size(), 1u);

  // A daemon of a running gpucap (this process) is left alone...
  {
    MpsDaemon ours(daemon_options());  // ...and starting it ended the orphan
    EXPECT_FALSE(process_alive(orphan_pid));
    ASSERT_EQ(private_dirs_in(dir_.path()), std::vector<std::string>{ours.directory()});
    EXPECT_TRUE(recover_orphaned_mps_daemons(daemon_options()).empty());
    EXPECT_TRUE(ours.running());
  }
  EXPECT_EQ(daemon_events(),
            (std::vector<std::string>{"start", "quit", "stopped", "start", "quit", "stopped"}));
  EXPECT_TRUE(private_dirs_in(dir_.path()).empty());
  EXPECT_TRUE(no_children_left());
}

TEST_F(MpsTest, MissingControlBinaryIsAClearError) {
  auto options = daemon_options();
  options.control_binary = dir_.file("no-such-mps-control");
  expect_error_from([&] { const MpsDaemon daemon(options); }, ErrorCode::device,
                    "MPS control binary '" + options.control_binary + "' not found or not executable");
  options.control_binary.clear();
  const ScopedEnv env(kMpsControlEnv, "gpucap-test-no-such-mps-control");
  EXPECT_EQ(default_mps_control_binary(), "gpucap-test-no-such-mps-control");
  expect_error_from([&] { const MpsDaemon daemon(options); }, ErrorCode::device,
                    "MPS control binary 'gpucap-test-no-such-mps-control' not found on PATH (it comes with the "
                    "NVIDIA driver; set GPUCAP_MPS_CONTROL to its path)");
  EXPECT_TRUE(daemon_events().empty());
  EXPECT_TRUE(private_dirs_in(dir_.path()).empty());
}

TEST_F(MpsTest, ADaemonThatFailsToStartIsAClearErrorAndLeavesNothing) {
  const ScopedEnv mode("GPUCAP_FAKE_MPS_MODE", "fail-start");
  expect_error_from([&] { const MpsDaemon daemon(daemon_options()); }, ErrorCode::device,
                    "cannot start the MPS control daemon: '" + std::string(kFakeControl) +
                        " -d' exited with status 1: An instance of this daemon is already running");
  EXPECT_TRUE(private_dirs_in(dir_.path()).empty());
  EXPECT_TRUE(no_children_left());
}

TEST_F(MpsTest, ADaemonThatNeverComesUpTimesOut) {
  const ScopedEnv mode("GPUCAP_FAKE_MPS_MODE", "never-up");
  auto options = daemon_options();
  options.start_timeout_s = 0.2;
  expect_error_from([&] { const MpsDaemon daemon(options); }, ErrorCode::device,
                    "the MPS control daemon did not come up within 0.2 s");
  EXPECT_TRUE(private_dirs_in(dir_.path()).empty());
  EXPECT_TRUE(no_children_left());
}

TEST_F(MpsTest, ADaemonThatIgnoresQuitIsKilledAndReported) {
  const ScopedEnv mode("GPUCAP_FAKE_MPS_MODE", "ignore-quit");
  auto options = daemon_options();
  options.stop_timeout_s = 0.2;
  MpsDaemon daemon(options);
  const pid_t pid = daemon.pid();
  expect_error_from([&] { daemon.stop(); }, ErrorCode::device, "did not quit within 0.2 s and was killed");
  EXPECT_FALSE(process_alive(pid));
  EXPECT_TRUE(private_dirs_in(dir_.path()).empty());
}

// ---------------------------------------------------------------------------------------------
// The worker pool

TEST_F(MpsTest, ThreeTenantsRunARoundEachWithItsOwnShare) {
  std::vector<pid_t> pids;
  {
    MpsWorkerPool pool(pool_options(), three_tenants());
    ASSERT_NE(pool.daemon(), nullptr);
    const auto pipe_dir = pool.daemon()->pipe_dir();
    pids = pool.worker_pids();
    ASSERT_EQ(pids.size(), 3u);
    const auto round = pool.run_round(std::vector<int>{16, 8, 4}, kQuickRound);
    ASSERT_EQ(round.tenants.size(), 3u);
    const std::vector<int> shares{50, 25, 25};
    const std::vector<int> batches{16, 8, 4};
    double total_img_s = 0.0;
    for (std::size_t i = 0; i < 3; ++i) {
      const auto& t = round.tenants[i];
      EXPECT_EQ(t.tenant, static_cast<int>(i));
      EXPECT_EQ(t.share_pct, shares[i]);
      EXPECT_EQ(t.batch_requested, batches[i]);
      EXPECT_EQ(t.batch_used, batches[i]);
      EXPECT_NEAR(t.throughput_img_s, kFakeRateImgS * shares[i] / 100.0, 1.0) << "the fake scales with its share";
      total_img_s += t.throughput_img_s;
    }
    EXPECT_NEAR(round.throughput_img_s, total_img_s, 1e-9);
    EXPECT_EQ(round.images, round.tenants[0].images + round.tenants[1].images + round.tenants[2].images);
    // Each worker saw its own share and the private daemon's pipe directory.
    const auto log = lines_of(worker_log());
    ASSERT_EQ(log.size(), 3u);
    for (std::size_t i = 0; i < 3; ++i) {
      const auto expected = "tenant=" + std::to_string(i) + " share=" + std::to_string(shares[i]) + " pipe=" +
                            pipe_dir + " pid=" + std::to_string(pids[i]);
      EXPECT_NE(std::find(log.begin(), log.end(), expected), log.end()) << expected;
    }
  }
  expect_all_stopped(pids);
}

TEST_F(MpsTest, ChangingOnlyBatchesKeepsTheWorkers) {
  MpsWorkerPool pool(pool_options(), three_tenants());
  const auto pids = pool.worker_pids();
  (void)pool.run_round(std::vector<int>{16, 8, 4}, kQuickRound);
  const auto round = pool.run_round(std::vector<tune::Tenant>{{50, 32}, {25, 2}, {25, 1}}, kQuickRound);
  EXPECT_EQ(pool.worker_pids(), pids);
  EXPECT_EQ(pool.worker_starts(), 1);
  EXPECT_EQ(round.tenants[0].batch_used, 32);
  EXPECT_EQ(round.tenants[2].batch_used, 1);
  EXPECT_EQ(pool.tenants(), (std::vector<tune::Tenant>{{50, 32}, {25, 2}, {25, 1}}));
  EXPECT_EQ(lines_of(worker_log()).size(), 3u);
}

TEST_F(MpsTest, ChangingSharesRestartsTheWorkersButNotTheDaemon) {
  MpsWorkerPool pool(pool_options(), three_tenants());
  const auto old_pids = pool.worker_pids();
  const pid_t daemon_pid = pool.daemon()->pid();
  const auto round = pool.run_round(std::vector<tune::Tenant>{{40, 8}, {30, 8}}, kQuickRound);
  EXPECT_EQ(pool.worker_starts(), 2);
  ASSERT_EQ(round.tenants.size(), 2u);
  EXPECT_EQ(round.tenants[0].share_pct, 40);
  EXPECT_EQ(round.tenants[1].share_pct, 30);
  for (const pid_t pid : old_pids) {
    EXPECT_TRUE(pid_gone(pid)) << "old worker " << pid << " was reaped";
  }
  const auto new_pids = pool.worker_pids();
  ASSERT_EQ(new_pids.size(), 2u);
  const auto log = lines_of(worker_log());
  ASSERT_EQ(log.size(), 5u);
  EXPECT_NE(std::find(log.begin(), log.end(),
                      "tenant=1 share=30 pipe=" + pool.daemon()->pipe_dir() + " pid=" + std::to_string(new_pids[1])),
            log.end());
  EXPECT_EQ(pool.daemon()->pid(), daemon_pid);
  EXPECT_EQ(daemon_events(), std::vector<std::string>{"start"});
}

TEST_F(MpsTest, BadPartitionsAreRejectedBeforeAnythingStarts) {
  expect_error_from([&] { const MpsWorkerPool pool(pool_options(), {{50, 8}, {55, 8}}); }, ErrorCode::usage,
                    "add up to 105 %");
  expect_error_from([&] { const MpsWorkerPool pool(pool_options(), {{50, 8}, {23, 8}}); }, ErrorCode::usage,
                    "share 23 %");
  expect_error_from([&] { const MpsWorkerPool pool(pool_options(), {{50, 0}}); }, ErrorCode::usage,
                    "batch size 0");
  expect_error_from([&] { const MpsWorkerPool pool(pool_options(), {}); }, ErrorCode::usage, "no MPS shares");
  auto options = pool_options();
  options.worker_command = {dir_.file("no-such-worker")};
  expect_error_from([&] { const MpsWorkerPool pool(options, three_tenants()); }, ErrorCode::usage,
                    "MPS worker program '" + dir_.file("no-such-worker") + "' not found");
  EXPECT_TRUE(daemon_events().empty()) << "no daemon was started";
  EXPECT_TRUE(lines_of(worker_log()).empty()) << "no worker was started";
  EXPECT_TRUE(no_children_left());
}

TEST_F(MpsTest, BadBatchesForARoundAreRejectedAndThePoolGoesOn) {
  MpsWorkerPool pool(pool_options(), three_tenants());
  const auto pids = pool.worker_pids();
  expect_error_from([&] { (void)pool.run_round(std::vector<int>{8, 8}, kQuickRound); }, ErrorCode::usage,
                    "2 batch sizes [8,8] for 3 MPS tenants");
  expect_error_from([&] { (void)pool.run_round(std::vector<int>{8, -1, 8}, kQuickRound); }, ErrorCode::usage,
                    "batch size -1");
  expect_error_from([&] { (void)pool.run_round(std::vector<tune::Tenant>{{60, 8}, {60, 8}}, kQuickRound); },
                    ErrorCode::usage, "add up to 120 %");
  EXPECT_FALSE(pool.failed());
  EXPECT_EQ(pool.worker_pids(), pids);
  EXPECT_EQ(pool.run_round(std::vector<int>{8, 8, 8}, kQuickRound).tenants.size(), 3u);
}

TEST_F(MpsTest, AWorkerCrashMidRoundNamesItAndStopsEverything) {
  std::vector<pid_t> pids;
  {
    MpsWorkerPool pool(pool_options("1:abort:2"), three_tenants());
    pids = pool.worker_pids();
    (void)pool.run_round(std::vector<int>{16, 8, 4}, kQuickRound);
    expect_error_from([&] { (void)pool.run_round(std::vector<int>{16, 8, 4}, kQuickRound); }, ErrorCode::device,
                      "MPS worker of tenant 1 (share 25 %, pid " + std::to_string(pids[1]) +
                          ") died before it sent the result of its round: it was killed by signal 6 (SIGABRT); "
                          "every MPS worker was stopped and the MPS daemon stopped");
    EXPECT_TRUE(pool.failed());
    EXPECT_EQ(pool.daemon(), nullptr);
    expect_all_stopped(pids);
    expect_error_from([&] { (void)pool.run_round(std::vector<int>{16, 8, 4}, kQuickRound); }, ErrorCode::device,
                      "stopped after an earlier failure");
  }  // and the pool is destroyed without throwing
  expect_all_stopped(pids);
}

TEST_F(MpsTest, AWorkerKilledBetweenRoundsIsReportedWithItsSignal) {
  MpsWorkerPool pool(pool_options(), three_tenants());
  const auto pids = pool.worker_pids();
  ASSERT_EQ(kill(pids[2], SIGKILL), 0);
  expect_error_from([&] { (void)pool.run_round(std::vector<int>{16, 8, 4}, kQuickRound); }, ErrorCode::device,
                    "tenant 2 (share 25 %, pid " + std::to_string(pids[2]) + ")");
  expect_all_stopped(pids);
}

TEST_F(MpsTest, AWorkerThatKillsItselfIsReported) {
  MpsWorkerPool pool(pool_options("2:sigkill:1"), three_tenants());
  const auto pids = pool.worker_pids();
  expect_error_from([&] { (void)pool.run_round(std::vector<int>{16, 8, 4}, kQuickRound); }, ErrorCode::device,
                    "tenant 2 (share 25 %, pid " + std::to_string(pids[2]) +
                        ") died before it sent the result of its round: it was killed by signal 9 (SIGKILL)");
  expect_all_stopped(pids);
}

TEST_F(MpsTest, AHangingWorkerTimesOutAndEverythingStops) {
  auto options = pool_options("0:hang:1");
  options.reply_slack_s = 0.2;
  MpsWorkerPool pool(options, three_tenants());
  const auto pids = pool.worker_pids();
  const double start_s = steady_now_s();
  expect_error_from([&] { (void)pool.run_round(std::vector<int>{16, 8, 4}, kQuickRound); }, ErrorCode::device,
                    "MPS worker of tenant 0 (share 50 %, pid " + std::to_string(pids[0]) +
                        ") did not send the result of its round within 0.22 s");
  EXPECT_LT(steady_now_s() - start_s, 2.0);
  expect_all_stopped(pids);
}

TEST_F(MpsTest, GarbageFromAWorkerIsAnError) {
  MpsWorkerPool pool(pool_options("2:garbage:1"), three_tenants());
  const auto pids = pool.worker_pids();
  expect_error_from([&] { (void)pool.run_round(std::vector<int>{16, 8, 4}, kQuickRound); }, ErrorCode::device,
                    "MPS worker of tenant 2 (share 25 %, pid " + std::to_string(pids[2]) +
                        ") sent a malformed message (not JSON: 'this is not json {')");
  expect_all_stopped(pids);
}

TEST_F(MpsTest, AWorkersOwnErrorIsPassedOn) {
  MpsWorkerPool pool(pool_options("1:error:1"), three_tenants());
  const auto pids = pool.worker_pids();
  expect_error_from([&] { (void)pool.run_round(std::vector<int>{16, 8, 4}, kQuickRound); }, ErrorCode::device,
                    "MPS worker of tenant 1 (share 25 %, pid " + std::to_string(pids[1]) +
                        ") failed: fake engine failure (it exited with status 4)");
  expect_all_stopped(pids);
}

TEST_F(MpsTest, AWorkerThatClosesItsChannelIsKilled) {
  auto options = pool_options("0:close:1");
  options.exit_grace_s = 0.1;
  MpsWorkerPool pool(options, three_tenants());
  const auto pids = pool.worker_pids();
  expect_error_from([&] { (void)pool.run_round(std::vector<int>{16, 8, 4}, kQuickRound); }, ErrorCode::device,
                    "tenant 0 (share 50 %, pid " + std::to_string(pids[0]) +
                        ") died before it sent the result of its round: it closed its channel without exiting");
  expect_all_stopped(pids);
}

TEST_F(MpsTest, AWorkerThatDiesBeforeItIsReadyFailsTheStart) {
  expect_error_from([&] { const MpsWorkerPool pool(pool_options("1:exit:0"), three_tenants()); }, ErrorCode::device,
                    "died before it sent its ready message: it exited with status 3");
  EXPECT_TRUE(no_children_left());
  EXPECT_EQ(daemon_events(), (std::vector<std::string>{"start", "quit", "stopped"}));
  EXPECT_TRUE(private_dirs_in(dir_.path()).empty());
}

TEST_F(MpsTest, AWorkerWithoutItsShareFailsTheStart) {
  expect_error_from([&] { const MpsWorkerPool pool(pool_options("1:wrong-share:0"), three_tenants()); },
                    ErrorCode::device, "runs with share 30 % in its environment, not 25 %");
  EXPECT_TRUE(no_children_left());
  EXPECT_EQ(daemon_events(), (std::vector<std::string>{"start", "quit", "stopped"}));
}

TEST_F(MpsTest, AWorkerThatRanOutOfMemoryReportsTheBatchItUsed) {
  MpsWorkerPool pool(pool_options("0:oom:1"), three_tenants());
  const auto round = pool.run_round(std::vector<int>{16, 8, 4}, kQuickRound);
  EXPECT_EQ(round.tenants[0].batch_requested, 16);
  EXPECT_EQ(round.tenants[0].batch_used, 8);
  EXPECT_EQ(round.tenants[1].batch_used, 8);
}

TEST_F(MpsTest, APoolWithoutItsOwnDaemonPassesThePipeDirectoryOn) {
  auto options = pool_options();
  options.daemon.reset();
  options.pipe_dir = dir_.file("someone-elses-pipe");
  std::vector<pid_t> pids;
  {
    MpsWorkerPool pool(options, {{100, 8}});
    EXPECT_EQ(pool.daemon(), nullptr);
    pids = pool.worker_pids();
    EXPECT_EQ(pool.run_round(std::vector<int>{8}, kQuickRound).tenants.size(), 1u);
  }
  EXPECT_EQ(lines_of(worker_log()),
            std::vector<std::string>{"tenant=0 share=100 pipe=" + options.pipe_dir + " pid=" + std::to_string(pids[0])});
  EXPECT_TRUE(daemon_events().empty());
  EXPECT_TRUE(pid_gone(pids[0]));
  EXPECT_TRUE(no_children_left());
}

TEST(MpsWorkerCommand, IsGpucapMpsWorkerWithItsArguments) {
  EXPECT_EQ(mps_worker_command("/opt/gpucap", {"--model-file", "m.pt"}),
            (std::vector<std::string>{"/opt/gpucap", "mps-worker", "--model-file", "m.pt"}));
}

}  // namespace
}  // namespace gpucap::runtime
