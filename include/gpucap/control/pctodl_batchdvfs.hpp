#pragma once
// pctodl-batchdvfs — PctoDL's re-implementation of BatchDVFS (seed-systems.md §2.10), its
// baseline on the PctoDL matrices: one process on the whole GPU, a binary search over PctoDL's
// batch ladder together with SM clock steps, every 5-s iteration (upstream: 2 s warm-up + 3 s
// measurement) on the window's maximum power P against the cap C. It starts at batch 256 and the
// median supported SM clock; the memory clock stays with the driver. With conv = (hi − lo ≤ 1)
// and a clock step of 1 supported clock when |P − C| ≤ 15 W, else 4:
//   α·C ≤ P < C: hold;
//   P < α·C: converged → clock up (at the top clock: re-open hi to the top batch);
//            else batch below the top → lo = batch, batch = ⌈(lo + hi)/2⌉ (one up if unchanged);
//            else clock up;
//   P ≥ C:  converged → batch = lo, clock down;
//            else batch above the bottom → hi = batch, batch = ⌊(lo + hi)/2⌋ (one down if unchanged);
//            else clock down;
// then FreqGuard (over the cap and the clock unchanged: one clock down).
// Upstream bug fixed: on a cap change main.py writes min_bs/max_bs, which the scheduler never
// reads, so the search keeps its old bounds; here the bounds re-open to the whole ladder.
// Differs from the original BatchDVFS (batchdvfs.hpp): steps on the clock inside the search, a
// band of 0.98·C, and a ladder to 256 (upstream extends it to 1024 for resnet50 and
// efficientnet, which the twin does not need: none of its models gains above 256).

#include <vector>

#include "gpucap/control/controller.hpp"

namespace gpucap::control {

struct PctodlBatchDvfsParams {
  DecisionPeriod period = DecisionPeriod::every_seconds(5.0);
  double alpha = 0.98;
  double near_cap_w = 15.0;        // within this of the cap the clock moves by 1 supported clock, else 4
  int far_clock_step = 4;
  std::vector<int> batch_sizes;    // ascending (default: PctoDL's ladder, morak.hpp)
  std::vector<double> clocks_mhz;  // supported SM clocks, ascending
  int start_batch_index = 0;
  int start_clock_index = 0;
};

struct PctodlBatchDvfsState {
  int lo = 0;           // batch-ladder indices
  int hi = 0;
  int batch_index = 0;
  int clock_index = 0;
  double cap_w = 0.0;   // the cap the bounds were opened for
  bool operator==(const PctodlBatchDvfsState&) const = default;
};

[[nodiscard]] PctodlBatchDvfsState pctodl_batchdvfs_initial(const PctodlBatchDvfsParams& params, double cap_w);
// One iteration: the search step, then FreqGuard.
[[nodiscard]] PctodlBatchDvfsState pctodl_batchdvfs_step(const PctodlBatchDvfsParams& params,
                                                         const PctodlBatchDvfsState& state, double window_max_w,
                                                         double cap_w);

class PctodlBatchDvfsController final : public Controller {
 public:
  // Throws Error(usage) for an empty ladder or clock list, or a start index outside them.
  explicit PctodlBatchDvfsController(PctodlBatchDvfsParams params);
  [[nodiscard]] std::string_view name() const override { return "pctodl-batchdvfs"; }
  [[nodiscard]] DecisionPeriod period() const override { return params_.period; }
  [[nodiscard]] Requirements requirements() const override { return {.sm_clock = true}; }
  [[nodiscard]] Knobs initial_knobs(double cap_w) const override;
  [[nodiscard]] Knobs decide(const Observation& observation) override;
  [[nodiscard]] std::string describe_state() const override;
  [[nodiscard]] const PctodlBatchDvfsState& state() const { return state_; }

 private:
  [[nodiscard]] Knobs knobs_of(const PctodlBatchDvfsState& state) const;
  PctodlBatchDvfsParams params_;
  PctodlBatchDvfsState state_;
  bool started_ = false;
};

}  // namespace gpucap::control
