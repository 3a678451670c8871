#pragma once
// One measurement session of `gpucap monitor -- COMMAND`: a Monitor window over the whole
// command, a reading of every GPU at each sampling tick (the timeline), and the figures printed at
// the end — wall time, energy per GPU and in total, mean and max power.

#include <cstddef>
#include <string>
#include <vector>

#include "gpucap/monitor/gpu_metrics.hpp"
#include "gpucap/monitor/monitor.hpp"

namespace gpucap::monitor {

struct TimelineSample {
  double time_s = 0.0;  // since the session began
  unsigned gpu = 0;     // position in the session's devices
  GpuReading reading;
};

struct GpuSummary {
  std::string name;
  double energy_j = 0.0;
  EnergySource source = EnergySource::counter;
  double mean_power_w = 0.0;  // energy / time
  double max_power_w = 0.0;   // highest sampled reading
};

struct SessionReport {
  double time_s = 0.0;
  std::vector<GpuSummary> gpus;
  double total_energy_j = 0.0;
  double mean_power_w = 0.0;  // all GPUs: total energy / time
  double max_power_w = 0.0;   // highest sum over the GPUs at one tick
  std::size_t samples = 0;    // ticks
  bool simulated = false;
  // False when a reading failed: the figures then cover the command up to the last good reading
  // (time_s says how far), and the max powers only the samples that succeeded.
  bool complete = true;
  std::string incomplete_reason;  // the first failure and how many readings failed
};

class Session {
 public:
  // Opens the window at once. Errors as Monitor's.
  Session(std::vector<device::Device*> devices, SecondsClock clock);
  // Reads every GPU once (also bringing integrated energy up to now); one sample per GPU. A failed
  // reading throws (NVML's Error) and changes none of the session's figures; the session goes on.
  std::vector<TimelineSample> sample();
  // Counts a failed reading (sample()'s exception): the report is then marked incomplete.
  void note_failure(const std::string& reason);
  // Closes the window with a last reading. Never throws for a failed reading: the report then
  // ends at the last good sample and says it is incomplete. Call once.
  SessionReport finish();

  [[nodiscard]] Monitor& monitor() { return monitor_; }

 private:
  static constexpr const char* kWindow = "gpucap monitor";
  Monitor monitor_;
  // From the last successful sample(): the fallback report when the last reading fails.
  [[nodiscard]] SessionReport report_from_last_sample() const;

  double start_s_ = 0.0;
  std::vector<double> max_power_w_;
  double max_total_power_w_ = 0.0;
  std::size_t samples_ = 0;
  double last_time_s_ = 0.0;           // of the last good sample, since the start
  std::vector<double> last_energy_j_;  // of the last good sample, since the start
  std::size_t failures_ = 0;
  std::string first_failure_;
};

[[nodiscard]] std::string timeline_csv_header();
[[nodiscard]] std::string timeline_csv_row(const TimelineSample& sample, bool simulated);

}  // namespace gpucap::monitor
