#pragma once
// Controllers for `gpucap serve`: what they see of a serving window and what they set. A serving
// controller turns the dynamic batcher's run-time knobs (its batch cap and queue delay, Triton's
// max_batch_size and max_queue_delay_microseconds), the GPU's SM clock and power limit, and how
// many requests per second the server admits (the rest are shed early with 429 instead of timing
// out in the queue). Like every controller here, a decision is a pure function of its state and
// the observation: no clock, no I/O.
//
// Three kinds run under serve (control/registry's names):
//   - gpucap's own, `capserve` (control/capserve.hpp);
//   - `static`: what a Triton user sets today — a fixed batch cap and delay, the GPU at its own
//     clocks, its power limit set to the cap (the board then enforces it);
//   - the seeds' and gpucap's batch-level controllers (batchsizer, batchdvfs, dvfs, clipper,
//     capfit, ...) through SeedServing: their batch size becomes the batch cap, their clock and
//     power limit go to the GPU, the delay stays the configured one, nothing is shed.

#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "gpucap/control/controller.hpp"
#include "gpucap/control/registry.hpp"
#include "gpucap/core/window_stats.hpp"

namespace gpucap::control {

inline constexpr double kAdmitEverything = std::numeric_limits<double>::infinity();

struct ServingKnobs {
  int max_batch_size = 1;           // the batcher's batch cap, items (clamped to the model's bound)
  double max_queue_delay_s = 0.0;   // the batcher's queue delay
  std::optional<double> sm_clock_mhz;   // nullopt: the GPU's own governor chooses
  std::optional<double> memory_clock_mhz;  // nullopt: the driver's default
  std::optional<double> power_limit_w;  // nullopt: the board's limit stays as it is
  double admit_rate_rps = kAdmitEverything;  // requests per second admitted; the rest shed (429)
  // The most items the queue may hold: an arrival that would exceed it is shed at once (429), so
  // what is queued can still be served within the SLO. Infinity: no bound.
  double max_queued_items = kAdmitEverything;

  bool operator==(const ServingKnobs&) const = default;
};

// "batch<=32 delay=2ms sm=1410MHz pl=180W admit=all" — for logs and traces.
[[nodiscard]] std::string describe(const ServingKnobs& knobs);

// One serving window, as the controller sees it at its end.
struct ServingObservation {
  double time_s = 0.0;      // end of the window (platform time), from the start of serving
  double window_s = 0.0;    // its length
  double cap_w = 0.0;       // the cap in force at time_s
  double slo_s = 0.0;       // the p99 latency SLO
  WindowStats power;        // the window's power samples (max: what the cap is judged on)
  // Its samples once the reading showed the window's clock and power limit (empty if none): what
  // the configuration that ran draws, after a board sensor's averaging of the one before.
  WindowStats settled_power;
  double arrival_rps = 0.0;   // requests offered (admitted or shed) over the window
  double items_per_request = 1.0;  // mean batch dimension of the requests answered (1 without any)
  double answered_rps = 0.0;  // answered successfully in the window
  double goodput_rps = 0.0;   // answered within the SLO in the window
  double shed_rps = 0.0;      // shed at admission (429)
  double p99_s = 0.0;         // over the SLO statistics' sliding window (seconds, not this window)
  double slo_attainment = 1.0;  // likewise
  double busy_fraction = 0.0;   // share of the window the GPU ran batches
  double mean_batch_items = 0.0;  // items per batch launched in the window (0: none)
  int batches = 0;
  double throughput_items_s = 0.0;  // items finished per second of the window
  std::size_t queued_requests = 0;  // at the end of the window
  // Some sample fell between a change of the cap and the reading of the answer to it: the power
  // shows the GPU as it was under the old cap (a board sensor averages over its window).
  bool cap_transition = false;
  ServingKnobs knobs;               // what was in force during the window
};

class ServingController {
 public:
  ServingController() = default;
  ServingController(const ServingController&) = delete;
  ServingController& operator=(const ServingController&) = delete;
  virtual ~ServingController() = default;

  [[nodiscard]] virtual std::string_view name() const = 0;
  // The window the serving loop closes and decides on (seconds or batches).
  [[nodiscard]] virtual DecisionPeriod period() const = 0;
  [[nodiscard]] virtual Requirements requirements() const = 0;
  [[nodiscard]] virtual ServingKnobs initial_knobs(double cap_w) const = 0;
  [[nodiscard]] virtual ServingKnobs decide(const ServingObservation& observation) = 0;
  [[nodiscard]] virtual std::string describe_state() const = 0;
  // Whether a change of the cap ends the window at once.
  [[nodiscard]] virtual bool reacts_to_cap_changes() const = 0;
};

// The batcher as the user configured it (Triton's model config): where static serving stays, and
// what the seeds keep of it (the delay).
struct BatcherDefaults {
  int max_batch_size = 32;
  double max_queue_delay_s = 0.0;
};

// Triton as a user runs it today: the configured batch cap and delay, default clocks, the power
// limit set to the cap in force (nvidia-smi -pl); the board's firmware then keeps the power under
// it by lowering the clock. Never sheds.
class StaticServing final : public ServingController {
 public:
  // `limit_follows_cap`: set the power limit to the cap (clamped to the board's range).
  // `sm_clock_mhz`: a locked clock (the oracle's static settings); nullopt: the GPU's own.
  StaticServing(BatcherDefaults batcher, const PlatformLimits& limits, bool limit_follows_cap = true,
                std::optional<double> sm_clock_mhz = std::nullopt);
  [[nodiscard]] std::string_view name() const override { return "static"; }
  [[nodiscard]] DecisionPeriod period() const override { return DecisionPeriod::every_seconds(1.0); }
  [[nodiscard]] Requirements requirements() const override;
  [[nodiscard]] ServingKnobs initial_knobs(double cap_w) const override;
  [[nodiscard]] ServingKnobs decide(const ServingObservation& observation) override;
  [[nodiscard]] std::string describe_state() const override;
  [[nodiscard]] bool reacts_to_cap_changes() const override { return true; }

 private:
  BatcherDefaults batcher_;
  PlatformLimits limits_;
  bool limit_follows_cap_;
  std::optional<double> sm_clock_mhz_;
};

// A batch-level controller (control/registry's) under serve. Its Observation is built from the
// serving window: the power samples, the items finished per second as its throughput, the mean
// batch time as its latency. Its batch size becomes the batcher's cap; its clock and power limit
// go to the GPU; the delay is the configured one; nothing is shed.
class SeedServing final : public ServingController {
 public:
  SeedServing(std::unique_ptr<Controller> inner, BatcherDefaults batcher);
  [[nodiscard]] std::string_view name() const override { return inner_->name(); }
  [[nodiscard]] DecisionPeriod period() const override { return inner_->period(); }
  [[nodiscard]] Requirements requirements() const override { return inner_->requirements(); }
  [[nodiscard]] ServingKnobs initial_knobs(double cap_w) const override;
  [[nodiscard]] ServingKnobs decide(const ServingObservation& observation) override;
  [[nodiscard]] std::string describe_state() const override { return inner_->describe_state(); }
  [[nodiscard]] bool reacts_to_cap_changes() const override { return inner_->reacts_to_cap_changes(); }

  // The Observation a batch-level controller is given for a serving window.
  [[nodiscard]] static Observation batch_observation(const ServingObservation& observation, const Knobs& knobs);

 private:
  [[nodiscard]] ServingKnobs serving_knobs(const Knobs& knobs) const;

  std::unique_ptr<Controller> inner_;
  BatcherDefaults batcher_;
};

}  // namespace gpucap::control
