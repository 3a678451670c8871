#pragma once
// The batch-size optimizer's client for a training program, with the lifecycle of Zeus's
// BatchSizeOptimizer (zeus/optimizer/batch_size/client.py):
//
//   BsoClient bso(options, job, monitor); // registers the job (also when it already exists)
//   const int b = bso.get_batch_size();  // one trial per training run
//   bso.on_train_begin();                 // opens the energy window
//   for (epoch ...) { train(b); if (bso.on_evaluate(validate())) break; }
//
// on_evaluate reports the trial's cumulative time and energy after every epoch and says whether
// to stop; a stop that did not reach the target throws BsoTrainFailedError (Zeus's
// ZeusBSOTrainFailError): the run should end, and the next one gets another batch size.
// The trial is ended on the server (PATCH /trials) by the destructor — also when an exception
// unwinds — and, if the destructor never runs, by the hooks in trial_hooks.hpp (SIGINT, SIGTERM,
// std::exit, std::terminate).

#include <optional>
#include <vector>
#include <string>

#include "gpucap/bso/job_spec.hpp"
#include "gpucap/bso/optimizer.hpp"
#include "gpucap/bsoclient/http.hpp"
#include "gpucap/bsoclient/trial_hooks.hpp"
#include "gpucap/core/error.hpp"
#include "gpucap/monitor/monitor.hpp"

namespace gpucap::bsoclient {

// The server stopped the trial before it reached the target (the cost went over β × the best
// cost, or max_epochs passed). This batch size will not be tried again.
class BsoTrainFailedError : public Error {
 public:
  explicit BsoTrainFailedError(const std::string& message) : Error(ErrorCode::not_converged, message) {}
};

// What Zeus's client sends with the job (GpuConfig): the GPUs' largest power limit in whole
// watts (rounded down, as Zeus does) times their number, and their model name.
struct GpuConfig {
  double max_power_w = 0.0;
  int number_of_gpus = 0;
  std::string gpu_model;
};

// Error(usage) for no devices or a mix of GPU models (the optimizer's costs assume one kind, as
// Zeus's does).
[[nodiscard]] GpuConfig gpu_config_of(const std::vector<device::Device*>& devices);

struct ClientOptions {
  HttpOptions http;
  // Distributed training: every rank may register, only rank 0 asks for the batch size.
  int rank = 0;
  // End the trial on SIGINT/SIGTERM (then the signal does what it did before).
  bool end_trial_on_signal = true;
};

class BsoClient {
 public:
  // Fills the job's GPU fields from the monitor's devices (gpu_config_of), checks the job
  // (Error(usage)) and registers it: POST /jobs. A job with this job_id and another config is
  // the server's 409, thrown as BsoServerError. The client measures in the monitor's window
  // kTrialWindow; the program may open windows of its own beside it.
  BsoClient(ClientOptions options, bso::JobSpec job, monitor::Monitor& monitor);
  // Ends the trial if one was handed out. Never throws.
  ~BsoClient();
  BsoClient(const BsoClient&) = delete;
  BsoClient& operator=(const BsoClient&) = delete;

  // The job as the server created it (job_id set).
  [[nodiscard]] const bso::JobSpec& job() const noexcept { return job_; }
  // 201: the server created the job; 200: it had one with this job_id and the same config.
  [[nodiscard]] int register_status() const noexcept { return register_status_; }

  // GET /jobs/batch_size once; later calls return the same size. Error(usage) for rank != 0;
  // BsoServerError when the server hands out a size the job does not have.
  int get_batch_size();
  // Opens the window whose time and energy the next on_evaluate reports.
  void on_train_begin();
  // After each epoch, with its validation metric: closes the window, adds it to the trial's
  // totals, POST /report, reopens the window unless the server says stop. Returns stop_train
  // (true also for every call after a stop). Throws BsoTrainFailedError for a stop that did not
  // converge, Error(usage) before get_batch_size or on_train_begin.
  bool on_evaluate(double metric);
  // PATCH /trials now (the destructor does it otherwise). Idempotent; never throws.
  void end_trial() noexcept;

  [[nodiscard]] const std::optional<bso::TrialId>& trial() const noexcept { return trial_; }
  [[nodiscard]] bool training_finished() const noexcept { return training_finished_; }
  [[nodiscard]] int epochs_reported() const noexcept { return epoch_; }
  // The trial's totals so far, as last reported.
  [[nodiscard]] double time_s() const noexcept { return time_s_; }
  [[nodiscard]] double energy_j() const noexcept { return energy_j_; }
  [[nodiscard]] const bso::ReportResponse& last_response() const noexcept { return last_response_; }
  [[nodiscard]] const monitor::Monitor& monitor() const noexcept { return monitor_; }

  // The monitor window the client measures epochs in.
  static constexpr const char* kTrialWindow = "gpucap bso epoch";

 private:
  ClientOptions options_;
  JsonHttp http_;
  monitor::Monitor& monitor_;
  bso::JobSpec job_;
  int register_status_ = 0;
  std::optional<bso::TrialId> trial_;
  std::optional<HookTicket> hook_ticket_;
  bool training_finished_ = false;
  int epoch_ = 0;
  double time_s_ = 0.0;
  double energy_j_ = 0.0;
  bso::ReportResponse last_response_;
};

// Zeus's JSON shapes, exposed for tests and other clients.
[[nodiscard]] nlohmann::json job_request_json(const bso::JobSpec& job);  // job_id null when empty
[[nodiscard]] nlohmann::json to_json(const bso::TrialId& trial);
[[nodiscard]] nlohmann::json to_json(const bso::TrainingResult& result);
// Error(invalid_data) for a body without the fields.
[[nodiscard]] bso::TrialId trial_id_from_json(const nlohmann::json& body);
[[nodiscard]] bso::ReportResponse report_response_from_json(const nlohmann::json& body);

}  // namespace gpucap::bsoclient
