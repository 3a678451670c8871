#include "gpucap/monitor/work_metrics.hpp"

#include <fmt/format.h>

#include <array>
#include <cmath>

namespace gpucap::monitor {
namespace {

constexpr double kHertzPerMegahertz = 1e6;
constexpr double kPercent = 100.0;

struct Family {
  const char* name;
  MetricType type;
  const char* help;
};

constexpr std::array<Family, 12> kWindowFamilies = {{
    {"gpucap_power_cap_watts", MetricType::gauge, "The power cap in force (absent: none)."},
    {"gpucap_window_max_power_watts", MetricType::gauge, "Highest power sample of the last window."},
    {"gpucap_window_mean_power_watts", MetricType::gauge, "Mean power of the last window."},
    {"gpucap_batch_size", MetricType::gauge,
     "Batch size the controller set for the last window (absent where jobs differ: gpucap_tenant_batch_size)."},
    {"gpucap_sm_clock_hertz", MetricType::gauge, "SM clock at the end of the last window."},
    {"gpucap_memory_clock_hertz", MetricType::gauge, "Memory clock at the end of the last window."},
    {"gpucap_throughput_images_per_second", MetricType::gauge, "Images per second over the last window."},
    {"gpucap_tenant_mps_share_ratio", MetricType::gauge, "MPS share of each tenant (job) in the last window, 0 to 1."},
    {"gpucap_tenant_batch_size", MetricType::gauge, "Batch size of each tenant (job) in the last window."},
    {"gpucap_windows_total", MetricType::counter, "Power windows closed."},
    {"gpucap_windows_over_cap_total", MetricType::counter, "Power windows with a sample (share: the mean) over the cap."},
    {"gpucap_images_total", MetricType::counter, "Images (or items) finished."},
}};

}  // namespace

const char* to_string(TrialEvent event) {
  switch (event) {
    case TrialEvent::job_registered: return "job_registered";
    case TrialEvent::dispatched: return "dispatched";
    case TrialEvent::reported_continue: return "reported_continue";
    case TrialEvent::reported_converged: return "reported_converged";
    case TrialEvent::reported_failed: return "reported_failed";
    case TrialEvent::ended: return "ended";
  }
  return "?";
}

const std::vector<std::string>& window_metric_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const auto& family : kWindowFamilies) out.emplace_back(family.name);
    return out;
  }();
  return names;
}

WorkMetrics::WorkMetrics(MetricsRegistry& registry, Labels labels, bool windows)
    : registry_(registry), labels_(std::move(labels)) {
  registry_.declare("gpucap_info", MetricType::gauge, "What gpucap runs, in its labels (value 1).");
  registry_.set("gpucap_info", labels_, 1.0);
  if (!windows) return;
  for (const auto& family : kWindowFamilies) registry_.declare(family.name, family.type, family.help);
  // Counters exist from the start, so a rate over the first windows has its origin.
  for (const char* counter : {"gpucap_windows_total", "gpucap_windows_over_cap_total", "gpucap_images_total"}) {
    registry_.add(counter, labels_, 0.0);
  }
}

Labels WorkMetrics::with(const char* name, const std::string& value) const {
  auto labels = labels_;
  labels.emplace_back(name, value);
  return labels;
}

void WorkMetrics::window(const WindowFigures& f) {
  auto& r = registry_;
  const auto set_if_known = [&](const char* name, double value) { r.set_if_known(name, labels_, value); };
  cap(f.cap_w);
  set_if_known("gpucap_window_max_power_watts", f.max_power_w);
  set_if_known("gpucap_window_mean_power_watts", f.mean_power_w);
  if (f.batch_size > 0) r.set("gpucap_batch_size", labels_, f.batch_size);
  set_if_known("gpucap_sm_clock_hertz", f.sm_clock_mhz * kHertzPerMegahertz);
  set_if_known("gpucap_memory_clock_hertz", f.memory_clock_mhz * kHertzPerMegahertz);
  r.set("gpucap_throughput_images_per_second", labels_, f.throughput_img_s);
  for (const auto& tenant : f.tenants) {
    const auto labels = with("tenant", tenant.name);
    r.set_if_known("gpucap_tenant_mps_share_ratio", labels, tenant.mps_share_pct / kPercent);
    // A job that is not running has no batch size: its series goes until it runs again.
    r.set_if_known("gpucap_tenant_batch_size", labels,
                   tenant.batch_size > 0 ? static_cast<double>(tenant.batch_size) : std::nan(""));
  }
  r.add("gpucap_windows_total", labels_, 1.0);
  r.add("gpucap_windows_over_cap_total", labels_, f.over_cap ? 1.0 : 0.0);
  r.add("gpucap_images_total", labels_, static_cast<double>(f.images));
}

void WorkMetrics::cap(double cap_w) {
  registry_.set_if_known("gpucap_power_cap_watts", labels_, cap_w > 0.0 ? cap_w : std::nan(""));
}

void WorkMetrics::preemptions(std::int64_t total) {
  registry_.declare("gpucap_preemptions_total", MetricType::counter, "Preemptions of a lower-priority job's executor.");
  registry_.set("gpucap_preemptions_total", labels_, static_cast<double>(total));
}

void WorkMetrics::trial(TrialEvent event, int batch_size) {
  registry_.declare("gpucap_bso_events_total", MetricType::counter,
                    "Batch-size optimizer events: jobs registered, trials dispatched, reports (continue, converged, "
                    "failed) and trials ended, by batch size.");
  auto labels = with("event", to_string(event));
  labels.emplace_back("batch_size", batch_size > 0 ? std::to_string(batch_size) : "");
  registry_.add("gpucap_bso_events_total", labels, 1.0);
}

}  // namespace gpucap::monitor
