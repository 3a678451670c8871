#include "gpucap/cluster/protocol.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "gpucap/core/error.hpp"

namespace gpucap::cluster {

namespace {

constexpr double kEpsilonW = 1e-6;

void check_cap(double cap_w, const char* what) {
  if (!std::isfinite(cap_w) || cap_w < 0.0) {
    throw Error(ErrorCode::invalid_data, fmt::format("{} {} W must be a finite, non-negative number", what, cap_w));
  }
}

}  // namespace

void ProtocolTiming::validate() const {
  const auto positive = [](double v, const char* name) {
    if (!std::isfinite(v) || v <= 0.0) throw usage_error(fmt::format("{} {} must be a positive number", name, v));
  };
  positive(lease_ttl_s, "lease TTL (s)");
  positive(keepalive_period_s, "keep-alive period (s)");
  positive(safe_cap_timeout_s, "safe-cap timeout (s)");
  positive(max_apply_s, "longest cap apply time (s)");
  // A lease longer than the store grants would be refused at every try, and the coordinator or
  // node would retry without ever holding one.
  if (lease_ttl_s > kMaxLeaseTtlS || safe_cap_timeout_s > kMaxLeaseTtlS) {
    throw usage_error(fmt::format("lease TTL {:g} s and safe-cap timeout {:g} s must be at most {:g} s (the longest lease "
                                  "etcd grants here)",
                                  lease_ttl_s, safe_cap_timeout_s, kMaxLeaseTtlS));
  }
  if (!std::isfinite(max_clock_drift) || max_clock_drift < 0.0 || max_clock_drift >= 1.0) {
    throw usage_error(fmt::format("clock drift {} must be in [0, 1)", max_clock_drift));
  }
  if (keepalive_period_s > lease_ttl_s / 2.0) {
    throw usage_error(fmt::format("keep-alive period {:g} s must be at most half the lease TTL {:g} s",
                                  keepalive_period_s, lease_ttl_s));
  }
  if (lease_ttl_s < max_clock_drift * safe_cap_timeout_s + max_apply_s) {
    throw usage_error(fmt::format("lease TTL {:g} s is too short: a lost node must reach its safe cap before the "
                                  "coordinator stops counting its cap (TTL >= drift x timeout + apply time = {:g} s)",
                                  lease_ttl_s, max_clock_drift * safe_cap_timeout_s + max_apply_s));
  }
}

// ---- Ledger ----------------------------------------------------------------------------------

Ledger::Ledger(ProtocolTiming timing) : timing_(timing) { timing_.validate(); }

std::int64_t Ledger::micro_watts_up(double watts) { return static_cast<std::int64_t>(std::ceil(watts * 1e6)); }

template <typename F>
void Ledger::change(LedgerNode& node, F&& mutate) {
  const bool was_lost = node.state == NodeState::lost;
  if (node.state == NodeState::live) {
    live_bound_uw_ -= micro_watts_up(node.live_bound_w());
    if (node.has_unacked) --unacked_live_;
  }
  mutate(node);
  if (node.state == NodeState::live) {
    live_bound_uw_ += micro_watts_up(node.live_bound_w());
    if (node.has_unacked) ++unacked_live_;
  }
  const bool differs = node.state == NodeState::live && node.target_w &&
                       std::abs(*node.target_w - node.intended_w()) > kEpsilonW;
  if (differs != node.pending) {
    if (differs) {
      pending_.insert(node.id);
    } else {
      pending_.erase(node.id);
    }
    node.pending = differs;
  }
  const bool lost = node.state == NodeState::lost;
  if (lost != was_lost) {
    if (lost) {
      lost_.insert(node.id);
    } else {
      lost_.erase(node.id);
    }
  }
}

LedgerNode* Ledger::find_mutable(const std::string& id) {
  const auto it = index_.find(id);
  return it == index_.end() ? nullptr : &nodes_[it->second];
}

const LedgerNode* Ledger::find(const std::string& id) const {
  const auto it = index_.find(id);
  return it == index_.end() ? nullptr : &nodes_[it->second];
}

void Ledger::remove(const std::string& id) {
  const auto it = index_.find(id);
  if (it == index_.end()) return;
  const std::size_t at = it->second;
  change(nodes_[at], [](LedgerNode& n) {
    n.state = NodeState::left;
    n.target_w.reset();
  });
  index_.erase(it);
  if (at + 1 != nodes_.size()) {
    nodes_[at] = std::move(nodes_.back());
    index_[nodes_[at].id] = at;
  }
  nodes_.pop_back();
}

void Ledger::register_node(const std::string& id, std::int64_t incarnation, double cap_in_force_w, double safe_cap_w) {
  check_cap(cap_in_force_w, "reported cap");
  check_cap(safe_cap_w, "safe cap");
  auto* node = find_mutable(id);
  if (node == nullptr) {
    index_.emplace(id, nodes_.size());
    nodes_.push_back(LedgerNode{});
    node = &nodes_.back();
    node->id = id;
    node->state = NodeState::left;  // counts nothing until the change below
  }
  change(*node, [&](LedgerNode& n) {
    const bool pending = n.pending;
    n = LedgerNode{};
    n.pending = pending;  // the set's membership is the change's business
    n.id = id;
    n.incarnation = incarnation;
    n.acked_w = cap_in_force_w;
    n.issued_w = cap_in_force_w;
    n.safe_cap_w = safe_cap_w;
  });
}

AckResult Ledger::acknowledge(const std::string& id, std::int64_t incarnation, Revision revision, double cap_w) {
  auto* node = find_mutable(id);
  if (node == nullptr) return AckResult::unknown_node;
  if (node->incarnation != incarnation || node->state != NodeState::live || revision < node->acked_revision) {
    return AckResult::stale;
  }
  if (!std::isfinite(cap_w) || cap_w < 0.0) return AckResult::stale;
  change(*node, [&](LedgerNode& n) {
    n.acked_w = cap_w;
    n.acked_revision = revision;
    if (revision >= n.issued_revision) n.has_unacked = false;
  });
  return AckResult::accepted;
}

void Ledger::lease_expired(const std::string& id, double now_s) {
  auto* node = find_mutable(id);
  if (node == nullptr || node->state != NodeState::live) return;
  change(*node, [&](LedgerNode& n) {
    n.state = NodeState::lost;
    n.lost_at_s = now_s;
    n.target_w.reset();
  });
}

void Ledger::left(const std::string& id) { remove(id); }

void Ledger::forget(const std::string& id) { remove(id); }

void Ledger::set_target(const std::string& id, double cap_w) {
  check_cap(cap_w, "target cap");
  auto* node = find_mutable(id);
  if (node == nullptr || node->state != NodeState::live) return;
  if (node->target_w && *node->target_w == cap_w) return;
  change(*node, [&](LedgerNode& n) { n.target_w = cap_w; });
}

double Ledger::counted_w(const LedgerNode& node, double now_s) const {
  switch (node.state) {
    case NodeState::live: return node.live_bound_w();
    case NodeState::left: return 0.0;
    case NodeState::lost:
      if (now_s < node.lost_at_s + timing_.safe_cap_timeout_s) return node.live_bound_w();
      return std::min(node.live_bound_w(), node.safe_cap_w);
  }
  return node.live_bound_w();
}

double Ledger::committed_w(double now_s) const { return static_cast<double>(live_bound_uw_) / 1e6 + lost_w(now_s); }

double Ledger::lost_w(double now_s) const {
  double sum = 0.0;
  for (const auto& id : lost_) sum += counted_w(*find(id), now_s);
  return sum;
}

std::optional<double> Ledger::next_reclaim_s(double now_s) const {
  std::optional<double> next;
  for (const auto& id : lost_) {
    const double at = find(id)->lost_at_s + timing_.safe_cap_timeout_s;
    if (at > now_s && (!next || at < *next)) next = at;
  }
  return next;
}

std::vector<AllocationWrite> Ledger::plan(double budget_w, double now_s) const {
  std::vector<AllocationWrite> writes;
  struct Raise {
    const LedgerNode* node;
    double need_w;
  };
  std::vector<Raise> raises;
  for (const auto& id : pending_) {
    const auto& node = *find(id);
    const double target = *node.target_w;
    if (target < node.intended_w()) {
      writes.push_back({node.id, node.incarnation, target});  // phase 1: lowering is always safe
    } else {
      raises.push_back({&node, target - node.live_bound_w()});
    }
  }
  // Phase 2: raises within the room above the bounds (lowers count at their old bound until acked).
  double room = budget_w - committed_w(now_s);
  std::stable_sort(raises.begin(), raises.end(), [](const Raise& a, const Raise& b) { return a.need_w < b.need_w; });
  for (const auto& raise : raises) {
    const double need = std::max(0.0, raise.need_w);
    if (need > room) break;  // sorted: none after it fits either
    room -= need;
    writes.push_back({raise.node->id, raise.node->incarnation, *raise.node->target_w});
  }
  return writes;
}

void Ledger::issued(std::span<const AllocationWrite> writes, Revision revision) {
  for (const auto& write : writes) {
    auto* node = find_mutable(write.id);
    if (node == nullptr || node->incarnation != write.incarnation || node->state != NodeState::live) continue;
    change(*node, [&](LedgerNode& n) {
      n.unacked_max_w = n.has_unacked ? std::max(n.unacked_max_w, write.cap_w) : write.cap_w;
      n.has_unacked = true;
      n.issued_w = write.cap_w;
      n.issued_revision = revision;
    });
  }
}

bool Ledger::settled() const { return pending_.empty() && unacked_live_ == 0; }

// ---- NodeSafety --------------------------------------------------------------------------------

NodeSafety::NodeSafety(ProtocolTiming timing, double safe_cap_w, double initial_cap_w, double now_s)
    : timing_(timing), safe_cap_w_(safe_cap_w), cap_w_(initial_cap_w), last_contact_s_(now_s) {
  timing_.validate();
  check_cap(safe_cap_w, "safe cap");
  check_cap(initial_cap_w, "initial cap");
}

void NodeSafety::contact(double sent_at_s) { last_contact_s_ = std::max(last_contact_s_, sent_at_s); }

void NodeSafety::lease_lost(double now_s) {
  (void)now_s;
  fallen_ = true;
  cap_w_ = std::min(cap_w_, safe_cap_w_);
}

std::optional<double> NodeSafety::allocation(Revision revision, double cap_w, double now_s) {
  if (!std::isfinite(cap_w) || cap_w < 0.0) return std::nullopt;
  if (revision < applied_revision_ || (revision == applied_revision_ && !fallen_)) return std::nullopt;
  if (now_s >= deadline_s()) {
    // No contact: only a lower cap is taken; the raise waits for contact and a fresh read.
    fallen_ = true;
    const double lower = std::min({cap_w_, cap_w, safe_cap_w_});
    applied_revision_ = revision;
    if (lower == cap_w_) return std::nullopt;
    cap_w_ = lower;
    return lower;
  }
  cap_w_ = cap_w;
  applied_revision_ = revision;
  fallen_ = false;
  return cap_w;
}

std::optional<double> NodeSafety::tick(double now_s) {
  if (now_s < deadline_s()) return std::nullopt;
  if (fallen_ && cap_w_ <= safe_cap_w_) return std::nullopt;
  fallen_ = true;
  if (cap_w_ <= safe_cap_w_) return std::nullopt;
  cap_w_ = safe_cap_w_;
  return cap_w_;
}

}  // namespace gpucap::cluster
