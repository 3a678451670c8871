#pragma once
// Re-runs a logged P40 run on the twin step by step, the way the BatchDVFS harness measured it,
// and predicts what each logged row should show.
//
// Each logged step keeps its logged length, batch and clock; within it the twin places its own
// compute phase at the end (the harness decoded the batch first, then computed), after the
// autotuning on a step that ran a new batch size, and idle-with-context power before it. The
// harness's power list was filled by a sampler that read the (averaging) sensor once per cycle of
// its nvidia-smi processes and was cleared whenever the controller closed a window; the logged value
// of a row is the list's maximum. The sampler's phase is unknown, so the prediction is the
// median over evenly spread phases.

#include <optional>
#include <vector>

#include "gpucap/calibrate/model.hpp"
#include "gpucap/calibrate/p40_runs.hpp"

namespace gpucap::calibrate {

struct HarnessParams {
  // Default: the P40 file's spawned sampler, two nvidia-smi processes + 0.1 s sleep per sample.
  std::optional<double> sampler_period_s;
  int phases = 16;
};

struct EmulatedRow {
  std::size_t row = 0;            // index in the log (>= 1)
  double logged_power_w = 0.0;    // the window maximum the controller saw
  double power_w = 0.0;           // the twin's prediction of it
  double logged_throughput = 0.0; // img/s of the step
  double throughput = 0.0;
  double logged_mean_w = -1.0;    // mean of the 1-Hz nvidia-smi samples in the window (-1: none)
  double mean_w = 0.0;            // the twin's mean power over the window
};

// Every row but the first (graph loading) and the last (a truncated batch).
[[nodiscard]] std::vector<EmulatedRow> emulate_p40_run(const P40Run& run, const TwinParams& params,
                                                       const HarnessParams& harness = {});

}  // namespace gpucap::calibrate
