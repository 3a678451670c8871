#pragma once
// BatchSizer (Nabavinejad, Reda, Ebrahimi, ASP-DAC 2021, Algorithm 1): batch size is the only
// knob; binary search over the batch set on the window's maximum power, band [alpha·cap, cap].
// Clocks are left to the GPU, so it needs no privileges.

#include <optional>
#include <vector>

#include "gpucap/control/batch_search.hpp"
#include "gpucap/control/controller.hpp"

namespace gpucap::control {

struct BatchSizerParams {
  double alpha = 0.8;                                                 // paper §4.2
  DecisionPeriod period = DecisionPeriod::every_batches(10);          // "after processing 10 batches"
  std::vector<int> batch_sizes = {1, 2, 4, 8, 16, 32, 64, 128, 256};  // paper §5.1
  int start_index = 0;                                                // "starts with batch size 1"
};

[[nodiscard]] BatchSearch batchsizer_initial(const BatchSizerParams& params);
[[nodiscard]] BatchSearch batchsizer_step(const BatchSizerParams& params, const BatchSearch& state,
                                          double window_max_w, double cap_w);

class BatchSizerController final : public Controller {
 public:
  explicit BatchSizerController(BatchSizerParams params);
  [[nodiscard]] std::string_view name() const override { return "batchsizer"; }
  [[nodiscard]] DecisionPeriod period() const override { return params_.period; }
  [[nodiscard]] Requirements requirements() const override { return {}; }
  [[nodiscard]] Knobs initial_knobs(double cap_w) const override;
  [[nodiscard]] Knobs decide(const Observation& observation) override;
  [[nodiscard]] std::string describe_state() const override;
  [[nodiscard]] const BatchSearch& state() const { return state_; }

 private:
  [[nodiscard]] Knobs knobs() const;
  BatchSizerParams params_;
  BatchSearch state_;
};

}  // namespace gpucap::control
