#pragma once
// What the service tests share: a server in this process or as the gpucap binary, a training job
// with a made-up but deterministic cost per batch size, and Zeus's Python client's requests,
// byte for byte as pydantic v1 and httpx send them.

#include <httplib.h>
#include <nlohmann/json.hpp>

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "gpucap/service/bso_server.hpp"
#include "gpucap/service/store.hpp"
#include "support/child_process.hpp"

namespace gpucap::test {

// A server on 127.0.0.1 and a free port in a thread of this process, until destroyed.
class InProcessServer {
 public:
  explicit InProcessServer(service::Store& store, service::ServerOptions options = {});
  ~InProcessServer();
  InProcessServer(const InProcessServer&) = delete;
  InProcessServer& operator=(const InProcessServer&) = delete;
  [[nodiscard]] int port() const { return port_; }

 private:
  service::BsoServer server_;
  int port_ = 0;
  std::thread thread_;
};

// `gpucap bso serve --db DB --listen 127.0.0.1:0 EXTRA...` as a child process; the port from the
// line it prints. Killed (SIGKILL) when destroyed.
class ServeProcess {
 public:
  explicit ServeProcess(const std::string& db, const std::vector<std::string>& extra = {});
  [[nodiscard]] int port() const { return port_; }
  // "gpucap bso serve: listening on http://127.0.0.1:PORT (...)", the first line it printed.
  [[nodiscard]] const std::string& listening_line() const { return listening_line_; }
  void kill_now();  // SIGKILL and reap
  ChildProcess& child() { return *child_; }

 private:
  std::unique_ptr<ChildProcess> child_;
  int port_ = 0;
  std::string listening_line_;
};

// A client of one server with keep-alive, as a training job would hold one.
[[nodiscard]] std::unique_ptr<httplib::Client> client_for(int port);

// The synthetic training job: batch size b reaches the target after epochs_to_target(b) epochs
// (never for 8 within max_epochs, never for 256), each epoch takes 600/sqrt(b) s at 150 + b/2 W,
// stretched by a few percent that depend on the recurrence (so the bandit sees varied costs).
struct SyntheticTraining {
  static const std::vector<int>& batch_sizes();  // 8 ... 256
  static int epochs_to_target(int batch_size);   // 0: never
  static double epoch_time_s(int batch_size, int recurrence);
  static double power_w(int batch_size);
  static double metric_after(int batch_size, int epoch);
};

// JobSpecFromClient as pydantic v1's .json() writes it (max_power 250.0, job_id and mab_seed
// null unless given): the synthetic job, target 0.5, max_epochs 12, two pruning rounds.
[[nodiscard]] std::string zeus_job_json(const std::string& prefix, const std::optional<std::string>& job_id,
                                        const std::optional<long long>& mab_seed);

// TrainingResult after `epoch` epochs of the synthetic job (cumulative time and energy), and
// TrialId, as pydantic v1's .json() writes them.
[[nodiscard]] std::string zeus_report_json(const std::string& job_id, int batch_size, int trial_number, int epoch, int recurrence);
[[nodiscard]] std::string zeus_trial_json(const std::string& job_id, int batch_size, int trial_number);

// Python's repr of a float (json.dumps): "250.0", "0.1", "106.06601717798213".
[[nodiscard]] std::string python_float(double x);

// What one run of a training script with Zeus's BatchSizeOptimizer did.
struct Recurrence {
  int batch_size = 0;
  int trial_number = 0;
  std::vector<nlohmann::json> reports;  // every ReportResponse, in order
  bool ended = false;                   // PATCH /trials sent and answered 2xx
};

// Drives one recurrence exactly as Zeus's client does: GET /jobs/batch_size, POST /report per
// epoch with cumulative time and energy until stop_train, PATCH /trials at exit. Checks every
// answer the way the client parses it (ADD_FAILURE on a mismatch). `stop_after_reports` stops
// early (before the PATCH), to leave a trial in flight; `recurrence` seeds the job's noise.
Recurrence run_zeus_recurrence(httplib::Client& client, const std::string& job_id, int recurrence,
                               std::optional<int> stop_after_reports = std::nullopt);
// The rest of a recurrence that stopped early: the reports after the ones already sent, then the PATCH.
void finish_zeus_recurrence(httplib::Client& client, const std::string& job_id, int recurrence, Recurrence& run);

// POST /jobs with the body; checks the answer as CreatedJob.parse_obj does; returns the job_id.
std::string register_zeus_job(httplib::Client& client, const std::string& body, int expected_status);

// What clients were told, to hold against what the database has afterwards.
class Ledger {
 public:
  void trial_given(const std::string& job_id, int trial_number, int batch_size);
  void report_answered(const std::string& job_id, int trial_number, int epoch, bool stop_train, bool converged);
  [[nodiscard]] std::size_t trials() const;
  // Every acknowledged trial is stored with its batch size and every acknowledged report is
  // applied. `exact`: every request was answered (no crash), so the database holds exactly that;
  // otherwise a request in flight at the crash may have been applied without its answer.
  void check(service::Store& store, bool exact) const;

 private:
  struct TrialRecord {
    int batch_size = 0;
    int epochs = 0;
    bool stop_train = false;
    bool converged = false;
  };
  mutable std::mutex mutex_;
  std::map<std::string, std::map<int, TrialRecord>> jobs_;
};

// Zeus's recurrences on `job_id` (numbered from `first_recurrence`), each request to the next of
// `clients` in turn (replicas), every answer recorded in `ledger`. Stops at the first request
// without a 2xx answer and returns false; no test failure (a crash test expects one).
bool drive_recurrences(const std::vector<httplib::Client*>& clients, const std::string& job_id, int first_recurrence,
                       int recurrences, Ledger& ledger);

// job_id as a query value (httpx's params=).
[[nodiscard]] std::string url_encode(const std::string& text);

}  // namespace gpucap::test
