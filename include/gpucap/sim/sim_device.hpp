#pragma once
// The Device over the GPU twin: the same signals and controls an NVML device has.

#include "gpucap/device/device.hpp"
#include "gpucap/sim/gpu_twin.hpp"

namespace gpucap::device {

class SimDevice final : public Device {
 public:
  // `writes_permitted` = false emulates an unprivileged process (containers, clouds).
  explicit SimDevice(sim::GpuTwin& twin, bool writes_permitted = true);

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
  sim::GpuTwin& twin_;
  bool writes_permitted_;
};

}  // namespace gpucap::device
