#pragma once
// What a calibration fits: named parameters of the twin's data files, and observations that
// compare one twin prediction with one measured (or published) value.

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "gpucap/sim/catalog.hpp"

namespace gpucap::calibrate {

// A mutable copy of the catalogue's parameters, by id.
struct TwinParams {
  std::map<std::string, sim::GpuSpec> gpus;
  std::map<std::string, sim::ModelSpec> models;
  std::map<std::string, sim::DatasetSpec> datasets;

  [[nodiscard]] static TwinParams from(const sim::Catalog& catalog);
  // The same with every fitted key back at its value before calibration (the files' "_prior"),
  // so that a fit always starts from the hand estimates, not from an earlier fit.
  [[nodiscard]] static TwinParams priors_from(const sim::Catalog& catalog);
};

enum class FileKind { gpu, model, dataset };

// One fitted number: a key (dotted JSON path) of one data file.
struct FitParameter {
  FileKind kind = FileKind::gpu;
  std::string id;     // catalogue id of the GPU, model or dataset
  std::string key;    // e.g. "power_model.sm_dynamic_w", "compute_efficiency.fp32"
  double lower = 0.0; // bounds (> 0: parameters are fitted in log space)
  double upper = 0.0;
  double prior_sigma = 0.0;  // > 0: a weak log-normal prior around the starting value

  [[nodiscard]] std::string name() const;  // "gpu p40 power_model.sm_dynamic_w"
};

// The field a parameter names; Error(usage) for a key calibration does not know.
[[nodiscard]] double& parameter_field(TwinParams& params, const FitParameter& parameter);
[[nodiscard]] double parameter_value(const TwinParams& params, const FitParameter& parameter);

// The keys calibration may fit, per file kind.
[[nodiscard]] const std::vector<std::string>& fittable_keys(FileKind kind);

struct Observation {
  std::string source;    // "p40", "pctodl-rtx3080ti", "published", ...
  std::string quantity;  // "idle_power_w", "busy_power_w", "busy_s", "throughput_img_s", "power_w", ...
  std::string label;     // what was measured, for reports
  std::string group;     // cross-validation unit (a job, a grid point, ...)
  double target = 0.0;   // measured value (> 0)
  double weight = 1.0;
  std::function<double(const TwinParams&)> predict;
};

// The median of `values` (the mean of the two middle ones for an even count); 0 for none.
[[nodiscard]] double median(std::vector<double> values);

// Relative error of the twin's prediction: (predicted − target) / target.
[[nodiscard]] double relative_error(const Observation& observation, const TwinParams& params);

}  // namespace gpucap::calibrate
