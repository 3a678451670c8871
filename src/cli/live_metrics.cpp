#include "live_metrics.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <tuple>

#include "gpucap/service/bso_server.hpp"

namespace gpucap::cli {
namespace {

constexpr double kNotMeasured = std::numeric_limits<double>::quiet_NaN();
constexpr double kPercent = 100.0;

constexpr const char* kMetricsExample = "127.0.0.1:9400";

service::MetricsServer start_server(const std::string& address, service::MetricsServer::Render render) {
  const auto [host, port] = service::parse_listen_address(address, "--metrics", kMetricsExample);
  return service::MetricsServer(host, port, std::move(render));
}

}  // namespace

void LiveFlags::add_to(CLI::App& app, bool with_pace) {
  app.add_option("--metrics", metrics,
                 "Serve Prometheus metrics at HOST:PORT/metrics while it runs: the GPU's (dcgm-exporter's names) and "
                 "gpucap's own (cap, window power, knobs, throughput ...); port 0 picks a free one (printed on stderr)");
  app.add_option("--hostname-label", hostname_label,
                 "The host label of the DCGM_* series: hostname (dcgm-exporter since its 2026-05 rename) or Hostname "
                 "(dashboards written before it)")
      ->capture_default_str();
  if (with_pace) {
    app.add_option("--pace", pace,
                   "twin: let virtual time follow the wall clock, 'realtime' or a speed factor (virtual seconds per "
                   "wall second), e.g. to watch --metrics move");
  }
}

std::optional<double> LiveFlags::pace_factor() const {
  if (!pace) return std::nullopt;
  return runtime::parse_pace(*pace);
}

void LiveFlags::check_address() const {
  if (metrics) (void)service::parse_listen_address(*metrics, "--metrics", kMetricsExample);
  (void)monitor::parse_hostname_label(hostname_label);
}

monitor::GpuIdentity LiveFlags::labelled(monitor::GpuIdentity gpu) const {
  gpu.hostname_label = monitor::parse_hostname_label(hostname_label);
  return gpu;
}

void LiveFlags::warn_if_unpaced(const char* command) const {
  if (!metrics || pace) return;
  std::fprintf(stderr,
               "gpucap %s: warning: the twin runs in virtual time, so without --pace this run ends in moments with "
               "little for a scraper to see; add --pace realtime to watch --metrics move\n",
               command);
  std::fflush(stderr);
}

LiveExport::LiveExport(const std::string& command, const std::string& address, monitor::Labels labels, bool simulated,
                       bool windows, const std::function<void(service::MetricsServer&)>& pages)
    : work_(registry_, std::move(labels), windows), server_(start_server(address, [this] { return scrape(); })) {
  if (pages) pages(server_);
  const int port = server_.start();
  (void)port;
  std::fprintf(stderr, "gpucap %s: metrics at %s%s\n", command.c_str(), server_.url().c_str(),
               simulated ? " (simulated: the twin's figures)" : "");
  std::fflush(stderr);
}

void LiveExport::set_scrape_hook(std::function<void()> hook) {
  const std::lock_guard lock(hook_mutex_);
  hook_ = std::move(hook);
}

std::string LiveExport::scrape() {
  {
    const std::lock_guard lock(hook_mutex_);
    if (hook_) hook_();
  }
  return registry_.render();
}

monitor::Labels run_labels(const std::string& algorithm, const std::string& model, const std::string& gpu_model,
                           unsigned gpu_index, bool simulated) {
  return {{"algorithm", algorithm},
          {"model", model},
          {"gpu_model", gpu_model},
          {"gpu", std::to_string(gpu_index)},
          {"simulated", simulated ? "true" : "false"}};
}

monitor::WindowFigures window_figures(const runtime::TraceRow& row) {
  monitor::WindowFigures f;
  f.cap_w = row.cap_w;
  f.max_power_w = row.window_max_w;
  f.mean_power_w = row.window_mean_w;
  f.batch_size = row.batch_size;
  f.sm_clock_mhz = row.sm_clock_mhz;
  f.memory_clock_mhz = row.memory_clock_mhz;
  f.throughput_img_s = row.throughput_img_s;
  f.images = row.images;
  f.over_cap = row.over_cap;
  for (std::size_t i = 0; i < row.tenants.size(); ++i) {
    f.tenants.push_back({std::to_string(i), row.tenants[i].mps_share_pct, row.tenants[i].batch_size});
  }
  return f;
}

RunExport::RunExport(LiveExport& live, runtime::Platform& platform, const monitor::GpuIdentity& gpu)
    : live_(live),
      gpu_(live.registry(), {&platform.device()}, {gpu}, [&clock = platform.clock()] { return clock.now_s(); }) {
  gpu_.publish();  // a scrape before the first sample sees the GPU
}

runtime::TraceSink RunExport::sink(runtime::TraceSink inner) {
  return [this, inner = std::move(inner)](const runtime::TraceRow& row) {
    if (inner) inner(row);
    live_.work().window(window_figures(row));
  };
}

runtime::PowerSampleSink RunExport::power_sink() {
  return [this](const PowerSample& sample, double cap_w) {
    gpu_.publish_with_power(sample.power_w);
    live_.work().cap(cap_w);
  };
}

std::unique_ptr<LiveExport> start_run_live(const LiveFlags& flags, monitor::Labels labels, bool simulated) {
  if (!flags.metrics) return nullptr;
  return std::make_unique<LiveExport>("run", *flags.metrics, std::move(labels), simulated);
}

std::unique_ptr<RunExport> attach_run_export(LiveExport* live, runtime::Platform& platform,
                                             const monitor::GpuIdentity& gpu) {
  if (live == nullptr) return nullptr;
  return std::make_unique<RunExport>(*live, platform, gpu);
}

ShareLive::ShareLive(std::optional<runtime::Pacer> pacer, LiveExport* live, const sched::ShareScenario& scenario,
                     monitor::GpuIdentity gpu)
    : pacer_(std::move(pacer)),
      live_(live),
      gpu_(std::move(gpu)),
      max_power_w_(scenario.gpu.max_power_w),
      mps_(scenario.policy == sched::Policy::mps) {
  if (live_ != nullptr) monitor::declare_dcgm_metrics(live_->registry());
}

void ShareLive::on_time(double now_s) {
  if (pacer_) pacer_->wait_until(now_s);
}

void ShareLive::on_window(const sched::ShareProgress& p) {
  if (live_ == nullptr) return;
  const double length_s = p.window.end_s - p.window.start_s;
  items_before_.resize(p.items_done.size(), 0);
  monitor::WindowFigures f;
  f.cap_w = p.window.cap_w;  // 0 without a cap: left out
  f.max_power_w = kNotMeasured;  // the share twin keeps only each window's mean
  f.mean_power_w = p.window.mean_power_w;
  // The clock a controller set; without one the GPU chooses, and the twin does not say which.
  f.sm_clock_mhz = p.knobs.gpu_clock_mhz > 0.0 ? p.knobs.gpu_clock_mhz : kNotMeasured;
  f.memory_clock_mhz = kNotMeasured;
  f.over_cap = p.window.cap_w > 0.0 && p.window.mean_power_w > p.window.cap_w;
  // Under MPS the live jobs share the GPU equally; other policies do not split it by share.
  const auto live_jobs = std::count_if(p.jobs.begin(), p.jobs.end(), [](const sched::ShareJobView& j) { return j.live; });
  std::int64_t images = 0;
  for (std::size_t j = 0; j < p.jobs.size(); ++j) {
    images += p.items_done[j] - items_before_[j];
    const bool live = p.jobs[j].live;
    const double share_pct = !mps_ ? kNotMeasured : (live ? kPercent / static_cast<double>(live_jobs) : 0.0);
    f.tenants.push_back({p.jobs[j].name, share_pct, live ? p.jobs[j].batch_size : 0});
  }
  items_before_ = p.items_done;
  f.images = images;
  f.throughput_img_s = length_s > 0.0 ? static_cast<double>(images) / length_s : 0.0;
  live_->work().window(f);
  live_->work().preemptions(p.preemptions);

  monitor::GpuReading gpu;
  gpu.power_w = p.window.mean_power_w;
  gpu.energy_j = p.gpu_energy_j;
  gpu.sm_clock_mhz = f.sm_clock_mhz;
  gpu.memory_clock_mhz = kNotMeasured;
  gpu.utilization_pct = length_s > 0.0 ? kPercent * std::clamp((p.gpu_busy_s - busy_before_s_) / length_s, 0.0, 1.0) : 0.0;
  busy_before_s_ = p.gpu_busy_s;
  gpu.memory_utilization_pct = kNotMeasured;
  gpu.temperature_c = kNotMeasured;
  // The board's enforced limit: the share twin's controllers turn clocks, never the board's limit, so
  // it stays at its default (the cap is gpucap_power_cap_watts).
  gpu.power_limit_w = max_power_w_ > 0.0 ? max_power_w_ : kNotMeasured;
  monitor::publish_dcgm(live_->registry(), gpu_, gpu);
}

}  // namespace gpucap::cli
