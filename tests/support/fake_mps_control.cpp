// A fake nvidia-cuda-mps-control for the MPS tests: behaves like the real control binary as far
// as gpucap can see, without a GPU.
//
//   fake_mps_control -d    starts a "daemon" (a double-forked process) that writes its pid to
//                          $CUDA_MPS_PIPE_DIRECTORY/nvidia-cuda-mps-control.pid and stays up until
//                          told to quit; then it removes the pid file and exits.
//   fake_mps_control       reads commands on stdin; "quit" tells the daemon to quit (through a
//                          file in the pipe directory); fails if no daemon runs there.
//
// Every event is appended to $GPUCAP_FAKE_MPS_STATE (one line each: "start", "quit", "stopped"),
// so tests can see what happened even after the pipe directory is gone. $GPUCAP_FAKE_MPS_MODE
// makes it misbehave: "fail-start" (-d exits with status 1), "never-up" (-d exits 0 but no daemon
// comes up), "ignore-quit" (the daemon does not quit). As a safety net the daemon exits by itself
// after a minute. It refuses to run without CUDA_MPS_PIPE_DIRECTORY, so it can never touch a real
// MPS directory.

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>

namespace {

constexpr auto kPoll = std::chrono::milliseconds(5);
constexpr auto kLifetimeLimit = std::chrono::seconds(60);

std::string env_or_empty(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? value : "";
}

void record(const std::string& event) {
  const auto path = env_or_empty("GPUCAP_FAKE_MPS_STATE");
  if (path.empty()) return;
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return;
  const auto line = event + "\n";
  (void)!write(fd, line.data(), line.size());
  close(fd);
}

bool exists(const std::string& path) {
  struct stat info {};
  return stat(path.c_str(), &info) == 0;
}

[[noreturn]] void run_daemon(const std::string& pipe_dir, const std::string& mode) {
  const int null_fd = open("/dev/null", O_RDWR);
  if (null_fd >= 0) {
    dup2(null_fd, STDIN_FILENO);
    dup2(null_fd, STDOUT_FILENO);
    dup2(null_fd, STDERR_FILENO);
  }
  const auto pid_file = pipe_dir + "/nvidia-cuda-mps-control.pid";
  const auto quit_file = pipe_dir + "/fake-quit";
  {
    const auto temporary = pid_file + ".tmp";
    std::ofstream(temporary) << getpid() << "\n";
    std::rename(temporary.c_str(), pid_file.c_str());
  }
  const auto started = std::chrono::steady_clock::now();
  while (mode == "ignore-quit" || !exists(quit_file)) {
    if (std::chrono::steady_clock::now() - started > kLifetimeLimit) {
      record("expired");
      std::remove(pid_file.c_str());
      _exit(0);
    }
    std::this_thread::sleep_for(kPoll);
  }
  std::remove(pid_file.c_str());
  record("stopped");
  _exit(0);
}

int start_daemon(const std::string& pipe_dir, const std::string& mode) {
  record("start");
  if (mode == "fail-start") {
    std::fprintf(stderr, "An instance of this daemon is already running\n");
    return 1;
  }
  if (mode == "never-up") return 0;
  const pid_t middle = fork();
  if (middle < 0) return 1;
  if (middle == 0) {
    setsid();
    const pid_t daemon = fork();
    if (daemon == 0) run_daemon(pipe_dir, mode);
    _exit(daemon < 0 ? 1 : 0);
  }
  int status = 0;
  waitpid(middle, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

int control_client(const std::string& pipe_dir) {
  std::string command;
  while (std::getline(std::cin, command)) {
    if (command != "quit") continue;
    record("quit");
    if (!exists(pipe_dir + "/nvidia-cuda-mps-control.pid")) {
      std::fprintf(stderr, "Cannot find MPS control daemon process\n");
      return 1;
    }
    std::ofstream(pipe_dir + "/fake-quit") << "quit\n";
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const auto pipe_dir = env_or_empty("CUDA_MPS_PIPE_DIRECTORY");
  if (pipe_dir.empty() || env_or_empty("CUDA_MPS_LOG_DIRECTORY").empty()) {
    std::fprintf(stderr, "fake_mps_control: CUDA_MPS_PIPE_DIRECTORY and CUDA_MPS_LOG_DIRECTORY must be set\n");
    return 2;
  }
  const std::string mode = env_or_empty("GPUCAP_FAKE_MPS_MODE");
  if (argc == 2 && std::string(argv[1]) == "-d") return start_daemon(pipe_dir, mode);
  if (argc == 1) return control_client(pipe_dir);
  std::fprintf(stderr, "usage: fake_mps_control [-d]\n");
  return 2;
}
