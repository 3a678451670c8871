#include "gpucap/control/thermo.hpp"

#include <algorithm>
#include <cmath>

namespace gpucap::control {

namespace {

constexpr double kTinySlope = 1e-6;

double static_power_w(const ThermoParams& p, double f) {
  return ((p.delta3 * f + p.delta2) * f + p.delta1) * f + p.delta0;
}

// dP/df of the power model at f (floored, so a flat model cannot divide by zero).
double slope_w_per_mhz(const ThermoParams& p, double f, double p_dyn_ref_w) {
  const double span = p.f_max_mhz - p.f_min_mhz;
  const double static_slope = p.delta1 + 2.0 * p.delta2 * f + 3.0 * p.delta3 * f * f;
  const double x = std::max(f - p.f_min_mhz, 0.0);
  const double dynamic_slope =
      p.gamma_p * (p_dyn_ref_w - p.p_base_w) * std::pow(x, p.gamma_p - 1.0) / std::pow(span, p.gamma_p);
  return std::max(static_slope + dynamic_slope, kTinySlope);
}

}  // namespace

double thermo_step(const ThermoParams& params, ThermoState& state, double cap_w, double measured_max_w,
                   double current_mhz, const PowerAtClock& predicted_power_w) {
  const double f_min = params.f_min_mhz, f_ref = params.f_max_mhz;
  const double error_w = cap_w - measured_max_w;
  const double p_lo = predicted_power_w(f_min);
  const double p_hi = predicted_power_w(f_ref);
  double feed_forward = f_min;
  if (cap_w >= p_hi) {
    feed_forward = f_ref;
  } else if (cap_w > p_lo) {
    feed_forward = f_min + (f_ref - f_min) * std::pow((cap_w - p_lo) / (p_hi - p_lo), 1.0 / params.gamma_p);
  }
  const double p_dyn_ref = std::max(p_hi - static_power_w(params, f_ref), 1e-6);
  const double newton = params.eta * error_w / slope_w_per_mhz(params, current_mhz, p_dyn_ref);

  double next = current_mhz;
  if (!state.last_cap_w || *state.last_cap_w != cap_w) {
    next = feed_forward;  // stage 1: a new cap
  } else if (std::abs(error_w) > params.proximity_w) {
    double step = std::clamp(newton, -params.max_step_mhz, params.max_step_mhz);  // stage 2
    if (std::abs(step) < params.min_step_mhz) step = std::copysign(params.min_step_mhz, step);
    next = current_mhz + step;
  } else {
    // stage 3: one notch toward the cap (none when exactly on it)
    next = current_mhz + (error_w > 0.0 ? params.min_step_mhz : error_w < 0.0 ? -params.min_step_mhz : 0.0);
  }
  state.last_cap_w = cap_w;
  return std::clamp(next, f_min, params.f_max_mhz);
}

double freq_guard(double next_mhz, double current_mhz, double measured_max_w, double cap_w,
                  const std::vector<double>& supported_mhz) {
  if (!(measured_max_w > cap_w) || next_mhz != current_mhz) return next_mhz;
  std::optional<double> below;
  for (const double c : supported_mhz) {
    if (c < current_mhz && (!below || c > *below)) below = c;
  }
  return below.value_or(current_mhz);
}

}  // namespace gpucap::control
