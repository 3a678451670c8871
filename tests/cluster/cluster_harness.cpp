#include "cluster/cluster_harness.hpp"

#include <algorithm>

#include "gpucap/cluster/schema.hpp"

namespace gpucap::cluster::test {

ProtocolTiming fast_timing() {
  ProtocolTiming t;
  t.lease_ttl_s = 2.0;
  t.keepalive_period_s = 0.5;
  t.safe_cap_timeout_s = 1.0;
  t.max_apply_s = 0.5;
  return t;
}

NodeCurve curve_for(double appetite) {
  NodeCurve c;
  c.min_cap_w = 100.0;
  c.max_cap_w = 300.0;
  c.tdp_w = 250.0;
  c.priority = 1.0;
  c.points = {{100.0, 10.0, 1.0}, {200.0, 10.0 + 8.0 * appetite, 1.0}, {300.0, 10.0 + 12.0 * appetite, 1.0}};
  return c;
}

Harness::Harness(ProtocolTiming timing) : timing_(timing), store_(0.0) { facility_ = store_.connect({0.0, 1}); }

Harness::Node& Harness::add_node(const std::string& id, const NodeCurve& curve, double safe_cap_w, double apply_s,
                                 double watch_delay_s) {
  auto node = std::make_unique<Node>();
  node->id = id;
  node->tag = next_tag_++;
  node->client = store_.connect({watch_delay_s, node->tag});
  AgentOptions options;
  options.cluster = "test";
  options.node_id = id;
  options.timing = timing_;
  options.safe_cap_w = safe_cap_w;
  options.apply_latency_s = apply_s;
  options.log = [this, id](std::string_view line) { logs_.push_back(id + ": " + std::string(line)); };
  Node* raw = node.get();
  node->agent = std::make_unique<NodeAgent>(*node->client, options, [this, raw](double cap) { applied(*raw, cap); },
                                            0.0, now_);
  node->agent->set_curve(curve);
  nodes_.push_back(std::move(node));
  return *nodes_.back();
}

Harness::Coord& Harness::add_coordinator(const std::string& id, Policy policy) {
  auto coord = std::make_unique<Coord>();
  coord->tag = next_tag_++;
  coord->client = store_.connect({0.005, coord->tag});
  CoordinatorOptions options;
  options.cluster = "test";
  options.id = id;
  options.policy = policy;
  options.timing = timing_;
  options.period_s = 0.2;
  options.log = [this, id](std::string_view line) { logs_.push_back(id + ": " + std::string(line)); };
  coord->coordinator = std::make_unique<Coordinator>(*coord->client, options);
  coordinators_.push_back(std::move(coord));
  return *coordinators_.back();
}

void Harness::set_budget(double budget_w, double notice_s) {
  (void)facility_->put(PutOp{Keys("test").budget(), budget_json(budget_w), 0});
  announced_w_ = budget_w;
  enforced_.emplace_back(now_ + notice_s, budget_w);
  std::stable_sort(enforced_.begin(), enforced_.end());
}

void Harness::run_until(double t_s) {
  while (now_ + tick_s <= t_s + 1e-9) {
    now_ += tick_s;
    store_.advance_to(now_);
    for (auto& c : coordinators_) {
      if (c->alive) (void)c->coordinator->step(now_);
    }
    for (auto& n : nodes_) {
      if (n->alive) (void)n->agent->step(now_);
    }
  }
}

void Harness::applied(Node& node, double cap_w) {
  const bool raise = cap_w > node.cap_w;
  node.cap_w = cap_w;
  node.history.emplace_back(now_, cap_w);
  const double sum = sum_caps_w();
  double enforced = std::numeric_limits<double>::infinity();
  for (const auto& [from, watts] : enforced_) {
    if (from <= now_) enforced = watts;
  }
  worst_excess_w_ = std::max(worst_excess_w_, sum - enforced);
  if (raise && sum > announced_w_ + 1e-6) ++raises_over_;
}

void Harness::kill(Node& node) {
  node.alive = false;
  node.cap_w = 0.0;
  store_.set_connected(node.tag, false);
}

void Harness::kill(Coord& coordinator) {
  coordinator.alive = false;
  store_.set_connected(coordinator.tag, false);
}

void Harness::partition(Node& node, bool cut) { store_.set_connected(node.tag, !cut); }

void Harness::partition(Coord& coordinator, bool cut) { store_.set_connected(coordinator.tag, !cut); }

double Harness::sum_caps_w() const {
  double sum = 0.0;
  for (const auto& n : nodes_) sum += n->cap_w;
  return sum;
}

double Harness::sum_caps_except_w(const Node& node) const { return sum_caps_w() - node.cap_w; }

bool Harness::logged(const std::string& fragment) const {
  return std::any_of(logs_.begin(), logs_.end(), [&](const std::string& line) { return line.find(fragment) != std::string::npos; });
}

}  // namespace gpucap::cluster::test
