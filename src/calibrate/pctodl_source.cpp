#include "gpucap/calibrate/pctodl_source.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "gpucap/predict/pctodl.hpp"
#include "gpucap/sim/perf_model.hpp"

namespace gpucap::calibrate {

const std::vector<PctodlSet>& pctodl_sets() {
  static const std::vector<PctodlSet> sets = {{"rtx3080ti", "imagenet_mem5001", 5001.0},
                                              {"rtx3080ti", "imagenet_mem9501", 9501.0},
                                              {"a100", "imagenet_a100_mem1215", 1215.0}};
  return sets;
}

namespace {

constexpr int kBatches[] = {8, 16, 32, 64, 128, 256};
constexpr double kLowestClockMhz = 510.0;
constexpr int kClockPoints = 10;

sim::BatchProfile harness_profile(const TwinParams& params, const std::string& gpu_id, const std::string& model,
                                  int batch, double sm_mhz, double mem_mhz) {
  const auto& gpu = params.gpus.at(gpu_id);
  const auto& spec = params.models.at(model);
  const sim::OperatingPoint point{sim::nearest_clock_mhz(gpu.sm_clocks_mhz, sm_mhz), mem_mhz};
  return sim::profile_batch(gpu, spec, sim::Precision::fp16, batch, point, /*copy_input=*/false);
}

// Clocks spread evenly from kLowestClockMhz to the top, snapped to supported ones.
std::vector<double> grid_clocks(const sim::GpuSpec& gpu) {
  std::vector<double> clocks;
  const double lo = std::max(kLowestClockMhz, gpu.min_sm_clock_mhz());
  const double hi = gpu.max_sm_clock_mhz();
  for (int i = 0; i < kClockPoints; ++i) {
    const double f = sim::nearest_clock_mhz(gpu.sm_clocks_mhz, lo + (hi - lo) * i / (kClockPoints - 1));
    if (clocks.empty() || clocks.back() != f) clocks.push_back(f);
  }
  return clocks;
}

}  // namespace

double pctodl_harness_throughput(const TwinParams& params, const std::string& gpu, const std::string& model,
                                 int batch, double sm_mhz, double mem_mhz) {
  return batch / harness_profile(params, gpu, model, batch, sm_mhz, mem_mhz).latency_s();
}

double pctodl_harness_power_w(const TwinParams& params, const std::string& gpu_id, const std::string& model,
                              int batch, double sm_mhz, double mem_mhz) {
  const auto& gpu = params.gpus.at(gpu_id);
  const sim::OperatingPoint point{sim::nearest_clock_mhz(gpu.sm_clocks_mhz, sm_mhz), mem_mhz};
  const auto profile = harness_profile(params, gpu_id, model, batch, sm_mhz, mem_mhz);
  const double idle = sim::idle_loaded_power_w(gpu, point);
  const double busy = sim::busy_power_w(gpu, point, profile.sm_activity, profile.memory_activity);
  // The highest reading of a sensor averaging over T while batches run back to back: the duty
  // cycle when T spans many batches, up to the peak of one compute phase when T is shorter.
  const double duty_cycle_w = idle + (busy - idle) * profile.busy_s / profile.latency_s();
  return std::max(duty_cycle_w, sim::peak_reading_w(profile, sim::busy_halves_w(gpu, point, profile), idle,
                                                    gpu.sensor.averaging_window_s));
}

std::vector<Observation> pctodl_observations(const std::string& params_dir, const sim::Catalog& catalog) {
  std::vector<Observation> observations;
  std::size_t point = 0;
  for (const auto& set : pctodl_sets()) {
    const auto& gpu = catalog.gpu(set.gpu);
    for (const auto& name : predict::pctodl_models(params_dir)) {
      // Anomaly 1 of the export: on the A100, maxvit_t's fit is a copy of mnasnet's.
      if (name == "maxvit_t" && set.gpu == "a100") continue;
      const auto predictor = predict::PctodlPredictor::load(params_dir, name, set.param_set);
      const std::string model = catalog.model(name).id;
      for (const int b : kBatches) {
        for (const double f : grid_clocks(gpu)) {
          const double shares[] = {100.0};
          const int batches[] = {b};
          const auto reference = predictor.predict(shares, batches, f);
          const auto group = point++ % 5 == 0 ? "held-out" : "fit";
          const auto label = fmt::format("{} {} mem {:g} batch {} at {:g} MHz", set.gpu, model, set.memory_clock_mhz, b, f);
          const std::string gpu_id = set.gpu;
          const double m = set.memory_clock_mhz;
          const auto source = fmt::format("pctodl-{}", set.gpu);
          observations.push_back(Observation{source, "throughput_img_s", label, group, reference.throughput, 1.0,
                                             [gpu_id, model, b, f, m](const TwinParams& p) {
                                               return pctodl_harness_throughput(p, gpu_id, model, b, f, m);
                                             }});
          observations.push_back(Observation{source, "power_w", label, group, reference.power_w, 1.0,
                                             [gpu_id, model, b, f, m](const TwinParams& p) {
                                               return pctodl_harness_power_w(p, gpu_id, model, b, f, m);
                                             }});
        }
      }
    }
  }
  return observations;
}

std::map<std::pair<std::string, std::string>, std::vector<double>> pctodl_neighbour_errors(
    const std::string& params_dir, const sim::Catalog& catalog) {
  std::map<std::pair<std::string, std::string>, std::vector<double>> errors;
  for (const auto& set : pctodl_sets()) {
    const auto& gpu = catalog.gpu(set.gpu);
    const auto source = fmt::format("pctodl-{}", set.gpu);
    for (const auto& name : predict::pctodl_models(params_dir)) {
      if (name == "maxvit_t" && set.gpu == "a100") continue;  // as in pctodl_observations
      const auto predictor = predict::PctodlPredictor::load(params_dir, name, set.param_set);
      for (const double f : grid_clocks(gpu)) {
        std::vector<predict::PctodlPrediction> along;
        for (const int b : kBatches) {
          const double shares[] = {100.0};
          const int batches[] = {b};
          along.push_back(predictor.predict(shares, batches, f));
        }
        for (std::size_t i = 1; i + 1 < along.size(); ++i) {
          const auto from_neighbours = [&](double lower, double value, double upper) {
            return std::abs(std::sqrt(lower * upper) - value) / value;
          };
          errors[{source, "throughput_img_s"}].push_back(
              from_neighbours(along[i - 1].throughput, along[i].throughput, along[i + 1].throughput));
          errors[{source, "power_w"}].push_back(
              from_neighbours(along[i - 1].power_w, along[i].power_w, along[i + 1].power_w));
        }
      }
    }
  }
  return errors;
}

std::vector<FitParameter> pctodl_fit_parameters(const sim::Catalog& catalog, const std::string& params_dir) {
  std::vector<FitParameter> parameters;
  for (const std::string gpu : {"rtx3080ti", "a100"}) {
    const auto& spec = catalog.gpu(gpu);
    parameters.push_back({FileKind::gpu, gpu, "voltage.min_v", 0.4, spec.voltage.max_v, 0.0});
    parameters.push_back({FileKind::gpu, gpu, "voltage.knee_mhz", spec.min_sm_clock_mhz() + 15.0,
                          spec.max_sm_clock_mhz() - 15.0, 0.0});
    parameters.push_back({FileKind::gpu, gpu, "power_model.constant_w", 1.0, 150.0, 0.0});
    parameters.push_back({FileKind::gpu, gpu, "power_model.static_w", 1.0, 150.0, 0.0});
    parameters.push_back({FileKind::gpu, gpu, "power_model.clock_tree_w", 0.5, 150.0, 0.0});
    parameters.push_back({FileKind::gpu, gpu, "power_model.sm_dynamic_w", 20.0, 800.0, 0.0});
    parameters.push_back({FileKind::gpu, gpu, "power_model.memory_dynamic_w", 1.0, 300.0, 1.0});
    parameters.push_back({FileKind::gpu, gpu, "saturation_kelems_per_sm", 0.5, 5000.0, 1.0});
    parameters.push_back({FileKind::gpu, gpu, "fp16_efficiency_scale", 0.01, 5.0, 2.0});
    parameters.push_back({FileKind::gpu, gpu, "busy_overlap_exponent", 1.0, 16.0, 1.0});
    parameters.push_back({FileKind::gpu, gpu, "clock_scaling_exponent", 0.1, 1.5, 1.0});
    parameters.push_back({FileKind::gpu, gpu, "host.batch_sync_s", 1e-6, 0.05, 2.0});
    parameters.push_back({FileKind::gpu, gpu, "host.layer_launch_s", 1e-7, 1e-3, 2.0});
    parameters.push_back({FileKind::gpu, gpu, "activity_spread", 0.01, 1.0, 2.0});
    if (spec.memory_clocks_mhz.size() > 1) {
      parameters.push_back({FileKind::gpu, gpu, "power_model.memory_clock_w", 1.0, 150.0, 1.0});
    }
  }
  std::set<std::string> models;
  for (const auto& name : predict::pctodl_models(params_dir)) models.insert(catalog.model(name).id);
  for (const auto& model : models) {
    parameters.push_back({FileKind::model, model, "compute_efficiency.fp16", 0.005, 1.0, 2.0});
    parameters.push_back({FileKind::model, model, "power_intensity", 0.2, 3.0, 2.0});
    parameters.push_back({FileKind::model, model, "activation_melems", 0.5, 2000.0, 2.0});
    parameters.push_back({FileKind::model, model, "launch_scale", 0.1, 20.0, 2.0});
    for (const std::string gpu : {"rtx3080ti", "a100"}) {
      parameters.push_back({FileKind::model, model, "clock_independent_fraction." + gpu, 0.001, 0.95, 2.0});
    }
  }
  return parameters;
}

}  // namespace gpucap::calibrate
