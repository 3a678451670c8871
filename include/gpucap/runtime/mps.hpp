#pragma once
// The real MPS path: several inference tenants on one GPU through NVIDIA MPS, as PctoDL runs them
// (seed-systems.md §2.2): an MPS control daemon, one worker process per tenant with its share in
// CUDA_MPS_ACTIVE_THREAD_PERCENTAGE (set in the worker's environment before CUDA starts), each
// told its batch size, each running forward passes for a measurement period and reporting its
// throughput; a round's throughput is the sum over the tenants.
//
// Two deviations from upstream, both so that gpucap never changes anything it does not own:
// - the GPU's compute mode is never changed (upstream sets EXCLUSIVE_PROCESS). MPS works in the
//   DEFAULT mode; EXCLUSIVE_PROCESS only stops other processes from using the GPU beside the MPS
//   server, and it is a global setting that would outlive a crashed gpucap — the only GPU settings
//   gpucap changes are those of its journaled control session (device/control_session.hpp);
// - the daemon gets a private pipe and log directory (CUDA_MPS_PIPE_DIRECTORY,
//   CUDA_MPS_LOG_DIRECTORY) that gpucap creates, so that gpucap never talks to, nor stops, a daemon
//   someone else runs, and nobody else's CUDA program joins gpucap's MPS server by accident.
//
// Failure is contained: a worker that dies, hangs or answers garbage ends the round with an
// Error(device) that names the tenant, its share and its exit status or signal, after every other
// worker was killed and reaped and the pool's daemon (if it started one) was stopped. Workers also
// die with gpucap (PR_SET_PDEATHSIG: strictly, with the thread that started them, so start a pool
// from a thread that outlives it). The MPS path never touches clocks or the power limit: those
// stay with the caller's ControlSession, which restores them on its own.

#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gpucap/core/knobs.hpp"
#include "gpucap/runtime/mps_process.hpp"
#include "gpucap/runtime/mps_protocol.hpp"
#include "gpucap/tune/partition.hpp"

namespace gpucap::runtime {

// MPS shares are multiples of this step by default (PctoDL's --mps-step).
inline constexpr int kDefaultMpsStepPct = 5;

// Error(usage), one line, unless there is at least one share and every share is a positive
// multiple of step_pct, adding up to at most 100.
void check_mps_shares(const std::vector<int>& shares_pct, int step_pct = kDefaultMpsStepPct);
// Error(usage) unless there is exactly one batch per tenant and each is at least 1.
void check_mps_batches(const std::vector<int>& batches, std::size_t tenant_count);
// Both checks; the tenants, in order.
[[nodiscard]] std::vector<tune::Tenant> mps_tenants(const std::vector<int>& shares_pct, const std::vector<int>& batches,
                                                    int step_pct = kDefaultMpsStepPct);
// The tenants of `knobs` (checked the same way); Error(usage) for a share that is not a whole
// percentage.
[[nodiscard]] std::vector<tune::Tenant> mps_tenants(const Knobs& knobs, int step_pct = kDefaultMpsStepPct);
// "50 %×16, 25 %×8" — shares and batches, for messages.
[[nodiscard]] std::string describe_mps_tenants(const std::vector<tune::Tenant>& tenants);

// ---------------------------------------------------------------------------------------------
// The MPS control daemon.

inline constexpr const char* kMpsControlEnv = "GPUCAP_MPS_CONTROL";
inline constexpr const char* kMpsControlBinary = "nvidia-cuda-mps-control";

// $GPUCAP_MPS_CONTROL if set, else nvidia-cuda-mps-control (looked up on PATH).
[[nodiscard]] std::string default_mps_control_binary();

struct MpsDaemonOptions {
  std::string control_binary;  // empty: default_mps_control_binary()
  // Where the private directory (gpucap-mps-XXXXXX, with pipe/ and log/) is created; empty:
  // $XDG_RUNTIME_DIR, else $TMPDIR, else /tmp. Keep it short: MPS puts Unix sockets in pipe/.
  std::string base_dir;
  double start_timeout_s = 10.0;  // for `-d` to return and the daemon's pid file to appear
  double stop_timeout_s = 10.0;   // for the daemon to be gone after "quit"
};

// A private MPS control daemon for the life of the object: `CONTROL -d` with
// CUDA_MPS_PIPE_DIRECTORY and CUDA_MPS_LOG_DIRECTORY in a directory of its own; stopped by writing
// "quit" to `CONTROL` (same environment) and waiting until the daemon's process is gone.
class MpsDaemon {
 public:
  // Starts the daemon and waits until it is up (its pid file names a live process).
  // Error(device) when the control binary is missing, or the daemon fails to start or to come up
  // (nothing is left behind then: a half-started daemon is told to quit, the directory removed).
  explicit MpsDaemon(const MpsDaemonOptions& options = {});
  // stop(); a failure is logged, never thrown.
  ~MpsDaemon();
  MpsDaemon(const MpsDaemon&) = delete;
  MpsDaemon& operator=(const MpsDaemon&) = delete;

  // Quits the daemon, waits for it to be gone (killing it if it does not quit within
  // stop_timeout_s) and removes the directory. Idempotent. Error(device) if it had to be killed or
  // would not die.
  void stop();

  [[nodiscard]] bool running() const;
  [[nodiscard]] const std::string& directory() const { return directory_; }
  [[nodiscard]] std::string pipe_dir() const;  // the CUDA_MPS_PIPE_DIRECTORY of its clients
  [[nodiscard]] std::string log_dir() const;
  [[nodiscard]] pid_t pid() const { return pid_; }  // 0 if the daemon wrote no pid file
  [[nodiscard]] const std::string& control_binary() const { return control_binary_; }

 private:
  friend std::vector<std::string> recover_orphaned_mps_daemons(const MpsDaemonOptions& options);
  struct Adopt {};
  // Takes over the daemon a dead gpucap left in `directory` (for stop() to end it).
  MpsDaemon(Adopt, const MpsDaemonOptions& options, std::string directory, std::string control_binary);
  [[nodiscard]] std::vector<std::string> environment() const;
  void send_quit(double timeout_s);
  void wait_until_up(double deadline_s);
  void remove_directory() noexcept;

  MpsDaemonOptions options_;
  std::string control_binary_;
  std::string directory_;
  pid_t pid_ = 0;
  bool running_ = false;
};

// A gpucap killed with SIGKILL leaves its private daemon running (its workers die with it). Each
// private directory holds an `owner` file naming the gpucap process that made it; this quits the
// daemon of every gpucap-mps-* directory under the base directory whose owner is no longer
// running (as MpsDaemon::stop() does: quit, then SIGTERM/SIGKILL) and removes the directory.
// Directories without an owner file, or of a running gpucap, are left alone. Returns the
// directories cleaned up. MpsDaemon's constructor calls it before it starts a daemon of its own.
[[nodiscard]] std::vector<std::string> recover_orphaned_mps_daemons(const MpsDaemonOptions& options);

// ---------------------------------------------------------------------------------------------
// The workers.

struct MpsPoolOptions {
  // The worker's command line; [0] a path or a name on PATH. Real workers:
  // mps_worker_command(...); tests: a fake. Each worker speaks the protocol on its fd 3.
  std::vector<std::string> worker_command;
  // More environment for every worker (CUDA_VISIBLE_DEVICES, ...).
  std::vector<std::pair<std::string, std::string>> worker_env;
  // Start (and own) a private MPS daemon; nullopt: none (use pipe_dir).
  std::optional<MpsDaemonOptions> daemon;
  // Without a daemon of the pool's own: the pipe directory of a running MPS daemon for the
  // workers; empty: the workers inherit gpucap's environment as it is.
  std::string pipe_dir;
  int step_pct = kDefaultMpsStepPct;
  double ready_timeout_s = 120.0;  // a worker's start: CUDA init and model load
  double reply_slack_s = 60.0;     // a round's reply may take warm-up + measurement + this
  double quit_timeout_s = 5.0;     // for workers to exit after "quit" before they are killed
  double exit_grace_s = 1.0;       // for a worker that closed its channel to exit (for its status)
};

// The real worker: `gpucap mps-worker --model-file FILE ...` (the rest of `worker_args` appended).
[[nodiscard]] std::vector<std::string> mps_worker_command(const std::string& gpucap_binary,
                                                          const std::vector<std::string>& worker_args);

struct MpsRunRequest {
  double warmup_s = 2.0;   // upstream: 2 s of warm-up ...
  double measure_s = 3.0;  // ... then 3 s measured
};

struct MpsTenantResult {
  int tenant = 0;  // index, from 0
  int share_pct = 0;
  int batch_requested = 0;
  int batch_used = 0;  // smaller when the worker halved it on an out-of-memory error
  long long images = 0;
  double seconds = 0.0;
  double throughput_img_s = 0.0;
};

struct MpsRoundResult {
  std::vector<MpsTenantResult> tenants;
  long long images = 0;
  double throughput_img_s = 0.0;  // the sum over the tenants (as upstream)
};

// One worker process per tenant. Not thread-safe: one caller at a time.
class MpsWorkerPool {
 public:
  // Checks the tenants and the worker command (Error(usage); nothing is started), then starts the
  // daemon (if options.daemon) and one worker per tenant, and waits until every worker is ready
  // and runs with its own share. On any failure everything started is stopped before the Error.
  MpsWorkerPool(MpsPoolOptions options, const std::vector<tune::Tenant>& tenants);
  // stop(); never throws (a failure is logged).
  ~MpsWorkerPool();
  MpsWorkerPool(const MpsWorkerPool&) = delete;
  MpsWorkerPool& operator=(const MpsWorkerPool&) = delete;

  // One round at the current shares with these batch sizes (one per tenant; Error(usage)
  // otherwise, before anything is sent): every worker is told to run first, then every reply is
  // collected. Error(device) if a worker dies, hangs or answers garbage (then everything is
  // stopped: see above).
  MpsRoundResult run_round(const std::vector<int>& batches, const MpsRunRequest& request = {});
  // One round with these tenants: the workers are restarted first if (and only if) the shares
  // changed (MPS reads a process's share once, when CUDA starts in it).
  MpsRoundResult run_round(const std::vector<tune::Tenant>& tenants, const MpsRunRequest& request = {});
  // Restarts the workers if the shares changed; the batches are only remembered.
  void set_tenants(const std::vector<tune::Tenant>& tenants);

  // Tells every worker to quit (killing those that do not within quit_timeout_s), then stops the
  // pool's daemon. Idempotent. Error(device) if the daemon would not stop.
  void stop();

  [[nodiscard]] const std::vector<tune::Tenant>& tenants() const { return tenants_; }
  [[nodiscard]] std::vector<pid_t> worker_pids() const;
  // How many times a set of workers was started (1 after the constructor; +1 per share change).
  [[nodiscard]] int worker_starts() const { return worker_starts_; }
  // After a failure every process is stopped and the pool refuses new rounds.
  [[nodiscard]] bool failed() const { return failed_; }
  [[nodiscard]] const MpsDaemon* daemon() const { return daemon_.get(); }

 private:
  struct Worker;

  void start_workers();
  void stop_workers() noexcept;
  void kill_workers() noexcept;
  void wait_for_replies(MpsMessage::Kind expected, double timeout_s, const std::string& waiting_for,
                        std::vector<MpsMessage>* replies);
  [[noreturn]] void fail(const std::string& what);
  void check_usable() const;

  MpsPoolOptions options_;
  std::string worker_executable_;
  std::vector<tune::Tenant> tenants_;
  std::unique_ptr<MpsDaemon> daemon_;  // before workers_: destroyed after them
  std::vector<std::unique_ptr<Worker>> workers_;
  int worker_starts_ = 0;
  bool failed_ = false;
};

}  // namespace gpucap::runtime
