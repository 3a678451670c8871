#pragma once
// The Runner: one power-capped inference job on a platform under a controller.
// Each step: apply knobs → run a batch → when the controller's window is due, summarise the
// power samples, build an Observation, ask the controller, append a trace row.

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "gpucap/control/controller.hpp"
#include "gpucap/core/cap_schedule.hpp"
#include "gpucap/core/cap_timeline.hpp"
#include "gpucap/runtime/platform.hpp"

namespace gpucap::runtime {

// A power sample and the cap in force when it was taken.
using PowerSampleSink = std::function<void(const PowerSample& sample, double cap_w)>;

// Bounds that keep a run finite in time and memory.
inline constexpr long long kMaxRunImages = 100'000'000;
inline constexpr double kMaxRunDurationS = 1e6;

// A job ends after `images` images or `duration_s` seconds, whichever comes first (it stops at
// the first batch boundary after the duration); 0 means no limit of that kind, at least one must
// be set. check_run_limits() enforces that and the bounds above with Error(usage).
struct RunConfig {
  long long images = 0;
  double duration_s = 0.0;
  CapSchedule schedule = CapSchedule::constant(1.0);
  // When set, the cap in force comes from here (a cluster's allocation, changed while the job
  // runs), not from `schedule` (which then only gives the cap to start with).
  std::shared_ptr<const CapTimeline> live_cap;
  // Set (by a signal handler) to end the run at the next batch boundary; the run's settings are
  // restored as at any end.
  const std::atomic<bool>* stop = nullptr;
  // After a batch that leaves the window without a power sample, wait this long before the next
  // one (0: never). The BatchDVFS harness slept 1 s before logging a step whose sample list was
  // still empty, which its short steps right after a decision often found.
  double wait_without_sample_s = 0.0;
  // Called after each batch with the newest power sample and the cap in force when it was taken,
  // if the batch brought a new one: a live exporter shows the power as the sampler sees it, at its
  // own period, rather than once per window.
  PowerSampleSink on_power_sample;
};

// One row per window.
struct TraceRow {
  double time_s = 0.0;          // window end, from the start of the run
  double window_start_s = 0.0;
  double cap_w = 0.0;           // cap in force at the window end
  double window_max_w = 0.0;
  double window_mean_w = 0.0;
  std::size_t samples = 0;
  int batch_size = 0;           // batch size the controller had set for the window
  std::vector<TenantKnobs> tenants;  // the MPS partition of the window (one tenant at 100 % alone)
  double sm_clock_mhz = 0.0;    // clock the GPU actually ran at (end of window)
  double memory_clock_mhz = 0.0;
  double throughput_img_s = 0.0;
  long long images = 0;         // images finished in the window
  bool over_cap = false;        // some sample exceeded the cap in force when it was taken
  // Some sample fell in a cap transition: from a change of the cap until the power reading shows
  // the controller's first answer to it (its next decision plus the sensor's averaging time).
  bool cap_transition = false;
};

struct RunSummary {
  bool simulated = true;
  long long images = 0;
  double duration_s = 0.0;
  double throughput_img_s = 0.0;
  double energy_j = 0.0;
  double images_per_joule = 0.0;
  int windows = 0;
  int windows_over_cap = 0;
  double over_cap_windows_pct = 0.0;
  double time_over_cap_s = 0.0;   // samples above the cap × sampling period
  double mean_power_w = 0.0;      // energy / duration
  double max_power_w = 0.0;       // highest sample
  int device_writes = 0;
  bool stopped = false;           // ended early by RunConfig::stop
};

using TraceSink = std::function<void(const TraceRow&)>;

void check_run_limits(long long images, double duration_s);

// Runs the job to the last image. Throws Error(unsupported) before touching the device if the
// controller needs a control the device cannot write. Every control written is restored.
RunSummary run_job(Platform& platform, control::Controller& controller, const RunConfig& config,
                   const TraceSink& sink = {});

// Trace CSV: header and rows (the `platform` column says sim or real).
[[nodiscard]] std::string trace_csv_header();
[[nodiscard]] std::string trace_csv_row(const TraceRow& row, bool simulated);

}  // namespace gpucap::runtime
