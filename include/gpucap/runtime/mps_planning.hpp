#pragma once
// Partition planners for the multi-tenant controllers (control/mps_plan.hpp) and the twin's own
// model of MPS partitions as a predictor (the truth the bench's oracle searches).

#include <memory>
#include <string>

#include "gpucap/control/mps_plan.hpp"
#include "gpucap/predict/fitted.hpp"
#include "gpucap/runtime/tuning.hpp"
#include "gpucap/sim/catalog.hpp"
#include "gpucap/tune/partition.hpp"

namespace gpucap::runtime {

// PctoDL's search space on a GPU (§2.7): every supported SM clock, PctoDL's memory-clock
// candidates (RTX 3080 Ti: 9501 and 5001 MHz; A100: 1215 MHz), 5-% shares, its batch pool (vgg19
// capped at 160). Error(usage) for a GPU PctoDL has no fits for.
[[nodiscard]] tune::PartitionSpace pctodl_partition_space(const sim::GpuSpec& gpu, const sim::ModelSpec& model);

// PctoDL's predictor with its published fits for the GPU and model (one parameter set per memory
// clock), read from `params_dir`. Error(usage) for a model or memory clock PctoDL has no fit of,
// Error(io/invalid_data) for unreadable fits.
[[nodiscard]] tune::PartitionPredictor pctodl_predictor(const sim::Catalog& catalog, const sim::GpuSpec& gpu,
                                                        const sim::ModelSpec& model, const std::string& params_dir,
                                                        const std::vector<double>& memory_clocks_mhz);

// The same fits split at the SM clock, for the vectorised greedy (tune::greedy_partition_vectorised).
[[nodiscard]] tune::PartitionCurvePredictor pctodl_curve_predictor(const sim::Catalog& catalog,
                                                                   const sim::GpuSpec& gpu, const sim::ModelSpec& model,
                                                                   const std::string& params_dir,
                                                                   const std::vector<double>& memory_clocks_mhz);

// The twin's noise-free model: throughput and time-averaged power of the tenants running back to
// back at the clocks (sim/mps_model.hpp), in the model's precision.
[[nodiscard]] tune::PartitionPredictor twin_partition_predictor(const sim::GpuSpec& gpu, const sim::ModelSpec& model);

// Greedy partitioning (tune::greedy_partition_vectorised, as upstream's benchmarks) on PctoDL's predictor, with the thermodynamic
// controller's power model from the fits of the highest memory clock: what pctodl and directcap
// run from.
[[nodiscard]] std::shared_ptr<const control::MpsPlanning> pctodl_planning(const sim::Catalog& catalog,
                                                                          const sim::GpuSpec& gpu,
                                                                          const sim::ModelSpec& model,
                                                                          const std::string& params_dir);

// The memory clocks gpucap profiles and plans MPS partitions at: the highest, and the highest
// below three quarters of it if there is one (RTX 3080 Ti: 9501 and 5001 MHz; A100: 1215 MHz).
[[nodiscard]] std::vector<double> planning_memory_clocks_mhz(const sim::GpuSpec& gpu);

// gpucap's own predictor (predict/fitted.hpp) for the model on the twin: PctoDL's profiling
// matrix with frequency sweeps plus the whole-GPU rows (runtime/mps_profile.hpp), measured at
// each planning memory clock, then fitted. Deterministic for a runner's seed.
[[nodiscard]] predict::FittedPredictor fit_predictor_on_twin(const SimTrialRunner& runner, const sim::GpuSpec& gpu,
                                                             const sim::ModelSpec& model);

// The space gpucap searches with a fitted predictor: the predictor's memory clocks, every
// supported SM clock (bisection over the GPU's whole range), 5-% shares, batch sizes up to 256,
// each share kept to its admissible batches.
// `sm_clocks_mhz`: the GPU's supported SM clocks, any order (Error(usage) if empty).
[[nodiscard]] tune::PartitionSpace fitted_partition_space(std::vector<double> sm_clocks_mhz,
                                                          const predict::FittedPredictor& predictor);

// gpucap's local-search partitioner (tune::local_search_partition) on a fitted predictor, over
// the predictor's memory clocks, every supported SM clock, 5-% shares and batch sizes up to 256:
// what mpsfit runs from. It has no thermodynamic model (`thermo` is empty): pctodl does not run
// from it.
[[nodiscard]] std::shared_ptr<const control::MpsPlanning> fitted_planning(const std::vector<double>& sm_clocks_mhz,
                                                                          const predict::FittedPredictor& predictor);

// The bench's oracle over MPS partitions: the exhaustive search (at most `max_tenants` tenants)
// on the twin's own model for the cap, then measured on the twin; while the measurement's highest
// power sample exceeds the cap, the SM clock steps one supported clock down and it is measured
// again (at most `max_steps` times). nullopt: nothing fits.
struct PartitionOracle {
  control::PartitionPlan plan;
  tune::TrialResult measured;
  std::size_t predictions = 0;
};
[[nodiscard]] std::optional<PartitionOracle> partition_oracle(const SimTrialRunner& verifier, const sim::GpuSpec& gpu,
                                                              const sim::ModelSpec& model, double cap_w,
                                                              std::size_t max_tenants, int max_steps = 12);

}  // namespace gpucap::runtime
