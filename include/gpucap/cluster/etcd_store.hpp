#pragma once
// The cluster's Store (store.hpp) over a real etcd v3, through etcd's JSON gateway (grpc-gateway:
// POST /v3/kv/range|put|txn, /v3/lease/grant|keepalive|revoke, /v3/watch), with the HTTP library
// gpucap already uses (cpp-httplib). Why the gateway and not gRPC: docs/cluster.md, "etcd client".
//
// Endpoints. Given several member URLs (one etcd cluster), every call goes to the member that last
// answered; on a connection failure, a timeout or an answer that says the member cannot serve
// (no leader, shutting down: gRPC code 14 / HTTP 503) it tries the next, once round the list, and
// only then throws StoreError(unavailable). A call never half-applies on our side: either etcd
// answered (and we report what it said) or we throw. A write whose answer was lost may still have
// been applied by etcd (the usual RPC ambiguity); the protocol is built for that (protocol.hpp).
//
// Watches. Each watch is a streaming POST /v3/watch on its own thread: the gateway sends one JSON
// object per line; events go to a buffer that poll() drains. A stream that breaks (the member died,
// the connection dropped) makes poll() throw StoreError(unavailable), one whose start revision was
// compacted StoreError(compacted); the caller re-reads and watches again (the list-then-watch
// pattern). cancel() closes the stream and joins its thread.
//
// Sizes and times: every unary call has a connect and a read timeout (request_timeout_s); a watch
// stream has a connect timeout and no read timeout (it is silent when nothing changes); a watch
// line longer than max_watch_line_bytes breaks the watch instead of growing a buffer without bound.

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpucap/cluster/store.hpp"
#include "gpucap/core/server_url.hpp"

namespace gpucap::cluster {

struct EtcdOptions {
  double request_timeout_s = 2.0;  // connect + read, per member tried
  std::size_t max_watch_line_bytes = 16u << 20;
  // TLS, for https:// members (etcd's --cert-file): the CA that signed their certificates (empty:
  // the system's), and this client's certificate and key for a member that asks for one
  // (--client-cert-auth). The members' names are checked against their certificates.
  std::string ca_file;
  std::string cert_file;
  std::string key_file;
};

// "http://h1:2379,http://h2:2379": the member URLs, each checked (Error(usage) naming a bad one).
[[nodiscard]] std::vector<ServerUrl> parse_etcd_endpoints(std::string_view list);

// The checks EtcdStore's constructor makes (below), without a store: a program that connects
// later (a serve node, after its model is loaded) refuses bad options before it starts anything.
void check_etcd_options(const std::vector<ServerUrl>& endpoints, const EtcdOptions& options);

class EtcdStore final : public Store {
 public:
  // Error(usage) for TLS options that cannot work: a file that cannot be read, or loaded as a PEM
  // certificate or key; a certificate without its key or a key without its certificate; TLS files
  // with no https:// member.
  EtcdStore(std::vector<ServerUrl> endpoints, EtcdOptions options = {});
  ~EtcdStore() override;
  EtcdStore(const EtcdStore&) = delete;
  EtcdStore& operator=(const EtcdStore&) = delete;

  [[nodiscard]] LeaseId grant_lease(double ttl_s) override;
  [[nodiscard]] bool keep_alive(LeaseId lease) override;
  void revoke_lease(LeaseId lease) override;

  [[nodiscard]] RangeResult get(std::string_view key) override;
  [[nodiscard]] RangeResult get_prefix(std::string_view prefix) override;
  Revision put(const PutOp& op) override;
  TxnResult txn(std::span<const Compare> compares, std::span<const Op> then,
                std::span<const Op> otherwise = {}) override;

  [[nodiscard]] WatchId watch(std::string key, Revision from, bool prefix) override;
  [[nodiscard]] std::vector<WatchEvent> poll(WatchId watch) override;
  void cancel(WatchId watch) override;

  // The member that answered last, for logs ("http://127.0.0.1:2379").
  [[nodiscard]] std::string current_endpoint() const;

  class WatchStream;  // one streaming watch (etcd_store.cpp)

 private:
  // POSTs `body` to `path` on the members in turn; the answer's JSON, or StoreError.
  nlohmann::json call(const std::string& path, const nlohmann::json& body);

  std::vector<ServerUrl> endpoints_;
  EtcdOptions options_;
  mutable std::mutex mutex_;  // guards current_, watches_, next_watch_
  std::size_t current_ = 0;
  WatchId next_watch_ = 1;
  std::unordered_map<WatchId, std::unique_ptr<WatchStream>> watches_;
};

// Base64 (RFC 4648, with padding) as etcd's JSON gateway encodes keys and values; decode throws
// StoreError(invalid) on text that is not base64.
[[nodiscard]] std::string base64_encode(std::string_view bytes);
[[nodiscard]] std::string base64_decode(std::string_view text);

// etcd's answers, decoded apart from HTTP: what EtcdStore makes of each body it reads (and what
// tests/fuzz/etcd_answer_fuzz.cpp feeds any bytes). An answer etcd (or whatever answers in its
// place) got wrong is a StoreError(invalid) naming it; nothing else is thrown.
namespace etcd_wire {

// The JSON object of a 2xx answer's body; nullopt for a body that is not one.
[[nodiscard]] std::optional<nlohmann::json> parse_answer(std::string_view body);
// An int64 field as the gateway writes them (a string, or a number; absent or null: 0).
[[nodiscard]] std::int64_t int64_of(const nlohmann::json& object, const char* key);
// The answer's header.revision (0 when it has none).
[[nodiscard]] Revision header_revision(const nlohmann::json& answer);
[[nodiscard]] KeyValue key_value_of(const nlohmann::json& kv);
// POST /v3/kv/range, /v3/lease/grant (StoreError(unavailable) when it granted none),
// /v3/lease/keepalive (whether the lease lives), /v3/kv/txn.
[[nodiscard]] RangeResult range_result(const nlohmann::json& answer);
[[nodiscard]] LeaseId granted_lease(const nlohmann::json& answer);
[[nodiscard]] bool lease_alive(const nlohmann::json& answer);
[[nodiscard]] TxnResult txn_result(const nlohmann::json& answer);

// What an error answer (a status outside 2xx) means for the caller: a member that cannot serve is
// worth another try on the next member; anything else is etcd's final word.
struct Failure {
  bool try_next = false;
  StoreErrorKind kind = StoreErrorKind::unavailable;
  std::string message;
};
[[nodiscard]] Failure failure_of(int http_status, const std::string& body);

// One line of a watch stream: its events, or how the stream ends (a line that is not a watch
// answer ends it too). Never throws: it runs on the stream's own thread.
struct WatchEnd {
  StoreErrorKind kind = StoreErrorKind::unavailable;
  std::string message;
};
struct WatchLine {
  std::vector<WatchEvent> events;
  std::optional<WatchEnd> end;
};
[[nodiscard]] WatchLine watch_line(std::string_view line);

}  // namespace etcd_wire

}  // namespace gpucap::cluster
