#include "gpucap/service/bso_metrics.hpp"

namespace gpucap::service {
namespace {

constexpr int kOk = 200;
constexpr int kCreated = 201;

// Bodies are read leniently: a field missing or of another type reads as 0 or false, so that
// counting never throws (nor changes what the API answered).
int integer_field(const nlohmann::json& body, const char* key) {
  if (!body.is_object()) return 0;
  const auto it = body.find(key);
  return it != body.end() && it->is_number_integer() ? it->get<int>() : 0;
}

bool flag_field(const nlohmann::json& body, const char* key) {
  if (!body.is_object()) return false;
  const auto it = body.find(key);
  return it != body.end() && it->is_boolean() && it->get<bool>();
}

// The request's batch_size; 0 when the body has none (the API already answered it).
int batch_size_of(std::string_view body) { return integer_field(nlohmann::json::parse(body, nullptr, false), "batch_size"); }

}  // namespace

std::optional<std::pair<monitor::TrialEvent, int>> bso_event(std::string_view route, std::string_view request_body,
                                                             const ApiResponse& answer) {
  using monitor::TrialEvent;
  if (route == "POST /jobs" && (answer.status == kCreated || answer.status == kOk)) {
    return std::pair{TrialEvent::job_registered, 0};
  }
  if (answer.status != kOk) return std::nullopt;
  if (route == "GET /jobs/batch_size") {
    return std::pair{TrialEvent::dispatched, integer_field(answer.body, "batch_size")};
  }
  if (route == "POST /report") {
    const bool stop = flag_field(answer.body, "stop_train");
    const bool converged = flag_field(answer.body, "converged");
    const auto event =
        !stop ? TrialEvent::reported_continue : (converged ? TrialEvent::reported_converged : TrialEvent::reported_failed);
    return std::pair{event, batch_size_of(request_body)};
  }
  if (route == "PATCH /trials") return std::pair{TrialEvent::ended, batch_size_of(request_body)};
  return std::nullopt;
}

void record_bso_answer(monitor::WorkMetrics& metrics, std::string_view route, std::string_view request_body,
                       const ApiResponse& answer) {
  if (const auto event = bso_event(route, request_body, answer)) metrics.trial(event->first, event->second);
}

}  // namespace gpucap::service
