#include "gpucap/serve/simulation.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <unordered_map>

#include "gpucap/core/error.hpp"

namespace gpucap::serve {
namespace {

// Figures of one segment while the run goes on.
struct SegmentTally {
  SegmentReport report;
  std::vector<double> latencies_s;
  double power_time_ws = 0.0;  // Σ window mean power × its length
  double power_time_s = 0.0;
};

class Tallies {
 public:
  Tallies(const CapSchedule& cap, double duration_s) {
    const auto& steps = cap.steps();
    for (std::size_t i = 0; i < steps.size() && steps[i].time_s < duration_s; ++i) {
      SegmentTally t;
      t.report.start_s = steps[i].time_s;
      t.report.end_s = i + 1 < steps.size() ? std::min(steps[i + 1].time_s, duration_s) : duration_s;
      t.report.cap_w = steps[i].cap_w;
      segments_.push_back(std::move(t));
    }
  }

  SegmentTally& at(double time_s) {
    for (std::size_t i = segments_.size(); i-- > 1;) {
      if (time_s >= segments_[i].report.start_s) return segments_[i];
    }
    return segments_.front();
  }

  void answered(double arrival_s, double latency_s, bool ok, double slo_s) {
    auto& s = at(arrival_s);
    if (!ok) {
      ++s.report.failed;
      return;
    }
    ++s.report.answered;
    s.latencies_s.push_back(latency_s);
    if (latency_s <= slo_s) ++s.report.good;
  }

  void window(const ServingWindow& w) {
    auto& s = at(0.5 * (w.start_s + w.end_s));
    auto& r = s.report;
    ++r.windows;
    if (w.over_cap) {
      ++r.windows_over_cap;
      if (!w.cap_transition) ++r.windows_over_cap_outside_transitions;
    }
    if (!w.power.empty()) {
      r.max_power_w = std::max(r.max_power_w, w.power.max_w);
      s.power_time_ws += w.power.mean_w * (w.end_s - w.start_s);
      s.power_time_s += w.end_s - w.start_s;
    }
    r.max_queued_requests = std::max(r.max_queued_requests, w.queued_requests);
  }

  [[nodiscard]] std::vector<SegmentReport> finish(SegmentReport& total) {
    std::vector<SegmentReport> out;
    SegmentTally all;
    all.report.start_s = segments_.front().report.start_s;
    all.report.end_s = segments_.back().report.end_s;
    for (auto& s : segments_) {
      finish_one(s);
      out.push_back(s.report);
      auto& a = all.report;
      const auto& r = s.report;
      a.arrivals += r.arrivals;
      a.answered += r.answered;
      a.good += r.good;
      a.shed += r.shed;
      a.refused += r.refused;
      a.failed += r.failed;
      a.windows += r.windows;
      a.windows_over_cap += r.windows_over_cap;
      a.windows_over_cap_outside_transitions += r.windows_over_cap_outside_transitions;
      a.max_power_w = std::max(a.max_power_w, r.max_power_w);
      a.max_queued_requests = std::max(a.max_queued_requests, r.max_queued_requests);
      all.latencies_s.insert(all.latencies_s.end(), s.latencies_s.begin(), s.latencies_s.end());
      all.power_time_ws += s.power_time_ws;
      all.power_time_s += s.power_time_s;
    }
    finish_one(all);
    all.report.cap_w = std::numeric_limits<double>::quiet_NaN();
    total = all.report;
    return out;
  }

 private:
  static void finish_one(SegmentTally& s) {
    auto& r = s.report;
    const double length_s = std::max(r.end_s - r.start_s, 1e-9);
    r.goodput_rps = static_cast<double>(r.good) / length_s;
    r.throughput_rps = static_cast<double>(r.answered) / length_s;
    const auto judged = r.answered + r.failed;
    r.slo_attainment = judged > 0 ? static_cast<double>(r.good) / static_cast<double>(judged) : 1.0;
    if (!s.latencies_s.empty()) {
      // Nearest rank, exact.
      const auto rank = static_cast<std::size_t>(std::ceil(0.99 * static_cast<double>(s.latencies_s.size())));
      std::nth_element(s.latencies_s.begin(), s.latencies_s.begin() + static_cast<std::ptrdiff_t>(rank - 1),
                       s.latencies_s.end());
      r.p99_s = s.latencies_s[rank - 1];
    }
    r.mean_power_w = s.power_time_s > 0.0 ? s.power_time_ws / s.power_time_s : 0.0;
  }

  std::vector<SegmentTally> segments_;
};

// The first cap change after t, if any.
double next_cap_change_s(const CapSchedule& cap, double t) {
  for (const auto& step : cap.steps()) {
    if (step.time_s > t) return step.time_s;
  }
  return std::numeric_limits<double>::infinity();
}

}  // namespace

SimulationReport simulate_serving(runtime::Platform& platform, control::ServingController& controller,
                                  ArrivalProcess arrivals, const SimulationConfig& config,
                                  const std::function<void(const ServingWindow&)>& on_window) {
  if (!platform.simulated()) throw Error(ErrorCode::internal, "simulate_serving runs on the twin (virtual time)");
  if (!(config.duration_s > 0.0) || !(config.drain_s >= 0.0)) {
    throw usage_error("a serving simulation needs a positive duration and a drain time >= 0");
  }
  if (config.items_per_request < 1) throw usage_error("a request has at least one item");
  auto stats = config.stats;
  stats.slo_s = config.slo_s;
  const std::string cap_source = config.cap.is_constant() ? "flag" : "schedule";
  const CapProvider cap = [&config, cap_source](double t) { return CapReading{config.cap.cap_at(t), cap_source}; };
  ServingCore core(config.batcher, stats, controller.initial_knobs(config.cap.cap_at(0.0)));
  ServingLoop loop(platform, controller, core, cap, config.slo_s);
  Tallies tallies(config.cap, config.duration_s);
  SimulationReport report;
  const auto record = [&](const std::optional<ServingWindow>& w) {
    if (!w) return;
    tallies.window(*w);
    if (on_window) on_window(*w);
    report.windows.push_back(*w);
  };

  std::unordered_map<std::uint64_t, double> queued_arrival_s;  // bounded by the queue
  std::uint64_t next_id = 0;
  auto next_arrival = arrivals.next();
  const double end_s = config.duration_s + config.drain_s;
  while (true) {
    const double now = loop.now_s();
    // Platform time is the twin's clock less its origin: an idle to an arrival's time can land a
    // rounding error short of it.
    constexpr double kSameInstantS = 1e-9;
    while (next_arrival && *next_arrival <= now + kSameInstantS) {
      const double at = *next_arrival;
      const PendingRequest request{++next_id, config.items_per_request, at, 0, std::nullopt};
      auto& segment = tallies.at(at).report;
      ++segment.arrivals;
      const auto admission = core.admit(request, at);
      if (admission.accepted()) {
        queued_arrival_s.emplace(request.id, at);
      } else if (admission.result == AdmissionResult::shed) {
        ++segment.shed;
      } else {
        ++segment.refused;
      }
      next_arrival = arrivals.next();
    }
    const auto step = core.step(now);
    for (const auto id : step.timed_out) {
      tallies.answered(queued_arrival_s.at(id), 0.0, false, config.slo_s);
      queued_arrival_s.erase(id);
    }
    if (step.launch) {
      for (const auto& r : step.launch->requests) queued_arrival_s.erase(r.id);
      const auto run = loop.run(*step.launch);
      for (const auto& r : step.launch->requests) tallies.answered(r.arrival_s, run.end_s - r.arrival_s, run.ok, config.slo_s);
      record(loop.poll());
      continue;
    }
    const bool arrivals_over = !next_arrival.has_value();
    if (arrivals_over && core.queued_requests() == 0 && now >= config.duration_s) break;
    if (now >= end_s) break;
    double next = arrivals_over && core.queued_requests() == 0 ? config.duration_s : end_s;
    if (next_arrival) next = std::min(next, *next_arrival);
    if (step.wake_s) next = std::min(next, *step.wake_s);
    next = std::min({next, loop.window_due_s(), next_cap_change_s(config.cap, now)});
    // Something is due now that poll() could not close yet (a window without a sample): let the
    // twin move on a little, so the loop always makes progress.
    constexpr double kLeastStepS = 1e-4;
    loop.idle_until(next > now + kSameInstantS ? next : now + kLeastStepS);
    record(loop.poll());
  }
  // What the drain did not reach failed.
  for (const auto& [id, arrival_s] : queued_arrival_s) tallies.answered(arrival_s, 0.0, false, config.slo_s);
  record(loop.finish());
  report.loop = loop.totals();
  report.segments = tallies.finish(report.total);
  return report;
}

}  // namespace gpucap::serve
