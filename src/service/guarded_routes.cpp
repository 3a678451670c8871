#include "gpucap/service/guarded_server.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdint>

#include "gpucap/core/text.hpp"
#include "log_limiter.hpp"
#include "request_stream.hpp"
#include "worker_pool.hpp"

// GuardedServer's routes and refusals: 405 for a known path's other methods, the error bodies of
// the refusals cpp-httplib makes by itself, and one log line for each refused request.

namespace gpucap::service {
namespace {

constexpr std::uint64_t kBodyReserveBytes = std::uint64_t{16} << 20U;

// What an error body says, for the log: {"error": "..."} (KServe, the admin API) or
// {"message": "..."} (Zeus's BSO API).
std::string error_message(const httplib::Response& response) {
  if (response.body.empty() || response.body.size() > 4096 || response.body.front() != '{') return {};
  const auto body = nlohmann::json::parse(response.body, nullptr, false);
  if (!body.is_object()) return {};
  for (const char* key : {"error", "message"}) {
    if (body.contains(key) && body[key].is_string()) return body[key].get<std::string>();
  }
  return {};
}

}  // namespace

// cpp-httplib 0.11 honours a Range header on every answer, and a list of n ranges makes it build
// an answer of n copies of the body in memory (a 2-KB header asked 200 MB of the dashboard's
// 200-KB script; bounded after 0.11.4, cpp-httplib issue #1766); and it compresses a JSON or text
// answer for a client that accepts gzip or br, which Triton's asyncio client asks for and then
// reads as JSON without inflating it. It has no switch for either, and HTTP lets a server ignore
// both (RFC 9110 §14.2 and §12.5.3): every answer here goes out whole and as it is. The request is
// the library's own object, made non-const in its request loop; only the handlers see it const.
void GuardedServer::answer_whole_and_plain(const httplib::Request& request) {
  auto& own = const_cast<httplib::Request&>(request);  // NOLINT(cppcoreguidelines-pro-type-const-cast)
  own.ranges.clear();
  own.headers.erase("Range");
  own.headers.erase("Accept-Encoding");
}

// Bodies no route reads: a multipart one (no API here takes files; cpp-httplib's reader would need
// callbacks for its parts) and one with neither a length nor chunks (it would be read until the
// client closes). The status and the message; nullopt for a body the route reads.
std::optional<std::pair<int, std::string>> GuardedServer::unread_body_refusal(const httplib::Request& request) {
  if (request.is_multipart_form_data()) return std::pair{415, std::string("a multipart body is not accepted here")};
  const bool chunked = to_lower(request.get_header_value("Transfer-Encoding")).find("chunked") != std::string::npos;
  if (!chunked && !request.has_header("Content-Length")) {
    return std::pair{411, request.method + " needs a Content-Length or a chunked body"};
  }
  return std::nullopt;
}

GuardedServer& GuardedServer::route(const char* method, const std::string& pattern, Handler handler) {
  routes_.emplace_back(method, std::regex(pattern));
  // A chunked body is only known to be too large once it is read.
  Handler checked = [this, handler = std::move(handler)](const httplib::Request& request, httplib::Response& response) {
    if (request.body.size() > limits_.max_body_bytes) {
      response.status = 413;
      return;
    }
    handler(request, response);
  };
  const std::string_view m = method;
  if (m == "GET") Get(pattern, std::move(checked));
  if (m == "DELETE") Delete(pattern, std::move(checked));
  if (m != "POST" && m != "PUT" && m != "PATCH") return *this;
  // A body is read by the route itself, as it comes, rather than by cpp-httplib before it: that
  // reading refuses an application/x-www-form-urlencoded body over 8 KiB with 413, and curl -d
  // sends that type by default (Triton ignores the type of an inference request's body).
  HandlerWithContentReader reading = [this, checked = std::move(checked)](const httplib::Request& request,
                                                                         httplib::Response& response,
                                                                         const httplib::ContentReader& content) {
    if (const auto refusal = unread_body_refusal(request)) {
      detail::leave_current_body_unread();
      response.status = refusal->first;
      write_error_(response, refusal->first, refusal->second);
      return;
    }
    // Sized once from Content-Length rather than grown as it comes: growing a 600-kB image's body
    // doubled it about 16 times, each a copy into memory not yet touched. At most 16 MiB is
    // reserved before the bytes come, so that a length that lies costs little.
    std::string body;
    body.reserve(std::min<std::uint64_t>({request.get_header_value<std::uint64_t>("Content-Length"),
                                          limits_.max_body_bytes, kBodyReserveBytes}));
    bool too_large = false;
    const bool read = content([&](const char* data, std::size_t length) {
      if (body.size() + length > limits_.max_body_bytes) {
        too_large = true;
        return false;
      }
      body.append(data, length);
      return true;
    });
    detail::WorkerPool::body_read();  // the handler may wait long after (an inference, for its batch)
    if (!read || too_large) {
      // on_error says why (the stream's deadline, the body's size) and writes the error body; a
      // 413 cpp-httplib gave (a length over its limit) stays.
      detail::leave_current_body_unread();
      response.status = too_large ? 413 : response.status >= 400 ? response.status : 400;
      return;
    }
    httplib::Request whole = request;
    whole.body = std::move(body);
    checked(whole, response);
  };
  if (m == "POST") Post(pattern, std::move(reading));
  if (m == "PUT") Put(pattern, std::move(reading));
  if (m == "PATCH") Patch(pattern, std::move(reading));
  return *this;
}

GuardedServer& GuardedServer::get(const std::string& pattern, Handler handler) { return route("GET", pattern, std::move(handler)); }
GuardedServer& GuardedServer::post(const std::string& pattern, Handler handler) { return route("POST", pattern, std::move(handler)); }
GuardedServer& GuardedServer::put(const std::string& pattern, Handler handler) { return route("PUT", pattern, std::move(handler)); }
GuardedServer& GuardedServer::patch(const std::string& pattern, Handler handler) { return route("PATCH", pattern, std::move(handler)); }
GuardedServer& GuardedServer::del(const std::string& pattern, Handler handler) { return route("DELETE", pattern, std::move(handler)); }

std::string GuardedServer::allowed_methods(const std::string& path) const {
  std::string allowed;
  for (const auto& [method, pattern] : routes_) {
    if (!std::regex_match(path, pattern)) continue;
    if (allowed.find(method) != std::string::npos) continue;
    allowed += allowed.empty() ? method : ", " + method;
    if (method == "GET") allowed += ", HEAD";
  }
  return allowed;
}

// Before the body is read (a pipelined request's too): cpp-httplib would inflate a gzip or br body
// with no bound, so that a few hundred KB on the wire could become gigabytes in memory.
httplib::Server::HandlerResponse GuardedServer::refuse_encoded_body(const httplib::Request& request,
                                                                    httplib::Response& response) const {
  const auto encoding = request.get_header_value("Content-Encoding");
  if (encoding.empty() || to_lower(encoding) == "identity") return HandlerResponse::Unhandled;
  detail::leave_current_body_unread();
  response.status = 415;
  write_error_(response, 415, detail::kEncodedBodyMessage);
  return HandlerResponse::Handled;
}

httplib::Server::HandlerResponse GuardedServer::on_error(const httplib::Request& request, httplib::Response& response) const {
  answer_whole_and_plain(request);  // an answer cpp-httplib gives before routing (400, 414, 416)
  const auto* stream = detail::current_stream();
  const auto failure = stream != nullptr ? stream->failure() : detail::StreamFailure::none;
  if (failure == detail::StreamFailure::timed_out) {
    response.status = 408;
    response.body.clear();
  } else if (failure == detail::StreamFailure::too_large || (response.status == 400 && request.body.size() > limits_.max_body_bytes)) {
    response.status = 413;
    response.body.clear();
  }
  if (failure != detail::StreamFailure::none) response.set_header("Connection", "close");
  if (!response.body.empty()) return HandlerResponse::Unhandled;  // the handler's own answer
  std::string message;
  switch (response.status) {
    case 400: message = "Bad Request: the request could not be read"; break;
    case 404: {
      const auto allowed = allowed_methods(request.path);
      if (allowed.empty()) {
        message = not_found_;
        break;
      }
      response.status = 405;
      response.set_header("Allow", allowed);
      message = fmt::format("{} {}: method not allowed (allowed: {})", request.method, request.path, allowed);
      break;
    }
    case 408: message = fmt::format("the request did not arrive within {:g} s", limits_.request_timeout_s); break;
    case 413: message = fmt::format("the body is too large: the server's limit is {} bytes", limits_.max_body_bytes); break;
    case 414: message = "URI Too Long"; break;
    case 416: message = "Range Not Satisfiable"; break;
    default: message = fmt::format("HTTP error {}", response.status);
  }
  write_error_(response, response.status, message);
  return HandlerResponse::Handled;
}

void GuardedServer::on_answer(const httplib::Request& request, const httplib::Response& response) const {
  // A shed request (429) is load, not a fault: the metrics count those.
  if (response.status < 400 || response.status == 429) return;
  log_refusal(response.status, request.method, request.path,
              request.remote_addr.empty() ? "?" : fmt::format("{}:{}", request.remote_addr, request.remote_port),
              error_message(response));
}

void GuardedServer::log_refusal(int status, std::string_view method, std::string_view path, std::string_view remote,
                                std::string_view message) const {
  const auto skipped = log_limiter_->admit();
  if (!skipped) return;
  // The path and the message may quote the client's bytes (cpp-httplib decodes %0A in a path).
  const auto shown_path = escape_control(path.substr(0, std::min<std::size_t>(path.size(), 200)));
  const auto shown_message = escape_control(message);
  const auto shown_method = escape_control(method);
  const auto more = *skipped > 0 ? fmt::format(" ({} more refusals were not logged)", *skipped) : std::string();
  if (status >= 500) {
    spdlog::error("{}: {} {} {} from {}: {}{}", limits_.log_name, status, shown_method, shown_path, remote, shown_message, more);
  } else {
    spdlog::warn("{}: {} {} {} from {}: {}{}", limits_.log_name, status, shown_method, shown_path, remote, shown_message, more);
  }
}

}  // namespace gpucap::service
