#pragma once
// pctodl — PctoDL's online algorithm (seed-systems.md §2.10): several tenants on one GPU under
// NVIDIA MPS. The greedy partitioner picks the tenants (MPS share, batch) and the clocks for the
// cap; every 5-s iteration (upstream: 2 s warm-up + 3 s measurement) the thermodynamic DVFS
// controller moves the SM clock from the window's maximum power (feed-forward on a new cap,
// damped Newton step, 15-MHz notches), then FreqGuard steps one clock down when power exceeds
// the cap and the clock did not move; the clock snaps to a supported one. When the cap changes,
// the partitioner runs again asynchronously: the thermo controller already chases the new cap
// with the old partition, and the new plan takes over at the next iteration (upstream: "applied
// at the start of a later iteration"). The shadow optimizer (§2.9, tune/shadow.hpp) is an option,
// off by default as in upstream's benchmarks.

#include <memory>
#include <optional>

#include "gpucap/control/controller.hpp"
#include "gpucap/control/mps_plan.hpp"
#include "gpucap/tune/shadow.hpp"

namespace gpucap::control {

struct PctodlParams {
  DecisionPeriod period = DecisionPeriod::every_seconds(5.0);
  std::shared_ptr<const MpsPlanning> planning;
  // The shadow optimizer (§2.9; off in upstream's benchmarks): called every `shadow_interval`
  // iterations when the window's mean power is under the cap, it may change shares and batches.
  bool shadow = false;
  int shadow_interval = 3;
};

class PctodlController final : public Controller {
 public:
  // Throws Error(usage) without a planning.
  explicit PctodlController(PctodlParams params);
  [[nodiscard]] std::string_view name() const override { return "pctodl"; }
  [[nodiscard]] DecisionPeriod period() const override { return params_.period; }
  [[nodiscard]] Requirements requirements() const override {
    return {.sm_clock = true, .memory_clock = params_.planning->chooses_memory_clock()};
  }
  [[nodiscard]] Knobs initial_knobs(double cap_w) const override;
  [[nodiscard]] Knobs decide(const Observation& observation) override;
  [[nodiscard]] std::string describe_state() const override;

 private:
  [[nodiscard]] Knobs knobs() const;
  PctodlParams params_;
  PartitionPlan current_;
  double planned_cap_w_ = 0.0;
  std::optional<PartitionPlan> pending_;  // re-planned for a new cap, applied at the next iteration
  ThermoState thermo_;
  bool started_ = false;
  // The shadow optimizer's state (when on).
  void run_shadow(const Observation& observation);
  std::optional<tune::ShadowOptimizer> shadow_;
  int iterations_ = 0;
  bool restarted_ = false;  // the partition changed: the next window holds the workers' restart
};

}  // namespace gpucap::control
