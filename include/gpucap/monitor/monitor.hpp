#pragma once
// The monitor API: time and GPU energy of named measurement windows, as Zeus's ZeusMonitor
// measures them (begin_window(name) / end_window(name)), over a set of gpucap Devices — NVML's
// GPUs, the twin, or the fake NVML of the tests alike. Windows may nest and overlap, and any
// thread may open or close them.
//
// Energy comes from a GPU's energy counter where it has one (NVML from Volta on, the twin) and is
// otherwise the integral of its power readings (trapezoids between samples): call sample() often
// inside a window, or let a sampling loop do it. Each measurement says which source each GPU's
// energy came from. The clock is injected, so the twin's virtual time drives simulated runs and
// tests are exact.

#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "gpucap/device/device.hpp"

namespace gpucap::monitor {

// Seconds on some monotonic scale; only differences are used.
using SecondsClock = std::function<double()>;
// std::chrono::steady_clock, for real GPUs.
[[nodiscard]] SecondsClock steady_seconds_clock();

enum class EnergySource {
  counter,     // the GPU's energy counter (GPU_ENERGY)
  integrated,  // power readings integrated between samples
};
[[nodiscard]] const char* to_string(EnergySource source);

struct WindowMeasurement {
  std::string name;
  double time_s = 0.0;
  std::vector<double> energy_j;        // per GPU, in the monitor's order
  std::vector<EnergySource> sources;   // per GPU
  double total_energy_j = 0.0;         // all GPUs together
  bool simulated = false;              // some GPU is the twin: label every figure simulated
};

class Monitor {
 public:
  // `devices`: the GPUs to measure (not owned; they must outlive the monitor, and nothing else may
  // read them while the monitor does unless the Device is thread-safe). Error(usage) for none,
  // Error(unsupported) for a device with neither energy nor power.
  Monitor(std::vector<device::Device*> devices, SecondsClock clock);

  // Error(usage) if a window of this name is open.
  void begin_window(const std::string& name);
  // Error(usage) without an open window of this name.
  WindowMeasurement end_window(const std::string& name);
  // Brings the integrals of GPUs without a counter up to now. A no-op when every GPU has one.
  void sample();

  [[nodiscard]] bool window_open(const std::string& name) const;
  [[nodiscard]] std::vector<std::string> open_windows() const;
  [[nodiscard]] std::vector<EnergySource> sources() const;
  // Energy of each GPU since the monitor was made (for exporters' counters).
  [[nodiscard]] std::vector<double> energy_since_start_j();
  [[nodiscard]] bool simulated() const;
  [[nodiscard]] const std::vector<device::Device*>& devices() const noexcept { return devices_; }
  [[nodiscard]] double now_s() const { return clock_(); }

 private:
  struct Track {
    EnergySource source = EnergySource::counter;
    double counter_at_start_j = 0.0;  // counter GPUs: the reading when the monitor was made
    double integrated_j = 0.0;        // power-only GPUs: energy since the monitor was made
    double last_power_w = 0.0;
    double last_sample_s = 0.0;
  };
  struct OpenWindow {
    double start_s = 0.0;
    std::vector<double> start_j;  // each GPU's energy since start of the monitor, at begin
  };

  // The caller holds mutex_.
  void sample_locked(double now_s);
  [[nodiscard]] std::vector<double> energy_locked(double now_s);

  std::vector<device::Device*> devices_;
  SecondsClock clock_;
  mutable std::mutex mutex_;
  std::vector<Track> tracks_;
  std::map<std::string, OpenWindow> open_;
};

}  // namespace gpucap::monitor
