#pragma once
// capfit — gpucap's own controller (docs/algorithms.md). It starts from a profile of the model on
// the GPU (a predictor of throughput and window-max power at every batch size × SM clock × memory
// clock) and corrects it online from its own windows: each window's measurement replaces the
// prediction at the configuration it ran, and the ratio measured/predicted there rescales the
// predictions everywhere else. Every window it moves to the configuration with the highest
// predicted throughput whose predicted window maximum, plus a margin sized from how much window
// maxima have been seen to scatter, stays under the cap. A window over the cap widens the margin;
// windows under it narrow it again. A cap change ends the window at once, and the next
// configuration comes straight from the corrected predictor — no search.

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gpucap/control/controller.hpp"
#include "gpucap/predict/profile_model.hpp"

namespace gpucap::control {

struct CapfitParams {
  DecisionPeriod period = DecisionPeriod::every_seconds(3.0);
  std::shared_ptr<const predict::ProfileModel> profile;
  std::vector<int> batch_sizes;          // empty: every batch size the profile covers
  double spread_sigmas = 3.0;            // standard deviations of the window maximum kept below the cap
  double min_margin = 0.005;             // the least headroom kept below the cap (fraction of the cap)
  double prior_spread = 0.005;           // relative std of window maxima assumed before any are repeated
  double prior_profile_error = 0.01;     // relative error of a corrected profile prediction assumed at first
  double overshoot_margin = 0.01;        // headroom added after a window over the cap (fraction of the cap)
  double margin_decay = 0.002;           // headroom given back per window under the cap
  double learning_rate = 0.5;            // weight of the newest window in the correction ratios
  // false: the clocks stay with the GPU and only the batch size moves; the profile must then have
  // one (SM clock, memory clock) column, taken at the GPU's own clocks.
  bool lock_clocks = true;
};

// One configuration the controller can choose, with the profile's prediction for it.
struct CapfitCandidate {
  int batch_size = 1;
  double sm_clock_mhz = 0.0;
  std::optional<double> memory_clock_mhz;
  predict::ProfilePrediction profile;
};

// What the windows at one configuration measured (running means over the last few windows).
struct CapfitPointStats {
  int windows = 0;
  double max_power_w = 0.0;
  double throughput_img_s = 0.0;
};

class CapfitController final : public Controller {
 public:
  // Throws Error(usage) without a profile or when no batch size of the set lies in the profile.
  explicit CapfitController(CapfitParams params);
  [[nodiscard]] std::string_view name() const override { return "capfit"; }
  [[nodiscard]] DecisionPeriod period() const override { return params_.period; }
  [[nodiscard]] Requirements requirements() const override;
  [[nodiscard]] Knobs initial_knobs(double cap_w) const override;
  [[nodiscard]] Knobs decide(const Observation& observation) override;
  [[nodiscard]] std::string describe_state() const override;
  [[nodiscard]] bool reacts_to_cap_changes() const override { return true; }

  [[nodiscard]] const std::vector<CapfitCandidate>& candidates() const { return candidates_; }
  // The predicted throughput and window maximum of candidate i, corrected by what was measured.
  [[nodiscard]] predict::ProfilePrediction predicted(std::size_t i) const;
  // The highest predicted window maximum allowed under `cap_w`, margins included; a configuration
  // not yet measured keeps a wider margin, for the profile's own error.
  [[nodiscard]] double power_budget_w(double cap_w, bool measured) const;

 private:
  [[nodiscard]] std::size_t choose(double cap_w) const;
  [[nodiscard]] Knobs knobs(std::size_t i) const;
  // The candidate the knobs of a window describe (the window's own configuration).
  [[nodiscard]] std::optional<std::size_t> candidate_of(const Knobs& knobs) const;
  void learn(std::size_t ran, const Observation& observation);

  CapfitParams params_;
  std::vector<CapfitCandidate> candidates_;
  std::vector<CapfitPointStats> measured_;
  std::vector<std::size_t> visited_;  // candidates with at least one window, in the order first measured
  std::size_t current_ = 0;
  double power_ratio_ = 1.0;       // measured / profile window maximum, smoothed
  double throughput_ratio_ = 1.0;  // measured / profile throughput, smoothed
  double extra_margin_ = 0.0;      // headroom added by windows over the cap, as a fraction of the cap
  double spread_sum_sq_ = 0.0;     // squared relative deviations of repeated window maxima
  int spread_count_ = 0;
  double error_sum_sq_ = 0.0;      // squared relative errors of predictions at first measurement
  int error_count_ = 0;
  double last_cap_w_ = 0.0;
};

}  // namespace gpucap::control
