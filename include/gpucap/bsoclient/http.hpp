#pragma once
// JSON over HTTP to a batch-size optimizer server (`gpucap bso serve`, which speaks Zeus's
// routes): one request, one answer. A non-2xx answer becomes BsoServerError carrying the
// server's own message, so the user reads why the server refused, not just a status code.
//
// Each request opens its own connection: the client is used from the training thread and from
// the thread that ends a trial on SIGINT/SIGTERM, and a fresh connection per request needs no
// locking. A request every epoch makes the handshake's cost irrelevant.

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gpucap/core/error.hpp"
#include "gpucap/core/server_url.hpp"

namespace gpucap::bsoclient {

// The server answered with a status outside 2xx, or did not answer at all (status 0).
// 4xx carries ErrorCode::usage (the request was wrong: a config mismatch, an unknown job),
// everything else ErrorCode::io (the server or the network failed).
class BsoServerError : public Error {
 public:
  BsoServerError(int status, std::string server_message, const std::string& what);
  [[nodiscard]] int status() const noexcept { return status_; }
  // The server's "message" field (or its raw body when that is not JSON); for status 0, why
  // no answer came.
  [[nodiscard]] const std::string& server_message() const noexcept { return server_message_; }

 private:
  int status_;
  std::string server_message_;
};

// "http://HOST[:PORT][/PREFIX]" or "https://...": the part cpp-httplib connects to and the path
// prefix every route is appended to (a server behind a reverse proxy). Error(usage) otherwise.
using ServerAddress = gpucap::ServerUrl;
using gpucap::parse_server_url;

struct HttpOptions {
  std::string server_url;      // e.g. "http://127.0.0.1:8000"
  std::string token;           // sent as "Authorization: Bearer TOKEN"; empty: none
  double connect_timeout_s = 5.0;
  double read_timeout_s = 30.0;

  friend bool operator==(const HttpOptions&, const HttpOptions&) = default;
};

using QueryParams = std::vector<std::pair<std::string, std::string>>;

struct HttpAnswer {
  int status = 0;       // 2xx
  nlohmann::json body;  // null for an empty body
};

class JsonHttp {
 public:
  // Error(usage) for a malformed server URL.
  explicit JsonHttp(HttpOptions options);

  [[nodiscard]] const HttpOptions& options() const noexcept { return options_; }

  // Each returns a 2xx answer or throws BsoServerError. A 2xx body that is not JSON is
  // BsoServerError too (something other than the optimizer answered).
  HttpAnswer get(std::string_view path, const QueryParams& query = {}) const;
  HttpAnswer post(std::string_view path, const nlohmann::json& body) const;
  HttpAnswer patch(std::string_view path, const nlohmann::json& body) const;
  HttpAnswer del(std::string_view path, const QueryParams& query = {}) const;

 private:
  HttpOptions options_;
  ServerAddress address_;
};

}  // namespace gpucap::bsoclient
