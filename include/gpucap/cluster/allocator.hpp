#pragma once
// The cluster's allocator: a budget and the nodes' curves in, one cap per node out. Pure: no I/O,
// no clock, no store — the coordinator (coordinator.hpp) and the simulator call the same function.
//
// Invariants of every policy: the caps sum to at most the budget, and every cap is either within
// its node's [min_cap_w, max_cap_w] or 0 ("standby"). Caps are rounded down to 1 mW (NVML's unit),
// never up.
//
// Not enough for every minimum. When the budget is below the sum of the nodes' minimum caps, no
// policy can let every node serve. Then nodes get their minimum in order of priority (highest
// first), ties broken by value per watt at the minimum (highest first), then by position; a node
// whose minimum no longer fits is skipped (a later, smaller one may still fit) and gets 0 W:
// standby — the node stops serving and holds its GPU idle, counted as 0 W. The policy then shares
// what is left among the serving nodes. The budget is never exceeded.
//
// Policies (what `--policy` selects):
//   gpucap   — water-filling on marginal value per watt over the concave hulls of the curves:
//              every serving node starts at its minimum; the hull segments of all nodes (slope =
//              Δvalue/Δwatts, priority-weighted) are taken steepest first while the rest of the
//              budget covers them. Exact (optimal) for concave curves: this is the greedy solution
//              of a continuous knapsack with concave separable values. Power that buys nothing
//              more (every segment of positive slope taken) is spread evenly as headroom — a water
//              level on top, each node up to the highest cap where its real curve does not fall
//              below its value at the filled cap — so that a node whose load rises serves it at
//              once instead of after the next re-allocation. It never lowers the value. Measured
//              in `cluster simulate` (1,000 nodes, 70 %): 99.35 % → 99.75 % of the optimum; the
//              price is that with every watt handed out a raise waits for lowers elsewhere (the
//              longest re-allocation 0.26 s → 4.3 s, behind nodes that lost the store).
//   equal    — the same cap for every serving node (clamped to each node's range; what a clamped
//              node cannot take is shared by the others): a water level.
//   tdp      — caps proportional to each node's TDP, clamped likewise.
//   balancer — GEOPM's power_balancer adapted to inference (see below).
//
// A non-concave curve under `gpucap`. The water-filling runs on the hull, so every node it fills
// completely sits on a hull vertex, where hull and curve agree. At most one node per pass is filled
// part-way along a hull segment, where the real curve may lie below the hull. That node is
// *snapped*: it gets the best point of its real curve between the segment's start and the partial
// cap (a vertex of the real curve or the partial cap itself), and the watts it does not take go on
// down the list of segments — to other nodes, in slope order. Guarantee: the result is at least
// H − g, where H is the hull water-filling's value (an upper bound on the optimum of the real
// curves, hull_upper_bound) and g the hull gap of the first node filled part-way (<= the largest
// max_hull_gap() of any node): one node's worth at most, whatever the cluster's size.
//
// GEOPM's power_balancer, adapted. GEOPM keeps the job-average cap, has every node measure its epoch
// runtime, sends the slowest runtime down the tree, lowers each node's cap until its runtime matches
// the slowest and spreads the freed slack evenly over all nodes, round after round. For inference a
// node's "runtime" becomes the time it needs per second of the work it could do at its maximum cap:
// r(cap) = v(max)/v(cap) (1: it serves everything it can; v the curve's value, which already stops
// at the node's demand). Balancing runtimes means giving every node the same fraction φ = 1/r of
// its attainable value. We compute the balancer's fixed point directly rather than its rounds: the
// largest φ in [0, 1] at which every node's least cap reaching φ·v(max) (clamped to its range) fits
// the budget; the slack left after that is spread evenly (a water level on top, clamped to the
// maxima), as GEOPM spreads slack. So the balancer is given its converged state, never its
// convergence time. What it does not do — and gpucap does — is prefer the nodes whose next watt
// buys the most.

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gpucap/cluster/curve.hpp"

namespace gpucap::cluster {

enum class Policy { gpucap, equal, tdp, balancer };

[[nodiscard]] std::string_view to_string(Policy policy);
// "gpucap", "equal", "tdp", "balancer"; nullopt otherwise.
[[nodiscard]] std::optional<Policy> parse_policy(std::string_view name);
[[nodiscard]] const std::vector<Policy>& all_policies();

struct Allocation {
  std::vector<double> caps_w;  // one per node, in input order; 0: standby
  double allocated_w = 0.0;    // their sum (<= the budget)
  double value = 0.0;          // Σ real value at the caps
  std::size_t standby = 0;     // nodes at 0 W because the budget cannot give every node its minimum
  std::size_t snapped = 0;     // gpucap: nodes snapped to their real curve (0 when every curve is concave)
};

// The caps of `policy` for `nodes` under `budget_w`. Throws Error(invalid_data) for a budget that is
// negative, NaN or infinite, or a null node.
[[nodiscard]] Allocation allocate(double budget_w, std::span<const PreparedCurve* const> nodes, Policy policy);

// Which nodes serve (true) when the budget cannot give every node its minimum (see above); all true
// when it can.
[[nodiscard]] std::vector<bool> serving_nodes(double budget_w, std::span<const PreparedCurve* const> nodes);

// An upper bound on the best value any allocation of the real curves reaches under the budget, with
// the same rule for minimums (every node serves when the budget covers every minimum; otherwise
// any subset may serve): the water-filling's value over the concave hulls (with (0, 0) added to
// each hull when nodes may be on standby). Exact when every curve is concave and the budget covers
// every minimum.
[[nodiscard]] double hull_upper_bound(double budget_w, std::span<const PreparedCurve* const> nodes);

// The exact optimum over caps on a grid (every node at min_cap_w + k·step_w, or its max), by dynamic
// programming over the budget in steps of step_w: a feasible value, so a lower bound on the real
// optimum and within one step's worth of it per node. For small clusters (cost ~ nodes × (budget /
// step) × (range / step)); requires the budget to cover every minimum (Error(usage) otherwise, or
// for step_w <= 0).
[[nodiscard]] double grid_optimum(double budget_w, std::span<const PreparedCurve* const> nodes, double step_w);

}  // namespace gpucap::cluster
