// gpucap serve's request metrics: Triton's counters by outcome, and the two histograms of the
// server's own time (from the first byte, and from the end of the body).

#include "gpucap/service/serve_metrics.hpp"

#include <gtest/gtest.h>

#include <httplib.h>

#include "gpucap/monitor/exposition.hpp"
#include "gpucap/service/serve_dashboard.hpp"
#include "gpucap/serve/serving_loop.hpp"

namespace gpucap::service {
namespace {

monitor::Labels with_outcome(const char* outcome) {
  return {{"model", "resnet50"}, {"version", "1"}, {"outcome", outcome}};
}

// The histogram's count of observations at or under `bound_s`.
std::uint64_t at_or_under(const monitor::MetricsRegistry& registry, const char* family, const char* outcome, double bound_s) {
  for (const auto& [le, count] : registry.buckets(family, with_outcome(outcome))) {
    if (le >= bound_s) return count;
  }
  return 0;
}

TEST(ServeMetrics, EveryRequestIsInBothHistogramsByOutcome) {
  monitor::MetricsRegistry registry;
  ServeMetrics metrics(registry, "resnet50", "1", 0.1);
  serve::Answer ok;
  ok.queue_s = 0.002;
  ok.compute_s = 0.003;
  // A binary image whose body took 4 ms to arrive, then 0.8 ms of the server's own work.
  metrics.request(ok, 1, 0.0008, 0.0048);
  serve::Answer shed;
  shed.kind = serve::AnswerKind::shed;
  metrics.request(shed, 0, 0.0, 0.00004);  // shed as its headers came in
  metrics.bad_request(0.002, 0.0001);

  const auto& duration = ServeMetrics::kRequestDuration;
  const auto& processing = ServeMetrics::kRequestProcessing;
  EXPECT_EQ(at_or_under(registry, duration, "success", 0.003), 0U);
  EXPECT_EQ(at_or_under(registry, duration, "success", 0.005), 1U);
  EXPECT_EQ(at_or_under(registry, processing, "success", 0.001), 1U);
  EXPECT_EQ(at_or_under(registry, duration, "shed", 0.00005), 1U);
  EXPECT_EQ(at_or_under(registry, processing, "bad_request", 0.0001), 1U);
  EXPECT_EQ(at_or_under(registry, duration, "bad_request", 0.0015), 0U);
  // Triton's counters beside them: the success's duration from the end of its body, in µs.
  const monitor::Labels labels = {{"model", "resnet50"}, {"version", "1"}};
  EXPECT_DOUBLE_EQ(registry.value("nv_inference_request_duration_us", labels), 800.0);
  EXPECT_DOUBLE_EQ(registry.value("nv_inference_request_success", labels), 1.0);
  EXPECT_DOUBLE_EQ(registry.value("gpucap_serve_requests_shed_total", labels), 1.0);
  EXPECT_DOUBLE_EQ(registry.value("nv_inference_request_failure", {{"model", "resnet50"}, {"version", "1"}, {"reason", "OTHER"}}),
                   1.0);
  const auto text = registry.render();
  EXPECT_NE(text.find("# TYPE gpucap_serve_request_processing_seconds histogram"), std::string::npos);
  EXPECT_NE(text.find(R"(gpucap_serve_request_duration_seconds_bucket{model="resnet50",version="1",outcome="shed",le="5e-05"} 1)"),
            std::string::npos)
      << text;
}

// A window in which nothing was answered has no p99: the gauge is left out (a 0 would read as well
// within the SLO), and comes back with the next answers.
TEST(ServeMetrics, NoAnswersNoP99) {
  monitor::MetricsRegistry registry;
  ServeMetrics metrics(registry, "resnet50", "1", 0.1);
  serve::ServingWindow w;
  w.end_s = 1.0;
  w.slo.ok = 3;
  w.slo.p99_s = 0.05;
  metrics.window(w);
  EXPECT_NE(registry.render().find("gpucap_serve_latency_p99_seconds{"), std::string::npos);
  w.slo.ok = 0;
  w.slo.failed = 5;
  w.slo.p99_s = 0.0;
  metrics.window(w);
  EXPECT_EQ(registry.render().find("gpucap_serve_latency_p99_seconds{"), std::string::npos) << registry.render();
}

// On a paced twin the answers' queue and compute times are the twin's (here a quarter of the wall
// clock's): Triton's duration counters hold wall time, as the request's own duration does. The
// pending count is Triton's (queued only) beside gpucap's count of requests in flight.
TEST(ServeMetrics, TritonsDurationsAreWallTimeAndPendingIsTheQueue) {
  monitor::MetricsRegistry registry;
  ServeMetrics metrics(registry, "resnet50", "1", 0.1, 0.25);
  serve::Answer ok;
  ok.queue_s = 0.001;    // 4 ms of wall time
  ok.compute_s = 0.002;  // 8 ms
  metrics.request(ok, 1, 0.0125, 0.013);
  const monitor::Labels labels = {{"model", "resnet50"}, {"version", "1"}};
  EXPECT_DOUBLE_EQ(registry.value("nv_inference_queue_duration_us", labels), 4000.0);
  EXPECT_DOUBLE_EQ(registry.value("nv_inference_compute_infer_duration_us", labels), 8000.0);
  EXPECT_LE(registry.value("nv_inference_queue_duration_us", labels) +
                registry.value("nv_inference_compute_infer_duration_us", labels),
            registry.value("nv_inference_request_duration_us", labels));
  metrics.pending(2, 7);
  EXPECT_DOUBLE_EQ(registry.value("nv_inference_pending_request_count", labels), 2.0);
  EXPECT_DOUBLE_EQ(registry.value("gpucap_serve_requests_in_flight", labels), 7.0);
}

// Without libjs-chart.js the dashboard's page and data are still served (without charts), and so
// is /metrics: add_dashboard returns the warning to log instead of failing the metrics address.
// The page says its figures are stale after the time it is given (three windows of a paced twin).
TEST(ServeDashboard, WithoutItsChartingLibraryThePageAndTheMetricsAreStillServed) {
  MetricsServer server("127.0.0.1", 0, [] { return std::string("# metrics\n"); });
  SeriesBuffer series(10);
  DashboardInfo info{"resnet50", "A100", "capserve", 100.0, true};
  info.stale_after_s = 30.0;
  const auto warning = add_dashboard(server, series, info, "/nonexistent/chart.min.js");
  ASSERT_TRUE(warning.has_value());
  EXPECT_NE(warning->find("the dashboard's charting library is missing"), std::string::npos) << *warning;
  const int port = server.start();
  httplib::Client client("127.0.0.1", port);
  const auto page = client.Get("/");
  ASSERT_TRUE(page);
  EXPECT_EQ(page->status, 200);
  EXPECT_NE(page->body.find("const STALE_AFTER_MS = 30000;"), std::string::npos);
  const auto data = client.Get("/api/series");
  ASSERT_TRUE(data);
  EXPECT_EQ(data->status, 200);
  const auto metrics = client.Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_EQ(metrics->status, 200);
  const auto script = client.Get("/dashboard/chart.js");
  ASSERT_TRUE(script);
  EXPECT_EQ(script->status, 404);
}

}  // namespace
}  // namespace gpucap::service
