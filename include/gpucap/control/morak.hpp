#pragma once
// morak — PctoDL's baseline after Morak (seed-systems.md §2.10), on one or more MPS tenants: batch size
// and SM clock stepped on the window's maximum power against a band [alpha·cap, 1.02·cap], with a
// latency SLO deciding which knob moves. Below the band: a larger batch while the batch latency is
// within beta·SLO, else a higher clock. Above 1.02·cap: a smaller batch if the latency exceeds
// beta·SLO, else a lower clock. Clock steps grow with the gap |P − cap| / cap (10, 5, 2 or 1
// supported clocks); FreqGuard then steps one clock down whenever power exceeds the cap and the
// clock did not move. Upstream starts at batch 96 and the median supported clock. With several
// tenants the latency is the slowest tenant's: max over tenants of batch / its throughput.

#include <optional>
#include <vector>

#include "gpucap/control/controller.hpp"

namespace gpucap::control {

// PctoDL's batch ladder: 1, 2, 4, 8, 16, then 32 to 256 in steps of 16.
[[nodiscard]] std::vector<int> pctodl_batch_ladder();

struct MorakParams {
  double alpha = 0.98;
  double beta = 0.9;
  std::optional<double> latency_slo_ms;  // nullopt: no SLO (latency never limits the batch)
  DecisionPeriod period = DecisionPeriod::every_seconds(3.0);
  std::vector<int> batch_sizes = pctodl_batch_ladder();
  std::vector<double> clocks_mhz;  // every supported SM clock, increasing
  int start_batch_index = 0;
  int start_clock_index = 0;
  // The MPS shares of its tenants, every one at the same batch size: {100} is the single-tenant
  // form; PctoDL's benchmark configs mostly use two tenants at 40 %.
  std::vector<double> shares_pct = {100.0};
};

struct MorakState {
  int batch_index = 0;
  int clock_index = 0;
  bool operator==(const MorakState&) const = default;
};

// The clock step (in supported clocks) for a relative gap |P − cap| / cap.
[[nodiscard]] int morak_clock_step(double gap);
[[nodiscard]] MorakState morak_step(const MorakParams& params, const MorakState& state, double window_max_w,
                                    double cap_w, double batch_latency_ms);

class MorakController final : public Controller {
 public:
  explicit MorakController(MorakParams params);
  [[nodiscard]] std::string_view name() const override { return "morak"; }
  [[nodiscard]] DecisionPeriod period() const override { return params_.period; }
  [[nodiscard]] Requirements requirements() const override { return {.sm_clock = true}; }
  [[nodiscard]] Knobs initial_knobs(double cap_w) const override;
  [[nodiscard]] Knobs decide(const Observation& observation) override;
  [[nodiscard]] std::string describe_state() const override;

 private:
  [[nodiscard]] Knobs knobs() const;
  MorakParams params_;
  MorakState state_;
};

}  // namespace gpucap::control
