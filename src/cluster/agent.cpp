#include "gpucap/cluster/agent.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <limits>
#include <vector>

namespace gpucap::cluster {

namespace {

constexpr double kNever = std::numeric_limits<double>::infinity();

}  // namespace

NodeAgent::NodeAgent(Store& store, AgentOptions options, Actuator actuator, double initial_cap_w, double now_s)
    : store_(store),
      options_(std::move(options)),
      keys_(options_.cluster),
      actuator_(std::move(actuator)),
      safety_(options_.timing, options_.safe_cap_w, initial_cap_w, now_s),
      applied_w_(initial_cap_w) {
  check_name(options_.node_id, "node id");
  if (!(options_.apply_latency_s >= 0.0) || !std::isfinite(options_.apply_latency_s)) {
    throw usage_error(fmt::format("apply latency {} s must be >= 0", options_.apply_latency_s));
  }
}

void NodeAgent::log(const std::string& message) {
  if (options_.log) {
    options_.log(message);
  } else {
    spdlog::warn("cluster: node {}: {}", options_.node_id, message);
  }
}

void NodeAgent::set_curve(NodeCurve curve) {
  curve_ = std::move(curve);
  curve_dirty_ = true;
}

double NodeAgent::step(double now_s) {
  if (left_) return kNever;
  try {
    if (!registered_ && curve_ && now_s >= retry_register_s_) try_register(now_s);
    if (registered_ && now_s >= next_keepalive_s_) keep_alive(now_s);
    if (registered_) {
      if (need_resync_) {
        if (!safety_.fallen_back() || now_s < safety_.deadline_s()) resync(now_s);  // only with contact
      } else {
        poll(now_s);
      }
      if (registered_ && curve_dirty_) publish(now_s);
    }
  } catch (const StoreError& e) {
    if (e.kind() == StoreErrorKind::lease_not_found) {
      lose_lease(now_s);
    } else {
      need_resync_ = registered_;  // the watch may have missed events: re-read after contact
    }
  }
  if (const auto fallen = safety_.tick(now_s)) {
    pending_.clear();  // a raise in flight must not land after the fall
    schedule(now_s, *fallen, std::nullopt);
  }
  run_pending(now_s);
  double next = registered_ ? next_keepalive_s_ : (curve_ ? std::max(now_s, retry_register_s_) : kNever);
  if (!safety_.fallen_back()) next = std::min(next, safety_.deadline_s());
  if (!pending_.empty()) next = std::min(next, pending_.front().at_s);
  if (ack_due_) next = std::min(next, now_s + options_.timing.keepalive_period_s);
  return next;
}

void NodeAgent::try_register(double now_s) {
  double holding = applied_w_;
  for (const auto& p : pending_) holding = std::max(holding, p.cap_w);
  const LeaseId lease = store_.grant_lease(options_.timing.lease_ttl_s);
  NodeRecord record{lease, *curve_, options_.safe_cap_w, holding, options_.gpu, options_.model};
  const std::vector<Compare> compares{Compare::absent(keys_.node(options_.node_id))};
  const std::vector<Op> then{PutOp{keys_.node(options_.node_id), to_json(record), lease}};
  const auto result = store_.txn(compares, then);
  if (!result.succeeded) {
    ++refused_;
    retry_register_s_ = now_s + options_.timing.lease_ttl_s / 2.0;
    log(fmt::format("the ID is already registered (a live lease holds it): a duplicate node ID, or this node's "
                    "previous registration has not expired yet; retrying in {:g} s",
                    options_.timing.lease_ttl_s / 2.0));
    store_.revoke_lease(lease);
    return;
  }
  lease_ = lease;
  incarnation_ = lease;
  registration_revision_ = result.revision;
  registered_ = true;
  curve_dirty_ = false;
  safety_ = NodeSafety(options_.timing, options_.safe_cap_w, holding, now_s);
  safety_.contact(now_s);
  next_keepalive_s_ = now_s + options_.timing.keepalive_period_s;
  ack_due_.reset();
  resync(now_s);
}

void NodeAgent::keep_alive(double now_s) {
  const double sent = now_s;
  next_keepalive_s_ = now_s + options_.timing.keepalive_period_s;
  if (!store_.keep_alive(lease_)) {
    lose_lease(now_s);
    return;
  }
  safety_.contact(sent);
  if (safety_.fallen_back()) need_resync_ = true;  // back in contact: re-read the allocation
  if (ack_due_) send_ack(now_s);
}

void NodeAgent::lose_lease(double now_s) {
  log("its lease is gone (expired or revoked): falling to the safe cap and registering again");
  safety_.lease_lost(now_s);
  pending_.clear();
  if (safety_.cap_w() < applied_w_) schedule(now_s, safety_.cap_w(), std::nullopt);
  registered_ = false;
  ack_due_.reset();
  if (watch_ != 0) store_.cancel(watch_);
  watch_ = 0;
  retry_register_s_ = now_s;
}

void NodeAgent::resync(double now_s) {
  if (watch_ != 0) store_.cancel(watch_);
  watch_ = 0;
  const auto current = store_.get(keys_.alloc(options_.node_id));
  for (const auto& kv : current.kvs) handle_alloc(kv, now_s);
  watch_ = store_.watch(keys_.alloc(options_.node_id), current.revision + 1, false);
  need_resync_ = false;
}

void NodeAgent::poll(double now_s) {
  if (watch_ == 0) {
    need_resync_ = true;
    return;
  }
  for (const auto& event : store_.poll(watch_)) {
    if (event.type == EventType::put) handle_alloc(event.kv, now_s);
  }
}

void NodeAgent::handle_alloc(const KeyValue& kv, double now_s) {
  const auto parsed = parse_alloc_record(kv.value);
  if (const auto* problem = std::get_if<std::string>(&parsed)) {
    log(fmt::format("ignoring an allocation it cannot read: {}", *problem));
    return;
  }
  const auto& alloc = std::get<AllocRecord>(parsed);
  if (alloc.incarnation != incarnation_) return;  // a previous incarnation's allocation
  const auto cap = safety_.allocation(kv.mod_revision, alloc.cap_w, now_s);
  if (!cap) return;
  // Out of contact it only lowered on its own: no acknowledgement (the coordinator keeps counting
  // the allocation, which the node goes back to once it has contact).
  schedule(now_s, *cap, safety_.fallen_back() ? std::nullopt : std::optional<Revision>(kv.mod_revision));
}

void NodeAgent::publish(double now_s) {
  (void)now_s;
  NodeRecord record{incarnation_, *curve_, options_.safe_cap_w, applied_w_, options_.gpu, options_.model};
  const std::vector<Compare> compares{Compare::created_at(keys_.node(options_.node_id), registration_revision_)};
  const std::vector<Op> then{PutOp{keys_.node(options_.node_id), to_json(record), lease_}};
  const auto result = store_.txn(compares, then);
  curve_dirty_ = false;
  if (!result.succeeded) lose_lease(now_s);  // our registration is gone
}

void NodeAgent::schedule(double now_s, double cap_w, std::optional<Revision> ack_revision) {
  pending_.push_back({now_s + options_.apply_latency_s, cap_w, ack_revision});
}

void NodeAgent::run_pending(double now_s) {
  while (!pending_.empty() && pending_.front().at_s <= now_s) {
    const auto p = pending_.front();
    pending_.pop_front();
    applied_w_ = p.cap_w;
    actuator_(p.cap_w);
    if (p.ack_revision && registered_) ack_due_ = AckRecord{incarnation_, *p.ack_revision, p.cap_w, false};
  }
  if (ack_due_ && registered_) {
    try {
      send_ack(now_s);
    } catch (const StoreError&) {
      // Retried at the next keep-alive.
    }
  }
}

void NodeAgent::send_ack(double now_s) {
  (void)now_s;
  store_.put(PutOp{keys_.ack(options_.node_id), to_json(*ack_due_), 0});
  ack_due_.reset();
}

void NodeAgent::leave(double now_s) {
  (void)now_s;
  if (left_) return;
  left_ = true;
  pending_.clear();
  applied_w_ = 0.0;
  actuator_(0.0);
  if (!registered_) return;
  try {
    store_.put(PutOp{keys_.ack(options_.node_id), to_json(AckRecord{incarnation_, safety_.applied_revision(), 0.0, true}), 0});
    store_.revoke_lease(lease_);
  } catch (const StoreError& e) {
    log(fmt::format("could not say it is leaving ({}); its lease will expire", e.what()));
  }
  registered_ = false;
}

}  // namespace gpucap::cluster
