#pragma once
// `gpucap serve`'s metrics, on --metrics beside the GPU's DCGM series and gpucap's window series
// (monitor/work_metrics.hpp):
//   - Triton's request families, named and labelled as Triton's server exports them (model,
//     version), so its Grafana dashboards work: nv_inference_request_success,
//     nv_inference_request_failure{reason} (REJECTED: shed, refused or timed out in the queue;
//     BACKEND: the engine failed; OTHER: a bad request), nv_inference_count (items),
//     nv_inference_exec_count (batches), nv_inference_pending_request_count,
//     nv_inference_request_duration_us, nv_inference_queue_duration_us and
//     nv_inference_compute_infer_duration_us (cumulative microseconds, as Triton's counters);
//   - what only gpucap knows: SLO attainment and p99 over the SLO window against the SLO, goodput,
//     the arrival rate, requests shed, the batcher's knobs and the admit rate, where the cap comes
//     from (gpucap_power_cap_source{source} = 1), and the cap file's health;
//   - gpucap_serve_request_duration_seconds, a histogram of the server's own time per request
//     from its first byte to its answer, by outcome (Triton's counters hold sums only, so no
//     percentile of them can be read; this one gives the p99 of a 429 or of a binary request),
//     and gpucap_serve_request_processing_seconds, from the end of its body: the server's own
//     work without the time the body takes to arrive.
// Counters are set from the request threads; the window's gauges from the GPU thread; the pending
// gauge at each scrape (gpucap serve reads its runtime then).

#include <cstdint>
#include <string>

#include "gpucap/monitor/exposition.hpp"
#include "gpucap/serve/serving_loop.hpp"
#include "gpucap/serve/serving_runtime.hpp"

namespace gpucap::service {

class ServeMetrics {
 public:
  // pace: the serving runtime's seconds per wall second (a paced twin's factor; 1 on a real GPU).
  // The answers' queue and compute times are in the runtime's seconds; Triton's duration counters
  // are kept in wall time, as the request's own duration is.
  ServeMetrics(monitor::MetricsRegistry& registry, std::string model, std::string version, double slo_s,
               double pace = 1.0);

  static constexpr const char* kRequestDuration = "gpucap_serve_request_duration_seconds";
  static constexpr const char* kRequestProcessing = "gpucap_serve_request_processing_seconds";

  // One request answered (or refused): its Triton outcome and its times (total_s: from the end of
  // its body, as Triton's duration counter, and the processing histogram; since_arrival_s: from
  // its first byte at the server, for the duration histogram).
  void request(const serve::Answer& answer, std::int64_t items, double total_s, double since_arrival_s);
  // A request the server refused before it reached the queue (a bad body, an unknown input).
  void bad_request(double since_arrival_s, double processing_s);
  void batch(int items);
  // At a scrape: requests admitted and still queued (Triton's pending count: counted out when its
  // batch starts), and those admitted and not yet answered (queued or in a batch).
  void pending(std::size_t queued, std::size_t in_flight);
  // The window's figures (on the GPU thread).
  void window(const serve::ServingWindow& window);
  // The cap file: its last read was good (valid) or not; errors are counted.
  void cap_file(bool valid);

  [[nodiscard]] const monitor::Labels& labels() const { return labels_; }

 private:
  [[nodiscard]] monitor::Labels with(const char* name, const std::string& value) const;

  monitor::MetricsRegistry& registry_;
  monitor::Labels labels_;  // model, version
  double pace_;
  std::string cap_source_;
};

}  // namespace gpucap::service
