#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <unordered_set>

#include "gpucap/cluster/store.hpp"

namespace gpucap::cluster {

// A client of the in-process store: every call forwards to the server, which checks the client's
// connection first.
class MemoryStore::Client final : public Store {
 public:
  Client(MemoryStore& server, ClientOptions options) : server_(server), options_(options) {}
  ~Client() override {
    const auto ids = watches_;
    for (const auto id : ids) cancel_quietly(id);
  }
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  LeaseId grant_lease(double ttl_s) override {
    check();
    return server_.grant(ttl_s);
  }
  bool keep_alive(LeaseId lease) override {
    check();
    return server_.renew(lease);
  }
  void revoke_lease(LeaseId lease) override {
    check();
    server_.revoke(lease, server_.now_s_);
  }
  RangeResult get(std::string_view key) override {
    check();
    return server_.range(key, false);
  }
  RangeResult get_prefix(std::string_view prefix) override {
    check();
    return server_.range(prefix, true);
  }
  Revision put(const PutOp& op) override {
    check();
    const std::vector<Op> ops{op};
    return server_.apply_txn({}, ops, {}).revision;
  }
  TxnResult txn(std::span<const Compare> compares, std::span<const Op> then, std::span<const Op> otherwise) override {
    check();
    return server_.apply_txn(compares, then, otherwise);
  }
  WatchId watch(std::string key, Revision from, bool prefix) override {
    check();
    const auto id = server_.add_watch(options_.tag, options_.watch_delay_s, std::move(key), from, prefix);
    watches_.push_back(id);
    return id;
  }
  std::vector<WatchEvent> poll(WatchId watch) override {
    check();
    try {
      return server_.take(watch);
    } catch (const StoreError& e) {
      if (e.kind() == StoreErrorKind::unavailable) cancel_quietly(watch);  // a broken watch is gone
      throw;
    }
  }
  void cancel(WatchId watch) override { cancel_quietly(watch); }

 private:
  void check() const { server_.require_connected(options_.tag); }
  void cancel_quietly(WatchId id) {
    auto it = server_.watches_.find(id);
    if (it == server_.watches_.end()) return;
    if (it->second.prefix) {
      std::erase(server_.prefix_watches_, id);
    } else if (auto ex = server_.exact_watches_.find(it->second.key); ex != server_.exact_watches_.end()) {
      std::erase(ex->second, id);
      if (ex->second.empty()) server_.exact_watches_.erase(ex);
    }
    if (auto of = server_.watches_of_.find(it->second.tag); of != server_.watches_of_.end()) {
      std::erase(of->second, id);
      if (of->second.empty()) server_.watches_of_.erase(of);
    }
    server_.watches_.erase(it);
    std::erase(watches_, id);
  }

  MemoryStore& server_;
  ClientOptions options_;
  std::vector<WatchId> watches_;
};

MemoryStore::MemoryStore(double now_s, std::size_t history_limit) : now_s_(now_s), history_limit_(history_limit) {}

MemoryStore::~MemoryStore() = default;

std::unique_ptr<Store> MemoryStore::connect(const ClientOptions& options) {
  if (!(options.watch_delay_s >= 0.0) || !std::isfinite(options.watch_delay_s)) {
    throw StoreError(StoreErrorKind::invalid, fmt::format("watch delay {} s must be >= 0", options.watch_delay_s));
  }
  return std::make_unique<Client>(*this, options);
}

void MemoryStore::require_connected(std::uint64_t tag) const {
  if (!connected(tag)) throw StoreError(StoreErrorKind::unavailable, fmt::format("client {} cannot reach the store", tag));
}

bool MemoryStore::connected(std::uint64_t tag) const {
  const auto it = disconnected_.find(tag);
  return it == disconnected_.end() || !it->second;
}

void MemoryStore::set_connected(std::uint64_t tag, bool connected) {
  disconnected_[tag] = !connected;
  if (connected) return;
  const auto it = watches_of_.find(tag);
  if (it == watches_of_.end()) return;
  for (const auto id : it->second) {
    auto& watch = watches_.at(id);
    watch.broken = true;
    watch.queue.clear();
    watch.head = 0;
  }
}

void MemoryStore::advance_to(double now_s) {
  if (!(now_s >= now_s_)) return;  // never back (and NaN ignored)
  while (!deadlines_.empty() && deadlines_.top().first <= now_s) {
    const auto [deadline, id] = deadlines_.top();
    deadlines_.pop();
    const auto it = leases_.find(id);
    if (it == leases_.end() || it->second.deadline_s != deadline) continue;  // renewed or revoked since
    now_s_ = std::max(now_s_, deadline);
    revoke(id, deadline);
  }
  now_s_ = now_s;
}

std::optional<double> MemoryStore::next_lease_deadline() {
  while (!deadlines_.empty()) {
    const auto [deadline, id] = deadlines_.top();
    const auto it = leases_.find(id);
    if (it != leases_.end() && it->second.deadline_s == deadline) return deadline;
    deadlines_.pop();
  }
  return std::nullopt;
}

LeaseId MemoryStore::grant(double ttl_s) {
  if (!(ttl_s > 0.0) || !std::isfinite(ttl_s)) {
    throw StoreError(StoreErrorKind::invalid, fmt::format("lease TTL {} s must be positive", ttl_s));
  }
  const LeaseId id = next_lease_++;
  leases_[id] = Lease{ttl_s, now_s_ + ttl_s, {}};
  deadlines_.emplace(now_s_ + ttl_s, id);
  return id;
}

bool MemoryStore::renew(LeaseId lease) {
  const auto it = leases_.find(lease);
  if (it == leases_.end()) return false;
  it->second.deadline_s = now_s_ + it->second.ttl_s;
  deadlines_.emplace(it->second.deadline_s, lease);
  return true;
}

void MemoryStore::revoke(LeaseId lease, double at_s) {
  const auto it = leases_.find(lease);
  if (it == leases_.end()) return;
  const auto keys = std::move(it->second.keys);
  leases_.erase(it);
  if (keys.empty()) return;
  ++revision_;
  std::vector<WatchEvent> events;
  for (const auto& key : keys) do_erase(key, events);
  publish(events, at_s);
}

RangeResult MemoryStore::range(std::string_view key, bool prefix) const {
  RangeResult result;
  result.revision = revision_;
  if (!prefix) {
    if (const auto it = keys_.find(key); it != keys_.end()) result.kvs.push_back(it->second);
    return result;
  }
  for (auto it = keys_.lower_bound(key); it != keys_.end() && it->first.starts_with(key); ++it) {
    result.kvs.push_back(it->second);
  }
  return result;
}

TxnResult MemoryStore::apply_txn(std::span<const Compare> compares, std::span<const Op> then,
                                 std::span<const Op> otherwise) {
  bool ok = true;
  for (const auto& c : compares) {
    const auto it = keys_.find(c.key);
    const KeyValue absent;
    const KeyValue& kv = it == keys_.end() ? absent : it->second;
    switch (c.target) {
      case Compare::Target::version: ok = kv.version == c.number; break;
      case Compare::Target::create_revision: ok = kv.create_revision == c.number; break;
      case Compare::Target::mod_revision: ok = kv.mod_revision == c.number; break;
      case Compare::Target::value: ok = it != keys_.end() && kv.value == c.value; break;
    }
    if (!ok) break;
  }
  const auto ops = ok ? then : otherwise;
  std::unordered_set<std::string_view> seen;
  for (const auto& op : ops) {
    const std::string& key = std::holds_alternative<PutOp>(op) ? std::get<PutOp>(op).key : std::get<EraseOp>(op).key;
    if (!seen.insert(key).second) {
      throw StoreError(StoreErrorKind::invalid, fmt::format("duplicate key '{}' in one transaction", key));
    }
    if (const auto* put = std::get_if<PutOp>(&op); put != nullptr && put->lease != 0 && !leases_.contains(put->lease)) {
      throw StoreError(StoreErrorKind::lease_not_found, fmt::format("lease {} not found (put of '{}')", put->lease, key));
    }
  }
  if (ops.empty()) return {ok, revision_};
  ++revision_;
  std::vector<WatchEvent> events;
  events.reserve(ops.size());
  for (const auto& op : ops) {
    if (const auto* put = std::get_if<PutOp>(&op)) {
      do_put(*put, events);
    } else {
      do_erase(std::get<EraseOp>(op).key, events);
    }
  }
  publish(events, now_s_);
  return {ok, revision_};
}

void MemoryStore::do_put(const PutOp& op, std::vector<WatchEvent>& events) {
  auto [it, created] = keys_.try_emplace(op.key);
  KeyValue& kv = it->second;
  if (created) {
    kv.key = op.key;
    kv.create_revision = revision_;
    kv.version = 0;
  }
  if (kv.lease != op.lease) {
    if (const auto old = leases_.find(kv.lease); old != leases_.end()) std::erase(old->second.keys, op.key);
    if (op.lease != 0) leases_.at(op.lease).keys.push_back(op.key);
  }
  kv.value = op.value;
  kv.mod_revision = revision_;
  ++kv.version;
  kv.lease = op.lease;
  events.push_back({EventType::put, kv});
}

void MemoryStore::do_erase(const std::string& key, std::vector<WatchEvent>& events) {
  const auto it = keys_.find(key);
  if (it == keys_.end()) return;
  if (const auto lease = leases_.find(it->second.lease); lease != leases_.end()) std::erase(lease->second.keys, key);
  WatchEvent event{EventType::erase, KeyValue{key, {}, 0, revision_, 0, 0}};
  keys_.erase(it);
  events.push_back(std::move(event));
}

bool MemoryStore::matches(const Watch& watch, const std::string& key) const {
  return watch.prefix ? key.starts_with(watch.key) : key == watch.key;
}

void MemoryStore::deliver(Watch& watch, const WatchEvent& event, double at_s) {
  if (watch.broken) return;
  const double when = at_s + watch.delay_s;
  watch.queue.emplace_back(when, event);
  if (hook_) hook_(watch.tag, when);
}

void MemoryStore::publish(std::vector<WatchEvent>& events, double at_s) {
  for (auto& event : events) {
    for (const auto id : prefix_watches_) {
      auto& watch = watches_.at(id);
      if (matches(watch, event.kv.key)) deliver(watch, event, at_s);
    }
    if (const auto it = exact_watches_.find(event.kv.key); it != exact_watches_.end()) {
      for (const auto id : it->second) deliver(watches_.at(id), event, at_s);
    }
    history_.push_back({at_s, std::move(event)});
  }
  // Compaction: keep the newest history_limit_ events.
  if (history_.size() - history_head_ > history_limit_) {
    const auto drop = history_.size() - history_head_ - history_limit_;
    history_head_ += drop;
    compacted_ = history_[history_head_ - 1].event.kv.mod_revision;
    if (history_head_ > history_.size() / 2) {
      history_.erase(history_.begin(), history_.begin() + static_cast<std::ptrdiff_t>(history_head_));
      history_head_ = 0;
    }
  }
}

WatchId MemoryStore::add_watch(std::uint64_t tag, double delay_s, std::string key, Revision from, bool prefix) {
  if (from != 0 && from <= compacted_) {
    throw StoreError(StoreErrorKind::compacted,
                     fmt::format("watch from revision {}: compacted up to {}", from, compacted_));
  }
  const WatchId id = next_watch_++;
  Watch watch{tag, std::move(key), prefix, delay_s, {}, 0, false};
  if (from != 0) {
    for (std::size_t i = history_head_; i < history_.size(); ++i) {
      const auto& logged = history_[i];
      if (logged.event.kv.mod_revision >= from && matches(watch, logged.event.kv.key)) {
        watch.queue.emplace_back(now_s_ + delay_s, logged.event);
      }
    }
    if (!watch.queue.empty() && hook_) hook_(tag, now_s_ + delay_s);
  }
  if (prefix) {
    prefix_watches_.push_back(id);
  } else {
    exact_watches_[watch.key].push_back(id);
  }
  watches_of_[tag].push_back(id);
  watches_.emplace(id, std::move(watch));
  return id;
}

std::vector<WatchEvent> MemoryStore::take(WatchId id) {
  const auto it = watches_.find(id);
  if (it == watches_.end()) throw StoreError(StoreErrorKind::invalid, fmt::format("no watch {}", id));
  auto& watch = it->second;
  if (watch.broken) {
    throw StoreError(StoreErrorKind::unavailable, fmt::format("watch {} on '{}' was cut off", id, watch.key));
  }
  std::vector<WatchEvent> out;
  while (watch.head < watch.queue.size() && watch.queue[watch.head].first <= now_s_) {
    out.push_back(std::move(watch.queue[watch.head].second));
    ++watch.head;
  }
  if (watch.head == watch.queue.size()) {
    watch.queue.clear();
    watch.head = 0;
  } else if (watch.head > 64 && watch.head > watch.queue.size() / 2) {
    watch.queue.erase(watch.queue.begin(), watch.queue.begin() + static_cast<std::ptrdiff_t>(watch.head));
    watch.head = 0;
  }
  return out;
}

}  // namespace gpucap::cluster
