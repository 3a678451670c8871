#include "gpucap/cluster/node_curves.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "gpucap/core/error.hpp"

namespace gpucap::cluster {

NodeCurve profile_capacity_curve(const predict::ProfileModel& profile, double slo_s, double min_cap_w, double max_cap_w,
                                 double tdp_w, std::size_t grid_points) {
  if (!(slo_s > 0.0) || !(min_cap_w > 0.0) || !(max_cap_w > min_cap_w) || grid_points < 2) {
    throw usage_error(fmt::format("a capacity curve needs an SLO > 0 and 0 < min cap < max cap (got {:g} s, {:g}-{:g} W)",
                                  slo_s, min_cap_w, max_cap_w));
  }
  struct Config {
    double power_w;
    double rps;
  };
  std::vector<Config> configs;
  for (const auto& column : profile.columns()) {
    for (std::size_t i = 0; i < column.batch_sizes.size(); ++i) {
      const double rps = column.throughput_img_s[i];
      if (!(rps > 0.0) || column.batch_sizes[i] / rps > slo_s / 2.0) continue;
      configs.push_back({column.max_power_w[i], rps});
    }
  }
  std::sort(configs.begin(), configs.end(), [](const Config& a, const Config& b) { return a.power_w < b.power_w; });
  NodeCurve curve;
  curve.min_cap_w = min_cap_w;
  curve.max_cap_w = max_cap_w;
  curve.tdp_w = tdp_w;
  std::size_t next = 0;
  double best = 0.0;
  for (std::size_t i = 0; i < grid_points; ++i) {
    const double cap = min_cap_w + (max_cap_w - min_cap_w) * static_cast<double>(i) / static_cast<double>(grid_points - 1);
    while (next < configs.size() && configs[next].power_w <= cap) best = std::max(best, configs[next++].rps);
    curve.points.push_back({cap, best, 1.0});
  }
  return curve;
}

NodeCurve twin_capacity_curve(const TwinCapacity& capacity, double min_cap_w) {
  NodeCurve curve;
  curve.min_cap_w = std::max(min_cap_w, capacity.min_cap_w);
  curve.max_cap_w = capacity.max_cap_w;
  curve.tdp_w = capacity.tdp_w;
  for (std::size_t i = 0; i < capacity.caps_w.size(); ++i) {
    curve.points.push_back({capacity.caps_w[i], capacity.throughput_rps[i], 1.0});
  }
  return curve;
}

NodeCurve demand_clipped(NodeCurve capacity, std::optional<double> demand_rps, double headroom) {
  if (!demand_rps || !std::isfinite(*demand_rps)) return capacity;
  const double usable = std::max(0.0, *demand_rps) * headroom;
  for (auto& point : capacity.points) point.throughput = std::min(point.throughput, usable);
  return capacity;
}

}  // namespace gpucap::cluster
