#include "gpucap/bsoclient/client.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

namespace gpucap::bsoclient {
namespace {

// A malformed answer from the server is invalid data, not a bug of ours. An int is a JSON integer
// within int's range: nlohmann's get<int>() of 1e30 (or of 2^40) would not say so.
template <typename T>
T field(const nlohmann::json& body, const char* key, const char* what) {
  const auto invalid = [&] {
    return Error(ErrorCode::invalid_data, fmt::format("the BSO server's {} has no valid '{}': {}", what, key,
                                                      body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
                                                          .substr(0, 200)));
  };
  try {
    const auto& value = body.at(key);
    if constexpr (std::is_same_v<T, int>) {
      if (!value.is_number_integer()) throw invalid();
      if (value.is_number_unsigned()) {
        if (value.get<std::uint64_t>() > static_cast<std::uint64_t>(std::numeric_limits<int>::max())) throw invalid();
      } else {
        const auto x = value.get<std::int64_t>();
        if (x < std::numeric_limits<int>::min() || x > std::numeric_limits<int>::max()) throw invalid();
      }
    }
    return value.get<T>();
  } catch (const nlohmann::json::exception&) {
    throw invalid();
  }
}

// The board's largest settable power limit: the signal where the device reports it, else the
// control's range (both are NVML's power-management limit constraints on a real GPU).
double max_power_limit_w(device::Device& device) {
  if (device.has_signal(device::Signal::power_limit_max_w)) return device.read(device::Signal::power_limit_max_w);
  return device.range(device::Control::power_limit_w).max;
}

bso::JobSpec with_gpus(bso::JobSpec job, const monitor::Monitor& monitor) {
  const auto gpus = gpu_config_of(monitor.devices());
  job.max_power = gpus.max_power_w;
  job.number_of_gpus = gpus.number_of_gpus;
  job.gpu_model = gpus.gpu_model;
  bso::validate(job);
  return job;
}

}  // namespace

GpuConfig gpu_config_of(const std::vector<device::Device*>& devices) {
  if (devices.empty()) throw usage_error("the batch-size optimizer needs at least one GPU to measure");
  GpuConfig config;
  config.gpu_model = devices.front()->name();
  for (auto* device : devices) {
    if (device->name() != config.gpu_model) {
      throw usage_error(fmt::format("the GPUs must all be of one model ('{}' and '{}'): the optimizer prices "
                                    "time at one GPU's largest power limit",
                                    config.gpu_model, device->name()));
    }
  }
  config.number_of_gpus = static_cast<int>(devices.size());
  config.max_power_w = std::floor(max_power_limit_w(*devices.front())) * config.number_of_gpus;
  return config;
}

nlohmann::json job_request_json(const bso::JobSpec& job) {
  auto body = bso::to_json(job);
  if (job.job_id.empty()) body["job_id"] = nullptr;  // the server names it "<prefix>-<8 hex>"
  return body;
}

nlohmann::json to_json(const bso::TrialId& trial) {
  return {{"job_id", trial.job_id}, {"batch_size", trial.batch_size}, {"trial_number", trial.trial_number}};
}

nlohmann::json to_json(const bso::TrainingResult& result) {
  auto body = to_json(result.trial);
  body["time"] = result.time_s;
  body["energy"] = result.energy_j;
  body["metric"] = result.metric;
  body["current_epoch"] = result.current_epoch;
  return body;
}

bso::TrialId trial_id_from_json(const nlohmann::json& body) {
  bso::TrialId trial;
  trial.job_id = field<std::string>(body, "job_id", "trial");
  trial.batch_size = field<int>(body, "batch_size", "trial");
  trial.trial_number = field<int>(body, "trial_number", "trial");
  return trial;
}

bso::ReportResponse report_response_from_json(const nlohmann::json& body) {
  bso::ReportResponse response;
  response.stop_train = field<bool>(body, "stop_train", "report answer");
  response.converged = field<bool>(body, "converged", "report answer");
  if (body.contains("message") && body.at("message").is_string()) response.message = body.at("message").get<std::string>();
  return response;
}

BsoClient::BsoClient(ClientOptions options, bso::JobSpec job, monitor::Monitor& monitor)
    : options_(std::move(options)), http_(options_.http), monitor_(monitor), job_(with_gpus(std::move(job), monitor)) {
  const auto answer = http_.post("/jobs", job_request_json(job_));
  register_status_ = answer.status;
  try {
    job_ = bso::job_spec_from_json(answer.body);
  } catch (const Error& e) {
    throw Error(ErrorCode::invalid_data, fmt::format("the BSO server's registered job is not valid: {}", e.what()));
  }
  spdlog::info("bso client: job {} registered on {} ({})", job_.job_id, options_.http.server_url,
               register_status_ == 201 ? "new" : "existing");
}

BsoClient::~BsoClient() { end_trial(); }

int BsoClient::get_batch_size() {
  if (options_.rank != 0) throw usage_error("only rank 0 can ask the BSO server for a batch size");
  if (trial_) return trial_->batch_size;
  const auto answer = http_.get("/jobs/batch_size", {{"job_id", job_.job_id}});
  auto trial = trial_id_from_json(answer.body);
  // Hold it at once: whatever goes wrong from here on, the server must learn the trial ended.
  hook_ticket_ = hold_open_trial(options_.http, trial, options_.end_trial_on_signal);
  trial_ = trial;
  epoch_ = 0;
  time_s_ = 0.0;
  energy_j_ = 0.0;
  if (trial.job_id != job_.job_id ||
      !std::binary_search(job_.batch_sizes.begin(), job_.batch_sizes.end(), trial.batch_size)) {
    throw BsoServerError(answer.status, answer.body.dump(),
                         fmt::format("the BSO server handed out batch size {} of job '{}', which job '{}' does not have",
                                     trial.batch_size, trial.job_id, job_.job_id));
  }
  spdlog::info("bso client: trial {} of job {}: batch size {}", trial.trial_number, job_.job_id, trial.batch_size);
  return trial.batch_size;
}

void BsoClient::on_train_begin() {
  training_finished_ = false;
  // Called again without an on_evaluate: the window starts over.
  if (monitor_.window_open(kTrialWindow)) (void)monitor_.end_window(kTrialWindow);
  monitor_.begin_window(kTrialWindow);
}

bool BsoClient::on_evaluate(double metric) {
  if (!trial_) throw usage_error("call get_batch_size before on_evaluate");
  if (training_finished_) return true;
  if (!monitor_.window_open(kTrialWindow)) throw usage_error("call on_train_begin before on_evaluate");
  const auto window = monitor_.end_window(kTrialWindow);
  ++epoch_;
  time_s_ += window.time_s;
  energy_j_ += window.total_energy_j;
  const bso::TrainingResult result{*trial_, time_s_, energy_j_, metric, epoch_};
  last_response_ = report_response_from_json(http_.post("/report", to_json(result)).body);
  if (!last_response_.stop_train) {
    monitor_.begin_window(kTrialWindow);
    return false;
  }
  training_finished_ = true;
  if (!last_response_.converged) {
    throw BsoTrainFailedError(fmt::format("training with batch size {} failed: {} This batch size will not be "
                                          "chosen again; run the training again for another one.",
                                          trial_->batch_size, last_response_.message));
  }
  return true;
}

void BsoClient::end_trial() noexcept {
  if (!trial_ || !hook_ticket_) return;
  const auto ticket = *hook_ticket_;
  hook_ticket_.reset();
  // A hook that ended it already (a signal) leaves nothing to do.
  if (release_open_trial(ticket)) (void)end_trial_quietly(options_.http, *trial_);
}

}  // namespace gpucap::bsoclient
