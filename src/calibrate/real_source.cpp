#include "gpucap/calibrate/real_source.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>
#include <tuple>

#include "gpucap/calibrate/calibration.hpp"
#include "gpucap/core/error.hpp"
#include "gpucap/core/json_file.hpp"
#include "gpucap/runtime/platform_tuning.hpp"
#include "gpucap/sim/perf_model.hpp"

namespace gpucap::calibrate {

namespace {

namespace fs = std::filesystem;

sim::Precision precision_of(const JsonFields& setup) {
  const auto text = setup.string("precision");
  if (text == "fp32") return sim::Precision::fp32;
  if (text == "fp16") return sim::Precision::fp16;
  throw setup.error("precision", fmt::format("'{}': the twin runs fp32 and fp16 only", text));
}

// The points of one trial file (`gpucap tune --platform nvml --out`, read as the tuner reads it).
std::vector<RealSweepPoint> load_sweep(const fs::path& path, const std::string& folder, const std::string& use,
                                       const std::string& gpu, const sim::Catalog& catalog) {
  const auto file = path.string();
  const auto contents = runtime::read_trial_file(file);
  if (!contents.setup.is_object()) throw Error(ErrorCode::invalid_data, fmt::format("{}: setup: must be an object", file));
  const JsonFields setup(contents.setup, file, "setup.");
  if (setup.has("clocks_locked") && setup.at("clocks_locked").is_boolean() && setup.at("clocks_locked").get<bool>()) {
    throw setup.error("clocks_locked", "a sweep at locked clocks: the real-GPU source takes the GPU's own clocks only");
  }
  const auto model = catalog.model(fs::path(setup.string("model_file")).stem().string()).id;
  const auto precision = precision_of(setup);
  if (contents.trials.empty()) throw Error(ErrorCode::invalid_data, fmt::format("{}: trials: must be a non-empty array", file));
  std::vector<RealSweepPoint> points;
  for (std::size_t i = 0; i < contents.trials.size(); ++i) {
    const auto& [point, trial] = contents.trials[i];
    const auto bad = [&](std::string_view field, std::string_view message) {
      return Error(ErrorCode::invalid_data, fmt::format("{}: trials[{}].{}: {}", file, i, field, message));
    };
    if (point.batch_size > 100'000) throw bad("batch_size", "must be at most 100000");
    const auto& r = trial.result;
    if (!(r.throughput_img_s > 0.0)) throw bad("throughput_img_s", "must be > 0");
    if (!(r.mean_power_w > 0.0)) throw bad("mean_power_w", "must be > 0");
    if (r.max_power_w < r.mean_power_w) throw bad("max_power_w", "is below mean_power_w");
    points.push_back({folder, use, gpu, model, precision, point.batch_size, r.throughput_img_s, r.mean_power_w,
                      r.max_power_w});
  }
  return points;
}

// The clock the GPU runs a steady stream of batches at: its boost clock, lowered by the board's
// power limiter (the default limit: the sweeps never change it) where the batch would exceed it.
sim::OperatingPoint operating_point(const sim::GpuSpec& gpu, const sim::ModelSpec& model, const RealSweepPoint& p) {
  const sim::OperatingPoint boost{gpu.boost_clock_mhz, gpu.default_memory_clock_mhz};
  const double f = sim::power_limited_sm_clock_mhz(gpu, model, p.precision, p.batch, boost, gpu.power_limit_default_w);
  return {f, gpu.default_memory_clock_mhz};
}

std::string row_source(const RealSweepPoint& p) {
  return fmt::format("real-{} ({})", p.gpu, p.use == "fit" ? "fitted" : "held out");
}

// Per (GPU, model, precision), the mean signed error of throughput and mean power over its points;
// the paragraph names the three largest of each, computed from the table above.
std::string where_the_twin_misses(const std::vector<RealPointFidelity>& points) {
  struct Errors {
    double throughput = 0.0;
    double power = 0.0;
    int n = 0;
  };
  std::map<std::string, Errors> by_sweep;
  for (const auto& [p, twin] : points) {
    auto& e = by_sweep[fmt::format("{} {} {}", p.gpu, p.model, sim::to_string(p.precision))];
    e.throughput += twin.throughput_img_s / p.throughput_img_s - 1.0;
    e.power += twin.mean_power_w / p.mean_power_w - 1.0;
    ++e.n;
  }
  const auto largest = [&](auto field, const char* what) {
    std::vector<std::pair<double, std::string>> ranked;
    for (const auto& [name, e] : by_sweep) ranked.emplace_back(field(e) / e.n, name);
    std::sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) { return std::abs(a.first) > std::abs(b.first); });
    std::vector<std::string> parts;
    for (std::size_t i = 0; i < std::min<std::size_t>(3, ranked.size()); ++i) {
      parts.push_back(fmt::format("{} {:+.0f} %", ranked[i].second, 100.0 * ranked[i].first));
    }
    return fmt::format("{}: {}", what, fmt::join(parts, "; "));
  };
  return fmt::format("\n**Where the twin misses on real GPUs** (mean signed error over each sweep's points, the "
                     "largest three). {}. {}.\n",
                     largest([](const Errors& e) { return e.throughput; }, "Throughput"),
                     largest([](const Errors& e) { return e.power; }, "Mean power"));
}

}  // namespace

std::vector<RealSweepPoint> load_real_sweeps(const std::string& setup_path, const sim::Catalog& catalog) {
  const auto json = load_json_file(setup_path);
  if (!json.is_object()) throw Error(ErrorCode::invalid_data, fmt::format("{}: must be a JSON object", setup_path));
  const JsonFields top(json, setup_path);
  const auto& folders = top.at("folders");
  if (!folders.is_array() || folders.empty()) throw top.error("folders", "must be a non-empty array");
  const auto base = fs::path(setup_path).parent_path();
  std::vector<RealSweepPoint> points;
  for (std::size_t i = 0; i < folders.size(); ++i) {
    const JsonFields f(folders[i], setup_path, fmt::format("folders[{}].", i));
    const auto use = f.string("use");
    if (use != "fit" && use != "check") throw f.error("use", "must be \"fit\" or \"check\"");
    const auto gpu = catalog.gpu(f.string("gpu")).id;
    const auto dir = base / f.string("path");
    // The error_code overloads: a path the system refuses (too long, a loop, no permission) is
    // this file's error, not std::filesystem's exception (a fuzz finding, calibration_setup).
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) {
      throw f.error("path", fmt::format("{} is not a folder{}", dir.string(), ec ? " (" + ec.message() + ")" : ""));
    }
    std::vector<fs::path> sweeps;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
      const auto name = it->path().filename().string();
      std::error_code type_ec;
      if (it->is_regular_file(type_ec) && name.starts_with("sweep-") && name.ends_with(".json")) sweeps.push_back(it->path());
    }
    if (ec) throw f.error("path", fmt::format("{} cannot be listed ({})", dir.string(), ec.message()));
    if (sweeps.empty()) throw f.error("path", fmt::format("{} holds no sweep-*.json", dir.string()));
    std::sort(sweeps.begin(), sweeps.end());
    const auto folder = fs::path(f.string("path")).filename().string();
    for (const auto& sweep : sweeps) {
      const auto more = load_sweep(sweep, folder, use, gpu, catalog);
      points.insert(points.end(), more.begin(), more.end());
    }
  }
  return points;
}

RealPrediction predict_real_point(const TwinParams& params, const RealSweepPoint& p) {
  const auto& gpu = params.gpus.at(p.gpu);
  const auto& model = params.models.at(p.model);
  const auto point = operating_point(gpu, model, p);
  // gpucap's engine makes each batch size's input once, on the GPU: no copy per batch.
  const auto profile = sim::profile_batch(gpu, model, p.precision, p.batch, point, /*copy_input=*/false);
  RealPrediction out;
  out.throughput_img_s = p.batch / profile.latency_s();
  out.mean_power_w = sim::average_batch_power_w(gpu, profile, point);
  out.max_power_w = std::max(out.mean_power_w,
                             sim::peak_reading_w(profile, sim::busy_halves_w(gpu, point, profile),
                                                 sim::idle_loaded_power_w(gpu, point), gpu.sensor.averaging_window_s));
  return out;
}

std::vector<Observation> real_observations(const std::vector<RealSweepPoint>& points) {
  std::vector<Observation> observations;
  for (const auto& p : points) {
    const auto label = fmt::format("{} {} {} batch {}", p.folder, p.model, sim::to_string(p.precision), p.batch);
    const auto source = row_source(p);
    observations.push_back({source, "throughput_img_s", label, p.use, p.throughput_img_s, 1.0,
                            [p](const TwinParams& params) { return predict_real_point(params, p).throughput_img_s; }});
    observations.push_back({source, "mean_power_w", label, p.use, p.mean_power_w, 1.0,
                            [p](const TwinParams& params) { return predict_real_point(params, p).mean_power_w; }});
    observations.push_back({source, "window_max_power_w", label, "check", p.max_power_w, 1.0,
                            [p](const TwinParams& params) { return predict_real_point(params, p).max_power_w; }});
  }
  return observations;
}

std::vector<FitParameter> real_fit_parameters(const std::vector<RealSweepPoint>& points, const sim::Catalog& catalog) {
  std::set<std::string> gpus;
  for (const auto& p : points) {
    if (p.use == "fit") gpus.insert(p.gpu);
  }
  std::vector<FitParameter> parameters;
  for (const auto& gpu : gpus) {
    // The sweeps run at the GPU's own clocks only: the voltage curve and the clock-dependent
    // split of power are not seen, so only the levels are fitted.
    parameters.push_back({FileKind::gpu, gpu, "power_model.constant_w", 1.0, 250.0, 1.0});
    parameters.push_back({FileKind::gpu, gpu, "power_model.sm_dynamic_w", 20.0, 1500.0, 1.0});
    parameters.push_back({FileKind::gpu, gpu, "power_model.memory_dynamic_w", 1.0, 600.0, 1.0});
    parameters.push_back({FileKind::gpu, gpu, "saturation_kelems_per_sm", 0.5, 5000.0, 1.0});
    parameters.push_back({FileKind::gpu, gpu, "fp32_efficiency_scale", 0.05, 10.0, 2.0});
    parameters.push_back({FileKind::gpu, gpu, "fp16_efficiency_scale", 0.01, 10.0, 2.0});
    parameters.push_back({FileKind::gpu, gpu, "host.batch_sync_s", 1e-6, 0.05, 2.0});
    parameters.push_back({FileKind::gpu, gpu, "host.layer_launch_s", 1e-7, 1e-3, 2.0});
    parameters.push_back({FileKind::gpu, gpu, "busy_overlap_exponent", 1.0, 16.0, 1.0});
  }
  // Each model's efficiency on that GPU, where its file lists one to start from.
  std::set<std::pair<std::string, std::string>> models;
  for (const auto& p : points) {
    if (p.use == "fit" && catalog.model(p.model).gpu_efficiency_scale.contains(p.gpu)) models.insert({p.model, p.gpu});
  }
  for (const auto& [model, gpu] : models) {
    parameters.push_back({FileKind::model, model, "gpu_efficiency_scale." + gpu, 0.1, 10.0, 1.0});
  }
  return parameters;
}

std::map<std::pair<std::string, std::string>, std::vector<double>> real_repeat_errors(
    const std::vector<RealSweepPoint>& points) {
  std::map<std::pair<std::string, std::string>, std::vector<double>> errors;
  std::map<std::tuple<std::string, std::string, sim::Precision, int>, const RealSweepPoint*> first;
  for (const auto& p : points) {
    const auto [it, inserted] = first.try_emplace({p.gpu, p.model, p.precision, p.batch}, &p);
    if (inserted || it->second->folder == p.folder) continue;
    const auto source = fmt::format("real-{} vs itself", p.gpu);
    errors[{source, "throughput_img_s"}].push_back(ape(p.throughput_img_s, it->second->throughput_img_s));
    errors[{source, "mean_power_w"}].push_back(ape(p.mean_power_w, it->second->mean_power_w));
  }
  return errors;
}

std::string real_markdown(const std::vector<RealPointFidelity>& points) {
  if (points.empty()) return {};
  std::string out =
      "\n## Real GPUs\n\nThe sweeps of `docs/measurements/` that `data/calibration/real.json` lists: each batch size "
      "run back to back at the GPU's own clocks by gpucap's LibTorch engine (`gpucap tune --platform nvml`, "
      "synthetic input on the GPU), beside the twin fitted on the \"fit\" folders only. **real**: "
      "measured; **twin**: simulated. Max W is the highest single reading of the measurement: the twin's is its "
      "sensor's highest reading of steady batches.\n\n";
  out += "| folder | model | precision | batch | real img/s | twin img/s | error | real mean W | twin mean W | error "
         "| real max W | twin max W | error |\n|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const auto& [p, twin] : points) {
    out += fmt::format("| {} ({}) | {} | {} | {} | {:.1f} | {:.1f} | {:+.1f} % | {:.1f} | {:.1f} | {:+.1f} % | {:.1f} | {:.1f} "
                       "| {:+.1f} % |\n",
                       p.folder, p.use == "fit" ? "fitted" : "held out", p.model, sim::to_string(p.precision), p.batch,
                       p.throughput_img_s, twin.throughput_img_s, 100.0 * (twin.throughput_img_s / p.throughput_img_s - 1.0),
                       p.mean_power_w, twin.mean_power_w, 100.0 * (twin.mean_power_w / p.mean_power_w - 1.0), p.max_power_w,
                       twin.max_power_w, 100.0 * (twin.max_power_w / p.max_power_w - 1.0));
  }
  return out + where_the_twin_misses(points);
}

}  // namespace gpucap::calibrate
