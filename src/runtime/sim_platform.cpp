#include "gpucap/runtime/sim_platform.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "gpucap/core/error.hpp"

namespace gpucap::runtime {

void check_sample_hz(double sample_hz) {
  if (!(sample_hz >= 1.0 && sample_hz <= 10000.0)) {
    throw usage_error(fmt::format("sampling rate {:g} Hz must be between 1 and 10000 Hz", sample_hz));
  }
}

namespace {

constexpr double kSameInstantS = 1e-9;

std::optional<sim::SpawnedSampler> spawned_sampler(const sim::GpuSpec& gpu, const SimOptions& options) {
  if (!options.spawned_nvidia_smi) return std::nullopt;
  return sim::SpawnedSampler{gpu.host.nvidia_smi_process_s, gpu.host.nvidia_smi_stall_s};
}

}  // namespace

SimPowerMeter::SimPowerMeter(sim::PowerSensor& sensor, double sample_hz, std::optional<sim::SpawnedSampler> spawned)
    : sensor_(sensor), sample_hz_(sample_hz), spawned_(spawned), latest_(sensor.latest()) {
  if (spawned_) {
    sim::check_spawned_sampler(*spawned_);
    sample_hz_ = 1.0 / spawned_->period_s();
  } else {
    check_sample_hz(sample_hz);
  }
}

double SimPowerMeter::sample_time_s(long long k) const {
  return spawned_ ? spawned_->reading_time_s(k - 1) : static_cast<double>(k) / sample_hz_;
}

void SimPowerMeter::collect(double end_s, const SampleSink& sink) {
  for (const auto& reading : sensor_.take_readings()) readings_.push_back(reading);
  // Sample every 1/rate up to end_s; each sample returns the sensor's latest reading, as an
  // NVML query would (several samples may see the same reading).
  while (true) {
    const double t = sample_time_s(next_sample_);
    if (t > end_s) break;
    // Reading and sample times are both multiples of a period, computed apart: a reading
    // published at the sample's instant (within rounding) is the latest one.
    while (!readings_.empty() && readings_.front().time_s <= t + kSameInstantS) {
      latest_ = readings_.front();
      readings_.pop_front();
    }
    sink(PowerSample{t, latest_.power_w});
    ++next_sample_;
  }
}

SimPlatform::SimPlatform(const sim::GpuSpec& gpu, const sim::ModelSpec& model, sim::Precision precision,
                         const SimOptions& options)
    : twin_(gpu, model, precision, options.seed, options.pipeline),
      clock_(twin_),
      engine_(twin_, &twin_guard_),
      device_(twin_, options.writes_permitted, &twin_guard_),
      meter_(twin_.sensor(), options.sample_hz, spawned_sampler(gpu, options)) {
  twin_.set_autotune_new_shapes(options.autotune_new_shapes);
  twin_.set_spawned_sampler(spawned_sampler(gpu, options));
  twin_.set_governor_sm_clock(options.governor_sm_clock_mhz);
  if (options.pace) {
    paced_ = std::make_unique<PacedEngine>(engine_, [this] { return twin_.now_s(); }, Pacer(*options.pace));
  }
}

std::string SimPlatform::description() const {
  const auto& pipeline = twin_.pipeline();
  const auto input = pipeline.mode == sim::PipelineMode::none
                         ? std::string()
                         : fmt::format(", {} input pipeline at {:.2f} ms/image", sim::to_string(pipeline.mode),
                                       pipeline.seconds_per_image * 1e3);
  const auto autotune = twin_.autotune_new_shapes() ? std::string(", autotuning each new batch size") : std::string();
  const auto sampler = twin_.spawned_sampler() ? std::string(", sampled by spawned nvidia-smi") : std::string();
  return fmt::format("simulated {} running {} ({}{}{}{})", twin_.gpu().name, twin_.model().id,
                     sim::to_string(twin_.precision()), input, autotune, sampler);
}

double SimPlatform::power_settle_s() const {
  const auto& sensor = twin_.gpu().sensor;
  return sensor.averaging_window_s + sensor.hold_s + sensor.update_period_s;
}

void SimPlatform::settle() { twin_.idle(power_settle_s()); }

control::PlatformLimits SimPlatform::controller_limits() const {
  const auto& gpu = twin_.gpu();
  return control::PlatformLimits{gpu.dvfs_levels_mhz, gpu.sm_clocks_mhz, gpu.power_limit_min_w, gpu.power_limit_max_w};
}

}  // namespace gpucap::runtime
