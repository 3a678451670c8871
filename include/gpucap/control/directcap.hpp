#pragma once
// directcap — PctoDL's power-limit baseline (seed-systems.md §2.10): the greedy partitioner picks
// the MPS tenants and batch sizes for the cap, the board power limit is set to the cap (clamped
// to the board's range), the SM clock is left to the GPU's boost governor and the memory clock
// is locked to the highest. When the mean power exceeds 1.02·cap for 5 windows in a row, the
// memory clock steps one supported clock down. On a cap change the partition is planned again
// at once (upstream re-runs greedy synchronously). Upstream's memory-clock exploration after a
// streak (5 windows per clock in [5001, m]) is left out: on the twin a lower memory clock never
// raised throughput, and it costs 5 windows per clock.

#include <memory>

#include "gpucap/control/controller.hpp"
#include "gpucap/control/mps_plan.hpp"

namespace gpucap::control {

struct DirectcapParams {
  DecisionPeriod period = DecisionPeriod::every_seconds(5.0);
  std::shared_ptr<const MpsPlanning> planning;
  double power_limit_min_w = 0.0;
  double power_limit_max_w = 1e9;
  double over_factor = 1.02;
  int over_streak = 5;
};

class DirectcapController final : public Controller {
 public:
  // Throws Error(usage) without a planning.
  explicit DirectcapController(DirectcapParams params);
  [[nodiscard]] std::string_view name() const override { return "directcap"; }
  [[nodiscard]] DecisionPeriod period() const override { return params_.period; }
  [[nodiscard]] Requirements requirements() const override {
    return {.memory_clock = params_.planning->chooses_memory_clock(), .power_limit = true};
  }
  [[nodiscard]] Knobs initial_knobs(double cap_w) const override;
  [[nodiscard]] Knobs decide(const Observation& observation) override;
  [[nodiscard]] std::string describe_state() const override;
  // An outside controller that sets the cap sets the board limit at the same moment.
  [[nodiscard]] bool reacts_to_cap_changes() const override { return true; }

 private:
  [[nodiscard]] Knobs knobs() const;
  void replan(double cap_w);
  DirectcapParams params_;
  PartitionPlan plan_;
  double cap_w_ = 0.0;
  double memory_clock_mhz_ = 0.0;
  int streak_ = 0;
};

}  // namespace gpucap::control
