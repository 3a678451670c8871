#pragma once
// BatchDVFS (Nabavinejad, Reda, Ebrahimi, TPDS 2022; seed-systems.md §1.3): binary search over
// batch sizes 1..255 every 3 s on the window's maximum power; the SM clock moves one level only
// at the extremes (up when the batch is already the largest and power is still below
// alpha·cap, down when the batch is 1 and power is still above the cap).

#include <vector>

#include "gpucap/control/batch_search.hpp"
#include "gpucap/control/controller.hpp"

namespace gpucap::control {

// The ten application-clock levels the seeds use on the Tesla P40.
[[nodiscard]] const std::vector<double>& seed_p40_clock_levels_mhz();
// 1, 2, ..., n.
[[nodiscard]] std::vector<int> consecutive_batch_sizes(int n);

struct BatchDvfsParams {
  double alpha = 0.8;
  DecisionPeriod period = DecisionPeriod::every_seconds(3.0);
  std::vector<int> batch_sizes = consecutive_batch_sizes(255);
  std::vector<double> clock_levels_mhz = seed_p40_clock_levels_mhz();
  int start_batch_index = 0;  // batch 1
  int start_clock_index = 5;  // 1063 MHz on the P40
};

struct BatchDvfsState {
  BatchSearch search;
  int clock_index = 0;
  bool operator==(const BatchDvfsState&) const = default;
};

[[nodiscard]] BatchDvfsState batchdvfs_initial(const BatchDvfsParams& params);
[[nodiscard]] BatchDvfsState batchdvfs_step(const BatchDvfsParams& params, const BatchDvfsState& state,
                                            double window_max_w, double cap_w);

class BatchDvfsController final : public Controller {
 public:
  explicit BatchDvfsController(BatchDvfsParams params);
  [[nodiscard]] std::string_view name() const override { return "batchdvfs"; }
  [[nodiscard]] DecisionPeriod period() const override { return params_.period; }
  [[nodiscard]] Requirements requirements() const override { return {.sm_clock = true}; }
  [[nodiscard]] Knobs initial_knobs(double cap_w) const override;
  [[nodiscard]] Knobs decide(const Observation& observation) override;
  [[nodiscard]] std::string describe_state() const override;
  [[nodiscard]] const BatchDvfsState& state() const { return state_; }

 private:
  [[nodiscard]] Knobs knobs() const;
  BatchDvfsParams params_;
  BatchDvfsState state_;
};

}  // namespace gpucap::control
