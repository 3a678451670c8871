#include "gpucap/service/load_generator.hpp"

// The report of `gpucap load`: counts, rates and exact percentiles from the outcomes, as JSON and
// as text. Pure; the HTTP side is load_generator.cpp.

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace gpucap::service {
namespace {

using nlohmann::json;

// Nearest rank: the ceil(q * n)-th smallest of sorted values.
double rank(const std::vector<double>& sorted, double quantile) {
  const auto n = sorted.size();
  const auto position = static_cast<std::size_t>(std::ceil(quantile * static_cast<double>(n)));
  return sorted[std::clamp<std::size_t>(position, 1, n) - 1];
}

json ms_json(const Percentiles& p) {
  return {{"count", p.count},       {"p50", p.p50_s * 1e3}, {"p90", p.p90_s * 1e3}, {"p95", p.p95_s * 1e3},
          {"p99", p.p99_s * 1e3},   {"max", p.max_s * 1e3}, {"mean", p.mean_s * 1e3}};
}

// Error messages come from the server's bodies, cut at 200 bytes: JSON needs them as UTF-8.
std::string utf8(const std::string& text) {
  return json::parse(json(text).dump(-1, ' ', false, json::error_handler_t::replace)).get<std::string>();
}

std::string ms(double seconds) {
  const double milliseconds = seconds * 1e3;
  return milliseconds < 10.0 ? fmt::format("{:.2f} ms", milliseconds) : fmt::format("{:.1f} ms", milliseconds);
}

std::string bytes_text(std::uint64_t bytes) {
  if (bytes < 10'000) return fmt::format("{} B", bytes);
  if (bytes < 10'000'000) return fmt::format("{:.1f} kB", static_cast<double>(bytes) / 1e3);
  return fmt::format("{:.1f} MB", static_cast<double>(bytes) / 1e6);
}

const char* mode_name(LoadMode mode) { return mode == LoadMode::open_loop ? "open_loop" : "closed_loop"; }

}  // namespace

Percentiles percentiles(std::vector<double> values_s) {
  Percentiles p;
  p.count = values_s.size();
  if (values_s.empty()) return p;
  std::sort(values_s.begin(), values_s.end());
  p.p50_s = rank(values_s, 0.50);
  p.p90_s = rank(values_s, 0.90);
  p.p95_s = rank(values_s, 0.95);
  p.p99_s = rank(values_s, 0.99);
  p.max_s = values_s.back();
  double sum = 0.0;
  for (const double v : values_s) sum += v;
  p.mean_s = sum / static_cast<double>(values_s.size());
  return p;
}

void summarize_outcomes(LoadReport& report, const std::vector<RequestOutcome>& outcomes,
                        const serve::RateSchedule* schedule) {
  std::vector<double> latency;
  std::vector<double> service;
  std::vector<double> lag;
  std::vector<double> rejection;
  latency.reserve(outcomes.size());
  service.reserve(outcomes.size());
  lag.reserve(outcomes.size());
  report.scheduled = 0;
  report.warmup_requests = 0;
  for (const auto& outcome : outcomes) {
    if (outcome.scheduled_s < report.warmup_s) {
      ++report.warmup_requests;
      continue;
    }
    ++report.scheduled;
    const auto latency_s = static_cast<double>(outcome.latency_s);
    const auto service_s = static_cast<double>(outcome.service_s);
    if (outcome.kind != OutcomeKind::unsent) {
      ++report.sent;
      lag.push_back(std::max(0.0, latency_s - service_s));
    }
    switch (outcome.kind) {
      case OutcomeKind::ok:
        ++report.answered;
        if (latency_s <= report.slo_s) ++report.within_slo;
        latency.push_back(latency_s);
        service.push_back(service_s);
        break;
      case OutcomeKind::rejected_429:
        ++report.rejected_429;
        rejection.push_back(service_s);
        break;
      case OutcomeKind::rejected_503: ++report.rejected_503; break;
      case OutcomeKind::failed_http: ++report.failed_http; break;
      case OutcomeKind::failed_transport: ++report.failed_transport; break;
      case OutcomeKind::timed_out: ++report.timed_out; break;
      case OutcomeKind::cancelled: ++report.cancelled; break;
      case OutcomeKind::unsent: ++report.unsent; break;
    }
  }
  report.latency = percentiles(std::move(latency));
  report.service = percentiles(std::move(service));
  report.send_lag = percentiles(std::move(lag));
  report.rejection = percentiles(std::move(rejection));

  const auto count = [](std::uint64_t n) { return static_cast<double>(n); };
  const double measured_s = report.elapsed_s - report.warmup_s;
  if (measured_s > 0.0) {
    if (report.mode == LoadMode::open_loop) report.offered_rps = count(report.scheduled) / measured_s;
    report.throughput_rps = count(report.answered) / measured_s;
    report.goodput_rps = count(report.within_slo) / measured_s;
  }
  const auto judged = report.scheduled - report.cancelled;
  report.slo_attainment = judged > 0 ? count(report.within_slo) / count(judged) : 1.0;

  report.segments.clear();
  if (schedule == nullptr || schedule->is_constant()) return;
  const auto& steps = schedule->steps();
  // A run stopped early covers the steps up to its stop.
  const double end_s = report.interrupted ? std::min(report.duration_s, report.elapsed_s) : report.duration_s;
  std::vector<std::vector<double>> segment_latency;
  for (std::size_t i = 0; i < steps.size() && steps[i].time_s < end_s; ++i) {
    SegmentReport segment;
    segment.start_s = std::max(steps[i].time_s, report.warmup_s);
    segment.end_s = i + 1 < steps.size() ? std::min(steps[i + 1].time_s, end_s) : end_s;
    if (segment.start_s >= segment.end_s) continue;  // all in the warm-up
    segment.rate_per_s = steps[i].rate_per_s;
    report.segments.push_back(segment);
    segment_latency.emplace_back();
  }
  for (const auto& outcome : outcomes) {
    if (outcome.scheduled_s < report.warmup_s) continue;
    const auto after = std::upper_bound(report.segments.begin(), report.segments.end(), outcome.scheduled_s,
                                        [](double t, const SegmentReport& s) { return t < s.start_s; });
    if (after == report.segments.begin()) continue;
    const auto index = static_cast<std::size_t>(std::distance(report.segments.begin(), after) - 1);
    auto& segment = report.segments[index];
    ++segment.scheduled;
    if (outcome.kind == OutcomeKind::ok) {
      ++segment.answered;
      if (static_cast<double>(outcome.latency_s) <= report.slo_s) ++segment.within_slo;
      segment_latency[index].push_back(static_cast<double>(outcome.latency_s));
    }
  }
  for (std::size_t i = 0; i < report.segments.size(); ++i) {
    report.segments[i].p99_s = percentiles(std::move(segment_latency[i])).p99_s;
  }
}

json to_json(const LoadReport& report) {
  json errors = json::array();
  for (const auto& e : report.errors) {
    errors.push_back({{"status", e.http_status}, {"message", utf8(e.message)}, {"count", e.count}});
  }
  json segments = json::array();
  for (const auto& s : report.segments) {
    segments.push_back({{"start_s", s.start_s},
                        {"end_s", s.end_s},
                        {"rate_rps", s.rate_per_s},
                        {"scheduled", s.scheduled},
                        {"answered", s.answered},
                        {"within_slo", s.within_slo},
                        {"p99_ms", s.p99_s * 1e3}});
  }
  const bool open = report.mode == LoadMode::open_loop;
  json out = {
      {"measured", true},
      {"source", "http"},
      {"url", report.url},
      {"model", report.model},
      {"model_version", report.model_version.empty() ? json() : json(report.model_version)},
      {"mode", mode_name(report.mode)},
      {"arrivals", report.arrivals},
      {"latency_from", open ? "scheduled" : "sent"},
      {open ? "connections" : "clients", report.connections},
      {"batch", report.batch},
      {"binary", report.binary},
      {"inputs", report.inputs},
      {"request_bytes", report.request_bytes},
      {"slo_ms", report.slo_s * 1e3},
      {"duration_s", report.duration_s},
      {"warmup_s", report.warmup_s},
      {"warmup_requests", report.warmup_requests},
      {"timeout_ms", report.timeout_s * 1e3},
      {"max_requests", report.max_requests},
      {"seed", report.seed},
      {"elapsed_s", report.elapsed_s},
      {"stop_reason", report.stop_reason},
      {"interrupted", report.interrupted},
      {"scheduled", report.scheduled},
      {"sent", report.sent},
      {"unsent", report.unsent},
      {"answered", report.answered},
      {"within_slo", report.within_slo},
      {"rejected", report.rejected()},
      {"rejected_429", report.rejected_429},
      {"rejected_503", report.rejected_503},
      {"failed", report.failed()},
      {"failed_http", report.failed_http},
      {"failed_transport", report.failed_transport},
      {"timed_out", report.timed_out},
      {"cancelled", report.cancelled},
      {"offered_rps", open ? json(report.offered_rps) : json()},
      {"throughput_rps", report.throughput_rps},
      {"goodput_rps", report.goodput_rps},
      {"items_per_s", report.throughput_rps * static_cast<double>(report.batch)},
      {"slo_attainment", report.slo_attainment},
      {"latency_ms", ms_json(report.latency)},
      {"service_latency_ms", ms_json(report.service)},
      {"send_lag_ms", ms_json(report.send_lag)},
      {"rejection_latency_ms", ms_json(report.rejection)},
      {"retry_after", {{"count", report.retry_after_count},
                       {"max_s", report.max_retry_after_s ? json(*report.max_retry_after_s) : json()}}},
      {"max_in_flight", report.max_in_flight},
      {"connections_used", report.connections_used},
      {"errors", errors},
      {"other_errors", report.other_errors},
      {"segments", segments}};
  if (!open) out["think_ms"] = report.think_s * 1e3;
  return out;
}

std::string to_text(const LoadReport& report) {
  const bool open = report.mode == LoadMode::open_loop;
  std::string out = fmt::format("gpucap load: model '{}'{} at {} (MEASURED over HTTP)\n", report.model,
                                report.model_version.empty() ? "" : fmt::format(" version {}", report.model_version),
                                report.url);
  out += fmt::format("  {} for {:g} s, {}; batch {}, {} input {} ({} per request)\n", report.arrivals,
                     report.duration_s,
                     open ? fmt::format("at most {} requests in flight", report.connections)
                          : fmt::format("{} clients", report.connections),
                     report.batch, report.binary ? "binary" : "JSON", report.inputs, bytes_text(report.request_bytes));
  out += open ? "  latency counts from each request's scheduled send time: waiting for a free connection is included\n"
              : "  latency counts from each request's send\n";
  if (report.warmup_s > 0.0) {
    out += fmt::format("  warm-up: the {} requests scheduled in the first {:g} s are not counted below\n",
                       report.warmup_requests, report.warmup_s);
  }
  out += fmt::format("requests     {} scheduled: {} sent, {} unsent; {} answered, {} rejected (429: {}, 503: {}), "
                     "{} failed (HTTP {}, transport {}, timeout {}){}\n",
                     report.scheduled, report.sent, report.unsent, report.answered, report.rejected(),
                     report.rejected_429, report.rejected_503, report.failed(), report.failed_http,
                     report.failed_transport, report.timed_out,
                     report.cancelled > 0 ? fmt::format(", {} cancelled", report.cancelled) : "");
  out += fmt::format("throughput   {:.1f} answers/s ({:.1f} items/s){}; goodput {:.1f}/s within the {:g} ms SLO "
                     "(attainment {:.1f} %)\n",
                     report.throughput_rps, report.throughput_rps * static_cast<double>(report.batch),
                     open ? fmt::format(", offered {:.1f}/s", report.offered_rps) : "", report.goodput_rps,
                     report.slo_s * 1e3, 100.0 * report.slo_attainment);
  const auto line = [](const Percentiles& p) {
    return fmt::format("p50 {}, p95 {}, p99 {}, max {}", ms(p.p50_s), ms(p.p95_s), ms(p.p99_s), ms(p.max_s));
  };
  if (report.latency.count > 0) {
    out += fmt::format("latency      {} over {} answers\n", line(report.latency), report.latency.count);
    if (open) out += fmt::format("  from send  {}\n", line(report.service));
  }
  if (open && report.send_lag.count > 0) {
    out += fmt::format("send lag     p99 {}, max {} (scheduled time to send); {} requests in flight at most, "
                       "{} connections used\n",
                       ms(report.send_lag.p99_s), ms(report.send_lag.max_s), report.max_in_flight,
                       report.connections_used);
  }
  if (report.rejection.count > 0) {
    out += fmt::format("rejections   429 in p50 {}, p99 {}, max {} from the send{}\n", ms(report.rejection.p50_s),
                       ms(report.rejection.p99_s), ms(report.rejection.max_s),
                       report.max_retry_after_s
                           ? fmt::format("; Retry-After on {} of them, up to {:g} s", report.retry_after_count,
                                         *report.max_retry_after_s)
                           : "; no Retry-After");
  }
  for (const auto& e : report.errors) {
    out += fmt::format("error        {} x{}: {}\n", e.http_status == 0 ? std::string("no answer") :
                                                                       fmt::format("HTTP {}", e.http_status),
                       e.count, e.message);
  }
  if (report.other_errors > 0) out += fmt::format("error        {} more with other messages\n", report.other_errors);
  for (const auto& s : report.segments) {
    out += fmt::format("segment      {:g}-{:g} s at {:g}/s: {} scheduled, {} answered, {} within the SLO, p99 {}\n",
                       s.start_s, s.end_s, s.rate_per_s, s.scheduled, s.answered, s.within_slo, ms(s.p99_s));
  }
  out += fmt::format("ended        after {:.2f} s: {}\n", report.elapsed_s,
                     report.stop_reason == "signal"       ? "stopped by a signal"
                     : report.stop_reason == "max_requests" ? "--max-requests reached"
                     : report.stop_reason == "trace_end"    ? "the trace ended"
                                                            : "the duration ended");
  return out;
}

}  // namespace gpucap::service
