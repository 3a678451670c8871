#pragma once
// capshare: gpucap's controller for SwitchFlow-style sharing under a power cap (beyond the paper).
// A latency-critical inference job (the one with slo_ms=) keeps its latency objective; a training
// job in the background gets the power that is left. The controller picks the shared GPU's SM
// clock and the background job's batch size, and it lets the background launch only a couple of
// kernels ahead (so a preemption drains a kernel or two, not a queue) and resume a preempted
// step rather than redo it (ShareScenario::resume_preempted). It re-decides when a job arrives or ends, when the cap changes and after every power
// window; a window over the cap raises its power margin, quiet windows lower it again.
//
// Pure: it predicts with a table built once from the step model (the twin, or profiles measured
// on a real GPU) and sees only ShareObservations.

#include <optional>
#include <string>
#include <vector>

#include "gpucap/sched/simulator.hpp"

namespace gpucap::sched {

// Predictions at one GPU clock.
struct CapShareForeground {
  double clock_mhz = 0.0;
  double latency_s = 0.0;     // one request alone: host stage + kernels
  double gpu_s = 0.0;         // its device stage: it holds the GPU this long (launches and kernels)
  double busy_s = 0.0;        // of which its kernels run (the GPU draws busy power only then)
  double busy_power_w = 0.0;  // while they run
};

struct CapShareBackground {
  double clock_mhz = 0.0;
  int batch_size = 0;
  double host_s = 0.0;
  double gpu_s = 0.0;          // one step's device stage (launches and kernels), in its launch window
  double busy_s = 0.0;         // of which its kernels run
  // What a preemption waits for, at the 99th percentile, with the background's launch window of
  // kCapShareBackgroundWindow (drain_quantile_s).
  double drain_p99_s = 0.0;
  double busy_power_w = 0.0;
};

struct CapShareTable {
  std::string foreground;      // job names
  std::string background;
  double foreground_rate_per_s = 0.0;
  double slo_s = 0.0;
  double idle_power_w = 0.0;
  std::vector<CapShareForeground> fg;  // one per clock level
  std::vector<CapShareBackground> bg;  // one per clock level × batch size
};

// The table for the scenario's foreground (the inference job with slo_ms= and rate=) and
// background (the lowest-priority training job) on its GPU, at every clock level and at the
// background's batch size halved down to `min_batch`. Error(usage) when the scenario has no
// such pair or the GPU no clock levels.
[[nodiscard]] CapShareTable build_cap_share_table(const ShareScenario& scenario, const StepModel& model, int min_batch = 4);

// The launch window the background gets.
inline constexpr int kCapShareBackgroundWindow = 2;

// The drain a request arriving at a random moment of a step of `kernels_s` (run back to back,
// `window` of them launched at a time) waits for, at `quantile` (0..1): the residual of the kernel
// in flight (hit in proportion to its length, a uniform part of it left) plus the window − 1
// kernels launched behind it.
[[nodiscard]] double drain_quantile_s(const std::vector<double>& kernels_s, int window, double quantile);

class CapShareController final : public ShareController {
 public:
  explicit CapShareController(CapShareTable table) : table_(std::move(table)) {}
  [[nodiscard]] ShareKnobs decide(const ShareObservation& observation) override;

  struct Choice {
    double clock_mhz = 0.0;
    int batch_size = 0;
    double background_items_s = 0.0;  // predicted
    double mean_power_w = 0.0;        // predicted
  };
  // The best (clock, batch) for a cap, whether the foreground is live, and a power margin
  // (fraction of the cap kept free); nullopt when nothing fits (then the lowest clock and batch).
  // A new batch size only applies from the background's next step: the clock must also suit the
  // batch it is running now (`running_batch`), until the next decision.
  [[nodiscard]] std::optional<Choice> best(double cap_w, bool foreground_live, double margin, int running_batch = 0) const;

 private:
  CapShareTable table_;
  double margin_ = 0.03;
};

}  // namespace gpucap::sched
