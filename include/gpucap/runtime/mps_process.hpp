#pragma once
// Child processes for the MPS path (runtime/mps.hpp): the MPS control binary and one worker per
// tenant. Everything a child needs (argv, environment, file descriptors) is prepared before the
// fork, so that the child only makes async-signal-safe calls — gpucap has other threads (the power
// sampler) when it starts workers. A child gets only the descriptors it is given: every other one
// is closed before exec, so a worker never holds another worker's channel open (which would hide
// that worker's death from the pool).

#include <sys/types.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace gpucap::runtime {

// An owned file descriptor, closed by the destructor.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd() { reset(); }
  UniqueFd(UniqueFd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept;
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;

  [[nodiscard]] int get() const { return fd_; }
  [[nodiscard]] bool valid() const { return fd_ >= 0; }
  void reset(int fd = -1) noexcept;

 private:
  int fd_ = -1;
};

// The file descriptor a worker speaks the MPS protocol on (one end of a socket pair).
inline constexpr int kChildProtocolFd = 3;

struct SpawnSpec {
  std::string executable;                // a path (see find_executable)
  std::vector<std::string> argv;         // argv[0] included
  std::vector<std::string> environment;  // the whole environment, "NAME=VALUE"
  int stdin_fd = -1;                     // -1: /dev/null
  int stdout_fd = -1;                    // -1: gpucap's stderr (a chatty library never mixes with results)
  int stderr_fd = -1;                    // -1: gpucap's stderr
  int protocol_fd = -1;                  // >= 0: becomes the child's fd kChildProtocolFd
  bool die_with_parent = false;          // SIGKILL when gpucap dies (PR_SET_PDEATHSIG)
};

// A started child in a process group of its own (so that a Ctrl-C meant for gpucap does not reach
// it, and killing the group also takes whatever it started). The destructor kills the group with
// SIGKILL and reaps the child if nobody waited for it: a ChildProcess never leaves a zombie.
class ChildProcess {
 public:
  // Error(io) naming the executable when it cannot be started (fork or exec failed).
  static ChildProcess spawn(const SpawnSpec& spec);

  ChildProcess() = default;
  ~ChildProcess();
  ChildProcess(ChildProcess&& other) noexcept;
  ChildProcess& operator=(ChildProcess&& other) noexcept;
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  [[nodiscard]] pid_t pid() const { return pid_; }
  // Whether the child has exited and been reaped (then status() is its wait status).
  [[nodiscard]] bool reaped() const { return status_.has_value(); }
  [[nodiscard]] std::optional<int> status() const { return status_; }

  // Reaps the child if it has exited; its wait status, or nullopt while it runs.
  std::optional<int> try_wait();
  // Waits up to timeout_s for the child to exit; its wait status, or nullopt if it still runs.
  std::optional<int> wait_for(double timeout_s);
  // Sends `signal` to the child's process group (no-op once reaped).
  void signal_group(int signal) const noexcept;
  // SIGKILL to the group, then reaps the child. Never throws.
  void kill_and_reap() noexcept;

 private:
  explicit ChildProcess(pid_t pid) : pid_(pid) {}

  pid_t pid_ = -1;
  std::optional<int> status_;
};

// "exited with status 3", "was killed by signal 6 (SIGABRT)".
[[nodiscard]] std::string describe_wait_status(int status);

// `name` itself if it contains a '/' and is an executable file, else the first executable
// PATH/name; nullopt when there is none.
[[nodiscard]] std::optional<std::string> find_executable(const std::string& name);

// Whether a process with this pid exists and is not a zombie (a daemon reparented to a PID 1 that
// does not reap would otherwise look alive forever).
[[nodiscard]] bool process_alive(pid_t pid);

// This process's environment without the variables named in `removed`, plus `added` (replacing any
// variable of the same name).
[[nodiscard]] std::vector<std::string> environment_with(const std::vector<std::pair<std::string, std::string>>& added,
                                                        const std::vector<std::string>& removed = {});

// Seconds on the steady clock (for deadlines).
[[nodiscard]] double steady_now_s();

}  // namespace gpucap::runtime
