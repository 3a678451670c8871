#include "gpucap/service/bso_metrics.hpp"

namespace gpucap::service {
namespace {

constexpr int kOk = 200;
constexpr int kCreated = 201;

// The request's batch_size; 0 when the body has none (the API already answered it).
int batch_size_of(std::string_view body) {
  const auto json = nlohmann::json::parse(body, nullptr, false);
  if (!json.is_object() || !json.contains("batch_size") || !json["batch_size"].is_number_integer()) return 0;
  return json["batch_size"].get<int>();
}

}  // namespace

std::optional<std::pair<monitor::TrialEvent, int>> bso_event(std::string_view route, std::string_view request_body,
                                                             const ApiResponse& answer) {
  using monitor::TrialEvent;
  if (route == "POST /jobs" && (answer.status == kCreated || answer.status == kOk)) {
    return std::pair{TrialEvent::job_registered, 0};
  }
  if (answer.status != kOk) return std::nullopt;
  if (route == "GET /jobs/batch_size") {
    const auto& body = answer.body;
    return std::pair{TrialEvent::dispatched, body.contains("batch_size") ? body["batch_size"].get<int>() : 0};
  }
  if (route == "POST /report") {
    const bool stop = answer.body.value("stop_train", false);
    const bool converged = answer.body.value("converged", false);
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
