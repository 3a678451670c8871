#pragma once
// Where `gpucap serve`'s cap comes from, at any moment while it serves: the flag (--power-cap),
// a schedule (--cap-schedule, seconds from the start), the admin API (PUT /v1/power/cap), a file a
// node's power agent rewrites (--cap-file), and later a cluster's allocation. Every source sets
// the cap at a time; the cap in force is the one set last — a schedule's step counts as set at
// its time — so an operator's PUT holds until the next step of a schedule, and a step holds
// until the next PUT or file change. Every value is checked against the GPU's range before it is
// taken (a bad one changes nothing). Thread-safe: the HTTP threads and the file watcher set it,
// the serving loop reads it.

#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "gpucap/core/cap_schedule.hpp"
#include "gpucap/serve/serving_loop.hpp"

namespace gpucap::serve {

// The text of a cap file: a number of watts ("250", "250 W", "250.5\n") or a JSON object
// {"watts": 250}. Error(invalid_data) naming `source` for anything else (empty, negative, not a
// number, NaN, trailing words).
[[nodiscard]] double parse_cap_file(std::string_view text, std::string_view source);

class CapState {
 public:
  // `initial`: the flag's cap or the schedule (its steps at their times, "schedule"); `min_w` and
  // `max_w`: the range a cap must lie in (what the GPU can draw), checked for every source.
  CapState(CapSchedule initial, std::string initial_source, double min_w, double max_w);

  // The cap in force at `now_s` (seconds from the start of serving). A time before a cap was set
  // reads the cap in force then (a power sample taken before a PUT, read after it, is judged
  // against the cap it was drawn under), as far back as the last 64 sets.
  [[nodiscard]] CapReading at(double now_s) const;
  // Sets the cap from `source` at `now_s`. Error(usage) for a value outside the range or not
  // finite: nothing changes then.
  void set(double cap_w, const std::string& source, double now_s);
  // The next time the schedule changes the cap after now_s (infinity when it never does).
  [[nodiscard]] double next_change_s(double now_s) const;
  [[nodiscard]] double min_w() const { return min_w_; }
  [[nodiscard]] double max_w() const { return max_w_; }

  // A source's last failure ("the cap file is not a number ..."), kept for the log and metrics;
  // cleared by that source's next good value.
  void note_error(const std::string& source, const std::string& message);
  [[nodiscard]] std::optional<std::string> error(const std::string& source) const;

 private:
  mutable std::mutex mutex_;
  CapSchedule schedule_;
  std::string schedule_source_;
  double min_w_;
  double max_w_;
  struct Dynamic {
    double cap_w = 0.0;
    std::string source;
    double set_s = 0.0;
  };
  std::deque<Dynamic> dynamic_;  // the latest sets, oldest first
  std::optional<Dynamic> dropped_;  // the newest set dropped from them, if any
  std::string error_source_;
  std::string error_message_;
};

}  // namespace gpucap::serve
