#include "gpucap/device/control_session.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <cmath>

#include "gpucap/core/error.hpp"
#include "gpucap/core/text.hpp"

namespace gpucap::device {

namespace {
constexpr int kRestoreAttempts = 8;

bool same_value(const ControlValue& a, const ControlValue& b) {
  if (a.has_value() != b.has_value()) return false;
  return !a || std::abs(*a - *b) < 1e-9;
}

std::string value_text(const ControlValue& value, std::string_view unit) {
  return value ? fmt::format("{:g} {}", *value, unit) : std::string("unset");
}
}  // namespace

ControlSession::ControlSession(Device& device) : device_(device) {}

ControlSession::ControlSession(Device& device, RestoreJournal& journal, std::string device_id)
    : device_(device), journal_(&journal), device_id_(std::move(device_id)) {}

ControlSession::~ControlSession() {
  try {
    restore();
  } catch (const std::exception& e) {
    spdlog::error("RESTORE FAILED on {}: {} — check the GPU's settings by hand", device_.name(), e.what());
  }
}

bool ControlSession::is_saved(Control control) const {
  return std::any_of(saved_.begin(), saved_.end(), [control](const auto& entry) { return entry.first == control; });
}

void ControlSession::check(Control control, ControlValue value) const {
  const auto info = describe(control);
  if (!device_.has_control(control)) {
    throw Error(ErrorCode::unsupported, fmt::format("{} has no control {}", device_.name(), info.name));
  }
  if (!device_.can_write(control)) {
    throw Error(ErrorCode::unsupported,
                fmt::format("{}: no permission to write {} on {}", info.name, info.description, device_.name()));
  }
  if (!value) return;
  const auto range = device_.range(control);
  if (!std::isfinite(*value) || *value < range.min || *value > range.max) {
    throw usage_error(fmt::format("{} = {} is outside the device range [{:g}, {:g}] {}", info.name,
                                  value_text(value, info.unit), range.min, range.max, info.unit));
  }
}

void ControlSession::write(Control control, ControlValue value) {
  check(control, value);
  const auto current = std::find_if(current_.begin(), current_.end(),
                                    [control](const auto& entry) { return entry.first == control; });
  if (current != current_.end() && same_value(current->second, value)) return;
  const ControlValue before = device_.read_control(control);
  if (!is_saved(control)) {
    // On disk before the device changes: a crash after the write must find it.
    if (journal_ != nullptr) journal_->record(device_id_, control, before);
    saved_.emplace_back(control, before);
  }
  if (!same_value(before, value)) {
    device_.write_control(control, value);
    ++writes_;
  }
  if (current != current_.end()) {
    current->second = value;
  } else {
    current_.emplace_back(control, value);
  }
}

void ControlSession::apply(const Knobs& knobs) {
  std::vector<std::pair<Control, ControlValue>> wanted;
  if (knobs.sm_clock_mhz) wanted.emplace_back(Control::sm_clock_lock_mhz, knobs.sm_clock_mhz);
  if (knobs.mem_clock_mhz) wanted.emplace_back(Control::memory_clock_lock_mhz, knobs.mem_clock_mhz);
  if (knobs.power_limit_w) wanted.emplace_back(Control::power_limit_w, knobs.power_limit_w);
  for (const auto& [control, value] : wanted) check(control, value);
  // What this session set and the device no longer holds is written again below.
  for (auto it = current_.begin(); it != current_.end();) {
    const ControlValue now = device_.read_control(it->first);
    if (same_value(now, it->second)) {
      ++it;
      continue;
    }
    if (!drift_said_) {
      drift_said_ = true;
      spdlog::warn("{} on {} is {}, not the {} set before (a driver reset, or another program): setting it again",
                   describe(it->first).name, device_.name(), value_text(now, describe(it->first).unit),
                   value_text(it->second, describe(it->first).unit));
    }
    it = current_.erase(it);
  }

  std::vector<std::pair<Control, ControlValue>> written;  // (control, value before this apply)
  for (const auto& [control, value] : wanted) {
    try {
      const ControlValue before = device_.read_control(control);
      write(control, value);
      written.emplace_back(control, before);
    } catch (...) {
      // Roll back this apply's earlier writes so the device is never left half-changed.
      for (auto it = written.rbegin(); it != written.rend(); ++it) {
        try {
          write(it->first, it->second);
        } catch (const std::exception& e) {
          spdlog::error("rollback of {} failed: {}", describe(it->first).name, e.what());
        }
      }
      throw;
    }
  }
}

void ControlSession::restore() {
  std::vector<std::string> failures;
  for (auto it = saved_.rbegin(); it != saved_.rend(); ++it) {
    const auto& [control, value] = *it;
    // A driver that answers a call with an error now and then must not leave the GPU changed:
    // a device error is tried again (kRestoreAttempts in all, a little apart).
    for (int attempt = 1;; ++attempt) {
      try {
        if (!same_value(device_.read_control(control), value)) device_.write_control(control, value);
        if (attempt > 1) {
          spdlog::warn("restored {} on {} at attempt {}", describe(control).name, device_.name(), attempt);
        }
        break;
      } catch (const Error& e) {
        if (e.code() == ErrorCode::device && attempt < kRestoreAttempts) {
          std::this_thread::sleep_for(std::chrono::milliseconds(20 * attempt));
          continue;
        }
        failures.push_back(fmt::format("{} (to {}): {}", describe(control).name,
                                       value_text(value, describe(control).unit), e.what()));
        break;
      } catch (const std::exception& e) {
        failures.push_back(fmt::format("{} (to {}): {}", describe(control).name,
                                       value_text(value, describe(control).unit), e.what()));
        break;
      }
    }
  }
  const bool had_saved = !saved_.empty();
  saved_.clear();
  current_.clear();
  if (!failures.empty()) {
    const auto kept = journal_ != nullptr ? fmt::format(" (kept in {} for the next start)", journal_->path()) : "";
    throw Error(ErrorCode::device, fmt::format("could not restore {}{}", join(failures, "; "), kept));
  }
  if (journal_ != nullptr && had_saved) journal_->forget(device_id_);
}

}  // namespace gpucap::device
