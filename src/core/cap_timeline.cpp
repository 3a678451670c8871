#include "gpucap/core/cap_timeline.hpp"

#include <algorithm>

namespace gpucap {

void CapTimeline::set(double time_s, double cap_w) {
  const std::lock_guard lock(mutex_);
  if (!changes_.empty()) time_s = std::max(time_s, changes_.back().first);
  changes_.emplace_back(time_s, cap_w);
}

double CapTimeline::cap_at(double time_s) const {
  const std::lock_guard lock(mutex_);
  // The last change at or before time_s; none: the initial schedule.
  const auto after = std::upper_bound(changes_.begin(), changes_.end(), time_s,
                                      [](double t, const std::pair<double, double>& change) { return t < change.first; });
  if (after == changes_.begin()) return initial_.cap_at(time_s);
  return std::prev(after)->second;
}

}  // namespace gpucap
