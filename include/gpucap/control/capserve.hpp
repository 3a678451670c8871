#pragma once
// capserve — gpucap's serving controller (docs/serve.md, docs/algorithms.md). Every window it
// picks the batcher's batch cap B and queue delay D, the SM clock f and the power limit, and how
// many items the queue admits (it leaves the admit rate open), so that the p99 latency meets the
// SLO and the power stays under the cap, from a profile of the model on the GPU (throughput and
// window-max power at every batch size × clock, as capfit uses) and what it measures: the arrival
// rate, the p99, the power.
//
// The rule, for each configuration (B, f) of the profile:
//   - power: its predicted window maximum, times the measured/predicted ratio learnt at the
//     configurations that ran busy, must stay under the cap less a margin (widened by a window
//     over the cap, narrowed again by windows under it);
//   - latency: a request can wait for the batch in flight and then run in the next one, so
//     2·s(B, f) + D must stay under a fraction κ of the SLO, where s(B, f) = B / throughput(B, f)
//     is the batch's time; κ starts at 0.7 and is lowered when the measured p99 comes close to the
//     SLO (and raised back slowly when it stays far below). The p99 covers the last p99_memory_s,
//     so after a backoff or a clearing of the queue's room nothing moves on it (κ nor the room)
//     for that long;
//   - capacity: throughput(B, f) at a utilisation of at most ρ_max = 0.85 must carry the planned
//     rate: the measured arrival rate plus three Poisson standard deviations of the window.
// A batch's time s(B, f) is the profile's plus h·B, where h is the server's own time per item that
// the profile leaves out (it is measured with the inputs already on the GPU; a server copies each
// request's input into the batch and moves it to the GPU): learnt from the windows' measured batch
// times against the profile's for the batches that ran, when they are more than 5 % longer, in
// windows outside cap transitions whose batches were at least half full (the twin has no host time
// of its own, but a board limit that throttles the clock slows its batches).
// Among the configurations that meet all three it takes the one with the least energy per item
// (predicted power / throughput): the load is served, under the cap and the SLO, with the least
// power. When none can carry the load (demand beyond what the GPU can serve under the cap and the
// SLO), it takes the one with the highest capacity. Either way the queue admits no more items than
// the GPU drains within the latency budget after the batch in flight (throughput × (κ·SLO − s +
// room·SLO)); an arrival beyond that is shed at once with 429 instead of waiting until it times
// out, so under overload the GPU runs full batches at its capacity and what is admitted meets the
// SLO. The room grows while requests are shed and the p99 has room (the bursts of a load near the
// capacity), shrinks when nothing is shed, and is cleared first when the p99 nears the SLO; a
// configuration that keeps up (its throughput covers the measured rate plus one Poisson standard
// deviation) gets it whole (κ + room = max_queue_fraction) unless the p99 neared the SLO within
// its span. The delay
// lets batches fill at low load: D = min(κ·SLO − 2·s, B / rate), at least 0. The power limit is
// set to the cap as a guard the board enforces within its own control loop: a cap change ends the
// window at once, and the decision it calls for is written as soon as the batch in flight returns
// (the serving thread writes the GPU between batches); from then the firmware holds the new cap.

#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gpucap/control/serving.hpp"
#include "gpucap/predict/profile_model.hpp"

namespace gpucap::control {

struct CapserveParams {
  std::shared_ptr<const predict::ProfileModel> profile;
  double slo_s = 0.1;
  int max_batch_size = 256;          // the model's bound: no batch cap above it
  double window_s = 1.0;             // decision period
  double max_utilisation = 0.85;     // ρ_max: the load a configuration is planned to carry
  double latency_fraction = 0.7;     // κ at the start
  double min_latency_fraction = 0.2;
  double max_queue_fraction = 0.9;   // the queue's budget (κ + room) may grow to this share of the SLO
  double queue_room_step = 0.02;     // room added per window that shed with the p99 well under the SLO
  // Windows in a row that shed nothing before a step of the room is given back: near the capacity
  // the bursts that fill the queue come every few windows, and a room given back at the first
  // quiet window was gone by the next burst.
  int queue_room_hold_windows = 10;
  double p99_memory_s = 10.0;        // the span the observed p99 covers (the serving loop's latency window)
  double poisson_sigmas = 3.0;       // the planned rate's margin over the measured one
  // A configuration whose capacity covers the measured rate plus this many Poisson standard
  // deviations keeps up: its spare capacity drains a burst, so its queue gets the whole budget.
  // At most poisson_sigmas (a configuration that carries the planned rate keeps up).
  double burst_sigmas = 1.0;
  double power_margin = 0.02;        // fraction of the cap kept as headroom at the start
  double overshoot_margin = 0.02;    // added after a window over the cap
  double max_power_margin = 0.2;     // the margin's ceiling
  double margin_decay = 0.002;       // given back per window under it
  double learning_rate = 0.3;        // weight of a window in the power correction
  double busy_for_learning = 0.5;    // a window teaches the power ratio only when the GPU ran this busy
  // Whether capserve writes to the GPU: locks its clocks and sets its power limit to the cap.
  // false (a real GPU without --allow-gpu-control): a software cap, held by the batch cap, the delay
  // and admission alone, at the GPU's own clocks (the profile must have one clock column).
  bool gpu_writes = true;
  PlatformLimits limits;
};

struct CapserveChoice {
  int batch_cap = 1;
  double sm_clock_mhz = 0.0;
  std::optional<double> memory_clock_mhz;  // nullopt: the driver's default
  double batch_time_s = 0.0;       // s(B, f)
  double throughput_items_s = 0.0; // at full batches
  double power_w = 0.0;            // predicted window max, corrected
  bool carries_load = false;       // capacity at ρ_max covers the planned rate
  bool keeps_up = false;           // capacity covers the measured rate plus burst_sigmas σ
};

class CapserveController final : public ServingController {
 public:
  // Throws Error(usage) without a profile, for an SLO that is not positive, or a bound < 1.
  explicit CapserveController(CapserveParams params);
  [[nodiscard]] std::string_view name() const override { return "capserve"; }
  [[nodiscard]] DecisionPeriod period() const override { return DecisionPeriod::every_seconds(params_.window_s); }
  [[nodiscard]] Requirements requirements() const override;
  [[nodiscard]] ServingKnobs initial_knobs(double cap_w) const override;
  [[nodiscard]] ServingKnobs decide(const ServingObservation& observation) override;
  [[nodiscard]] std::string describe_state() const override;
  [[nodiscard]] bool reacts_to_cap_changes() const override { return true; }

  // The configuration the rule picks for a planned rate (items per second) under `cap_w` (for
  // tests and reports); nullopt when no configuration fits under the cap at all. `keep_up_items_s`
  // is the rate a configuration must cover to keep up (CapserveChoice::keeps_up); left out, no
  // configuration keeps up, even one that carries the planned rate.
  [[nodiscard]] std::optional<CapserveChoice> choose(
      double cap_w, double planned_items_s,
      double keep_up_items_s = std::numeric_limits<double>::infinity()) const;
  // The rate planned for a measured one over a window: rate + σ·sqrt(rate / window).
  [[nodiscard]] double planned_rate(double measured_rps) const;
  // The rate a configuration keeps up with: rate + burst_sigmas·sqrt(rate / window).
  [[nodiscard]] double keep_up_rate(double measured_rps) const;
  // The arrival rate a window measured, over a whole decision period: a window a cap change cut
  // short (milliseconds, with no arrival or one) is filled out with the rate measured before it.
  [[nodiscard]] double arrival_rate(const ServingObservation& observation) const;
  // The power margin (a fraction of the cap) kept as headroom now.
  [[nodiscard]] double power_margin() const { return margin_; }
  [[nodiscard]] double latency_fraction() const { return kappa_; }
  [[nodiscard]] double power_ratio() const { return power_ratio_; }
  // h: the server's own time per item beyond the profile's batch time (seconds).
  [[nodiscard]] double host_s_per_item() const { return host_s_per_item_; }

 private:
  struct Candidate {
    int batch = 1;
    double sm_clock_mhz = 0.0;
    std::optional<double> memory_clock_mhz;
    predict::ProfilePrediction profile;
  };
  // planned_items_s: the planned rate in items per second.
  [[nodiscard]] ServingKnobs knobs_for(const std::optional<CapserveChoice>& choice, double cap_w,
                                       double planned_items_s) const;
  void learn(const ServingObservation& observation);
  void learn_host_time(const ServingObservation& observation);
  // The profile's time for a batch of `items` (between whole batches, interpolated) at the clocks
  // of `knobs`; nullopt where the profile has none.
  [[nodiscard]] std::optional<double> profiled_batch_time_s(double items, const ServingKnobs& knobs) const;

  CapserveParams params_;
  std::vector<Candidate> candidates_;
  double kappa_;
  double margin_;
  double power_ratio_ = 1.0;
  double host_s_per_item_ = 0.0;
  double last_planned_rps_ = 0.0;
  double last_keep_up_rps_ = 0.0;
  std::optional<double> last_arrival_rps_;  // over the last decision period
  bool fallback_in_force_ = false;  // the last decision found no configuration under the cap
  double last_backoff_s_ = -std::numeric_limits<double>::infinity();
  double queue_room_slo_share_ = 0.0;  // share of the SLO the queue's budget holds beyond κ
  int windows_without_shedding_ = 0;
  bool room_halved_ = false;  // the last cut of the room halved it, and the p99 has not come away since
  bool latency_pressed_ = false;       // the p99 neared the SLO within its span
};

}  // namespace gpucap::control
