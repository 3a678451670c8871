#include "gpucap/control/pctodl.hpp"

#include <fmt/format.h>

#include "gpucap/core/error.hpp"
#include "gpucap/core/clocks.hpp"

namespace gpucap::control {

PctodlController::PctodlController(PctodlParams params) : params_(std::move(params)) {
  if (!params_.planning) throw usage_error("pctodl needs a partition planner (a predictor for this GPU and model)");
  if (params_.shadow) {
    if (params_.shadow_interval < 1) throw usage_error("pctodl: the shadow optimizer's interval must be >= 1");
    tune::ShadowParams shadow;
    shadow.mps_step_pct = params_.planning->mps_step_pct;
    shadow.max_batch = params_.planning->max_batch;
    const auto planning = params_.planning;
    shadow_.emplace(shadow, [planning](const std::vector<tune::Tenant>& tenants, double f, double m) {
      const auto knobs = to_tenant_knobs(tenants);
      return tune::PartitionPrediction{planning->throughput_img_s(knobs, f, m), planning->power_w(knobs, f, m)};
    });
  }
}

void PctodlController::run_shadow(const Observation& observation) {
  const auto& window = observation.knobs;
  const bool restart_window = restarted_;
  restarted_ = false;
  if (window.tenants != current_.tenants || !window.sm_clock_mhz) return;
  // A GPU with one memory clock runs at it unlocked.
  const tune::ShadowPoint point{to_tenants(window.tenants), *window.sm_clock_mhz,
                                window.mem_clock_mhz.value_or(current_.memory_clock_mhz)};
  // The window after a partition change holds the workers' restart: not what the partition does.
  if (!restart_window) shadow_->update(point, observation.throughput_img_s, observation.power.max_w);
  if (++iterations_ % params_.shadow_interval != 0 || pending_ || observation.power.mean_w > observation.cap_w) return;
  if (const auto proposal = shadow_->propose(point, observation.throughput_img_s, observation.cap_w)) {
    current_.tenants = to_tenant_knobs(proposal->tenants);
    restarted_ = true;
  }
}

Knobs PctodlController::initial_knobs(double cap_w) const {
  const auto plan = plan_or_smallest(*params_.planning, cap_w);
  Knobs k;
  k.tenants = plan.tenants;
  k.sm_clock_mhz = plan.sm_clock_mhz;
  if (params_.planning->chooses_memory_clock()) k.mem_clock_mhz = plan.memory_clock_mhz;
  return k;
}

Knobs PctodlController::knobs() const {
  Knobs k;
  k.tenants = current_.tenants;
  k.sm_clock_mhz = current_.sm_clock_mhz;
  if (params_.planning->chooses_memory_clock()) k.mem_clock_mhz = current_.memory_clock_mhz;
  return k;
}

Knobs PctodlController::decide(const Observation& observation) {
  const auto& planning = *params_.planning;
  const double cap_w = observation.cap_w;
  if (!started_) {
    // The plan initial_knobs returned (a pure function of the first cap).
    current_ = plan_or_smallest(planning, cap_w);
    planned_cap_w_ = cap_w;
    started_ = true;
  }
  if (pending_) {
    // The asynchronous re-plan for the new cap is ready at the start of this iteration.
    restarted_ = restarted_ || current_.tenants != pending_->tenants;
    current_ = *pending_;
    pending_.reset();
    return knobs();
  }
  if (cap_w != planned_cap_w_) {
    pending_ = plan_or_smallest(planning, cap_w);
    planned_cap_w_ = cap_w;
  }
  const double measured_w = observation.power.max_w;
  const double f = current_.sm_clock_mhz;
  const auto power_at = [&](double sm_mhz) { return planning.power_w(current_.tenants, sm_mhz, current_.memory_clock_mhz); };
  const double next = thermo_step(planning.thermo(current_.memory_clock_mhz), thermo_, cap_w, measured_w, f, power_at);
  const double snapped = nearest_clock_mhz(planning.sm_clocks_mhz, next);
  current_.sm_clock_mhz = freq_guard(snapped, f, measured_w, cap_w, planning.sm_clocks_mhz);
  if (shadow_) run_shadow(observation);
  return knobs();
}

std::string PctodlController::describe_state() const {
  return fmt::format("tenants=[{}] sm={:g}MHz mem={:g}MHz planned_for={:g}W{}{}", describe(current_.tenants),
                     current_.sm_clock_mhz, current_.memory_clock_mhz, planned_cap_w_,
                     pending_ ? " (new plan pending)" : "",
                     shadow_ ? fmt::format(" shadow_updates={} threshold={:.4f}", shadow_->updates(), shadow_->threshold())
                             : std::string());
}

}  // namespace gpucap::control
