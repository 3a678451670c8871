#pragma once
// A small cluster for the protocol's tests: coordinators and node agents on one MemoryStore, stepped
// together in virtual time at a fixed tick, with every cap a node's actuator applies checked against
// the budget in force at that instant.

#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "gpucap/cluster/agent.hpp"
#include "gpucap/cluster/coordinator.hpp"
#include "gpucap/cluster/store.hpp"

namespace gpucap::cluster::test {

// TTL 2 s, keep-alive 0.5 s, safe-cap timeout 1 s, apply at most 0.5 s.
[[nodiscard]] ProtocolTiming fast_timing();

// A concave curve over 100-300 W whose slope grows with `appetite` (a busier node).
[[nodiscard]] NodeCurve curve_for(double appetite);

class Harness {
 public:
  struct Node {
    std::string id;
    std::uint64_t tag = 0;
    std::unique_ptr<Store> client;
    std::unique_ptr<NodeAgent> agent;
    double cap_w = 0.0;
    bool alive = true;
    std::vector<std::pair<double, double>> history;  // (when, cap applied)
  };
  struct Coord {
    std::uint64_t tag = 0;
    std::unique_ptr<Store> client;
    std::unique_ptr<Coordinator> coordinator;
    bool alive = true;
  };

  explicit Harness(ProtocolTiming timing = fast_timing());

  Node& add_node(const std::string& id, const NodeCurve& curve, double safe_cap_w = 100.0, double apply_s = 0.05,
                 double watch_delay_s = 0.01);
  Coord& add_coordinator(const std::string& id, Policy policy = Policy::gpucap);
  // Writes the budget key now; it is enforced (checked against) from now + notice_s.
  void set_budget(double budget_w, double notice_s = 0.0);
  // Steps everything every tick until `t_s` (inclusive of events due then).
  void run_until(double t_s);

  // The machine is off: cap 0 at once, its store client cut, never stepped again.
  void kill(Node& node);
  void kill(Coord& coordinator);
  void partition(Node& node, bool cut);
  void partition(Coord& coordinator, bool cut);

  [[nodiscard]] double now() const { return now_; }
  [[nodiscard]] double sum_caps_w() const;
  [[nodiscard]] double sum_caps_except_w(const Node& node) const;
  // The greatest (sum of caps in force − budget in force) any applied cap produced: <= 0 is safe.
  [[nodiscard]] double worst_excess_w() const { return worst_excess_w_; }
  // Raises that left the sum of caps above the newest budget written: the protocol lowers first.
  [[nodiscard]] std::size_t raises_over_budget() const { return raises_over_; }
  [[nodiscard]] bool logged(const std::string& fragment) const;
  [[nodiscard]] const std::vector<std::string>& logs() const { return logs_; }
  [[nodiscard]] MemoryStore& store() { return store_; }
  [[nodiscard]] Store& facility() { return *facility_; }
  [[nodiscard]] std::vector<std::unique_ptr<Node>>& nodes() { return nodes_; }

  double tick_s = 0.01;

 private:
  void applied(Node& node, double cap_w);

  ProtocolTiming timing_;
  MemoryStore store_;
  std::unique_ptr<Store> facility_;
  std::vector<std::unique_ptr<Node>> nodes_;
  std::vector<std::unique_ptr<Coord>> coordinators_;
  std::uint64_t next_tag_ = 10;
  double now_ = 0.0;
  double announced_w_ = std::numeric_limits<double>::infinity();
  std::vector<std::pair<double, double>> enforced_;  // (from, watts), in time order
  double worst_excess_w_ = -std::numeric_limits<double>::infinity();
  std::size_t raises_over_ = 0;
  std::vector<std::string> logs_;
};

}  // namespace gpucap::cluster::test
