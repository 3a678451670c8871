#include "gpucap/cluster/coordinator.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <ctime>
#include <limits>
#include <vector>

namespace gpucap::cluster {

namespace {

constexpr double kNever = std::numeric_limits<double>::infinity();

double thread_cpu_s() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

}  // namespace

Coordinator::Coordinator(Store& store, CoordinatorOptions options)
    : store_(store), options_(std::move(options)), keys_(options_.cluster), ledger_(options_.timing) {
  check_name(options_.id, "coordinator id");
  for (const auto& [value, name] : {std::pair{options_.period_s, "period"}, {options_.plan_interval_s, "plan interval"}}) {
    if (!std::isfinite(value) || value < 0.0) throw usage_error(fmt::format("coordinator {} {} s must be >= 0", name, value));
  }
  if (!std::isfinite(options_.cap_quantum_w) || options_.cap_quantum_w < 0.0 || !std::isfinite(options_.deadband_w) ||
      options_.deadband_w < 0.0) {
    throw usage_error("coordinator cap quantum and deadband must be finite and >= 0");
  }
}

void Coordinator::log(const std::string& message) {
  ++stats_.ignored;
  note(message);
}

void Coordinator::note(const std::string& message) {
  if (options_.log) {
    options_.log(message);
  } else {
    spdlog::warn("cluster: {}", message);
  }
}

double Coordinator::step(double now_s) {
  try {
    if (!leader_) {
      watch_leader(now_s);
      if (now_s >= retry_campaign_s_) campaign(now_s);
      if (!leader_) return std::max(retry_campaign_s_, now_s + options_.timing.keepalive_period_s);
    }
    if (now_s >= next_keepalive_s_ || reload_) {
      next_keepalive_s_ = now_s + options_.timing.keepalive_period_s;
      if (!store_.keep_alive(lease_)) {
        log(fmt::format("coordinator {} lost its leadership (its lease expired)", options_.id));
        resign();
        return now_s;
      }
    }
    if (reload_) {
      // The store was unreachable: events may be lost. Rebuild the ledger from a fresh read (the
      // allocation records carry the bounds, so the rebuilt ledger is as safe as the old one).
      cancel_watches();
      load_state(now_s);
      reload_ = false;
      if (!leader_) return now_s;  // it found another leading (a guarded write failed) and stepped down
    }
    poll_events(now_s);
    if (leader_) retry_waiting_forgets(now_s);
    if (!leader_) return now_s;
    if (const auto reclaim = ledger_.next_reclaim_s(last_round_s_); reclaim && *reclaim <= now_s) dirty_ = true;
    if (dirty_ && budget_w_ && now_s >= last_round_s_ + options_.period_s) reallocate(now_s);
    if (plan_due_ && budget_w_ && now_s >= last_plan_s_ + options_.plan_interval_s) plan(now_s);
  } catch (const StoreError& e) {
    log(fmt::format("coordinator {}: store error: {}; retrying", options_.id, e.what()));
    if (leader_) reload_ = true;
    return now_s + options_.timing.keepalive_period_s;
  }
  double next = next_keepalive_s_;
  if (dirty_) next = std::min(next, std::max(now_s, last_round_s_ + options_.period_s));
  if (plan_due_) next = std::min(next, std::max(now_s, last_plan_s_ + options_.plan_interval_s));
  if (const auto reclaim = ledger_.next_reclaim_s(now_s)) next = std::min(next, *reclaim);
  return next;
}

void Coordinator::campaign(double now_s) {
  lease_ = store_.grant_lease(options_.timing.lease_ttl_s);
  const std::vector<Compare> compares{Compare::absent(keys_.leader())};
  const std::vector<Op> then{PutOp{keys_.leader(), nlohmann::json{{"id", options_.id}}.dump(), lease_}};
  const auto result = store_.txn(compares, then);
  if (!result.succeeded) {
    store_.revoke_lease(lease_);
    lease_ = 0;
    // Another leads. Its key's deletion (its lease expired or was revoked) is watched, so that the
    // campaign starts when the leader is gone rather than at the next retry; the retry stays, for
    // a watch that broke.
    if (leader_watch_ == 0) leader_watch_ = store_.watch(keys_.leader(), result.revision + 1, false);
    retry_campaign_s_ = now_s + options_.timing.lease_ttl_s / 2.0;
    return;
  }
  if (leader_watch_ != 0) {
    store_.cancel(leader_watch_);
    leader_watch_ = 0;
  }
  leader_ = true;
  leader_revision_ = result.revision;
  next_keepalive_s_ = now_s + options_.timing.keepalive_period_s;
  load_state(now_s);
}

void Coordinator::watch_leader(double now_s) {
  if (leader_watch_ == 0) return;
  try {
    for (const auto& event : store_.poll(leader_watch_)) {
      if (event.type == EventType::erase) retry_campaign_s_ = now_s;
    }
  } catch (const StoreError&) {
    leader_watch_ = 0;  // broken (and cancelled): the next failed campaign watches again
    retry_campaign_s_ = now_s;
  }
}

void Coordinator::cancel_watches() {
  for (const auto id : {nodes_watch_, acks_watch_, budget_watch_, forgets_watch_}) {
    if (id != 0) store_.cancel(id);
  }
  nodes_watch_ = acks_watch_ = budget_watch_ = forgets_watch_ = 0;
}

void Coordinator::resign() {
  leader_ = false;
  reload_ = false;
  cancel_watches();
  waiting_forgets_.clear();
  lease_ = 0;
}

void Coordinator::load_state(double now_s) {
  // List, then watch from the list's revision + 1 (the etcd pattern): nothing is missed.
  const auto nodes = store_.get_prefix(keys_.nodes_prefix());
  const auto allocs = store_.get_prefix(keys_.alloc_prefix());
  const auto acks = store_.get_prefix(keys_.ack_prefix());
  const auto budget = store_.get(keys_.budget());
  const auto forgets = store_.get_prefix(keys_.forget_prefix());
  const Revision from =
      std::min({nodes.revision, allocs.revision, acks.revision, budget.revision, forgets.revision}) + 1;
  Ledger fresh(options_.timing);
  ledger_ = std::move(fresh);
  entries_.clear();
  pending_since_.clear();
  waiting_forgets_.clear();
  for (const auto& kv : nodes.kvs) {
    if (const auto id = Keys::id_under(kv.key, keys_.nodes_prefix())) on_node_put(*id, kv);
  }
  // Allocations: issued at their revision, with the bound the previous leader counted while they
  // were in flight; for a node without a live record, a lost node (its timeout starts now: we do not
  // know when its lease expired).
  for (const auto& kv : allocs.kvs) {
    const auto id = Keys::id_under(kv.key, keys_.alloc_prefix());
    if (!id) continue;
    const auto parsed = parse_alloc_record(kv.value);
    if (const auto* problem = std::get_if<std::string>(&parsed)) {
      log(fmt::format("ignoring the allocation record of {}: {}", *id, *problem));
      continue;
    }
    const auto& alloc = std::get<AllocRecord>(parsed);
    const auto* node = ledger_.find(*id);
    if (node != nullptr && node->incarnation != alloc.incarnation) continue;  // a previous incarnation's
    if (node == nullptr) ledger_.register_node(*id, alloc.incarnation, 0.0, alloc.safe_cap_w);
    const std::vector<AllocationWrite> writes{{*id, alloc.incarnation, alloc.bound_w},
                                              {*id, alloc.incarnation, alloc.cap_w}};
    ledger_.issued(writes, kv.mod_revision);
  }
  for (const auto& kv : acks.kvs) {
    if (const auto id = Keys::id_under(kv.key, keys_.ack_prefix())) on_ack(*id, kv, now_s);
  }
  // Nodes with an allocation but no live record are lost (after their acknowledgements, which may
  // lower their bound).
  std::unordered_map<std::string, LeaseId> present;
  for (const auto& kv : nodes.kvs) {
    if (const auto id = Keys::id_under(kv.key, keys_.nodes_prefix())) present.emplace(*id, kv.lease);
  }
  for (const auto& node : std::vector<LedgerNode>(ledger_.nodes())) {
    const auto it = present.find(node.id);
    if (it == present.end() || it->second != node.incarnation) ledger_.lease_expired(node.id, now_s);
  }
  // Requests to forget that came while no coordinator led (or before the last leader applied them).
  for (const auto& kv : forgets.kvs) {
    if (const auto id = Keys::id_under(kv.key, keys_.forget_prefix())) on_forget(*id, kv, now_s);
    if (!leader_) return;  // another leads: resigned
  }
  if (!budget.kvs.empty()) on_budget(budget.kvs.front());
  nodes_watch_ = store_.watch(keys_.nodes_prefix(), from, true);
  acks_watch_ = store_.watch(keys_.ack_prefix(), from, true);
  budget_watch_ = store_.watch(keys_.budget(), from, false);
  // From after its own list, not `from`: a request listed above is applied (and erased) already, and
  // must not come again as an event and be refused as a node nobody counts.
  forgets_watch_ = store_.watch(keys_.forget_prefix(), forgets.revision + 1, true);
  dirty_ = true;
}

void Coordinator::poll_events(double now_s) {
  // The three watches' events in one revision order: a node that leaves acknowledges 0 W and then
  // revokes its lease, and the acknowledgement must be seen before the erase it explains.
  enum class Source { nodes, acks, budget, forgets };
  std::vector<std::pair<Source, WatchEvent>> events;
  for (auto& e : store_.poll(nodes_watch_)) events.emplace_back(Source::nodes, std::move(e));
  for (auto& e : store_.poll(acks_watch_)) events.emplace_back(Source::acks, std::move(e));
  for (auto& e : store_.poll(budget_watch_)) events.emplace_back(Source::budget, std::move(e));
  for (auto& e : store_.poll(forgets_watch_)) events.emplace_back(Source::forgets, std::move(e));
  std::stable_sort(events.begin(), events.end(),
                   [](const auto& a, const auto& b) { return a.second.kv.mod_revision < b.second.kv.mod_revision; });
  for (const auto& [source, event] : events) {
    switch (source) {
      case Source::nodes: {
        const auto id = Keys::id_under(event.kv.key, keys_.nodes_prefix());
        if (!id) {
          log(fmt::format("ignoring key '{}': not a valid node name", event.kv.key));
        } else if (event.type == EventType::put) {
          on_node_put(*id, event.kv);
        } else {
          on_node_erase(*id, now_s);
        }
        break;
      }
      case Source::acks:
        if (event.type != EventType::put) break;
        if (const auto id = Keys::id_under(event.kv.key, keys_.ack_prefix())) on_ack(*id, event.kv, now_s);
        break;
      case Source::budget:
        if (event.type == EventType::put) {
          on_budget(event.kv);
        } else if (budget_w_) {
          log(fmt::format("the budget key was deleted; keeping {:g} W", *budget_w_));
        }
        break;
      case Source::forgets:
        if (event.type != EventType::put) break;  // its own erasure, once applied
        if (const auto id = Keys::id_under(event.kv.key, keys_.forget_prefix())) on_forget(*id, event.kv, now_s);
        break;
    }
    if (!leader_) return;  // resigned: another leads, and reads everything again
  }
}

void Coordinator::on_node_put(const std::string& id, const KeyValue& kv) {
  const auto parsed = parse_node_record(kv.value);
  if (const auto* problem = std::get_if<std::string>(&parsed)) {
    // A node already registered under this lease stays counted, held at its safe cap.
    if (const auto* known = ledger_.find(id); known != nullptr && known->incarnation == kv.lease) {
      entries_[id].curve.reset();
      dirty_ = true;
    }
    log(fmt::format("ignoring node {}: its record cannot be read: {}", id, *problem));
    return;
  }
  const auto& record = std::get<NodeRecord>(parsed);
  if (record.incarnation != kv.lease) {
    log(fmt::format("ignoring node {}: its record names incarnation {} but holds lease {}", id, record.incarnation,
                    kv.lease));
    return;
  }
  const auto* known = ledger_.find(id);
  if (known == nullptr || known->incarnation != record.incarnation) {
    ledger_.register_node(id, record.incarnation, record.cap_in_force_w, record.safe_cap_w);
    pending_since_.erase(id);
  }
  auto& entry = entries_[id];
  entry.leaving = false;
  if (const auto problem = curve_problem(record.curve)) {
    if (entry.curve || known == nullptr || known->incarnation != record.incarnation) {
      log(fmt::format("node {} published a broken curve ({}); holding it at its safe cap until it publishes a "
                      "valid one",
                      id, *problem));
    }
    entry.curve.reset();
  } else {
    entry.curve.emplace(record.curve);
  }
  dirty_ = true;
}

void Coordinator::on_node_erase(const std::string& id, double now_s) {
  const auto entry = entries_.find(id);
  const bool leaving = entry != entries_.end() && entry->second.leaving;
  if (entry != entries_.end()) entries_.erase(entry);
  pending_since_.erase(id);
  if (leaving) {
    const std::vector<Op> cleanup{EraseOp{keys_.alloc(id)}, EraseOp{keys_.ack(id)}};
    if (!store_.txn(leadership_guard(), cleanup).succeeded) {
      log(fmt::format("coordinator {} is no longer the leader; node {}'s records were left to the next", options_.id, id));
      resign();
      return;
    }
    ledger_.left(id);
  } else {
    ledger_.lease_expired(id, now_s);
  }
  dirty_ = true;
}

void Coordinator::on_ack(const std::string& id, const KeyValue& kv, double now_s) {
  const auto parsed = parse_ack_record(kv.value);
  if (const auto* problem = std::get_if<std::string>(&parsed)) {
    log(fmt::format("ignoring the acknowledgement of node {}: {}", id, *problem));
    return;
  }
  const auto& ack = std::get<AckRecord>(parsed);
  const auto* node = ledger_.find(id);
  const auto result = ledger_.acknowledge(id, ack.incarnation, ack.revision, ack.cap_w);
  if (result != AckResult::accepted) {
    // A restarted node's old acknowledgement, or a duplicate ID's; after a failover also the
    // acknowledgements of nodes already gone.
    if (node != nullptr && node->state == NodeState::live) {
      log(fmt::format("ignoring a stale acknowledgement of node {} (incarnation {}, allocation {}; expected "
                      "incarnation {})",
                      id, ack.incarnation, ack.revision, node->incarnation));
    }
    return;
  }
  if (ack.leaving) entries_[id].leaving = true;
  plan_due_ = true;  // a lowered node's acknowledgement makes room for raises
  note_settled(id, now_s);
}

void Coordinator::on_budget(const KeyValue& kv) {
  const auto parsed = parse_budget(kv.value);
  if (const auto* problem = std::get_if<std::string>(&parsed)) {
    log(budget_w_ ? fmt::format("ignoring the budget record: {}; keeping {:g} W", *problem, *budget_w_)
                  : fmt::format("ignoring the budget record: {}; nothing is allocated until a valid one", *problem));
    return;
  }
  budget_w_ = std::get<double>(parsed);
  dirty_ = true;
  plan_due_ = true;
}

void Coordinator::on_forget(const std::string& id, const KeyValue& kv, double now_s) {
  const auto parsed = parse_forget_record(kv.value);
  const auto* node = ledger_.find(id);
  std::string refused;
  if (const auto* problem = std::get_if<std::string>(&parsed)) {
    refused = fmt::format("its record cannot be read: {}", *problem);
  } else if (node == nullptr) {
    refused = "the cluster counts no such node";
  } else if (node->incarnation != std::get<ForgetRecord>(parsed).incarnation) {
    refused = fmt::format("it names incarnation {}, the node's is {} (it registered again)",
                          std::get<ForgetRecord>(parsed).incarnation, node->incarnation);
  } else if (node->state != NodeState::lost) {
    refused = "the node is live (its lease is held)";
  }
  if (!refused.empty()) {
    waiting_forgets_.erase(id);
    log(fmt::format("ignoring the request to forget node {}: {}", id, refused));
    auto unchanged = leadership_guard();
    unchanged.push_back(Compare::modified_at(kv.key, kv.mod_revision));
    const std::vector<Op> erase{EraseOp{kv.key}};
    (void)store_.txn(unchanged, erase);  // failed: the request changed (its event comes) or another leads
    return;
  }
  // A node that was only cut off holds up to its bound until the safe-cap timeout, then its safe
  // cap: the request waits for that moment (the one at which the coordinator would count the node
  // at its safe cap anyway), so that the operator's word risks no more than that safe cap.
  const double reclaim_s = node->lost_at_s + options_.timing.safe_cap_timeout_s;
  if (now_s < reclaim_s) {
    if (waiting_forgets_.insert_or_assign(id, kv).second) {
      note(fmt::format("node {} will be forgotten when its safe-cap timeout has passed, in {:.1f} s", id, reclaim_s - now_s));
    }
    return;
  }
  waiting_forgets_.erase(id);
  const std::vector<Op> erase{EraseOp{keys_.alloc(id)}, EraseOp{keys_.ack(id)}, EraseOp{kv.key}};
  if (!store_.txn(leadership_guard(), erase).succeeded) {
    log(fmt::format("coordinator {} is no longer the leader; node {} was not forgotten", options_.id, id));
    resign();
    return;
  }
  ledger_.forget(id);
  entries_.erase(id);
  pending_since_.erase(id);
  ++stats_.forgotten;
  note(fmt::format("node {} forgotten at an operator's request: the power it was counted for goes to the others", id));
  dirty_ = true;
}

// Requests that wait for their node's safe-cap timeout: applied once it has passed (or refused, if
// the node came back meanwhile).
void Coordinator::retry_waiting_forgets(double now_s) {
  std::vector<std::pair<std::string, KeyValue>> due;
  for (const auto& [id, kv] : waiting_forgets_) {
    const auto* node = ledger_.find(id);
    if (node == nullptr || node->state != NodeState::lost ||
        now_s >= node->lost_at_s + options_.timing.safe_cap_timeout_s) {
      due.emplace_back(id, kv);
    }
  }
  for (const auto& [id, kv] : due) {
    if (!leader_) return;
    on_forget(id, kv, now_s);
  }
}

void Coordinator::reallocate(double now_s) {
  const double cpu0 = thread_cpu_s();
  dirty_ = false;
  last_round_s_ = now_s;
  ++stats_.rounds;
  std::vector<const PreparedCurve*> curves;
  std::vector<const LedgerNode*> serving;
  double held = ledger_.lost_w(now_s);
  std::vector<std::pair<std::string, double>> frozen;
  for (const auto& node : ledger_.nodes()) {
    if (node.state != NodeState::live) continue;
    const auto entry = entries_.find(node.id);
    if (entry == entries_.end() || !entry->second.curve || entry->second.leaving) {
      const double hold = std::min(node.intended_w(), node.safe_cap_w);
      held += hold;
      frozen.emplace_back(node.id, hold);
      continue;
    }
    curves.push_back(&*entry->second.curve);
    serving.push_back(&node);
  }
  const double available = std::max(0.0, *budget_w_ - held);
  const auto allocation = allocate(available, curves, options_.policy);
  for (const auto& [id, hold] : frozen) ledger_.set_target(id, hold);
  // Targets: rounded down, small changes skipped (the node keeps what it was told) as long as the
  // sum stays within what was available.
  std::vector<double> targets(serving.size());
  std::vector<std::size_t> skipped_lowers;
  double sum = 0.0;
  for (std::size_t i = 0; i < serving.size(); ++i) {
    double target = allocation.caps_w[i];
    if (options_.cap_quantum_w > 0.0 && target > 0.0) {
      target = std::max(curves[i]->min_cap_w(), std::floor(target / options_.cap_quantum_w) * options_.cap_quantum_w);
    }
    const double told = serving[i]->intended_w();
    const bool in_range = told == 0.0 || (told >= curves[i]->min_cap_w() && told <= curves[i]->max_cap_w());
    if (target != told && std::abs(target - told) < options_.deadband_w && in_range && (target > 0.0) == (told > 0.0)) {
      if (target < told) skipped_lowers.push_back(i);
      target = told;
    }
    targets[i] = target;
    sum += target;
  }
  if (sum > available) {
    std::stable_sort(skipped_lowers.begin(), skipped_lowers.end(), [&](std::size_t a, std::size_t b) {
      return targets[a] - allocation.caps_w[a] > targets[b] - allocation.caps_w[b];
    });
    for (const auto i : skipped_lowers) {
      if (sum <= available) break;
      const double exact = options_.cap_quantum_w > 0.0
                               ? std::max(curves[i]->min_cap_w(),
                                          std::floor(allocation.caps_w[i] / options_.cap_quantum_w) * options_.cap_quantum_w)
                               : allocation.caps_w[i];
      sum -= targets[i] - exact;
      targets[i] = exact;
    }
  }
  for (std::size_t i = 0; i < serving.size(); ++i) {
    const auto& node = *serving[i];
    if (std::abs(targets[i] - node.intended_w()) > 1e-6 && !pending_since_.contains(node.id)) {
      pending_since_.emplace(node.id, now_s);
    }
    ledger_.set_target(node.id, targets[i]);
  }
  stats_.last_round_value = allocation.value;
  stats_.last_round_nodes = serving.size();
  plan_due_ = true;
  const double cpu = thread_cpu_s() - cpu0;
  stats_.last_round_cpu_s = cpu;
  stats_.max_round_cpu_s = std::max(stats_.max_round_cpu_s, cpu);
}

void Coordinator::plan(double now_s) {
  plan_due_ = false;
  last_plan_s_ = now_s;
  const auto writes = ledger_.plan(*budget_w_, now_s);
  if (writes.empty()) return;
  std::vector<Op> puts;
  puts.reserve(writes.size());
  for (const auto& write : writes) {
    const auto* node = ledger_.find(write.id);
    const AllocRecord record{write.cap_w, write.incarnation, node->safe_cap_w, std::max(node->live_bound_w(), write.cap_w)};
    puts.push_back(PutOp{keys_.alloc(write.id), to_json(record), 0});
  }
  const auto result = store_.txn(leadership_guard(), puts);
  if (!result.succeeded) {
    log(fmt::format("coordinator {} is no longer the leader; its allocation was not written", options_.id));
    resign();
    return;
  }
  ledger_.issued(writes, result.revision);
  ++stats_.plans;
  stats_.writes += writes.size();
}

// Every write of the leader's is guarded by this: its leader key is still the one it created.
std::vector<Compare> Coordinator::leadership_guard() const {
  return {Compare::created_at(keys_.leader(), leader_revision_)};
}

void Coordinator::note_settled(const std::string& id, double now_s) {
  const auto it = pending_since_.find(id);
  if (it == pending_since_.end()) return;
  const auto* node = ledger_.find(id);
  if (node == nullptr || node->has_unacked || !node->target_w || std::abs(*node->target_w - node->acked_w) > 1e-6) return;
  const double since = it->second;
  pending_since_.erase(it);
  if (on_settled_) on_settled_(id, since, now_s);
}

}  // namespace gpucap::cluster
