#pragma once
// DVFS-only baseline (BatchDVFS repository, seed-systems.md §1.4): a fixed batch size (256 in
// the logged runs) and the SM clock walked one level per 3-s window on the window's maximum
// power, band [alpha·cap, cap].

#include <vector>

#include "gpucap/control/batchdvfs.hpp"
#include "gpucap/control/controller.hpp"

namespace gpucap::control {

struct DvfsParams {
  double alpha = 0.8;
  DecisionPeriod period = DecisionPeriod::every_seconds(3.0);
  int batch_size = 256;
  std::vector<double> clock_levels_mhz = seed_p40_clock_levels_mhz();
  int start_clock_index = 5;
};

struct DvfsState {
  int clock_index = 0;
  bool operator==(const DvfsState&) const = default;
};

[[nodiscard]] DvfsState dvfs_initial(const DvfsParams& params);
[[nodiscard]] DvfsState dvfs_step(const DvfsParams& params, const DvfsState& state, double window_max_w,
                                  double cap_w);

class DvfsController final : public Controller {
 public:
  explicit DvfsController(DvfsParams params);
  [[nodiscard]] std::string_view name() const override { return "dvfs"; }
  [[nodiscard]] DecisionPeriod period() const override { return params_.period; }
  [[nodiscard]] Requirements requirements() const override { return {.sm_clock = true}; }
  [[nodiscard]] Knobs initial_knobs(double cap_w) const override;
  [[nodiscard]] Knobs decide(const Observation& observation) override;
  [[nodiscard]] std::string describe_state() const override;

 private:
  [[nodiscard]] Knobs knobs() const;
  DvfsParams params_;
  DvfsState state_;
};

}  // namespace gpucap::control
