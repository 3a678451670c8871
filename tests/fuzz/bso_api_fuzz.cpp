// `gpucap bso serve`: Zeus's batch-size optimizer routes as the HTTP server calls them
// (service/bso_api, behind src/service/bso_server.cpp's routing), on an in-memory store that
// keeps every job as the SQLite and PostgreSQL stores do (spec and fields as text through
// store.cpp, trials by number, diff_jobs for what changed). No sockets: the bodies and the job_id
// query parameters go straight to BsoApi.
//
// Input: requests, each one byte (the route) and its body or job_id, separated by "\n~\n":
//   route % 6: 0 POST /jobs, 1 GET /jobs/batch_size?job_id=, 2 POST /report, 3 PATCH /trials,
//              4 DELETE /jobs?job_id=, 5 GET /jobs/batch_size without job_id.
// Oracle, beyond crashes: every answer has a status the routes document (200, 201, 400, 404,
// 409, 422: a 500 is a bug of the server, the store here cannot fail), a JSON body the server can
// send (dump() as the server does), an error body with a "message"; the metrics read every answer;
// what the store holds reads back to the same job.

#include <cstdint>
#include <map>
#include <string>

#include "fuzz_support.hpp"
#include "gpucap/core/json_file.hpp"
#include "gpucap/monitor/exposition.hpp"
#include "gpucap/monitor/work_metrics.hpp"
#include "gpucap/service/bso_api.hpp"
#include "gpucap/service/bso_metrics.hpp"
#include "gpucap/service/store.hpp"

using gpucap::fuzz::check;
using gpucap::fuzz::finding;
namespace bso = gpucap::bso;
namespace service = gpucap::service;

namespace {

class MemoryStore final : public service::Store {
 public:
  std::optional<bso::JobSpec> insert_job(const bso::JobState& job) override {
    const auto found = jobs_.find(job.spec.job_id);
    if (found != jobs_.end()) return service::spec_from_text(found->second.spec);
    jobs_[job.spec.job_id] = Row{service::spec_to_text(job.spec), service::fields_to_text(job), job.trials};
    check_reads_back(job.spec.job_id, job);
    return std::nullopt;
  }

  bool update_job(const std::string& job_id, const std::function<void(bso::JobState&)>& operation) override {
    auto before = load_job(job_id);
    if (!before) return false;
    auto after = *before;
    operation(after);  // throws: nothing is written
    const auto changes = service::diff_jobs(*before, after);
    auto& row = jobs_.at(job_id);
    if (changes.fields_changed) row.fields = service::fields_to_text(after);
    for (const auto* trial : changes.inserted) row.trials.push_back(*trial);
    for (const auto* trial : changes.updated) row.trials.at(static_cast<std::size_t>(trial->trial_number - 1)) = *trial;
    check_reads_back(job_id, after);
    return true;
  }

  bool delete_job(const std::string& job_id) override { return jobs_.erase(job_id) > 0; }

  std::optional<bso::JobState> load_job(const std::string& job_id) override {
    const auto found = jobs_.find(job_id);
    if (found == jobs_.end()) return std::nullopt;
    auto job = service::job_from_text(found->second.spec, found->second.fields);
    for (const auto& trial : found->second.trials) service::append_stored_trial(job, trial);
    return job;
  }

  std::vector<std::string> job_ids() override {
    std::vector<std::string> ids;
    for (const auto& [id, row] : jobs_) ids.push_back(id);
    return ids;
  }
  int schema_version() override { return service::current_schema_version; }
  std::string describe() const override { return "memory"; }

 private:
  struct Row {
    std::string spec;
    std::string fields;
    std::vector<bso::Trial> trials;
  };

  // What was written reads back as the job the operation left (exactly: a restarted server must
  // decide as the old one would have).
  void check_reads_back(const std::string& job_id, const bso::JobState& expected) {
    const auto stored = load_job(job_id);
    check(stored.has_value() && *stored == expected, "a job does not read back from the store as it was written: " + job_id);
  }

  std::map<std::string, Row> jobs_;
};

void check_answer(const char* route, std::string_view body, const service::ApiResponse& answer) {
  const int s = answer.status;
  if (s != 200 && s != 201 && s != 400 && s != 404 && s != 409 && s != 422) {
    finding(std::string(route) + " answered " + std::to_string(s) + ": " + answer.body.dump(-1, ' ', false,
                                                                                              nlohmann::json::error_handler_t::replace));
  }
  // What the server sends (bso_server.cpp: send). An error message may quote request bytes that
  // are not UTF-8 (a fuzz finding: dump() threw on them and the 422 became a 500); the text must
  // still be JSON that parses back (regressions/bso_api/non-utf8-in-422-message).
  std::string sent;
  try {
    sent = gpucap::to_json_text(answer.body);
  } catch (const std::exception& e) {
    finding(std::string(route) + ": the answer cannot be sent as JSON: " + e.what());
  }
  check(nlohmann::json::accept(sent), std::string(route) + ": the answer sent is not JSON");
  if (s >= 400) check(answer.body.is_object() && answer.body.contains("message"), "an error answer without a message");
  gpucap::monitor::MetricsRegistry registry;
  gpucap::monitor::WorkMetrics metrics(registry, {{"job", "bso"}}, /*windows=*/false);
  try {
    service::record_bso_answer(metrics, route, body, answer);
  } catch (const std::exception& e) {
    finding(std::string("the metrics throw on a ") + route + " answer: " + e.what());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  gpucap::fuzz::Input input(data, size);
  MemoryStore store;
  service::BsoApi api(store);
  for (int request = 0; request < 64 && !input.empty(); ++request) {
    const unsigned route = input.choice(6);
    const auto text = input.until("\n~\n");
    const std::string owned(text);
    switch (route) {
      case 0: check_answer("POST /jobs", text, api.register_job(text)); break;
      case 1: check_answer("GET /jobs/batch_size", "", api.next_batch_size(owned)); break;
      case 2: check_answer("POST /report", text, api.report(text)); break;
      case 3: check_answer("PATCH /trials", text, api.end_trial(text)); break;
      case 4: check_answer("DELETE /jobs", "", api.delete_job(owned)); break;
      default: check_answer("GET /jobs/batch_size", "", api.next_batch_size(std::nullopt)); break;
    }
  }
  return 0;
}
