#include "gpucap/device/device.hpp"

namespace gpucap::device {

NameAndUnit describe(Signal signal) {
  switch (signal) {
    case Signal::power_w: return {"GPU_POWER", "W", "board power, latest sensor reading"};
    case Signal::energy_j: return {"GPU_ENERGY", "J", "energy since the device was opened"};
    case Signal::sm_clock_mhz: return {"GPU_CORE_FREQUENCY_STATUS", "MHz", "current SM clock"};
    case Signal::memory_clock_mhz: return {"GPU_MEMORY_FREQUENCY_STATUS", "MHz", "current memory clock"};
    case Signal::utilization: return {"GPU_UTILIZATION", "1", "share of time kernels ran, 0..1"};
    case Signal::memory_utilization:
      return {"GPU_MEMORY_UTILIZATION", "1", "share of time device memory was read or written, 0..1"};
    case Signal::power_limit_min_w: return {"GPU_POWER_LIMIT_MIN_AVAIL", "W", "lowest settable power limit"};
    case Signal::power_limit_max_w: return {"GPU_POWER_LIMIT_MAX_AVAIL", "W", "highest settable power limit"};
    case Signal::power_limit_default_w: return {"GPU_POWER_LIMIT_DEFAULT", "W", "board default power limit"};
    case Signal::temperature_c: return {"GPU_TEMPERATURE", "C", "GPU die temperature"};
  }
  return {"?", "?", "?"};
}

NameAndUnit describe(Control control) {
  switch (control) {
    case Control::sm_clock_lock_mhz:
      return {"GPU_CORE_FREQUENCY_LOCK_CONTROL", "MHz", "locked SM clock (unset: GPU boost governor)"};
    case Control::memory_clock_lock_mhz:
      return {"GPU_MEMORY_FREQUENCY_LOCK_CONTROL", "MHz", "locked memory clock (unset: driver default)"};
    case Control::power_limit_w:
      return {"GPU_POWER_LIMIT_CONTROL", "W", "board power limit enforced by firmware (unset: default)"};
  }
  return {"?", "?", "?"};
}

const std::vector<Signal>& all_signals() {
  static const std::vector<Signal> signals = {
      Signal::power_w,           Signal::energy_j,          Signal::sm_clock_mhz,
      Signal::memory_clock_mhz,  Signal::utilization,       Signal::memory_utilization, Signal::power_limit_min_w,
      Signal::power_limit_max_w, Signal::power_limit_default_w, Signal::temperature_c};
  return signals;
}

const std::vector<Control>& all_controls() {
  static const std::vector<Control> controls = {Control::sm_clock_lock_mhz, Control::memory_clock_lock_mhz,
                                                Control::power_limit_w};
  return controls;
}

}  // namespace gpucap::device
