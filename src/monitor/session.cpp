#include "gpucap/monitor/session.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace gpucap::monitor {

Session::Session(std::vector<device::Device*> devices, SecondsClock clock)
    : monitor_(std::move(devices), std::move(clock)), max_power_w_(monitor_.devices().size(), 0.0) {
  start_s_ = monitor_.now_s();
  monitor_.begin_window(kWindow);
}

std::vector<TimelineSample> Session::sample() {
  const auto energy_j = monitor_.energy_since_start_j();
  const double time_s = monitor_.now_s() - start_s_;
  std::vector<TimelineSample> out;
  double total_power_w = 0.0;
  const auto& devices = monitor_.devices();
  for (std::size_t i = 0; i < devices.size(); ++i) {
    auto reading = read_gpu(*devices[i], energy_j[i]);
    if (!std::isnan(reading.power_w)) {
      max_power_w_[i] = std::max(max_power_w_[i], reading.power_w);
      total_power_w += reading.power_w;
    }
    out.push_back(TimelineSample{time_s, static_cast<unsigned>(i), reading});
  }
  max_total_power_w_ = std::max(max_total_power_w_, total_power_w);
  ++samples_;
  return out;
}

SessionReport Session::finish() {
  (void)sample();  // the last stretch's power counts in the maxima too
  const auto window = monitor_.end_window(kWindow);
  SessionReport report;
  report.time_s = window.time_s;
  report.total_energy_j = window.total_energy_j;
  report.simulated = window.simulated;
  report.samples = samples_;
  report.max_power_w = max_total_power_w_;
  report.mean_power_w = window.time_s > 0.0 ? window.total_energy_j / window.time_s : 0.0;
  const auto& devices = monitor_.devices();
  for (std::size_t i = 0; i < devices.size(); ++i) {
    GpuSummary gpu;
    gpu.name = devices[i]->name();
    gpu.energy_j = window.energy_j[i];
    gpu.source = window.sources[i];
    gpu.mean_power_w = window.time_s > 0.0 ? gpu.energy_j / window.time_s : 0.0;
    gpu.max_power_w = max_power_w_[i];
    report.gpus.push_back(gpu);
  }
  return report;
}

std::string timeline_csv_header() {
  return "time_s,gpu,power_w,energy_j,sm_clock_mhz,memory_clock_mhz,utilization_pct,memory_utilization_pct,"
         "temperature_c,power_limit_w,platform\n";
}

std::string timeline_csv_row(const TimelineSample& s, bool simulated) {
  const auto& r = s.reading;
  return fmt::format("{:.3f},{},{:.2f},{:.3f},{:g},{:g},{:g},{:g},{:g},{:g},{}\n", s.time_s, s.gpu, r.power_w,
                     r.energy_j, r.sm_clock_mhz, r.memory_clock_mhz, r.utilization_pct, r.memory_utilization_pct,
                     r.temperature_c, r.power_limit_w, simulated ? "sim" : "real");
}

}  // namespace gpucap::monitor
