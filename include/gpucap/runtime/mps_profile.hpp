#pragma once
// PctoDL's profiling matrix (seed-systems.md §2.3) on the twin: homogeneous MPS tenants — share ×
// tenant count × batch — at the highest SM clock, plus frequency sweeps of three partitions; rows
// in PctoDL's profile CSV columns, which `gpucap fit` reads.

#include <string>
#include <vector>

#include "gpucap/runtime/tuning.hpp"
#include "gpucap/sim/catalog.hpp"

namespace gpucap::runtime {

struct ProfileConfig {
  std::vector<double> shares_pct;
  std::vector<int> batches;
  double sm_clock_mhz = 0.0;
  double memory_clock_mhz = 0.0;
};

struct ProfileRow {
  ProfileConfig config;
  double sm_clock_mhz = 0.0;      // the clock the GPU ran at
  double sm_util_pct = 0.0;       // the twin's model: Σ share × busy fraction
  double memory_util_pct = 0.0;   // the twin's model: time-averaged share of the bandwidth
  tune::TrialResult measured;     // throughput, mean and highest power sample
};

// The MPS stress matrix: shares 5..40 % with PctoDL's tenant counts and batch ranges (skipping
// N·share > 100), SM at the GPU's highest clock; with `sweeps`, also 4×25 %, 2×50 % and 10×10 % at
// batches 8, 16 and 32 over SM clocks from the lowest in 150-MHz steps.
// `sm_clocks_mhz`: the GPU's supported SM clocks (any order). Error(usage) if empty.
[[nodiscard]] std::vector<ProfileConfig> pctodl_profile_configs(const std::vector<double>& sm_clocks_mhz,
                                                                double memory_clock_mhz, bool sweeps);

// gpucap's addition for its own predictor: one tenant at 100 % and two at 50 %, at batches 4 to
// 256, over SM clocks from the lowest in 150-MHz steps and the highest; and unequal tenants that
// fill the GPU (55/45 ... 50/25/25 %, large batches) at every third of those clocks. PctoDL's
// matrix runs only equal tenants and none above 50 %, so a predictor fitted to it alone
// extrapolates the partitions that win under a cap.
[[nodiscard]] std::vector<ProfileConfig> whole_gpu_profile_configs(const std::vector<double>& sm_clocks_mhz,
                                                                   double memory_clock_mhz);

[[nodiscard]] ProfileRow measure_profile_row(const SimTrialRunner& runner, const sim::GpuSpec& gpu,
                                             const sim::ModelSpec& model, const ProfileConfig& config);

// PctoDL's columns: model_name,p_list,b_list,target_freq,mem_freq,sm_freq,sm_util,mem_util,
// throughput_total,power_avg,power_max (lists as "[25, 25]").
[[nodiscard]] std::string profile_csv_header();
[[nodiscard]] std::string profile_csv_row(const std::string& model, const ProfileRow& row);

}  // namespace gpucap::runtime
