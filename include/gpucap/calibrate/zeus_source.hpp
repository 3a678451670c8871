#pragma once
// Calibration observations from Zeus's NSDI'23 power traces (summary_power_<gpu>.csv): time per
// epoch and average power of six training workloads at every (batch size, power limit), predicted
// by the twin's training step (sim/training_step.hpp). data/calibration/zeus.json maps each
// (dataset, network) of a trace onto the twin's model, dataset and precision, and names the traces
// calibration fits ("fit") and those it only compares ("check": the P100, held out), and the GPUs
// no trace fits that take their power model, host and efficiency from the fitted testbeds ("derive").

#include <optional>
#include <string>
#include <vector>

#include "gpucap/bench/zeus_trace.hpp"
#include "gpucap/calibrate/model.hpp"
#include "gpucap/sim/training_step.hpp"

namespace gpucap::calibrate {

struct ZeusWorkloadMapping {
  std::string dataset;  // as the trace names it
  std::string network;
  std::string model;         // the twin's ids
  std::string twin_dataset;
  sim::Precision precision = sim::Precision::fp32;
};

struct ZeusSetup {
  std::vector<std::string> fit_gpus;    // trace GPU names (summary_power_<gpu>.csv)
  std::vector<std::string> check_gpus;
  std::vector<std::string> derived_gpus;  // twin GPU ids (data/gpus/<id>.json), none of them a fitted testbed
  std::vector<ZeusWorkloadMapping> workloads;
};

// Error(io/invalid_data) naming the file; Error(usage) for a model, dataset or derived GPU the
// catalogue lacks.
[[nodiscard]] ZeusSetup load_zeus_setup(const std::string& path, const sim::Catalog& catalog);

// The twin GPU a trace ran on. `requested` (a catalogue name) wins; otherwise the catalogue GPU
// whose id or an alias starts with the trace's GPU name and whose power-limit range holds every
// limit of the trace (Zeus's "v100" is the 100-250 W PCIe board, not the twin's 150-300 W SXM2).
// Error(usage) naming the candidates when none fits.
[[nodiscard]] const sim::GpuSpec& zeus_twin_gpu(const sim::Catalog& catalog, const std::string& trace_gpu,
                                                const std::vector<bench::ZeusPowerRow>& rows,
                                                const std::optional<std::string>& requested = std::nullopt);

// The mapping of a row's workload, or nullptr when the twin has none.
[[nodiscard]] const ZeusWorkloadMapping* find_mapping(const ZeusSetup& setup, const bench::ZeusPowerRow& row);

// The twin's epoch under the row's batch size and power limit, with `params`' specs.
[[nodiscard]] sim::TrainingPoint twin_training_point(const TwinParams& params, const std::string& gpu_id,
                                                     const ZeusWorkloadMapping& mapping, const bench::ZeusPowerRow& row);

// Two observations per mapped row (time_per_epoch_s, average_power_w) of every trace in
// `traces_dir` that the setup names; source "zeus-<gpu>", group "fit" or "check", label
// "<dataset>/<network> bs B at L W". Error(io) for a named trace that is missing.
[[nodiscard]] std::vector<Observation> zeus_observations(const ZeusSetup& setup, const std::string& traces_dir,
                                                         const sim::Catalog& catalog);

// What the fit may move: the fitted GPUs' power and compute coefficients and host speed (the first
// fitted GPU's host is the reference, 1), the models' training efficiency and power intensity (a
// model other sources fit keeps its power intensity), the datasets' host loop.
[[nodiscard]] std::vector<FitParameter> zeus_fit_parameters(const ZeusSetup& setup, const std::string& traces_dir,
                                                            const sim::Catalog& catalog);

// The twin GPUs of the fitted traces, in the setup's order: the first is the reference testbed.
[[nodiscard]] std::vector<std::string> zeus_fitted_twin_gpus(const ZeusSetup& setup, const std::string& traces_dir,
                                                             const sim::Catalog& catalog);

// The keys a GPU fitted to no trace takes from the fitted testbeds (ZeusSetup::derived_gpus), as
// parameters so that calibration writes them with their priors (bounds unused). Error(usage) if a
// derived GPU is a fitted one (`fitted_gpus` as zeus_fitted_twin_gpus gives them), before any fit.
[[nodiscard]] std::vector<FitParameter> zeus_derived_parameters(const ZeusSetup& setup,
                                                                const std::vector<std::string>& fitted_gpus);

// Sets the derived GPUs' keys from the fitted testbeds' values in `params` (`fitted_gpus` as
// zeus_fitted_twin_gpus gives them). Power scales with the silicon that draws it, from the
// reference testbed's fitted model: the SMs' dynamic and clock-tree power with SMs × boost clock,
// their leakage with the SMs, the memory's dynamic power with its bandwidth; the board's constant
// and memory-clock power are the reference's. What is relative to the reference testbed — its
// server (host.training_loop_scale, host.layer_launch_s, host.allocator_s) and its compute
// efficiency for its peak (fp32_efficiency_scale, fp16_efficiency_scale), unknown for a testbed no
// trace measured — is the geometric mean of the fitted testbeds'. Error(usage) if a derived GPU is
// a fitted one.
void derive_unfitted_gpus(const ZeusSetup& setup, const std::vector<std::string>& fitted_gpus, TwinParams& params);

}  // namespace gpucap::calibrate
