#pragma once
// A child process the test can read lines from, signal and wait for, each with a deadline, so
// that a test with a stuck child fails instead of hanging.

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

namespace gpucap::test {

class ChildProcess {
 public:
  // Starts argv[0] (a path) with stdout on a pipe; stderr is inherited, or on the same pipe with
  // `merge_stderr` (for what a program announces on stderr, e.g. an exporter's URL).
  explicit ChildProcess(const std::vector<std::string>& argv, bool merge_stderr = false);
  // Kills (SIGKILL) and reaps a child still running.
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  [[nodiscard]] pid_t pid() const { return pid_; }
  // The next line of stdout without its newline; nullopt at end of output or after the deadline.
  [[nodiscard]] std::optional<std::string> read_line(double timeout_s);
  // The wait status (waitpid's), or nullopt when it has not exited by the deadline.
  [[nodiscard]] std::optional<int> wait(double timeout_s);
  void signal(int signal_number) const;
  // Closes the reading end of the child's stdout: the reader of its output has gone, and its next
  // write fails (EPIPE, or SIGPIPE unless it ignores that). read_line gives nullopt from then on.
  void close_output();

 private:
  pid_t pid_ = -1;
  int stdout_fd_ = -1;
  std::string buffer_;
  bool reaped_ = false;
};

}  // namespace gpucap::test
