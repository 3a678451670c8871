#pragma once
// mpsfit — gpucap's own multi-tenant controller (docs/algorithms.md). It plans an MPS partition
// (tenants' shares and batch sizes, memory clock) with gpucap's local-search partitioner on a
// predictor fitted to a profile of the model on this GPU (on the twin: PctoDL's profiling matrix,
// measured before the job, then `gpucap fit`'s predictor). Then, as capfit does for one process,
// it corrects the predictor from its own windows (the first window of a partition runs with a
// wider margin, as the prediction is not yet checked): the ratio of measured to predicted window
// maximum rescales the power predicted at every SM clock, and a clock already measured is judged
// by its measurement. Every window it runs the highest SM clock whose corrected window maximum,
// plus a margin sized from the scatter seen so far, stays under the cap; a window over the cap
// widens the margin, windows under it narrow it again. On a cap change it plans the partition
// again at once, for the cap the corrected predictor allows (a new partition restarts the MPS
// workers, so it is never changed between cap changes).

#include <map>
#include <memory>
#include <string>

#include "gpucap/control/controller.hpp"
#include "gpucap/control/mps_plan.hpp"

namespace gpucap::control {

struct MpsfitParams {
  DecisionPeriod period = DecisionPeriod::every_seconds(3.0);
  std::shared_ptr<const MpsPlanning> planning;
  double spread_sigmas = 3.0;          // standard deviations of the window maximum kept below the cap
  double min_margin = 0.005;           // the least headroom kept below the cap (fraction of the cap)
  double prior_spread = 0.005;         // relative std of window maxima assumed before any are repeated
  double prior_model_error = 0.01;     // relative error of a corrected prediction assumed at first
  double first_window_margin = 0.08;   // headroom for the first window of a partition (fraction of the cap)
  double overshoot_margin = 0.01;      // headroom added after a window over the cap (fraction of the cap)
  double margin_decay = 0.002;         // headroom given back per window under the cap
  double learning_rate = 0.5;          // weight of the newest window in the power ratio
};

// What the windows at one SM clock of the current partition measured.
struct MpsfitClockStats {
  int windows = 0;
  double max_power_w = 0.0;  // running mean of the window maxima
};

class MpsfitController final : public Controller {
 public:
  // Throws Error(usage) without a planning.
  explicit MpsfitController(MpsfitParams params);
  [[nodiscard]] std::string_view name() const override { return "mpsfit"; }
  [[nodiscard]] DecisionPeriod period() const override { return params_.period; }
  // The memory clock is locked only where the planner has several to choose from (an A100 or
  // H100 has one).
  [[nodiscard]] Requirements requirements() const override {
    return {.sm_clock = true, .memory_clock = chooses_memory_clock()};
  }
  [[nodiscard]] Knobs initial_knobs(double cap_w) const override;
  [[nodiscard]] Knobs decide(const Observation& observation) override;
  [[nodiscard]] std::string describe_state() const override;
  [[nodiscard]] bool reacts_to_cap_changes() const override { return true; }

  // The window maximum expected at an SM clock of the current partition: the measurement where
  // there is one, else the prediction times the measured/predicted ratio (interpolated between
  // the nearest measured clocks; before any, the ratio learnt on earlier partitions), and never
  // less than what a lower clock measured.
  [[nodiscard]] double expected_power_w(double sm_clock_mhz) const;
  // The highest window maximum allowed under `cap_w`, margins included; an SM clock not yet
  // measured keeps a wider margin, for the predictor's own error.
  [[nodiscard]] double power_budget_w(double cap_w, bool measured) const;
  [[nodiscard]] const PartitionPlan& plan() const { return plan_; }
  [[nodiscard]] double power_ratio() const { return power_ratio_; }

 private:
  [[nodiscard]] bool chooses_memory_clock() const { return params_.planning->chooses_memory_clock(); }
  void replan(double cap_w);
  [[nodiscard]] double choose_clock(double cap_w) const;
  [[nodiscard]] double predicted_w(double sm_clock_mhz) const;
  [[nodiscard]] double correction_at(double sm_clock_mhz) const;
  [[nodiscard]] Knobs knobs() const;
  [[nodiscard]] bool learnable(const Observation& observation) const;
  void learn(const Observation& observation);

  MpsfitParams params_;
  PartitionPlan plan_;
  double sm_clock_mhz_ = 0.0;
  std::map<double, MpsfitClockStats> measured_;  // by SM clock, for the current partition
  bool started_ = false;
  bool restart_in_window_ = false;  // the window under way began with new shares (a restart)
  double power_ratio_ = 1.0;       // measured / predicted window maximum, smoothed
  double extra_margin_ = 0.0;      // headroom added by windows over the cap, as a fraction of the cap
  double spread_sum_sq_ = 0.0;     // squared relative deviations of repeated window maxima
  int spread_count_ = 0;
  double error_sum_sq_ = 0.0;      // squared relative errors of corrected predictions at first measurement
  int error_count_ = 0;
  double last_cap_w_ = 0.0;
};

}  // namespace gpucap::control
