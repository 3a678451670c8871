#include "gpucap/service/admin_server.hpp"

#include <fmt/format.h>
#include <httplib.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <thread>

#include "gpucap/core/error.hpp"
#include "gpucap/core/json_file.hpp"
#include "gpucap/core/stderr_line.hpp"
#include "gpucap/service/guarded_server.hpp"
#include "http_common.hpp"

namespace gpucap::service {
namespace {

constexpr std::size_t kAdminThreads = 4;
constexpr std::size_t kMaxBodyBytes = 4096;
constexpr double kDeadlineS = 5.0;

void send_error(httplib::Response& response, int status, const std::string& message) {
  response.status = status;
  response.set_content(to_json_text(nlohmann::json{{"error", message}}), "application/json");
}

HttpLimits admin_limits() {
  HttpLimits limits;
  limits.log_name = "serve admin";
  limits.max_body_bytes = kMaxBodyBytes;
  limits.header_timeout_s = kDeadlineS;
  limits.request_timeout_s = kDeadlineS;
  limits.write_timeout_s = kDeadlineS;
  limits.idle_timeout_s = 1.0;
  limits.workers = kAdminThreads;
  limits.max_connections = 256;
  return limits;
}

}  // namespace

struct AdminServer::Impl {
  Impl(serve::CapState& c, AdminServerOptions o, std::function<double()> now, std::function<double()> power,
       std::function<void()> set)
      : cap(c),
        options(std::move(o)),
        now_s(std::move(now)),
        power_w(std::move(power)),
        cap_set(std::move(set)),
        http(admin_limits(), send_error, "not found: the routes are GET /v1/power and PUT /v1/power/cap") {}

  [[nodiscard]] nlohmann::json state() const {
    const auto reading = cap.at(now_s());
    const double power = power_w ? power_w() : std::nan("");
    return {{"cap_w", reading.cap_w},
            {"source", reading.source},
            {"power_w", std::isfinite(power) ? nlohmann::json(power) : nlohmann::json(nullptr)},
            {"min_w", cap.min_w()},
            {"max_w", cap.max_w()},
            {"simulated", options.simulated}};
  }

  // The route behind the token.
  template <typename Handler>
  httplib::Server::Handler guarded(Handler handler) {
    return [this, handler](const httplib::Request& request, httplib::Response& response) {
      if (!detail::bearer_matches(request, options.token)) {
        response.set_header("WWW-Authenticate", "Bearer");
        send_error(response, 401, "missing or wrong bearer token (Authorization: Bearer TOKEN, from --admin-token-file)");
        return;
      }
      handler(request, response);
    };
  }

  void put_cap(const httplib::Request& request, httplib::Response& response) {
    double watts = 0.0;
    const auto bad = [&response](const std::string& message) { send_error(response, 400, message); };
    nlohmann::json body;
    try {
      body = nlohmann::json::parse(request.body);
    } catch (const nlohmann::json::out_of_range&) {
      // A number too large for a double ({"watts": 1e400}): JSON, and a cap no GPU draws.
      send_error(response, 422, "a number in the body is out of range; send {\"watts\": W} with W in watts");
      return;
    } catch (const nlohmann::json::exception&) {
      bad("the body is not JSON; send {\"watts\": W}");
      return;
    }
    if (!body.is_object() || !body.contains("watts") || !body["watts"].is_number()) {
      bad("the body must be {\"watts\": W} with W a number");
      return;
    }
    watts = body["watts"].get<double>();
    try {
      cap.set(watts, "admin", now_s());
    } catch (const Error& e) {
      send_error(response, 422, e.what());
      return;
    }
    print_stderr_line("gpucap serve: the cap is {:g} W from now on (PUT /v1/power/cap)", watts);
    if (cap_set) cap_set();
    response.set_content(state().dump(), "application/json");
  }

  void configure() {
    http.get("/v1/power", guarded([this](const httplib::Request&, httplib::Response& response) {
               response.set_content(state().dump(), "application/json");
             }));
    http.put("/v1/power/cap", guarded([this](const httplib::Request& request, httplib::Response& response) {
               put_cap(request, response);
             }));
  }

  serve::CapState& cap;
  AdminServerOptions options;
  std::function<double()> now_s;
  std::function<double()> power_w;
  std::function<void()> cap_set;
  GuardedServer http;
  std::thread thread;
  std::atomic<bool> loop_ended{false};
};

AdminServer::AdminServer(serve::CapState& cap, AdminServerOptions options, std::function<double()> now_s,
                         std::function<double()> power_w, std::function<void()> cap_set)
    : impl_(std::make_unique<Impl>(cap, std::move(options), std::move(now_s), std::move(power_w), std::move(cap_set))) {
  if (impl_->options.token.empty()) throw usage_error("the admin API needs a bearer token (--admin-token-file)");
  impl_->configure();
}

AdminServer::~AdminServer() { stop(); }

int AdminServer::start() {
  auto& i = *impl_;
  const int port = i.http.bind_listener(i.options.host, i.options.port);
  if (port < 0) {
    throw Error(ErrorCode::io, fmt::format("cannot listen on {}:{} for the admin API (address in use, or not an address of "
                                           "this host)",
                                           i.options.host, i.options.port));
  }
  i.options.port = port;
  i.thread = std::thread([&i] {
    // False only when accept() failed on the listening socket (a stop returns true).
    if (!i.http.listen_after_bind()) spdlog::error("the admin API stopped accepting connections: accept() failed on its socket");
    i.loop_ended = true;
  });
  return port;
}

void AdminServer::stop() {
  auto& i = *impl_;
  if (!i.thread.joinable()) return;
  while (!i.http.is_running() && !i.loop_ended) std::this_thread::yield();
  i.http.stop();
  i.thread.join();
}

std::string AdminServer::url() const { return fmt::format("http://{}:{}", impl_->options.host, impl_->options.port); }

}  // namespace gpucap::service
