#pragma once
// Online controllers. A controller's decision is a pure function of its state and an
// Observation: no I/O, no clock, no globals — so it can be unit-tested and replayed against
// recorded logs. The Runner owns time: it closes a window when the controller's DecisionPeriod
// is due, summarises the power samples and calls decide().

#include <string>
#include <string_view>

#include "gpucap/core/knobs.hpp"
#include "gpucap/core/observation.hpp"

namespace gpucap::control {

inline constexpr double kMaxWindowS = 3600.0;

// How long a window lasts: a time (the seeds' "every W = 3 s", checked between batches, so a
// window is really max(W, batch time)) or a number of batches (BatchSizer: 10 batches).
struct DecisionPeriod {
  double seconds = 0.0;  // > 0: time-based
  int batches = 0;       // > 0: batch-count-based

  [[nodiscard]] static DecisionPeriod every_seconds(double seconds) { return {seconds, 0}; }
  [[nodiscard]] static DecisionPeriod every_batches(int batches) { return {0.0, batches}; }

  // Upstream compares `now - t_decision > W` (strictly greater).
  [[nodiscard]] bool due(double elapsed_s, int batches_in_window) const {
    return batches > 0 ? batches_in_window >= batches : elapsed_s > seconds;
  }
  // "3s" or "10 batches"; parse() accepts "3", "3s", "2.5s", "10b" and throws Error(usage).
  [[nodiscard]] std::string to_string() const;
  [[nodiscard]] static DecisionPeriod parse(std::string_view text);

  bool operator==(const DecisionPeriod&) const = default;
};

// Where the window's power lies relative to the band [alpha·cap, cap] all seeds use.
enum class PowerBand { below, inside, above };

[[nodiscard]] inline PowerBand classify_power(double power_w, double cap_w, double alpha) {
  if (power_w > cap_w) return PowerBand::above;
  if (power_w < alpha * cap_w) return PowerBand::below;
  return PowerBand::inside;
}

// What a controller needs to write besides the batch size.
struct Requirements {
  bool sm_clock = false;
  bool memory_clock = false;
  bool power_limit = false;
};

class Controller {
 public:
  Controller() = default;
  Controller(const Controller&) = delete;
  Controller& operator=(const Controller&) = delete;
  virtual ~Controller() = default;

  [[nodiscard]] virtual std::string_view name() const = 0;
  [[nodiscard]] virtual DecisionPeriod period() const = 0;
  [[nodiscard]] virtual Requirements requirements() const = 0;
  // Knobs for the first window, given the cap in force when the job starts.
  [[nodiscard]] virtual Knobs initial_knobs(double cap_w) const = 0;
  // Knobs for the next window, given the one that just ended.
  [[nodiscard]] virtual Knobs decide(const Observation& observation) = 0;
  // One line describing the current internal state (for traces and debugging).
  [[nodiscard]] virtual std::string describe_state() const = 0;
  // Whether a change of the cap ends the window at once (at the next batch boundary), so the
  // controller can react to it. The seeds keep their window timing and notice a new cap only at
  // the end of the window, as upstream does.
  [[nodiscard]] virtual bool reacts_to_cap_changes() const { return false; }
};

}  // namespace gpucap::control
