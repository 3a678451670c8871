#pragma once
// What the multi-tenant controllers (pctodl, directcap) plan with: a partitioner that, for a cap,
// returns MPS tenants and clocks (PctoDL's greedy search on a predictor, tune/partition.hpp), and
// the predictor's power model of a partition at an SM clock (for PctoDL's thermodynamic DVFS
// controller). Both are pure functions; the runtime builds them (runtime/mps_planning.hpp).

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "gpucap/control/thermo.hpp"
#include "gpucap/core/knobs.hpp"
#include "gpucap/tune/partition.hpp"

namespace gpucap::control {

struct PartitionPlan {
  std::vector<TenantKnobs> tenants;
  double sm_clock_mhz = 0.0;
  double memory_clock_mhz = 0.0;
  double predicted_img_s = 0.0;
  double predicted_w = 0.0;
};

struct MpsPlanning {
  std::string predictor;  // what predicts, for reports ("PctoDL fits imagenet_mem5001", ...)
  // nullopt: nothing fits under the cap (not even one tenant at the lowest clock).
  std::function<std::optional<PartitionPlan>(double cap_w)> plan;
  // Predicted window-max power and total throughput of tenants at an SM clock and a memory clock.
  std::function<double(const std::vector<TenantKnobs>& tenants, double sm_clock_mhz, double memory_clock_mhz)>
      power_w;
  std::function<double(const std::vector<TenantKnobs>& tenants, double sm_clock_mhz, double memory_clock_mhz)>
      throughput_img_s;
  // The thermodynamic controller's parameters (the predictor's power model at a memory clock, and
  // PctoDL's constants).
  std::function<ThermoParams(double memory_clock_mhz)> thermo;
  std::vector<double> sm_clocks_mhz;     // supported, ascending
  std::vector<double> memory_clocks_mhz; // supported, ascending
  // Whether there is a memory clock to choose (and so to lock): a GPU with one has no lock for it.
  [[nodiscard]] bool chooses_memory_clock() const { return memory_clocks_mhz.size() > 1; }
  int mps_step_pct = 5;
  int max_batch = 256;                   // the planner's largest batch (PctoDL: 160 for vgg19)
};

// The plan for a cap, or — when nothing is predicted to fit — the smallest partition (one tenant
// at one MPS step, the smallest batch) at the lowest clocks, so a run still starts and the
// feedback can bring power down.
[[nodiscard]] PartitionPlan plan_or_smallest(const MpsPlanning& planning, double cap_w);

[[nodiscard]] std::string describe(const std::vector<TenantKnobs>& tenants);

// Between the controllers' tenants and the partitioners' (whole-percent shares).
[[nodiscard]] std::vector<tune::Tenant> to_tenants(const std::vector<TenantKnobs>& knobs);
[[nodiscard]] std::vector<TenantKnobs> to_tenant_knobs(const std::vector<tune::Tenant>& tenants);

}  // namespace gpucap::control
