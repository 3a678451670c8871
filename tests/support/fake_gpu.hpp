#pragma once
// A Device whose readings the test sets, and a clock the test moves: for code that measures a
// GPU (the BSO client's meter) without the twin's physics in the way.

#include <string>

#include "gpucap/core/error.hpp"
#include "gpucap/device/device.hpp"

namespace gpucap::test {

class FakeGpu final : public device::Device {
 public:
  explicit FakeGpu(std::string name = "Fake GPU", bool energy_counter = true, double power_limit_max_w = 300.0)
      : name_(std::move(name)), energy_counter_(energy_counter), power_limit_max_w_(power_limit_max_w) {}

  double energy_j = 0.0;
  double power_w = 0.0;

  [[nodiscard]] std::string name() const override { return name_; }
  [[nodiscard]] bool simulated() const override { return false; }
  [[nodiscard]] bool has_signal(device::Signal signal) const override {
    if (signal == device::Signal::energy_j) return energy_counter_;
    return signal == device::Signal::power_w || signal == device::Signal::power_limit_max_w;
  }
  [[nodiscard]] double read(device::Signal signal) override {
    if (!has_signal(signal)) throw Error(ErrorCode::unsupported, "fake GPU: no such signal");
    if (signal == device::Signal::energy_j) return energy_j;
    if (signal == device::Signal::power_w) return power_w;
    return power_limit_max_w_;
  }
  [[nodiscard]] bool has_control(device::Control /*control*/) const override { return false; }
  [[nodiscard]] bool can_write(device::Control /*control*/) const override { return false; }
  [[nodiscard]] device::ControlRange range(device::Control /*control*/) const override {
    return {100.0, power_limit_max_w_, {}};
  }
  [[nodiscard]] device::ControlValue read_control(device::Control /*control*/) override { return std::nullopt; }
  void write_control(device::Control /*control*/, device::ControlValue /*value*/) override {
    throw Error(ErrorCode::device, "fake GPU: read-only");
  }

 private:
  std::string name_;
  bool energy_counter_;
  double power_limit_max_w_;
};

// Seconds that move only when the test says so.
struct FakeClock {
  double now_s = 0.0;
  [[nodiscard]] auto function() {
    return [this] { return now_s; };
  }
};

}  // namespace gpucap::test
