#pragma once
// A real Prometheus server (Debian's `prometheus`, installed by scripts/setup.sh) that a test
// starts in a temporary folder, on 127.0.0.1 and a free port, scraping the targets it is given;
// stopped (SIGTERM, then SIGKILL) and removed when the object goes.

#include <nlohmann/json.hpp>

#include <memory>
#include <string>
#include <vector>

#include "support/child_process.hpp"
#include "support/paths.hpp"

namespace gpucap::test {

class PrivatePrometheus {
 public:
  // Scrapes each "HOST:PORT" of `targets` (path /metrics) every `interval_s` seconds. Throws
  // std::runtime_error when Prometheus is missing or does not become ready within 30 s.
  PrivatePrometheus(const std::vector<std::string>& targets, double interval_s);
  ~PrivatePrometheus();
  PrivatePrometheus(const PrivatePrometheus&) = delete;
  PrivatePrometheus& operator=(const PrivatePrometheus&) = delete;

  // The `data` of GET /api/v1/query?query=PROMQL (an instant query now); throws on a failed query.
  [[nodiscard]] nlohmann::json query(const std::string& promql) const;
  // Every raw sample of `series_selector` scraped so far: (Unix time in s, value), oldest first, for
  // the first series the selector matches (empty if none).
  [[nodiscard]] std::vector<std::pair<double, double>> samples(const std::string& series_selector) const;
  [[nodiscard]] int port() const { return port_; }

 private:
  TempDir dir_;
  int port_ = 0;
  std::unique_ptr<ChildProcess> server_;
};

}  // namespace gpucap::test
