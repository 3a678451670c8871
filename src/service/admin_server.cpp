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
#include "http_common.hpp"

namespace gpucap::service {
namespace {

constexpr std::size_t kAdminThreads = 4;
constexpr std::size_t kMaxBodyBytes = 4096;
constexpr time_t kDeadlineS = 5;

void send_error(httplib::Response& response, int status, const std::string& message) {
  response.status = status;
  response.set_content(nlohmann::json{{"error", message}}.dump(), "application/json");
}

}  // namespace

struct AdminServer::Impl {
  Impl(serve::CapState& c, AdminServerOptions o, std::function<double()> now, std::function<double()> power,
       std::function<void()> set)
      : cap(c), options(std::move(o)), now_s(std::move(now)), power_w(std::move(power)), cap_set(std::move(set)) {}

  [[nodiscard]] nlohmann::json state() const {
    const auto reading = cap.at(now_s());
    const double power = power_w ? power_w() : std::nan("");
    return {{"cap_w", reading.cap_w},
            {"source", reading.source},
            {"power_w", std::isfinite(power) ? nlohmann::json(power) : nlohmann::json(nullptr)},
            {"min_w", cap.min_w()},
            {"max_w", cap.max_w()}};
  }

  // The route behind the token.
  template <typename Handler>
  httplib::Server::Handler guarded(Handler handler) {
    return [this, handler](const httplib::Request& request, httplib::Response& response) {
      if (!detail::bearer_matches(request, options.token)) {
        response.set_header("WWW-Authenticate", "Bearer");
        send_error(response, 401, "missing or wrong bearer token (Authorization: Bearer TOKEN, from --admin-token-file)");
        spdlog::warn("serve admin: 401 {} {}", request.method, request.path);
        return;
      }
      handler(request, response);
    };
  }

  void put_cap(const httplib::Request& request, httplib::Response& response) {
    double watts = 0.0;
    const auto bad = [&response](const std::string& message) {
      send_error(response, 400, message);
      spdlog::warn("serve admin: 400 PUT /v1/power/cap: {}", message);
    };
    nlohmann::json body;
    try {
      body = nlohmann::json::parse(request.body);
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
      spdlog::warn("serve admin: 422 PUT /v1/power/cap: {}", e.what());
      return;
    }
    fmt::print(stderr, "gpucap serve: the cap is {:g} W from now on (PUT /v1/power/cap)\n", watts);
    if (cap_set) cap_set();
    response.set_content(state().dump(), "application/json");
  }

  void configure() {
    http.new_task_queue = [] { return new httplib::ThreadPool(kAdminThreads); };
    http.set_payload_max_length(kMaxBodyBytes);
    http.set_read_timeout(kDeadlineS, 0);
    http.set_write_timeout(kDeadlineS, 0);
    http.set_keep_alive_timeout(1);
    detail::refuse_shared_ports(http);
    const httplib::Server::HandlerWithResponse json_errors = [](const httplib::Request& request,
                                                                httplib::Response& response) {
      if (!response.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
      const std::string message = response.status == 404   ? "not found: the routes are GET /v1/power and PUT /v1/power/cap"
                                  : response.status == 413 ? "the body is larger than 4 KiB"
                                                           : fmt::format("HTTP error {}", response.status);
      spdlog::warn("serve admin: {} {} {}", response.status, request.method, request.path);
      send_error(response, response.status, message);
      return httplib::Server::HandlerResponse::Handled;
    };
    http.set_error_handler(json_errors);
    http.Get("/v1/power", guarded([this](const httplib::Request&, httplib::Response& response) {
               response.set_content(state().dump(), "application/json");
             }));
    http.Put("/v1/power/cap", guarded([this](const httplib::Request& request, httplib::Response& response) {
               put_cap(request, response);
             }));
    const auto refuse = [](const char* allowed) {
      return [allowed](const httplib::Request& request, httplib::Response& response) {
        response.set_header("Allow", allowed);
        send_error(response, 405, fmt::format("{} {}: method not allowed (allowed: {})", request.method, request.path, allowed));
        spdlog::warn("serve admin: 405 {} {}", request.method, request.path);
      };
    };
    http.Post("/v1/power", refuse("GET"));
    http.Put("/v1/power", refuse("GET"));
    http.Delete("/v1/power", refuse("GET"));
    http.Get("/v1/power/cap", refuse("PUT"));
    http.Post("/v1/power/cap", refuse("PUT"));
    http.Delete("/v1/power/cap", refuse("PUT"));
  }

  serve::CapState& cap;
  AdminServerOptions options;
  std::function<double()> now_s;
  std::function<double()> power_w;
  std::function<void()> cap_set;
  httplib::Server http;
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
  const int port = i.options.port == 0 ? i.http.bind_to_any_port(i.options.host)
                                       : (i.http.bind_to_port(i.options.host, i.options.port) ? i.options.port : -1);
  if (port < 0) {
    throw Error(ErrorCode::io, fmt::format("cannot listen on {}:{} for the admin API (address in use, or not an address of "
                                           "this host)",
                                           i.options.host, i.options.port));
  }
  i.options.port = port;
  i.thread = std::thread([&i] {
    i.http.listen_after_bind();
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
