#pragma once
// The cluster's safety protocol as two pure state machines — the coordinator's Ledger and a node's
// NodeSafety — with no store, no clock and no I/O: times are arguments. The coordinator
// (coordinator.hpp) and the node agent (agent.hpp) drive them from the store; the tests drive them
// by hand.
//
// The invariant. At every instant, the sum over all nodes of the cap in force on the node is at most
// the budget. The coordinator cannot see the caps in force; it keeps, per node, a *bound*: a cap the
// node's cap in force is certainly at or below. It only ever writes an allocation that keeps the sum
// of the bounds (committed_w) within the budget, so the sum of the caps in force is too.
//
// Bounds. A live node's bound is max(the cap it last acknowledged, every cap issued to it since
// that acknowledgement): a node applies allocations in revision order and never goes back to an
// older one, so after acknowledging allocation r it holds r's cap, a later one, or less (its safe
// cap, or standby). A registration counts as an acknowledgement of the cap the node reports it holds
// (0 for a node that does not serve yet).
//
// A change of allocation. Phase 1 lowers: every node whose target is below what it was last told
// is written its target at once (lowering is always safe; its bound falls only when it acknowledges).
// Phase 2 raises: a raise is written only when the budget has room for it above the bounds — in
// practice once the lowered nodes have acknowledged. Raises are taken smallest first and each is
// written whole. A new target may arrive at any time, also mid-change: plan() always starts from the
// bounds, so re-planning is safe. Each plan's writes go to the store in one transaction.
//
// Node loss. A node whose lease expired (seen by the coordinator at time t) keeps its bound until
// t + safe_cap_timeout_s; from then on it counts min(bound, its safe cap) — until it registers again
// (then it counts what it reports) or an operator forgets it (then 0). A node that leaves
// gracefully acknowledges 0 W (it stopped serving) before it revokes its lease, and counts 0.
// Only then (a lost node: after the lease expired and the timeout passed) does its power go to
// others.
//
// A node that loses the store. A node renews its lease every keepalive_period_s; let s be the time
// it *sent* its last keep-alive that the store answered. From s + safe_cap_timeout_s (by its own
// clock) it holds min(its cap, its safe cap), and it never raises on its own: while it has no
// contact it applies only allocations that lower its cap, and after contact returns it goes back up
// only to the allocation it re-reads from the store (which the coordinator has been counting).
//
// Timing argument (docs/cluster.md). Let a >= s be when the store accepted that keep-alive; the
// lease expires at a + TTL, and the coordinator sees the expiry at t >= a + TTL. The node is at its
// safe cap by s + T·(1 + ρ) + d, with T = safe_cap_timeout_s, ρ the node clock's largest rate error
// and d the longest it takes to apply a cap. The coordinator counts the node's old bound until
// t + T >= s + TTL + T. So the node is at its safe cap before the coordinator stops counting more
// whenever TTL >= ρ·T + d — ProtocolTiming::validate() checks this, with the keep-alive period below
// TTL/2 (so one lost keep-alive does not expire a healthy node). A raise that the node applies after
// its lease expired unseen is covered the same way: the coordinator issued it while the node was
// live and counts it as the bound until t + T. Budget decreases are not instantaneous: from the
// moment the coordinator reads a lower budget, phase 1 takes one write and the lowered nodes'
// acknowledgements (watch latency + apply + ack latency); a facility must announce a decrease that
// long before it enforces it (the simulator's notice_s).

#include <cstdint>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "gpucap/cluster/store.hpp"

namespace gpucap::cluster {

// The longest lease TTL the store grants (EtcdStore::grant_lease), and so the longest a timing
// may ask for.
inline constexpr double kMaxLeaseTtlS = 1e6;

struct ProtocolTiming {
  double lease_ttl_s = 10.0;
  double keepalive_period_s = 3.0;
  double safe_cap_timeout_s = 5.0;
  double max_clock_drift = 1e-3;  // ρ: a node's clock runs at most this fraction slow
  double max_apply_s = 1.0;       // d: the longest a node takes to apply a cap

  // Error(usage) when a value is not positive and finite, a TTL or timeout is over kMaxLeaseTtlS,
  // or the timing argument above does not hold (TTL >= ρ·T + d, keep-alive period <= TTL/2).
  void validate() const;
};

enum class NodeState { live, lost, left };

struct LedgerNode {
  std::string id;
  std::int64_t incarnation = 0;   // the node's lease of this registration
  NodeState state = NodeState::live;
  double acked_w = 0.0;           // the cap it last acknowledged (its registration's report at first)
  Revision acked_revision = 0;    // the allocation that acknowledgement was for (0: the registration)
  double unacked_max_w = 0.0;     // the highest cap issued since then (has_unacked)
  bool has_unacked = false;
  double issued_w = 0.0;          // the last cap written to it (what it was last told)
  Revision issued_revision = 0;
  std::optional<double> target_w; // where the coordinator wants it
  double safe_cap_w = 0.0;
  double lost_at_s = 0.0;         // when its lease expiry was seen
  bool pending = false;           // in the ledger's pending set (its target differs from what it was told)

  // The cap it may hold, ignoring loss: max(acknowledged, issued since).
  [[nodiscard]] double live_bound_w() const { return has_unacked ? std::max(acked_w, unacked_max_w) : acked_w; }
  // What it was last told to hold: the last issued cap while unacknowledged, else the acknowledged.
  [[nodiscard]] double intended_w() const { return has_unacked ? issued_w : acked_w; }
};

// One allocation write: put the node's allocation key to cap_w, for this incarnation.
struct AllocationWrite {
  std::string id;
  std::int64_t incarnation = 0;
  double cap_w = 0.0;
};

enum class AckResult { accepted, stale, unknown_node };

class Ledger {
 public:
  explicit Ledger(ProtocolTiming timing);

  // A node registered, or registered again with a new incarnation (the previous one's entry is
  // replaced: the node reports what it holds now). Error(invalid_data) for a negative or
  // non-finite cap.
  void register_node(const std::string& id, std::int64_t incarnation, double cap_in_force_w, double safe_cap_w);
  // The node's acknowledgement of allocation `revision`: stale for another incarnation or an
  // older revision than one already acknowledged; unknown_node for an id never registered.
  [[nodiscard]] AckResult acknowledge(const std::string& id, std::int64_t incarnation, Revision revision, double cap_w);
  // The node's lease expired (seen at now_s); no-op for an unknown or already lost node.
  void lease_expired(const std::string& id, double now_s);
  // The node left gracefully (it acknowledged 0 W): counts 0 and is removed.
  void left(const std::string& id);
  // An operator says the node is gone for good: removed, counts 0.
  void forget(const std::string& id);

  // Where the coordinator wants a live node; ignored for unknown or lost nodes. cap >= 0.
  void set_target(const std::string& id, double cap_w);
  // The writes allowed now under `budget_w`: every lower, then the raises that fit above the bounds
  // (smallest first). Pure: call issued() with those that were committed.
  [[nodiscard]] std::vector<AllocationWrite> plan(double budget_w, double now_s) const;
  // Those writes were committed at `revision`.
  void issued(std::span<const AllocationWrite> writes, Revision revision);

  // Σ over nodes of the cap each may hold now (lost nodes as counted at now_s).
  [[nodiscard]] double committed_w(double now_s) const;
  // Σ over lost nodes of what they count at now_s: the budget the allocator cannot hand out.
  [[nodiscard]] double lost_w(double now_s) const;
  // What a lost node counts at now_s.
  [[nodiscard]] double counted_w(const LedgerNode& node, double now_s) const;
  // The next time a lost node's count drops (its timeout passes) after now_s, if any.
  [[nodiscard]] std::optional<double> next_reclaim_s(double now_s) const;
  // Every live node holds (acknowledged) its target and nothing is in flight.
  [[nodiscard]] bool settled() const;

  [[nodiscard]] const LedgerNode* find(const std::string& id) const;
  [[nodiscard]] const std::vector<LedgerNode>& nodes() const { return nodes_; }
  [[nodiscard]] const ProtocolTiming& timing() const { return timing_; }

  // Nodes whose target differs from what they were last told (what plan() looks at).
  [[nodiscard]] std::size_t pending() const { return pending_.size(); }

 private:
  LedgerNode* find_mutable(const std::string& id);
  void remove(const std::string& id);
  // Every change of a node goes through here: the sums and the pending set follow it.
  template <typename F>
  void change(LedgerNode& node, F&& mutate);
  [[nodiscard]] static std::int64_t micro_watts_up(double watts);

  ProtocolTiming timing_;
  std::vector<LedgerNode> nodes_;
  std::unordered_map<std::string, std::size_t> index_;
  std::int64_t live_bound_uw_ = 0;  // Σ live bounds, each rounded up to 1 µW (never undercounted)
  std::set<std::string> pending_;   // sorted: plans are deterministic
  std::size_t unacked_live_ = 0;    // live nodes with a write not yet acknowledged
  std::unordered_set<std::string> lost_;
};

// ---- The node's side -----------------------------------------------------------------------

// What one node holds and when it must fall back. Caps are what the node's GPUs are set to; 0
// means standby (not serving).
class NodeSafety {
 public:
  // `initial_cap_w`: what the node holds when it starts (0: not serving yet).
  NodeSafety(ProtocolTiming timing, double safe_cap_w, double initial_cap_w, double now_s);

  // The store answered a keep-alive the node sent at sent_at_s (its lease is alive).
  void contact(double sent_at_s);
  // The store says the lease is gone: fall to the safe cap at once.
  void lease_lost(double now_s);
  // An allocation of this node's incarnation, at `revision`, read at now_s. Returns the cap to apply,
  // or nullopt: an older revision than one applied, or a raise while the node has no contact (it
  // then holds min(cap, allocation) and waits). After a fall back, the allocation re-read on
  // contact is applied again even at the same revision.
  [[nodiscard]] std::optional<double> allocation(Revision revision, double cap_w, double now_s);
  // The fall-back: from deadline_s() on, the cap is min(cap, safe cap). Returns the new cap when it
  // falls now.
  [[nodiscard]] std::optional<double> tick(double now_s);

  [[nodiscard]] double cap_w() const { return cap_w_; }
  [[nodiscard]] bool fallen_back() const { return fallen_; }
  // When it falls back without contact: last contact + safe_cap_timeout_s.
  [[nodiscard]] double deadline_s() const { return last_contact_s_ + timing_.safe_cap_timeout_s; }
  [[nodiscard]] Revision applied_revision() const { return applied_revision_; }

 private:
  ProtocolTiming timing_;
  double safe_cap_w_;
  double cap_w_;
  double last_contact_s_;
  bool fallen_ = false;
  Revision applied_revision_ = 0;
};

}  // namespace gpucap::cluster
