#pragma once
// Calibration observations from the fitted PctoDL predictor (a published fit of real RTX 3080 Ti
// and A100 measurements): single-tenant throughput and power over a grid of batch sizes, SM
// clocks and memory clocks, and the twin's predictions under PctoDL's profiling harness (FP16,
// one input tensor reused on the GPU, back-to-back batches, power = the maximum NVML reading).
//
// The grid keeps to where the predictor was fitted: batches 8..256 (below 8 its throughput can
// fall as the clock rises, anomaly 6 of the export's README) and SM clocks from 510 MHz to the
// GPU's highest (at 210 MHz it returns one constant for every batch).

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "gpucap/calibrate/model.hpp"

namespace gpucap::calibrate {

struct PctodlSet {
  std::string gpu;        // catalogue id
  std::string param_set;  // e.g. "imagenet_mem5001"
  double memory_clock_mhz = 0.0;
};

[[nodiscard]] const std::vector<PctodlSet>& pctodl_sets();

// Twin predictions under PctoDL's harness.
[[nodiscard]] double pctodl_harness_throughput(const TwinParams& params, const std::string& gpu,
                                               const std::string& model, int batch, double sm_mhz, double mem_mhz);
[[nodiscard]] double pctodl_harness_power_w(const TwinParams& params, const std::string& gpu,
                                            const std::string& model, int batch, double sm_mhz, double mem_mhz);

// Observations ("throughput_img_s" and "power_w" per grid point). Every fifth point (in grid
// order) has group "held-out", the others "fit". Error(io/invalid_data/usage) as the predictor.
[[nodiscard]] std::vector<Observation> pctodl_observations(const std::string& params_dir,
                                                           const sim::Catalog& catalog);

// How smooth the published fit itself is along batch size: at every clock, each interior batch
// of the grid (16..128) predicted from its two neighbours (their geometric mean: the midpoint in
// log batch), as the absolute relative error against the fit's own value, per source
// ("pctodl-<gpu>") and quantity. A model that is smooth in batch size cannot be expected to
// come closer than this.
[[nodiscard]] std::map<std::pair<std::string, std::string>, std::vector<double>> pctodl_neighbour_errors(
    const std::string& params_dir, const sim::Catalog& catalog);

// The RTX 3080 Ti's and A100's power and timing coefficients and the torchvision models' FP16
// efficiency, power intensity and activation traffic.
[[nodiscard]] std::vector<FitParameter> pctodl_fit_parameters(const sim::Catalog& catalog,
                                                              const std::string& params_dir);

}  // namespace gpucap::calibrate
