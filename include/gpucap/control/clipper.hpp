#pragma once
// Clipper-style AIMD batching driven by power instead of a latency SLO (BatchDVFS repository's
// Clipper baseline, seed-systems.md §1.5): every 3 s, below alpha·cap the batch index grows by 4,
// above the cap it shrinks to floor(0.9·index). No DVFS: clocks stay with the GPU's governor.
// Upstream's guard `idx == 255` let the index step past the batch list (0, 4, …, 252, 256 →
// crash); here the index is clamped to the last batch size.

#include <vector>

#include "gpucap/control/controller.hpp"

namespace gpucap::control {

struct ClipperParams {
  double alpha = 0.8;
  DecisionPeriod period = DecisionPeriod::every_seconds(3.0);
  std::vector<int> batch_sizes;  // default: 1..256
  int additive_step = 4;
  double multiplicative_factor = 0.9;
  int start_index = 0;

  ClipperParams();
};

struct ClipperState {
  int index = 0;
  bool operator==(const ClipperState&) const = default;
};

[[nodiscard]] ClipperState clipper_initial(const ClipperParams& params);
[[nodiscard]] ClipperState clipper_step(const ClipperParams& params, const ClipperState& state, double window_max_w,
                                        double cap_w);

class ClipperController final : public Controller {
 public:
  explicit ClipperController(ClipperParams params);
  [[nodiscard]] std::string_view name() const override { return "clipper"; }
  [[nodiscard]] DecisionPeriod period() const override { return params_.period; }
  [[nodiscard]] Requirements requirements() const override { return {}; }
  [[nodiscard]] Knobs initial_knobs(double cap_w) const override;
  [[nodiscard]] Knobs decide(const Observation& observation) override;
  [[nodiscard]] std::string describe_state() const override;

 private:
  [[nodiscard]] Knobs knobs() const;
  ClipperParams params_;
  ClipperState state_;
};

}  // namespace gpucap::control
