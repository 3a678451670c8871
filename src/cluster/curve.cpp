#include "gpucap/cluster/curve.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "gpucap/core/error.hpp"

namespace gpucap::cluster {

namespace {

bool finite(double x) { return std::isfinite(x); }

}  // namespace

std::optional<std::string> curve_problem(const NodeCurve& curve) {
  if (!finite(curve.min_cap_w) || !finite(curve.max_cap_w)) {
    return fmt::format("the cap range {}-{} W is not finite", curve.min_cap_w, curve.max_cap_w);
  }
  if (curve.min_cap_w <= 0.0) return fmt::format("min cap {:g} W must be positive", curve.min_cap_w);
  if (curve.min_cap_w > curve.max_cap_w) {
    return fmt::format("min cap {:g} W is above max cap {:g} W", curve.min_cap_w, curve.max_cap_w);
  }
  if (curve.max_cap_w > kMaxNodeWatts) {
    return fmt::format("max cap {:g} W is absurd (more than {:g} W for one node)", curve.max_cap_w, kMaxNodeWatts);
  }
  if (!finite(curve.priority) || curve.priority <= 0.0) {
    return fmt::format("priority {} must be a positive number", curve.priority);
  }
  if (!finite(curve.tdp_w) || curve.tdp_w <= 0.0 || curve.tdp_w > kMaxNodeWatts) {
    return fmt::format("TDP {} W must be a positive number of watts up to {:g}", curve.tdp_w, kMaxNodeWatts);
  }
  if (curve.points.empty()) return std::string("the curve has no points");
  for (std::size_t i = 0; i < curve.points.size(); ++i) {
    const auto& p = curve.points[i];
    if (!finite(p.cap_w) || !finite(p.throughput) || !finite(p.slo_attainment)) {
      return fmt::format("point {} ({} W, throughput {}, attainment {}) is not finite", i, p.cap_w, p.throughput,
                         p.slo_attainment);
    }
    if (p.cap_w < 0.0 || p.cap_w > kMaxNodeWatts) return fmt::format("point {} has an absurd cap {:g} W", i, p.cap_w);
    if (p.throughput < 0.0) return fmt::format("point {} ({:g} W) has a negative throughput {:g}", i, p.cap_w, p.throughput);
    if (p.slo_attainment < 0.0 || p.slo_attainment > 1.0) {
      return fmt::format("point {} ({:g} W) has an SLO attainment {:g} outside [0, 1]", i, p.cap_w, p.slo_attainment);
    }
    if (i > 0 && !(p.cap_w > curve.points[i - 1].cap_w)) {
      return fmt::format("caps must increase: point {} ({:g} W) after point {} ({:g} W)", i, p.cap_w, i - 1,
                         curve.points[i - 1].cap_w);
    }
  }
  if (curve.points.front().cap_w > curve.min_cap_w || curve.points.back().cap_w < curve.max_cap_w) {
    return fmt::format("the points cover {:g}-{:g} W, not the whole cap range {:g}-{:g} W", curve.points.front().cap_w,
                       curve.points.back().cap_w, curve.min_cap_w, curve.max_cap_w);
  }
  return std::nullopt;
}

void validate(const NodeCurve& curve) {
  if (const auto problem = curve_problem(curve)) {
    throw Error(ErrorCode::invalid_data, "invalid power curve: " + *problem);
  }
}

double interpolate(const std::vector<ValuePoint>& points, double cap_w) {
  if (points.empty()) return 0.0;
  if (cap_w <= points.front().cap_w) return points.front().value;
  if (cap_w >= points.back().cap_w) return points.back().value;
  const auto hi = std::upper_bound(points.begin(), points.end(), cap_w,
                                   [](double c, const ValuePoint& p) { return c < p.cap_w; });
  const auto lo = hi - 1;
  const double t = (cap_w - lo->cap_w) / (hi->cap_w - lo->cap_w);
  return lo->value + t * (hi->value - lo->value);
}

std::vector<ValuePoint> upper_concave_hull(const std::vector<ValuePoint>& points) {
  std::vector<ValuePoint> hull;
  hull.reserve(points.size());
  for (const auto& p : points) {
    // Drop the last vertex while it lies on or below the chord from the one before it to p.
    while (hull.size() >= 2) {
      const auto& a = hull[hull.size() - 2];
      const auto& b = hull.back();
      const double cross = (b.cap_w - a.cap_w) * (p.value - a.value) - (b.value - a.value) * (p.cap_w - a.cap_w);
      if (cross >= 0.0) {
        hull.pop_back();
      } else {
        break;
      }
    }
    hull.push_back(p);
  }
  return hull;
}

PreparedCurve::PreparedCurve(NodeCurve curve) : curve_(std::move(curve)) {
  validate(curve_);
  std::vector<ValuePoint> all;
  all.reserve(curve_.points.size());
  for (const auto& p : curve_.points) all.push_back({p.cap_w, curve_.priority * p.throughput * p.slo_attainment});
  points_.push_back({curve_.min_cap_w, interpolate(all, curve_.min_cap_w)});
  for (const auto& p : all) {
    if (p.cap_w > curve_.min_cap_w && p.cap_w < curve_.max_cap_w) points_.push_back(p);
  }
  if (curve_.max_cap_w > curve_.min_cap_w) points_.push_back({curve_.max_cap_w, interpolate(all, curve_.max_cap_w)});
  hull_ = upper_concave_hull(points_);
  for (const auto& p : points_) max_gap_ = std::max(max_gap_, interpolate(hull_, p.cap_w) - p.value);
}

double PreparedCurve::value(double cap_w) const {
  if (cap_w <= 0.0) return 0.0;
  return interpolate(points_, cap_w);
}

double PreparedCurve::hull_value(double cap_w) const {
  if (cap_w <= 0.0) return 0.0;
  return interpolate(hull_, cap_w);
}

double PreparedCurve::least_cap_reaching(double value) const {
  if (points_.front().value >= value) return points_.front().cap_w;
  for (std::size_t i = 1; i < points_.size(); ++i) {
    const auto& a = points_[i - 1];
    const auto& b = points_[i];
    if (b.value >= value) {
      if (b.value <= a.value) return b.cap_w;
      return a.cap_w + (value - a.value) / (b.value - a.value) * (b.cap_w - a.cap_w);
    }
  }
  return curve_.max_cap_w;
}

}  // namespace gpucap::cluster
