// The system refuses gpucap a thread (issue 36, faults): a limit on threads or memory too low for
// the process. Provoked for real: each new thread's stack is as large as the soft RLIMIT_STACK
// (glibc's default), and with that limit at 1 TiB no thread's stack can be mapped, so every
// std::thread gpucap starts fails with EAGAIN — the error a thread or memory limit gives. The
// command must end with one error line and the I/O exit code (4), not an internal error, a crash or
// a server left half up.

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "support/child_process.hpp"
#include "support/cli_runner.hpp"
#include "support/free_port.hpp"
#include "support/paths.hpp"

namespace gpucap {
namespace {

constexpr const char* kStackOfOneTebibyteKib = "1073741824";

struct LimitedRun {
  bool limit_taken = false;  // the shell could raise the soft limit (the hard limit allows it)
  bool exited = false;
  int exit_code = -1;
  std::vector<std::string> lines;  // stdout and stderr together
};

// `gpucap --data-dir DATA ARGS...` with RLIMIT_STACK at 1 TiB, through /bin/sh's ulimit.
LimitedRun run_with_huge_thread_stacks(const std::vector<std::string>& args) {
  std::string command = std::string("ulimit -s ") + kStackOfOneTebibyteKib + " || exit 99; exec " + test::quote(GPUCAP_CLI_PATH) +
                        " --data-dir " + test::quote(test::data_dir());
  for (const auto& arg : args) command += " " + test::quote(arg);
  test::ChildProcess child({"/bin/sh", "-c", command}, /*merge_stderr=*/true);
  LimitedRun run;
  while (const auto line = child.read_line(30.0)) run.lines.push_back(*line);
  const auto status = child.wait(30.0);
  run.exited = status && WIFEXITED(*status);
  run.exit_code = run.exited ? WEXITSTATUS(*status) : -1;
  run.limit_taken = !(run.exited && run.exit_code == 99);
  return run;
}

// With overcommit_memory = 1 the kernel maps any size, and a 1-TiB stack would be given.
bool kernel_maps_any_size() {
  std::ifstream in("/proc/sys/vm/overcommit_memory");
  int mode = 0;
  return (in >> mode) && mode == 1;
}

bool port_is_free(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<std::uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const bool bound = ::bind(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0;
  ::close(fd);
  return bound;
}

TEST(SystemLimits, ServeThatCannotStartAThreadSaysSoAndExitsWithTheIoCode) {
  if (kernel_maps_any_size()) GTEST_SKIP() << "vm.overcommit_memory = 1: a 1-TiB stack would be mapped";
  test::TempDir dir;
  const auto token = dir.write("token.txt", "secret-token\n");
  const auto cap_file = dir.write("cap.txt", "250\n");
  const int listen_port = test::free_port();
  const int metrics_port = test::free_port();
  const int admin_port = test::free_port();
  const auto run = run_with_huge_thread_stacks(
      {"serve", "--platform", "twin", "--gpu", "a100", "--model", "resnet50", "--slo-ms", "100", "--cap-file", cap_file,
       "--listen", "127.0.0.1:" + std::to_string(listen_port), "--metrics", "127.0.0.1:" + std::to_string(metrics_port),
       "--admin", "127.0.0.1:" + std::to_string(admin_port), "--admin-token-file", token});
  if (!run.limit_taken) GTEST_SKIP() << "the hard RLIMIT_STACK is below 1 TiB on this machine";
  ASSERT_TRUE(run.exited) << "serve did not end within 30 s";
  std::string output;
  for (const auto& line : run.lines) output += line + "\n";
  EXPECT_EQ(run.exit_code, 4) << output;
  const auto errors = std::count_if(run.lines.begin(), run.lines.end(),
                                    [](const std::string& line) { return line.rfind("gpucap: ", 0) == 0; });
  EXPECT_EQ(errors, 1) << output;
  EXPECT_NE(output.find("gpucap: error: the system refused to start a thread (Resource temporarily unavailable)"),
            std::string::npos)
      << output;
  EXPECT_EQ(output.find("internal error"), std::string::npos) << output;
  // Nothing is left listening: the addresses are free again.
  EXPECT_TRUE(port_is_free(listen_port));
  EXPECT_TRUE(port_is_free(metrics_port));
  EXPECT_TRUE(port_is_free(admin_port));
}

TEST(SystemLimits, AThreadLimitTheCommandNeverMeetsChangesNothing) {
  // The same limit on a command that starts no thread: it runs as always (the limit itself is not
  // what fails the command above).
  const auto run = run_with_huge_thread_stacks({"run", "--gpu", "p40", "--model", "inception_v1", "--dataset", "imagenet",
                                                "--power-cap", "131", "--algorithm", "batchdvfs", "--images", "2000"});
  if (!run.limit_taken) GTEST_SKIP() << "the hard RLIMIT_STACK is below 1 TiB on this machine";
  ASSERT_TRUE(run.exited);
  std::string output;
  for (const auto& line : run.lines) output += line + "\n";
  EXPECT_EQ(run.exit_code, 0) << output;
}

}  // namespace
}  // namespace gpucap
