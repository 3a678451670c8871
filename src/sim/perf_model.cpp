#include "gpucap/sim/perf_model.hpp"

#include <algorithm>
#include <cmath>
#include <functional>

namespace gpucap::sim {

namespace {
constexpr double kBytesFp32 = 4.0;
constexpr double kBytesFp16 = 2.0;

double bytes_per_value(Precision precision) { return precision == Precision::fp16 ? kBytesFp16 : kBytesFp32; }

double efficiency(const GpuSpec& gpu, const ModelSpec& model, Precision precision) {
  const auto listed = model.gpu_efficiency_scale.find(gpu.id);
  const double on_this_gpu = listed == model.gpu_efficiency_scale.end() ? 1.0 : listed->second;
  return on_this_gpu * (precision == Precision::fp16 ? model.fp16_efficiency * gpu.fp16_efficiency_scale
                                                     : model.fp32_efficiency * gpu.fp32_efficiency_scale);
}

// Busy time from its three limits: the maximum (roofline) or a p-norm when the GPU file asks for
// partial overlap of compute, memory traffic and launches.
double combine_busy_s(const GpuSpec& gpu, double compute_s, double memory_s, double launch_s) {
  const double k = gpu.busy_overlap_exponent;
  if (k <= 0.0) return std::max({compute_s, memory_s, launch_s});
  return std::pow(std::pow(compute_s, k) + std::pow(memory_s, k) + std::pow(launch_s, k), 1.0 / k);
}

// (V/Vmax)²·(f/fmax): dynamic power relative to the top of the V-f curve.
double v2f_ratio(const GpuSpec& gpu, double sm_clock_mhz) {
  const double v = voltage_v(gpu, sm_clock_mhz) / gpu.voltage.max_v;
  return v * v * sm_clock_mhz / gpu.max_sm_clock_mhz();
}
}  // namespace

double voltage_v(const GpuSpec& gpu, double sm_clock_mhz) {
  const auto& curve = gpu.voltage;
  if (sm_clock_mhz <= curve.knee_mhz) return curve.min_v;
  const double span = gpu.max_sm_clock_mhz() - curve.knee_mhz;
  const double x = std::min(1.0, (sm_clock_mhz - curve.knee_mhz) / span);
  return curve.min_v + (curve.max_v - curve.min_v) * x;
}

double half_saturation_batch(const GpuSpec& gpu, const ModelSpec& model) {
  // A layer's kernels run about one thread per output element: a layer fills the GPU when its
  // feature map (summed over the batch) is large against the GPU's width.
  const double kelems_per_layer_per_image = model.activation_melems * 1e3 / model.layers;
  return gpu.saturation_kelems_per_sm * gpu.sm_count / kelems_per_layer_per_image * model.saturation_batch_scale;
}

double peak_flops(const GpuSpec& gpu, Precision precision, double sm_clock_mhz) {
  const double at_boost = precision == Precision::fp16
                              ? gpu.fp16_tflops * 1e12
                              : 2.0 * gpu.sm_count * gpu.fp32_lanes_per_sm * gpu.boost_clock_mhz * 1e6;
  return at_boost * std::pow(sm_clock_mhz / gpu.boost_clock_mhz, gpu.clock_scaling_exponent);
}

namespace {

// profile_batch at a batch size that may be fractional (the first shape's autotuning).
BatchProfile profile_of(const GpuSpec& gpu, const ModelSpec& model, Precision precision, double b,
                        OperatingPoint point, bool copy_input, GpuSlice slice) {
  const double value_bytes = bytes_per_value(precision);
  const double flops_per_image = 2.0 * model.gmacs * 1e9;
  // A slice of the SMs is half filled by a proportionally smaller batch.
  const double b_half = half_saturation_batch(gpu, model) * slice.sm_share;

  // The clock-independent part runs at the rate the SMs reach at boost clock.
  const auto listed = model.clock_independent_fraction.find(gpu.id);
  const double u = listed == model.clock_independent_fraction.end() ? 0.0 : listed->second;
  const double clock_factor = (1.0 - u) + u * peak_flops(gpu, precision, point.sm_clock_mhz) /
                                              peak_flops(gpu, precision, gpu.boost_clock_mhz);
  const double compute_s =
      flops_per_image * (b + b_half) * slice.compute_slowdown * clock_factor /
      (peak_flops(gpu, precision, point.sm_clock_mhz) * slice.sm_share * efficiency(gpu, model, precision));
  const double bandwidth_bps =
      gpu.memory_bandwidth_gbps * 1e9 * point.memory_clock_mhz / gpu.max_memory_clock_mhz();
  // Weights are read once per batch; feature maps are written and read back once per image.
  const double bytes = model.params_m * 1e6 * value_bytes + b * model.activation_melems * 1e6 * value_bytes * 2.0;
  const double memory_s = bytes * slice.memory_stretch / (bandwidth_bps * gpu.memory_efficiency);
  const double launch_s = model.layers * gpu.host.layer_launch_s * model.launch_scale;

  const double input_bytes = b * 3.0 * model.input_size * model.input_size * value_bytes;
  BatchProfile profile;
  profile.prep_s = gpu.host.batch_sync_s + (copy_input ? input_bytes / (gpu.host.pcie_gbps * 1e9) : 0.0);
  profile.busy_s = combine_busy_s(gpu, compute_s, memory_s, launch_s);
  profile.compute_s = compute_s;
  profile.memory_s = memory_s;
  profile.launch_s = launch_s;
  // The share of the SMs drawing busy power (model.power_saturation_scale: not all of the
  // small-batch slowdown is idle SMs).
  const double occupancy = b / (b + b_half * model.power_saturation_scale);
  profile.sm_activity = std::min(1.0, occupancy * compute_s / profile.busy_s) * model.power_intensity;
  profile.memory_activity = std::min(1.0, bytes / (profile.busy_s * bandwidth_bps));
  profile.activity_spread =
      std::clamp(gpu.activity_spread * (1.0 - occupancy) + model.power_phase_spread, 0.0, 1.0);
  return profile;
}

}  // namespace

BatchProfile profile_batch(const GpuSpec& gpu, const ModelSpec& model, Precision precision, int batch,
                           OperatingPoint point, bool copy_input, GpuSlice slice) {
  return profile_of(gpu, model, precision, batch, point, copy_input, slice);
}

double autotune_s(const GpuSpec& gpu, const BatchProfile& profile) {
  return gpu.autotune_compute_factor * profile.compute_s + gpu.autotune_fixed_s;
}

double launch_stall_share(const GpuSpec& gpu, const BatchProfile& profile, double stalled_s) {
  const double base_s = combine_busy_s(gpu, profile.compute_s, profile.memory_s, profile.launch_s);
  if (!(base_s > 0.0)) return 1.0;  // no GPU work to hide behind
  double share = 0.0;
  const double k = gpu.busy_overlap_exponent;
  if (stalled_s > 0.0) {
    share = (combine_busy_s(gpu, profile.compute_s, profile.memory_s, profile.launch_s + stalled_s) - base_s) / stalled_s;
  } else if (k <= 0.0) {
    share = profile.launch_s >= std::max(profile.compute_s, profile.memory_s) ? 1.0 : 0.0;
  } else {
    share = std::pow(profile.launch_s / base_s, k - 1.0);
  }
  return std::clamp(share, 0.0, 1.0);
}

double sampler_stall_share(const GpuSpec& gpu, const BatchProfile& profile, const SpawnedSampler& sampler) {
  return launch_stall_share(gpu, profile, profile.busy_s * sampler.stall_rate_hz() * sampler.stall_s);
}

double first_autotune_power_w(const GpuSpec& gpu, const ModelSpec& model, Precision precision, OperatingPoint point,
                              const BatchProfile& profile) {
  double activity = profile.sm_activity;
  if (gpu.first_autotune_batch > 0.0) {
    activity = std::max(activity, profile_of(gpu, model, precision, gpu.first_autotune_batch, point,
                                             /*copy_input=*/false, GpuSlice{})
                                      .sm_activity);
  }
  return busy_power_w(gpu, point, activity, profile.memory_activity);
}

BusyHalves busy_halves_w(const GpuSpec& gpu, OperatingPoint point, const BatchProfile& profile) {
  const double a = profile.sm_activity;
  const double d = profile.activity_spread;
  return {busy_power_w(gpu, point, a * (1.0 + d), profile.memory_activity),
          busy_power_w(gpu, point, a * (1.0 - d), profile.memory_activity)};
}

double peak_reading_w(const BatchProfile& profile, BusyHalves halves, double idle_w, double window_s) {
  if (!(window_s > 0.0)) return halves.first_w;
  const double half_s = profile.busy_s / 2.0;
  const double in_first = std::min(window_s, half_s);
  const double in_second = std::clamp(window_s - half_s, 0.0, half_s);
  const double in_idle = std::max(0.0, window_s - profile.busy_s);
  return (halves.first_w * in_first + halves.second_w * in_second + idle_w * in_idle) / window_s;
}

double idle_loaded_power_w(const GpuSpec& gpu, OperatingPoint point) {
  const auto& p = gpu.power;
  const double v = voltage_v(gpu, point.sm_clock_mhz) / gpu.voltage.max_v;
  return p.constant_w + p.static_w * v * v * v +
         p.clock_tree_w * v2f_ratio(gpu, point.sm_clock_mhz) +
         p.memory_clock_w * point.memory_clock_mhz / gpu.max_memory_clock_mhz();
}

double busy_power_w(const GpuSpec& gpu, OperatingPoint point, double sm_activity, double memory_activity) {
  const auto& p = gpu.power;
  return idle_loaded_power_w(gpu, point) + p.sm_dynamic_w * v2f_ratio(gpu, point.sm_clock_mhz) * sm_activity +
         p.memory_dynamic_w * (point.memory_clock_mhz / gpu.max_memory_clock_mhz()) * memory_activity;
}

double average_batch_power_w(const GpuSpec& gpu, const BatchProfile& profile, OperatingPoint point) {
  const double prep_w = idle_loaded_power_w(gpu, point);
  const double busy_w = busy_power_w(gpu, point, profile.sm_activity, profile.memory_activity);
  return (prep_w * profile.prep_s + busy_w * profile.busy_s) / profile.latency_s();
}

double highest_clock_within_limit(const std::vector<double>& clocks_mhz, double requested_mhz,
                                  const std::function<double(double)>& power_at, double power_limit_w) {
  if (power_at(requested_mhz) <= power_limit_w) return requested_mhz;
  // Power rises with clock, so binary-search the supported clocks below the requested one.
  auto hi = static_cast<std::ptrdiff_t>(std::upper_bound(clocks_mhz.begin(), clocks_mhz.end(), requested_mhz) -
                                        clocks_mhz.begin()) - 1;  // highest clock <= requested
  std::ptrdiff_t lo = 0;
  if (hi < 0 || power_at(clocks_mhz[0]) > power_limit_w) return clocks_mhz.front();
  while (lo < hi) {  // invariant: clocks[lo] fits
    const auto mid = (lo + hi + 1) / 2;
    if (power_at(clocks_mhz[static_cast<std::size_t>(mid)]) <= power_limit_w) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return clocks_mhz[static_cast<std::size_t>(lo)];
}

ClockDither dithered_clock_within_limit(const std::vector<double>& clocks_mhz, double requested_mhz,
                                        const std::function<double(double)>& power_at, double power_limit_w) {
  ClockDither dither;
  dither.lower_mhz = highest_clock_within_limit(clocks_mhz, requested_mhz, power_at, power_limit_w);
  dither.upper_mhz = dither.lower_mhz;
  const auto above = std::upper_bound(clocks_mhz.begin(), clocks_mhz.end(), dither.lower_mhz);
  if (dither.lower_mhz >= requested_mhz || above == clocks_mhz.end() || *above > requested_mhz) return dither;
  const double lower_w = power_at(dither.lower_mhz);
  if (lower_w > power_limit_w) return dither;  // not even the lowest clock fits
  const double upper_w = power_at(*above);
  dither.upper_mhz = *above;
  if (upper_w > lower_w) dither.upper_fraction = std::clamp((power_limit_w - lower_w) / (upper_w - lower_w), 0.0, 1.0);
  return dither;
}

double power_limited_sm_clock_mhz(const GpuSpec& gpu, const ModelSpec& model, Precision precision, int batch,
                                  OperatingPoint requested, double power_limit_w) {
  const auto power_at = [&](double sm_mhz) {
    const OperatingPoint point{sm_mhz, requested.memory_clock_mhz};
    return average_batch_power_w(gpu, profile_batch(gpu, model, precision, batch, point), point);
  };
  return highest_clock_within_limit(gpu.sm_clocks_mhz, requested.sm_clock_mhz, power_at, power_limit_w);
}

}  // namespace gpucap::sim
