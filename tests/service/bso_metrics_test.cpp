// What the BSO server's answers count as in `bso serve --metrics`.

#include "gpucap/service/bso_metrics.hpp"

#include <gtest/gtest.h>

namespace gpucap::service {
namespace {

using monitor::TrialEvent;

TEST(BsoMetrics, AnswersBecomeTrialEventsByBatchSize) {
  EXPECT_EQ(bso_event("POST /jobs", "{}", {201, {}}), (std::pair{TrialEvent::job_registered, 0}));
  EXPECT_EQ(bso_event("GET /jobs/batch_size", "", {200, {{"batch_size", 64}}}), (std::pair{TrialEvent::dispatched, 64}));
  const std::string report = R"({"job_id": "j", "batch_size": 32, "trial_number": 1})";
  EXPECT_EQ(bso_event("POST /report", report, {200, {{"stop_train", false}, {"converged", false}}}),
            (std::pair{TrialEvent::reported_continue, 32}));
  EXPECT_EQ(bso_event("POST /report", report, {200, {{"stop_train", true}, {"converged", true}}}),
            (std::pair{TrialEvent::reported_converged, 32}));
  EXPECT_EQ(bso_event("POST /report", report, {200, {{"stop_train", true}, {"converged", false}}}),
            (std::pair{TrialEvent::reported_failed, 32}));
  EXPECT_EQ(bso_event("PATCH /trials", report, {200, nullptr}), (std::pair{TrialEvent::ended, 32}));
}

TEST(BsoMetrics, RefusalsAndOtherRoutesCountNothing) {
  EXPECT_FALSE(bso_event("POST /jobs", "{}", {409, {{"message", "x"}}}).has_value());
  EXPECT_FALSE(bso_event("GET /jobs/batch_size", "", {400, {{"message", "x"}}}).has_value());
  EXPECT_FALSE(bso_event("DELETE /jobs", "", {200, nullptr}).has_value());
  monitor::MetricsRegistry registry;
  monitor::WorkMetrics metrics(registry, {}, false);
  record_bso_answer(metrics, "PATCH /trials", "not json", {200, nullptr});
  EXPECT_DOUBLE_EQ(registry.value("gpucap_bso_events_total", {{"event", "ended"}, {"batch_size", ""}}), 1.0);
}

// Answers or requests of unexpected shapes count as events without a batch size; nothing throws.
TEST(BsoMetrics, BodiesOfUnexpectedTypesCountWithoutThrowing) {
  EXPECT_EQ(bso_event("GET /jobs/batch_size", "", {200, {{"batch_size", "64"}}}), (std::pair{TrialEvent::dispatched, 0}));
  EXPECT_EQ(bso_event("GET /jobs/batch_size", "", {200, nlohmann::json::array({1, 2})}),
            (std::pair{TrialEvent::dispatched, 0}));
  EXPECT_EQ(bso_event("GET /jobs/batch_size", "", {200, "64"}), (std::pair{TrialEvent::dispatched, 0}));
  EXPECT_EQ(bso_event("POST /report", R"({"batch_size": "32"})", {200, {{"stop_train", "yes"}, {"converged", 1}}}),
            (std::pair{TrialEvent::reported_continue, 0}));
  EXPECT_EQ(bso_event("POST /report", "[32]", {200, nlohmann::json::array()}), (std::pair{TrialEvent::reported_continue, 0}));
  EXPECT_EQ(bso_event("POST /report", "{}", {200, {{"stop_train", true}, {"converged", "true"}}}),
            (std::pair{TrialEvent::reported_failed, 0}));
  EXPECT_EQ(bso_event("PATCH /trials", R"({"batch_size": 1e3})", {200, 7}), (std::pair{TrialEvent::ended, 0}));
}

}  // namespace
}  // namespace gpucap::service
