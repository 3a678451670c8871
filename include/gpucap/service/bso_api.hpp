#pragma once
// Zeus's batch-size optimizer API (zeus/optimizer/batch_size/server/router.py) over a Store:
// what each route answers, with the status codes Zeus's own client expects, apart from HTTP.
// Every answer that changes a job is one store transaction; a refused request changes nothing.

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <string_view>

#include "gpucap/service/store.hpp"

namespace gpucap::service {

// An answer: the status and the JSON body ({"message": ...} for an error).
struct ApiResponse {
  int status = 200;
  nlohmann::json body;
};

[[nodiscard]] ApiResponse error_response(int status, std::string_view message);

class BsoApi {
 public:
  explicit BsoApi(Store& store) : store_(store) {}

  // POST /jobs: 201 and the job (Zeus's CreatedJob) when registered, 200 when a job with this id
  // and the same config exists, 409 when it exists with another config, 422 for a bad spec.
  // A job without job_id gets "<job_id_prefix>-<8 hex digits>".
  ApiResponse register_job(std::string_view body);
  // GET /jobs/batch_size?job_id=ID: the next trial {job_id, batch_size, trial_number}; 400 for
  // an unknown job (Zeus's ZeusBSOValueError).
  ApiResponse next_batch_size(const std::optional<std::string>& job_id);
  // POST /report: {stop_train, converged, message}; 400 for an unknown job or trial.
  ApiResponse report(std::string_view body);
  // PATCH /trials: ends a trial (null); 404 for an unknown job or trial.
  ApiResponse end_trial(std::string_view body);
  // DELETE /jobs?job_id=ID: null; 404 for an unknown job.
  ApiResponse delete_job(const std::optional<std::string>& job_id);

 private:
  Store& store_;
};

// JSON has no NaN or Infinity, but Python's json module writes them: the message for a body that
// does not parse says so when it contains one.
[[nodiscard]] std::string malformed_json_message(std::string_view body, const std::string& parser_message);
// A number beyond a double (1e400, which the parser reports as out of range): names the number,
// cut to 40 characters.
[[nodiscard]] std::string number_overflow_message(const std::string& parser_message);

}  // namespace gpucap::service
