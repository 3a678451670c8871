#pragma once
// The Device over the GPU twin: the same signals and controls an NVML device has.

#include <mutex>

#include "gpucap/device/device.hpp"
#include "gpucap/sim/gpu_twin.hpp"

namespace gpucap::device {

class SimDevice final : public Device {
 public:
  // `writes_permitted` = false emulates an unprivileged process (containers, clouds).
  // `guard`: held while the twin is read or written here, as SimEngine holds it while a batch runs
  // (see there); nullptr: the twin is used from one thread only.
  explicit SimDevice(sim::GpuTwin& twin, bool writes_permitted = true, std::mutex* guard = nullptr);

  [[nodiscard]] std::string name() const override;
  [[nodiscard]] bool simulated() const override { return true; }
  [[nodiscard]] bool has_signal(Signal signal) const override;
  [[nodiscard]] double read(Signal signal) override;
  [[nodiscard]] bool has_control(Control control) const override;
  [[nodiscard]] bool can_write(Control control) const override;
  [[nodiscard]] ControlRange range(Control control) const override;
  [[nodiscard]] ControlValue read_control(Control control) override;
  void write_control(Control control, ControlValue value) override;

 private:
  [[nodiscard]] std::unique_lock<std::mutex> lock() const;

  sim::GpuTwin& twin_;
  bool writes_permitted_;
  std::mutex* guard_;
};

}  // namespace gpucap::device
