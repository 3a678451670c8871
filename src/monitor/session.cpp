#include "gpucap/monitor/session.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace gpucap::monitor {

namespace {

// The report's figures from a time, each GPU's energy and the session's maxima.
SessionReport make_report(const Monitor& monitor, double time_s, const std::vector<double>& energy_j,
                          const std::vector<double>& max_power_w, double max_total_power_w, std::size_t samples) {
  SessionReport report;
  report.time_s = time_s;
  report.simulated = monitor.simulated();
  report.samples = samples;
  report.max_power_w = max_total_power_w;
  const auto& devices = monitor.devices();
  const auto sources = monitor.sources();
  for (std::size_t i = 0; i < devices.size(); ++i) {
    GpuSummary gpu;
    gpu.name = devices[i]->name();
    gpu.energy_j = energy_j[i];
    gpu.source = sources[i];
    gpu.mean_power_w = time_s > 0.0 ? gpu.energy_j / time_s : 0.0;
    gpu.max_power_w = max_power_w[i];
    report.total_energy_j += gpu.energy_j;
    report.gpus.push_back(gpu);
  }
  report.mean_power_w = time_s > 0.0 ? report.total_energy_j / time_s : 0.0;
  return report;
}

}  // namespace

Session::Session(std::vector<device::Device*> devices, SecondsClock clock)
    : monitor_(std::move(devices), std::move(clock)),
      max_power_w_(monitor_.devices().size(), 0.0),
      last_energy_j_(monitor_.devices().size(), 0.0) {
  start_s_ = monitor_.now_s();
  monitor_.begin_window(kWindow);
}

std::vector<TimelineSample> Session::sample() {
  const auto energy_j = monitor_.energy_since_start_j();
  const double time_s = monitor_.now_s() - start_s_;
  std::vector<TimelineSample> out;
  const auto& devices = monitor_.devices();
  for (std::size_t i = 0; i < devices.size(); ++i) {
    out.push_back(TimelineSample{time_s, static_cast<unsigned>(i), read_gpu(*devices[i], energy_j[i])});
  }
  // Every GPU was read: the figures move on.
  double total_power_w = 0.0;
  for (std::size_t i = 0; i < out.size(); ++i) {
    const double power_w = out[i].reading.power_w;
    if (std::isnan(power_w)) continue;
    max_power_w_[i] = std::max(max_power_w_[i], power_w);
    total_power_w += power_w;
  }
  max_total_power_w_ = std::max(max_total_power_w_, total_power_w);
  last_time_s_ = time_s;
  last_energy_j_ = energy_j;
  ++samples_;
  return out;
}

void Session::note_failure(const std::string& reason) {
  if (failures_++ == 0) first_failure_ = reason;
}

SessionReport Session::report_from_last_sample() const {
  return make_report(monitor_, last_time_s_, last_energy_j_, max_power_w_, max_total_power_w_, samples_);
}

SessionReport Session::finish() {
  SessionReport report;
  try {
    (void)sample();  // the last stretch's power counts in the maxima too
    const auto window = monitor_.end_window(kWindow);
    report = make_report(monitor_, window.time_s, window.energy_j, max_power_w_, max_total_power_w_, samples_);
  } catch (const std::exception& e) {
    note_failure(e.what());
    report = report_from_last_sample();
  }
  if (failures_ > 0) {
    report.complete = false;
    report.incomplete_reason = fmt::format("{} reading{} of the GPUs failed (the first: {})", failures_,
                                           failures_ == 1 ? "" : "s", first_failure_);
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
