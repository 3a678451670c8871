#include "support/child_process.hpp"

#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace gpucap::test {
namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

ChildProcess::ChildProcess(const std::vector<std::string>& argv, bool merge_stderr) {
  int fds[2];
  if (::pipe(fds) != 0) throw std::runtime_error("pipe failed");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
  if (merge_stderr) posix_spawn_file_actions_adddup2(&actions, fds[1], STDERR_FILENO);
  posix_spawn_file_actions_addclose(&actions, fds[0]);
  posix_spawn_file_actions_addclose(&actions, fds[1]);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const int rc = posix_spawn(&pid_, argv.at(0).c_str(), &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(fds[1]);
  stdout_fd_ = fds[0];
  if (rc != 0) {
    ::close(stdout_fd_);
    throw std::runtime_error("cannot start " + argv.at(0));
  }
}

ChildProcess::~ChildProcess() {
  if (!reaped_) {
    ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
  }
  if (stdout_fd_ >= 0) ::close(stdout_fd_);
}

void ChildProcess::close_output() {
  if (stdout_fd_ >= 0) ::close(stdout_fd_);
  stdout_fd_ = -1;
  buffer_.clear();
}

std::optional<std::string> ChildProcess::read_line(double timeout_s) {
  if (stdout_fd_ < 0) return std::nullopt;
  const auto start = std::chrono::steady_clock::now();
  for (;;) {
    const auto newline = buffer_.find('\n');
    if (newline != std::string::npos) {
      auto line = buffer_.substr(0, newline);
      buffer_.erase(0, newline + 1);
      return line;
    }
    const double left_s = timeout_s - seconds_since(start);
    if (left_s <= 0.0) return std::nullopt;
    pollfd pfd{stdout_fd_, POLLIN, 0};
    if (::poll(&pfd, 1, static_cast<int>(left_s * 1000.0) + 1) <= 0) continue;
    char chunk[256];
    const auto n = ::read(stdout_fd_, chunk, sizeof chunk);
    if (n <= 0) return std::nullopt;
    buffer_.append(chunk, static_cast<std::size_t>(n));
  }
}

std::optional<int> ChildProcess::wait(double timeout_s) {
  const auto start = std::chrono::steady_clock::now();
  while (seconds_since(start) < timeout_s) {
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      reaped_ = true;
      return status;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return std::nullopt;
}

void ChildProcess::signal(int signal_number) const { ::kill(pid_, signal_number); }

}  // namespace gpucap::test
