#pragma once
// Calibration observations from published curves (data/calibration/published.json): NVIDIA's
// ResNet-50 throughput-versus-batch curves on the V100, the Zeus V100 power-limit table and the
// MLPerf MaxQ point of the A100. Curves marked "fit" calibrate the GPU they name; curves marked
// "check" are only compared, never fitted.

#include <string>
#include <vector>

#include "gpucap/calibrate/model.hpp"

namespace gpucap::calibrate {

struct PublishedCurve {
  std::string id;
  std::string use;        // "fit" or "check"
  std::string gpu;
  std::string model;
  sim::Precision precision = sim::Precision::fp32;
  std::string x;          // "batch" or "power_limit_w"
  std::string y;          // "throughput_img_s", "relative_throughput" or "average_power_w"
  int batch = 0;          // for power-limit curves
  double work_factor = 1.0;        // 3 for training (forward + backward)
  double reference_limit_w = 0.0;  // relative throughput is against this limit (0: the point at 1.0)
  std::string source;
  std::vector<std::pair<double, double>> points;
};

// Error(io/invalid_data) naming the file; Error(usage) for a GPU or model the catalogue lacks.
[[nodiscard]] std::vector<PublishedCurve> load_published_curves(const std::string& path,
                                                                const sim::Catalog& catalog);

// One observation per point; group = the curve's use ("fit" or "check"); source = "published".
[[nodiscard]] std::vector<Observation> published_observations(const std::vector<PublishedCurve>& curves);

// The power and timing coefficients of every GPU a "fit" curve names.
[[nodiscard]] std::vector<FitParameter> published_fit_parameters(const std::vector<PublishedCurve>& curves,
                                                                 const sim::Catalog& catalog);

}  // namespace gpucap::calibrate
