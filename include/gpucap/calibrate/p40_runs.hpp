#pragma once
// The real Tesla P40 runs of the BatchDVFS repository as calibration and fidelity data: each
// per-step controller log with its 1-Hz nvidia-smi log, the job it ran (model, dataset), the
// clock of every step and the steps at which the controller closed a window.

#include <optional>
#include <string>
#include <vector>

#include "gpucap/bench/p40_log.hpp"
#include "gpucap/sim/catalog.hpp"

namespace gpucap::calibrate {

struct P40Run {
  std::string path;
  std::string name;        // file stem, e.g. "01_InceptionV1_BatchDVFS"
  int job = 0;             // BatchDVFS job number (1-15 ImageNet, 16-30 Caltech-256)
  std::string model;       // catalogue id
  std::string dataset;     // catalogue id
  bench::P40Log log;
  std::vector<bench::SmiSample> smi;  // time_s already on the log's clock; empty if no nvidia-smi log
  std::vector<double> clock_mhz;      // per row: the logged DVFS level, or for Clipper runs (clocks
                                      // left to the GPU) the median SM clock nvidia-smi saw busy
  std::vector<bool> window_closed;    // per row: the controller closed a window right after it
  std::vector<bool> new_batch_size;   // per row: the run's first step at this batch size (TF1 autotuned
                                      // its convolutions for the new shape during it)

  [[nodiscard]] double step_s(std::size_t row) const { return log.rows[row].time_s - log.rows[row - 1].time_s; }
};

// Every controller log under `dir` (searched recursively; files named NN_<DNN>_<BatchDVFS|Clipper|
// DVFS>.csv, nvidia-smi logs in a sibling "nvidia-smi" folder; CSV files whose name does not
// start with a job number, such as runtimes.csv, are not logs and are left alone). Error(usage) for a file name that
// does not say its job, model and controller, Error(invalid_data)/Error(io) for a bad file.
[[nodiscard]] std::vector<P40Run> load_p40_runs(const std::string& dir, const sim::Catalog& catalog,
                                                double window_s = 3.0);

// The SM clock a run's GPU chose while its kernels ran (what a Clipper run, which leaves the clock
// to the GPU, ran at): the median of its busy nvidia-smi samples; nullopt without any.
[[nodiscard]] std::optional<double> gpu_chosen_sm_clock_mhz(const P40Run& run);

}  // namespace gpucap::calibrate
