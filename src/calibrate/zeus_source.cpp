#include "gpucap/calibrate/zeus_source.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "gpucap/core/error.hpp"
#include "gpucap/core/json_file.hpp"
#include "gpucap/core/text.hpp"

namespace gpucap::calibrate {

namespace {

constexpr double kOverLimitWeight = 30.0;  // nearly a hard constraint
constexpr double kKneeMarginMhz = 15.0;

std::vector<std::string> gpu_names(const JsonFields& f, std::string_view key) {
  auto names = f.strings_or_empty(key);
  for (const auto& name : names) {
    if (name.empty()) throw f.error(key, "GPU names must not be empty");
  }
  return names;
}

bool name_starts_with(const sim::GpuSpec& gpu, const std::string& prefix) {
  const auto key = name_key(prefix);
  if (name_key(gpu.id).starts_with(key)) return true;
  return std::any_of(gpu.aliases.begin(), gpu.aliases.end(),
                     [&](const std::string& alias) { return name_key(alias).starts_with(key); });
}

bool holds_limits(const sim::GpuSpec& gpu, const std::vector<bench::ZeusPowerRow>& rows) {
  return std::all_of(rows.begin(), rows.end(), [&](const bench::ZeusPowerRow& r) {
    return r.power_limit_w >= gpu.power_limit_min_w - 1e-9 && r.power_limit_w <= gpu.power_limit_max_w + 1e-9;
  });
}

std::pair<double, double> limit_range(const std::vector<bench::ZeusPowerRow>& rows) {
  double lo = rows.front().power_limit_w, hi = lo;
  for (const auto& r : rows) {
    lo = std::min(lo, r.power_limit_w);
    hi = std::max(hi, r.power_limit_w);
  }
  return {lo, hi};
}

bool uses(const ZeusSetup& setup, sim::Precision precision) {
  return std::any_of(setup.workloads.begin(), setup.workloads.end(),
                     [&](const ZeusWorkloadMapping& m) { return m.precision == precision; });
}

// Whether a workload's batches change shape (padded sequences): padding and the allocator's host time show.
bool pads(const sim::Catalog& catalog, const ZeusWorkloadMapping& m) {
  return catalog.dataset(m.twin_dataset).padding_growth > 0.0;
}

bool pads_any(const ZeusSetup& setup, const sim::Catalog& catalog) {
  return std::any_of(setup.workloads.begin(), setup.workloads.end(),
                     [&](const ZeusWorkloadMapping& m) { return pads(catalog, m); });
}

}  // namespace

ZeusSetup load_zeus_setup(const std::string& path, const sim::Catalog& catalog) {
  const auto json = load_json_file(path);
  const JsonFields f(json, path);
  ZeusSetup setup;
  setup.fit_gpus = gpu_names(f, "fit");
  setup.check_gpus = gpu_names(f, "check");
  for (const auto& name : gpu_names(f, "derive")) {
    const auto& id = catalog.gpu(name).id;
    if (std::find(setup.derived_gpus.begin(), setup.derived_gpus.end(), id) != setup.derived_gpus.end()) {
      throw f.error("derive", fmt::format("names the GPU '{}' twice", id));
    }
    setup.derived_gpus.push_back(id);
  }
  const auto& workloads = f.at("workloads");
  if (!workloads.is_array() || workloads.empty()) throw f.error("workloads", "must be a non-empty array");
  for (std::size_t i = 0; i < workloads.size(); ++i) {
    const JsonFields w(workloads[i], path, fmt::format("workloads[{}].", i));
    ZeusWorkloadMapping m;
    m.dataset = w.string("dataset");
    m.network = w.string("network");
    m.model = catalog.model(w.string("model")).id;
    m.twin_dataset = catalog.dataset(w.string("twin_dataset")).id;
    const auto precision = w.string("precision");
    if (precision != "fp32" && precision != "fp16") throw w.error("precision", "must be \"fp32\" or \"fp16\"");
    m.precision = precision == "fp16" ? sim::Precision::fp16 : sim::Precision::fp32;
    setup.workloads.push_back(std::move(m));
  }
  return setup;
}

const sim::GpuSpec& zeus_twin_gpu(const sim::Catalog& catalog, const std::string& trace_gpu,
                                  const std::vector<bench::ZeusPowerRow>& rows,
                                  const std::optional<std::string>& requested) {
  if (rows.empty()) throw usage_error("a Zeus power trace without rows");
  const auto [lo, hi] = limit_range(rows);
  if (requested) {
    const auto& gpu = catalog.gpu(*requested);
    if (!holds_limits(gpu, rows)) {
      throw usage_error(fmt::format("the trace's power limits ({:g}-{:g} W) lie outside the {}'s range {:g}-{:g} W", lo,
                                    hi, gpu.name, gpu.power_limit_min_w, gpu.power_limit_max_w));
    }
    return gpu;
  }
  std::vector<std::string> named;
  for (const auto& gpu : catalog.gpus()) {
    if (!name_starts_with(gpu, trace_gpu)) continue;
    if (holds_limits(gpu, rows)) return gpu;
    named.push_back(fmt::format("{} ({:g}-{:g} W)", gpu.id, gpu.power_limit_min_w, gpu.power_limit_max_w));
  }
  throw usage_error(fmt::format("no twin GPU named like '{}' takes the trace's power limits {:g}-{:g} W{}; name one with --gpu",
                                trace_gpu, lo, hi, named.empty() ? "" : " (named alike: " + join(named, ", ") + ")"));
}

const ZeusWorkloadMapping* find_mapping(const ZeusSetup& setup, const bench::ZeusPowerRow& row) {
  const auto it = std::find_if(setup.workloads.begin(), setup.workloads.end(), [&](const ZeusWorkloadMapping& m) {
    return m.dataset == row.dataset && m.network == row.network;
  });
  return it == setup.workloads.end() ? nullptr : &*it;
}

sim::TrainingPoint twin_training_point(const TwinParams& params, const std::string& gpu_id,
                                       const ZeusWorkloadMapping& mapping, const bench::ZeusPowerRow& row) {
  return sim::training_under_power_limit(params.gpus.at(gpu_id), params.models.at(mapping.model),
                                         params.datasets.at(mapping.twin_dataset), mapping.precision, row.batch_size,
                                         row.power_limit_w);
}

std::vector<Observation> zeus_observations(const ZeusSetup& setup, const std::string& traces_dir,
                                           const sim::Catalog& catalog) {
  std::vector<Observation> observations;
  const auto add_trace = [&](const std::string& trace_gpu, const std::string& group) {
    const auto rows = bench::load_zeus_power_rows(bench::zeus_power_trace_path(traces_dir, trace_gpu));
    const auto gpu_id = zeus_twin_gpu(catalog, trace_gpu, rows).id;
    const double lowest_limit_w = limit_range(rows).first;
    for (const auto& row : rows) {
      const auto* mapping = find_mapping(setup, row);
      if (mapping == nullptr) continue;
      const auto label = fmt::format("{}/{} bs {} at {:g} W", row.dataset, row.network, row.batch_size, row.power_limit_w);
      const auto source = "zeus-" + trace_gpu;
      observations.push_back({source, "time_per_epoch_s", label, group, row.time_per_epoch_s, 1.0,
                              [gpu_id, m = *mapping, row](const TwinParams& p) {
                                return twin_training_point(p, gpu_id, m, row).epoch_s;
                              }});
      observations.push_back({source, "average_power_w", label, group, row.average_power_w, 1.0,
                              [gpu_id, m = *mapping, row](const TwinParams& p) {
                                return twin_training_point(p, gpu_id, m, row).average_power_w;
                              }});
      // A board holds every limit of its range, so the twin may not average above one even at its
      // lowest clock; the traces (100 W and up) cannot show what the lowest clocks draw, and a fit
      // left alone may put a flat voltage curve there. Zero unless the twin is over the limit;
      // checked at the trace's lowest limit, where it binds.
      if (row.power_limit_w > lowest_limit_w) continue;
      observations.push_back({source, "power_over_limit_w", label, group, row.power_limit_w, kOverLimitWeight,
                              [gpu_id, m = *mapping, row](const TwinParams& p) {
                                return std::max(row.power_limit_w,
                                                twin_training_point(p, gpu_id, m, row).average_power_w);
                              }});
    }
  };
  for (const auto& gpu : setup.fit_gpus) add_trace(gpu, "fit");
  for (const auto& gpu : setup.check_gpus) add_trace(gpu, "check");
  return observations;
}

std::vector<std::string> zeus_fitted_twin_gpus(const ZeusSetup& setup, const std::string& traces_dir,
                                               const sim::Catalog& catalog) {
  std::vector<std::string> ids;
  for (const auto& trace_gpu : setup.fit_gpus) {
    const auto rows = bench::load_zeus_power_rows(bench::zeus_power_trace_path(traces_dir, trace_gpu));
    ids.push_back(zeus_twin_gpu(catalog, trace_gpu, rows).id);
  }
  return ids;
}

std::vector<FitParameter> zeus_fit_parameters(const ZeusSetup& setup, const std::string& traces_dir,
                                              const sim::Catalog& catalog) {
  std::vector<FitParameter> parameters;
  const auto fitted_gpus = zeus_fitted_twin_gpus(setup, traces_dir, catalog);
  for (std::size_t i = 0; i < fitted_gpus.size(); ++i) {
    const auto& gpu = catalog.gpu(fitted_gpus[i]);
    parameters.push_back({FileKind::gpu, gpu.id, "voltage.min_v", 0.4, gpu.voltage.max_v, 1.0});
    // The knee stays inside the clock range (the catalogue rejects one at the highest clock).
    parameters.push_back({FileKind::gpu, gpu.id, "voltage.knee_mhz", gpu.min_sm_clock_mhz() + kKneeMarginMhz,
                          gpu.max_sm_clock_mhz() - kKneeMarginMhz, 1.0});
    parameters.push_back({FileKind::gpu, gpu.id, "power_model.static_w", 1.0, 150.0, 1.0});
    parameters.push_back({FileKind::gpu, gpu.id, "clock_scaling_exponent", 0.2, 1.5, 1.0});
    parameters.push_back({FileKind::gpu, gpu.id, "power_model.constant_w", 1.0, 150.0, 1.0});
    parameters.push_back({FileKind::gpu, gpu.id, "power_model.sm_dynamic_w", 20.0, 800.0, 1.0});
    parameters.push_back({FileKind::gpu, gpu.id, "power_model.memory_dynamic_w", 1.0, 300.0, 1.0});
    parameters.push_back({FileKind::gpu, gpu.id, "host.layer_launch_s", 1e-7, 1e-3, 2.0});
    if (pads_any(setup, catalog)) parameters.push_back({FileKind::gpu, gpu.id, "host.allocator_s", 1e-3, 20.0, 2.0});
    // Host speed and compute efficiency are relative: the first fitted testbed is the reference
    // that the datasets' host figures and the models' training efficiencies are in, and a GPU
    // fitted to no trace (the held-out P100) runs as efficiently as the reference for its peak.
    if (i == 0) continue;
    parameters.push_back({FileKind::gpu, gpu.id, "host.training_loop_scale", 0.1, 10.0, 2.0});
    if (uses(setup, sim::Precision::fp32)) {
      parameters.push_back({FileKind::gpu, gpu.id, "fp32_efficiency_scale", 0.05, 5.0, 2.0});
    }
    if (uses(setup, sim::Precision::fp16)) {
      parameters.push_back({FileKind::gpu, gpu.id, "fp16_efficiency_scale", 0.01, 5.0, 2.0});
    }
  }
  std::set<std::string> models, datasets, padded_models;
  for (const auto& m : setup.workloads) {
    if (models.insert(m.model).second) {
      parameters.push_back({FileKind::model, m.model, "training_efficiency_scale", 0.01, 20.0, 2.0});
      if (catalog.model(m.model).training_only()) {
        parameters.push_back({FileKind::model, m.model, "power_intensity", 0.05, 5.0, 1.0});
        parameters.push_back({FileKind::model, m.model, "launch_scale", 0.01, 20.0, 2.0});
        parameters.push_back({FileKind::model, m.model, "activation_melems", 1e-5, 1e4, 2.0});
        parameters.push_back({FileKind::model, m.model, "power_saturation_scale", 1e-3, 4.0, 2.0});
        parameters.push_back({FileKind::model, m.model, "power_phase_spread", 1e-3, 0.9, 2.0});
      } else {
        // A model shared with the inference sources keeps their feature maps and power-occupancy
        // figures; only how its training step fills the GPU at small batches is fitted here.
        parameters.push_back({FileKind::model, m.model, "training_saturation_scale", 0.05, 20.0, 1.0});
        parameters.push_back({FileKind::model, m.model, "training_power_saturation_scale", 1e-3, 4.0, 2.0});
      }
    }
    if (datasets.insert(m.twin_dataset).second) {
      parameters.push_back({FileKind::dataset, m.twin_dataset, "host_s_per_image", 1e-9, 1.0, 3.0});
      parameters.push_back({FileKind::dataset, m.twin_dataset, "host_s_per_batch", 1e-5, 10.0, 3.0});
      if (pads(catalog, m)) {
        parameters.push_back({FileKind::dataset, m.twin_dataset, "padding_growth", 1e-4, 2.0, 2.0});
      }
    }
    // How full a batch makes the GPU matters only where batches change shape (the allocator's host time).
    if (pads(catalog, m) && catalog.model(m.model).training_mib_per_sample > 0.0 &&
        padded_models.insert(m.model).second) {
      parameters.push_back({FileKind::model, m.model, "training_mib_per_sample", 1.0, 1e5, 1.0});
    }
  }
  return parameters;
}

namespace {

// What a derived GPU takes from the reference testbed, scaled by its silicon, and what it takes
// from every fitted testbed: what is relative to the reference testbed (its server's host loop, the
// efficiency of its GPU and software stack for its peak).
const std::vector<std::string> kDerivedPowerKeys = {"power_model.sm_dynamic_w",     "power_model.clock_tree_w",
                                                    "power_model.static_w",         "power_model.memory_dynamic_w",
                                                    "power_model.constant_w",       "power_model.memory_clock_w"};
const std::vector<std::string> kDerivedTestbedKeys = {"host.training_loop_scale", "host.layer_launch_s",
                                                      "host.allocator_s", "fp32_efficiency_scale",
                                                      "fp16_efficiency_scale"};

double silicon_ratio(const std::string& key, const sim::GpuSpec& gpu, const sim::GpuSpec& reference) {
  const double sms = static_cast<double>(gpu.sm_count) / static_cast<double>(reference.sm_count);
  if (key == "power_model.sm_dynamic_w" || key == "power_model.clock_tree_w") {
    return sms * gpu.boost_clock_mhz / reference.boost_clock_mhz;
  }
  if (key == "power_model.static_w") return sms;
  if (key == "power_model.memory_dynamic_w") return gpu.memory_bandwidth_gbps / reference.memory_bandwidth_gbps;
  return 1.0;  // the board's constant and memory-clock power
}

std::vector<FitParameter> derived_parameters_of(const std::string& gpu_id) {
  std::vector<FitParameter> parameters;
  for (const auto* keys : {&kDerivedPowerKeys, &kDerivedTestbedKeys}) {
    for (const auto& key : *keys) parameters.push_back({FileKind::gpu, gpu_id, key, 0.0, 0.0, 0.0});
  }
  return parameters;
}

void check_derivable(const ZeusSetup& setup, const std::vector<std::string>& fitted_gpus) {
  if (!setup.derived_gpus.empty() && fitted_gpus.empty()) {
    throw usage_error("data/calibration/zeus.json: \"derive\" needs at least one fitted trace");
  }
  for (const auto& id : setup.derived_gpus) {
    if (std::find(fitted_gpus.begin(), fitted_gpus.end(), id) != fitted_gpus.end()) {
      throw usage_error(fmt::format("data/calibration/zeus.json: the GPU '{}' is both fitted to a trace and derived", id));
    }
  }
}

}  // namespace

std::vector<FitParameter> zeus_derived_parameters(const ZeusSetup& setup, const std::vector<std::string>& fitted_gpus) {
  check_derivable(setup, fitted_gpus);
  std::vector<FitParameter> parameters;
  for (const auto& id : setup.derived_gpus) {
    const auto of_gpu = derived_parameters_of(id);
    parameters.insert(parameters.end(), of_gpu.begin(), of_gpu.end());
  }
  return parameters;
}

void derive_unfitted_gpus(const ZeusSetup& setup, const std::vector<std::string>& fitted_gpus, TwinParams& params) {
  check_derivable(setup, fitted_gpus);
  if (setup.derived_gpus.empty()) return;
  const auto& reference = params.gpus.at(fitted_gpus.front());
  for (const auto& id : setup.derived_gpus) {
    for (const auto& p : derived_parameters_of(id)) {
      auto& value = parameter_field(params, p);
      if (std::find(kDerivedTestbedKeys.begin(), kDerivedTestbedKeys.end(), p.key) != kDerivedTestbedKeys.end()) {
        double log_sum = 0.0;
        for (const auto& fitted : fitted_gpus) log_sum += std::log(parameter_value(params, {FileKind::gpu, fitted, p.key}));
        value = std::exp(log_sum / static_cast<double>(fitted_gpus.size()));
      } else {
        value = parameter_value(params, {FileKind::gpu, reference.id, p.key}) *
                silicon_ratio(p.key, params.gpus.at(id), reference);
      }
    }
  }
}

}  // namespace gpucap::calibrate
