#include "gpucap/serve/cap_state.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <limits>

#include "gpucap/core/error.hpp"
#include "gpucap/core/text.hpp"

namespace gpucap::serve {
namespace {

constexpr std::size_t kMaxCapFileBytes = 4096;
constexpr std::size_t kDynamicHistory = 64;

double watts_of_json(std::string_view text, std::string_view source) {
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception&) {
    throw Error(ErrorCode::invalid_data, fmt::format("{}: not JSON, nor a number of watts", source));
  }
  if (!json.is_object() || !json.contains("watts") || !json["watts"].is_number()) {
    throw Error(ErrorCode::invalid_data, fmt::format("{}: a JSON cap file is {{\"watts\": W}}", source));
  }
  return json["watts"].get<double>();
}

}  // namespace

double parse_cap_file(std::string_view text, std::string_view source) {
  if (text.size() > kMaxCapFileBytes) {
    throw Error(ErrorCode::invalid_data, fmt::format("{}: {} bytes; a cap file holds one number", source, text.size()));
  }
  auto body = trim(text);
  if (body.empty()) throw Error(ErrorCode::invalid_data, fmt::format("{}: empty (expected a number of watts)", source));
  double watts = 0.0;
  if (body.front() == '{') {
    watts = watts_of_json(body, source);
  } else {
    if (body.size() > 1 && (body.back() == 'W' || body.back() == 'w')) body = trim(body.substr(0, body.size() - 1));
    const auto value = parse_double(body);
    if (!value) {
      throw Error(ErrorCode::invalid_data,
                  fmt::format("{}: '{}' is not a number of watts", source, std::string(body.substr(0, 40))));
    }
    watts = *value;
  }
  if (!(std::isfinite(watts) && watts > 0.0)) {
    throw Error(ErrorCode::invalid_data, fmt::format("{}: the cap must be a positive number of watts, not {:g}", source, watts));
  }
  return watts;
}

CapState::CapState(CapSchedule initial, std::string initial_source, double min_w, double max_w)
    : schedule_(std::move(initial)), schedule_source_(std::move(initial_source)), min_w_(min_w), max_w_(max_w) {
  schedule_.check_range(min_w_, max_w_, "what the GPU can draw");
}

CapReading CapState::at(double now_s) const {
  const std::lock_guard lock(mutex_);
  // The schedule's latest step at or before now, and when it was set.
  double step_s = 0.0;
  for (const auto& step : schedule_.steps()) {
    if (step.time_s <= now_s) step_s = step.time_s;
  }
  // The latest set at or before now.
  const auto kept = std::find_if(dynamic_.rbegin(), dynamic_.rend(), [now_s](const Dynamic& d) { return d.set_s <= now_s; });
  const Dynamic* set = kept != dynamic_.rend() ? &*kept : nullptr;
  // Before the oldest set kept: the newest one dropped, if it was set by then (then exact); before
  // that one too, it is the nearest known (older sets are gone).
  if (set == nullptr && dropped_) set = &*dropped_;
  if (set != nullptr && set->set_s >= step_s) return {set->cap_w, set->source};
  return {schedule_.cap_at(now_s), schedule_source_};
}

void CapState::set(double cap_w, const std::string& source, double now_s) {
  if (!std::isfinite(cap_w) || cap_w < min_w_ || cap_w > max_w_) {
    throw usage_error(fmt::format("a cap of {:g} W is outside what the GPU can draw [{:g}, {:g}] W", cap_w, min_w_, max_w_));
  }
  const std::lock_guard lock(mutex_);
  // In the order of their times: two setters read the clock before they take the lock, so a set
  // may arrive after a later one (at() reads the list as ordered).
  const auto place = std::upper_bound(dynamic_.begin(), dynamic_.end(), now_s,
                                      [](double t, const Dynamic& d) { return t < d.set_s; });
  dynamic_.insert(place, Dynamic{cap_w, source, now_s});
  if (dynamic_.size() > kDynamicHistory) {
    if (!dropped_ || dynamic_.front().set_s >= dropped_->set_s) dropped_ = std::move(dynamic_.front());
    dynamic_.pop_front();
  }
  if (error_source_ == source) {
    error_source_.clear();
    error_message_.clear();
  }
}

double CapState::next_change_s(double now_s) const {
  const std::lock_guard lock(mutex_);
  for (const auto& step : schedule_.steps()) {
    if (step.time_s > now_s) return step.time_s;
  }
  return std::numeric_limits<double>::infinity();
}

void CapState::note_error(const std::string& source, const std::string& message) {
  const std::lock_guard lock(mutex_);
  error_source_ = source;
  error_message_ = message;
}

std::optional<std::string> CapState::error(const std::string& source) const {
  const std::lock_guard lock(mutex_);
  if (error_source_ != source || error_message_.empty()) return std::nullopt;
  return error_message_;
}

}  // namespace gpucap::serve
