#include "gpucap/cluster/etcd_store.hpp"

#include <fmt/format.h>
#include <httplib.h>
#include <openssl/evp.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <optional>
#include <thread>

#include "etcd_tls.hpp"
#include "gpucap/cluster/protocol.hpp"
#include "gpucap/core/text.hpp"

namespace gpucap::cluster {
namespace {

using detail::check_tls;
using detail::member_client;
using detail::NoSigpipe;

// gRPC status codes the gateway puts in an error answer's "code".
constexpr int kGrpcInvalidArgument = 3;
constexpr int kGrpcNotFound = 5;
constexpr int kGrpcOutOfRange = 11;

// The smallest key above every key with this prefix (etcd's range_end for a prefix); "\0" (every
// key) for a prefix of 0xff bytes only.
std::string prefix_end(std::string_view prefix) {
  std::string end(prefix);
  while (!end.empty()) {
    auto& last = reinterpret_cast<unsigned char&>(end.back());
    if (last < 0xff) {
      ++last;
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');
}

nlohmann::json range_request(std::string_view key, bool prefix) {
  nlohmann::json request{{"key", base64_encode(key)}};
  if (prefix) request["range_end"] = base64_encode(prefix_end(key));
  return request;
}

nlohmann::json compare_json(const Compare& compare) {
  nlohmann::json out{{"key", base64_encode(compare.key)}, {"result", "EQUAL"}};
  switch (compare.target) {
    case Compare::Target::version:
      out["target"] = "VERSION";
      out["version"] = std::to_string(compare.number);
      break;
    case Compare::Target::create_revision:
      out["target"] = "CREATE";
      out["create_revision"] = std::to_string(compare.number);
      break;
    case Compare::Target::mod_revision:
      out["target"] = "MOD";
      out["mod_revision"] = std::to_string(compare.number);
      break;
    case Compare::Target::value:
      out["target"] = "VALUE";
      out["value"] = base64_encode(compare.value);
      break;
  }
  return out;
}

nlohmann::json put_json(const PutOp& op) {
  nlohmann::json out{{"key", base64_encode(op.key)}, {"value", base64_encode(op.value)}};
  if (op.lease != 0) out["lease"] = std::to_string(op.lease);
  return out;
}

nlohmann::json op_json(const Op& op) {
  if (const auto* put = std::get_if<PutOp>(&op)) return {{"request_put", put_json(*put)}};
  return {{"request_delete_range", {{"key", base64_encode(std::get<EraseOp>(op).key)}}}};
}

nlohmann::json ops_json(std::span<const Op> ops) {
  nlohmann::json out = nlohmann::json::array();
  for (const Op& op : ops) out.push_back(op_json(op));
  return out;
}

void set_timeouts(httplib::Client& client, double connect_s, double read_s) {
  const auto split = [](double seconds) {
    const auto whole = static_cast<time_t>(std::floor(seconds));
    return std::pair{whole, static_cast<time_t>((seconds - static_cast<double>(whole)) * 1e6)};
  };
  const auto [connect_whole, connect_micro] = split(connect_s);
  const auto [read_whole, read_micro] = split(read_s);
  client.set_connection_timeout(connect_whole, connect_micro);
  client.set_read_timeout(read_whole, read_micro);
  client.set_write_timeout(read_whole, read_micro);
}

// One POST's answer. etcd's gateway ends an error answer with an HTTP trailer, which cpp-httplib
// 0.11 does not parse (it reports a read error after the body): the status line and the body came
// before it, so an answer with a status and a JSON body counts as answered.
struct Answer {
  std::optional<int> status;  // none: no answer
  std::string body;
  httplib::Error transport_error = httplib::Error::Success;  // why there was no answer
};

Answer post(httplib::Client& client, const std::string& path, const std::string& body) {
  httplib::Request request;
  request.method = "POST";
  request.path = path;
  request.body = body;
  request.set_header("Content-Type", "application/json");
  Answer answer;
  request.content_receiver = [&answer](const char* data, std::size_t size, std::uint64_t, std::uint64_t) {
    answer.body.append(data, size);
    return true;
  };
  httplib::Response response;
  auto error = httplib::Error::Success;
  const bool sent = client.send(request, response, error);
  const bool error_answer_before_its_trailer =
      !sent && error == httplib::Error::Read && response.status >= 400 &&
      nlohmann::json::parse(answer.body, nullptr, /*allow_exceptions=*/false).is_object();
  if (sent || error_answer_before_its_trailer) {
    answer.status = response.status;
  } else {
    answer.transport_error = error;
  }
  return answer;
}

}  // namespace

std::string base64_encode(std::string_view bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3) + 1, '\0');
  const int written = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                      reinterpret_cast<const unsigned char*>(bytes.data()), static_cast<int>(bytes.size()));
  out.resize(static_cast<std::size_t>(written));
  return out;
}

std::string base64_decode(std::string_view text) {
  if (text.size() % 4 != 0) {
    throw StoreError(StoreErrorKind::invalid, fmt::format("etcd answered text that is not base64: {}", text.substr(0, 80)));
  }
  std::string out(3 * (text.size() / 4), '\0');
  const int written = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                      reinterpret_cast<const unsigned char*>(text.data()), static_cast<int>(text.size()));
  if (written < 0) {
    throw StoreError(StoreErrorKind::invalid, fmt::format("etcd answered text that is not base64: {}", text.substr(0, 80)));
  }
  // EVP_DecodeBlock counts the padding as zero bytes: drop one per '='.
  std::size_t padding = 0;
  for (auto it = text.rbegin(); it != text.rend() && *it == '=' && padding < 2; ++it) ++padding;
  out.resize(static_cast<std::size_t>(written) - padding);
  return out;
}

std::vector<ServerUrl> parse_etcd_endpoints(std::string_view list) {
  std::vector<ServerUrl> endpoints;
  for (const auto item : split(list, ',')) {
    const auto url = trim(item);
    if (url.empty()) throw usage_error(fmt::format("--etcd '{}': an empty URL in the list", list));
    endpoints.push_back(parse_server_url(url));
  }
  if (endpoints.empty()) throw usage_error("--etcd: expected one or more URLs, e.g. http://127.0.0.1:2379");
  return endpoints;
}

// ---- etcd's answers, decoded (etcd_store.hpp, etcd_wire) ---------------------------------------

namespace etcd_wire {

// etcd's JSON gateway writes int64 fields as strings and leaves out zeros and falses.
std::int64_t int64_of(const nlohmann::json& object, const char* key) {
  if (!object.is_object()) return 0;
  const auto found = object.find(key);
  if (found == object.end() || found->is_null()) return 0;
  if (found->is_number_integer()) return found->get<std::int64_t>();
  if (found->is_string()) {
    try {
      return std::stoll(found->get<std::string>());
    } catch (const std::exception&) {
    }
  }
  throw StoreError(StoreErrorKind::invalid, fmt::format("etcd answered a {} that is not an integer: {}", key, found->dump()));
}

namespace {

std::string bytes_of(const nlohmann::json& object, const char* key) {
  if (!object.is_object() || !object.contains(key)) return {};
  return base64_decode(object.at(key).get<std::string>());
}

// An answer with the gateway's shape but not its types (a key that is not a string, a
// "succeeded" that is not a bool): StoreError(invalid), as for anything else etcd got wrong,
// never nlohmann's exception (the agents and the coordinator catch StoreError).
template <typename Decode>
auto decoded(const char* what, Decode&& decode) -> decltype(decode()) {
  try {
    return decode();
  } catch (const nlohmann::json::exception& e) {
    throw StoreError(StoreErrorKind::invalid, fmt::format("etcd answered {} that gpucap cannot read: {}", what, e.what()));
  }
}

}  // namespace

Revision header_revision(const nlohmann::json& answer) {
  return answer.contains("header") ? int64_of(answer.at("header"), "revision") : 0;
}

KeyValue key_value_of(const nlohmann::json& kv) {
  return decoded("a key-value", [&kv] {
    KeyValue out;
    out.key = bytes_of(kv, "key");
    out.value = bytes_of(kv, "value");
    out.create_revision = int64_of(kv, "create_revision");
    out.mod_revision = int64_of(kv, "mod_revision");
    out.version = int64_of(kv, "version");
    out.lease = int64_of(kv, "lease");
    return out;
  });
}

std::optional<nlohmann::json> parse_answer(std::string_view body) {
  auto answer = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (!answer.is_object()) return std::nullopt;
  return answer;
}

RangeResult range_result(const nlohmann::json& answer) {
  RangeResult out;
  out.revision = header_revision(answer);
  for (const auto& kv : answer.value("kvs", nlohmann::json::array())) out.kvs.push_back(key_value_of(kv));
  return out;
}

LeaseId granted_lease(const nlohmann::json& answer) {
  const LeaseId id = int64_of(answer, "ID");
  if (id == 0) throw StoreError(StoreErrorKind::unavailable, "etcd granted no lease: " + answer.dump());
  return id;
}

bool lease_alive(const nlohmann::json& answer) {
  return int64_of(answer.value("result", nlohmann::json::object()), "TTL") > 0;
}

TxnResult txn_result(const nlohmann::json& answer) {
  return decoded("a transaction", [&answer] { return TxnResult{answer.value("succeeded", false), header_revision(answer)}; });
}

Failure failure_of(int http_status, const std::string& body) {
  const auto parsed = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  const int code = parsed.is_object() && parsed.contains("code") && parsed.at("code").is_number_integer()
                       ? parsed.at("code").get<int>()
                       : -1;
  std::string message = parsed.is_object() && parsed.contains("message") && parsed.at("message").is_string()
                            ? parsed.at("message").get<std::string>()
                            : body.substr(0, 200);
  if (code == kGrpcNotFound && message.find("lease not found") != std::string::npos) {
    return {false, StoreErrorKind::lease_not_found, message};
  }
  if (code == kGrpcOutOfRange && message.find("compacted") != std::string::npos) {
    return {false, StoreErrorKind::compacted, message};
  }
  if (code == kGrpcInvalidArgument || (http_status >= 400 && http_status < 500 && code != -1)) {
    return {false, StoreErrorKind::invalid, message};
  }
  return {true, StoreErrorKind::unavailable, fmt::format("HTTP {}: {}", http_status, message)};
}

namespace {

WatchLine decode_watch_line(std::string_view line) {
  WatchLine out;
  const auto end_with = [&out](StoreErrorKind kind, std::string message) {
    out.end = WatchEnd{kind, std::move(message)};
    return out;
  };
  if (line.find_first_not_of(" \r\t") == std::string_view::npos) return out;
  const auto message = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (!message.is_object()) return end_with(StoreErrorKind::unavailable, "etcd watch stream sent a line that is not JSON");
  if (message.contains("error")) {
    return end_with(StoreErrorKind::unavailable, fmt::format("etcd watch error: {}", message.at("error").dump()));
  }
  const auto& result = message.value("result", nlohmann::json::object());
  if (int64_of(result, "compact_revision") != 0) {
    return end_with(StoreErrorKind::compacted,
                    fmt::format("etcd compacted the watch's revisions up to {}", int64_of(result, "compact_revision")));
  }
  if (result.value("canceled", false)) return end_with(StoreErrorKind::unavailable, "etcd canceled the watch");
  for (const auto& event : result.value("events", nlohmann::json::array())) {
    WatchEvent e;
    e.type = event.value("type", std::string("PUT")) == "DELETE" ? EventType::erase : EventType::put;
    e.kv = key_value_of(event.value("kv", nlohmann::json::object()));
    out.events.push_back(std::move(e));
  }
  return out;
}

}  // namespace

WatchLine watch_line(std::string_view line) {
  // On the stream's thread an exception would end the process: a line that cannot be read ends
  // the stream instead (its events with it), and the caller re-reads and watches again.
  try {
    return decode_watch_line(line);
  } catch (const std::exception& e) {
    WatchLine out;
    out.end = WatchEnd{StoreErrorKind::unavailable, fmt::format("etcd watch stream sent a line gpucap cannot read: {}", e.what())};
    return out;
  }
}

}  // namespace etcd_wire

// ---- Watch streams --------------------------------------------------------------------------

class EtcdStore::WatchStream {
 public:
  WatchStream(const ServerUrl& endpoint, nlohmann::json create_request, const EtcdOptions& options)
      : client_(member_client(endpoint, options)), max_line_bytes_(options.max_watch_line_bytes) {
    // No read timeout: a watch is silent while nothing changes. A dead member closes the stream.
    set_timeouts(*client_, options.request_timeout_s, 365.0 * 24 * 3600);
    thread_ = std::thread([this, path = endpoint.path_prefix + "/v3/watch",
                           body = nlohmann::json{{"create_request", std::move(create_request)}}.dump()] {
      run(path, body);
    });
  }

  ~WatchStream() {
    const NoSigpipe no_sigpipe;  // stop() may write a TLS close_notify to a member that has gone
    stopping_ = true;
    // stop() shuts the socket a blocked read waits on; a stream still connecting has no socket to
    // shut yet, so it is stopped again until the thread says it has ended.
    while (!finished_) {
      client_->stop();
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    if (thread_.joinable()) thread_.join();
    client_.reset();  // while SIGPIPE is held: a TLS client's end writes close_notify
  }
  WatchStream(const WatchStream&) = delete;
  WatchStream& operator=(const WatchStream&) = delete;

  // The events buffered so far; throws once the stream has ended and its events were taken.
  std::vector<WatchEvent> take() {
    std::lock_guard lock(mutex_);
    if (events_.empty() && ended_) throw StoreError(end_kind_, end_message_);
    return std::exchange(events_, {});
  }

 private:
  void run(const std::string& path, const std::string& body) {
    const NoSigpipe no_sigpipe;
    httplib::Request request;
    request.method = "POST";
    request.path = path;
    request.body = body;
    request.set_header("Content-Type", "application/json");
    request.content_receiver = [this](const char* data, std::size_t size, std::uint64_t, std::uint64_t) {
      return !stopping_ && on_bytes(std::string_view(data, size));
    };
    if (!stopping_) {
      const auto result = client_->send(request);
      std::lock_guard lock(mutex_);
      if (!ended_) {
        ended_ = true;
        end_message_ = result ? fmt::format("etcd watch stream ended (HTTP {})", result->status)
                              : fmt::format("etcd watch stream broke ({})", httplib::to_string(result.error()));
      }
    }
    finished_ = true;
  }

  // One JSON object per line; a partial line waits for the rest.
  bool on_bytes(std::string_view bytes) {
    pending_.append(bytes);
    std::size_t start = 0;
    for (auto end = pending_.find('\n'); end != std::string::npos; end = pending_.find('\n', start)) {
      if (!on_line(std::string_view(pending_).substr(start, end - start))) return false;
      start = end + 1;
    }
    pending_.erase(0, start);
    if (pending_.size() > max_line_bytes_) return end_with(StoreErrorKind::unavailable, "etcd watch line too long");
    return true;
  }

  bool on_line(std::string_view line) {
    auto decoded = etcd_wire::watch_line(line);
    if (decoded.end) return end_with(decoded.end->kind, std::move(decoded.end->message));
    std::lock_guard lock(mutex_);
    for (auto& event : decoded.events) events_.push_back(std::move(event));
    return true;
  }

  bool end_with(StoreErrorKind kind, std::string message) {
    std::lock_guard lock(mutex_);
    ended_ = true;
    end_kind_ = kind;
    end_message_ = std::move(message);
    return false;
  }

  std::unique_ptr<httplib::Client> client_;
  std::size_t max_line_bytes_;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> finished_{false};  // run() has returned
  std::string pending_;  // touched by the stream's thread only
  std::mutex mutex_;     // guards what follows
  std::vector<WatchEvent> events_;
  bool ended_ = false;
  StoreErrorKind end_kind_ = StoreErrorKind::unavailable;
  std::string end_message_;
  std::thread thread_;  // last: starts once everything above exists
};

// ---- The store --------------------------------------------------------------------------------

void check_etcd_options(const std::vector<ServerUrl>& endpoints, const EtcdOptions& options) {
  if (endpoints.empty()) throw usage_error("etcd: no endpoint given");
  if (!(options.request_timeout_s > 0.0)) throw usage_error("etcd: the request timeout must be positive");
  check_tls(endpoints, options);
}

EtcdStore::EtcdStore(std::vector<ServerUrl> endpoints, EtcdOptions options)
    : endpoints_(std::move(endpoints)), options_(options) {
  check_etcd_options(endpoints_, options_);
}

EtcdStore::~EtcdStore() = default;

std::string EtcdStore::current_endpoint() const {
  std::lock_guard lock(mutex_);
  return endpoints_[current_].text;
}

nlohmann::json EtcdStore::call(const std::string& path, const nlohmann::json& body) {
  std::size_t first = 0;
  {
    std::lock_guard lock(mutex_);
    first = current_;
  }
  const auto text = body.dump();
  std::vector<std::string> failures;
  for (std::size_t tried = 0; tried < endpoints_.size(); ++tried) {
    const std::size_t index = (first + tried) % endpoints_.size();
    const ServerUrl& endpoint = endpoints_[index];
    const NoSigpipe no_sigpipe;  // for the client's whole life: TLS writes close_notify when it goes
    const auto client = member_client(endpoint, options_);
    set_timeouts(*client, options_.request_timeout_s, options_.request_timeout_s);
    const Answer result = post(*client, endpoint.path_prefix + path, text);
    if (!result.status) {
      const bool tls = endpoint.scheme_host_port.starts_with("https://");
      failures.push_back(fmt::format("{}: {}{}", endpoint.text, httplib::to_string(result.transport_error),
                                     tls ? detail::tls_hint(result.transport_error, options_) : ""));
      continue;
    }
    if (*result.status >= 200 && *result.status < 300) {
      auto answer = etcd_wire::parse_answer(result.body);
      if (!answer) {
        throw StoreError(StoreErrorKind::invalid,
                         fmt::format("etcd {} answered {} with a body that is not JSON", endpoint.text, path));
      }
      std::lock_guard lock(mutex_);
      current_ = index;
      return std::move(*answer);
    }
    const auto failure = etcd_wire::failure_of(*result.status, result.body);
    if (!failure.try_next) throw StoreError(failure.kind, fmt::format("etcd {}: {}", path, failure.message));
    failures.push_back(fmt::format("{}: {}", endpoint.text, failure.message));
  }
  throw StoreError(StoreErrorKind::unavailable, fmt::format("etcd unreachable ({}): {}", path, join(failures, "; ")));
}

LeaseId EtcdStore::grant_lease(double ttl_s) {
  if (!(ttl_s > 0.0) || ttl_s > kMaxLeaseTtlS) throw StoreError(StoreErrorKind::invalid, fmt::format("lease TTL {} s", ttl_s));
  // etcd counts TTLs in whole seconds: round up, never grant less than asked.
  return etcd_wire::granted_lease(call("/v3/lease/grant", {{"TTL", static_cast<std::int64_t>(std::ceil(ttl_s))}}));
}

bool EtcdStore::keep_alive(LeaseId lease) {
  // The gateway's keepalive is a stream; one request gets one answer. An expired or unknown lease
  // answers TTL 0 (left out).
  return etcd_wire::lease_alive(call("/v3/lease/keepalive", {{"ID", std::to_string(lease)}}));
}

void EtcdStore::revoke_lease(LeaseId lease) {
  try {
    (void)call("/v3/lease/revoke", {{"ID", std::to_string(lease)}});
  } catch (const StoreError& error) {
    if (error.kind() != StoreErrorKind::lease_not_found) throw;  // already gone: what revoke wants
  }
}

RangeResult EtcdStore::get(std::string_view key) {
  return etcd_wire::range_result(call("/v3/kv/range", range_request(key, false)));
}

RangeResult EtcdStore::get_prefix(std::string_view prefix) {
  auto request = range_request(prefix, true);
  request["sort_order"] = "ASCEND";
  request["sort_target"] = "KEY";
  return etcd_wire::range_result(call("/v3/kv/range", request));
}

Revision EtcdStore::put(const PutOp& op) { return etcd_wire::header_revision(call("/v3/kv/put", put_json(op))); }

TxnResult EtcdStore::txn(std::span<const Compare> compares, std::span<const Op> then, std::span<const Op> otherwise) {
  nlohmann::json compare = nlohmann::json::array();
  for (const Compare& c : compares) compare.push_back(compare_json(c));
  return etcd_wire::txn_result(
      call("/v3/kv/txn", {{"compare", compare}, {"success", ops_json(then)}, {"failure", ops_json(otherwise)}}));
}

WatchId EtcdStore::watch(std::string key, Revision from, bool prefix) {
  // "From the next write" must not miss a write made while the stream connects: start at the
  // revision after the store's current one, read now.
  // The probe also finds a member that answers, for the stream to connect to.
  auto probe = range_request(key, false);
  probe["count_only"] = true;
  const Revision now = etcd_wire::header_revision(call("/v3/kv/range", probe));
  if (from == 0) from = now + 1;
  auto create = range_request(key, prefix);
  create["start_revision"] = std::to_string(from);
  std::lock_guard lock(mutex_);
  const WatchId id = next_watch_++;
  watches_.emplace(id, std::make_unique<WatchStream>(endpoints_[current_], std::move(create), options_));
  return id;
}

std::vector<WatchEvent> EtcdStore::poll(WatchId watch) {
  WatchStream* stream = nullptr;
  {
    std::lock_guard lock(mutex_);
    const auto found = watches_.find(watch);
    if (found == watches_.end()) throw StoreError(StoreErrorKind::invalid, fmt::format("no watch {}", watch));
    stream = found->second.get();
  }
  try {
    return stream->take();
  } catch (const StoreError&) {
    cancel(watch);  // an ended stream is cancelled: the caller watches again
    throw;
  }
}

void EtcdStore::cancel(WatchId watch) {
  std::unique_ptr<WatchStream> stream;
  {
    std::lock_guard lock(mutex_);
    const auto found = watches_.find(watch);
    if (found == watches_.end()) return;
    stream = std::move(found->second);
    watches_.erase(found);
  }
  stream.reset();  // joins its thread outside the lock
}

}  // namespace gpucap::cluster
