#include "gpucap/serve/arrivals.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "gpucap/core/error.hpp"
#include "gpucap/core/text.hpp"

namespace gpucap::serve {
namespace {

void check_end(double end_s) {
  if (!std::isfinite(end_s) || end_s <= 0.0) {
    throw usage_error(fmt::format("arrival process end must be a positive number of seconds, got {:g}", end_s));
  }
}

}  // namespace

// --- RateSchedule ---

RateSchedule RateSchedule::constant(double rate_per_s) {
  if (!std::isfinite(rate_per_s) || rate_per_s <= 0.0) {
    throw usage_error(fmt::format("request rate must be a positive number per second, got {:g}", rate_per_s));
  }
  return RateSchedule({RateStep{0.0, rate_per_s}});
}

RateSchedule RateSchedule::from_steps(std::vector<RateStep> steps) {
  if (steps.empty()) throw usage_error("rate schedule is empty");
  if (steps.front().time_s != 0.0) {
    throw usage_error(fmt::format("rate schedule must start at time 0 (first step at {:g} s; 0:0 pauses the load)",
                                  steps.front().time_s));
  }
  bool any_positive = false;
  for (std::size_t i = 0; i < steps.size(); ++i) {
    const auto& step = steps[i];
    if (!std::isfinite(step.rate_per_s) || step.rate_per_s < 0.0) {
      throw usage_error(fmt::format("rate schedule step {}: rate must be a number of requests per second >= 0, got {:g}",
                                    i + 1, step.rate_per_s));
    }
    if (!std::isfinite(step.time_s) || step.time_s < 0.0) {
      throw usage_error(fmt::format("rate schedule step {}: time must be >= 0 s, got {:g}", i + 1, step.time_s));
    }
    if (i > 0 && step.time_s <= steps[i - 1].time_s) {
      throw usage_error(fmt::format("rate schedule step {}: times must increase ({:g} s after {:g} s)", i + 1,
                                    step.time_s, steps[i - 1].time_s));
    }
    any_positive = any_positive || step.rate_per_s > 0.0;
  }
  if (!any_positive) throw usage_error("rate schedule has no positive rate: it would send nothing");
  return RateSchedule(std::move(steps));
}

RateSchedule RateSchedule::parse(std::string_view text) {
  const auto trimmed = trim(text);
  if (trimmed.empty()) throw usage_error("rate schedule is empty; expected e.g. \"0:50,30:100\" (seconds:rate)");
  std::vector<RateStep> steps;
  for (const auto item : split(trimmed, ',')) {
    const auto parts = split(item, ':');
    const auto time_s = parts.size() == 2 ? parse_double(parts[0]) : std::nullopt;
    const auto rate = parts.size() == 2 ? parse_double(parts[1]) : std::nullopt;
    if (!time_s || !rate) {
      throw usage_error(fmt::format("rate schedule entry '{}' is not TIME_S:RATE with numbers (e.g. \"0:50,30:100\")",
                                    trim(item)));
    }
    steps.push_back(RateStep{*time_s, *rate});
  }
  return from_steps(std::move(steps));
}

double RateSchedule::rate_at(double time_s) const {
  const auto after = std::upper_bound(steps_.begin(), steps_.end(), time_s,
                                      [](double t, const RateStep& step) { return t < step.time_s; });
  return after == steps_.begin() ? steps_.front().rate_per_s : std::prev(after)->rate_per_s;
}

double RateSchedule::expected_arrivals(double end_s) const {
  double total = 0.0;
  for (std::size_t i = 0; i < steps_.size() && steps_[i].time_s < end_s; ++i) {
    const double until = i + 1 < steps_.size() ? std::min(steps_[i + 1].time_s, end_s) : end_s;
    total += (until - steps_[i].time_s) * steps_[i].rate_per_s;
  }
  return total;
}

std::string RateSchedule::to_string() const {
  if (is_constant()) return fmt::format("{:g}/s", steps_.front().rate_per_s);
  std::string text;
  for (const auto& step : steps_) {
    if (!text.empty()) text += ',';
    text += fmt::format("{:g}:{:g}", step.time_s, step.rate_per_s);
  }
  return text;
}

ArrivalSpacing parse_arrival_spacing(std::string_view text) {
  if (text == "poisson") return ArrivalSpacing::poisson;
  if (text == "constant") return ArrivalSpacing::constant;
  throw usage_error(fmt::format("arrival distribution '{}' must be poisson or constant", text));
}

std::string_view to_string(ArrivalSpacing spacing) noexcept {
  return spacing == ArrivalSpacing::poisson ? "poisson" : "constant";
}

// --- Trace files ---

std::vector<double> parse_arrival_trace(std::string_view text, std::string_view source_name, std::size_t max_times) {
  const std::string source(source_name);
  std::vector<double> times;
  std::optional<double> last_s;            // the last time read (kept or not)
  std::optional<std::size_t> time_column;  // set once a CSV header was read
  bool first_content = true;
  std::size_t line_number = 0;
  // Line by line, without a list of the lines: a file of millions holds no more than its times.
  for (std::size_t start = 0; start <= text.size();) {
    const auto end = std::min(text.find('\n', start), text.size());
    const auto raw_line = text.substr(start, end - start);
    start = end + 1;
    ++line_number;
    const auto line = trim(raw_line);
    if (line.empty() || line.front() == '#') continue;
    std::string_view field = line;
    if (first_content) {
      first_content = false;
      if (!parse_double(line)) {
        const auto names = split(line, ',');
        for (std::size_t i = 0; i < names.size(); ++i) {
          if (trim(names[i]) == "time_s") time_column = i;
        }
        if (!time_column) {
          throw data_error(source, line_number,
                           fmt::format("expected an arrival time in seconds or a CSV header with a time_s column, "
                                       "got '{}'",
                                       line.substr(0, 80)));
        }
        continue;
      }
    } else if (time_column) {
      const auto fields = split(line, ',');
      if (fields.size() <= *time_column) {
        throw data_error(source, line_number,
                         fmt::format("row has {} fields; time_s is field {}", fields.size(), *time_column + 1));
      }
      field = fields[*time_column];
    }
    const auto time_s = parse_double(field);
    if (!time_s) {
      throw data_error(source, line_number,
                       fmt::format("arrival time '{}' is not a number of seconds", trim(field).substr(0, 80)));
    }
    if (*time_s < 0.0) throw data_error(source, line_number, fmt::format("arrival time {:g} s is negative", *time_s));
    if (last_s && *time_s < *last_s) {
      throw data_error(source, line_number,
                       fmt::format("arrival times must not decrease ({:g} s after {:g} s)", *time_s, *last_s));
    }
    last_s = time_s;
    if (times.size() < max_times) times.push_back(*time_s);
  }
  if (!last_s) throw data_error(source, 0, "the trace has no arrival times");
  return times;
}

// --- ArrivalProcess ---

ArrivalProcess ArrivalProcess::from_schedule(RateSchedule schedule, ArrivalSpacing spacing, std::uint64_t seed,
                                             double end_s, std::uint64_t max_count) {
  check_end(end_s);
  ArrivalProcess process;
  process.schedule_ = std::move(schedule);
  process.spacing_ = spacing;
  process.engine_.seed(seed);
  process.end_s_ = end_s;
  process.max_count_ = max_count;
  return process;
}

ArrivalProcess ArrivalProcess::from_trace(std::vector<double> times_s, double end_s, std::uint64_t max_count) {
  check_end(end_s);
  for (std::size_t i = 0; i < times_s.size(); ++i) {
    if (!std::isfinite(times_s[i]) || times_s[i] < 0.0 || (i > 0 && times_s[i] < times_s[i - 1])) {
      throw usage_error(fmt::format("trace arrival {} ({:g} s) is not a time >= 0 and >= the one before", i + 1,
                                    times_s[i]));
    }
  }
  ArrivalProcess process;
  process.trace_s_ = std::move(times_s);
  process.end_s_ = end_s;
  process.max_count_ = max_count;
  return process;
}

double ArrivalProcess::draw_gap() {
  if (spacing_ == ArrivalSpacing::constant) return 1.0;
  // 53 random bits: u in [0, 1), so 1 - u > 0 and the logarithm is finite.
  const double u = static_cast<double>(engine_() >> 11) * 0x1.0p-53;
  return -std::log1p(-u);
}

std::optional<double> ArrivalProcess::next_scheduled() {
  const auto& steps = schedule_->steps();
  // The first constant-spaced request goes at the start; every other gap is drawn.
  target_ += first_ && spacing_ == ArrivalSpacing::constant ? 0.0 : draw_gap();
  first_ = false;
  // Find the step in which the cumulative expected arrivals reach target_, then invert the
  // (linear, within a step) cumulative rate. Computing each time from the step's start instead
  // of adding gaps keeps constant spacing exact: 10/s for 1 s is 10 arrivals, not 11.
  while (true) {
    const auto& step = steps[step_];
    if (step_ + 1 < steps.size()) {
      const double step_expected = step.rate_per_s * (steps[step_ + 1].time_s - step.time_s);
      if (step_start_expected_ + step_expected <= target_) {
        step_start_expected_ += step_expected;
        ++step_;
        if (steps[step_].time_s >= end_s_) return std::nullopt;
        continue;
      }
    } else if (step.rate_per_s <= 0.0) {
      return std::nullopt;  // the rate stays 0
    }
    const double time_s = step.time_s + (target_ - step_start_expected_) / step.rate_per_s;
    if (time_s >= end_s_) return std::nullopt;
    return time_s;
  }
}

std::optional<double> ArrivalProcess::next() {
  if (ended_ || produced_ >= max_count_) {
    ended_ = true;
    return std::nullopt;
  }
  std::optional<double> time_s;
  if (schedule_) {
    time_s = next_scheduled();
  } else if (trace_next_ < trace_s_.size() && trace_s_[trace_next_] < end_s_) {
    time_s = trace_s_[trace_next_++];
  }
  if (!time_s) {
    ended_ = true;
    return std::nullopt;
  }
  ++produced_;
  return time_s;
}

std::vector<double> all_arrivals(ArrivalProcess process) {
  std::vector<double> times;
  while (const auto time_s = process.next()) times.push_back(*time_s);
  return times;
}

}  // namespace gpucap::serve
