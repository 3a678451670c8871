#pragma once
// The real platform: an NVIDIA GPU through NVML, a real inference engine (the LibTorch engine),
// the steady clock and a power sampler thread. The Runner and the controllers are the same as on
// the twin; only this differs.

#include <functional>
#include <memory>
#include <string>

#include "gpucap/device/nvml_device.hpp"
#include "gpucap/device/restore_journal.hpp"
#include "gpucap/runtime/platform.hpp"
#include "gpucap/runtime/power_sampler.hpp"

namespace gpucap::runtime {

// Seconds since the clock was made, from std::chrono::steady_clock.
class SteadyClock final : public Clock {
 public:
  SteadyClock();
  [[nodiscard]] double now_s() const override;

 private:
  double origin_s_;
};

struct NvmlPlatformOptions {
  std::string nvml_library = device::kDefaultNvmlLibrary;
  unsigned device_index = 0;
  bool allow_gpu_control = false;  // without it, controllers that lock clocks or set the limit refuse
  double sample_hz = 100.0;
  // How long the power reading takes to show a change: NVML's power reading is a 1-s average on
  // Ampere and later boards (instantaneous before), so 1 s is safe on all.
  double power_settle_s = 1.0;
  std::string journal_path;  // empty: device::default_journal_path()
};

using EngineFactory = std::function<std::unique_ptr<engine::Engine>(std::function<double()> now_s)>;

class NvmlPlatform final : public Platform {
 public:
  // Opens NVML and the GPU, starts the sampler, then builds the engine with the platform's clock.
  // Errors as NvmlLibrary, NvmlDevice and the engine throw them; Error(usage) for bad options.
  NvmlPlatform(const NvmlPlatformOptions& options, const EngineFactory& make_engine);
  ~NvmlPlatform() override;

  [[nodiscard]] bool simulated() const override { return false; }
  [[nodiscard]] std::string description() const override;
  [[nodiscard]] Clock& clock() override { return clock_; }
  [[nodiscard]] engine::Engine& engine() override { return *engine_; }
  [[nodiscard]] device::Device& device() override { return *device_; }
  [[nodiscard]] PowerMeter& meter() override { return *meter_; }
  [[nodiscard]] control::PlatformLimits controller_limits() const override;
  [[nodiscard]] double power_settle_s() const override { return options_.power_settle_s; }
  void settle() override;
  void wait(double seconds) override;
  [[nodiscard]] std::unique_ptr<device::ControlSession> open_control_session() override;

  [[nodiscard]] const device::NvmlDevice& gpu() const { return *device_; }
  [[nodiscard]] const PowerSampler& sampler() const { return *sampler_; }

 private:
  NvmlPlatformOptions options_;
  SteadyClock clock_;
  std::unique_ptr<device::NvmlLibrary> nvml_;
  std::unique_ptr<device::NvmlDevice> device_;
  std::unique_ptr<PowerSampler> sampler_;
  std::unique_ptr<SampledPowerMeter> meter_;
  std::unique_ptr<engine::Engine> engine_;
  device::RestoreJournal journal_;
};

}  // namespace gpucap::runtime
