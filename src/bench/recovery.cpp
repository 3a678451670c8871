#include "gpucap/bench/recovery.hpp"

#include <limits>

namespace gpucap::bench {

double steady_over_cap_windows_pct(const std::vector<runtime::TraceRow>& rows) {
  int steady = 0;
  int over = 0;
  for (const auto& row : rows) {
    if (row.cap_transition) continue;
    ++steady;
    if (row.over_cap) ++over;
  }
  return steady > 0 ? 100.0 * over / steady : 0.0;
}

std::vector<CapStepRecovery> cap_step_recoveries(const std::vector<runtime::TraceRow>& rows,
                                                 const CapSchedule& schedule, const OracleAtCap& oracle_at_cap) {
  const auto& steps = schedule.steps();
  std::vector<CapStepRecovery> out;
  for (std::size_t k = 1; k < steps.size(); ++k) {
    CapStepRecovery r{steps[k].time_s, steps[k - 1].cap_w, steps[k].cap_w, std::nullopt, std::nullopt};
    const double until_s = k + 1 < steps.size() ? steps[k + 1].time_s : std::numeric_limits<double>::infinity();
    const auto oracle = oracle_at_cap(steps[k].cap_w);
    int index = 0;
    for (const auto& row : rows) {
      if (row.window_start_s < r.time_s) continue;
      if (row.window_start_s >= until_s) break;
      if (row.cap_transition) continue;
      ++index;
      if (row.over_cap) continue;
      if (!r.windows_to_under_cap) r.windows_to_under_cap = index;
      if (!r.windows_to_95pct_oracle && oracle && row.throughput_img_s >= kRecoveredFractionOfOracle * *oracle) {
        r.windows_to_95pct_oracle = index;
      }
    }
    out.push_back(r);
  }
  return out;
}

}  // namespace gpucap::bench
