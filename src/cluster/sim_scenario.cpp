#include "sim_scenario.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "gpucap/core/error.hpp"
#include "gpucap/sim/noise.hpp"

namespace gpucap::cluster::detail {

namespace {

// Independent random streams, so that one fraction's change does not reshuffle everything else.
enum Stream : std::uint64_t { kAssign = 0xc1a551, kDemand = 0xde3a4d, kEvents = 0xe7e475, kDelays = 0xde1a75 };

double uniform(sim::Noise& noise, double lo, double hi) { return lo + (hi - lo) * noise.uniform(); }

double log_uniform(sim::Noise& noise, double lo, double hi) {
  return std::exp(uniform(noise, std::log(lo), std::log(hi)));
}

std::vector<std::pair<double, double>> demand_path(sim::Noise& noise, const SimulateOptions& o, double from_s) {
  std::vector<std::pair<double, double>> path{{from_s, log_uniform(noise, o.demand_min, o.demand_max)}};
  double t = from_s;
  while (true) {
    t += -o.demand_change_mean_s * std::log(1.0 - noise.uniform());
    if (t >= o.duration_s) break;
    path.emplace_back(t, log_uniform(noise, o.demand_min, o.demand_max));
  }
  return path;
}

}  // namespace

double NodeSpec::demand_at(double t_s) const {
  double d = demand.front().second;
  for (const auto& [from, value] : demand) {
    if (from > t_s) break;
    d = value;
  }
  return d;
}

bool NodeSpec::alive_at(double t_s) const {
  if (t_s < join_s) return false;
  if (leave_s && t_s >= *leave_s) return false;
  if (death_s && t_s >= *death_s) return false;
  return true;
}

double Scenario::budget_in_force(double t_s) const {
  double w = budget_w;
  for (const auto& [at, watts] : enforcements) {
    if (at > t_s) break;
    w = watts;
  }
  return w;
}

NodeCurve node_curve(const TwinCapacity& pair, double unit_rps, double demand_fraction) {
  NodeCurve curve;
  curve.min_cap_w = pair.min_cap_w;
  curve.max_cap_w = pair.max_cap_w;
  curve.tdp_w = pair.tdp_w;
  curve.priority = 1.0;
  const double demand = demand_fraction * pair.tdp_rps / unit_rps;
  const auto normalised = [&](std::size_t i) { return pair.throughput_rps[i] / unit_rps; };
  for (std::size_t i = 0; i < pair.caps_w.size(); ++i) {
    if (i > 0) {
      // Where capacity crosses the demand between two grid points: a kink of min(capacity, demand).
      const double a = normalised(i - 1) - demand;
      const double b = normalised(i) - demand;
      if ((a < 0.0 && b > 0.0) || (a > 0.0 && b < 0.0)) {
        const double t = a / (a - b);
        const double cap = pair.caps_w[i - 1] + t * (pair.caps_w[i] - pair.caps_w[i - 1]);
        if (cap > curve.points.back().cap_w && cap < pair.caps_w[i]) curve.points.push_back({cap, demand, 1.0});
      }
    }
    curve.points.push_back({pair.caps_w[i], std::min(normalised(i), demand), 1.0});
  }
  return curve;
}

double node_value(const TwinCapacity& pair, double unit_rps, double demand_fraction, double cap_w) {
  if (cap_w <= 0.0) return 0.0;
  return std::min(pair.rps(cap_w), demand_fraction * pair.tdp_rps) / unit_rps;
}

Scenario make_scenario(const sim::Catalog& catalog, const SimulateOptions& o) {
  validate(o);
  Scenario s;
  // Every (GPU, model) pair that can serve within the SLO, by GPU.
  std::vector<const sim::GpuSpec*> gpus;
  if (o.gpus.empty()) {
    for (const auto& g : catalog.gpus()) gpus.push_back(&g);
  } else {
    for (const auto& name : o.gpus) gpus.push_back(&catalog.gpu(name));
  }
  std::vector<std::vector<std::size_t>> pairs_of(gpus.size());
  for (std::size_t g = 0; g < gpus.size(); ++g) {
    for (const auto& model : catalog.models()) {
      if (model.training_only()) continue;
      if (auto capacity = twin_capacity(*gpus[g], model, o.curves)) {
        pairs_of[g].push_back(s.pairs.size());
        s.pairs.push_back(std::move(*capacity));
      }
    }
  }
  // A model's unit: the geometric mean over the GPUs that serve it of their capacity at TDP, so that
  // requests of different models add up and a faster GPU's requests still count for more.
  std::map<std::string, std::pair<double, int>> log_sum;
  for (const auto& pair : s.pairs) {
    auto& [sum, n] = log_sum[pair.model];
    sum += std::log(pair.tdp_rps);
    ++n;
  }
  for (const auto& pair : s.pairs) {
    const auto& [sum, n] = log_sum[pair.model];
    s.unit_rps.push_back(std::exp(sum / n));
  }
  std::vector<std::size_t> usable;
  for (std::size_t g = 0; g < gpus.size(); ++g) {
    if (!pairs_of[g].empty()) usable.push_back(g);
  }
  if (usable.empty()) throw usage_error("no GPU of the list can serve any inference model within the SLO");

  sim::Noise assign(sim::derive_seed(o.seed, kAssign));
  sim::Noise demand(sim::derive_seed(o.seed, kDemand));
  sim::Noise events(sim::derive_seed(o.seed, kEvents));
  sim::Noise delays(sim::derive_seed(o.seed, kDelays));
  const auto count = [&](double fraction) {
    return static_cast<std::size_t>(std::llround(fraction * static_cast<double>(o.nodes)));
  };
  const std::size_t joins = count(o.join_fraction);
  const std::size_t total = o.nodes + joins;
  const double early = 0.1 * o.duration_s;
  const double late = 0.9 * o.duration_s;
  for (std::size_t i = 0; i < total; ++i) {
    NodeSpec node;
    node.id = fmt::format("node-{:05d}", i);
    const auto g = usable[std::min(usable.size() - 1, static_cast<std::size_t>(assign.uniform() * static_cast<double>(usable.size())))];
    const auto& choices = pairs_of[g];
    node.pair = choices[std::min(choices.size() - 1, static_cast<std::size_t>(assign.uniform() * static_cast<double>(choices.size())))];
    node.join_s = i < o.nodes ? 0.0 : uniform(events, 0.05 * o.duration_s, late);
    node.demand = demand_path(demand, o, node.join_s);
    node.watch_delay_s = uniform(delays, o.watch_delay_min_s, o.watch_delay_max_s);
    node.apply_s = uniform(delays, o.apply_min_s, o.apply_max_s);
    if (i < o.nodes) s.sum_tdp_w += s.pairs[node.pair].tdp_w;
    s.nodes.push_back(std::move(node));
  }
  s.initial = o.nodes;
  // Churn among the initial nodes: disjoint sets, drawn in order.
  std::vector<std::size_t> order(o.nodes);
  for (std::size_t i = 0; i < o.nodes; ++i) order[i] = i;
  for (std::size_t i = o.nodes; i > 1; --i) {  // Fisher-Yates with our own generator
    const auto j = std::min(i - 1, static_cast<std::size_t>(events.uniform() * static_cast<double>(i)));
    std::swap(order[i - 1], order[j]);
  }
  std::size_t next = 0;
  const auto take = [&](std::size_t n, auto&& assign_event) {
    for (std::size_t k = 0; k < n && next < order.size(); ++k) assign_event(s.nodes[order[next++]]);
  };
  take(count(o.leave_fraction), [&](NodeSpec& n) { n.leave_s = uniform(events, early, late); });
  take(count(o.death_fraction), [&](NodeSpec& n) { n.death_s = uniform(events, early, late); });
  const double longest = 3.0 * (o.timing.lease_ttl_s + o.timing.safe_cap_timeout_s);
  take(count(o.partition_fraction), [&](NodeSpec& n) {
    const double from = uniform(events, early, late);
    n.partition = Interval{from, from + uniform(events, 1.0, longest)};
  });
  take(count(o.broken_curve_fraction), [&](NodeSpec& n) {
    const double from = uniform(events, early, 0.8 * o.duration_s);
    n.broken = Interval{from, from + uniform(events, 10.0, 60.0)};
  });
  // The budget.
  const auto watts = [&](double value, bool fraction) { return fraction ? value * s.sum_tdp_w : value; };
  s.budget_w = watts(o.budget, o.budget_fraction);
  double current = s.budget_w;
  for (const auto& step : o.budget_steps) {
    const double w = watts(step.value, step.fraction);
    s.announcements.emplace_back(step.at_s, w);
    s.enforcements.emplace_back(w < current ? step.at_s + o.notice_s : step.at_s, w);
    current = w;
  }
  return s;  // validate() keeps steps in order and notice_s apart: enforcements stay in order
}

}  // namespace gpucap::cluster::detail
