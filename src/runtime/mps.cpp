#include "gpucap/runtime/mps.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
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

// ---------------------------------------------------------------------------------------------
// MpsWorkerPool

namespace {

std::vector<int> shares_of(const std::vector<tune::Tenant>& tenants) {
  std::vector<int> shares;
  shares.reserve(tenants.size());
  for (const auto& t : tenants) shares.push_back(t.share_pct);
  return shares;
}

std::vector<tune::Tenant> checked_tenants(const std::vector<tune::Tenant>& tenants, int step_pct) {
  std::vector<int> batches;
  batches.reserve(tenants.size());
  for (const auto& t : tenants) batches.push_back(t.batch);
  return mps_tenants(shares_of(tenants), batches, step_pct);
}

}  // namespace

std::vector<std::string> mps_worker_command(const std::string& gpucap_binary,
                                            const std::vector<std::string>& worker_args) {
  std::vector<std::string> command{gpucap_binary, "mps-worker"};
  command.insert(command.end(), worker_args.begin(), worker_args.end());
  return command;
}

struct MpsWorkerPool::Worker {
  int tenant = 0;
  int share_pct = 0;
  ChildProcess process;
  UniqueFd channel;
  LineReader reader{-1};

  [[nodiscard]] std::string name() const {
    return fmt::format("MPS worker of tenant {} (share {} %, pid {})", tenant, share_pct, process.pid());
  }
  // Why the worker stopped talking: how it exited, waiting up to grace_s for it to do so.
  [[nodiscard]] std::string death(double grace_s) {
    if (const auto status = process.wait_for(grace_s)) return describe_wait_status(*status);
    process.kill_and_reap();
    return "closed its channel without exiting (killed)";
  }
};

MpsWorkerPool::MpsWorkerPool(MpsPoolOptions options, const std::vector<tune::Tenant>& tenants)
    : options_(std::move(options)) {
  tenants_ = checked_tenants(tenants, options_.step_pct);
  if (options_.worker_command.empty()) throw usage_error("no MPS worker command");
  const auto found = find_executable(options_.worker_command.front());
  if (!found) {
    throw usage_error(fmt::format("MPS worker program '{}' not found or not executable", options_.worker_command.front()));
  }
  worker_executable_ = *found;
  try {
    if (options_.daemon) daemon_ = std::make_unique<MpsDaemon>(*options_.daemon);
    start_workers();
  } catch (...) {
    kill_workers();
    daemon_.reset();  // its destructor stops it and logs a failure
    failed_ = true;
    throw;
  }
}

MpsWorkerPool::~MpsWorkerPool() {
  try {
    stop();
  } catch (const std::exception& e) {
    spdlog::error("stopping the MPS workers: {}", e.what());
  }
}

std::vector<pid_t> MpsWorkerPool::worker_pids() const {
  std::vector<pid_t> pids;
  pids.reserve(workers_.size());
  for (const auto& w : workers_) pids.push_back(w->process.pid());
  return pids;
}

void MpsWorkerPool::check_usable() const {
  if (failed_) {
    throw Error(ErrorCode::device, "the MPS workers were stopped after an earlier failure; start a new pool");
  }
}

void MpsWorkerPool::start_workers() {
  const std::string pipe_dir = daemon_ ? daemon_->pipe_dir() : options_.pipe_dir;
  for (std::size_t i = 0; i < tenants_.size(); ++i) {
    auto worker = std::make_unique<Worker>();
    worker->tenant = static_cast<int>(i);
    worker->share_pct = tenants_[i].share_pct;
    int pair[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) {
      throw Error(ErrorCode::io, fmt::format("cannot create a socket pair ({})", std::strerror(errno)));
    }
    worker->channel.reset(pair[0]);
    const UniqueFd child_end(pair[1]);
    auto env = options_.worker_env;
    env.emplace_back(kMpsShareEnv, std::to_string(worker->share_pct));
    if (!pipe_dir.empty()) env.emplace_back(kMpsPipeDirEnv, pipe_dir);
    env.emplace_back(kMpsTenantEnv, std::to_string(i));
    env.emplace_back(kMpsProtocolFdEnv, std::to_string(kChildProtocolFd));
    SpawnSpec spec;
    spec.executable = worker_executable_;
    spec.argv = options_.worker_command;
    spec.environment = environment_with(env);
    spec.protocol_fd = child_end.get();
    spec.die_with_parent = true;
    worker->process = ChildProcess::spawn(spec);
    worker->reader = LineReader(worker->channel.get());
    workers_.push_back(std::move(worker));
  }
  ++worker_starts_;
  std::vector<MpsMessage> ready;
  wait_for_replies(MpsMessage::Kind::ready, options_.ready_timeout_s, "its ready message", &ready);
  for (std::size_t i = 0; i < workers_.size(); ++i) {
    if (ready[i].share_pct != workers_[i]->share_pct) {
      fail(fmt::format("{} runs with {} in its environment, not {} %", workers_[i]->name(),
                       ready[i].share_pct ? fmt::format("share {} %", *ready[i].share_pct) : std::string("no share"),
                       workers_[i]->share_pct));
    }
    spdlog::debug("{} ready: {}", workers_[i]->name(), ready[i].engine);
  }
}

void MpsWorkerPool::wait_for_replies(MpsMessage::Kind expected, double timeout_s, const std::string& waiting_for,
                                     std::vector<MpsMessage>* replies) {
  const double deadline_s = steady_now_s() + timeout_s;
  replies->assign(workers_.size(), MpsMessage{});
  std::vector<bool> pending(workers_.size(), true);
  std::size_t left = workers_.size();
  const auto take = [&](std::size_t i, const std::string& line) {
    auto& worker = *workers_[i];
    MpsMessage message;
    try {
      message = parse_mps_message(line);
    } catch (const Error& e) {
      fail(fmt::format("{} sent a malformed message ({})", worker.name(), e.what()));
    }
    if (message.kind == MpsMessage::Kind::error) {
      const auto status = worker.death(options_.exit_grace_s);
      fail(fmt::format("{} failed: {} (it {})", worker.name(), message.message, status));
    }
    if (message.kind != expected) fail(fmt::format("{} sent a message out of turn: '{}'", worker.name(), line));
    (*replies)[i] = std::move(message);
    pending[i] = false;
    --left;
  };
  std::string line;
  while (left > 0) {
    for (std::size_t i = 0; i < workers_.size(); ++i) {
      if (pending[i] && workers_[i]->reader.take_line(&line)) take(i, line);
    }
    if (left == 0) break;
    const double left_s = deadline_s - steady_now_s();
    if (left_s <= 0.0) {
      const auto late = static_cast<std::size_t>(std::find(pending.begin(), pending.end(), true) - pending.begin());
      fail(fmt::format("{} did not send {} within {:.3g} s", workers_[late]->name(), waiting_for, timeout_s));
    }
    std::vector<pollfd> fds;
    std::vector<std::size_t> index;
    for (std::size_t i = 0; i < workers_.size(); ++i) {
      if (!pending[i]) continue;
      fds.push_back({workers_[i]->channel.get(), POLLIN, 0});
      index.push_back(i);
    }
    const int ready = poll(fds.data(), fds.size(), static_cast<int>(std::ceil(std::min(left_s, 1e6) * 1000.0)));
    if (ready < 0 && errno != EINTR) fail(fmt::format("poll on the MPS workers failed ({})", std::strerror(errno)));
    for (std::size_t k = 0; ready > 0 && k < fds.size(); ++k) {
      if (fds[k].revents == 0) continue;
      auto& worker = *workers_[index[k]];
      bool open = true;
      try {
        open = worker.reader.fill();
      } catch (const Error& e) {
        fail(fmt::format("{} sent a malformed message ({})", worker.name(), e.what()));
      }
      if (!open && !worker.reader.has_line()) {
        const auto status = worker.death(options_.exit_grace_s);
        fail(fmt::format("{} died before it sent {}: it {}", worker.name(), waiting_for, status));
      }
    }
  }
}

void MpsWorkerPool::fail(const std::string& what) {
  failed_ = true;
  kill_workers();
  std::string daemon_note;
  if (daemon_) {
    try {
      daemon_->stop();
      daemon_note = " and the MPS daemon stopped";
    } catch (const std::exception& e) {
      daemon_note = fmt::format("; stopping the MPS daemon failed too: {}", e.what());
    }
    daemon_.reset();
  }
  throw Error(ErrorCode::device, fmt::format("{}; every MPS worker was stopped{}", what, daemon_note));
}

void MpsWorkerPool::kill_workers() noexcept {
  for (auto& worker : workers_) worker->process.signal_group(SIGKILL);
  for (auto& worker : workers_) worker->process.kill_and_reap();
  workers_.clear();
}

void MpsWorkerPool::stop_workers() noexcept {
  // A worker that is gone already cannot take the command; it is reaped below all the same.
  for (auto& worker : workers_) (void)write_all(worker->channel.get(), encode(MpsCommand{}));
  const double deadline_s = steady_now_s() + options_.quit_timeout_s;
  for (auto& worker : workers_) {
    const auto status = worker->process.wait_for(std::max(0.0, deadline_s - steady_now_s()));
    if (!status) {
      spdlog::warn("{} did not quit within {} s; killed", worker->name(), options_.quit_timeout_s);
    } else if (*status != 0) {
      spdlog::warn("{} {} when told to quit", worker->name(), describe_wait_status(*status));
    }
  }
  kill_workers();
}

void MpsWorkerPool::stop() {
  stop_workers();
  if (daemon_) {
    auto daemon = std::move(daemon_);
    daemon->stop();
  }
}

void MpsWorkerPool::set_tenants(const std::vector<tune::Tenant>& tenants) {
  check_usable();
  auto checked = checked_tenants(tenants, options_.step_pct);
  const auto shares = shares_of(checked);
  const auto current = shares_of(tenants_);
  tenants_ = std::move(checked);
  if (shares == current) return;
  spdlog::debug("MPS shares [{}] → [{}]: restarting the workers", list_text(current), list_text(shares));
  try {
    stop_workers();
    start_workers();
  } catch (const Error& e) {
    if (!failed_) fail(e.what());
    throw;
  }
}

MpsRoundResult MpsWorkerPool::run_round(const std::vector<tune::Tenant>& tenants, const MpsRunRequest& request) {
  set_tenants(tenants);
  std::vector<int> batches;
  for (const auto& t : tenants_) batches.push_back(t.batch);
  return run_round(batches, request);
}

MpsRoundResult MpsWorkerPool::run_round(const std::vector<int>& batches, const MpsRunRequest& request) {
  check_usable();
  check_mps_batches(batches, tenants_.size());
  if (!std::isfinite(request.warmup_s) || request.warmup_s < 0.0 || !std::isfinite(request.measure_s) ||
      request.measure_s <= 0.0) {
    throw usage_error(fmt::format("MPS round: warm-up {} s must be >= 0 and measurement {} s > 0", request.warmup_s,
                                  request.measure_s));
  }
  for (std::size_t i = 0; i < batches.size(); ++i) tenants_[i].batch = batches[i];
  // Every worker starts before any reply is awaited: the tenants run side by side, as under MPS.
  for (std::size_t i = 0; i < workers_.size(); ++i) {
    MpsCommand run;
    run.kind = MpsCommand::Kind::run;
    run.batch = batches[i];
    run.warmup_s = request.warmup_s;
    run.measure_s = request.measure_s;
    if (!write_all(workers_[i]->channel.get(), encode(run))) {
      const auto status = workers_[i]->death(options_.exit_grace_s);
      fail(fmt::format("{} died before the round: it {}", workers_[i]->name(), status));
    }
  }
  std::vector<MpsMessage> replies;
  const double timeout_s = request.warmup_s + request.measure_s + options_.reply_slack_s;
  wait_for_replies(MpsMessage::Kind::result, timeout_s, "the result of its round", &replies);
  MpsRoundResult round;
  for (std::size_t i = 0; i < workers_.size(); ++i) {
    const auto& reply = replies[i];
    if (reply.batch > batches[i]) {
      fail(fmt::format("{} reports batch {}, larger than the {} it was given", workers_[i]->name(), reply.batch,
                       batches[i]));
    }
    MpsTenantResult tenant;
    tenant.tenant = static_cast<int>(i);
    tenant.share_pct = workers_[i]->share_pct;
    tenant.batch_requested = batches[i];
    tenant.batch_used = reply.batch;
    tenant.images = reply.images;
    tenant.seconds = reply.seconds;
    tenant.throughput_img_s = reply.seconds > 0.0 ? static_cast<double>(reply.images) / reply.seconds : 0.0;
    if (reply.batch < batches[i]) {
      spdlog::warn("{} ran out of memory at batch {} and used {}", workers_[i]->name(), batches[i], reply.batch);
    }
    round.images += tenant.images;
    round.throughput_img_s += tenant.throughput_img_s;
    round.tenants.push_back(tenant);
  }
  return round;
}

}  // namespace gpucap::runtime
