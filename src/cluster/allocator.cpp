#include "gpucap/cluster/allocator.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>

#include "gpucap/core/error.hpp"

namespace gpucap::cluster {

namespace {

constexpr int kBisections = 100;

void check_inputs(double budget_w, std::span<const PreparedCurve* const> nodes) {
  if (!std::isfinite(budget_w) || budget_w < 0.0) {
    throw Error(ErrorCode::invalid_data, fmt::format("budget {} W must be a finite, non-negative number", budget_w));
  }
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    if (nodes[i] == nullptr) throw Error(ErrorCode::invalid_data, fmt::format("node {} has no curve", i));
  }
}

// Rounds down to 1 mW, never below the minimum (which the unrounded cap is at or above).
// (1e-6 mW of slack: a bisection that stops a hair under a whole mW does not lose that mW; the
// excess pass below catches any overshoot.)
double round_down_mw(double cap_w, double min_w) { return std::max(min_w, std::floor(cap_w * 1000.0 + 1e-6) / 1000.0); }

// Largest x in [lo, hi] with f(x) <= target, f nondecreasing; lo if even f(lo) > target.
template <typename F>
double largest_fitting(double lo, double hi, double target, F f) {
  if (f(hi) <= target) return hi;
  for (int i = 0; i < kBisections && hi - lo > 1e-12 * std::max(1.0, std::abs(hi)); ++i) {
    const double mid = 0.5 * (lo + hi);
    if (f(mid) <= target) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  return lo;
}

// A water level on top of per-node floors: caps = clamp(floor + s, min, top) for the serving nodes,
// the largest s >= 0 that fits the budget. `tops`: each node's ceiling (its max cap when empty).
void spread_evenly(double budget_w, std::span<const PreparedCurve* const> nodes, const std::vector<bool>& serving,
                   std::vector<double>& caps, const std::vector<double>& tops = {}) {
  const auto top_of = [&](std::size_t i) { return tops.empty() ? nodes[i]->max_cap_w() : std::max(caps[i], tops[i]); };
  double highest = 0.0;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    if (serving[i]) highest = std::max(highest, top_of(i) - caps[i]);
  }
  const auto base = caps;
  const auto level = [&](std::size_t i, double s) {
    return std::clamp(base[i] + s, nodes[i]->min_cap_w(), std::max(base[i], top_of(i)));
  };
  const auto total = [&](double s) {
    double sum = 0.0;
    for (std::size_t i = 0; i < nodes.size(); ++i) sum += serving[i] ? level(i, s) : 0.0;
    return sum;
  };
  const double s = largest_fitting(0.0, highest, budget_w, total);
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    if (serving[i]) caps[i] = level(i, s);
  }
}

// The highest cap at or above `cap_w` up to which the real curve never falls below its value at
// `cap_w` (linear between points, so every cap in between is at least as good).
double no_loss_ceiling(const PreparedCurve& curve, double cap_w) {
  const double floor_value = curve.value(cap_w);
  double ceiling = cap_w;
  for (const auto& p : curve.points()) {
    if (p.cap_w <= cap_w) continue;
    if (p.value < floor_value) break;
    ceiling = p.cap_w;
  }
  return ceiling;
}

struct Segment {
  double slope = 0.0;
  double width_w = 0.0;
  std::uint32_t node = 0;
  std::uint32_t index = 0;  // of the segment within its node's hull
};

void add_segments(const std::vector<ValuePoint>& hull, std::uint32_t node, std::vector<Segment>& out) {
  for (std::size_t k = 0; k + 1 < hull.size(); ++k) {
    const double width = hull[k + 1].cap_w - hull[k].cap_w;
    const double slope = (hull[k + 1].value - hull[k].value) / width;
    if (slope > 0.0 && width > 0.0) out.push_back({slope, width, node, static_cast<std::uint32_t>(k)});
  }
}

void sort_segments(std::vector<Segment>& segments) {
  std::sort(segments.begin(), segments.end(), [](const Segment& a, const Segment& b) {
    if (a.slope != b.slope) return a.slope > b.slope;
    if (a.node != b.node) return a.node < b.node;
    return a.index < b.index;
  });
}

// gpucap's water-filling with snapping (allocator.hpp). `caps` start at the serving nodes' minima.
std::size_t water_fill(double remaining_w, std::span<const PreparedCurve* const> nodes,
                       const std::vector<bool>& serving, std::vector<double>& caps) {
  std::vector<Segment> segments;
  std::size_t total = 0;
  for (std::size_t i = 0; i < nodes.size(); ++i) total += serving[i] ? nodes[i]->hull().size() : 0;
  segments.reserve(total);
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    if (serving[i]) add_segments(nodes[i]->hull(), static_cast<std::uint32_t>(i), segments);
  }
  sort_segments(segments);
  std::vector<std::uint32_t> next(nodes.size(), 0);  // the node's next hull segment; UINT32_MAX: closed
  std::size_t snapped = 0;
  for (const auto& seg : segments) {
    if (remaining_w <= 0.0) break;
    if (next[seg.node] != seg.index) continue;  // closed by a snap
    if (seg.width_w <= remaining_w) {
      caps[seg.node] += seg.width_w;
      remaining_w -= seg.width_w;
      ++next[seg.node];
      continue;
    }
    // Part-way along this segment: the best point of the real curve up to the partial cap.
    const auto& curve = *nodes[seg.node];
    const double start = caps[seg.node];
    const double partial = start + remaining_w;
    // The segment's start is a candidate too: where the curve dips below its start all the way to
    // the partial cap, the node stays at the start (a hull vertex) and the watts go on.
    double best_cap = start;
    double best_value = curve.value(start);
    if (const double at_partial = curve.value(partial); at_partial >= best_value) {
      best_cap = partial;
      best_value = at_partial;
    }
    for (const auto& p : curve.points()) {
      if (p.cap_w <= start) continue;
      if (p.cap_w >= partial) break;
      if (p.value > best_value) {
        best_value = p.value;
        best_cap = p.cap_w;
      }
    }
    if (best_cap < partial) ++snapped;
    caps[seg.node] = best_cap;
    remaining_w -= best_cap - start;
    next[seg.node] = UINT32_MAX;
  }
  return snapped;
}

// The fractional water-filling's value over the given hulls from their first vertices.
double hull_fill_value(double remaining_w, const std::vector<std::vector<ValuePoint>>& hulls) {
  std::vector<Segment> segments;
  double value = 0.0;
  for (std::size_t i = 0; i < hulls.size(); ++i) {
    value += hulls[i].front().value;
    add_segments(hulls[i], static_cast<std::uint32_t>(i), segments);
  }
  sort_segments(segments);
  for (const auto& seg : segments) {
    if (remaining_w <= 0.0) break;
    const double take = std::min(seg.width_w, remaining_w);
    value += seg.slope * take;
    remaining_w -= take;
  }
  return value;
}

}  // namespace

std::string_view to_string(Policy policy) {
  switch (policy) {
    case Policy::gpucap: return "gpucap";
    case Policy::equal: return "equal";
    case Policy::tdp: return "tdp";
    case Policy::balancer: return "balancer";
  }
  return "?";
}

std::optional<Policy> parse_policy(std::string_view name) {
  for (const auto policy : all_policies()) {
    if (to_string(policy) == name) return policy;
  }
  return std::nullopt;
}

const std::vector<Policy>& all_policies() {
  static const std::vector<Policy> policies = {Policy::gpucap, Policy::equal, Policy::tdp, Policy::balancer};
  return policies;
}

std::vector<bool> serving_nodes(double budget_w, std::span<const PreparedCurve* const> nodes) {
  check_inputs(budget_w, nodes);
  double minimum = 0.0;
  for (const auto* node : nodes) minimum += node->min_cap_w();
  std::vector<bool> serving(nodes.size(), true);
  if (minimum <= budget_w) return serving;
  std::vector<std::size_t> order(nodes.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    if (nodes[a]->priority() != nodes[b]->priority()) return nodes[a]->priority() > nodes[b]->priority();
    const double va = nodes[a]->value(nodes[a]->min_cap_w()) / nodes[a]->min_cap_w();
    const double vb = nodes[b]->value(nodes[b]->min_cap_w()) / nodes[b]->min_cap_w();
    return va > vb;
  });
  double left = budget_w;
  for (const auto i : order) {
    serving[i] = nodes[i]->min_cap_w() <= left;
    if (serving[i]) left -= nodes[i]->min_cap_w();
  }
  return serving;
}

Allocation allocate(double budget_w, std::span<const PreparedCurve* const> nodes, Policy policy) {
  const auto serving = serving_nodes(budget_w, nodes);  // checks the inputs
  Allocation result;
  result.caps_w.assign(nodes.size(), 0.0);
  double remaining = budget_w;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    if (!serving[i]) {
      ++result.standby;
      continue;
    }
    result.caps_w[i] = nodes[i]->min_cap_w();
    remaining -= nodes[i]->min_cap_w();
  }
  auto& caps = result.caps_w;
  switch (policy) {
    case Policy::gpucap:
      result.snapped = water_fill(remaining, nodes, serving, caps);
      {
        // What buys nothing more goes out as headroom (allocator.hpp), never where it costs value.
        std::vector<double> ceilings(nodes.size(), 0.0);
        for (std::size_t i = 0; i < nodes.size(); ++i) {
          if (serving[i]) ceilings[i] = no_loss_ceiling(*nodes[i], caps[i]);
        }
        spread_evenly(budget_w, nodes, serving, caps, ceilings);
      }
      break;
    case Policy::equal: {
        double top = 0.0;
        for (const auto* node : nodes) top = std::max(top, node->max_cap_w());
        const auto total = [&](double level) {
          double sum = 0.0;
          for (std::size_t i = 0; i < nodes.size(); ++i) {
            if (serving[i]) sum += std::clamp(level, nodes[i]->min_cap_w(), nodes[i]->max_cap_w());
          }
          return sum;
        };
        const double level = largest_fitting(0.0, top, budget_w, total);
        for (std::size_t i = 0; i < nodes.size(); ++i) {
          if (serving[i]) caps[i] = std::clamp(level, nodes[i]->min_cap_w(), nodes[i]->max_cap_w());
        }
      break;
    }
    case Policy::tdp: {
      double top = 0.0;
      for (const auto* node : nodes) top = std::max(top, node->max_cap_w() / node->tdp_w());
      const auto total = [&](double k) {
        double sum = 0.0;
        for (std::size_t i = 0; i < nodes.size(); ++i) {
          if (serving[i]) sum += std::clamp(k * nodes[i]->tdp_w(), nodes[i]->min_cap_w(), nodes[i]->max_cap_w());
        }
        return sum;
      };
      const double k = largest_fitting(0.0, top, budget_w, total);
      for (std::size_t i = 0; i < nodes.size(); ++i) {
        if (serving[i]) caps[i] = std::clamp(k * nodes[i]->tdp_w(), nodes[i]->min_cap_w(), nodes[i]->max_cap_w());
      }
      break;
    }
    case Policy::balancer: {
      std::vector<double> attainable(nodes.size(), 0.0);
      for (std::size_t i = 0; i < nodes.size(); ++i) {
        for (const auto& p : nodes[i]->points()) attainable[i] = std::max(attainable[i], p.value);
      }
      const auto need = [&](std::size_t i, double fraction) {
        return std::clamp(nodes[i]->least_cap_reaching(fraction * attainable[i]), nodes[i]->min_cap_w(),
                          nodes[i]->max_cap_w());
      };
      const auto total = [&](double fraction) {
        double sum = 0.0;
        for (std::size_t i = 0; i < nodes.size(); ++i) {
          if (serving[i]) sum += need(i, fraction);
        }
        return sum;
      };
      const double fraction = largest_fitting(0.0, 1.0, budget_w, total);
      for (std::size_t i = 0; i < nodes.size(); ++i) {
        if (serving[i]) caps[i] = need(i, fraction);
      }
      spread_evenly(budget_w, nodes, serving, caps);  // the slack, evenly
      break;
    }
  }
  // Round down to mW; then, against floating-point drift, take any excess off the largest caps.
  double sum = 0.0;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    if (serving[i]) caps[i] = round_down_mw(caps[i], nodes[i]->min_cap_w());
    sum += caps[i];
  }
  while (sum > budget_w) {
    std::size_t widest = nodes.size();
    double room = 0.0;
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      if (serving[i] && caps[i] - nodes[i]->min_cap_w() > room) {
        room = caps[i] - nodes[i]->min_cap_w();
        widest = i;
      }
    }
    if (widest == nodes.size()) {
      throw Error(ErrorCode::internal, fmt::format("allocation of {} W exceeds the budget {} W", sum, budget_w));
    }
    const double cut = std::min(room, sum - budget_w + 0.001);
    caps[widest] = round_down_mw(caps[widest] - cut, nodes[widest]->min_cap_w());
    sum = std::accumulate(caps.begin(), caps.end(), 0.0);
  }
  result.allocated_w = sum;
  for (std::size_t i = 0; i < nodes.size(); ++i) result.value += nodes[i]->value(caps[i]);
  return result;
}

double hull_upper_bound(double budget_w, std::span<const PreparedCurve* const> nodes) {
  check_inputs(budget_w, nodes);
  double minimum = 0.0;
  for (const auto* node : nodes) minimum += node->min_cap_w();
  std::vector<std::vector<ValuePoint>> hulls;
  hulls.reserve(nodes.size());
  if (minimum <= budget_w) {
    for (const auto* node : nodes) hulls.push_back(node->hull());
    return hull_fill_value(budget_w - minimum, hulls);
  }
  // Some node must be on standby: each node's domain is {0} ∪ [min, max]; (0, 0) joins its hull.
  for (const auto* node : nodes) {
    std::vector<ValuePoint> points{{0.0, 0.0}};
    points.insert(points.end(), node->points().begin(), node->points().end());
    hulls.push_back(upper_concave_hull(points));
  }
  return hull_fill_value(budget_w, hulls);
}

double grid_optimum(double budget_w, std::span<const PreparedCurve* const> nodes, double step_w) {
  check_inputs(budget_w, nodes);
  if (!(step_w > 0.0) || !std::isfinite(step_w)) throw usage_error(fmt::format("grid step {} W must be positive", step_w));
  double minimum = 0.0;
  double base = 0.0;
  for (const auto* node : nodes) {
    minimum += node->min_cap_w();
    base += node->value(node->min_cap_w());
  }
  if (minimum > budget_w) {
    throw usage_error(fmt::format("grid_optimum needs the budget ({:g} W) to cover every minimum ({:g} W)", budget_w,
                                  minimum));
  }
  const auto steps = static_cast<std::size_t>(std::floor((budget_w - minimum) / step_w + 1e-9));
  std::vector<double> best(steps + 1, 0.0);  // best gain over the minima using at most j steps
  std::vector<double> next(steps + 1, 0.0);
  for (const auto* node : nodes) {
    const double range = node->max_cap_w() - node->min_cap_w();
    const auto options = static_cast<std::size_t>(std::ceil(range / step_w - 1e-9));
    const double v0 = node->value(node->min_cap_w());
    std::vector<double> gain(options + 1, 0.0);
    for (std::size_t k = 1; k <= options; ++k) {
      gain[k] = node->value(std::min(node->max_cap_w(), node->min_cap_w() + static_cast<double>(k) * step_w)) - v0;
    }
    for (std::size_t j = 0; j <= steps; ++j) {
      double v = best[j];
      for (std::size_t k = 1; k <= options && k <= j; ++k) v = std::max(v, best[j - k] + gain[k]);
      next[j] = v;
    }
    best.swap(next);
  }
  return base + best[steps];
}

}  // namespace gpucap::cluster
