#pragma once
// --metrics HOST:PORT and --pace, shared by `gpucap run` and `gpucap share` (internal to src/cli):
// an exporter of the GPU's metrics (dcgm-exporter's names) and of gpucap's own work, updated from
// the run's thread at each power window and rendered by the server's thread at each scrape.

#include <CLI/CLI.hpp>

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "gpucap/monitor/gpu_exporter.hpp"
#include "gpucap/monitor/work_metrics.hpp"
#include "gpucap/runtime/pacer.hpp"
#include "gpucap/runtime/runner.hpp"
#include "gpucap/sched/simulator.hpp"
#include "gpucap/service/metrics_server.hpp"

namespace gpucap::cli {

struct LiveFlags {
  std::optional<std::string> metrics;  // HOST:PORT
  std::optional<std::string> pace;     // realtime | FACTOR
  std::string hostname_label = monitor::kHostnameLabel;

  // --metrics and --hostname-label always; --pace where the command has a twin to pace.
  void add_to(CLI::App& app, bool with_pace);
  // The pace factor, if --pace was given (Error(usage) for a bad one).
  [[nodiscard]] std::optional<double> pace_factor() const;
  // Error(usage) for a --metrics that is not HOST:PORT or a bad --hostname-label: call before
  // anything starts.
  void check_address() const;
  // `gpu` with the host label's spelling of --hostname-label.
  [[nodiscard]] monitor::GpuIdentity labelled(monitor::GpuIdentity gpu) const;
  // On the twin: --metrics without --pace serves a run that ends in milliseconds of virtual time,
  // with nothing to scrape; says so on stderr (`command`: "run", "share").
  void warn_if_unpaced(const char* command) const;
};

// A running exporter: its registry, gpucap's work metrics in it, and the HTTP server. The URL is
// announced on stderr ("... metrics at http://HOST:PORT/metrics"), so stdout keeps only results.
class LiveExport {
 public:
  // Binds `address` (--metrics) at once: Error(usage) for a bad address, Error(io) when it cannot
  // be bound. `windows`: a run or share (see WorkMetrics).
  // `pages`: adds pages to the server before it starts (gpucap serve's dashboard).
  LiveExport(const std::string& command, const std::string& address, monitor::Labels labels, bool simulated,
             bool windows = true, const std::function<void(service::MetricsServer&)>& pages = {});
  [[nodiscard]] monitor::MetricsRegistry& registry() { return registry_; }
  [[nodiscard]] monitor::WorkMetrics& work() { return work_; }
  [[nodiscard]] std::string url() const { return server_.url(); }
  // Runs at each scrape, from the server's threads, before the registry is rendered: for a gauge
  // whose truth lives elsewhere and is read when it is asked for (gpucap serve's pending requests).
  // An empty one removes it; set and removed while the server runs.
  void set_scrape_hook(std::function<void()> hook);

 private:
  [[nodiscard]] std::string scrape();

  monitor::MetricsRegistry registry_;
  monitor::WorkMetrics work_;
  std::mutex hook_mutex_;
  std::function<void()> hook_;
  service::MetricsServer server_;  // last: its threads use the members above
};

// The labels of every gpucap_* series of a run: algorithm, model, gpu_model (the GPU's model),
// gpu (its index, as on its DCGM_* series, so the two join) and simulated.
[[nodiscard]] monitor::Labels run_labels(const std::string& algorithm, const std::string& model,
                                         const std::string& gpu_model, unsigned gpu_index, bool simulated);

// A Runner window as the exporter's figures.
[[nodiscard]] monitor::WindowFigures window_figures(const runtime::TraceRow& row);

// For `gpucap run`: gpucap's work metrics and the GPU's readings, both published from the run's
// thread at each window (the device is never read from the server's thread).
class RunExport {
 public:
  // The GPU's metrics join `live` (already serving), read from the platform's device.
  RunExport(LiveExport& live, runtime::Platform& platform, const monitor::GpuIdentity& gpu);
  // `inner`, then the export of the window (gpucap's work metrics).
  [[nodiscard]] runtime::TraceSink sink(runtime::TraceSink inner);
  // The GPU's series and the cap in force, at each new power sample (RunConfig::on_power_sample):
  // the power as the run's sampler saw it, at its own period, not once per window.
  [[nodiscard]] runtime::PowerSampleSink power_sink();

 private:
  LiveExport& live_;
  monitor::GpuExporter gpu_;
};

// --metrics of a run, bound before anything runs (before the trace file, before any profiling):
// nullptr without --metrics. Errors as LiveExport's.
[[nodiscard]] std::unique_ptr<LiveExport> start_run_live(const LiveFlags& flags, monitor::Labels labels, bool simulated);
// The run's exporter once its platform exists; nullptr when `live` is.
[[nodiscard]] std::unique_ptr<RunExport> attach_run_export(LiveExport* live, runtime::Platform& platform,
                                                           const monitor::GpuIdentity& gpu);

// For `gpucap share`: paces the simulation and exports each window (either may be absent).
class ShareLive final : public sched::ShareObserver {
 public:
  // `gpu` names the shared GPU on its DCGM series (LiveFlags::labelled, the board's name).
  ShareLive(std::optional<runtime::Pacer> pacer, LiveExport* live, const sched::ShareScenario& scenario,
            monitor::GpuIdentity gpu);
  void on_time(double now_s) override;
  void on_window(const sched::ShareProgress& progress) override;

 private:
  std::optional<runtime::Pacer> pacer_;
  LiveExport* live_;
  monitor::GpuIdentity gpu_;
  double max_power_w_ = 0.0;
  bool mps_ = false;
  std::vector<std::int64_t> items_before_;
  double busy_before_s_ = 0.0;
};

}  // namespace gpucap::cli
