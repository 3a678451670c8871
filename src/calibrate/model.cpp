#include "gpucap/calibrate/model.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "gpucap/core/error.hpp"
#include "gpucap/core/text.hpp"

namespace gpucap::calibrate {

TwinParams TwinParams::from(const sim::Catalog& catalog) {
  TwinParams params;
  for (const auto& gpu : catalog.gpus()) params.gpus.emplace(gpu.id, gpu);
  for (const auto& model : catalog.models()) params.models.emplace(model.id, model);
  for (const auto& dataset : catalog.datasets()) params.datasets.emplace(dataset.id, dataset);
  return params;
}

namespace {

const char* kind_name(FileKind kind) {
  switch (kind) {
    case FileKind::gpu: return "gpu";
    case FileKind::model: return "model";
    case FileKind::dataset: return "dataset";
  }
  return "?";
}

// Templates so that one table serves both reading (const) and fitting (mutable).
template <typename Gpu>
auto& gpu_field(Gpu& g, const std::string& key) {
  if (key == "voltage.min_v") return g.voltage.min_v;
  if (key == "voltage.max_v") return g.voltage.max_v;
  if (key == "voltage.knee_mhz") return g.voltage.knee_mhz;
  if (key == "power_model.constant_w") return g.power.constant_w;
  if (key == "power_model.static_w") return g.power.static_w;
  if (key == "power_model.clock_tree_w") return g.power.clock_tree_w;
  if (key == "power_model.memory_clock_w") return g.power.memory_clock_w;
  if (key == "power_model.sm_dynamic_w") return g.power.sm_dynamic_w;
  if (key == "power_model.memory_dynamic_w") return g.power.memory_dynamic_w;
  if (key == "saturation_kelems_per_sm") return g.saturation_kelems_per_sm;
  if (key == "busy_overlap_exponent") return g.busy_overlap_exponent;
  if (key == "fp16_efficiency_scale") return g.fp16_efficiency_scale;
  if (key == "fp32_efficiency_scale") return g.fp32_efficiency_scale;
  if (key == "memory_efficiency") return g.memory_efficiency;
  if (key == "host.batch_sync_s") return g.host.batch_sync_s;
  if (key == "host.layer_launch_s") return g.host.layer_launch_s;
  if (key == "host.training_loop_scale") return g.host.training_loop_scale;
  if (key == "host.allocator_s") return g.host.allocator_s;
  if (key == "host.nvidia_smi_process_s") return g.host.nvidia_smi_process_s;
  if (key == "host.nvidia_smi_stall_s") return g.host.nvidia_smi_stall_s;
  if (key == "sensor.averaging_window_s") return g.sensor.averaging_window_s;
  if (key == "sensor.hold_s") return g.sensor.hold_s;
  if (key == "clock_scaling_exponent") return g.clock_scaling_exponent;
  if (key == "activity_spread") return g.activity_spread;
  if (key == "autotune_compute_factor") return g.autotune_compute_factor;
  if (key == "autotune_fixed_s") return g.autotune_fixed_s;
  if (key == "first_autotune_batch") return g.first_autotune_batch;
  throw usage_error(fmt::format("calibration cannot fit GPU key '{}'", key));
}

constexpr std::string_view kClockIndependentPrefix = "clock_independent_fraction.";
constexpr std::string_view kGpuEfficiencyPrefix = "gpu_efficiency_scale.";

// A per-GPU entry of a model file: it must be in the file for calibration to start from it.
template <typename Model, typename Map>
auto& per_gpu_field(Model& m, Map& by_gpu, const std::string& key, std::string_view prefix) {
  const auto it = by_gpu.find(key.substr(prefix.size()));
  if (it == by_gpu.end()) {
    throw usage_error(fmt::format("calibration: model {} has no '{}' to start from (add it to the file)", m.id, key));
  }
  return it->second;
}

template <typename Model>
auto& model_field(Model& m, const std::string& key) {
  if (key == "compute_efficiency.fp32") return m.fp32_efficiency;
  if (key == "compute_efficiency.fp16") return m.fp16_efficiency;
  if (key == "power_intensity") return m.power_intensity;
  if (key == "activation_melems") return m.activation_melems;
  if (key == "launch_scale") return m.launch_scale;
  if (key == "power_saturation_scale") return m.power_saturation_scale;
  if (key == "power_phase_spread") return m.power_phase_spread;
  if (key.starts_with(kClockIndependentPrefix)) {
    return per_gpu_field(m, m.clock_independent_fraction, key, kClockIndependentPrefix);
  }
  if (key.starts_with(kGpuEfficiencyPrefix)) return per_gpu_field(m, m.gpu_efficiency_scale, key, kGpuEfficiencyPrefix);
  if (key == "training_efficiency_scale") return m.training_efficiency_scale;
  if (key == "training_mib_per_sample") return m.training_mib_per_sample;
  if (key == "training_saturation_scale") return m.training_saturation_scale;
  if (key == "training_power_saturation_scale") return m.training_power_saturation_scale;
  throw usage_error(fmt::format("calibration cannot fit model key '{}'", key));
}

template <typename Dataset>
auto& dataset_field(Dataset& d, const std::string& key) {
  if (key == "host_s_per_image") return d.host_s_per_image;
  if (key == "host_s_per_mpixel") return d.host_s_per_mpixel;
  if (key == "host_s_per_batch") return d.host_s_per_batch;
  if (key == "padding_growth") return d.padding_growth;
  throw usage_error(fmt::format("calibration cannot fit dataset key '{}'", key));
}

template <typename Map>
auto& entry(Map& map, const std::string& id, FileKind kind) {
  const auto it = map.find(id);
  if (it == map.end()) throw usage_error(fmt::format("calibration: unknown {} '{}'", kind_name(kind), id));
  return it->second;
}

template <typename Params>
auto& field_of(Params& params, const FitParameter& p) {
  switch (p.kind) {
    case FileKind::gpu: return gpu_field(entry(params.gpus, p.id, p.kind), p.key);
    case FileKind::model: return model_field(entry(params.models, p.id, p.kind), p.key);
    case FileKind::dataset: return dataset_field(entry(params.datasets, p.id, p.kind), p.key);
  }
  throw Error(ErrorCode::internal, "calibration: unknown file kind");
}

template <typename Spec>
void restore_priors(TwinParams& params, std::map<std::string, Spec>& specs, FileKind kind) {
  for (auto& [id, spec] : specs) {
    for (const auto& [key, value] : spec.priors) parameter_field(params, FitParameter{kind, id, key, 0, 0, 0}) = value;
  }
}

}  // namespace

TwinParams TwinParams::priors_from(const sim::Catalog& catalog) {
  auto params = from(catalog);
  restore_priors(params, params.gpus, FileKind::gpu);
  restore_priors(params, params.models, FileKind::model);
  restore_priors(params, params.datasets, FileKind::dataset);
  return params;
}

double& parameter_field(TwinParams& params, const FitParameter& p) { return field_of(params, p); }

double parameter_value(const TwinParams& params, const FitParameter& p) { return field_of(params, p); }

std::string FitParameter::name() const { return fmt::format("{} {} {}", kind_name(kind), id, key); }

const std::vector<std::string>& fittable_keys(FileKind kind) {
  static const std::vector<std::string> gpu = {
      "voltage.min_v", "voltage.max_v", "voltage.knee_mhz", "power_model.constant_w", "power_model.static_w",
      "power_model.clock_tree_w", "power_model.memory_clock_w", "power_model.sm_dynamic_w",
      "power_model.memory_dynamic_w", "saturation_kelems_per_sm", "busy_overlap_exponent", "fp16_efficiency_scale",
      "fp32_efficiency_scale", "memory_efficiency", "host.batch_sync_s", "host.layer_launch_s", "host.training_loop_scale",
      "host.allocator_s", "host.nvidia_smi_process_s", "host.nvidia_smi_stall_s",
      "sensor.averaging_window_s", "sensor.hold_s", "clock_scaling_exponent", "activity_spread", "autotune_compute_factor",
      "autotune_fixed_s", "first_autotune_batch"};
  static const std::vector<std::string> model = {"compute_efficiency.fp32", "compute_efficiency.fp16",
                                                 "power_intensity", "activation_melems", "launch_scale",
                                                 "power_saturation_scale", "power_phase_spread",
                                                 "training_efficiency_scale", "training_mib_per_sample",
                                                 "training_saturation_scale", "training_power_saturation_scale",
                                                 "clock_independent_fraction.<gpu id>",
                                                 "gpu_efficiency_scale.<gpu id>"};
  static const std::vector<std::string> dataset = {"host_s_per_image", "host_s_per_mpixel", "host_s_per_batch",
                                                   "padding_growth"};
  switch (kind) {
    case FileKind::gpu: return gpu;
    case FileKind::model: return model;
    case FileKind::dataset: return dataset;
  }
  return gpu;
}

double median(std::vector<double> values) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  const auto n = values.size();
  return n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

double relative_error(const Observation& observation, const TwinParams& params) {
  return (observation.predict(params) - observation.target) / observation.target;
}

}  // namespace gpucap::calibrate
