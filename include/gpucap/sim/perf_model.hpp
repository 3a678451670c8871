#pragma once
// The twin's performance and power model: pure functions of the GPU and model parameters.
//
// One batch = (optionally the host decoding its images, see InputPipeline) an input-preparation phase (per-batch synchronisation + host-to-device copy of the
// input; the GPU holds its clocks but computes nothing) followed by a busy phase (the layers'
// kernels). The busy phase lasts as long as the slowest of
//   compute  = FLOPs·(b + b_half) / (peak(f)·efficiency)      (partly-filled GPU at small batch)
//   memory   = (weights + b·activations) / (bandwidth(m)·memory efficiency)
//   launch   = layers · per-layer host launch time            (overlaps GPU work)
// Power = idle-with-context (constant + static ∝ V³ + clock tree ∝ V²f + memory interface ∝ m)
//       + SM dynamic ∝ V²·f·SM activity + memory dynamic ∝ m·memory activity.
// The ratio of the two phases is what makes window max and window mean differ.

#include <functional>
#include <vector>

#include "gpucap/core/clocks.hpp"
#include "gpucap/sim/spawned_sampler.hpp"
#include "gpucap/sim/specs.hpp"

namespace gpucap::sim {

struct OperatingPoint {
  double sm_clock_mhz = 0.0;
  double memory_clock_mhz = 0.0;
};

struct BatchProfile {
  double prep_s = 0.0;            // input copy + synchronisation: GPU idle at its clocks
  double busy_s = 0.0;            // kernels running
  double compute_s = 0.0;         // the arithmetic part of busy_s (FLOPs at the achievable rate)
  double memory_s = 0.0;          // the memory-traffic limit of busy_s
  double launch_s = 0.0;          // the host's kernel launches, which overlap the GPU's work
  double sm_activity = 0.0;       // SM switching activity during busy_s: busy share × the model's power intensity
  double memory_activity = 0.0;   // fraction of memory bandwidth used during busy_s, 0..1
  double activity_spread = 0.0;   // δ: the busy phase's halves run at sm_activity·(1±δ) (GpuSpec::activity_spread)
  [[nodiscard]] double latency_s() const { return prep_s + busy_s; }
};

[[nodiscard]] double voltage_v(const GpuSpec& gpu, double sm_clock_mhz);

// Batch size at which the GPU is half filled: a layer's feature-map elements per image against
// the GPU's width (× the model's saturation_batch_scale: 1 for inference).
[[nodiscard]] double half_saturation_batch(const GpuSpec& gpu, const ModelSpec& model);

[[nodiscard]] double peak_flops(const GpuSpec& gpu, Precision precision, double sm_clock_mhz);

// The part of the GPU a batch runs on. A whole GPU by default; under NVIDIA MPS a tenant's kernels
// run on `sm_share` of the SMs (which a smaller batch already fills), are slowed by the other
// tenants' contention for L2 and the scheduler, and share the memory bandwidth
// (sim/mps_model.hpp solves for the stretch).
struct GpuSlice {
  double sm_share = 1.0;          // (0, 1]
  double compute_slowdown = 1.0;  // >= 1
  double memory_stretch = 1.0;    // >= 1: memory time relative to having all the bandwidth
};

// `copy_input` = false: the input already sits in GPU memory (a benchmark that reuses one tensor,
// as PctoDL's profiler does), so preparation is the per-batch synchronisation alone.
// With a slice, sm_activity is the activity of the slice's SMs (the whole GPU's is
// sm_share × sm_activity); memory_activity is a fraction of the whole GPU's bandwidth.
[[nodiscard]] BatchProfile profile_batch(const GpuSpec& gpu, const ModelSpec& model, Precision precision, int batch,
                                         OperatingPoint point, bool copy_input = true, GpuSlice slice = GpuSlice{});

// Power with a model loaded and nothing running (P0 at the given clocks).
[[nodiscard]] double idle_loaded_power_w(const GpuSpec& gpu, OperatingPoint point);

[[nodiscard]] double busy_power_w(const GpuSpec& gpu, OperatingPoint point, double sm_activity,
                                  double memory_activity);

// The power of the two halves of the busy phase (wide layers first, then narrow ones); their mean
// is busy_power_w at the profile's mean activity.
struct BusyHalves {
  double first_w = 0.0;
  double second_w = 0.0;
  // Power is linear in SM activity, so this is busy_power_w at the profile's mean activity.
  [[nodiscard]] double mean_w() const { return (first_w + second_w) / 2.0; }
};
[[nodiscard]] BusyHalves busy_halves_w(const GpuSpec& gpu, OperatingPoint point, const BatchProfile& profile);

// The highest reading of a sensor that averages over `window_s`, for one batch's busy phase
// preceded and followed by `idle_w` (a window that starts where the busy phase starts).
[[nodiscard]] double peak_reading_w(const BatchProfile& profile, BusyHalves halves, double idle_w, double window_s);

// GPU time an autotuning engine spends on the first batch of a new input shape: running the
// candidate algorithms of every convolution (∝ the batch's compute time) plus a fixed cost per
// shape. The twin runs it at the batch's busy power: fitted to the P40 logs, this matches the
// window maxima of small and mid-sized models better than putting the fixed part at idle power,
// though it overstates the power of the smallest ones (MobileNetV1 0.25/0.5), see docs/simulator.md.
[[nodiscard]] double autotune_s(const GpuSpec& gpu, const BatchProfile& profile);
// Board power while the engine autotunes its first shape: the batch's busy power at the higher of
// its own SM activity and the model's at GpuSpec::first_autotune_batch images.
[[nodiscard]] double first_autotune_power_w(const GpuSpec& gpu, const ModelSpec& model, Precision precision,
                                            OperatingPoint point, const BatchProfile& profile);

// How much of a stall of the host's launching thread lengthens the busy phase, per second of
// stall: all of it when the launches set the pace (small batches), next to nothing when the GPU
// has queued enough work to run through the stall. `stalled_s` is the stall time expected in the
// phase in total; the share is its average over that much added launch time (the derivative at 0).
[[nodiscard]] double launch_stall_share(const GpuSpec& gpu, const BatchProfile& profile, double stalled_s);
// launch_stall_share over the stalls a spawned sampler puts into the busy phase on average (its
// process starts per second × each stall).
[[nodiscard]] double sampler_stall_share(const GpuSpec& gpu, const BatchProfile& profile, const SpawnedSampler& sampler);

// Time-weighted power of one batch (what the board's power limiter regulates).
[[nodiscard]] double average_batch_power_w(const GpuSpec& gpu, const BatchProfile& profile, OperatingPoint point);

// The SM clock the firmware settles on: the highest supported clock <= requested whose average
// batch power stays within the board power limit (the lowest clock if none does).
[[nodiscard]] double power_limited_sm_clock_mhz(const GpuSpec& gpu, const ModelSpec& model, Precision precision,
                                                int batch, OperatingPoint requested, double power_limit_w);

// Where the firmware's power limiter settles when it may alternate between two adjacent clocks:
// the highest clock of the list that fits (as highest_clock_within_limit), the next clock up, and
// the fraction of time at the upper one that puts the time-averaged power exactly at the limit
// (0 when the lower one is the requested clock or none fits). The averaged operating point moves
// continuously with the power model, where a single clock jumps from step to step.
struct ClockDither {
  double lower_mhz = 0.0;
  double upper_mhz = 0.0;
  double upper_fraction = 0.0;  // of the time, in [0, 1)
};
[[nodiscard]] ClockDither dithered_clock_within_limit(const std::vector<double>& clocks_mhz, double requested_mhz,
                                                      const std::function<double(double)>& power_at,
                                                      double power_limit_w);

// The firmware's power limiter: the highest clock of an ascending list that is <= requested and
// whose power fits the limit (power rises with clock); the requested clock if it fits; the lowest
// clock if none does.
[[nodiscard]] double highest_clock_within_limit(const std::vector<double>& clocks_mhz, double requested_mhz,
                                                const std::function<double(double)>& power_at, double power_limit_w);

using gpucap::nearest_clock_mhz;

}  // namespace gpucap::sim
