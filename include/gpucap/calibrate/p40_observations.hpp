#pragma once
// Calibration observations from the P40 runs, and the twin's predictions they are compared with.
//
// The BatchDVFS harness decoded each batch's JPEGs on one CPU thread before computing it, so the
// GPU idled most of each step (mean utilisation 1–25 %). The observations, each per run and
// (batch size, clock) group of steps unless said otherwise:
//   idle_power_w     1-Hz nvidia-smi samples with 0 % utilisation (model loaded, nothing running)
//   busy_power_w     logged window maxima that caught a compute phase (above idle + a margin);
//                    half weight for Clipper runs, whose clocks the GPU chose
//   busy_s           GPU busy time per step: mean utilisation × step time (nvidia-smi)
//   throughput_img_s logged per-step throughput (decode + compute: the twin's serial pipeline, its
//                    median step with the harness sampler's stalls)
//   autotune_s       per run, how much longer than their groups' steady steps the first steps at new
//                    batch sizes took (median)
//   sampler_stall_s, sampler_stall_rate_hz
//                    per group of short steps: how much a process of the harness's nvidia-smi
//                    sampler stalled a step, and how many stalls a second of stepping held
//                    (sim/spawned_sampler.hpp)

#include <vector>

#include "gpucap/calibrate/model.hpp"
#include "gpucap/calibrate/p40_runs.hpp"
#include "gpucap/sim/perf_model.hpp"
#include "gpucap/sim/spawned_sampler.hpp"

namespace gpucap::calibrate {

inline constexpr const char* kP40 = "p40";
inline constexpr double kP40MemoryClockMhz = 3615.0;

// The harness's nvidia-smi sampler on the P40 host, from the P40 file.
[[nodiscard]] sim::SpawnedSampler p40_sampler(const TwinParams& params);

// Twin predictions for one step of a P40 run (the clock is snapped to a supported one).
[[nodiscard]] double p40_idle_power_w(const TwinParams& params, double clock_mhz);
[[nodiscard]] double p40_busy_power_w(const TwinParams& params, const std::string& model, int batch, double clock_mhz);
// What a window maximum that caught a compute phase reads: the P40's sensor averages over its
// window, so a burst shorter than the window reads between idle and busy power.
[[nodiscard]] double p40_caught_power_w(const TwinParams& params, const std::string& model, int batch,
                                        double clock_mhz);
[[nodiscard]] double p40_busy_s(const TwinParams& params, const std::string& model, int batch, double clock_mhz);
// GPU time TF1 spent autotuning on the first step at a new batch size.
[[nodiscard]] double p40_autotune_s(const TwinParams& params, const std::string& model, int batch, double clock_mhz);

// The GPU's side of one step: idle, autotuning (if the batch size is new) at the batch's mean busy
// power, then the two halves of its compute phase.
struct P40StepPhases {
  double idle_w = 0.0;
  sim::BusyHalves halves;  // the compute phase; halves.mean_w() is its mean power
  double compute_s = 0.0;
  double autotune_s = 0.0;  // zero unless the batch size is new
};
[[nodiscard]] P40StepPhases p40_step_phases(const TwinParams& params, const std::string& model, int batch,
                                            double clock_mhz, bool new_batch_size);
// Host decode + input copy + compute: the step time of the serial input pipeline, as the median
// step under the harness's nvidia-smi sampler (whose processes stall some steps).
[[nodiscard]] double p40_step_s(const TwinParams& params, const std::string& model, const std::string& dataset,
                                int batch, double clock_mhz);
// What one of the sampler's stalls costs such a step on average: the whole stall where the host
// paces the step (decode, input copy, launch-paced kernels), less where queued kernels run on.
[[nodiscard]] double p40_felt_stall_s(const TwinParams& params, const std::string& model, const std::string& dataset,
                                      int batch, double clock_mhz);

// The chance that the harness's sampler (one reading every `period_s`) caught a compute phase in a
// window of `window_s` made of steps of `step_s`, each ending in a phase that readings show for
// `visible_s` (its length plus the sensor's hold). Steps longer than the period: each phase is
// caught with chance visible/period. Shorter steps: each reading lands in a phase with chance
// visible/step.
[[nodiscard]] double p40_caught_chance(double visible_s, double step_s, double window_s, double period_s);

struct P40ObservationOptions {
  double caught_margin_w = 10.0;  // a window maximum this far above idle caught a compute phase
  std::size_t min_rows = 3;       // steps a (batch, clock) group needs
  std::size_t min_smi_samples = 10;
  double min_autotune_s = 0.05;   // a first step this much longer than the steady ones autotuned
  // Weights of the two run-level shares (one observation per run, against one per group for the
  // rest): chosen by the leave-one-job-out figures of docs/fidelity.md.
  double busy_fraction_weight = 10.0;
  double caught_fraction_weight = 3.0;
};

// Observations from these runs; their group is "job N".
[[nodiscard]] std::vector<Observation> p40_observations(const std::vector<P40Run>& runs,
                                                        const P40ObservationOptions& options = {});

// The parameters a P40 fit adjusts: the P40's power and timing coefficients, the power intensity
// and FP32 efficiency of every model the runs use, and the decode cost of their datasets.
[[nodiscard]] std::vector<FitParameter> p40_fit_parameters(const std::vector<P40Run>& runs);

}  // namespace gpucap::calibrate
