#include "gpucap/service/bso_api.hpp"

#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <random>
#include <stdexcept>

#include "gpucap/bso/optimizer.hpp"
#include "gpucap/core/error.hpp"

namespace gpucap::service {
namespace {

// A body that is not what the route takes: 422, as FastAPI answers a validation error.
struct BadBody : std::runtime_error {
  using std::runtime_error::runtime_error;
};

constexpr int unprocessable = 422;

nlohmann::json parse_object(std::string_view body) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(body);
  } catch (const nlohmann::json::parse_error& e) {
    throw BadBody(malformed_json_message(body, e.what()));
  } catch (const nlohmann::json::out_of_range& e) {
    // A number beyond a double (1e400): the parser's out_of_range 406, not a parse_error.
    throw BadBody(number_overflow_message(e.what()));
  } catch (const nlohmann::json::exception& e) {
    throw BadBody(malformed_json_message(body, e.what()));
  }
  if (!j.is_object()) throw BadBody("the body must be a JSON object");
  return j;
}

const nlohmann::json& required(const nlohmann::json& j, const char* key) {
  if (!j.contains(key) || j.at(key).is_null()) throw BadBody(fmt::format("{}: field required", key));
  return j.at(key);
}

std::string string_field(const nlohmann::json& j, const char* key) {
  const auto& v = required(j, key);
  if (!v.is_string()) throw BadBody(fmt::format("{}: must be a string", key));
  return v.get<std::string>();
}

// pydantic takes 32.0 for an int field; a fraction or a number beyond int is refused (one beyond
// 2^63 too, which get<long long> would wrap to a negative number).
int int_field(const nlohmann::json& j, const char* key) {
  const auto& v = required(j, key);
  if (v.is_number_unsigned()) {
    const auto x = v.get<unsigned long long>();
    if (x <= static_cast<unsigned long long>(std::numeric_limits<int>::max())) return static_cast<int>(x);
  } else if (v.is_number_integer()) {
    const auto x = v.get<long long>();
    if (x >= std::numeric_limits<int>::min() && x <= std::numeric_limits<int>::max()) return static_cast<int>(x);
  } else if (v.is_number_float()) {
    const double x = v.get<double>();
    if (x == std::floor(x) && std::abs(x) <= std::numeric_limits<int>::max()) return static_cast<int>(x);
  }
  throw BadBody(fmt::format("{}: must be a whole number", key));
}

double number_field(const nlohmann::json& j, const char* key) {
  const auto& v = required(j, key);
  if (!v.is_number()) throw BadBody(fmt::format("{}: must be a number", key));
  return v.get<double>();
}

bso::TrialId trial_id_from(const nlohmann::json& j) {
  return {string_field(j, "job_id"), int_field(j, "batch_size"), int_field(j, "trial_number")};
}

bso::TrainingResult training_result_from(const nlohmann::json& j) {
  bso::TrainingResult r;
  r.trial = trial_id_from(j);
  r.time_s = number_field(j, "time");
  r.energy_j = number_field(j, "energy");
  r.metric = number_field(j, "metric");
  r.current_epoch = int_field(j, "current_epoch");
  return r;
}

// The route's answer, with every failure turned into a JSON error: the optimizer's refusals as
// Zeus maps them, a bad body 422, a database that cannot be reached 503, anything else 500.
template <typename Route>
ApiResponse answer(const Route& route) {
  try {
    return route();
  } catch (const bso::Refusal& e) {
    return error_response(bso::http_status(e.kind()), e.what());
  } catch (const BadBody& e) {
    return error_response(unprocessable, e.what());
  } catch (const Error& e) {
    if (e.code() == ErrorCode::usage) return error_response(unprocessable, e.what());  // a bad job spec
    if (e.code() == ErrorCode::io) return error_response(503, fmt::format("database unavailable: {}", e.what()));
    return error_response(500, e.what());
  } catch (const std::exception& e) {
    return error_response(500, fmt::format("internal error: {}", e.what()));
  }
}

std::string unknown_job(const std::string& job_id) { return fmt::format("Unknown job({}). Register the job first.", job_id); }

std::string new_job_id(const std::string& prefix) {
  std::random_device device;
  return fmt::format("{}-{:08x}", prefix, device());
}

std::uint64_t fallback_seed() {
  std::random_device device;
  return (static_cast<std::uint64_t>(device()) << 32U) | device();
}

}  // namespace

ApiResponse error_response(int status, std::string_view message) { return {status, {{"message", message}}}; }

std::string malformed_json_message(std::string_view body, const std::string& parser_message) {
  const bool non_finite = body.find("NaN") != std::string_view::npos || body.find("Infinity") != std::string_view::npos;
  if (non_finite) {
    return fmt::format("the body is not valid JSON: JSON has no NaN or Infinity, and time, energy and metric must be "
                       "finite numbers ({})", parser_message);
  }
  return fmt::format("the body is not valid JSON ({})", parser_message);
}

std::string number_overflow_message(const std::string& parser_message) {
  // nlohmann's message: "[json.exception.out_of_range.406] number overflow parsing '1e400'".
  const auto open = parser_message.find('\'');
  const auto close = parser_message.rfind('\'');
  if (open != std::string::npos && close > open + 1) {
    auto number = parser_message.substr(open + 1, close - open - 1);
    if (number.size() > 40) number = number.substr(0, 40) + "...";
    return fmt::format("{} is too large for a number: every number of the body must fit a double (at most about 1.8e308)",
                       number);
  }
  return fmt::format("a number of the body is too large: every number must fit a double ({})", parser_message);
}

ApiResponse BsoApi::register_job(std::string_view body) {
  return answer([&]() -> ApiResponse {
    auto spec = bso::job_spec_from_json(parse_object(body));
    const bool generated = spec.job_id.empty();
    // A generated id that is taken (a 1 in 4 billion chance per job of the prefix) gets another.
    for (int attempt = 0; attempt < 8; ++attempt) {
      if (generated) spec.job_id = new_job_id(spec.job_id_prefix);
      const auto existing = store_.insert_job(bso::new_job_state(spec, fallback_seed()));
      if (!existing) return {201, bso::to_json(spec)};
      if (generated) continue;
      if (*existing == spec) return {200, bso::to_json(*existing)};
      return error_response(409, fmt::format("Job {} is already registered with a different configuration; "
                                             "register it under another job_id or delete it first", spec.job_id));
    }
    return error_response(500, "could not find a free job id for the prefix");
  });
}

ApiResponse BsoApi::next_batch_size(const std::optional<std::string>& job_id) {
  return answer([&]() -> ApiResponse {
    if (!job_id) throw BadBody("job_id: query parameter required");
    bso::TrialId trial;
    if (!store_.update_job(*job_id, [&](bso::JobState& job) { trial = bso::next_trial(job); })) {
      return error_response(400, unknown_job(*job_id));
    }
    return {200, {{"job_id", trial.job_id}, {"batch_size", trial.batch_size}, {"trial_number", trial.trial_number}}};
  });
}

ApiResponse BsoApi::report(std::string_view body) {
  return answer([&]() -> ApiResponse {
    const auto result = training_result_from(parse_object(body));
    bso::ReportResponse response;
    if (!store_.update_job(result.trial.job_id, [&](bso::JobState& job) { response = bso::report(job, result); })) {
      return error_response(400, unknown_job(result.trial.job_id));
    }
    return {200, {{"stop_train", response.stop_train}, {"converged", response.converged}, {"message", response.message}}};
  });
}

ApiResponse BsoApi::end_trial(std::string_view body) {
  return answer([&]() -> ApiResponse {
    const auto trial = trial_id_from(parse_object(body));
    if (!store_.update_job(trial.job_id, [&](bso::JobState& job) { bso::end_trial(job, trial); })) {
      return error_response(404, unknown_job(trial.job_id));
    }
    return {200, nullptr};
  });
}

ApiResponse BsoApi::delete_job(const std::optional<std::string>& job_id) {
  return answer([&]() -> ApiResponse {
    if (!job_id) throw BadBody("job_id: query parameter required");
    if (!store_.delete_job(*job_id)) return error_response(404, unknown_job(*job_id));
    return {200, nullptr};
  });
}

}  // namespace gpucap::service
