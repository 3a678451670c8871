#pragma once
// What only gpucap knows about its own work, exported beside the GPU's metrics (`gpucap run`,
// `share` and `bso serve` with --metrics): the cap in force, each power window's max and mean, the
// knobs (batch size, clocks, MPS shares), throughput, windows over the cap, preemptions and BSO
// trials. Names follow Prometheus's conventions (gpucap_ prefix, base units, counters end in
// _total); every series carries the caller's labels (algorithm, model, simulated).

#include <cstdint>
#include <string>
#include <vector>

#include "gpucap/monitor/exposition.hpp"

namespace gpucap::monitor {

// One power window of a run or a share.
// NaN: not known, and then not exported (the series is left out, not set to a guess).
struct WindowFigures {
  double cap_w = 0.0;               // 0 or NaN: no cap (the series is left out)
  double max_power_w = 0.0;         // NaN where the window keeps only its mean (share)
  double mean_power_w = 0.0;
  int batch_size = 0;               // 0: not one batch size, left out (share: see the jobs')
  double sm_clock_mhz = 0.0;        // NaN: not known (the GPU chooses it)
  double memory_clock_mhz = 0.0;    // NaN: not known
  double throughput_img_s = 0.0;
  std::int64_t images = 0;          // finished in the window
  bool over_cap = false;
  struct Tenant {
    std::string name;
    double mps_share_pct = 100.0;  // NaN: the GPU is not split by MPS shares
    int batch_size = 0;
  };
  std::vector<Tenant> tenants;      // MPS tenants (run) or jobs (share)
};

// What a BSO server route answered, as far as metrics care.
enum class TrialEvent { job_registered, dispatched, reported_continue, reported_converged, reported_failed, ended };
[[nodiscard]] const char* to_string(TrialEvent event);

class WorkMetrics {
 public:
  // Sets gpucap_info{labels} = 1; with `windows`, declares the window families and starts their
  // counters at 0 (a run or a share; not the BSO server).
  WorkMetrics(MetricsRegistry& registry, Labels labels, bool windows = true);

  void window(const WindowFigures& figures);
  // The cap in force now (between windows, with each power sample); 0 or NaN: none, left out.
  void cap(double cap_w);
  // share: preemptions so far (a running total).
  void preemptions(std::int64_t total);
  // bso serve: one event, with the batch size it concerns (0: none).
  void trial(TrialEvent event, int batch_size);

  [[nodiscard]] const Labels& labels() const { return labels_; }

 private:
  [[nodiscard]] Labels with(const char* name, const std::string& value) const;

  MetricsRegistry& registry_;
  Labels labels_;
};

// The gpucap_* names a run with windows exports (tests check that every one is scraped).
[[nodiscard]] const std::vector<std::string>& window_metric_names();

}  // namespace gpucap::monitor
