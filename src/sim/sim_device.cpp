#include "gpucap/sim/sim_device.hpp"

#include <fmt/format.h>

#include "gpucap/core/error.hpp"

namespace gpucap::device {

SimDevice::SimDevice(sim::GpuTwin& twin, bool writes_permitted, std::mutex* guard)
    : twin_(twin), writes_permitted_(writes_permitted), guard_(guard) {}

std::unique_lock<std::mutex> SimDevice::lock() const {
  return guard_ ? std::unique_lock(*guard_) : std::unique_lock<std::mutex>();
}

std::string SimDevice::name() const { return fmt::format("{} (simulated)", twin_.gpu().name); }

// The twin models power, clocks and time, not heat; its memory traffic only in its MPS model.
bool SimDevice::has_signal(Signal signal) const {
  return signal != Signal::temperature_c && signal != Signal::memory_utilization;
}

double SimDevice::read(Signal signal) {
  const auto held = lock();
  const auto& gpu = twin_.gpu();
  switch (signal) {
    case Signal::power_w: return twin_.sensor().latest().power_w;
    case Signal::energy_j: return twin_.energy_j();
    case Signal::sm_clock_mhz: return twin_.sm_clock_mhz();
    case Signal::memory_clock_mhz: return twin_.memory_clock_mhz();
    case Signal::utilization: return twin_.utilization();
    case Signal::power_limit_min_w: return gpu.power_limit_min_w;
    case Signal::power_limit_max_w: return gpu.power_limit_max_w;
    case Signal::power_limit_default_w: return gpu.power_limit_default_w;
    case Signal::temperature_c:
    case Signal::memory_utilization: break;
  }
  throw Error(ErrorCode::unsupported,
              fmt::format("{}: the twin has no signal {}", name(), describe(signal).name));
}

bool SimDevice::has_control(Control /*control*/) const { return true; }

bool SimDevice::can_write(Control /*control*/) const { return writes_permitted_; }

ControlRange SimDevice::range(Control control) const {
  const auto& gpu = twin_.gpu();
  switch (control) {
    case Control::sm_clock_lock_mhz:
      return {gpu.min_sm_clock_mhz(), gpu.max_sm_clock_mhz(), gpu.sm_clocks_mhz};
    case Control::memory_clock_lock_mhz:
      return {gpu.memory_clocks_mhz.front(), gpu.max_memory_clock_mhz(), gpu.memory_clocks_mhz};
    case Control::power_limit_w:
      return {gpu.power_limit_min_w, gpu.power_limit_max_w, {}};
  }
  throw Error(ErrorCode::unsupported, fmt::format("{}: unknown control", name()));
}

ControlValue SimDevice::read_control(Control control) {
  const auto held = lock();
  switch (control) {
    case Control::sm_clock_lock_mhz: return twin_.sm_clock_lock_mhz();
    case Control::memory_clock_lock_mhz: return twin_.memory_clock_lock_mhz();
    case Control::power_limit_w:
      return twin_.power_limit_set() ? ControlValue(twin_.power_limit_w()) : std::nullopt;
  }
  throw Error(ErrorCode::unsupported, fmt::format("{}: unknown control", name()));
}

void SimDevice::write_control(Control control, ControlValue value) {
  if (!writes_permitted_) {
    throw Error(ErrorCode::device, fmt::format("{}: write of {} refused (no permission)", name(), describe(control).name));
  }
  const auto held = lock();
  switch (control) {
    case Control::sm_clock_lock_mhz: twin_.lock_sm_clock(value); return;
    case Control::memory_clock_lock_mhz: twin_.lock_memory_clock(value); return;
    case Control::power_limit_w: twin_.set_power_limit(value); return;
  }
}

}  // namespace gpucap::device
