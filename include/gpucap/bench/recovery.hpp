#pragma once
// What a run's windows say about the cap: the share of windows over it outside cap changes, and,
// for every step of a cap schedule, how many windows the run took to get back under the new cap
// and to reach 95 % of the oracle's throughput under it.

#include <functional>
#include <optional>
#include <vector>

#include "gpucap/core/cap_schedule.hpp"
#include "gpucap/runtime/runner.hpp"

namespace gpucap::bench {

inline constexpr double kRecoveredFractionOfOracle = 0.95;

struct CapStepRecovery {
  double time_s = 0.0;
  double from_w = 0.0;
  double to_w = 0.0;
  // Counting the windows after the step's transition (1 = the first window that starts after the
  // step and holds no sample of the transition, TraceRow::cap_transition): the first one with no
  // sample over the new cap, and the first one under the cap at ≥ 95 % of the oracle's throughput
  // for the new cap. nullopt: no such window before the next step or the end.
  std::optional<int> windows_to_under_cap;
  std::optional<int> windows_to_95pct_oracle;
};

// Share of windows over the cap among the windows outside cap transitions (%); 0 if there are none.
[[nodiscard]] double steady_over_cap_windows_pct(const std::vector<runtime::TraceRow>& rows);

// The oracle's throughput under a cap; nullopt where it has none.
using OracleAtCap = std::function<std::optional<double>(double cap_w)>;

// One entry per change of the schedule.
[[nodiscard]] std::vector<CapStepRecovery> cap_step_recoveries(const std::vector<runtime::TraceRow>& rows,
                                                               const CapSchedule& schedule,
                                                               const OracleAtCap& oracle_at_cap);

}  // namespace gpucap::bench
