#include "service/harness.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <cmath>
#include <map>

namespace gpucap::test {
namespace {

bool is_whole(const nlohmann::json& v) { return v.is_number_integer(); }

// Sends the reports from the next epoch on until stop_train (or `limit` reports in all).
void continue_recurrence(httplib::Client& client, const std::string& job_id, int recurrence, Recurrence& run,
                         std::optional<int> limit) {
  const int b = run.batch_size;
  const auto stopped = [&] { return !run.reports.empty() && run.reports.back().at("stop_train").get<bool>(); };
  for (int epoch = static_cast<int>(run.reports.size()) + 1; epoch <= 40 && !stopped(); ++epoch) {
    if (limit && static_cast<int>(run.reports.size()) >= *limit) return;
    const auto res = client.Post("/report", zeus_report_json(job_id, b, run.trial_number, epoch, recurrence), "");
    if (!res || res->status < 200 || res->status >= 300) {
      ADD_FAILURE() << "POST /report: " << (res ? std::to_string(res->status) + " " + res->body : "no answer");
      return;
    }
    const auto answer = nlohmann::json::parse(res->body);
    // ReportResponse: stop_train: bool, converged: bool, message: str.
    EXPECT_TRUE(answer.at("stop_train").is_boolean()) << res->body;
    EXPECT_TRUE(answer.at("converged").is_boolean()) << res->body;
    EXPECT_TRUE(answer.at("message").is_string()) << res->body;
    run.reports.push_back(answer);
  }
  if (run.ended) return;
  // atexit: PATCH /trials with the TrialId.
  const auto res = client.Patch("/trials", zeus_trial_json(job_id, b, run.trial_number), "");
  run.ended = res && res->status >= 200 && res->status < 300;
  EXPECT_TRUE(run.ended) << "PATCH /trials: " << (res ? std::to_string(res->status) + " " + res->body : "no answer");
}

}  // namespace

InProcessServer::InProcessServer(service::Store& store, service::ServerOptions options)
    : server_(store, [&] {
        options.host = "127.0.0.1";
        options.port = 0;
        return options;
      }()) {
  port_ = server_.bind();
  thread_ = std::thread([this] { server_.serve(); });
}

InProcessServer::~InProcessServer() {
  server_.stop();
  thread_.join();
}

ServeProcess::ServeProcess(const std::string& db, const std::vector<std::string>& extra) {
  std::vector<std::string> argv = {GPUCAP_CLI_PATH, "bso", "serve", "--db", db, "--listen", "127.0.0.1:0"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  child_ = std::make_unique<ChildProcess>(argv);
  const auto line = child_->read_line(30.0);
  if (!line) throw std::runtime_error("gpucap bso serve printed no listening line");
  const auto at = line->find("http://127.0.0.1:");
  if (at == std::string::npos) throw std::runtime_error("unexpected first line: " + *line);
  port_ = std::stoi(line->substr(at + 17));
  listening_line_ = *line;
}

void ServeProcess::kill_now() {
  child_->signal(SIGKILL);
  (void)child_->wait(10.0);
}

std::unique_ptr<httplib::Client> client_for(int port) {
  auto client = std::make_unique<httplib::Client>("127.0.0.1", port);
  client->set_keep_alive(true);
  // A body written apart from its headers would otherwise wait for the server's delayed ACK.
  client->set_tcp_nodelay(true);
  client->set_connection_timeout(5);
  client->set_read_timeout(30);
  return client;
}

const std::vector<int>& SyntheticTraining::batch_sizes() {
  static const std::vector<int> sizes = {8, 16, 32, 64, 128, 256};
  return sizes;
}

int SyntheticTraining::epochs_to_target(int batch_size) {
  static const std::map<int, int> epochs = {{8, 14}, {16, 7}, {32, 5}, {64, 4}, {128, 6}, {256, 0}};
  return epochs.at(batch_size);
}

double SyntheticTraining::epoch_time_s(int batch_size, int recurrence) {
  return 600.0 / std::sqrt(static_cast<double>(batch_size)) * (1.0 + 0.02 * ((recurrence * 7 + batch_size) % 5));
}

double SyntheticTraining::power_w(int batch_size) { return 150.0 + 0.5 * batch_size; }

double SyntheticTraining::metric_after(int batch_size, int epoch) {
  const int needed = epochs_to_target(batch_size);
  if (needed == 0) return 0.1 + 0.01 * epoch;
  return epoch >= needed ? 0.9 : 0.1 + 0.3 * epoch / needed;
}

std::string python_float(double x) {
  auto text = fmt::format("{}", x);
  if (text.find_first_of(".en") == std::string::npos) text += ".0";  // Python writes 250.0, not 250
  return text;
}

std::string zeus_report_json(const std::string& job_id, int batch_size, int trial_number, int epoch, int recurrence) {
  // As the client does: one measurement window per epoch, added up.
  double time_s = 0.0;
  double energy_j = 0.0;
  for (int e = 1; e <= epoch; ++e) {
    const double epoch_s = SyntheticTraining::epoch_time_s(batch_size, recurrence);
    time_s += epoch_s;
    energy_j += epoch_s * SyntheticTraining::power_w(batch_size);
  }
  return fmt::format(
      R"({{"job_id": {}, "batch_size": {}, "trial_number": {}, "time": {}, "energy": {}, "metric": {}, "current_epoch": {}}})",
      nlohmann::json(job_id).dump(), batch_size, trial_number, python_float(time_s), python_float(energy_j),
      python_float(SyntheticTraining::metric_after(batch_size, epoch)), epoch);
}

std::string zeus_trial_json(const std::string& job_id, int batch_size, int trial_number) {
  return fmt::format(R"({{"job_id": {}, "batch_size": {}, "trial_number": {}}})", nlohmann::json(job_id).dump(), batch_size,
                     trial_number);
}

std::string zeus_job_json(const std::string& prefix, const std::optional<std::string>& job_id,
                          const std::optional<long long>& mab_seed) {
  const auto id = job_id ? nlohmann::json(*job_id).dump() : "null";
  const auto seed = mab_seed ? std::to_string(*mab_seed) : "null";
  return fmt::format(
      R"({{"max_power": 250.0, "number_of_gpus": 1, "gpu_model": "NVIDIA A40", "job_id": {}, "job_id_prefix": {}, )"
      R"("batch_sizes": [8, 16, 32, 64, 128, 256], "default_batch_size": 32, "eta_knob": 0.5, "beta_knob": 2.0, )"
      R"("target_metric": 0.5, "higher_is_better_metric": true, "max_epochs": 12, "num_pruning_rounds": 2, )"
      R"("window_size": 0, "mab_prior_mean": 0.0, "mab_prior_precision": 0.0, "mab_num_explorations": 2, "mab_seed": {}}})",
      id, nlohmann::json(prefix).dump(), seed);
}

std::string register_zeus_job(httplib::Client& client, const std::string& body, int expected_status) {
  const auto res = client.Post("/jobs", body, "");
  if (!res) {
    ADD_FAILURE() << "POST /jobs: no answer";
    return {};
  }
  EXPECT_EQ(res->status, expected_status) << res->body;
  const auto job = nlohmann::json::parse(res->body);
  // CreatedJob (JobParams + GpuConfig), as pydantic v1 parses it.
  EXPECT_TRUE(job.at("job_id").is_string()) << res->body;
  EXPECT_TRUE(job.at("job_id_prefix").is_string());
  EXPECT_TRUE(job.at("batch_sizes").is_array());
  for (const auto& b : job.at("batch_sizes")) EXPECT_TRUE(is_whole(b));
  EXPECT_TRUE(is_whole(job.at("default_batch_size")) && job.at("default_batch_size").get<int>() > 0);
  for (const char* key : {"eta_knob", "target_metric", "mab_prior_mean", "mab_prior_precision", "max_power"}) {
    EXPECT_TRUE(job.at(key).is_number()) << key;
  }
  EXPECT_TRUE(job.at("beta_knob").is_number() || job.at("beta_knob").is_null());
  EXPECT_TRUE(job.at("higher_is_better_metric").is_boolean());
  for (const char* key : {"max_epochs", "num_pruning_rounds", "window_size", "mab_num_explorations", "number_of_gpus"}) {
    EXPECT_TRUE(is_whole(job.at(key))) << key;
  }
  EXPECT_TRUE(job.at("mab_seed").is_null() || is_whole(job.at("mab_seed")));
  EXPECT_TRUE(job.at("gpu_model").is_string());
  const auto id = job.at("job_id").get<std::string>();
  EXPECT_TRUE(id.starts_with(job.at("job_id_prefix").get<std::string>())) << id;
  return id;
}

Recurrence run_zeus_recurrence(httplib::Client& client, const std::string& job_id, int recurrence,
                               std::optional<int> stop_after_reports) {
  Recurrence run;
  const auto res = client.Get("/jobs/batch_size?job_id=" + url_encode(job_id));
  if (!res || res->status < 200 || res->status >= 300) {
    ADD_FAILURE() << "GET /jobs/batch_size: " << (res ? std::to_string(res->status) + " " + res->body : "no answer");
    return run;
  }
  // TrialId: job_id: str, batch_size: int, trial_number: int; the batch size one of the job's.
  const auto trial = nlohmann::json::parse(res->body);
  EXPECT_EQ(trial.at("job_id"), job_id);
  EXPECT_TRUE(is_whole(trial.at("batch_size")) && is_whole(trial.at("trial_number"))) << res->body;
  run.batch_size = trial.at("batch_size").get<int>();
  run.trial_number = trial.at("trial_number").get<int>();
  const auto& sizes = SyntheticTraining::batch_sizes();
  EXPECT_NE(std::find(sizes.begin(), sizes.end(), run.batch_size), sizes.end()) << "strange batch size " << run.batch_size;
  continue_recurrence(client, job_id, recurrence, run, stop_after_reports);
  return run;
}

void finish_zeus_recurrence(httplib::Client& client, const std::string& job_id, int recurrence, Recurrence& run) {
  continue_recurrence(client, job_id, recurrence, run, std::nullopt);
}

void Ledger::trial_given(const std::string& job_id, int trial_number, int batch_size) {
  std::lock_guard lock(mutex_);
  const bool fresh = jobs_[job_id].emplace(trial_number, TrialRecord{batch_size}).second;
  EXPECT_TRUE(fresh) << "trial " << trial_number << " of " << job_id << " was handed out twice";
}

void Ledger::report_answered(const std::string& job_id, int trial_number, int epoch, bool stop_train, bool converged) {
  std::lock_guard lock(mutex_);
  auto& record = jobs_[job_id][trial_number];
  record.epochs = std::max(record.epochs, epoch);
  record.stop_train = record.stop_train || stop_train;
  if (stop_train) record.converged = converged;
}

std::size_t Ledger::trials() const {
  std::lock_guard lock(mutex_);
  std::size_t n = 0;
  for (const auto& [id, trials] : jobs_) n += trials.size();
  return n;
}

void Ledger::check(service::Store& store, bool exact) const {
  std::lock_guard lock(mutex_);
  for (const auto& [job_id, acknowledged] : jobs_) {
    const auto job = store.load_job(job_id);  // the load checks the numbers run 1..N without a gap
    ASSERT_TRUE(job) << job_id;
    if (exact) {
      EXPECT_EQ(job->trials.size(), acknowledged.size()) << job_id;
    }
    for (const auto& [number, told] : acknowledged) {
      const auto* stored = bso::find_trial(*job, number);
      ASSERT_NE(stored, nullptr) << job_id << " lost acknowledged trial " << number;
      EXPECT_EQ(stored->batch_size, told.batch_size) << job_id << " trial " << number;
      if (exact) {
        EXPECT_EQ(stored->epochs, told.epochs) << job_id << " trial " << number;
      } else {
        EXPECT_TRUE(stored->epochs == told.epochs || stored->epochs == told.epochs + 1) << job_id << " trial " << number;
      }
      if (told.stop_train) {
        EXPECT_EQ(stored->status, bso::TrialStatus::succeeded) << job_id << " trial " << number;
        EXPECT_EQ(stored->converged, told.converged) << job_id << " trial " << number;
      }
    }
  }
}

bool drive_recurrences(const std::vector<httplib::Client*>& clients, const std::string& job_id, int first_recurrence,
                       int recurrences, Ledger& ledger) {
  std::size_t turn = 0;
  const auto next = [&]() -> httplib::Client& { return *clients[turn++ % clients.size()]; };
  const auto ok = [](const httplib::Result& res) { return res && res->status >= 200 && res->status < 300; };
  for (int r = first_recurrence; r < first_recurrence + recurrences; ++r) {
    const auto given = next().Get("/jobs/batch_size?job_id=" + url_encode(job_id));
    if (!ok(given)) return false;
    const auto trial = nlohmann::json::parse(given->body);
    const int b = trial.at("batch_size").get<int>();
    const int number = trial.at("trial_number").get<int>();
    ledger.trial_given(job_id, number, b);
    for (int epoch = 1; epoch <= 40; ++epoch) {
      const auto res = next().Post("/report", zeus_report_json(job_id, b, number, epoch, r), "");
      if (!ok(res)) return false;
      const auto answer = nlohmann::json::parse(res->body);
      const bool stop = answer.at("stop_train").get<bool>();
      ledger.report_answered(job_id, number, epoch, stop, answer.at("converged").get<bool>());
      if (stop) break;
    }
    if (!ok(next().Patch("/trials", zeus_trial_json(job_id, b, number), ""))) return false;
  }
  return true;
}

std::string url_encode(const std::string& text) {
  std::string out;
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (std::isalnum(c) != 0 || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += fmt::format("%{:02X}", c);
    }
  }
  return out;
}

}  // namespace gpucap::test
