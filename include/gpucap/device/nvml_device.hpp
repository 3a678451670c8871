#pragma once
// One NVIDIA GPU through NVML, as a Device: NVML's milliwatts, millijoules and percent become
// watts, joules and fractions here, so nothing above this layer sees NVML's units.
//
// NVML offers no query for locked clocks, so the SM and memory locks read as "unlocked" until
// this process sets them, and are restored by resetting the lock (what `nvidia-smi -rgc` and
// `-rmc` do). GPUs before Volta cannot lock clocks: there the SM clock control sets application
// clocks (at the highest memory clock) and is restored with nvmlDeviceResetApplicationsClocks. Writing any control needs root (NVML answers NO_PERMISSION otherwise); can_write()
// says so up front, so an unprivileged process refuses before it writes anything.

#include <atomic>
#include <cstdint>
#include <chrono>
#include <mutex>
#include <optional>
#include <string>

#include "gpucap/device/device.hpp"
#include "gpucap/device/nvml_library.hpp"

namespace gpucap::device {

// What `gpucap devices` shows of a GPU.
struct NvmlDeviceInfo {
  unsigned index = 0;
  std::string name;
  std::string uuid;
  std::string pci_bus_id;
  double power_limit_min_w = 0.0;
  double power_limit_max_w = 0.0;
  double power_limit_default_w = 0.0;
  double power_limit_w = 0.0;
  std::vector<double> memory_clocks_mhz;  // supported, highest first (NVML's order)
  std::vector<double> sm_clocks_mhz;      // supported at the highest memory clock, highest first
  bool energy_counter = false;
  bool instant_power = false;  // power_w is NVML's instantaneous reading (else its 1-s average)
};

class NvmlDevice final : public Device {
 public:
  // Throws Error(usage) for an index that does not exist; NVML failures as NvmlLibrary does.
  // `writes_allowed` = false (no --allow-gpu-control) makes every control read-only, whatever
  // the process's privileges.
  NvmlDevice(const NvmlLibrary& nvml, unsigned index, bool writes_allowed = true);

  [[nodiscard]] std::string name() const override { return info_.name; }
  [[nodiscard]] bool simulated() const override { return false; }
  [[nodiscard]] bool has_signal(Signal signal) const override;
  [[nodiscard]] double read(Signal signal) override;
  [[nodiscard]] bool has_control(Control control) const override;
  [[nodiscard]] bool can_write(Control control) const override;
  [[nodiscard]] ControlRange range(Control control) const override;
  [[nodiscard]] ControlValue read_control(Control control) override;
  // Locks a clock at exactly `value` MHz (min = max) or resets it (nullopt); sets the power limit
  // to `value` W or back to the board default (nullopt).
  void write_control(Control control, ControlValue value) override;

  [[nodiscard]] const NvmlDeviceInfo& info() const { return info_; }

 private:
  const NvmlLibrary& nvml_;
  NvmlHandle handle_;
  bool writes_allowed_;
  NvmlDeviceInfo info_;
  // The energy counter: NVML's total since the driver loaded, which a driver reload or GPU reset
  // starts again from 0. energy_j counts from the open and never goes backwards: a reading below
  // the last one is taken as such a restart (the counter counted it since; the energy between
  // the last reading and the restart is unknown and not counted), and a rise larger than twice the
  // highest power limit could draw since the last reading is not believed (not counted either).
  // Each of the two is logged once. Reads may come from several threads (a sampler and an exporter).
  std::mutex energy_mutex_;
  std::optional<std::uint64_t> energy_last_mj_;  // the last raw reading
  std::chrono::steady_clock::time_point energy_last_time_;
  std::uint64_t energy_since_open_mj_ = 0;
  std::size_t energy_restarts_ = 0;
  std::size_t energy_jumps_ = 0;
  // Set when the counter restarted: a driver reset also cleared the clock locks, so the locks
  // recorded below are forgotten at the next read_control.
  std::atomic<bool> locks_lost_{false};
  std::optional<double> sm_lock_mhz_;
  bool sm_by_application_clocks_ = false;  // the GPU refused a clock lock: application clocks
  std::optional<double> memory_lock_mhz_;
};

// Whether this process may write GPU controls: NVML lets only root lock clocks or set the
// power limit.
[[nodiscard]] bool process_may_write_gpu_controls();

}  // namespace gpucap::device
