#include "gpucap/monitor/monitor.hpp"

#include <fmt/format.h>

#include <chrono>

#include "gpucap/core/error.hpp"

namespace gpucap::monitor {

using device::Signal;

SecondsClock steady_seconds_clock() {
  return [] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  };
}

const char* to_string(EnergySource source) {
  switch (source) {
    case EnergySource::counter: return "counter";
    case EnergySource::integrated: return "integrated";
  }
  return "?";
}

Monitor::Monitor(std::vector<device::Device*> devices, SecondsClock clock)
    : devices_(std::move(devices)), clock_(std::move(clock)) {
  if (devices_.empty()) throw usage_error("the monitor needs at least one GPU");
  const double now_s = clock_();
  for (auto* device : devices_) {
    Track track;
    if (device->has_signal(Signal::energy_j)) {
      track.counter_at_start_j = device->read(Signal::energy_j);
    } else if (device->has_signal(Signal::power_w)) {
      track.source = EnergySource::integrated;
      track.last_power_w = device->read(Signal::power_w);
      track.last_sample_s = now_s;
    } else {
      throw Error(ErrorCode::unsupported, fmt::format("{} reports neither energy nor power", device->name()));
    }
    tracks_.push_back(track);
  }
}

void Monitor::sample_locked(double now_s) {
  for (std::size_t i = 0; i < devices_.size(); ++i) {
    auto& track = tracks_[i];
    if (track.source != EnergySource::integrated) continue;
    const double power_w = devices_[i]->read(Signal::power_w);
    track.integrated_j += 0.5 * (track.last_power_w + power_w) * (now_s - track.last_sample_s);
    track.last_power_w = power_w;
    track.last_sample_s = now_s;
  }
}

std::vector<double> Monitor::energy_locked(double now_s) {
  sample_locked(now_s);
  std::vector<double> energy_j;
  energy_j.reserve(devices_.size());
  for (std::size_t i = 0; i < devices_.size(); ++i) {
    const auto& track = tracks_[i];
    energy_j.push_back(track.source == EnergySource::counter
                           ? devices_[i]->read(Signal::energy_j) - track.counter_at_start_j
                           : track.integrated_j);
  }
  return energy_j;
}

void Monitor::sample() {
  const std::lock_guard lock(mutex_);
  sample_locked(clock_());
}

void Monitor::begin_window(const std::string& name) {
  const std::lock_guard lock(mutex_);
  if (open_.contains(name)) throw usage_error(fmt::format("measurement window '{}' is already open", name));
  const double now_s = clock_();
  open_.emplace(name, OpenWindow{now_s, energy_locked(now_s)});
}

WindowMeasurement Monitor::end_window(const std::string& name) {
  const std::lock_guard lock(mutex_);
  const auto it = open_.find(name);
  if (it == open_.end()) throw usage_error(fmt::format("no measurement window '{}' is open", name));
  const double now_s = clock_();
  const auto end_j = energy_locked(now_s);
  WindowMeasurement m;
  m.name = name;
  m.time_s = now_s - it->second.start_s;
  for (std::size_t i = 0; i < devices_.size(); ++i) {
    m.energy_j.push_back(end_j[i] - it->second.start_j[i]);
    m.sources.push_back(tracks_[i].source);
    m.total_energy_j += m.energy_j.back();
    m.simulated = m.simulated || devices_[i]->simulated();
  }
  open_.erase(it);
  return m;
}

bool Monitor::window_open(const std::string& name) const {
  const std::lock_guard lock(mutex_);
  return open_.contains(name);
}

std::vector<std::string> Monitor::open_windows() const {
  const std::lock_guard lock(mutex_);
  std::vector<std::string> names;
  for (const auto& [name, window] : open_) names.push_back(name);
  return names;
}

std::vector<EnergySource> Monitor::sources() const {
  std::vector<EnergySource> out;
  for (const auto& track : tracks_) out.push_back(track.source);
  return out;
}

std::vector<double> Monitor::energy_since_start_j() {
  const std::lock_guard lock(mutex_);
  return energy_locked(clock_());
}

bool Monitor::simulated() const {
  for (const auto* device : devices_) {
    if (device->simulated()) return true;
  }
  return false;
}

}  // namespace gpucap::monitor
