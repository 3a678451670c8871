#pragma once
// The twin's training step: forward, backward and optimizer update of one batch on the GPU twin's
// roofline and power model (sim/perf_model.hpp), beside the host side of the training loop (data
// loading and the framework's step), and what the board's power limiter leaves of it. What Zeus's
// traces measure (../shared/data/zeus/): time per epoch and average power per (batch size, power
// limit). docs/simulator.md ("Training under a power limit") gives the source of every factor.

#include "gpucap/sim/perf_model.hpp"
#include "gpucap/sim/specs.hpp"

namespace gpucap::sim {

// A training step runs the forward pass, a backward pass of about twice its work (gradients of the
// activations and of the weights), and launches the kernels of both.
inline constexpr double kTrainingWorkFactor = 3.0;
// Weight-sized tensors a step reads or writes: weights read forward and backward, gradients
// written, and an Adam-style update that reads weight, gradient and two moments and writes three.
inline constexpr double kTrainingWeightPasses = 10.0;

// How the host loop and the GPU's work combine into a step: (gpu^k + host^k)^(1/k), the slower
// of the two when they differ much, 2^(1/k) times either at a tie.
inline constexpr double kHostOverlapExponent = 4.0;

// How steeply the caching allocator's host time grows as a batch of changing shape fills the
// GPU's memory. Zeus's DeepSpeech2 epochs (../shared/data/zeus/) lengthen past batch 48–56 on the
// RTX 6000 (24 GiB) and the V100 (32 GiB) while their power falls; the time per step beyond the
// trend grows as about the 3.3rd–4.4th power of the batch on both, and a batch of one size costs
// the smaller memory more (docs/simulator.md, "Training under a power limit").
inline constexpr double kAllocatorPressureExponent = 4.0;

struct TrainingPoint {
  double sm_clock_mhz = 0.0;
  double step_s = 0.0;      // one optimizer step, the host loop and the GPU overlapped
  double gpu_busy_s = 0.0;  // kernels running within the step
  double average_power_w = 0.0;
  double epoch_s = 0.0;     // every sample of the dataset once (the last batch a full one)
};

// The model as a training step runs it: the work factor on compute, feature maps and kernels,
// the weight passes on the weight traffic, the model's training efficiency, and how it fills the
// GPU at small batches (training_saturation_scale, training_power_saturation_scale).
[[nodiscard]] ModelSpec training_step_model(const ModelSpec& model);

// One training step at fixed clocks. The host loop (GpuSpec host.training_loop_scale × the
// dataset's host_s_per_batch + batch × host_s_per_image, plus allocator_host_s) runs beside the
// GPU's work (a data loader's workers prepare the next batch while this one computes), so the
// step lasts about as long as the slower of the two (kHostOverlapExponent); the GPU idles at its
// clocks for the rest.
// A dataset's samples padded to the longest of their batch stretch its work per sample
// (DatasetSpec::padding_growth). Error(usage) for batch < 1.
[[nodiscard]] TrainingPoint training_step(const GpuSpec& gpu, const ModelSpec& model, const DatasetSpec& dataset,
                                          Precision precision, int batch, OperatingPoint point);

// The share of the GPU's memory a training batch holds: batch × the model's
// training_mib_per_sample, stretched by the dataset's padding at this batch size, over
// GpuSpec::memory_gib (0 where either is unknown). A fitted footprint, not a measured one: the
// largest batches Zeus ran read above 1 with the fitted figure, so the twin has no out-of-memory
// check here. Error(usage) for batch < 1.
[[nodiscard]] double memory_fill_fraction(const GpuSpec& gpu, const ModelSpec& model, const DatasetSpec& dataset,
                                          int batch);

// The host time per step the caching allocator takes (GpuSpec host.allocator_s ×
// memory_fill_fraction^kAllocatorPressureExponent); 0 for a dataset of fixed-shape samples
// (padding_growth 0), whose batches reuse the cached blocks. Part of the step's host loop.
[[nodiscard]] double allocator_host_s(const GpuSpec& gpu, const ModelSpec& model, const DatasetSpec& dataset,
                                      int batch);

// The same with clocks left to the GPU under a board power limit: the highest supported SM clock
// up to boost at which the power sensor's reading (averaged over its window, at the step's
// busiest) fits the limit (the lowest one if none does), and, as the firmware alternates between
// adjacent clocks, the next one up for the share of the time that brings that reading to the
// limit on average (sim::dithered_clock_within_limit); sm_clock_mhz is the time-averaged clock.
// A step with host gaps thus averages below the limit, as the real boards' do. The memory clock
// stays at its default. Error(usage) for a limit outside the GPU's range.
[[nodiscard]] TrainingPoint training_under_power_limit(const GpuSpec& gpu, const ModelSpec& model,
                                                       const DatasetSpec& dataset, Precision precision, int batch,
                                                       double power_limit_w);

}  // namespace gpucap::sim
