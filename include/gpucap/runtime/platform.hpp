#pragma once
// A platform bundles what the Runner drives: a clock, an engine, a device and a power meter.
// The simulated platform and the real one differ only here.

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "gpucap/control/registry.hpp"
#include "gpucap/core/window_stats.hpp"
#include "gpucap/device/control_session.hpp"
#include "gpucap/device/device.hpp"
#include "gpucap/engine/engine.hpp"

namespace gpucap::runtime {

class Clock {
 public:
  virtual ~Clock() = default;
  [[nodiscard]] virtual double now_s() const = 0;
};

// Reads the board power at a fixed sampling rate.
class PowerMeter {
 public:
  using SampleSink = std::function<void(const PowerSample&)>;

  virtual ~PowerMeter() = default;
  [[nodiscard]] virtual double sample_hz() const = 0;
  // Hands every sample taken after the previous call and up to end_s to `sink`, oldest first.
  // Samples are streamed, never stored in bulk, so memory does not grow with the window.
  virtual void collect(double end_s, const SampleSink& sink) = 0;
};

class Platform {
 public:
  Platform() = default;
  Platform(const Platform&) = delete;
  Platform& operator=(const Platform&) = delete;
  virtual ~Platform() = default;

  [[nodiscard]] virtual bool simulated() const = 0;
  [[nodiscard]] virtual std::string description() const = 0;
  [[nodiscard]] virtual Clock& clock() = 0;
  [[nodiscard]] virtual engine::Engine& engine() = 0;
  [[nodiscard]] virtual device::Device& device() = 0;
  [[nodiscard]] virtual PowerMeter& meter() = 0;
  [[nodiscard]] virtual control::PlatformLimits controller_limits() const = 0;
  // How long after a change of knobs the power reading still shows the old ones: board sensors
  // average over a window (about 1 s on GA102 boards).
  [[nodiscard]] virtual double power_settle_s() const { return 0.0; }
  // Waits power_settle_s(), idle at the knobs just applied, so that a job's first samples do not
  // report the GPU as it was before gpucap configured it.
  virtual void settle() {}
  // Lets `seconds` pass with nothing running (the GPU idle at its current knobs).
  virtual void wait(double seconds) = 0;
  // The session every write of a run goes through. A real GPU's is journaled, so that a killed
  // run's changes are undone by the next gpucap start (device/restore_journal.hpp).
  [[nodiscard]] virtual std::unique_ptr<device::ControlSession> open_control_session() {
    return std::make_unique<device::ControlSession>(device());
  }
};

}  // namespace gpucap::runtime
