#include "gpucap/service/serve_metrics.hpp"

#include <array>
#include <cmath>
#include <vector>

namespace gpucap::service {
namespace {

using monitor::MetricType;

constexpr double kMicrosecondsPerSecond = 1e6;

struct Family {
  const char* name;
  MetricType type;
  const char* help;
};

// Triton's names and types (docs/user_guide/metrics.md); the help texts are gpucap's words.
constexpr std::array<Family, 8> kTritonFamilies = {{
    {"nv_inference_request_success", MetricType::counter, "Inference requests answered successfully."},
    {"nv_inference_request_failure", MetricType::counter,
     "Inference requests that failed, by reason: REJECTED (shed under the cap, queue full, queue timeout), BACKEND "
     "(the engine failed), OTHER (a bad request)."},
    {"nv_inference_count", MetricType::counter, "Inferences performed: items of the successful requests."},
    {"nv_inference_exec_count", MetricType::counter, "Batches executed (count / exec_count is the mean batch size)."},
    {"nv_inference_pending_request_count", MetricType::gauge,
     "Requests admitted and waiting in the queue (counted out when their batch starts)."},
    {"nv_inference_request_duration_us", MetricType::counter,
     "Cumulative time of the successful requests, from arrival to answer, in microseconds."},
    {"nv_inference_queue_duration_us", MetricType::counter,
     "Cumulative time the successful requests waited in the queue, in microseconds (wall time)."},
    {"nv_inference_compute_infer_duration_us", MetricType::counter,
     "Cumulative compute time of the successful requests' batches, in microseconds (wall time)."},
}};

constexpr std::array<Family, 13> kServeFamilies = {{
    {"gpucap_serve_slo_seconds", MetricType::gauge, "The p99 latency SLO."},
    {"gpucap_serve_latency_p99_seconds", MetricType::gauge,
     "p99 latency of the answers of the last 10 s, in the serving runtime's seconds (a paced twin's virtual ones); "
     "absent when none was answered."},
    {"gpucap_serve_requests_in_flight", MetricType::gauge, "Requests admitted and not yet answered: queued or in a batch."},
    {"gpucap_serve_slo_attainment_ratio", MetricType::gauge,
     "Share of the requests of the last 10 s answered within the SLO (errors count as misses)."},
    {"gpucap_serve_goodput_requests_per_second", MetricType::gauge, "Requests answered within the SLO, last window."},
    {"gpucap_serve_throughput_requests_per_second", MetricType::gauge, "Requests answered, last window."},
    {"gpucap_serve_arrival_rate_requests_per_second", MetricType::gauge, "Requests offered, last window."},
    {"gpucap_serve_requests_shed_total", MetricType::counter,
     "Requests shed at admission with 429: demand above what the GPU serves within the SLO under the cap."},
    {"gpucap_serve_batch_cap", MetricType::gauge, "The batcher's batch cap the controller set (items)."},
    {"gpucap_serve_queue_delay_seconds", MetricType::gauge, "The batcher's queue delay the controller set."},
    {"gpucap_serve_admit_rate_requests_per_second", MetricType::gauge,
     "Requests per second admitted when the controller sheds load (absent: everything is admitted)."},
    {"gpucap_power_cap_source", MetricType::gauge,
     "Where the cap in force comes from (flag, schedule, admin, file, cluster): 1 for the current one."},
    {"gpucap_cap_file_valid", MetricType::gauge,
     "1 when the last read of --cap-file gave a cap, 0 when it was malformed or unreadable (the last good cap holds)."},
}};

// The server's own time per request: 50 us to 60 s (beyond the queue timeout's 30-s default),
// finer from 0.2 to 2 ms (a request's own work) and below 10 ms, so that "a 429 within 5 ms" and
// "under 1 ms" are read off a bound, and a p99 between 0.2 and 2 ms to within 0.1-0.25 ms.
constexpr std::array<double, 30> kDurationBoundsS = {
    50e-6,  100e-6, 200e-6, 300e-6, 400e-6, 500e-6, 600e-6, 700e-6, 800e-6, 900e-6,
    1e-3,   1.25e-3, 1.5e-3, 1.75e-3, 2e-3,  3e-3,   5e-3,   7.5e-3, 10e-3,  25e-3,
    50e-3,  100e-3, 250e-3, 500e-3, 1.0,    2.5,    5.0,    10.0,   30.0,   60.0};

const char* outcome_of(serve::AnswerKind kind) {
  switch (kind) {
    case serve::AnswerKind::ok: return "success";
    case serve::AnswerKind::shed: return "shed";
    case serve::AnswerKind::refused: return "refused";
    case serve::AnswerKind::timed_out: return "timed_out";
    case serve::AnswerKind::failed: return "failed";
    case serve::AnswerKind::stopping: return "stopping";
    case serve::AnswerKind::stalled: return "stalled";
  }
  return "failed";
}

}  // namespace

ServeMetrics::ServeMetrics(monitor::MetricsRegistry& registry, std::string model, std::string version, double slo_s,
                           double pace)
    : registry_(registry), labels_{{"model", std::move(model)}, {"version", std::move(version)}}, pace_(pace) {
  for (const auto& f : kTritonFamilies) registry_.declare(f.name, f.type, f.help);
  for (const auto& f : kServeFamilies) registry_.declare(f.name, f.type, f.help);
  registry_.declare("gpucap_cap_file_errors_total", MetricType::counter,
                    "Reads of --cap-file that gave no cap (malformed or unreadable).");
  registry_.declare_histogram(
      kRequestDuration,
      "The server's time per inference request, from its first byte to its answer, by outcome (success, shed: 429 "
      "at admission, refused, timed_out, failed, stopping, stalled: the GPU past its batch timeout, bad_request).",
      std::vector<double>(kDurationBoundsS.begin(), kDurationBoundsS.end()));
  registry_.declare_histogram(
      kRequestProcessing,
      "The server's own work per inference request, from the end of its body (its headers, for a 429 sent before the "
      "body) to its answer: parse, queue, batch, answer, by outcome; the time the body takes to arrive is left out.",
      std::vector<double>(kDurationBoundsS.begin(), kDurationBoundsS.end()));
  // Counters start at 0, so a rate over the first scrapes has its origin.
  for (const char* counter : {"nv_inference_request_success", "nv_inference_count", "nv_inference_exec_count",
                              "nv_inference_request_duration_us", "nv_inference_queue_duration_us",
                              "nv_inference_compute_infer_duration_us", "gpucap_serve_requests_shed_total"}) {
    registry_.add(counter, labels_, 0.0);
  }
  for (const char* reason : {"REJECTED", "BACKEND", "OTHER"}) registry_.add("nv_inference_request_failure", with("reason", reason), 0.0);
  registry_.set("nv_inference_pending_request_count", labels_, 0.0);
  registry_.set("gpucap_serve_requests_in_flight", labels_, 0.0);
  registry_.set("gpucap_serve_slo_seconds", labels_, slo_s);
}

monitor::Labels ServeMetrics::with(const char* name, const std::string& value) const {
  auto labels = labels_;
  labels.emplace_back(name, value);
  return labels;
}

void ServeMetrics::request(const serve::Answer& answer, std::int64_t items, double total_s, double since_arrival_s) {
  const auto outcome = with("outcome", outcome_of(answer.kind));
  registry_.observe(kRequestDuration, outcome, since_arrival_s);
  registry_.observe(kRequestProcessing, outcome, total_s);
  switch (answer.kind) {
    case serve::AnswerKind::ok:
      registry_.add("nv_inference_request_success", labels_, 1.0);
      registry_.add("nv_inference_count", labels_, static_cast<double>(items));
      registry_.add("nv_inference_request_duration_us", labels_, total_s * kMicrosecondsPerSecond);
      registry_.add("nv_inference_queue_duration_us", labels_, answer.queue_s / pace_ * kMicrosecondsPerSecond);
      registry_.add("nv_inference_compute_infer_duration_us", labels_, answer.compute_s / pace_ * kMicrosecondsPerSecond);
      return;
    case serve::AnswerKind::shed:
      registry_.add("gpucap_serve_requests_shed_total", labels_, 1.0);
      registry_.add("nv_inference_request_failure", with("reason", "REJECTED"), 1.0);
      return;
    case serve::AnswerKind::refused:
    case serve::AnswerKind::timed_out:
    case serve::AnswerKind::stopping:
      registry_.add("nv_inference_request_failure", with("reason", "REJECTED"), 1.0);
      return;
    case serve::AnswerKind::failed:
    case serve::AnswerKind::stalled:
      registry_.add("nv_inference_request_failure", with("reason", "BACKEND"), 1.0);
      return;
  }
}

void ServeMetrics::bad_request(double since_arrival_s, double processing_s) {
  const auto outcome = with("outcome", "bad_request");
  registry_.observe(kRequestDuration, outcome, since_arrival_s);
  registry_.observe(kRequestProcessing, outcome, processing_s);
  registry_.add("nv_inference_request_failure", with("reason", "OTHER"), 1.0);
}

void ServeMetrics::batch(int /*items*/) { registry_.add("nv_inference_exec_count", labels_, 1.0); }

void ServeMetrics::pending(std::size_t queued, std::size_t in_flight) {
  registry_.set("nv_inference_pending_request_count", labels_, static_cast<double>(queued));
  registry_.set("gpucap_serve_requests_in_flight", labels_, static_cast<double>(in_flight));
}

void ServeMetrics::window(const serve::ServingWindow& w) {
  const double length_s = std::max(w.end_s - w.start_s, 1e-9);
  auto& r = registry_;
  // No request answered over the span: no p99 (0 would read as well within the SLO).
  r.set_if_known("gpucap_serve_latency_p99_seconds", labels_, w.slo.ok == 0 ? std::nan("") : w.slo.p99_s);
  r.set("gpucap_serve_slo_attainment_ratio", labels_, w.slo.slo_attainment);
  r.set("gpucap_serve_goodput_requests_per_second", labels_, static_cast<double>(w.counts.good) / length_s);
  r.set("gpucap_serve_throughput_requests_per_second", labels_, static_cast<double>(w.counts.answered) / length_s);
  r.set("gpucap_serve_arrival_rate_requests_per_second", labels_, static_cast<double>(w.counts.arrivals) / length_s);
  r.set("gpucap_serve_batch_cap", labels_, w.knobs.max_batch_size);
  r.set("gpucap_serve_queue_delay_seconds", labels_, w.knobs.max_queue_delay_s);
  r.set_if_known("gpucap_serve_admit_rate_requests_per_second", labels_,
                 std::isinf(w.knobs.admit_rate_rps) ? std::nan("") : w.knobs.admit_rate_rps);
  if (w.cap_source != cap_source_) {
    if (!cap_source_.empty()) r.set_if_known("gpucap_power_cap_source", {{"source", cap_source_}}, std::nan(""));
    cap_source_ = w.cap_source;
    r.set("gpucap_power_cap_source", {{"source", cap_source_}}, 1.0);
  }
}

void ServeMetrics::cap_file(bool valid) {
  registry_.set("gpucap_cap_file_valid", {}, valid ? 1.0 : 0.0);
  if (!valid) registry_.add("gpucap_cap_file_errors_total", {}, 1.0);
}

}  // namespace gpucap::service
