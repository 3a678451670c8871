#pragma once
// The Device interface: named signals (read) and controls (write), in SI-style units with the
// unit in the name, GEOPM-style. The simulated device and the NVML device implement it; the
// Runner and the CLI only see this.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpucap::device {

enum class Signal {
  power_w,                // GPU_POWER: latest board power reading
  energy_j,               // GPU_ENERGY: energy counter since the device was opened
  sm_clock_mhz,           // GPU_CORE_FREQUENCY_STATUS
  memory_clock_mhz,       // GPU_MEMORY_FREQUENCY_STATUS
  utilization,            // GPU_UTILIZATION, 0..1
  memory_utilization,     // GPU_MEMORY_UTILIZATION, 0..1: share of time the memory was read or written
  power_limit_min_w,      // GPU_POWER_LIMIT_MIN_AVAIL
  power_limit_max_w,      // GPU_POWER_LIMIT_MAX_AVAIL
  power_limit_default_w,  // GPU_POWER_LIMIT_DEFAULT
  temperature_c,          // GPU_TEMPERATURE: GPU die temperature (real GPUs; the twin has none)
};

enum class Control {
  sm_clock_lock_mhz,      // GPU_CORE_FREQUENCY_LOCK_CONTROL (nullopt: unlocked)
  memory_clock_lock_mhz,  // GPU_MEMORY_FREQUENCY_LOCK_CONTROL (nullopt: unlocked)
  power_limit_w,          // GPU_POWER_LIMIT_CONTROL (nullopt: board default)
};

struct NameAndUnit {
  std::string_view name;
  std::string_view unit;
  std::string_view description;
};

[[nodiscard]] NameAndUnit describe(Signal signal);
[[nodiscard]] NameAndUnit describe(Control control);
[[nodiscard]] const std::vector<Signal>& all_signals();
[[nodiscard]] const std::vector<Control>& all_controls();

// Value of a control: a number, or nullopt for "unlocked / default".
using ControlValue = std::optional<double>;

struct ControlRange {
  double min = 0.0;
  double max = 0.0;
  std::vector<double> supported;  // discrete settings where the hardware has them; empty = continuous
};

class Device {
 public:
  Device() = default;
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;
  virtual ~Device() = default;

  [[nodiscard]] virtual std::string name() const = 0;
  [[nodiscard]] virtual bool simulated() const = 0;

  [[nodiscard]] virtual bool has_signal(Signal signal) const = 0;
  // Throws Error(unsupported) for a signal the device lacks, Error(device) on failure.
  [[nodiscard]] virtual double read(Signal signal) = 0;

  [[nodiscard]] virtual bool has_control(Control control) const = 0;
  [[nodiscard]] virtual bool can_write(Control control) const = 0;
  [[nodiscard]] virtual ControlRange range(Control control) const = 0;
  [[nodiscard]] virtual ControlValue read_control(Control control) = 0;
  // Writes without checks; use ControlSession, which validates, skips no-op writes and restores.
  virtual void write_control(Control control, ControlValue value) = 0;
};

}  // namespace gpucap::device
