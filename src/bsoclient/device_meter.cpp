#include "gpucap/bsoclient/device_meter.hpp"

#include <fmt/format.h>

#include <chrono>
#include <cmath>

#include "gpucap/core/error.hpp"

namespace gpucap::bsoclient {

using device::Signal;

SecondsClock steady_seconds_clock() {
  return [] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  };
}

namespace {

// The board's largest settable power limit: the signal where the device reports it, else the
// control's range (both are NVML's power-management limit constraints on a real GPU).
double max_power_limit_w(device::Device& device) {
  if (device.has_signal(Signal::power_limit_max_w)) return device.read(Signal::power_limit_max_w);
  return device.range(device::Control::power_limit_w).max;
}

}  // namespace

GpuConfig gpu_config_of(const std::vector<device::Device*>& devices) {
  if (devices.empty()) throw usage_error("the batch-size optimizer needs at least one GPU to measure");
  GpuConfig config;
  config.gpu_model = devices.front()->name();
  for (auto* device : devices) {
    if (device->name() != config.gpu_model) {
      throw usage_error(fmt::format("the GPUs must all be of one model ('{}' and '{}'): the optimizer prices "
                                    "time at one GPU's largest power limit",
                                    config.gpu_model, device->name()));
    }
  }
  config.number_of_gpus = static_cast<int>(devices.size());
  config.max_power_w = std::floor(max_power_limit_w(*devices.front())) * config.number_of_gpus;
  return config;
}

DeviceMeter::DeviceMeter(std::vector<device::Device*> devices, SecondsClock clock)
    : devices_(std::move(devices)), clock_(std::move(clock)) {
  if (devices_.empty()) throw usage_error("the meter needs at least one GPU");
  for (auto* device : devices_) {
    Track track;
    track.counter = device->has_signal(Signal::energy_j);
    if (!track.counter && !device->has_signal(Signal::power_w)) {
      throw Error(ErrorCode::unsupported, fmt::format("{} reports neither energy nor power", device->name()));
    }
    tracks_.push_back(track);
  }
}

void DeviceMeter::begin_window() {
  const double now_s = clock_();
  for (std::size_t i = 0; i < devices_.size(); ++i) {
    auto& track = tracks_[i];
    if (track.counter) {
      track.window_start_j = devices_[i]->read(Signal::energy_j);
    } else {
      track.integrated_j = 0.0;
      track.last_power_w = devices_[i]->read(Signal::power_w);
      track.last_sample_s = now_s;
    }
  }
  window_start_s_ = now_s;
  open_ = true;
}

void DeviceMeter::sample_power(Track& track, device::Device& device, double now_s) {
  const double power_w = device.read(Signal::power_w);
  track.integrated_j += 0.5 * (track.last_power_w + power_w) * (now_s - track.last_sample_s);
  track.last_power_w = power_w;
  track.last_sample_s = now_s;
}

void DeviceMeter::sample() {
  if (!open_) return;
  const double now_s = clock_();
  for (std::size_t i = 0; i < devices_.size(); ++i) {
    if (!tracks_[i].counter) sample_power(tracks_[i], *devices_[i], now_s);
  }
}

Measurement DeviceMeter::end_window() {
  if (!open_) throw usage_error("end_window without begin_window");
  const double now_s = clock_();
  Measurement m;
  m.time_s = now_s - window_start_s_;
  for (std::size_t i = 0; i < devices_.size(); ++i) {
    auto& track = tracks_[i];
    if (track.counter) {
      m.energy_j += devices_[i]->read(Signal::energy_j) - track.window_start_j;
    } else {
      sample_power(track, *devices_[i], now_s);
      m.energy_j += track.integrated_j;
    }
  }
  open_ = false;
  return m;
}

bool DeviceMeter::simulated() const {
  for (const auto* device : devices_) {
    if (device->simulated()) return true;
  }
  return false;
}

}  // namespace gpucap::bsoclient
