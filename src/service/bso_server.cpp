#include "gpucap/service/bso_server.hpp"

#include <fmt/format.h>
#include <httplib.h>
#include <spdlog/spdlog.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <filesystem>
#include <thread>

#include "gpucap/core/error.hpp"
#include "gpucap/core/files.hpp"
#include "gpucap/core/json_file.hpp"
#include "gpucap/core/text.hpp"
#include "gpucap/service/bso_api.hpp"
#include "gpucap/service/guarded_server.hpp"
#include "http_common.hpp"

namespace gpucap::service {
namespace {

constexpr const char* kNotFound =
    "Not Found: the routes are POST /jobs, GET /jobs/batch_size, POST /report, PATCH /trials and DELETE /jobs";

std::optional<std::string> query(const httplib::Request& request, const char* name) {
  if (!request.has_param(name)) return std::nullopt;
  return request.get_param_value(name);
}

void send(httplib::Response& response, const ApiResponse& answer) {
  response.status = answer.status;
  response.set_content(to_json_text(answer.body), "application/json");  // a 4xx may quote odd bytes
}

}  // namespace

std::pair<std::string, int> parse_listen_address(const std::string& text, std::string_view option,
                                                std::string_view example) {
  const auto colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size()) {
    throw usage_error(fmt::format("{} '{}': expected HOST:PORT, e.g. {}", option, text, example));
  }
  const auto port_text = text.substr(colon + 1);
  int port = -1;
  const auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (ec != std::errc() || end != port_text.data() + port_text.size() || port < 0 || port > 65535) {
    throw usage_error(fmt::format("{} '{}': the port must be a number from 0 to 65535", option, text));
  }
  auto host = text.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);  // [::1]
  return {host, port};
}

std::string read_token_file(const std::string& path, std::string_view flag) {
  const auto token = std::string(trim(read_text_file(path)));
  if (token.empty()) throw usage_error(fmt::format("{} {}: the file is empty", flag, path));
  // cpp-httplib decodes %-escapes in a header's value and trims it: a token that decodes to a
  // blank or a control character could never be matched.
  const auto decoded = httplib::detail::decode_url(token, false);
  const auto unusable = [](unsigned char c) { return c <= 0x20 || c == 0x7f; };
  if (std::any_of(decoded.begin(), decoded.end(), [&](char c) { return unusable(static_cast<unsigned char>(c)); })) {
    throw usage_error(fmt::format("{} {}: the token holds a blank or a control character (also as a %-escape): "
                                  "use letters, digits and punctuation",
                                  flag, path));
  }
  return token;
}

struct BsoServer::Impl {
  Impl(Store& store, ServerOptions o)
      : api(store),
        options(std::move(o)),
        http(limits(options),
             [](httplib::Response& response, int status, const std::string& message) {
               send(response, error_response(status, message));
             },
             kNotFound) {}

  static HttpLimits limits(const ServerOptions& options) {
    HttpLimits limits;
    limits.log_name = "bso serve";
    limits.max_body_bytes = options.max_body_bytes;
    limits.collect_body_bytes = options.max_body_bytes;  // trial reports are small: collected whole
    limits.workers = options.threads;
    limits.header_timeout_s = options.header_timeout_s;
    limits.request_timeout_s = options.request_timeout_s;
    limits.idle_timeout_s = 5.0;
    return limits;
  }

  // The route, behind the token check.
  template <typename Call>
  httplib::Server::Handler guarded(const char* route, Call call) {
    return [this, route, call](const httplib::Request& request, httplib::Response& response) {
      if (!authorized(request)) {
        response.set_header("WWW-Authenticate", "Bearer");
        send(response, error_response(401, "missing or wrong bearer token (Authorization: Bearer TOKEN)"));
        return;
      }
      const auto answer = call(request);
      notify(route, request.body, answer);
      send(response, answer);
    };
  }

  // Tells on_answer (metrics) of an answer; whatever it throws changes nothing of the answer.
  void notify(const char* route, const std::string& body, const ApiResponse& answer) const noexcept {
    if (!options.on_answer) return;
    try {
      options.on_answer(route, body, answer);
    } catch (const std::exception& e) {
      spdlog::warn("bso serve: the metrics could not count a {} answer: {}", route, e.what());
    } catch (...) {
      spdlog::warn("bso serve: the metrics could not count a {} answer", route);
    }
  }

  [[nodiscard]] bool authorized(const httplib::Request& request) const {
    return !options.bearer_token || detail::bearer_matches(request, *options.bearer_token);
  }

  void configure() {
    http.set_exception_handler([](const httplib::Request&, httplib::Response& response, std::exception_ptr error) {
      std::string message = "internal error";
      try {
        std::rethrow_exception(error);
      } catch (const std::exception& e) {
        message = fmt::format("internal error: {}", e.what());
      } catch (...) {
      }
      send(response, error_response(500, message));
    });
    http.post("/jobs", guarded("POST /jobs", [this](const httplib::Request& r) { return api.register_job(r.body); }));
    http.get("/jobs/batch_size", guarded("GET /jobs/batch_size", [this](const httplib::Request& r) {
               return api.next_batch_size(query(r, "job_id"));
             }));
    http.post("/report", guarded("POST /report", [this](const httplib::Request& r) { return api.report(r.body); }));
    http.patch("/trials", guarded("PATCH /trials", [this](const httplib::Request& r) { return api.end_trial(r.body); }));
    http.del("/jobs", guarded("DELETE /jobs", [this](const httplib::Request& r) {
                  return api.delete_job(query(r, "job_id"));
                }));
  }

  BsoApi api;
  ServerOptions options;
  GuardedServer http;
  std::atomic<bool> serving{false};
  std::atomic<bool> stop_requested{false};
};

BsoServer::BsoServer(Store& store, ServerOptions options) : impl_(std::make_unique<Impl>(store, std::move(options))) {
  impl_->configure();
}

BsoServer::~BsoServer() { stop(); }

int BsoServer::bind() {
  const auto& o = impl_->options;
  const int port = impl_->http.bind_listener(o.host, o.port);
  if (port < 0) {
    throw Error(ErrorCode::io, fmt::format("cannot listen on {}:{} (address in use, or not an address of this host)", o.host, o.port));
  }
  return port;
}

void BsoServer::serve() {
  impl_->serving = true;
  const bool stopped_early = impl_->stop_requested;
  const bool clean = stopped_early || impl_->http.listen_after_bind();
  impl_->serving = false;
  if (!clean) throw Error(ErrorCode::io, "the server stopped accepting connections");
}

// A stop() that comes while serve() is starting waits until the server runs, so it is not lost.
void BsoServer::stop() {
  impl_->stop_requested = true;
  while (impl_->serving && !impl_->http.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  impl_->http.stop();
}

}  // namespace gpucap::service
