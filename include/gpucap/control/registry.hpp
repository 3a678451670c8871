#pragma once
// Builds controllers by name from user options. Defaults are the seed systems' values; on a
// GPU other than the P40 the clock levels default to that GPU's DVFS ladder.

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpucap/control/controller.hpp"
#include "gpucap/control/mps_plan.hpp"
#include "gpucap/control/tuned.hpp"
#include "gpucap/predict/profile_model.hpp"

namespace gpucap::control {

struct ControllerOptions {
  std::optional<double> alpha;
  std::optional<DecisionPeriod> window;
  std::optional<std::vector<int>> batch_sizes;
  std::optional<std::vector<double>> clock_levels_mhz;
  std::optional<int> start_batch;        // a batch size from the batch set
  std::optional<double> start_clock_mhz; // a level from the clock levels
  std::optional<int> fixed_batch;        // dvfs, powercap: the fixed batch size
  std::optional<double> latency_slo_ms;  // morak: the latency SLO (none: latency never limits)
  // capfit: the model's profile on this GPU (the twin measures one when none is given).
  std::shared_ptr<const predict::ProfileModel> profile;
  // bobd: the configuration its offline search found for each cap (runtime::search_each_cap).
  std::shared_ptr<const CapTable> tuned_table;
  // pctodl, directcap, mpsfit: the partitioner and power model (runtime/mps_planning.hpp).
  std::shared_ptr<const MpsPlanning> mps_planning;
  // morak: its tenants' MPS shares (default: one at 100 %); each a multiple of 5, adding up to <= 100.
  std::optional<std::vector<double>> mps_shares_pct;
  // pctodl: run PctoDL's shadow optimizer (tune/shadow.hpp).
  bool shadow = false;
  // capfit: the clocks stay with the GPU (a real GPU without clock control): it moves the batch
  // size only, from a profile taken at the GPU's own clocks.
  bool gpu_chooses_clocks = false;
};

// What the platform offers the controllers.
struct PlatformLimits {
  std::vector<double> dvfs_levels_mhz;     // default clock ladder (P40: the seeds' ten levels)
  std::vector<double> supported_sm_clocks_mhz;  // every level must be one of these (empty: no check)
  double power_limit_min_w = 0.0;               // the board's settable power-limit range
  double power_limit_max_w = 1e9;
};

// Whether the algorithm runs from a profile of the model (capfit).
[[nodiscard]] bool needs_profile(std::string_view algorithm);
// Whether the algorithm runs from an offline search made before the job (bobd).
[[nodiscard]] bool needs_offline_search(std::string_view algorithm);
// Whether the algorithm partitions the GPU among MPS tenants from a predictor (pctodl, directcap,
// mpsfit).
[[nodiscard]] bool needs_mps_planning(std::string_view algorithm);
// Whether "all" leaves the algorithm out of matrices without MPS: the MPS partitioners and
// PctoDL's BatchDVFS, which compete on PctoDL's matrices.
[[nodiscard]] bool pctodl_suite_only(std::string_view algorithm);
// Whether that predictor is gpucap's own, fitted to a profile (mpsfit), rather than PctoDL's fits.
[[nodiscard]] bool plans_with_fitted_predictor(std::string_view algorithm);
// Whether the algorithm acts on a power band [alpha·cap, cap] (so --alpha applies to it).
[[nodiscard]] bool uses_power_band(std::string_view algorithm);

struct AlgorithmInfo {
  std::string name;
  std::string summary;
  std::string knobs;
  std::string source;
  // Every algorithm runs on the twin; on a real GPU (gpucap run --platform nvml), what it needs.
  std::string real_gpu;
};

[[nodiscard]] const std::vector<AlgorithmInfo>& algorithms();

// Throws Error(usage) for an unknown name or an invalid option (alpha outside (0, 1], a start
// point not in the set, clock levels the GPU does not support, an unsorted batch set, ...).
[[nodiscard]] std::unique_ptr<Controller> make_controller(std::string_view name, const ControllerOptions& options,
                                                          const PlatformLimits& limits);

// Parses "1,2,4,8" or a range "1..255" (both ends included). Throws Error(usage).
[[nodiscard]] std::vector<int> parse_batch_sizes(std::string_view text);
// Parses "544,632,734". Throws Error(usage).
[[nodiscard]] std::vector<double> parse_clock_levels(std::string_view text);

}  // namespace gpucap::control
