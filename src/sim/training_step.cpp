#include "gpucap/sim/training_step.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "gpucap/core/error.hpp"

namespace gpucap::sim {

ModelSpec training_step_model(const ModelSpec& model) {
  auto trained = model;
  trained.gmacs *= kTrainingWorkFactor;
  trained.activation_melems *= kTrainingWorkFactor;
  trained.layers = static_cast<int>(std::lround(model.layers * kTrainingWorkFactor));
  trained.params_m *= kTrainingWeightPasses;
  trained.fp32_efficiency = std::min(1.0, model.fp32_efficiency * model.training_efficiency_scale);
  trained.fp16_efficiency = std::min(1.0, model.fp16_efficiency * model.training_efficiency_scale);
  trained.saturation_batch_scale = model.saturation_batch_scale * model.training_saturation_scale;
  trained.power_saturation_scale = model.power_saturation_scale * model.training_power_saturation_scale;
  return trained;
}

namespace {

struct Step {
  TrainingPoint point;
  double limiter_w = 0.0;  // what the board's power limiter compares with the limit
};

double padding_stretch(const DatasetSpec& dataset, int batch) {
  return 1.0 + dataset.padding_growth * std::log(static_cast<double>(batch));
}

// The trained model with each sample's work stretched by the padding of its batch.
ModelSpec padded_to_batch(ModelSpec trained, const DatasetSpec& dataset, int batch) {
  const double stretch = padding_stretch(dataset, batch);
  trained.gmacs *= stretch;
  trained.activation_melems *= stretch;
  return trained;
}

Step step_of(const GpuSpec& gpu, const ModelSpec& trained, const DatasetSpec& dataset, Precision precision, int batch,
             OperatingPoint point) {
  const auto profile = profile_batch(gpu, trained, precision, batch, point, /*copy_input=*/true);
  // The caching allocator's work for a batch of a new shape is host time too: it runs beside the
  // kernels already queued, so a GPU with a long queue hides it.
  const double host_s = gpu.host.training_loop_scale * (dataset.host_s_per_batch + batch * dataset.host_s_per_image) +
                        allocator_host_s(gpu, trained, dataset, batch);
  const double gpu_s = profile.latency_s();
  Step out;
  auto& p = out.point;
  p.sm_clock_mhz = point.sm_clock_mhz;
  p.gpu_busy_s = profile.busy_s;
  // The loop and the GPU overlap, not perfectly: near a tie each waits on the other at times.
  p.step_s = std::pow(std::pow(gpu_s, kHostOverlapExponent) + std::pow(host_s, kHostOverlapExponent),
                      1.0 / kHostOverlapExponent);
  const auto halves = busy_halves_w(gpu, point, profile);
  const double idle_w = idle_loaded_power_w(gpu, point);
  p.average_power_w = (halves.mean_w() * profile.busy_s + idle_w * (p.step_s - profile.busy_s)) / p.step_s;
  p.epoch_s = std::ceil(static_cast<double>(dataset.images) / batch) * p.step_s;
  // The limiter acts on the sensor's short average, not on the epoch's: a step whose kernels
  // burst between host gaps is held to the limit during the bursts and averages below it.
  auto gapped = profile;
  gapped.prep_s = p.step_s - profile.busy_s;
  out.limiter_w = std::max(p.average_power_w, peak_reading_w(gapped, halves, idle_w, gpu.sensor.averaging_window_s));
  return out;
}

// A limiter alternating between two clocks, a fraction of the time at the upper one: power and
// clock average over time, and steps complete at the time-averaged rate.
TrainingPoint time_shared(const TrainingPoint& lower, const TrainingPoint& upper, double upper_fraction) {
  const double u = upper_fraction;
  TrainingPoint p;
  p.sm_clock_mhz = (1.0 - u) * lower.sm_clock_mhz + u * upper.sm_clock_mhz;
  p.average_power_w = (1.0 - u) * lower.average_power_w + u * upper.average_power_w;
  p.step_s = 1.0 / ((1.0 - u) / lower.step_s + u / upper.step_s);
  // Busy time per step keeps each clock's busy fraction of the time.
  p.gpu_busy_s = p.step_s * ((1.0 - u) * lower.gpu_busy_s / lower.step_s + u * upper.gpu_busy_s / upper.step_s);
  p.epoch_s = lower.epoch_s / lower.step_s * p.step_s;
  return p;
}

void check_batch(int batch) {
  if (batch < 1) throw usage_error(fmt::format("training batch size must be >= 1, not {}", batch));
}

}  // namespace

double memory_fill_fraction(const GpuSpec& gpu, const ModelSpec& model, const DatasetSpec& dataset, int batch) {
  check_batch(batch);
  if (gpu.memory_gib <= 0.0) return 0.0;
  const double mib = batch * model.training_mib_per_sample * padding_stretch(dataset, batch);
  return mib / (gpu.memory_gib * 1024.0);
}

double allocator_host_s(const GpuSpec& gpu, const ModelSpec& model, const DatasetSpec& dataset, int batch) {
  // Batches of one shape reuse the cached blocks from the first step on: nothing to allocate.
  if (dataset.padding_growth <= 0.0) return 0.0;
  return gpu.host.allocator_s *
         std::pow(memory_fill_fraction(gpu, model, dataset, batch), kAllocatorPressureExponent);
}

TrainingPoint training_step(const GpuSpec& gpu, const ModelSpec& model, const DatasetSpec& dataset, Precision precision,
                            int batch, OperatingPoint point) {
  check_batch(batch);
  return step_of(gpu, padded_to_batch(training_step_model(model), dataset, batch), dataset, precision, batch, point)
      .point;
}

TrainingPoint training_under_power_limit(const GpuSpec& gpu, const ModelSpec& model, const DatasetSpec& dataset,
                                         Precision precision, int batch, double power_limit_w) {
  check_batch(batch);
  if (!(power_limit_w >= gpu.power_limit_min_w - 1e-9 && power_limit_w <= gpu.power_limit_max_w + 1e-9)) {
    throw usage_error(fmt::format("power limit {:g} W is outside the {}'s range {:g}-{:g} W", power_limit_w, gpu.name,
                                  gpu.power_limit_min_w, gpu.power_limit_max_w));
  }
  const auto trained = padded_to_batch(training_step_model(model), dataset, batch);
  const double memory_mhz = gpu.default_memory_clock_mhz;
  // The limiter's search and the dithering visit the same clocks more than once; each step is
  // worked out once (calibration evaluates this thousands of times per iteration).
  std::map<double, Step> steps;
  const auto step_at = [&](double sm_mhz) -> const Step& {
    auto it = steps.find(sm_mhz);
    if (it == steps.end()) it = steps.emplace(sm_mhz, step_of(gpu, trained, dataset, precision, batch, {sm_mhz, memory_mhz})).first;
    return it->second;
  };
  const auto power_at = [&](double sm_mhz) { return step_at(sm_mhz).limiter_w; };
  const auto dither = dithered_clock_within_limit(gpu.sm_clocks_mhz, gpu.boost_clock_mhz, power_at, power_limit_w);
  const auto& lower = step_at(dither.lower_mhz).point;
  if (dither.upper_fraction <= 0.0) return lower;
  return time_shared(lower, step_at(dither.upper_mhz).point, dither.upper_fraction);
}

}  // namespace gpucap::sim
