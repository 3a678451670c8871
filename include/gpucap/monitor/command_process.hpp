#pragma once
// The command `gpucap monitor -- COMMAND ARGS...` measures: started as a child in gpucap's process
// group (so a Ctrl-C at the terminal reaches it directly), waited for with a deadline so the
// sampling loop keeps its rhythm, and its exit status handed on as a shell would.

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

namespace gpucap::monitor {

class CommandProcess {
 public:
  // Starts argv (argv[0] looked up in PATH) with SIGINT and SIGTERM at their default actions and
  // unblocked (whatever gpucap's mask and handlers). Error(usage) when it cannot be run (not
  // found, not executable), before anything was measured.
  explicit CommandProcess(const std::vector<std::string>& argv);
  // Kills (SIGKILL) and reaps a command still running: gpucap never leaves it behind. Only an
  // error of gpucap's own (a failed waitpid) gets here with the command running; a failed reading
  // or write does not end the measurement.
  ~CommandProcess();
  CommandProcess(const CommandProcess&) = delete;
  CommandProcess& operator=(const CommandProcess&) = delete;

  // Waits up to `timeout_s` for the command to end: its wait status (waitpid's) once it has,
  // nullopt while it runs. A signal that interrupts the wait only shortens it.
  std::optional<int> wait_for(double timeout_s);
  [[nodiscard]] pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  int pidfd_ = -1;  // poll()able until the command ends (Linux 5.3+); -1: short sleeps instead
  std::optional<int> status_;
};

// The exit code a shell reports for a wait status: the exit code, or 128 + the signal.
[[nodiscard]] int shell_exit_code(int wait_status);

// While alive, SIGINT and SIGTERM do not end gpucap: one sent to gpucap alone (kill) is passed on
// to the command; one from the terminal already reached the command (it shares the process
// group) and is not sent twice. The last signal is kept, so gpucap can still print what it
// measured and then report how the command ended.
//
// Made before the command starts (the handlers are installed and the two signals blocked in this
// thread), then told the command's pid (forward_to unblocks them): a signal that comes while the
// command is being started is held and then passed on, never lost and never gpucap's death with
// the command left running. One at a time, in a process's main thread.
class ForwardSignals {
 public:
  ForwardSignals();
  // Restores the handlers and the signal mask.
  ~ForwardSignals();
  // The command to pass signals to; unblocks SIGINT and SIGTERM (held ones are delivered now).
  void forward_to(pid_t command);
  ForwardSignals(const ForwardSignals&) = delete;
  ForwardSignals& operator=(const ForwardSignals&) = delete;
  // The last signal received (0: none).
  [[nodiscard]] int received() const;
};

}  // namespace gpucap::monitor
