#include "gpucap/monitor/command_process.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <thread>

#include "gpucap/core/error.hpp"

namespace gpucap::monitor {
namespace {

// Without pidfds the wait sleeps in steps this short, so the end of the command is seen soon.
constexpr auto kPollStep = std::chrono::milliseconds(2);
constexpr int kShellSignalBase = 128;

int open_pidfd(pid_t pid) {
#ifdef SYS_pidfd_open
  const long fd = ::syscall(SYS_pidfd_open, pid, 0);
  return fd < 0 ? -1 : static_cast<int>(fd);
#else
  (void)pid;
  return -1;
#endif
}

// In the child, between fork and exec: only async-signal-safe calls. The default actions come
// back before the signals are unblocked, so one held since the fork ends the command, as it would
// have ended it had it come a moment later (gpucap's forwarding handler is not the command's).
[[noreturn]] void exec_child(const std::vector<char*>& argv, int error_fd) {
  ::signal(SIGINT, SIG_DFL);
  ::signal(SIGTERM, SIG_DFL);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  ::execvp(argv[0], argv.data());
  const int error = errno;
  [[maybe_unused]] const auto written = ::write(error_fd, &error, sizeof error);
  ::_exit(127);
}

sigset_t int_and_term() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}

std::atomic<pid_t> g_forward_to{-1};
std::atomic<int> g_received{0};
static_assert(std::atomic<pid_t>::is_always_lock_free && std::atomic<int>::is_always_lock_free);
struct sigaction g_old_int {};
struct sigaction g_old_term {};
sigset_t g_old_mask;

extern "C" void forward_signal(int signal_number, siginfo_t* info, void* /*context*/) {
  const int saved_errno = errno;
  g_received.store(signal_number);
  // SI_USER, SI_QUEUE, SI_TKILL (<= 0): a process sent it to gpucap alone. A terminal's signal
  // (SI_KERNEL) went to the whole process group, the command included.
  const pid_t command = g_forward_to.load();
  if (info != nullptr && info->si_code <= 0 && command > 0) ::kill(command, signal_number);
  errno = saved_errno;
}

}  // namespace

CommandProcess::CommandProcess(const std::vector<std::string>& argv) {
  if (argv.empty()) throw usage_error("give the command to measure after '--', e.g. gpucap monitor -- python train.py");
  std::vector<char*> c_argv;
  for (const auto& arg : argv) c_argv.push_back(const_cast<char*>(arg.c_str()));
  c_argv.push_back(nullptr);
  std::array<int, 2> error_pipe{};
  if (::pipe2(error_pipe.data(), O_CLOEXEC) != 0) {
    throw Error(ErrorCode::io, fmt::format("cannot start '{}': {}", argv.front(), std::strerror(errno)));
  }
  pid_ = ::fork();
  if (pid_ == 0) exec_child(c_argv, error_pipe[1]);
  ::close(error_pipe[1]);
  if (pid_ < 0) {
    ::close(error_pipe[0]);
    throw Error(ErrorCode::io, fmt::format("cannot start '{}': {}", argv.front(), std::strerror(errno)));
  }
  // The pipe closes on a successful exec; otherwise it carries exec's errno.
  int exec_error = 0;
  ssize_t n = 0;
  do {
    n = ::read(error_pipe[0], &exec_error, sizeof exec_error);
  } while (n < 0 && errno == EINTR);
  ::close(error_pipe[0]);
  if (n == static_cast<ssize_t>(sizeof exec_error)) {
    int ignored = 0;
    ::waitpid(pid_, &ignored, 0);
    pid_ = -1;
    throw usage_error(fmt::format("cannot run '{}': {}", argv.front(), std::strerror(exec_error)));
  }
  pidfd_ = open_pidfd(pid_);
}

CommandProcess::~CommandProcess() {
  if (pid_ > 0 && !status_) {
    ::kill(pid_, SIGKILL);
    int ignored = 0;
    ::waitpid(pid_, &ignored, 0);
  }
  if (pidfd_ >= 0) ::close(pidfd_);
}

std::optional<int> CommandProcess::wait_for(double timeout_s) {
  if (status_) return status_;
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                            std::chrono::duration<double>(std::max(0.0, timeout_s)));
  for (;;) {
    int status = 0;
    const pid_t done = ::waitpid(pid_, &status, WNOHANG);
    if (done == pid_) {
      status_ = status;
      return status_;
    }
    if (done < 0 && errno != EINTR) throw Error(ErrorCode::internal, fmt::format("waitpid: {}", std::strerror(errno)));
    const auto left = deadline - std::chrono::steady_clock::now();
    if (left <= std::chrono::steady_clock::duration::zero()) return std::nullopt;
    if (pidfd_ >= 0) {
      pollfd fd{pidfd_, POLLIN, 0};
      const auto left_ms = std::chrono::ceil<std::chrono::milliseconds>(left).count();
      (void)::poll(&fd, 1, static_cast<int>(left_ms));  // EINTR: look again
    } else {
      std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(left, std::chrono::duration_cast<std::chrono::steady_clock::duration>(kPollStep)));
    }
  }
}

int shell_exit_code(int wait_status) {
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) return kShellSignalBase + WTERMSIG(wait_status);
  return 1;
}

ForwardSignals::ForwardSignals() {
  g_received.store(0);
  g_forward_to.store(-1);
  const sigset_t both = int_and_term();
  pthread_sigmask(SIG_BLOCK, &both, &g_old_mask);
  struct sigaction action {};
  action.sa_sigaction = forward_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_SIGINFO | SA_RESTART;
  sigaction(SIGINT, &action, &g_old_int);
  sigaction(SIGTERM, &action, &g_old_term);
}

void ForwardSignals::forward_to(pid_t command) {
  g_forward_to.store(command);
  const sigset_t both = int_and_term();
  pthread_sigmask(SIG_UNBLOCK, &both, nullptr);
}

ForwardSignals::~ForwardSignals() {
  // Blocked while the old handlers come back, so none runs half-way; then the old mask.
  const sigset_t both = int_and_term();
  pthread_sigmask(SIG_BLOCK, &both, nullptr);
  g_forward_to.store(-1);
  sigaction(SIGINT, &g_old_int, nullptr);
  sigaction(SIGTERM, &g_old_term, nullptr);
  pthread_sigmask(SIG_SETMASK, &g_old_mask, nullptr);
}

int ForwardSignals::received() const { return g_received.load(); }

}  // namespace gpucap::monitor
