#include "gpucap/runtime/mps_process.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <thread>

#include "gpucap/core/error.hpp"
#include "gpucap/core/text.hpp"

extern char** environ;  // NOLINT: POSIX

namespace gpucap::runtime {

namespace {

// Descriptors the child copies into 0..3 are first moved at or above this number, so that no
// dup2 into 0..3 can overwrite a descriptor that is still to be copied.
constexpr int kFirstHighFd = 10;
// Closing descriptors one by one (kernels without close_range) stops here.
constexpr long kMaxFdToClose = 65536;

UniqueFd duplicate_high(int fd) {
  const int copy = fcntl(fd, F_DUPFD_CLOEXEC, kFirstHighFd);
  if (copy < 0) throw Error(ErrorCode::io, fmt::format("cannot duplicate a descriptor ({})", std::strerror(errno)));
  return UniqueFd(copy);
}

std::vector<char*> c_strings(const std::vector<std::string>& strings) {
  std::vector<char*> pointers;
  pointers.reserve(strings.size() + 1);
  for (const auto& s : strings) pointers.push_back(const_cast<char*>(s.c_str()));
  pointers.push_back(nullptr);
  return pointers;
}

// Marks every descriptor from `first` on close-on-exec: exec then closes them, while the pipe
// that reports a failed exec stays usable until that exec. Async-signal-safe.
void close_on_exec_from(int first, long last_fd) {
  if (close_range(static_cast<unsigned>(first), ~0U, CLOSE_RANGE_CLOEXEC) == 0) return;
  for (long fd = first; fd <= last_fd; ++fd) {
    const int flags = fcntl(static_cast<int>(fd), F_GETFD);
    if (flags >= 0) fcntl(static_cast<int>(fd), F_SETFD, flags | FD_CLOEXEC);
  }
}

struct ChildFds {
  int stdin_fd;
  int stdout_fd;
  int stderr_fd;
  int protocol_fd;  // -1: none
  int exec_error_fd;
};

// The child between fork and exec: only async-signal-safe calls.
[[noreturn]] void become_child(const ChildFds& fds, const char* executable, char* const* argv, char* const* envp,
                               bool die_with_parent, pid_t parent, long last_fd) {
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  setpgid(0, 0);
  if (die_with_parent) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);  // the parent died before prctl took effect
  }
  if (dup2(fds.stdin_fd, STDIN_FILENO) < 0 || dup2(fds.stdout_fd, STDOUT_FILENO) < 0 ||
      dup2(fds.stderr_fd, STDERR_FILENO) < 0 || (fds.protocol_fd >= 0 && dup2(fds.protocol_fd, kChildProtocolFd) < 0)) {
    const int error = errno;
    (void)!write(fds.exec_error_fd, &error, sizeof error);
    _exit(127);
  }
  close_on_exec_from(fds.protocol_fd >= 0 ? kChildProtocolFd + 1 : kChildProtocolFd, last_fd);
  execve(executable, argv, envp);
  const int error = errno;
  (void)!write(fds.exec_error_fd, &error, sizeof error);
  _exit(127);
}

std::optional<int> reap(pid_t pid, int options) {
  int status = 0;
  while (true) {
    const pid_t result = waitpid(pid, &status, options);
    if (result == pid) return status;
    if (result == 0) return std::nullopt;
    if (errno == EINTR) continue;
    // ECHILD: somebody else reaped it (a SIGCHLD handler set to SIG_IGN); it is gone.
    return 0;
  }
}

bool is_executable_file(const std::string& path) {
  struct stat info {};
  return stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode) && access(path.c_str(), X_OK) == 0;
}

}  // namespace

UniqueFd& UniqueFd::operator=(UniqueFd&& other) noexcept {
  if (this != &other) reset(std::exchange(other.fd_, -1));
  return *this;
}

void UniqueFd::reset(int fd) noexcept {
  if (fd_ >= 0) close(fd_);
  fd_ = fd;
}

ChildProcess ChildProcess::spawn(const SpawnSpec& spec) {
  if (spec.argv.empty()) throw Error(ErrorCode::internal, "spawn: empty argv");
  auto argv = c_strings(spec.argv);
  auto envp = c_strings(spec.environment);
  const UniqueFd dev_null(open("/dev/null", O_RDWR | O_CLOEXEC));
  if (!dev_null.valid()) throw Error(ErrorCode::io, fmt::format("/dev/null: cannot open ({})", std::strerror(errno)));
  const auto stdin_fd = duplicate_high(spec.stdin_fd >= 0 ? spec.stdin_fd : dev_null.get());
  const auto stdout_fd = duplicate_high(spec.stdout_fd >= 0 ? spec.stdout_fd : STDERR_FILENO);
  const auto stderr_fd = duplicate_high(spec.stderr_fd >= 0 ? spec.stderr_fd : STDERR_FILENO);
  const auto protocol_fd = spec.protocol_fd >= 0 ? duplicate_high(spec.protocol_fd) : UniqueFd();
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) {
    throw Error(ErrorCode::io, fmt::format("cannot create a pipe ({})", std::strerror(errno)));
  }
  UniqueFd error_read(pipe_fds[0]);
  UniqueFd error_write(pipe_fds[1]);
  const long open_max = sysconf(_SC_OPEN_MAX);
  const long last_fd = std::min(open_max > 0 ? open_max - 1 : 1023L, kMaxFdToClose);
  const pid_t parent = getpid();

  const pid_t pid = fork();
  if (pid < 0) {
    throw Error(ErrorCode::io, fmt::format("{}: cannot start ({})", spec.executable, std::strerror(errno)));
  }
  if (pid == 0) {
    const ChildFds fds{stdin_fd.get(), stdout_fd.get(), stderr_fd.get(), protocol_fd.get(), error_write.get()};
    become_child(fds, spec.executable.c_str(), argv.data(), envp.data(), spec.die_with_parent, parent, last_fd);
  }
  // Also here, so that the group exists as soon as spawn returns (whichever side runs first).
  setpgid(pid, pid);
  error_write.reset();
  ChildProcess child(pid);
  int exec_errno = 0;
  ssize_t got = 0;
  do {
    got = read(error_read.get(), &exec_errno, sizeof exec_errno);
  } while (got < 0 && errno == EINTR);
  if (got == static_cast<ssize_t>(sizeof exec_errno)) {
    child.kill_and_reap();
    throw Error(ErrorCode::io, fmt::format("{}: cannot run ({})", spec.executable, std::strerror(exec_errno)));
  }
  return child;
}

ChildProcess::~ChildProcess() { kill_and_reap(); }

ChildProcess::ChildProcess(ChildProcess&& other) noexcept
    : pid_(std::exchange(other.pid_, -1)), status_(std::exchange(other.status_, std::nullopt)) {}

ChildProcess& ChildProcess::operator=(ChildProcess&& other) noexcept {
  if (this != &other) {
    kill_and_reap();
    pid_ = std::exchange(other.pid_, -1);
    status_ = std::exchange(other.status_, std::nullopt);
  }
  return *this;
}

std::optional<int> ChildProcess::try_wait() {
  if (pid_ <= 0 || status_) return status_;
  status_ = reap(pid_, WNOHANG);
  return status_;
}

std::optional<int> ChildProcess::wait_for(double timeout_s) {
  const double deadline_s = steady_now_s() + timeout_s;
  auto pause = std::chrono::microseconds(500);
  while (!try_wait()) {
    if (steady_now_s() >= deadline_s) return std::nullopt;
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(20'000));
  }
  return status_;
}

void ChildProcess::signal_group(int signal) const noexcept {
  if (pid_ <= 0 || status_) return;
  kill(-pid_, signal);
  kill(pid_, signal);  // in case it left its group
}

void ChildProcess::kill_and_reap() noexcept {
  if (pid_ <= 0 || status_) return;
  signal_group(SIGKILL);
  status_ = reap(pid_, 0);
}

std::string describe_wait_status(int status) {
  if (WIFEXITED(status)) return fmt::format("exited with status {}", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    const int signal = WTERMSIG(status);
    const char* name = sigabbrev_np(signal);
    return name != nullptr ? fmt::format("was killed by signal {} (SIG{})", signal, name)
                           : fmt::format("was killed by signal {}", signal);
  }
  return fmt::format("stopped with wait status {}", status);
}

std::optional<std::string> find_executable(const std::string& name) {
  if (name.empty()) return std::nullopt;
  if (name.find('/') != std::string::npos) {
    return is_executable_file(name) ? std::optional<std::string>(name) : std::nullopt;
  }
  const char* path = std::getenv("PATH");
  const std::string search = path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin";
  for (const auto dir : split(search, ':')) {
    const auto candidate = (dir.empty() ? std::string(".") : std::string(dir)) + "/" + name;
    if (is_executable_file(candidate)) return candidate;
  }
  return std::nullopt;
}

bool process_alive(pid_t pid) {
  if (pid <= 0) return false;
  if (kill(pid, 0) != 0 && errno != EPERM) return false;
  std::ifstream stat_file(fmt::format("/proc/{}/stat", pid));
  std::string stat;
  if (!std::getline(stat_file, stat)) return true;  // no /proc: trust kill()
  // "PID (COMMAND) STATE ...": the command may contain ')' itself, so take the last one.
  const auto close = stat.rfind(')');
  if (close == std::string::npos || close + 2 >= stat.size()) return true;
  const char state = stat[close + 2];
  return state != 'Z' && state != 'X';
}

std::vector<std::string> environment_with(const std::vector<std::pair<std::string, std::string>>& added,
                                          const std::vector<std::string>& removed) {
  const auto name_of = [](std::string_view entry) { return entry.substr(0, entry.find('=')); };
  std::vector<std::string> result;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    const std::string_view text(*entry);
    const auto name = name_of(text);
    const bool replaced = std::any_of(added.begin(), added.end(), [&](const auto& a) { return a.first == name; });
    const bool dropped = std::find(removed.begin(), removed.end(), name) != removed.end();
    if (!replaced && !dropped) result.emplace_back(text);
  }
  for (const auto& [name, value] : added) result.push_back(name + "=" + value);
  return result;
}

double steady_now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace gpucap::runtime
