// MpsWorkerPool (runtime/mps.hpp): one worker process per MPS tenant, each at its share of the
// SMs, started, told its batches, asked for a round and stopped over the worker protocol.

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <poll.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "gpucap/core/error.hpp"
#include "gpucap/core/text.hpp"
#include "gpucap/runtime/mps.hpp"

namespace gpucap::runtime {

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
  spdlog::debug("MPS shares [{}] → [{}]: restarting the workers", fmt::join(current, ","), fmt::join(shares, ","));
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
