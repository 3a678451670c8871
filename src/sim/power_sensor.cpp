#include "gpucap/sim/power_sensor.hpp"

#include <algorithm>
#include <cmath>

#include "gpucap/core/error.hpp"

namespace gpucap::sim {

PowerSensor::PowerSensor(const SensorParams& params, double initial_power_w, std::uint64_t seed)
    : params_(params), noise_(seed) {
  buckets_per_window_ =
      std::max<std::size_t>(1, static_cast<std::size_t>(std::lround(params.averaging_window_s / params.update_period_s)));
  const double bucket_energy = initial_power_w * params.update_period_s;
  window_energy_j_.assign(buckets_per_window_, bucket_energy);
  window_sum_j_ = bucket_energy * static_cast<double>(buckets_per_window_);
  const auto held_buckets = static_cast<std::size_t>(std::lround(params.hold_s / params.update_period_s));
  recent_average_w_.assign(held_buckets + 1, initial_power_w);
  latest_ = SensorReading{0.0, initial_power_w};
}

void PowerSensor::complete_bucket() {
  window_sum_j_ += bucket_energy_j_ - window_energy_j_.front();
  window_energy_j_.pop_front();
  window_energy_j_.push_back(bucket_energy_j_);
  bucket_energy_j_ = 0.0;
  ++bucket_index_;
  const double average_w = window_sum_j_ / (static_cast<double>(buckets_per_window_) * params_.update_period_s);
  recent_average_w_.pop_front();
  recent_average_w_.push_back(average_w);
  const double shown_w = *std::max_element(recent_average_w_.begin(), recent_average_w_.end());
  const double reading_w = shown_w * (1.0 + params_.noise_fraction * noise_.gaussian());
  latest_ = SensorReading{static_cast<double>(bucket_index_) * params_.update_period_s, reading_w};
  pending_.push_back(latest_);
}

void PowerSensor::add_segment(double start_s, double end_s, double power_w) {
  if (std::abs(start_s - covered_until_s_) > 1e-9 || end_s < start_s) {
    throw Error(ErrorCode::internal, "power sensor: segments must be contiguous and in order");
  }
  double t = start_s;
  while (true) {
    const double bucket_end_s = static_cast<double>(bucket_index_ + 1) * params_.update_period_s;
    if (end_s < bucket_end_s) {
      bucket_energy_j_ += power_w * (end_s - t);
      break;
    }
    bucket_energy_j_ += power_w * (bucket_end_s - t);
    t = bucket_end_s;
    complete_bucket();
  }
  covered_until_s_ = end_s;
}

std::vector<SensorReading> PowerSensor::take_readings() {
  std::vector<SensorReading> readings;
  readings.swap(pending_);
  return readings;
}

}  // namespace gpucap::sim
