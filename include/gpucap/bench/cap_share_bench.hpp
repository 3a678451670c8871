#pragma once
// Beyond SwitchFlow: a latency-critical inference and a training job sharing one GPU under a
// power cap that steps down mid-run (issue 14, item 6), on the share twin. gpucap's capshare
// against threads, SwitchFlow as published (a preempted step is redone), SwitchFlow with gpucap's
// resume, the best static configuration (one clock and batch size for the whole run) that meets
// both the SLO and the cap, found by trying every clock level and four batch sizes, and a
// two-phase oracle (one setting per cap segment, the step known in advance).

#include <string>
#include <vector>

#include "gpucap/sim/share_twin.hpp"

namespace gpucap::bench {

struct CapShareRow {
  std::string name;
  std::string configuration;       // clock, batch, window; "controller" for capshare
  double slo_attainment = 0.0;     // share of the SLO job's requests on time
  double foreground_p99_ms = 0.0;
  double background_items_s = 0.0;
  int windows = 0;
  int windows_over_cap = 0;
  int windows_over_cap_outside_steps = 0;
  bool meets = false;              // SLO ≥ 99 % and no window over the cap outside a cap step
};

struct CapShareReport {
  std::string scenario;            // the jobs and the cap, as gpucap share flags
  // threads, switchflow, switchflow --resume, capshare, then the best static setting and the
  // two-phase oracle when one meets both the SLO and the cap
  std::vector<CapShareRow> rows;
  double cap_step_s = 0.0;         // when the cap steps (the two-phase oracle's switch)
  int static_configurations = 0;   // how many the search tried
  int two_phase_configurations = 0;
  double capshare_vs_best_static = 0.0;  // background throughput, 0 without a best static setting
  double capshare_vs_two_phase = 0.0;    // 0 without a two-phase oracle
};

// The case: RTX 2080 Ti, ResNet50 BS-1 inference (50 requests/s, SLO 20 ms, 60 s) beside
// VGG16 training, cap 160 W stepping to 130 W at 30 s, 0.1 s windows.
[[nodiscard]] CapShareReport run_cap_share_experiment(const sim::ShareTwin& twin);
[[nodiscard]] std::string to_markdown(const CapShareReport& report);

}  // namespace gpucap::bench
