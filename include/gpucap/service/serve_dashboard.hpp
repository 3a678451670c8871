#pragma once
// `gpucap serve`'s live dashboard: GET / on the --metrics address, one self-contained page that
// charts the last minutes — the cap and the power, throughput and goodput (and what was shed),
// the p99 latency against the SLO, the batch cap and the SM clock — and updates every second from
// GET /api/series (JSON, the serving windows kept here). Its charting library is Debian's
// libjs-chart.js, read from /usr/share/javascript at start and served by gpucap at
// /dashboard/chart.js: no CDN, nothing fetched from outside.

#include <deque>
#include <mutex>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "gpucap/serve/serving_loop.hpp"
#include "gpucap/service/metrics_server.hpp"

namespace gpucap::service {

// The last windows of serving, for the dashboard. Thread-safe: the GPU thread adds, the server's
// threads read.
class SeriesBuffer {
 public:
  explicit SeriesBuffer(std::size_t capacity = 600);  // 10 minutes of 1-s windows
  void add(const serve::ServingWindow& window);
  // {"points": [{"t_s", "cap_w", "power_mean_w", "power_max_w", "throughput_rps", "goodput_rps",
  //   "shed_rps", "p99_ms", "batch_cap", "sm_clock_mhz", "source"}, ...]} oldest first.
  [[nodiscard]] nlohmann::json json() const;

 private:
  mutable std::mutex mutex_;
  std::size_t capacity_;
  std::deque<nlohmann::json> points_;
};

struct DashboardInfo {
  std::string model;
  std::string gpu;         // the GPU's name
  std::string algorithm;
  double slo_ms = 0.0;
  bool simulated = true;   // the twin: every figure on the page says so
  // Wall seconds without a new window past which the page says its figures are the last window's
  // (a few windows' worth: on a twin paced slower than real time a window takes longer).
  double stale_after_s = 5.0;
};

// Where Debian's libjs-chart.js puts its UMD build.
inline constexpr const char* kChartJsPath = "/usr/share/javascript/chart.js/chart.min.js";

// Adds the page (/), its script (/dashboard/chart.js) and the data (/api/series) to `server`.
// When the charting library cannot be read, the page is served without its charts (its tiles and
// the data still work) and the warning to log is returned: /metrics does not depend on a
// JavaScript package.
[[nodiscard]] std::optional<std::string> add_dashboard(MetricsServer& server, const SeriesBuffer& series, const DashboardInfo& info,
                   const std::string& chart_js_path = kChartJsPath);

// The page itself (for tests).
[[nodiscard]] std::string dashboard_html(const DashboardInfo& info);

}  // namespace gpucap::service
