#pragma once
// `gpucap bso serve --metrics`: what the batch-size optimizer server's answers mean as events
// (a job registered, a trial dispatched, a report that continues, converges or fails, a trial
// ended), counted by batch size in monitor::WorkMetrics.

#include <optional>
#include <string_view>
#include <utility>

#include "gpucap/monitor/work_metrics.hpp"
#include "gpucap/service/bso_api.hpp"

namespace gpucap::service {

// The event an answer stands for and its batch size (0: none); nullopt for refusals and routes that
// are not trial events (DELETE /jobs).
[[nodiscard]] std::optional<std::pair<monitor::TrialEvent, int>> bso_event(std::string_view route,
                                                                           std::string_view request_body,
                                                                           const ApiResponse& answer);

// Counts the answer's event, if it has one.
void record_bso_answer(monitor::WorkMetrics& metrics, std::string_view route, std::string_view request_body,
                       const ApiResponse& answer);

}  // namespace gpucap::service
