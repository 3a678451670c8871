#include "gpucap/cluster/twin_curves.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "gpucap/core/error.hpp"
#include "gpucap/sim/perf_model.hpp"

namespace gpucap::cluster {

double TwinCapacity::rps(double cap_w) const {
  if (caps_w.empty()) return 0.0;
  if (cap_w <= caps_w.front()) return throughput_rps.front();
  if (cap_w >= caps_w.back()) return throughput_rps.back();
  const auto hi = static_cast<std::size_t>(std::upper_bound(caps_w.begin(), caps_w.end(), cap_w) - caps_w.begin());
  const std::size_t lo = hi - 1;
  const double t = (cap_w - caps_w[lo]) / (caps_w[hi] - caps_w[lo]);
  return throughput_rps[lo] + t * (throughput_rps[hi] - throughput_rps[lo]);
}

std::optional<TwinCapacity> twin_capacity(const sim::GpuSpec& gpu, const sim::ModelSpec& model,
                                          const TwinCurveOptions& options) {
  if (model.training_only()) {
    throw usage_error(fmt::format("{} is a training workload: the cluster simulator serves inference models", model.id));
  }
  if (options.grid_points < 2 || !(options.slo_s > 0.0)) throw usage_error("twin curves need >= 2 grid points and an SLO > 0");
  // Every (batch, clock) that meets the latency bound, with its power and throughput.
  struct Config {
    double power_w;
    double rps;
  };
  std::vector<Config> configs;
  const double memory_mhz = gpu.default_memory_clock_mhz;
  for (const int batch : options.batch_sizes) {
    for (const double sm_mhz : gpu.sm_clocks_mhz) {
      const sim::OperatingPoint point{sm_mhz, memory_mhz};
      const auto profile = sim::profile_batch(gpu, model, model.precision, batch, point);
      if (profile.latency_s() > options.slo_s / 2.0) continue;
      configs.push_back({sim::average_batch_power_w(gpu, profile, point), static_cast<double>(batch) / profile.latency_s()});
    }
  }
  if (configs.empty()) return std::nullopt;
  // The best throughput within each power: sort by power, running maximum.
  std::sort(configs.begin(), configs.end(), [](const Config& a, const Config& b) { return a.power_w < b.power_w; });
  TwinCapacity result;
  result.gpu = gpu.id;
  result.model = model.id;
  result.min_cap_w = gpu.power_limit_min_w;
  result.max_cap_w = gpu.power_limit_max_w;
  result.tdp_w = gpu.power_limit_default_w;
  const auto n = options.grid_points;
  std::size_t next = 0;
  double best = 0.0;
  for (std::size_t i = 0; i < n; ++i) {
    const double cap = result.min_cap_w + (result.max_cap_w - result.min_cap_w) * static_cast<double>(i) /
                                              static_cast<double>(n - 1);
    while (next < configs.size() && configs[next].power_w <= cap) best = std::max(best, configs[next++].rps);
    result.caps_w.push_back(cap);
    result.throughput_rps.push_back(best);
  }
  if (result.throughput_rps.back() <= 0.0) return std::nullopt;
  result.tdp_rps = result.rps(result.tdp_w);
  return result;
}

}  // namespace gpucap::cluster
