#include "gpucap/runtime/mps.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "gpucap/core/error.hpp"
#include "gpucap/core/files.hpp"
#include "gpucap/device/restore_journal.hpp"
#include "gpucap/core/text.hpp"

namespace gpucap::runtime {

namespace {

namespace fs = std::filesystem;

// What the MPS control daemon writes into its pipe directory once it runs (and removes when it
// stops; the control socket beside it stays).
constexpr const char* kDaemonPidFile = "nvidia-cuda-mps-control.pid";
// MPS creates Unix sockets in the pipe directory ("control_privileged" is the longest name);
// sun_path holds 107 characters.
constexpr std::size_t kMaxPipeDirChars = 107 - 20;
// A daemon that ignores "quit" gets this long after SIGTERM before SIGKILL.
constexpr double kTermGraceS = 1.0;
// At most this much of a child's output goes into an error message.
constexpr std::size_t kOutputTailChars = 300;

std::string list_text(const std::vector<int>& values) {
  std::vector<std::string> parts;
  parts.reserve(values.size());
  for (const int v : values) parts.push_back(std::to_string(v));
  return join(parts, ",");
}

std::string private_dir_base(const std::string& given) {
  if (!given.empty()) return given;
  for (const char* name : {"XDG_RUNTIME_DIR", "TMPDIR"}) {
    const char* value = std::getenv(name);
    if (value != nullptr && *value != '\0' && fs::is_directory(value)) return value;
  }
  return "/tmp";
}

std::string make_private_dir(const std::string& base) {
  std::string pattern = (fs::path(base) / "gpucap-mps-XXXXXX").string();
  if (mkdtemp(pattern.data()) == nullptr) {
    throw Error(ErrorCode::io, fmt::format("{}: cannot create a private MPS directory ({})", base, std::strerror(errno)));
  }
  std::error_code ec;
  fs::create_directory(fs::path(pattern) / "pipe", ec);
  if (!ec) fs::create_directory(fs::path(pattern) / "log", ec);
  if (ec) {
    fs::remove_all(pattern, ec);
    throw Error(ErrorCode::io, fmt::format("{}: cannot create the MPS pipe and log directories", pattern));
  }
  return pattern;
}

// The last kOutputTailChars of a small text file, on one line; empty if there is none.
std::string file_tail(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  auto content = std::string(trim(text.str()));
  if (content.size() > kOutputTailChars) content = "…" + content.substr(content.size() - kOutputTailChars);
  std::replace(content.begin(), content.end(), '\n', ' ');
  return content;
}

std::string quoted_output(const std::string& path) {
  const auto tail = file_tail(path);
  return tail.empty() ? std::string() : fmt::format(": {}", tail);
}

UniqueFd open_output_file(const std::string& path) {
  UniqueFd fd(open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
  if (!fd.valid()) throw Error(ErrorCode::io, fmt::format("{}: cannot create ({})", path, std::strerror(errno)));
  return fd;
}

std::optional<pid_t> read_pid_file(const std::string& path) {
  std::ifstream in(path);
  long long pid = 0;
  if (!(in >> pid) || pid <= 0) return std::nullopt;
  return static_cast<pid_t>(pid);
}

void sleep_s(double seconds) { std::this_thread::sleep_for(std::chrono::duration<double>(seconds)); }

// Waits until `done` or the deadline; whether `done`.
template <typename Predicate>
bool wait_until(double deadline_s, Predicate done) {
  double pause_s = 0.001;
  while (!done()) {
    if (steady_now_s() >= deadline_s) return false;
    sleep_s(pause_s);
    pause_s = std::min(pause_s * 2.0, 0.02);
  }
  return true;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Partitions

void check_mps_shares(const std::vector<int>& shares_pct, int step_pct) {
  if (step_pct < 1 || step_pct > 100 || 100 % step_pct != 0) {
    throw usage_error(fmt::format("MPS step {} % must divide 100 (5 as upstream, 10, 25, ...)", step_pct));
  }
  if (shares_pct.empty()) throw usage_error("no MPS shares: give at least one tenant");
  long long total = 0;
  for (const int share : shares_pct) {
    if (share <= 0 || share % step_pct != 0) {
      throw usage_error(fmt::format("MPS share {} % in [{}] is not a positive multiple of the {} % step", share,
                                    list_text(shares_pct), step_pct));
    }
    total += share;
  }
  if (total > 100) {
    throw usage_error(fmt::format("MPS shares [{}] add up to {} %, more than 100 %", list_text(shares_pct), total));
  }
}

void check_mps_batches(const std::vector<int>& batches, std::size_t tenant_count) {
  if (batches.size() != tenant_count) {
    throw usage_error(fmt::format("{} batch sizes [{}] for {} MPS tenants: give one per tenant", batches.size(),
                                  list_text(batches), tenant_count));
  }
  for (const int batch : batches) {
    if (batch < 1) throw usage_error(fmt::format("batch size {} in [{}] must be at least 1", batch, list_text(batches)));
  }
}

std::vector<tune::Tenant> mps_tenants(const std::vector<int>& shares_pct, const std::vector<int>& batches,
                                      int step_pct) {
  check_mps_shares(shares_pct, step_pct);
  check_mps_batches(batches, shares_pct.size());
  std::vector<tune::Tenant> tenants;
  tenants.reserve(shares_pct.size());
  for (std::size_t i = 0; i < shares_pct.size(); ++i) tenants.push_back({shares_pct[i], batches[i]});
  return tenants;
}

std::vector<tune::Tenant> mps_tenants(const Knobs& knobs, int step_pct) {
  std::vector<int> shares;
  std::vector<int> batches;
  for (const auto& tenant : knobs.tenants) {
    const double share = tenant.mps_share_pct;
    if (!std::isfinite(share) || share != std::round(share) || share < 0.0 || share > 100.0) {
      throw usage_error(fmt::format("MPS share {} % is not a whole percentage", share));
    }
    shares.push_back(static_cast<int>(share));
    batches.push_back(tenant.batch_size);
  }
  return mps_tenants(shares, batches, step_pct);
}

std::string describe_mps_tenants(const std::vector<tune::Tenant>& tenants) {
  std::vector<std::string> parts;
  parts.reserve(tenants.size());
  for (const auto& t : tenants) parts.push_back(fmt::format("{} %×{}", t.share_pct, t.batch));
  return join(parts, ", ");
}

// ---------------------------------------------------------------------------------------------
// MpsDaemon

std::string default_mps_control_binary() {
  const char* value = std::getenv(kMpsControlEnv);
  return value != nullptr && *value != '\0' ? value : kMpsControlBinary;
}

namespace {

std::string found_control_binary(const MpsDaemonOptions& options) {
  const auto wanted = options.control_binary.empty() ? default_mps_control_binary() : options.control_binary;
  const auto found = find_executable(wanted);
  if (!found) {
    throw Error(ErrorCode::device,
                fmt::format("MPS control binary '{}' not found{} (it comes with the NVIDIA driver; set {} to its path)",
                            wanted, wanted.find('/') == std::string::npos ? " on PATH" : " or not executable",
                            kMpsControlEnv));
  }
  return *found;
}

constexpr const char* kOwnerFile = "owner";

void write_owner(const std::string& directory) {
  const auto me = device::this_process();
  write_text_file((fs::path(directory) / kOwnerFile).string(),
                  fmt::format("{} {}\n", me.pid, me.start_ticks));
}

// The gpucap that made a private directory; nullopt if it did not say (or not legibly).
std::optional<device::ProcessId> owner_of(const std::string& directory) {
  std::ifstream in(fs::path(directory) / kOwnerFile);
  device::ProcessId owner;
  if (!(in >> owner.pid >> owner.start_ticks)) return std::nullopt;
  return owner;
}

}  // namespace

std::vector<std::string> recover_orphaned_mps_daemons(const MpsDaemonOptions& options) {
  std::vector<std::string> recovered;
  std::error_code ec;
  const auto base = private_dir_base(options.base_dir);
  std::optional<std::string> control_binary;
  for (const auto& entry : fs::directory_iterator(base, ec)) {
    const auto name = entry.path().filename().string();
    if (name.rfind("gpucap-mps-", 0) != 0 || !entry.is_directory()) continue;
    const auto owner = owner_of(entry.path().string());
    if (!owner || device::is_running(*owner)) continue;
    if (!control_binary) control_binary = found_control_binary(options);
    MpsDaemon orphan(MpsDaemon::Adopt{}, options, entry.path().string(), *control_binary);
    try {
      orphan.stop();
    } catch (const Error& e) {
      spdlog::warn("{}", e.what());
    }
    spdlog::warn("stopped the MPS daemon of a gpucap (pid {}) that did not exit normally; removed {}", owner->pid,
                 entry.path().string());
    recovered.push_back(entry.path().string());
  }
  return recovered;
}

MpsDaemon::MpsDaemon(Adopt, const MpsDaemonOptions& options, std::string directory, std::string control_binary)
    : options_(options), control_binary_(std::move(control_binary)), directory_(std::move(directory)) {
  const auto pid = read_pid_file((fs::path(pipe_dir()) / kDaemonPidFile).string());
  if (pid && process_alive(*pid)) pid_ = *pid;
  running_ = true;  // stop() sends quit whether or not the pid file names a live daemon
}

MpsDaemon::MpsDaemon(const MpsDaemonOptions& options) : options_(options) {
  control_binary_ = found_control_binary(options_);
  (void)recover_orphaned_mps_daemons(options_);
  directory_ = make_private_dir(private_dir_base(options_.base_dir));
  try {
    write_owner(directory_);
  } catch (...) {
    remove_directory();
    throw;
  }
  if (pipe_dir().size() > kMaxPipeDirChars) {
    remove_directory();
    throw usage_error(fmt::format("MPS pipe directory {} is too long for a Unix socket path; use a shorter base "
                                  "directory", pipe_dir()));
  }
  const double deadline_s = steady_now_s() + options_.start_timeout_s;
  const auto output_path = (fs::path(directory_) / "control-start.txt").string();
  try {
    {
      const auto output = open_output_file(output_path);
      SpawnSpec spec;
      spec.executable = control_binary_;
      spec.argv = {control_binary_, "-d"};
      spec.environment = environment();
      spec.stdout_fd = output.get();
      spec.stderr_fd = output.get();
      auto control = ChildProcess::spawn(spec);
      running_ = true;  // from here on, a daemon may exist: stop it on failure
      const auto status = control.wait_for(options_.start_timeout_s);
      if (!status) {
        throw Error(ErrorCode::device, fmt::format("'{} -d' did not return within {} s", control_binary_,
                                                   options_.start_timeout_s));
      }
      if (*status != 0) {
        throw Error(ErrorCode::device, fmt::format("cannot start the MPS control daemon: '{} -d' {}{}", control_binary_,
                                                   describe_wait_status(*status), quoted_output(output_path)));
      }
    }
    wait_until_up(deadline_s);
  } catch (...) {
    try {
      stop();
    } catch (const std::exception& e) {
      // Expected when no daemon came up at all; worth a warning only if one did.
      if (pid_ != 0) spdlog::warn("after a failed MPS start: {}", e.what());
      spdlog::debug("after a failed MPS start: {}", e.what());
    }
    remove_directory();
    throw;
  }
  spdlog::debug("MPS control daemon {} up, pipe directory {}", pid_, pipe_dir());
}

MpsDaemon::~MpsDaemon() {
  try {
    stop();
  } catch (const std::exception& e) {
    spdlog::error("stopping the MPS control daemon: {}", e.what());
  }
}

std::string MpsDaemon::pipe_dir() const { return (fs::path(directory_) / "pipe").string(); }
std::string MpsDaemon::log_dir() const { return (fs::path(directory_) / "log").string(); }

bool MpsDaemon::running() const { return running_ && (pid_ == 0 || process_alive(pid_)); }

std::vector<std::string> MpsDaemon::environment() const {
  return environment_with({{kMpsPipeDirEnv, pipe_dir()}, {kMpsLogDirEnv, log_dir()}}, {kMpsShareEnv});
}

void MpsDaemon::wait_until_up(double deadline_s) {
  const auto pid_file = (fs::path(pipe_dir()) / kDaemonPidFile).string();
  const bool up = wait_until(deadline_s, [&] {
    const auto pid = read_pid_file(pid_file);
    if (pid && process_alive(*pid)) pid_ = *pid;
    return pid_ != 0;
  });
  if (up) return;
  // Drivers that write no pid file: the control socket says the daemon listens.
  if (fs::exists(fs::path(pipe_dir()) / "control")) {
    spdlog::warn("the MPS control daemon wrote no pid file; gpucap cannot check that it is gone after it quits");
    return;
  }
  const auto log = quoted_output((fs::path(log_dir()) / "control.log").string());
  throw Error(ErrorCode::device, fmt::format("the MPS control daemon did not come up within {} s{}",
                                             options_.start_timeout_s,
                                             log.empty() ? " (it wrote no log)" : " (its log" + log + ")"));
}

void MpsDaemon::send_quit(double timeout_s) {
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) {
    throw Error(ErrorCode::io, fmt::format("cannot create a pipe ({})", std::strerror(errno)));
  }
  UniqueFd read_end(pipe_fds[0]);
  UniqueFd write_end(pipe_fds[1]);
  const auto output_path = (fs::path(directory_) / "control-quit.txt").string();
  const auto output = open_output_file(output_path);
  SpawnSpec spec;
  spec.executable = control_binary_;
  spec.argv = {control_binary_};
  spec.environment = environment();
  spec.stdin_fd = read_end.get();
  spec.stdout_fd = output.get();
  spec.stderr_fd = output.get();
  auto control = ChildProcess::spawn(spec);
  read_end.reset();
  (void)write_all(write_end.get(), "quit\n");
  write_end.reset();
  const auto status = control.wait_for(timeout_s);
  if (!status) {
    throw Error(ErrorCode::device, fmt::format("'{}' did not take the quit command within {} s", control_binary_,
                                               timeout_s));
  }
  if (*status != 0) {
    throw Error(ErrorCode::device, fmt::format("'{}' refused to quit the MPS daemon: it {}{}", control_binary_,
                                               describe_wait_status(*status), quoted_output(output_path)));
  }
}

void MpsDaemon::stop() {
  if (!running_) return;
  running_ = false;
  const double deadline_s = steady_now_s() + options_.stop_timeout_s;
  std::string problem;
  try {
    send_quit(options_.stop_timeout_s);
  } catch (const Error& e) {
    problem = e.what();
  }
  if (pid_ != 0 && !wait_until(deadline_s, [this] { return !process_alive(pid_); })) {
    // Ours alone (the pipe directory is private): it must not outlive gpucap.
    kill(pid_, SIGTERM);
    if (!wait_until(steady_now_s() + kTermGraceS, [this] { return !process_alive(pid_); })) kill(pid_, SIGKILL);
    const bool gone = wait_until(steady_now_s() + kTermGraceS, [this] { return !process_alive(pid_); });
    problem = fmt::format("the MPS control daemon (pid {}) did not quit within {} s and was {}{}", pid_,
                          options_.stop_timeout_s, gone ? "killed" : "sent SIGKILL but is still there",
                          problem.empty() ? "" : " (" + problem + ")");
  } else if (!problem.empty() && pid_ != 0) {
    // The daemon is gone all the same (it may have died before): nothing is left behind.
    spdlog::warn("MPS daemon stop: {}", problem);
    problem.clear();
  }
  remove_directory();
  if (!problem.empty()) throw Error(ErrorCode::device, problem);
}

void MpsDaemon::remove_directory() noexcept {
  if (directory_.empty()) return;
  std::error_code ec;
  fs::remove_all(directory_, ec);
  if (ec) spdlog::warn("{}: cannot remove the private MPS directory ({})", directory_, ec.message());
}

}  // namespace gpucap::runtime
