#pragma once
// A cap that an outside source changes while a job runs (a cluster's allocation): the schedule it
// started with, then every change at the time it was set. Thread-safe: the source sets it from its
// thread, the job reads it from its own. cap_at() answers for any time, past ones included — a job
// judges each power sample against the cap in force when the sample was taken.

#include <mutex>
#include <utility>
#include <vector>

#include "gpucap/core/cap_schedule.hpp"

namespace gpucap {

class CapTimeline {
 public:
  explicit CapTimeline(CapSchedule initial) : initial_(std::move(initial)) {}

  // From time_s on (seconds from the job's start) the cap is cap_w. A time before the last change
  // counts as the last change's time: the timeline never rewrites its past.
  void set(double time_s, double cap_w);
  [[nodiscard]] double cap_at(double time_s) const;

 private:
  mutable std::mutex mutex_;
  CapSchedule initial_;
  std::vector<std::pair<double, double>> changes_;  // (time, cap), times non-decreasing
};

}  // namespace gpucap
