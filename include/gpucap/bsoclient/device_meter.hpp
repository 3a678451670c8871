#pragma once
// Time and GPU energy of a stretch of training, as Zeus's ZeusMonitor measures them
// (begin_window / end_window), read from gpucap Devices: on a real GPU the NVML device's energy
// counter, on the twin its meter — the same code either way. The clock is injected, so that the
// twin's virtual time drives simulated runs and tests are exact.

#include <functional>
#include <string>
#include <vector>

#include "gpucap/device/device.hpp"

namespace gpucap::bsoclient {

// Seconds on some monotonic scale; only differences are used.
using SecondsClock = std::function<double()>;
// std::chrono::steady_clock, for real GPUs.
[[nodiscard]] SecondsClock steady_seconds_clock();

// What Zeus's client sends with the job (GpuConfig): the GPUs' largest power limit in whole
// watts (rounded down, as Zeus does) times their number, and their model name.
struct GpuConfig {
  double max_power_w = 0.0;
  int number_of_gpus = 0;
  std::string gpu_model;
};

// Error(usage) for no devices or a mix of GPU models (the optimizer's costs assume one kind, as
// Zeus's does).
[[nodiscard]] GpuConfig gpu_config_of(const std::vector<device::Device*>& devices);

struct Measurement {
  double time_s = 0.0;
  double energy_j = 0.0;  // all devices together
};

class DeviceMeter {
 public:
  // `devices`: all and only the GPUs the training uses (not owned; they must outlive the meter).
  // Error(usage) for none, Error(unsupported) for a device with neither energy nor power.
  DeviceMeter(std::vector<device::Device*> devices, SecondsClock clock);

  void begin_window();
  // Error(usage) without an open window.
  Measurement end_window();
  // Devices without an energy counter (NVML before Volta) are measured by integrating their power
  // readings (trapezoids between samples): call this often inside a window, e.g. every training
  // step. A no-op when every device has a counter.
  void sample();

  [[nodiscard]] bool window_open() const noexcept { return open_; }
  // Whether any device is the twin: every figure then has to be labelled simulated.
  [[nodiscard]] bool simulated() const;
  [[nodiscard]] const std::vector<device::Device*>& devices() const noexcept { return devices_; }
  [[nodiscard]] double now_s() const { return clock_(); }

 private:
  struct Track {
    bool counter = false;        // has Signal::energy_j
    double window_start_j = 0.0; // counter at begin_window
    double integrated_j = 0.0;   // power-only devices: energy since begin_window
    double last_power_w = 0.0;
    double last_sample_s = 0.0;
  };
  void sample_power(Track& track, device::Device& device, double now_s);

  std::vector<device::Device*> devices_;
  SecondsClock clock_;
  std::vector<Track> tracks_;
  bool open_ = false;
  double window_start_s_ = 0.0;
};

}  // namespace gpucap::bsoclient
