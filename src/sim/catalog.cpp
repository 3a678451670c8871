#include "gpucap/sim/catalog.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "gpucap/core/error.hpp"
#include "gpucap/core/files.hpp"
#include "gpucap/core/json_file.hpp"
#include "gpucap/core/text.hpp"

namespace gpucap::sim {

namespace fs = std::filesystem;

const char* to_string(Precision precision) { return precision == Precision::fp16 ? "fp16" : "fp32"; }

const char* to_string(PipelineMode mode) {
  switch (mode) {
    case PipelineMode::none: return "none";
    case PipelineMode::serial: return "serial";
    case PipelineMode::overlapped: return "overlapped";
  }
  return "?";
}

PipelineMode parse_pipeline_mode(std::string_view text) {
  if (text == "none") return PipelineMode::none;
  if (text == "serial") return PipelineMode::serial;
  if (text == "overlapped") return PipelineMode::overlapped;
  throw usage_error(fmt::format("input pipeline '{}' must be none, serial or overlapped", text));
}

double host_seconds_per_image(const DatasetSpec& dataset, const ModelSpec& model) {
  const double mpixels = static_cast<double>(model.input_size) * model.input_size / 1e6;
  return dataset.host_s_per_image + dataset.host_s_per_mpixel * mpixels;
}

namespace {

bool contains_clock(const std::vector<double>& clocks, double mhz) {
  return std::any_of(clocks.begin(), clocks.end(), [mhz](double c) { return std::abs(c - mhz) < 0.5; });
}

// A clock list is either an explicit array or {"min", "max", "step"}; the result is ascending.
std::vector<double> clock_list(const JsonFields& fields, std::string_view key) {
  std::vector<double> clocks;
  if (fields.at(key).is_object()) {
    const auto range = fields.object(key);
    const double min_mhz = range.positive("min");
    const double max_mhz = range.positive("max");
    const double step_mhz = range.positive("step");
    if (max_mhz < min_mhz) throw fields.error(key, "max must be >= min");
    if ((max_mhz - min_mhz) / step_mhz > 10000.0) throw fields.error(key, "more than 10000 clock levels");
    // Counted down from the top, as NVIDIA lists supported clocks; the minimum is always included.
    for (double mhz = max_mhz; mhz > min_mhz + 1e-9; mhz -= step_mhz) clocks.push_back(mhz);
    clocks.push_back(min_mhz);
  } else {
    clocks = fields.numbers(key);
  }
  std::sort(clocks.begin(), clocks.end());
  if (clocks.front() <= 0.0) throw fields.error(key, "clocks must be > 0 MHz");
  if (std::adjacent_find(clocks.begin(), clocks.end()) != clocks.end()) throw fields.error(key, "clocks must be distinct");
  return clocks;
}

std::map<std::string, double> read_priors(const JsonFields& f) {
  std::map<std::string, double> priors;
  if (!f.has("_prior")) return priors;
  const auto& object = f.at("_prior");
  if (!object.is_object()) throw f.error("_prior", "must be an object of numbers");
  for (const auto& [key, value] : object.items()) {
    if (!value.is_number()) throw f.error("_prior", fmt::format("{} must be a number", key));
    priors[key] = value.get<double>();
  }
  return priors;
}

void require(bool condition, const JsonFields& fields, std::string_view key, std::string_view message) {
  if (!condition) throw fields.error(key, message);
}

}  // namespace

// Ten levels spread evenly over the supported range, snapped to supported clocks: the default
// DVFS ladder on GPUs for which the seeds publish none (the seeds used ten levels on the P40).
std::vector<double> spread_levels(const std::vector<double>& clocks, std::size_t count) {
  if (clocks.empty() || count == 0) return {};
  if (count == 1) return {clocks.back()};
  std::vector<double> levels;
  const double lo = clocks.front();
  const double hi = clocks.back();
  for (std::size_t i = 0; i < count; ++i) {
    const double target = lo + (hi - lo) * static_cast<double>(i) / static_cast<double>(count - 1);
    const auto nearest = std::min_element(clocks.begin(), clocks.end(), [target](double a, double b) {
      return std::abs(a - target) < std::abs(b - target);
    });
    if (levels.empty() || levels.back() != *nearest) levels.push_back(*nearest);
  }
  return levels;
}


GpuSpec load_gpu_spec(const std::string& path) {
  const auto json = load_json_file(path);
  const JsonFields f(json, path);
  GpuSpec gpu;
  gpu.id = f.string("id");
  gpu.source_file = path;
  gpu.priors = read_priors(f);
  gpu.name = f.string("name");
  gpu.aliases = f.strings_or_empty("aliases");
  gpu.sm_count = static_cast<int>(f.positive_integer("sm_count"));
  gpu.fp32_lanes_per_sm = static_cast<int>(f.positive_integer("fp32_lanes_per_sm"));
  gpu.fp16_tflops = f.positive("fp16_tflops");
  gpu.memory_bandwidth_gbps = f.positive("memory_bandwidth_gbps");
  gpu.memory_efficiency = f.fraction("memory_efficiency");
  gpu.memory_gib = f.non_negative_or("memory_gib", 0.0);
  gpu.sm_clocks_mhz = clock_list(f, "sm_clocks_mhz");
  gpu.boost_clock_mhz = f.positive("boost_clock_mhz");
  gpu.base_clock_mhz = f.positive("base_clock_mhz");
  require(contains_clock(gpu.sm_clocks_mhz, gpu.boost_clock_mhz), f, "boost_clock_mhz", "must be a supported SM clock");
  gpu.memory_clocks_mhz = clock_list(f, "memory_clocks_mhz");
  gpu.default_memory_clock_mhz = f.positive("default_memory_clock_mhz");
  require(contains_clock(gpu.memory_clocks_mhz, gpu.default_memory_clock_mhz), f, "default_memory_clock_mhz",
          "must be one of memory_clocks_mhz");

  const auto limit = f.object("power_limit_w");
  gpu.power_limit_min_w = limit.positive("min");
  gpu.power_limit_max_w = limit.positive("max");
  gpu.power_limit_default_w = limit.positive("default");
  require(gpu.power_limit_min_w <= gpu.power_limit_default_w && gpu.power_limit_default_w <= gpu.power_limit_max_w,
          f, "power_limit_w", "needs min <= default <= max");
  gpu.idle_power_w = f.positive("idle_power_w");

  if (f.has("dvfs_levels_mhz")) {
    gpu.dvfs_levels_mhz = f.numbers("dvfs_levels_mhz");
    std::sort(gpu.dvfs_levels_mhz.begin(), gpu.dvfs_levels_mhz.end());
    for (const double level : gpu.dvfs_levels_mhz) {
      require(contains_clock(gpu.sm_clocks_mhz, level), f, "dvfs_levels_mhz",
              fmt::format("{:g} MHz is not a supported SM clock", level));
    }
  } else {
    gpu.dvfs_levels_mhz = spread_levels(gpu.sm_clocks_mhz, 10);
  }
  gpu.saturation_kelems_per_sm = f.positive("saturation_kelems_per_sm");
  gpu.latency_jitter_fraction = f.non_negative("latency_jitter_fraction");
  gpu.busy_overlap_exponent = f.non_negative_or("busy_overlap_exponent", 0.0);
  gpu.fp16_efficiency_scale = f.positive_or("fp16_efficiency_scale", 1.0);
  gpu.fp32_efficiency_scale = f.positive_or("fp32_efficiency_scale", 1.0);
  gpu.clock_scaling_exponent = f.positive_or("clock_scaling_exponent", 1.0);
  gpu.activity_spread = f.non_negative_or("activity_spread", 0.0);
  gpu.mps_interference_per_tenant = f.non_negative_or("mps_interference_per_tenant", gpu.mps_interference_per_tenant);
  gpu.mps_restart_s = f.non_negative_or("mps_restart_s", gpu.mps_restart_s);
  require(gpu.activity_spread <= 1.0, f, "activity_spread", "must be in [0, 1]");
  gpu.autotune_compute_factor = f.non_negative_or("autotune_compute_factor", 0.0);
  gpu.autotune_fixed_s = f.non_negative_or("autotune_fixed_s", 0.0);
  gpu.first_autotune_batch = f.non_negative_or("first_autotune_batch", 0.0);
  // Renamed on 2026-11-26: a file that still sets the old share must not lose it silently.
  require(!f.has("first_autotune_activity"), f, "first_autotune_activity",
          "replaced by first_autotune_batch, the batch size whose activity the first shape's autotuning draws "
          "(docs/simulator.md)");

  const auto voltage = f.object("voltage");
  gpu.voltage.min_v = voltage.positive("min_v");
  gpu.voltage.max_v = voltage.positive("max_v");
  gpu.voltage.knee_mhz = voltage.positive("knee_mhz");
  require(gpu.voltage.min_v <= gpu.voltage.max_v, f, "voltage", "needs min_v <= max_v");
  require(gpu.voltage.knee_mhz < gpu.max_sm_clock_mhz(), f, "voltage.knee_mhz", "must be below the highest SM clock");

  const auto power = f.object("power_model");
  gpu.power.constant_w = power.non_negative("constant_w");
  gpu.power.static_w = power.non_negative("static_w");
  gpu.power.clock_tree_w = power.non_negative("clock_tree_w");
  gpu.power.memory_clock_w = power.non_negative("memory_clock_w");
  gpu.power.sm_dynamic_w = power.positive("sm_dynamic_w");
  gpu.power.memory_dynamic_w = power.non_negative("memory_dynamic_w");

  const auto sensor = f.object("sensor");
  gpu.sensor.update_period_s = sensor.positive("update_period_s");
  gpu.sensor.averaging_window_s = sensor.positive("averaging_window_s");
  gpu.sensor.noise_fraction = sensor.non_negative("noise_fraction");
  gpu.sensor.hold_s = sensor.non_negative_or("hold_s", 0.0);
  require(gpu.sensor.averaging_window_s >= gpu.sensor.update_period_s, f, "sensor.averaging_window_s",
          "must be >= update_period_s");

  const auto host = f.object("host");
  gpu.host.pcie_gbps = host.positive("pcie_gbps");
  gpu.host.batch_sync_s = host.non_negative("batch_sync_s");
  gpu.host.layer_launch_s = host.non_negative("layer_launch_s");
  gpu.host.training_loop_scale = host.positive_or("training_loop_scale", 1.0);
  gpu.host.allocator_s = host.non_negative_or("allocator_s", 0.0);
  gpu.host.nvidia_smi_process_s = host.positive_or("nvidia_smi_process_s", gpu.host.nvidia_smi_process_s);
  gpu.host.nvidia_smi_stall_s = host.non_negative_or("nvidia_smi_stall_s", gpu.host.nvidia_smi_stall_s);
  require(gpu.host.nvidia_smi_stall_s < gpu.host.nvidia_smi_process_s, f, "host.nvidia_smi_stall_s",
          "must be shorter than host.nvidia_smi_process_s");
  return gpu;
}

ModelSpec load_model_spec(const std::string& path) {
  const auto json = load_json_file(path);
  const JsonFields f(json, path);
  ModelSpec model;
  model.id = f.string("id");
  model.source_file = path;
  model.priors = read_priors(f);
  model.name = f.string("name");
  model.aliases = f.strings_or_empty("aliases");
  model.family = f.string("family");
  model.input_size = static_cast<int>(f.positive_integer("input_size"));
  model.params_m = f.positive("params_m");
  model.gmacs = f.positive("gmacs");
  model.activation_melems = f.positive("activation_melems");
  model.layers = static_cast<int>(f.positive_integer("layers"));
  const auto precision = f.string("precision");
  if (precision == "fp32") {
    model.precision = Precision::fp32;
  } else if (precision == "fp16") {
    model.precision = Precision::fp16;
  } else {
    throw f.error("precision", "must be \"fp32\" or \"fp16\"");
  }
  const auto efficiency = f.object("compute_efficiency");
  model.fp32_efficiency = efficiency.fraction("fp32");
  model.fp16_efficiency = efficiency.fraction("fp16");
  model.power_intensity = f.positive_or("power_intensity", 1.0);
  model.launch_scale = f.positive_or("launch_scale", 1.0);
  model.power_saturation_scale = f.positive_or("power_saturation_scale", 1.0);
  model.power_phase_spread = f.non_negative_or("power_phase_spread", 0.0);
  require(model.power_phase_spread <= 1.0, f, "power_phase_spread", "must be in [0, 1]");
  if (f.has("clock_independent_fraction")) {
    const auto& fractions = f.at("clock_independent_fraction");
    if (!fractions.is_object()) throw f.error("clock_independent_fraction", "must be an object of GPU id: fraction");
    const auto by_gpu = f.object("clock_independent_fraction");
    for (const auto& [gpu, value] : fractions.items()) {
      const double u = by_gpu.non_negative(gpu);
      if (u >= 1.0) throw by_gpu.error(gpu, fmt::format("must be in [0, 1), got {:g}", u));
      model.clock_independent_fraction[gpu] = u;
    }
  }
  if (f.has("gpu_efficiency_scale")) {
    if (!f.at("gpu_efficiency_scale").is_object()) {
      throw f.error("gpu_efficiency_scale", "must be an object of GPU id: scale");
    }
    const auto by_gpu = f.object("gpu_efficiency_scale");
    for (const auto& [gpu, value] : f.at("gpu_efficiency_scale").items()) model.gpu_efficiency_scale[gpu] = by_gpu.positive(gpu);
  }
  model.training_efficiency_scale = f.positive_or("training_efficiency_scale", 1.0);
  model.training_saturation_scale = f.positive_or("training_saturation_scale", 1.0);
  model.training_power_saturation_scale = f.positive_or("training_power_saturation_scale", 1.0);
  model.training_mib_per_sample = f.non_negative_or("training_mib_per_sample", 0.0);
  return model;
}

DatasetSpec load_dataset_spec(const std::string& path) {
  const auto json = load_json_file(path);
  const JsonFields f(json, path);
  DatasetSpec dataset;
  dataset.id = f.string("id");
  dataset.source_file = path;
  dataset.priors = read_priors(f);
  dataset.name = f.string("name");
  dataset.aliases = f.strings_or_empty("aliases");
  dataset.images = f.positive_integer("images");
  dataset.host_s_per_image = f.non_negative_or("host_s_per_image", 0.0);
  dataset.host_s_per_mpixel = f.non_negative_or("host_s_per_mpixel", 0.0);
  dataset.host_s_per_batch = f.non_negative_or("host_s_per_batch", 0.0);
  dataset.padding_growth = f.non_negative_or("padding_growth", 0.0);
  return dataset;
}

namespace {

std::vector<std::string> json_files_in(const fs::path& dir) {
  auto files = list_files(dir.string(), ".json");
  if (files.empty()) throw Error(ErrorCode::invalid_data, fmt::format("{}: no .json files", dir.string()));
  return files;
}

// Every id and alias must lead to exactly one entry.
template <typename Spec>
void check_unique_names(const std::vector<Spec>& specs, std::string_view kind) {
  struct Owner {
    std::string key;
    std::size_t index;
  };
  std::vector<Owner> owners;
  for (std::size_t i = 0; i < specs.size(); ++i) {
    std::vector<std::string> names = specs[i].aliases;
    names.push_back(specs[i].id);
    for (const auto& name : names) {
      const auto key = name_key(name);
      for (const auto& owner : owners) {
        if (owner.key == key && owner.index != i) {
          throw Error(ErrorCode::invalid_data, fmt::format("{} name '{}' is used by two entries ('{}' and '{}')", kind,
                                                           name, specs[owner.index].id, specs[i].id));
        }
      }
      owners.push_back(Owner{key, i});
    }
  }
}

template <typename Spec>
const Spec& find_spec(const std::vector<Spec>& specs, std::string_view name, std::string_view kind) {
  const auto key = name_key(name);
  for (const auto& spec : specs) {
    if (name_key(spec.id) == key) return spec;
    for (const auto& alias : spec.aliases) {
      if (name_key(alias) == key) return spec;
    }
  }
  std::vector<std::string> ids;
  for (const auto& spec : specs) ids.push_back(spec.id);
  throw usage_error(fmt::format("unknown {} '{}'; known: {}", kind, name, join(ids, ", ")));
}

}  // namespace

Catalog Catalog::load(const std::string& data_dir) {
  Catalog catalog;
  catalog.data_dir_ = data_dir;
  const fs::path root(data_dir);
  for (const auto& file : json_files_in(root / "gpus")) catalog.gpus_.push_back(load_gpu_spec(file));
  for (const auto& file : json_files_in(root / "models")) catalog.models_.push_back(load_model_spec(file));
  for (const auto& file : json_files_in(root / "datasets")) catalog.datasets_.push_back(load_dataset_spec(file));
  check_unique_names(catalog.gpus_, "GPU");
  check_unique_names(catalog.models_, "model");
  check_unique_names(catalog.datasets_, "dataset");
  return catalog;
}

Catalog Catalog::of(std::string data_dir, std::vector<GpuSpec> gpus, std::vector<ModelSpec> models,
                    std::vector<DatasetSpec> datasets) {
  Catalog catalog;
  catalog.data_dir_ = std::move(data_dir);
  catalog.gpus_ = std::move(gpus);
  catalog.models_ = std::move(models);
  catalog.datasets_ = std::move(datasets);
  check_unique_names(catalog.gpus_, "GPU");
  check_unique_names(catalog.models_, "model");
  check_unique_names(catalog.datasets_, "dataset");
  return catalog;
}

const GpuSpec& Catalog::gpu(std::string_view name) const { return find_spec(gpus_, name, "GPU"); }
const ModelSpec& Catalog::model(std::string_view name) const { return find_spec(models_, name, "model"); }
const DatasetSpec& Catalog::dataset(std::string_view name) const { return find_spec(datasets_, name, "dataset"); }

}  // namespace gpucap::sim
