#pragma once
// Replays a real P40 controller log through gpucap's controller: at each logged step it decides,
// from the logged window power, cap and time stamps, what the controller does, and compares its
// state (batch size, clock; for batchdvfs also minBS/maxBS/BestBS, for clipper BestBS) with the
// next logged row. On a mismatch it counts one and re-synchronises state and decision clock to
// the log. docs/algorithms.md explains the remaining mismatch classes.

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpucap/bench/p40_log.hpp"

namespace gpucap::bench {

struct ReplayOptions {
  double alpha = 0.8;
  double window_s = 3.0;
  std::vector<double> clock_levels_mhz;  // empty: the seeds' ten P40 levels
};

// Why a step did not match (docs/algorithms.md discusses each class).
enum class Mismatch {
  none,
  log_held,               // the controller changed its state; the log did not
  log_changed_no_window,  // the log changed although, by its time stamps, no window had closed
  log_changed_in_band,    // a window closed with the logged power inside the band, yet the log changed
  different_change,       // both changed, to different states
};

[[nodiscard]] const char* to_string(Mismatch mismatch);

struct ReplayStep {
  std::size_t step = 0;         // 1-based: the transition from data row `step` to `step + 1`
  std::size_t line = 0;         // file line of the predicted row
  double time_s = 0.0;          // decision time, from the first row
  double power_w = 0.0;         // logged window power used for the decision
  double cap_w = 0.0;
  bool decided = false;         // a window closed at this step (otherwise the state holds)
  int logged_batch = 0;
  int batch = 0;
  std::optional<double> logged_clock_mhz;
  std::optional<double> clock_mhz;
  nlohmann::json logged_state;  // controller state as logged / as predicted
  nlohmann::json state;
  bool match = false;
  Mismatch mismatch = Mismatch::none;
};

struct ReplayResult {
  std::string path;
  P40LogKind kind = P40LogKind::batchdvfs;
  ReplayOptions options;
  std::vector<ReplayStep> steps;
  std::size_t matched = 0;
  [[nodiscard]] double match_pct() const {
    return steps.empty() ? 0.0 : 100.0 * static_cast<double>(matched) / static_cast<double>(steps.size());
  }
  [[nodiscard]] std::size_t count(Mismatch mismatch) const;
};

// Throws Error(invalid_data) naming FILE:LINE for a logged state the controller cannot be in
// (e.g. a clock that is not one of the levels), Error(usage) for bad options.
[[nodiscard]] ReplayResult replay_p40_log(const P40Log& log, const ReplayOptions& options);

[[nodiscard]] std::string replay_csv(const ReplayResult& result);  // rows + "match P% (m/n)" line
[[nodiscard]] nlohmann::json replay_json(const ReplayResult& result);

// Many logs at once: one row per file with its match rate and mismatch classes, then the pooled
// "match P% (m/n)" line.
[[nodiscard]] std::string replay_table_csv(const std::vector<ReplayResult>& results);
[[nodiscard]] nlohmann::json replay_table_json(const std::vector<ReplayResult>& results);

}  // namespace gpucap::bench
