#pragma once
// The key-value store the cluster coordinates through: the part of etcd v3's semantics the
// coordinator and the node agents need, and nothing more — so that the same protocol code runs
// against etcd (over its v3 JSON gateway: /v3/kv/range|put|txn, /v3/lease/grant|keepalive|revoke,
// /v3/watch) and, in the simulator and the tests, against MemoryStore below.
//
// Semantics (etcd's):
//  - Revisions. The store has one revision counter; every write (a put, a delete, a transaction
//    that changes something, a lease expiry that deletes keys) raises it by one, and every key
//    changed by that write carries it as its mod_revision. create_revision is the revision that
//    created the key (since its last deletion); version counts its puts since then (0: absent).
//  - Leases. grant_lease(ttl) returns an id; a key put with a lease is deleted when the lease
//    expires (ttl seconds after its grant or last keep_alive, by the store's clock) or is revoked.
//    keep_alive() returns false when the lease no longer exists.
//  - Transactions. txn(compares, then, otherwise): if every compare holds, the `then` operations
//    run, else the `otherwise` ones — atomically, at one revision.
//  - Watches. watch(key, from, prefix) delivers every event on the key (or on every key under the
//    prefix) at revisions >= from (0: from the next write) in revision order, through poll():
//    a watch is a buffer the caller drains when it runs (a real client fills it from etcd's watch
//    stream on its own thread). A watch whose connection broke throws StoreError(unavailable) from
//    poll() and is cancelled; one asked for revisions already compacted away throws
//    StoreError(compacted). Either way the caller re-reads (get) and watches again from the
//    read's revision + 1: the etcd list-then-watch pattern.
// Every call may throw StoreError(unavailable) when the store cannot be reached; the protocol's
// safety never depends on a call succeeding (protocol.hpp).
//
// Deliberately absent: ranges other than a key or a prefix, deletes by range, leases' TTL queries,
// authentication (the etcd client's business), compaction control.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <queue>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <variant>
#include <vector>

#include "gpucap/core/error.hpp"

namespace gpucap::cluster {

using Revision = std::int64_t;
using LeaseId = std::int64_t;  // 0: no lease
using WatchId = std::int64_t;

struct KeyValue {
  std::string key;
  std::string value;
  Revision create_revision = 0;
  Revision mod_revision = 0;
  std::int64_t version = 0;
  LeaseId lease = 0;
};

struct RangeResult {
  std::vector<KeyValue> kvs;  // sorted by key
  Revision revision = 0;      // the store's revision when it was read
};

enum class EventType { put, erase };

struct WatchEvent {
  EventType type = EventType::put;
  KeyValue kv;  // for an erase: the key, and mod_revision = the revision of the deletion
};

struct Compare {
  enum class Target { version, create_revision, mod_revision, value };
  std::string key;
  Target target = Target::version;
  std::int64_t number = 0;  // version or revision to equal
  std::string value;        // for Target::value

  [[nodiscard]] static Compare absent(std::string key) { return {std::move(key), Target::version, 0, {}}; }
  [[nodiscard]] static Compare created_at(std::string key, Revision revision) {
    return {std::move(key), Target::create_revision, revision, {}};
  }
  [[nodiscard]] static Compare modified_at(std::string key, Revision revision) {
    return {std::move(key), Target::mod_revision, revision, {}};
  }
};

struct PutOp {
  std::string key;
  std::string value;
  LeaseId lease = 0;
};
struct EraseOp {
  std::string key;
};
using Op = std::variant<PutOp, EraseOp>;

struct TxnResult {
  bool succeeded = false;
  Revision revision = 0;  // the store's revision after the transaction
};

enum class StoreErrorKind { unavailable, lease_not_found, compacted, invalid };

class StoreError : public Error {
 public:
  StoreError(StoreErrorKind kind, const std::string& message) : Error(ErrorCode::io, message), kind_(kind) {}
  [[nodiscard]] StoreErrorKind kind() const noexcept { return kind_; }

 private:
  StoreErrorKind kind_;
};

class Store {
 public:
  virtual ~Store() = default;

  [[nodiscard]] virtual LeaseId grant_lease(double ttl_s) = 0;
  [[nodiscard]] virtual bool keep_alive(LeaseId lease) = 0;
  virtual void revoke_lease(LeaseId lease) = 0;

  [[nodiscard]] virtual RangeResult get(std::string_view key) = 0;
  [[nodiscard]] virtual RangeResult get_prefix(std::string_view prefix) = 0;
  virtual Revision put(const PutOp& op) = 0;  // StoreError(lease_not_found) for an unknown lease
  virtual TxnResult txn(std::span<const Compare> compares, std::span<const Op> then,
                        std::span<const Op> otherwise = {}) = 0;

  [[nodiscard]] virtual WatchId watch(std::string key, Revision from, bool prefix) = 0;
  [[nodiscard]] virtual std::vector<WatchEvent> poll(WatchId watch) = 0;
  virtual void cancel(WatchId watch) = 0;
};

// ---- In-process store with a virtual clock ---------------------------------------------------

// The store's server side: keys, leases, revisions, watches. Time is virtual: the owner moves it
// with advance_to(), which expires leases whose deadline passed (each at its deadline, in deadline
// order). Clients (connect()) are Store implementations over it, each with its own watch delivery
// delay and a switch that cuts it off (a network partition).
class MemoryStore {
 public:
  struct ClientOptions {
    double watch_delay_s = 0.0;  // an event reaches this client's watches this long after the write
    std::uint64_t tag = 0;       // handed to the delivery hook
  };

  explicit MemoryStore(double now_s = 0.0, std::size_t history_limit = 100'000);
  ~MemoryStore();
  MemoryStore(const MemoryStore&) = delete;
  MemoryStore& operator=(const MemoryStore&) = delete;

  [[nodiscard]] std::unique_ptr<Store> connect(const ClientOptions& options);
  // A client with no delay, for tests and tools.
  [[nodiscard]] std::unique_ptr<Store> connect() { return connect(ClientOptions{}); }

  // Moves the clock forward (never back) and expires the leases due by then.
  void advance_to(double now_s);
  [[nodiscard]] double now() const { return now_s_; }
  [[nodiscard]] Revision revision() const { return revision_; }
  // The earliest deadline of a live lease (for an event loop), if any.
  [[nodiscard]] std::optional<double> next_lease_deadline();
  // Called for every event queued on a client's watch: (the client's tag, when it can be polled).
  void set_delivery_hook(std::function<void(std::uint64_t tag, double deliver_at_s)> hook) {
    hook_ = std::move(hook);
  }
  // Cuts a client off (every call throws StoreError(unavailable), its watches are cancelled) or
  // reconnects it. `tag` names the client.
  void set_connected(std::uint64_t tag, bool connected);
  [[nodiscard]] bool connected(std::uint64_t tag) const;
  [[nodiscard]] std::size_t key_count() const { return keys_.size(); }

  class Client;

 private:
  struct Lease {
    double ttl_s = 0.0;
    double deadline_s = 0.0;
    std::vector<std::string> keys;
  };
  struct Watch {
    std::uint64_t tag = 0;
    std::string key;
    bool prefix = false;
    double delay_s = 0.0;
    std::vector<std::pair<double, WatchEvent>> queue;  // (deliver at, event)
    std::size_t head = 0;
    bool broken = false;
  };
  struct Logged {
    double time_s = 0.0;
    WatchEvent event;
  };

  friend class Client;
  void require_connected(std::uint64_t tag) const;
  LeaseId grant(double ttl_s);
  bool renew(LeaseId lease);
  void revoke(LeaseId lease, double at_s);
  RangeResult range(std::string_view key, bool prefix) const;
  TxnResult apply_txn(std::span<const Compare> compares, std::span<const Op> then, std::span<const Op> otherwise);
  void do_put(const PutOp& op, std::vector<WatchEvent>& events);
  void do_erase(const std::string& key, std::vector<WatchEvent>& events);
  void publish(std::vector<WatchEvent>& events, double at_s);
  void deliver(Watch& watch, const WatchEvent& event, double at_s);
  WatchId add_watch(std::uint64_t tag, double delay_s, std::string key, Revision from, bool prefix);
  std::vector<WatchEvent> take(WatchId watch);
  [[nodiscard]] bool matches(const Watch& watch, const std::string& key) const;

  double now_s_ = 0.0;
  Revision revision_ = 1;
  LeaseId next_lease_ = 1;
  WatchId next_watch_ = 1;
  std::size_t history_limit_;
  Revision compacted_ = 0;  // history holds revisions > compacted_
  std::map<std::string, KeyValue, std::less<>> keys_;
  std::unordered_map<LeaseId, Lease> leases_;
  std::priority_queue<std::pair<double, LeaseId>, std::vector<std::pair<double, LeaseId>>, std::greater<>> deadlines_;
  std::unordered_map<WatchId, Watch> watches_;
  std::unordered_map<std::string, std::vector<WatchId>> exact_watches_;
  std::vector<WatchId> prefix_watches_;
  std::vector<Logged> history_;
  std::size_t history_head_ = 0;
  std::unordered_map<std::uint64_t, bool> disconnected_;
  std::unordered_map<std::uint64_t, std::vector<WatchId>> watches_of_;  // by client tag
  std::function<void(std::uint64_t, double)> hook_;
};

}  // namespace gpucap::cluster
