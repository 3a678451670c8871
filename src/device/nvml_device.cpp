#include "gpucap/device/nvml_device.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>

#include "gpucap/core/error.hpp"

namespace gpucap::device {

namespace {

constexpr double kWattsPerMilliwatt = 1e-3;
constexpr double kJoulesPerMillijoule = 1e-3;

std::vector<double> as_doubles(const std::vector<unsigned>& values) { return {values.begin(), values.end()}; }

unsigned to_mhz(double mhz) { return static_cast<unsigned>(std::lround(mhz)); }

}  // namespace

bool process_may_write_gpu_controls() { return geteuid() == 0; }

NvmlDevice::NvmlDevice(const NvmlLibrary& nvml, unsigned index, bool writes_allowed)
    : nvml_(nvml), handle_(nvml.device(index)), writes_allowed_(writes_allowed) {
  info_.index = index;
  info_.name = nvml.name(handle_);
  info_.uuid = nvml.uuid(handle_);
  info_.pci_bus_id = nvml.pci_bus_id(handle_);
  const auto limits = nvml.power_limits(handle_);
  info_.power_limit_min_w = limits.min_mw * kWattsPerMilliwatt;
  info_.power_limit_max_w = limits.max_mw * kWattsPerMilliwatt;
  info_.power_limit_default_w = limits.default_mw * kWattsPerMilliwatt;
  info_.power_limit_w = limits.current_mw * kWattsPerMilliwatt;
  const auto memory = nvml.supported_memory_clocks_mhz(handle_);
  info_.memory_clocks_mhz = as_doubles(memory);
  if (!memory.empty()) {
    const auto top = *std::max_element(memory.begin(), memory.end());
    info_.sm_clocks_mhz = as_doubles(nvml.supported_graphics_clocks_mhz(handle_, top));
  }
  energy_last_mj_ = nvml.total_energy_mj(handle_);
  energy_last_time_ = std::chrono::steady_clock::now();
  info_.energy_counter = energy_last_mj_.has_value();
  info_.instant_power = nvml.instant_power_mw(handle_).has_value();
}

bool NvmlDevice::has_signal(Signal signal) const {
  return signal != Signal::energy_j || info_.energy_counter;
}

double NvmlDevice::read(Signal signal) {
  switch (signal) {
    case Signal::power_w: {
      // The instantaneous reading where there is one: a 1-s average hides the peaks a cap is about.
      if (info_.instant_power) {
        if (const auto mw = nvml_.instant_power_mw(handle_)) return *mw * kWattsPerMilliwatt;
      }
      return nvml_.power_usage_mw(handle_) * kWattsPerMilliwatt;
    }
    case Signal::energy_j: {
      const std::lock_guard lock(energy_mutex_);  // readings in order: an earlier one is no reset
      const auto now = nvml_.total_energy_mj(handle_);
      if (!now || !energy_last_mj_) break;
      const auto time = std::chrono::steady_clock::now();
      const double seconds = std::chrono::duration<double>(time - energy_last_time_).count();
      // The most a rise can be: twice the highest power limit (at least 1 kW) for the time since
      // the last reading, and a second more.
      const double most_mj = 2.0 * std::max(info_.power_limit_max_w, 1000.0) * (seconds + 1.0) * 1000.0;
      if (*now < *energy_last_mj_) {
        // Below the last reading: the counter started again from 0 (driver reload, GPU reset).
        if (energy_restarts_++ == 0) {
          spdlog::warn("{}: the energy counter went back from {} to {} mJ (a driver reset): counted from its new "
                       "start; the energy between the last reading and the reset is unknown and not counted",
                       name(), *energy_last_mj_, *now);
        }
        if (static_cast<double>(*now) <= most_mj) energy_since_open_mj_ += *now;
        locks_lost_ = true;
      } else if (static_cast<double>(*now - *energy_last_mj_) > most_mj) {
        if (energy_jumps_++ == 0) {
          spdlog::warn("{}: the energy counter jumped from {} to {} mJ in {:.1f} s, more than the GPU can draw: that "
                       "interval's energy is not counted", name(), *energy_last_mj_, *now, seconds);
        }
      } else {
        energy_since_open_mj_ += *now - *energy_last_mj_;
      }
      energy_last_mj_ = now;
      energy_last_time_ = time;
      return static_cast<double>(energy_since_open_mj_) * kJoulesPerMillijoule;
    }
    case Signal::sm_clock_mhz: return nvml_.sm_clock_mhz(handle_);
    case Signal::memory_clock_mhz: return nvml_.memory_clock_mhz(handle_);
    case Signal::utilization: return nvml_.utilization(handle_).gpu_pct / 100.0;
    case Signal::memory_utilization: return nvml_.utilization(handle_).memory_pct / 100.0;
    case Signal::power_limit_min_w: return info_.power_limit_min_w;
    case Signal::power_limit_max_w: return info_.power_limit_max_w;
    case Signal::power_limit_default_w: return info_.power_limit_default_w;
    case Signal::temperature_c: return nvml_.temperature_c(handle_);
  }
  throw Error(ErrorCode::unsupported, fmt::format("{}: no signal {}", name(), describe(signal).name));
}

bool NvmlDevice::has_control(Control control) const {
  switch (control) {
    case Control::sm_clock_lock_mhz: return !info_.sm_clocks_mhz.empty();
    case Control::memory_clock_lock_mhz: return info_.memory_clocks_mhz.size() > 1;
    case Control::power_limit_w: return info_.power_limit_max_w > info_.power_limit_min_w;
  }
  return false;
}

bool NvmlDevice::can_write(Control control) const {
  return writes_allowed_ && has_control(control) && process_may_write_gpu_controls();
}

namespace {

ControlRange discrete_range(const std::vector<double>& values) {
  if (values.empty()) return {};
  const auto [low, high] = std::minmax_element(values.begin(), values.end());
  return {*low, *high, values};
}

}  // namespace

ControlRange NvmlDevice::range(Control control) const {
  switch (control) {
    case Control::sm_clock_lock_mhz: return discrete_range(info_.sm_clocks_mhz);
    case Control::memory_clock_lock_mhz: return discrete_range(info_.memory_clocks_mhz);
    case Control::power_limit_w: return {info_.power_limit_min_w, info_.power_limit_max_w, {}};
  }
  return {};
}

ControlValue NvmlDevice::read_control(Control control) {
  if (locks_lost_.exchange(false)) {
    sm_lock_mhz_.reset();
    memory_lock_mhz_.reset();
  }
  switch (control) {
    case Control::sm_clock_lock_mhz: return sm_lock_mhz_;
    case Control::memory_clock_lock_mhz: return memory_lock_mhz_;
    case Control::power_limit_w: return nvml_.power_limits(handle_).current_mw * kWattsPerMilliwatt;
  }
  return std::nullopt;
}

void NvmlDevice::write_control(Control control, ControlValue value) {
  switch (control) {
    case Control::sm_clock_lock_mhz:
      if (value) {
        if (!sm_by_application_clocks_ && !nvml_.set_locked_sm_clocks(handle_, to_mhz(*value), to_mhz(*value))) {
          sm_by_application_clocks_ = true;
        }
        if (sm_by_application_clocks_) {
          const auto memory = info_.memory_clocks_mhz.empty()
                                  ? nvml_.memory_clock_mhz(handle_)
                                  : to_mhz(*std::max_element(info_.memory_clocks_mhz.begin(), info_.memory_clocks_mhz.end()));
          nvml_.set_applications_clocks(handle_, memory, to_mhz(*value));
        }
      } else if (sm_by_application_clocks_ || !nvml_.reset_locked_sm_clocks(handle_)) {
        // Also after a crash, when a fresh process does not know which kind the GPU used.
        nvml_.reset_applications_clocks(handle_);
      }
      sm_lock_mhz_ = value;
      return;
    case Control::memory_clock_lock_mhz:
      if (value) {
        nvml_.set_locked_memory_clocks(handle_, to_mhz(*value), to_mhz(*value));
      } else {
        nvml_.reset_locked_memory_clocks(handle_);
      }
      memory_lock_mhz_ = value;
      return;
    case Control::power_limit_w: {
      const double watts = value.value_or(info_.power_limit_default_w);
      nvml_.set_power_limit_mw(handle_, static_cast<unsigned>(std::lround(watts / kWattsPerMilliwatt)));
      return;
    }
  }
}

}  // namespace gpucap::device
