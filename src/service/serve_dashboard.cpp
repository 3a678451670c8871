#include "gpucap/service/serve_dashboard.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "gpucap/core/error.hpp"
#include "gpucap/core/files.hpp"

namespace gpucap::service {
namespace {

// A number the page can show, or null (JSON has no NaN).
nlohmann::json number(double value) { return std::isfinite(value) ? nlohmann::json(value) : nlohmann::json(nullptr); }

std::string html_escape(const std::string& text) {
  std::string out;
  for (const char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

// The page: tiles with the latest figures, four charts, and a script that polls /api/series.
// Placeholders @TITLE@, @LABEL@, @SLO_MS@ are filled in by dashboard_html().
constexpr const char* kPage = R"html(<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>@TITLE@</title>
<style>
body { font-family: sans-serif; margin: 16px; background: #f7f7f7; color: #222; }
h1 { font-size: 20px; margin: 0 0 12px 0; }
.label { color: #a40000; font-weight: normal; }
.tiles { display: flex; gap: 10px; flex-wrap: wrap; }
.tile { background: #fff; border: 1px solid #ddd; padding: 6px 12px; min-width: 120px; }
.tile span { display: block; font-size: 12px; color: #666; }
.tile b { font-size: 22px; }
.grid { display: grid; grid-template-columns: 1fr 1fr; gap: 14px; margin-top: 14px; }
.chart { background: #fff; border: 1px solid #ddd; padding: 8px; height: 250px; }
#status { color: #666; font-size: 12px; }
</style>
<script src="/dashboard/chart.js"></script>
</head>
<body>
<h1>@TITLE@ <span class="label">@LABEL@</span></h1>
<div class="tiles">
  <div class="tile"><span>cap</span><b id="cap">–</b></div>
  <div class="tile"><span>cap from</span><b id="source">–</b></div>
  <div class="tile"><span>power (window max)</span><b id="power">–</b></div>
  <div class="tile"><span>throughput</span><b id="throughput">–</b></div>
  <div class="tile"><span>goodput (within SLO)</span><b id="goodput">–</b></div>
  <div class="tile"><span>shed (429)</span><b id="shed">–</b></div>
  <div class="tile"><span>p99 / SLO @SLO_MS@ ms</span><b id="p99">–</b></div>
  <div class="tile"><span>batch cap</span><b id="batch">–</b></div>
  <div class="tile"><span>SM clock</span><b id="clock">–</b></div>
</div>
<div class="grid">
  <div class="chart"><canvas id="power-chart"></canvas></div>
  <div class="chart"><canvas id="rate-chart"></canvas></div>
  <div class="chart"><canvas id="latency-chart"></canvas></div>
  <div class="chart"><canvas id="knobs-chart"></canvas></div>
</div>
<p id="status">waiting for the first window…</p>
<script>
"use strict";
const SLO_MS = @SLO_MS@;
// A window's figures stop moving while the GPU runs a long batch or is stalled, or while a
// controller whose windows count batches (batchsizer) has no traffic: say so past this long.
const STALE_AFTER_MS = @STALE_MS@;
let updates = 0;
let inFlight = false;
let lastWindowT = null;
let lastWindowSeenAt = Date.now();
function chart(id, title, datasets, yTitle) {
  if (typeof Chart === "undefined") return null;
  return new Chart(document.getElementById(id), {
    type: "line",
    data: { datasets: datasets.map(([label, color]) => ({ label, borderColor: color, backgroundColor: color,
                                                          data: [], pointRadius: 0, borderWidth: 2, stepped: false })) },
    options: { animation: false, maintainAspectRatio: false, parsing: false,
               plugins: { title: { display: true, text: title } },
               scales: { x: { type: "linear", title: { display: true, text: "time (s)" } },
                         y: { title: { display: true, text: yTitle }, beginAtZero: true } } } });
}
const charts = {
  power: chart("power-chart", "Cap and power", [["cap (W)", "#c00000"], ["power, window max (W)", "#1f77b4"],
                                                ["power, window mean (W)", "#9ecae1"]], "W"),
  rate: chart("rate-chart", "Throughput and goodput", [["throughput (req/s)", "#2ca02c"], ["goodput (req/s)", "#1b5e20"],
                                                       ["shed (req/s)", "#ff7f0e"]], "requests/s"),
  latency: chart("latency-chart", "p99 latency against the SLO", [["p99 (ms)", "#9467bd"], ["SLO (ms)", "#c00000"]], "ms"),
  knobs: chart("knobs-chart", "Batch cap and SM clock", [["batch cap", "#8c564b"], ["SM clock (MHz / 10)", "#17becf"]],
               "batch / MHz÷10"),
};
function set(chartObject, series) {
  if (!chartObject) return;
  series.forEach((points, i) => { chartObject.data.datasets[i].data = points; });
  chartObject.update("none");
}
function text(id, value) { document.getElementById(id).textContent = value; }
function fixed(v, digits) { return v === null || v === undefined ? "–" : v.toFixed(digits); }
async function refresh() {
  if (inFlight) return;  // one request at a time: a slow answer is not overtaken by a newer one
  inFlight = true;
  const abort = new AbortController();
  const timer = setTimeout(() => abort.abort(), 5000);
  try {
    const answer = await fetch("/api/series", { cache: "no-store", signal: abort.signal });
    const points = (await answer.json()).points;
    if (points.length > 0) {
      const last = points[points.length - 1];
      text("cap", fixed(last.cap_w, 0) + " W");
      text("source", last.source);
      text("power", fixed(last.power_max_w, 1) + " W");
      text("throughput", fixed(last.throughput_rps, 1) + " /s");
      text("goodput", fixed(last.goodput_rps, 1) + " /s");
      text("shed", fixed(last.shed_rps, 1) + " /s");
      text("p99", fixed(last.p99_ms, 1) + " ms");
      text("batch", String(last.batch_cap));
      text("clock", last.sm_clock_mhz === null ? "–" : fixed(last.sm_clock_mhz, 0) + " MHz");
      const xy = (key, scale = 1) => points.map(p => ({ x: p.t_s, y: p[key] === null ? null : p[key] * scale }));
      set(charts.power, [xy("cap_w"), xy("power_max_w"), xy("power_mean_w")]);
      set(charts.rate, [xy("throughput_rps"), xy("goodput_rps"), xy("shed_rps")]);
      set(charts.latency, [xy("p99_ms"), points.map(p => ({ x: p.t_s, y: SLO_MS }))]);
      set(charts.knobs, [xy("batch_cap"), xy("sm_clock_mhz", 0.1)]);
    }
    updates += 1;
    document.body.dataset.updates = String(updates);
    const lastT = points.length > 0 ? points[points.length - 1].t_s : null;
    if (lastT !== lastWindowT) {
      lastWindowT = lastT;
      lastWindowSeenAt = Date.now();
    }
    const quietMs = Date.now() - lastWindowSeenAt;
    text("status", "updated " + new Date().toLocaleTimeString() + ", " + points.length + " windows" +
                   (points.length > 0 && quietMs > STALE_AFTER_MS
                        ? "; no new window for " + Math.round(quietMs / 1000) + " s: the figures shown are from the last one"
                        : "") +
                   (typeof Chart === "undefined" ? " (the charting library did not load)" : ""));
  } catch (error) {
    text("status", "cannot reach the server: " + error);
  } finally {
    clearTimeout(timer);
    inFlight = false;
  }
}
refresh();
setInterval(refresh, 1000);
</script>
</body>
</html>
)html";

void replace_all(std::string& text, const std::string& key, const std::string& value) {
  for (auto at = text.find(key); at != std::string::npos; at = text.find(key, at + value.size())) {
    text.replace(at, key.size(), value);
  }
}

}  // namespace

SeriesBuffer::SeriesBuffer(std::size_t capacity) : capacity_(capacity) {
  if (capacity_ == 0) throw Error(ErrorCode::internal, "a series buffer holds at least one window");
}

void SeriesBuffer::add(const serve::ServingWindow& w) {
  const double length_s = std::max(w.end_s - w.start_s, 1e-9);
  nlohmann::json point = {
      {"t_s", w.end_s},
      {"cap_w", w.cap_w},
      {"power_mean_w", w.power.empty() ? nlohmann::json(nullptr) : number(w.power.mean_w)},
      {"power_max_w", w.power.empty() ? nlohmann::json(nullptr) : number(w.power.max_w)},
      {"throughput_rps", static_cast<double>(w.counts.answered) / length_s},
      {"goodput_rps", static_cast<double>(w.counts.good) / length_s},
      {"shed_rps", static_cast<double>(w.counts.shed) / length_s},
      {"p99_ms", w.slo.ok == 0 ? nlohmann::json(nullptr) : nlohmann::json(w.slo.p99_s * 1e3)},
      {"batch_cap", w.knobs.max_batch_size},
      {"sm_clock_mhz", number(w.sm_clock_mhz)},
      {"source", w.cap_source},
  };
  const std::lock_guard lock(mutex_);
  points_.push_back(std::move(point));
  if (points_.size() > capacity_) points_.pop_front();
}

nlohmann::json SeriesBuffer::json() const {
  const std::lock_guard lock(mutex_);
  return {{"points", nlohmann::json(std::vector<nlohmann::json>(points_.begin(), points_.end()))}};
}

std::string dashboard_html(const DashboardInfo& info) {
  std::string page = kPage;
  replace_all(page, "@TITLE@", html_escape(fmt::format("gpucap serve: {} on {} ({})", info.model, info.gpu, info.algorithm)));
  replace_all(page, "@LABEL@", info.simulated ? "[simulated: the GPU twin]" : "[real GPU]");
  replace_all(page, "@SLO_MS@", fmt::format("{:g}", info.slo_ms));
  replace_all(page, "@STALE_MS@", fmt::format("{:.0f}", std::max(1.0, info.stale_after_s) * 1e3));
  return page;
}

std::optional<std::string> add_dashboard(MetricsServer& server, const SeriesBuffer& series, const DashboardInfo& info,
                                         const std::string& chart_js_path) {
  std::optional<std::string> warning;
  server.add_page("/", [page = dashboard_html(info)] { return page; }, "text/html; charset=utf-8");
  server.add_page("/api/series", [&series] { return series.json().dump(); }, "application/json");
  try {
    server.add_page("/dashboard/chart.js", [chart_js = read_text_file(chart_js_path)] { return chart_js; },
                    "application/javascript; charset=utf-8");
  } catch (const Error& e) {
    warning = fmt::format("the dashboard's charting library is missing ({}): its page shows the figures without charts; "
                          "install libjs-chart.js (scripts/setup.sh does)",
                          e.what());
  }
  return warning;
}

}  // namespace gpucap::service
