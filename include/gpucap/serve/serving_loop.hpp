#pragma once
// The GPU side of serving: runs the batches the core launches on a platform's engine (the twin's,
// or LibTorch on a real GPU), measures the power, closes a window each controller period (or at
// once when the cap changes), asks the serving controller and applies its knobs — the batcher's
// through the core, the clock and power limit through a control session that restores the GPU at
// the end. The same loop runs in virtual time (the benchmark, serve/simulation.hpp) and behind
// the HTTP server in real time (the twin paced to the wall clock, or a real GPU). The caller
// serialises the calls, as for the core.

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "gpucap/control/serving.hpp"
#include "gpucap/core/window_stats.hpp"
#include "gpucap/runtime/platform.hpp"
#include "gpucap/serve/serving_core.hpp"

namespace gpucap::serve {

// The cap in force and where it came from ("flag", "schedule", "admin", "file", ...).
struct CapReading {
  double cap_w = 0.0;
  std::string source;
};
// The cap in force at a time from the start of serving (platform time).
using CapProvider = std::function<CapReading(double now_s)>;

// One closed window: what reports, traces, metrics and the dashboard show.
struct ServingWindow {
  double start_s = 0.0;  // from the start of serving
  double end_s = 0.0;
  double cap_w = 0.0;    // at the end
  std::string cap_source;
  WindowStats power;
  // The samples taken once the reading showed the window's clock and power limit: after the
  // controller changes them, a board sensor keeps showing the old ones for its averaging time.
  // Empty if the window was shorter than that.
  WindowStats settled_power;
  bool over_cap = false;        // some sample above the cap in force when it was taken
  bool cap_transition = false;  // some sample between a cap change and the reading of the answer to it
  WindowCounts counts;
  LatencySummary slo;           // the sliding SLO statistics at the end of the window
  control::ServingKnobs knobs;  // in force during the window
  double sm_clock_mhz = 0.0;    // the clock the GPU ran at (end of window); NaN if unknown
  std::size_t queued_requests = 0;
};

struct ServingTotals {
  int windows = 0;
  int windows_over_cap = 0;
  int windows_over_cap_outside_transitions = 0;
  double time_over_cap_s = 0.0;  // samples over the cap × sampling period
  double energy_j = 0.0;         // the samples integrated
  double max_power_w = 0.0;
  int device_writes = 0;
};

struct BatchRun {
  double start_s = 0.0;
  double end_s = 0.0;
  bool ok = true;
  std::string error;  // the engine's message when !ok
};

class ServingLoop {
 public:
  // Applies the controller's first knobs (checked against the device before anything is written:
  // Error(usage/unsupported)). The platform, controller and core must outlive the loop.
  ServingLoop(runtime::Platform& platform, control::ServingController& controller, ServingCore& core, CapProvider cap,
              double slo_s);
  ~ServingLoop();
  ServingLoop(const ServingLoop&) = delete;
  ServingLoop& operator=(const ServingLoop&) = delete;

  // Platform time since serving started.
  [[nodiscard]] double now_s() const;
  // Runs the batch on the engine and tells the core when it ended (execute, then completed). An
  // engine error fails the batch's requests (ok = false), it does not stop the loop.
  BatchRun run(const Launch& launch);
  // The two halves of run(), for a server that runs the batch without holding the lock that
  // guards the core: execute() touches only the platform's engine; completed() the core.
  BatchRun execute(const Launch& launch);
  // Times `compute` as a batch (an engine the caller drives with the requests' data, or nothing at
  // all): what execute() does with the platform's engine.
  BatchRun execute_with(const std::function<void()>& compute);
  void completed(const Launch& launch, const BatchRun& run);
  // Lets the GPU idle until t_s: the twin's virtual time moves there; a real GPU's passes by itself.
  void idle_until(double t_s);
  // Takes the power samples up to now and closes the window if it is due, or at once if the cap
  // changed (for a controller that reacts to it): the controller decides and its knobs apply.
  std::optional<ServingWindow> poll();
  // When the current window is due by time (infinity for a batch-counted period).
  [[nodiscard]] double window_due_s() const;
  // Told of the newest power sample (and the cap in force then) each time samples are taken: an
  // exporter shows the power as the sampler sees it. Set before serving starts.
  void on_power_sample(std::function<void(const PowerSample& sample, double cap_w)> sink) { on_sample_ = std::move(sink); }
  // Runs each call between batches that may block in the GPU's driver (a knob write, a clock read,
  // the restore at the end): a runtime that serves from many threads lets go of its lock around it
  // and watches it as it watches a batch (serve/serving_runtime.hpp). It may throw to end the
  // caller (the call was given up on). Unset: the call runs as it is.
  using DeviceCall = std::function<void(const std::function<void()>& call)>;
  void through_device_calls(DeviceCall device_call) { device_call_ = std::move(device_call); }
  // The cap as the loop last read it.
  [[nodiscard]] const CapReading& cap() const { return cap_; }
  // Closes the last, partial window (if it holds a sample) and puts every GPU setting back.
  std::optional<ServingWindow> finish();
  // Gives up on a batch that another thread still runs (a drain beside a hung batch): puts every
  // GPU setting back now, without collecting samples or closing the window; the totals keep the
  // windows closed so far. The batch may go on in execute()/execute_with() and now_s(); nothing
  // else may be called after.
  void abandon();
  [[nodiscard]] const ServingTotals& totals() const { return totals_; }

 private:
  void collect_samples();
  ServingWindow close_window(double now_s);
  void apply(const control::ServingKnobs& knobs);
  void device_call(const std::function<void()>& call);

  runtime::Platform& platform_;
  control::ServingController& controller_;
  ServingCore& core_;
  CapProvider cap_provider_;
  double slo_s_;
  std::unique_ptr<device::ControlSession> session_;
  double origin_s_ = 0.0;
  CapReading cap_;
  double window_start_s_ = 0.0;
  int window_batches_ = 0;
  WindowAccumulator window_power_;
  WindowAccumulator settled_power_;
  double settled_from_s_ = 0.0;  // platform time (absolute) from which the readings show the knobs
  bool window_over_cap_ = false;
  bool window_transition_ = false;
  double transition_end_s_ = -1.0;  // samples up to here are in a cap transition; +inf: still open
  double last_sample_cap_w_ = 0.0;
  double last_sample_s_ = 0.0;
  double last_sample_w_ = 0.0;
  bool finished_ = false;
  ServingTotals totals_;
  std::function<void(const PowerSample& sample, double cap_w)> on_sample_;
  DeviceCall device_call_;
};

}  // namespace gpucap::serve
