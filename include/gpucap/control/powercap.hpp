#pragma once
// powercap — the operator's baseline: the board power limit set to the cap (`nvidia-smi -pl`,
// PctoDL's directcap, seed-systems.md §2.10), a fixed batch size, and the SM clock left to the
// GPU's boost governor, which the firmware slows until its averaged power fits the limit. Caps
// below the board's lowest settable limit are clamped to it, as upstream does. The firmware
// averages power, so the samples the seeds judge (window maxima) can still exceed the cap.

#include "gpucap/control/controller.hpp"

namespace gpucap::control {

struct PowercapParams {
  DecisionPeriod period = DecisionPeriod::every_seconds(3.0);
  int batch_size = 256;
  double power_limit_min_w = 0.0;  // the board's settable range
  double power_limit_max_w = 1e9;
};

class PowercapController final : public Controller {
 public:
  explicit PowercapController(PowercapParams params) : params_(params) {}
  [[nodiscard]] std::string_view name() const override { return "powercap"; }
  [[nodiscard]] DecisionPeriod period() const override { return params_.period; }
  [[nodiscard]] Requirements requirements() const override { return {.power_limit = true}; }
  [[nodiscard]] Knobs initial_knobs(double cap_w) const override;
  [[nodiscard]] Knobs decide(const Observation& observation) override;
  [[nodiscard]] std::string describe_state() const override;
  // An outside controller that sets the cap sets the board limit at the same moment.
  [[nodiscard]] bool reacts_to_cap_changes() const override { return true; }

 private:
  [[nodiscard]] Knobs knobs(double cap_w) const;
  PowercapParams params_;
  double limit_w_ = 0.0;
};

}  // namespace gpucap::control
