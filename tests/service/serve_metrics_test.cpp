// gpucap serve's request metrics: Triton's counters by outcome, and the two histograms of the
// server's own time (from the first byte, and from the end of the body).

#include "gpucap/service/serve_metrics.hpp"

#include <gtest/gtest.h>

#include "gpucap/monitor/exposition.hpp"

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

}  // namespace
}  // namespace gpucap::service
