#pragma once
// The coordinator's core over any Store (etcd, or MemoryStore in the simulator): leadership, the
// budget, the nodes' curves and acknowledgements in; every node's allocation out, through the
// protocol's Ledger (protocol.hpp), in one transaction per plan guarded by the leadership.
// No clock and no thread: the owner calls step(now) when the store has news (a watch event) or
// when the time step() returned comes. The daemon (`gpucap cluster coordinate`) is a loop around
// it; the simulator calls it in virtual time.
//
// What it does with bad input (each with one log line, never a throw):
//  - a budget record that is not a finite number of watts in [0, 1 GW]: ignored, the last good
//    budget stays (none yet: nothing is allocated);
//  - a node whose curve is broken (curve.hpp): registered and counted, but not allocated: it is
//    held at min(what it was told, its safe cap) until it publishes a valid curve;
//  - a node record that cannot be read at all, a key with a bad node name: ignored;
//  - an acknowledgement of another incarnation or an older allocation (a restarted node, a
//    duplicate ID): ignored;
//  - a request to forget a node that is not lost under the incarnation it names (it is live, has
//    registered again, or was never counted): erased, and the node's power stays counted.
//
// Forgetting (forget/<node>, written by `gpucap cluster forget`): an operator's word that a lost
// node is gone for good. Once the node's safe-cap timeout has passed (the request waits for it), the
// leader erases its allocation, acknowledgement and the request in one transaction guarded by its
// leadership, then stops counting it (Ledger::forget); its power goes to the others in the next
// round. If the node was only cut off after all, it holds at most its safe cap, uncounted, for as
// long as it stays cut off, and comes back reporting it: the operator's word is the guarantee.
//
// Re-allocation: at most once per period_s, when something changed (a curve, a node, the budget,
// a lost node's timeout). The budget handed to the allocator is the budget less what lost nodes
// still count and what nodes with broken curves hold. Targets are rounded down to cap_quantum_w
// (not below the node's minimum). A change smaller than deadband_w is not written (the node keeps
// what it was told) unless that would put the targets' sum above the budget: then the skipped
// lowerings are written after all, largest first, until the sum fits. So a small drift of a
// baseline's level does not rewrite every node, and the targets never sum above the budget.

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "gpucap/cluster/allocator.hpp"
#include "gpucap/cluster/protocol.hpp"
#include "gpucap/cluster/schema.hpp"
#include "gpucap/cluster/store.hpp"

namespace gpucap::cluster {

using LogFn = std::function<void(std::string_view)>;

struct CoordinatorOptions {
  std::string cluster = "default";
  std::string id = "coordinator";
  Policy policy = Policy::gpucap;
  ProtocolTiming timing;
  double period_s = 1.0;           // the least time between two re-allocations
  double plan_interval_s = 0.02;   // the least time between two plans (acks that arrive together share one)
  double cap_quantum_w = 1.0;      // targets are rounded down to this (0: not rounded)
  double deadband_w = 2.0;         // a smaller change of a node's cap is not written (see above)
  LogFn log;                       // default: spdlog::warn (what was ignored, an operator's request applied)
};

struct CoordinatorStats {
  std::size_t rounds = 0;           // re-allocations
  std::size_t plans = 0;            // transactions written
  std::size_t writes = 0;           // allocation keys written
  std::size_t ignored = 0;          // bad records, stale acknowledgements (each logged)
  std::size_t forgotten = 0;        // lost nodes forgotten at an operator's request
  double last_round_value = 0.0;    // the allocator's value of the last round
  double last_round_cpu_s = 0.0;    // CPU time of the last round (allocate + targets)
  double max_round_cpu_s = 0.0;
  std::size_t last_round_nodes = 0;
};

class Coordinator {
 public:
  // Error(usage) for bad options (names, timing).
  Coordinator(Store& store, CoordinatorOptions options);

  // Everything due at now_s: leadership (campaign, keep-alive), watch events, a re-allocation when
  // due, a plan when due. Returns the latest time it wants to be called again. Store errors are
  // caught: the coordinator retries on its next call (and gives up leadership when its lease is gone).
  double step(double now_s);

  [[nodiscard]] bool leader() const { return leader_; }
  [[nodiscard]] const Ledger& ledger() const { return ledger_; }
  [[nodiscard]] std::optional<double> budget_w() const { return budget_w_; }
  [[nodiscard]] const CoordinatorStats& stats() const { return stats_; }
  // Called when a node holds the target that a re-allocation at `since_s` asked of it (acknowledged),
  // with the time: for the simulator's re-allocation times.
  void on_settled(std::function<void(const std::string& id, double since_s, double now_s)> callback) {
    on_settled_ = std::move(callback);
  }

 private:
  struct Entry {
    std::optional<PreparedCurve> curve;  // nullopt: broken (held at its safe cap)
    bool leaving = false;
  };

  void log(const std::string& message);   // what was ignored, and why (counted in stats().ignored)
  void note(const std::string& message);  // what an operator should see
  void campaign(double now_s);
  void watch_leader(double now_s);
  void resign();
  void cancel_watches();
  void load_state(double now_s);
  void poll_events(double now_s);
  void on_node_put(const std::string& id, const KeyValue& kv);
  void on_node_erase(const std::string& id, double now_s);
  void on_ack(const std::string& id, const KeyValue& kv, double now_s);
  void on_budget(const KeyValue& kv);
  void on_forget(const std::string& id, const KeyValue& kv, double now_s);
  void retry_waiting_forgets(double now_s);
  void reallocate(double now_s);
  void plan(double now_s);
  void note_settled(const std::string& id, double now_s);
  [[nodiscard]] std::vector<Compare> leadership_guard() const;

  Store& store_;
  CoordinatorOptions options_;
  Keys keys_;
  Ledger ledger_;
  bool leader_ = false;
  bool reload_ = false;  // the store was unreachable while leader: re-read everything
  LeaseId lease_ = 0;
  Revision leader_revision_ = 0;
  double next_keepalive_s_ = 0.0;
  double retry_campaign_s_ = 0.0;
  WatchId leader_watch_ = 0;  // a standby's watch on the leader key: its deletion starts a campaign at once
  WatchId nodes_watch_ = 0;
  WatchId acks_watch_ = 0;
  WatchId budget_watch_ = 0;
  WatchId forgets_watch_ = 0;
  std::optional<double> budget_w_;
  std::unordered_map<std::string, Entry> entries_;
  std::unordered_map<std::string, double> pending_since_;
  std::map<std::string, KeyValue> waiting_forgets_;  // requests waiting for their node's safe-cap timeout
  bool dirty_ = false;
  bool plan_due_ = false;
  double last_round_s_ = -1e300;
  double last_plan_s_ = -1e300;
  CoordinatorStats stats_;
  std::function<void(const std::string&, double, double)> on_settled_;
};

}  // namespace gpucap::cluster
