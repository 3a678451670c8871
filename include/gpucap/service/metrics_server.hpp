#pragma once
// The Prometheus exporter's HTTP side: GET /metrics answers with whatever `render` returns (the
// exposition text of a monitor::MetricsRegistry, or GPU readings taken at the scrape), served
// on cpp-httplib from a background thread so that the command's own work goes on beside it.

#include <functional>
#include <memory>
#include <string>

namespace gpucap::service {

class MetricsServer {
 public:
  using Render = std::function<std::string()>;

  // `port` 0 picks a free one (start() says which). `render` is called from the server's threads,
  // one scrape at a time.
  MetricsServer(std::string host, int port, Render render);
  // Stops serving (stop()).
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  // Another page beside /metrics (gpucap serve's dashboard at "/" and what it loads), rendered at
  // each request from the server's threads; before start(). A page at "/" replaces the default
  // pointer to /metrics.
  void add_page(const std::string& path, Render render, std::string content_type);

  // Binds and starts serving; returns the port. Error(io) when the address cannot be bound.
  int start();
  // Idempotent; returns once the serving thread has ended.
  void stop();
  // http://HOST:PORT/metrics (after start()).
  [[nodiscard]] std::string url() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpucap::service
