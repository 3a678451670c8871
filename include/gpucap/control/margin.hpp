#pragma once
// What capfit and mpsfit share: how they size the headroom they keep below the cap from the
// scatter of the window maxima they have measured.

#include <algorithm>
#include <cmath>

#include "gpucap/control/controller.hpp"

namespace gpucap::control {

// Running means weight the last few windows: the GPU drifts (temperature, other load), so a
// configuration's old measurements should fade.
inline constexpr int kMarginMemoryWindows = 8;
// A window over the cap adds headroom up to this fraction of the cap.
inline constexpr double kMaxExtraMargin = 0.2;

// Root mean square of relative errors, with the prior counted as two observations.
[[nodiscard]] inline double pooled_spread(double sum_sq, int count, double prior) {
  constexpr double kPriorWeight = 2.0;
  return std::sqrt((sum_sq + kPriorWeight * prior * prior) / (count + kPriorWeight));
}

// The highest window maximum allowed under `cap_w`: the cap less `sigmas` standard deviations of
// the window maximum's scatter and of the prediction's error together (at least `min_margin`),
// less the headroom added by windows over the cap. All as fractions of the cap.
[[nodiscard]] inline double power_budget_w(double cap_w, double window_spread, double prediction_spread,
                                           double sigmas, double min_margin, double extra_margin) {
  return cap_w * (1.0 - (std::max(min_margin, sigmas * std::hypot(window_spread, prediction_spread)) + extra_margin));
}

// A running mean over about the last kMarginMemoryWindows values; `count` includes `value`.
inline void update_running_mean(double& mean, double value, int count) {
  mean += (value - mean) / std::min(count, kMarginMemoryWindows);
}

// Whether a window is long enough to learn from: one much shorter than the period (cut by a cap
// change) has fewer samples, so its maximum understates a full window's.
[[nodiscard]] inline bool full_window(const Observation& observation, const DecisionPeriod& period) {
  constexpr double kShortestLearnedFraction = 0.5;
  if (period.batches > 0) return observation.batches >= kShortestLearnedFraction * period.batches;
  return observation.settled_power.duration_s() >= kShortestLearnedFraction * period.seconds;
}

// The headroom added by windows over the cap: `overshoot` more after one (up to
// kMaxExtraMargin), `decay` less after one under it (down to none).
[[nodiscard]] inline double next_extra_margin(double extra, bool over_cap, double overshoot, double decay) {
  return over_cap ? std::min(extra + overshoot, kMaxExtraMargin) : std::max(0.0, extra - decay);
}

}  // namespace gpucap::control
