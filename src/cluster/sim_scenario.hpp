#pragma once
// The simulator's scenario (simulate.hpp): who the nodes are, what happens to them and when. Private
// to src/cluster.

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gpucap/cluster/curve.hpp"
#include "gpucap/cluster/simulate.hpp"
#include "gpucap/cluster/twin_curves.hpp"

namespace gpucap::cluster::detail {

struct Interval {
  double from_s = 0.0;
  double to_s = 0.0;
};

struct NodeSpec {
  std::string id;
  std::size_t pair = 0;
  double join_s = 0.0;
  std::optional<double> leave_s;
  std::optional<double> death_s;
  std::vector<std::pair<double, double>> demand;  // (from, fraction of capacity at TDP), the first at join
  std::optional<Interval> partition;
  std::optional<Interval> broken;
  double watch_delay_s = 0.0;
  double apply_s = 0.0;

  [[nodiscard]] double demand_at(double t_s) const;
  [[nodiscard]] bool alive_at(double t_s) const;
};

struct Scenario {
  std::vector<TwinCapacity> pairs;
  std::vector<double> unit_rps;  // per pair: its model's requests/s worth one unit of throughput
  std::vector<NodeSpec> nodes;  // the initial ones first
  std::size_t initial = 0;
  double sum_tdp_w = 0.0;       // of the initial nodes
  double budget_w = 0.0;        // at the start
  std::vector<std::pair<double, double>> announcements;  // (when, watts) after the start
  std::vector<std::pair<double, double>> enforcements;   // (when, watts) in force from then, with the start's at 0

  [[nodiscard]] double budget_in_force(double t_s) const;
};

// Error(usage) for bad options, or when no (GPU, model) pair can serve within the SLO.
[[nodiscard]] Scenario make_scenario(const sim::Catalog& catalog, const SimulateOptions& options);

// The curve a node publishes at a demand (a fraction of its capacity at its TDP), in units of
// `unit_rps` requests/s: min(capacity, demand) on the pair's grid, with the points where the two
// cross; min cap = the GPU's lowest power limit, max = its highest.
[[nodiscard]] NodeCurve node_curve(const TwinCapacity& pair, double unit_rps, double demand);
// The node's true good throughput (in units of unit_rps) under a cap; 0 at cap 0.
[[nodiscard]] double node_value(const TwinCapacity& pair, double unit_rps, double demand, double cap_w);

}  // namespace gpucap::cluster::detail
