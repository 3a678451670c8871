#include "gpucap/control/pctodl.hpp"

#include <fmt/format.h>

#include "gpucap/core/error.hpp"
#include "gpucap/core/clocks.hpp"

namespace gpucap::control {

PctodlController::PctodlController(PctodlParams params) : params_(std::move(params)) {
  if (!params_.planning) throw usage_error("pctodl needs a partition planner (a predictor for this GPU and model)");
}

Knobs PctodlController::initial_knobs(double cap_w) const {
  const auto plan = plan_or_smallest(*params_.planning, cap_w);
  Knobs k;
  k.tenants = plan.tenants;
  k.sm_clock_mhz = plan.sm_clock_mhz;
  k.mem_clock_mhz = plan.memory_clock_mhz;
  return k;
}

Knobs PctodlController::knobs() const {
  Knobs k;
  k.tenants = current_.tenants;
  k.sm_clock_mhz = current_.sm_clock_mhz;
  k.mem_clock_mhz = current_.memory_clock_mhz;
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
  return knobs();
}

std::string PctodlController::describe_state() const {
  return fmt::format("tenants=[{}] sm={:g}MHz mem={:g}MHz planned_for={:g}W{}", describe(current_.tenants),
                     current_.sm_clock_mhz, current_.memory_clock_mhz, planned_cap_w_,
                     pending_ ? " (new plan pending)" : "");
}

}  // namespace gpucap::control
