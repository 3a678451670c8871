#include "gpucap/calibrate/published_source.hpp"

#include <fmt/format.h>

#include <set>

#include "gpucap/core/error.hpp"
#include "gpucap/core/json_file.hpp"
#include "gpucap/sim/perf_model.hpp"

namespace gpucap::calibrate {

namespace {

sim::ModelSpec scaled_model(const sim::ModelSpec& model, double work_factor) {
  auto scaled = model;
  scaled.gmacs *= work_factor;
  scaled.activation_melems *= work_factor;
  scaled.layers = static_cast<int>(scaled.layers * work_factor);
  return scaled;
}

// Throughput without a limit: synthetic inputs already on the GPU, clocks unlocked (boost).
double batch_throughput(const TwinParams& params, const PublishedCurve& c, int batch) {
  const auto& gpu = params.gpus.at(c.gpu);
  const auto model = scaled_model(params.models.at(c.model), c.work_factor);
  const sim::OperatingPoint point{gpu.boost_clock_mhz, gpu.default_memory_clock_mhz};
  return batch / sim::profile_batch(gpu, model, c.precision, batch, point, /*copy_input=*/false).latency_s();
}

struct Limited {
  double throughput;
  double average_power_w;
};

// What the board's power limiter leaves of a steady run at `limit_w`.
Limited under_limit(const TwinParams& params, const PublishedCurve& c, double limit_w) {
  const auto& gpu = params.gpus.at(c.gpu);
  const auto model = scaled_model(params.models.at(c.model), c.work_factor);
  const sim::OperatingPoint boost{gpu.boost_clock_mhz, gpu.default_memory_clock_mhz};
  const double f = sim::power_limited_sm_clock_mhz(gpu, model, c.precision, c.batch, boost, limit_w);
  const sim::OperatingPoint point{f, gpu.default_memory_clock_mhz};
  const auto profile = sim::profile_batch(gpu, model, c.precision, c.batch, point);
  return {c.batch / profile.latency_s(), sim::average_batch_power_w(gpu, profile, point)};
}

double reference_limit(const PublishedCurve& c) {
  if (c.reference_limit_w > 0.0) return c.reference_limit_w;
  for (const auto& [x, y] : c.points) {
    if (y == 1.0) return x;
  }
  throw Error(ErrorCode::invalid_data, fmt::format("published curve {}: no reference point at 1.0", c.id));
}

}  // namespace

std::vector<PublishedCurve> load_published_curves(const std::string& path, const sim::Catalog& catalog) {
  const auto json = load_json_file(path);
  const JsonFields f(json, path);
  const auto& curves = f.at("curves");
  if (!curves.is_array() || curves.empty()) throw f.error("curves", "must be a non-empty array");
  std::vector<PublishedCurve> out;
  for (std::size_t i = 0; i < curves.size(); ++i) {
    const JsonFields c(curves[i], path, fmt::format("curves[{}].", i));
    PublishedCurve curve;
    curve.id = c.string("id");
    curve.use = c.string("use");
    if (curve.use != "fit" && curve.use != "check") throw c.error("use", "must be \"fit\" or \"check\"");
    curve.gpu = catalog.gpu(c.string("gpu")).id;
    curve.model = catalog.model(c.string("model")).id;
    curve.precision = c.string("precision") == "fp16" ? sim::Precision::fp16 : sim::Precision::fp32;
    curve.x = c.string("x");
    curve.y = c.string("y");
    const bool by_batch = curve.x == "batch" && curve.y == "throughput_img_s";
    const bool by_limit = curve.x == "power_limit_w" && (curve.y == "relative_throughput" || curve.y == "average_power_w");
    if (!by_batch && !by_limit) throw c.error("y", fmt::format("unsupported curve {} against {}", curve.y, curve.x));
    if (by_limit) curve.batch = static_cast<int>(c.positive_integer("batch"));
    curve.work_factor = c.positive_or("work_factor", 1.0);
    curve.reference_limit_w = c.positive_or("reference_limit_w", 0.0);
    curve.source = c.string("source");
    const auto& points = c.at("points");
    if (!points.is_array() || points.empty()) throw c.error("points", "must be a non-empty array of [x, y]");
    for (const auto& p : points) {
      if (!p.is_array() || p.size() != 2 || !p[0].is_number() || !p[1].is_number() || p[1].get<double>() <= 0.0) {
        throw c.error("points", "each point must be [x, y] with y > 0");
      }
      curve.points.emplace_back(p[0].get<double>(), p[1].get<double>());
    }
    if (curve.y == "relative_throughput") (void)reference_limit(curve);
    out.push_back(std::move(curve));
  }
  return out;
}

std::vector<Observation> published_observations(const std::vector<PublishedCurve>& curves) {
  std::vector<Observation> observations;
  for (const auto& curve : curves) {
    for (const auto& [x, y] : curve.points) {
      const auto label = fmt::format("{} at {} {:g}", curve.id, curve.x, x);
      std::function<double(const TwinParams&)> predict;
      if (curve.x == "batch") {
        const int batch = static_cast<int>(x);
        predict = [curve, batch](const TwinParams& p) { return batch_throughput(p, curve, batch); };
      } else if (curve.y == "relative_throughput") {
        const double reference = reference_limit(curve);
        predict = [curve, x = x, reference](const TwinParams& p) {
          return under_limit(p, curve, x).throughput / under_limit(p, curve, reference).throughput;
        };
      } else {
        predict = [curve, x = x](const TwinParams& p) { return under_limit(p, curve, x).average_power_w; };
      }
      observations.push_back(Observation{"published", curve.y, label, curve.use, y, 1.0, predict});
    }
  }
  return observations;
}

std::vector<FitParameter> published_fit_parameters(const std::vector<PublishedCurve>& curves,
                                                   const sim::Catalog& catalog) {
  std::set<std::string> gpus;
  for (const auto& curve : curves) {
    if (curve.use == "fit") gpus.insert(curve.gpu);
  }
  std::vector<FitParameter> parameters;
  for (const auto& gpu : gpus) {
    const auto& spec = catalog.gpu(gpu);
    parameters.push_back({FileKind::gpu, gpu, "voltage.min_v", 0.4, spec.voltage.max_v, 1.0});
    parameters.push_back({FileKind::gpu, gpu, "power_model.constant_w", 1.0, 150.0, 1.0});
    parameters.push_back({FileKind::gpu, gpu, "power_model.sm_dynamic_w", 20.0, 800.0, 1.0});
    parameters.push_back({FileKind::gpu, gpu, "power_model.memory_dynamic_w", 1.0, 300.0, 1.0});
    parameters.push_back({FileKind::gpu, gpu, "saturation_kelems_per_sm", 0.5, 5000.0, 1.0});
    parameters.push_back({FileKind::gpu, gpu, "fp32_efficiency_scale", 0.05, 5.0, 2.0});
    parameters.push_back({FileKind::gpu, gpu, "fp16_efficiency_scale", 0.01, 5.0, 2.0});
    parameters.push_back({FileKind::gpu, gpu, "host.batch_sync_s", 1e-6, 0.05, 2.0});
    parameters.push_back({FileKind::gpu, gpu, "host.layer_launch_s", 1e-7, 1e-3, 2.0});
    parameters.push_back({FileKind::gpu, gpu, "busy_overlap_exponent", 1.0, 16.0, 1.0});
  }
  return parameters;
}

}  // namespace gpucap::calibrate
