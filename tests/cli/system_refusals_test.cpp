// The system refuses gpucap what it asks for (issue 36, faults): a thread, under a limit on
// threads or memory too low for the process; room for its output. Each ends the command with one
// error line and the I/O exit code (4), not an internal error (70) or a crash.
//
// A thread is refused for real: each new thread's stack is as large as the soft RLIMIT_STACK
// (glibc's default), and with that limit at 1 TiB no thread's stack can be mapped, so every
// std::thread gpucap starts fails with EAGAIN, the error a thread or memory limit gives.

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "support/child_process.hpp"
#include "support/cli_runner.hpp"
#include "support/free_port.hpp"
#include "support/paths.hpp"
#include "support/thread_stack_probe.hpp"

namespace gpucap {
namespace {

constexpr double kDeadlineS = 30.0;

struct ShellRun {
  bool started = false;  // the shell set up what the test asked (a limit, a redirection)
  bool exited = false;
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

// `gpucap --data-dir DATA ARGS...` run by /bin/sh after `setup` (exit 99 when it fails), with
// `redirect` after the command; stdout and stderr merged.
ShellRun run_in_shell(const std::string& setup, const std::vector<std::string>& args, const std::string& redirect = "") {
  std::string command = setup + " || exit 99; exec " + test::quote(GPUCAP_CLI_PATH) + " --data-dir " + test::quote(test::data_dir());
  for (const auto& arg : args) command += " " + test::quote(arg);
  command += redirect;
  test::ChildProcess child({"/bin/sh", "-c", command}, /*merge_stderr=*/true);
  ShellRun run;
  while (const auto line = child.read_line(kDeadlineS)) run.output += *line + "\n";
  const auto status = child.wait(kDeadlineS);
  run.exited = status && WIFEXITED(*status);
  run.exit_code = run.exited ? WEXITSTATUS(*status) : -1;
  run.started = !(run.exited && run.exit_code == 99);
  return run;
}

ShellRun run_with_unmappable_thread_stacks(const std::vector<std::string>& args) {
  return run_in_shell("ulimit -s " + std::to_string(test::kUnmappableStackBytes / 1024), args);
}

// One line from gpucap, the error itself, and the I/O exit code.
void expect_one_io_error(const ShellRun& run, const std::string& line) {
  ASSERT_TRUE(run.exited) << "the command did not end within its deadline";
  EXPECT_EQ(run.exit_code, 4) << run.output;
  EXPECT_EQ(std::count(run.output.begin(), run.output.end(), '\n'), 1) << run.output;
  EXPECT_EQ(run.output.rfind(line, 0), 0u) << run.output;
}

constexpr const char* kThreadRefused =
    "gpucap: error: the system refused to start a thread (Resource temporarily unavailable): a limit on threads or "
    "memory is too low (ulimit -u, -s, -v)";

class SystemRefusals : public ::testing::Test {
 protected:
  void SetUp() override {
    if (test::thread_stack_can_be_mapped(test::kUnmappableStackBytes)) {
      GTEST_SKIP() << "this machine maps a 1-TiB thread stack (vm.overcommit_memory = 1?): it stands for no limit here";
    }
  }
};

// The first thread serve starts with --metrics is the endpoint's, before the API binds.
TEST_F(SystemRefusals, ServeWithItsEndpointsThatCannotStartAThreadSaysSoAndExitsWithTheIoCode) {
  test::TempDir dir;
  const auto token = dir.write("token.txt", "secret-token\n");
  const auto cap_file = dir.write("cap.txt", "250\n");
  const auto run = run_with_unmappable_thread_stacks(
      {"serve", "--platform", "twin", "--gpu", "a100", "--model", "resnet50", "--slo-ms", "100", "--cap-file", cap_file,
       "--listen", "127.0.0.1:" + std::to_string(test::free_port()), "--metrics",
       "127.0.0.1:" + std::to_string(test::free_port()), "--admin", "127.0.0.1:" + std::to_string(test::free_port()),
       "--admin-token-file", token});
  if (!run.started) GTEST_SKIP() << "the hard RLIMIT_STACK is below 1 TiB on this machine";
  expect_one_io_error(run, kThreadRefused);
}

// Without them the first thread is the serving loop's, once the API's address is bound: what had
// started is stopped on the way out, and still one line.
TEST_F(SystemRefusals, ServeThatHasBoundItsAddressWhenAThreadIsRefusedSaysSoToo) {
  const auto run = run_with_unmappable_thread_stacks({"serve", "--platform", "twin", "--gpu", "a100", "--model", "resnet50",
                                                      "--slo-ms", "100", "--power-cap", "250", "--listen",
                                                      "127.0.0.1:" + std::to_string(test::free_port())});
  if (!run.started) GTEST_SKIP() << "the hard RLIMIT_STACK is below 1 TiB on this machine";
  expect_one_io_error(run, kThreadRefused);
}

TEST_F(SystemRefusals, AThreadLimitTheCommandNeverMeetsChangesNothing) {
  // The same limit on a command that starts no thread: it runs as always (the limit itself is not
  // what fails the commands above).
  const auto run = run_with_unmappable_thread_stacks({"run", "--gpu", "p40", "--model", "inception_v1", "--dataset",
                                                      "imagenet", "--power-cap", "131", "--algorithm", "batchdvfs",
                                                      "--images", "2000"});
  if (!run.started) GTEST_SKIP() << "the hard RLIMIT_STACK is below 1 TiB on this machine";
  ASSERT_TRUE(run.exited);
  EXPECT_EQ(run.exit_code, 0) << run.output;
}

// A write that fails while the output is printed (here /dev/full: every write is ENOSPC; list's
// table is larger than stdout's buffer, so the failure comes mid-print, not at the final flush).
TEST(SystemRefusalsOfRoom, OutputThatCannotBeWrittenIsAnIoErrorNotAnInternalOne) {
  if (!std::filesystem::exists("/dev/full")) GTEST_SKIP() << "no /dev/full on this machine";
  const auto run = run_in_shell("true", {"list", "algorithms"}, " >/dev/full");
  ASSERT_TRUE(run.started);
  expect_one_io_error(run, "gpucap: error: cannot write the output (No space left on device)");
}

}  // namespace
}  // namespace gpucap
