#pragma once
// The twin's on-board power sensor. The true power is piecewise constant (one level per batch
// phase); the sensor publishes a reading every update period, each the average of the true
// power over its averaging window, with relative Gaussian noise. NVML documents instantaneous
// readings up to GA100 and 1-second averages on later GPUs; both are this model with different
// parameters. A sensor with a hold (hold_s > 0) shows the highest of those averages over the last
// hold_s: the P40's logs catch short compute phases more often than their length allows
// (docs/simulator.md).

#include <cstdint>
#include <deque>
#include <vector>

#include "gpucap/sim/noise.hpp"
#include "gpucap/sim/specs.hpp"

namespace gpucap::sim {

struct SensorReading {
  double time_s = 0.0;
  double power_w = 0.0;
};

class PowerSensor {
 public:
  // The board is assumed to have drawn `initial_power_w` before time 0.
  PowerSensor(const SensorParams& params, double initial_power_w, std::uint64_t seed);

  // Feeds the true power over [start_s, end_s); segments must be contiguous and in order.
  void add_segment(double start_s, double end_s, double power_w);

  // Readings published since the last call, oldest first.
  [[nodiscard]] std::vector<SensorReading> take_readings();

  [[nodiscard]] double covered_until_s() const { return covered_until_s_; }
  // The most recent reading (what an NVML power query returns now).
  [[nodiscard]] SensorReading latest() const { return latest_; }

 private:
  void complete_bucket();

  SensorParams params_;
  Noise noise_;
  std::deque<double> window_energy_j_;  // energy of the last buckets in the averaging window
  std::size_t buckets_per_window_ = 1;
  std::deque<double> recent_average_w_;  // the averages of the held buckets, the latest last
  double window_sum_j_ = 0.0;
  long long bucket_index_ = 0;           // bucket covers [index·T, (index+1)·T)
  double bucket_energy_j_ = 0.0;
  double covered_until_s_ = 0.0;
  std::vector<SensorReading> pending_;
  SensorReading latest_;
};

}  // namespace gpucap::sim
