#pragma once
// A node's power curve: what the node can do with power, as it publishes it to the coordinator.
//
// A curve is a list of points (cap W → throughput, and the fraction of it within the SLO) with the
// node's cap range, its priority and its GPU's TDP. The allocator maximises the priority-weighted
// good throughput — `priority × throughput × slo_attainment`, the requests within the SLO for a
// serving node — so a curve's *value* at a cap is that product, linearly interpolated between
// points. Throughput may be in any unit the cluster's nodes share (requests/s of one model, or
// normalised work); priority says what one unit of a node is worth against another's.
//
// A published curve is untrusted input: validate() (or PreparedCurve's constructor) rejects a
// broken one — NaN or infinite figures, non-increasing caps, negative throughput, an attainment
// outside [0, 1], min > max, no points, points that do not cover the cap range, a non-positive
// priority or TDP, or absurd watts — with a message the caller logs before it ignores the node.
//
// PreparedCurve adds the concave upper hull of the value over [min_cap_w, max_cap_w], which the
// water-filling allocator works on (allocator.hpp). Every hull vertex is a point of the real curve
// (or one of the range's ends), so at a vertex hull and curve agree; between two vertices the real
// curve can lie below the hull by at most max_hull_gap().

#include <cmath>
#include <optional>
#include <string>
#include <vector>

namespace gpucap::cluster {

struct CurvePoint {
  double cap_w = 0.0;
  double throughput = 0.0;      // work per second the node completes under this cap
  double slo_attainment = 1.0;  // the fraction of that work within the SLO, in [0, 1]
};

struct NodeCurve {
  std::vector<CurvePoint> points;  // strictly increasing caps; the first <= min_cap_w, the last >= max_cap_w
  double min_cap_w = 0.0;          // the lowest cap the node can hold while it serves (> 0)
  double max_cap_w = 0.0;          // the highest cap the node accepts
  double priority = 1.0;           // weight of one unit of the node's good throughput (> 0)
  double tdp_w = 0.0;              // its GPUs' TDP, for the TDP-proportional baseline (> 0)
};

// Watts no single node can sensibly have: a published figure above this is rejected as absurd.
inline constexpr double kMaxNodeWatts = 100'000.0;

// Why the curve is broken ("caps must increase: point 3 (250 W) after point 2 (250 W)"), or nullopt.
[[nodiscard]] std::optional<std::string> curve_problem(const NodeCurve& curve);
// Throws Error(invalid_data) "invalid power curve: <problem>".
void validate(const NodeCurve& curve);

// A (cap, value) point; value = priority × throughput × slo_attainment.
struct ValuePoint {
  double cap_w = 0.0;
  double value = 0.0;
};

// Piecewise-linear value over points sorted by cap, clamped to the first/last point outside them.
[[nodiscard]] double interpolate(const std::vector<ValuePoint>& points, double cap_w);

// The concave upper hull of points sorted by strictly increasing cap (Andrew's monotone chain,
// collinear points dropped): its vertices are a subset of the points, first and last included.
[[nodiscard]] std::vector<ValuePoint> upper_concave_hull(const std::vector<ValuePoint>& points);

// A validated curve with its value points over [min_cap_w, max_cap_w] and their concave hull.
class PreparedCurve {
 public:
  // Validates (Error(invalid_data) as validate()).
  explicit PreparedCurve(NodeCurve curve);

  [[nodiscard]] const NodeCurve& curve() const { return curve_; }
  [[nodiscard]] double min_cap_w() const { return curve_.min_cap_w; }
  [[nodiscard]] double max_cap_w() const { return curve_.max_cap_w; }
  [[nodiscard]] double tdp_w() const { return curve_.tdp_w; }
  [[nodiscard]] double priority() const { return curve_.priority; }

  // The value points clipped to the cap range (ends interpolated), and their concave upper hull.
  [[nodiscard]] const std::vector<ValuePoint>& points() const { return points_; }
  [[nodiscard]] const std::vector<ValuePoint>& hull() const { return hull_; }
  // The real curve's value at a cap (clamped into the range); 0 at cap 0 (a node shed to standby).
  [[nodiscard]] double value(double cap_w) const;
  [[nodiscard]] double hull_value(double cap_w) const;
  // The most the hull lies above the real curve anywhere in the range (0 for a concave curve).
  [[nodiscard]] double max_hull_gap() const { return max_gap_; }
  [[nodiscard]] bool concave() const { return max_gap_ <= 1e-12 * (1.0 + std::abs(hull_.back().value)); }
  // The least cap at which the real curve reaches `value` (its first crossing, interpolated);
  // max_cap_w() if it never does.
  [[nodiscard]] double least_cap_reaching(double value) const;

 private:
  NodeCurve curve_;
  std::vector<ValuePoint> points_;
  std::vector<ValuePoint> hull_;
  double max_gap_ = 0.0;
};

}  // namespace gpucap::cluster
