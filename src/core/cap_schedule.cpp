#include "gpucap/core/cap_schedule.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "gpucap/core/error.hpp"
#include "gpucap/core/text.hpp"

namespace gpucap {

CapSchedule CapSchedule::constant(double cap_w) { return from_steps({CapStep{0.0, cap_w}}); }

CapSchedule CapSchedule::from_steps(std::vector<CapStep> steps) {
  if (steps.empty()) throw usage_error("cap schedule is empty");
  if (steps.front().time_s != 0.0) {
    throw usage_error(fmt::format("cap schedule must start at time 0 (first step at {:g} s)", steps.front().time_s));
  }
  for (std::size_t i = 0; i < steps.size(); ++i) {
    const auto& step = steps[i];
    if (!std::isfinite(step.cap_w) || step.cap_w <= 0.0) {
      throw usage_error(fmt::format("cap schedule step {}: cap must be a positive number of watts, got {:g}",
                                    i + 1, step.cap_w));
    }
    if (!std::isfinite(step.time_s) || step.time_s < 0.0) {
      throw usage_error(fmt::format("cap schedule step {}: time must be >= 0 s, got {:g}", i + 1, step.time_s));
    }
    if (i > 0 && step.time_s <= steps[i - 1].time_s) {
      throw usage_error(fmt::format("cap schedule step {}: times must increase ({:g} s after {:g} s)", i + 1,
                                    step.time_s, steps[i - 1].time_s));
    }
  }
  return CapSchedule(std::move(steps));
}

CapSchedule CapSchedule::parse(std::string_view text, const double* initial_cap_w) {
  std::vector<CapStep> steps;
  const auto trimmed = trim(text);
  if (trimmed.empty()) throw usage_error("cap schedule is empty; expected e.g. \"0:150,85:125\"");
  for (const auto item : split(trimmed, ',')) {
    const auto parts = split(item, ':');
    if (parts.size() != 2) {
      throw usage_error(fmt::format("cap schedule entry '{}' is not TIME_S:CAP_W", trim(item)));
    }
    const auto time_s = parse_double(parts[0]);
    const auto cap_w = parse_double(parts[1]);
    if (!time_s || !cap_w) {
      throw usage_error(fmt::format("cap schedule entry '{}' is not TIME_S:CAP_W with numbers", trim(item)));
    }
    steps.push_back(CapStep{*time_s, *cap_w});
  }
  if (!steps.empty() && steps.front().time_s > 0.0) {
    if (initial_cap_w == nullptr) {
      throw usage_error(fmt::format(
          "cap schedule starts at {:g} s; give --power-cap for the time before it or start the schedule at 0",
          steps.front().time_s));
    }
    steps.insert(steps.begin(), CapStep{0.0, *initial_cap_w});
  }
  return from_steps(std::move(steps));
}

double CapSchedule::cap_at(double time_s) const {
  // Last step whose time is <= time_s (steps_ is sorted and starts at 0).
  const auto after = std::upper_bound(steps_.begin(), steps_.end(), time_s,
                                      [](double t, const CapStep& step) { return t < step.time_s; });
  return after == steps_.begin() ? steps_.front().cap_w : std::prev(after)->cap_w;
}

double CapSchedule::min_cap_w() const {
  return std::min_element(steps_.begin(), steps_.end(),
                          [](const CapStep& a, const CapStep& b) { return a.cap_w < b.cap_w; })
      ->cap_w;
}

double CapSchedule::max_cap_w() const {
  return std::max_element(steps_.begin(), steps_.end(),
                          [](const CapStep& a, const CapStep& b) { return a.cap_w < b.cap_w; })
      ->cap_w;
}

void CapSchedule::check_range(double min_w, double max_w, std::string_view what) const {
  for (const auto& step : steps_) {
    if (step.cap_w < min_w || step.cap_w > max_w) {
      throw usage_error(fmt::format("power cap {:g} W is outside {} [{:g}, {:g}] W", step.cap_w, what, min_w, max_w));
    }
  }
}

std::string CapSchedule::to_string() const {
  if (is_constant()) return fmt::format("{:g} W", steps_.front().cap_w);
  std::vector<std::string> parts;
  for (const auto& step : steps_) parts.push_back(fmt::format("{:g}:{:g}", step.time_s, step.cap_w));
  return join(parts, ",");
}

std::vector<double> CapSchedule::distinct_caps() const {
  std::vector<double> caps;
  for (const auto& step : steps_) {
    if (std::find(caps.begin(), caps.end(), step.cap_w) == caps.end()) caps.push_back(step.cap_w);
  }
  return caps;
}

}  // namespace gpucap
