#pragma once
// The simulated platform: the GPU twin in virtual time, its SimDevice and SimEngine, and a
// power meter that samples the twin's sensor at the configured rate.

#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>

#include "gpucap/runtime/pacer.hpp"
#include "gpucap/runtime/platform.hpp"
#include "gpucap/sim/gpu_twin.hpp"
#include "gpucap/sim/sim_device.hpp"
#include "gpucap/sim/sim_engine.hpp"

namespace gpucap::runtime {

// Throws Error(usage) unless 1 <= sample_hz <= 10,000.
void check_sample_hz(double sample_hz);

class SimPowerMeter final : public PowerMeter {
 public:
  // Samples every 1/sample_hz, or, with `spawned`, when each of its controller's processes exits.
  SimPowerMeter(sim::PowerSensor& sensor, double sample_hz, std::optional<sim::SpawnedSampler> spawned = std::nullopt);
  [[nodiscard]] double sample_hz() const override { return sample_hz_; }
  void collect(double end_s, const SampleSink& sink) override;

 private:
  [[nodiscard]] double sample_time_s(long long k) const;

  sim::PowerSensor& sensor_;
  double sample_hz_;
  std::optional<sim::SpawnedSampler> spawned_;
  long long next_sample_ = 1;  // sample k is taken at sample_time_s(k)
  std::deque<sim::SensorReading> readings_;
  sim::SensorReading latest_;
};

struct SimOptions {
  std::uint64_t seed = 1;
  sim::InputPipeline pipeline;   // default: inputs ready, no host-side decode
  bool autotune_new_shapes = false;  // the engine autotunes each new batch size (GpuTwin)
  double sample_hz = 100.0;      // power meter sampling rate
  // Sample as the BatchDVFS harness did, by spawning nvidia-smi (sim/spawned_sampler.hpp, timing
  // from the GPU file's host): replaces sample_hz, and its processes stall the batches.
  bool spawned_nvidia_smi = false;
  // The SM clock the twin's boost governor holds when no controller locks one (nullopt: the
  // boost clock; sim::GpuTwin::set_governor_sm_clock).
  std::optional<double> governor_sm_clock_mhz;
  bool writes_permitted = true;  // false: an unprivileged process (batch size only)
  // Virtual seconds per wall second (--pace): the engine waits for the wall clock after each
  // batch. nullopt: as fast as the host computes.
  std::optional<double> pace;
};

class SimPlatform final : public Platform {
 public:
  SimPlatform(const sim::GpuSpec& gpu, const sim::ModelSpec& model, sim::Precision precision,
              const SimOptions& options);

  [[nodiscard]] bool simulated() const override { return true; }
  [[nodiscard]] std::string description() const override;
  [[nodiscard]] Clock& clock() override { return clock_; }
  [[nodiscard]] engine::Engine& engine() override {
    return paced_ ? static_cast<engine::Engine&>(*paced_) : engine_;
  }
  [[nodiscard]] device::Device& device() override { return device_; }
  [[nodiscard]] PowerMeter& meter() override { return meter_; }
  [[nodiscard]] control::PlatformLimits controller_limits() const override;
  // The twin's sensor averaging window plus its update period: a reading covers the averaging
  // window before it and is published only at the end of its update period, so a sample taken
  // sooner than that after a change can still show the knobs before it.
  [[nodiscard]] double power_settle_s() const override;
  void settle() override;
  void wait(double seconds) override { twin_.idle(seconds); }
  [[nodiscard]] sim::GpuTwin& twin() { return twin_; }

 private:
  class VirtualClock final : public Clock {
   public:
    explicit VirtualClock(const sim::GpuTwin& twin) : twin_(twin) {}
    [[nodiscard]] double now_s() const override { return twin_.now_s(); }

   private:
    const sim::GpuTwin& twin_;
  };

  sim::GpuTwin twin_;
  // Held by the engine's batches and the device's reads and writes: serving's drain may restore
  // the GPU's settings from its own thread while a batch is still running (ServingRuntime).
  std::mutex twin_guard_;
  VirtualClock clock_;
  engine::SimEngine engine_;
  device::SimDevice device_;
  SimPowerMeter meter_;
  std::unique_ptr<PacedEngine> paced_;
};

}  // namespace gpucap::runtime
