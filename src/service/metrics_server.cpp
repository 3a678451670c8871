#include "gpucap/service/metrics_server.hpp"

#include <fmt/format.h>
#include <httplib.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <mutex>
#include <thread>

#include "gpucap/core/error.hpp"
#include "gpucap/monitor/exposition.hpp"
#include "gpucap/service/guarded_server.hpp"

namespace gpucap::service {
namespace {

// Prometheus scrapes one target at a time; two threads let a second client (a person with curl)
// in beside it without holding more.
constexpr std::size_t kServerThreads = 2;

HttpLimits metrics_limits() {
  HttpLimits limits;
  limits.log_name = "metrics";
  limits.max_body_bytes = 4096;  // no route takes a body
  limits.header_timeout_s = 5.0;
  limits.request_timeout_s = 5.0;
  // A scraper that keeps its connection open scrapes again within its interval (15 s by default).
  limits.idle_timeout_s = 30.0;
  limits.workers = kServerThreads;
  limits.max_connections = 256;
  return limits;
}

void send_text_error(httplib::Response& response, int status, const std::string& message) {
  response.status = status;
  response.set_content(message + "\n", "text/plain");
}

}  // namespace

struct MetricsServer::Impl {
  std::string host;
  int port = 0;
  Render render;
  GuardedServer http{metrics_limits(), send_text_error, "not found: the metrics are at /metrics"};
  std::thread thread;
  std::atomic<bool> loop_ended{false};
  std::mutex render_mutex;  // one render at a time: producers may not be reentrant
  Render root_page;
  std::string root_content_type;
};

MetricsServer::MetricsServer(std::string host, int port, Render render) : impl_(std::make_unique<Impl>()) {
  impl_->host = std::move(host);
  impl_->port = port;
  impl_->render = std::move(render);
  auto& http = impl_->http;
  Impl* impl = impl_.get();
  http.get("/metrics", [impl](const httplib::Request&, httplib::Response& response) {
    const std::lock_guard lock(impl->render_mutex);
    response.set_content(impl->render(), monitor::kExpositionContentType);
  });
  http.get("/", [impl](const httplib::Request&, httplib::Response& response) {
    if (impl->root_page) {
      response.set_content(impl->root_page(), impl->root_content_type);
      return;
    }
    response.set_content("gpucap exporter: the metrics are at /metrics\n", "text/plain");
  });
  http.set_exception_handler([](const httplib::Request&, httplib::Response& response, std::exception_ptr error) {
    std::string message = "internal error";
    try {
      std::rethrow_exception(error);
    } catch (const std::exception& e) {
      message = fmt::format("cannot read the metrics: {}", e.what());
    } catch (...) {
    }
    response.status = 500;
    response.set_content(message + "\n", "text/plain");
  });
}

MetricsServer::~MetricsServer() { stop(); }

void MetricsServer::add_page(const std::string& path, Render render, std::string content_type) {
  if (path == "/") {
    impl_->root_page = std::move(render);
    impl_->root_content_type = std::move(content_type);
    return;
  }
  impl_->http.get(path, [render = std::move(render), type = std::move(content_type)](const httplib::Request&,
                                                                                      httplib::Response& response) {
    response.set_content(render(), type);
  });
}

int MetricsServer::start() {
  auto& i = *impl_;
  const int port = i.http.bind_listener(i.host, i.port);
  if (port < 0) {
    throw Error(ErrorCode::io, fmt::format("cannot listen on {}:{} for metrics (address in use, or not an address of "
                                           "this host)",
                                           i.host, i.port));
  }
  i.port = port;
  i.thread = std::thread([&i] {
    // False only when accept() failed on the listening socket (a stop returns true).
    if (!i.http.listen_after_bind()) spdlog::error("the metrics endpoint stopped accepting connections: accept() failed on its socket");
    i.loop_ended = true;
  });
  return port;
}

void MetricsServer::stop() {
  auto& i = *impl_;
  if (!i.thread.joinable()) return;
  // listen_after_bind may not have started its loop yet: a stop before it would be lost.
  while (!i.http.is_running() && !i.loop_ended) std::this_thread::yield();
  i.http.stop();
  i.thread.join();
}

std::string MetricsServer::url() const {
  const auto& host = impl_->host;
  const bool ipv6 = host.find(':') != std::string::npos;
  return fmt::format("http://{}{}{}:{}/metrics", ipv6 ? "[" : "", host, ipv6 ? "]" : "", impl_->port);
}

}  // namespace gpucap::service
