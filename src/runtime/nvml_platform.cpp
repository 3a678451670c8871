#include "gpucap/runtime/nvml_platform.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "gpucap/core/error.hpp"
#include "gpucap/sim/catalog.hpp"

namespace gpucap::runtime {

namespace {

double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The seeds used ten DVFS levels on the P40; a real GPU gets ten spread over its clocks.
constexpr std::size_t kDvfsLevels = 10;

}  // namespace

SteadyClock::SteadyClock() : origin_s_(steady_seconds()) {}

double SteadyClock::now_s() const { return steady_seconds() - origin_s_; }

NvmlPlatform::NvmlPlatform(const NvmlPlatformOptions& options, const EngineFactory& make_engine)
    : options_(options),
      journal_(options.journal_path.empty() ? device::default_journal_path() : options.journal_path) {
  if (!(options.power_settle_s >= 0.0 && options.power_settle_s <= 60.0)) {
    throw usage_error(fmt::format("power settle time {:g} s must be between 0 and 60 s", options.power_settle_s));
  }
  nvml_ = std::make_unique<device::NvmlLibrary>(options.nvml_library);
  device_ = std::make_unique<device::NvmlDevice>(*nvml_, options.device_index, options.allow_gpu_control);
  auto* gpu = device_.get();
  sampler_ = std::make_unique<PowerSampler>([gpu] { return gpu->read(device::Signal::power_w); },
                                            [this] { return clock_.now_s(); }, options.sample_hz);
  meter_ = std::make_unique<SampledPowerMeter>(*sampler_);
  engine_ = make_engine([this] { return clock_.now_s(); });
}

// The sampler reads through the device: it stops before the device and NVML go.
NvmlPlatform::~NvmlPlatform() {
  meter_.reset();
  sampler_.reset();
}

std::string NvmlPlatform::description() const {
  const auto& info = device_->info();
  return fmt::format("{} (GPU {}, {}) running {}", info.name, info.index, info.uuid, engine_->name());
}

control::PlatformLimits NvmlPlatform::controller_limits() const {
  auto clocks = device_->info().sm_clocks_mhz;
  std::sort(clocks.begin(), clocks.end());
  const auto& info = device_->info();
  return control::PlatformLimits{sim::spread_levels(clocks, kDvfsLevels), clocks, info.power_limit_min_w,
                                 info.power_limit_max_w};
}

void NvmlPlatform::wait(double seconds) {
  if (seconds > 0.0) std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
}

void NvmlPlatform::settle() {
  std::this_thread::sleep_for(std::chrono::duration<double>(options_.power_settle_s));
}

std::unique_ptr<device::ControlSession> NvmlPlatform::open_control_session() {
  return std::make_unique<device::ControlSession>(*device_, journal_, device_->info().uuid);
}

}  // namespace gpucap::runtime
