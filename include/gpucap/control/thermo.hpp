#pragma once
// PctoDL's "thermodynamic" DVFS controller (seed-systems.md §2.8) and FreqGuard: the SM clock for
// the next iteration of a multi-tenant partition under a power cap, from the measured window-max
// power and the power model of the predictor. Pure functions of their inputs and a small state,
// like every controller here; the pctodl algorithm (issue 6) drives them.
//
// Each step: when the cap is new (or on the first call) jump to the feed-forward clock — where the
// power model says the cap is reached; else, more than 7 W from the cap, a damped Newton step on
// the model's slope (at most 300 MHz, at least 15); else one 15-MHz notch toward the cap. No
// integral action (upstream's docstring promises one; the code has none).

#include <functional>
#include <optional>
#include <vector>

namespace gpucap::control {

struct ThermoParams {
  double f_min_mhz = 210.0;
  double f_max_mhz = 1950.0;   // the power model's f_ref (1950 on the 3080 Ti, 1410 on the A100)
  double eta = 0.8;            // damping of the Newton step
  double max_step_mhz = 300.0;
  double min_step_mhz = 15.0;
  double proximity_w = 7.0;    // closer than this: one notch at a time
  // The power model: P(f) = δ3 f³ + δ2 f² + δ1 f + δ0 + P_base + (P_dyn_ref − P_base)·x^γp,
  // x = (f − f_min)/(f_ref − f_min) clipped to [0, 1].
  double delta3 = 0.0, delta2 = 0.0, delta1 = 0.0, delta0 = 0.0;
  double gamma_p = 1.0;
  double p_base_w = 0.0;
};

struct ThermoState {
  std::optional<double> last_cap_w;  // the cap of the previous step (none before the first)
};

// The predicted total power of the current partition at an SM clock (the predictor's P̂).
using PowerAtClock = std::function<double(double sm_clock_mhz)>;

// The next SM clock, in [f_min, f_max] (not snapped to a supported clock).
[[nodiscard]] double thermo_step(const ThermoParams& params, ThermoState& state, double cap_w, double measured_max_w,
                                 double current_mhz, const PowerAtClock& predicted_power_w);

// FreqGuard (PctoDL main.py): over the cap and the controller left the clock where it was — one
// supported clock down. `supported_mhz` in any order; `next_mhz` is returned unchanged otherwise.
[[nodiscard]] double freq_guard(double next_mhz, double current_mhz, double measured_max_w, double cap_w,
                                const std::vector<double>& supported_mhz);

}  // namespace gpucap::control
