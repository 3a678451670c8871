#include "support/private_prometheus.hpp"

#include <fmt/format.h>
#include <httplib.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <stdexcept>
#include <thread>

#include "support/free_port.hpp"

namespace gpucap::test {
namespace {

constexpr const char* kPrometheus = "/usr/bin/prometheus";

std::string config(const std::vector<std::string>& targets, double interval_s) {
  std::string list;
  for (const auto& target : targets) list += fmt::format("{}\"{}\"", list.empty() ? "" : ", ", target);
  // The timeout must not exceed the interval; 90 % of it leaves a late answer counted as missed.
  return fmt::format(
      "global:\n  scrape_interval: {0:g}s\n  scrape_timeout: {1:g}ms\nscrape_configs:\n  - job_name: gpucap\n"
      "    static_configs:\n      - targets: [{2}]\n",
      interval_s, interval_s * 900.0, list);
}

}  // namespace

PrivatePrometheus::PrivatePrometheus(const std::vector<std::string>& targets, double interval_s) {
  if (!std::filesystem::exists(kPrometheus)) {
    throw std::runtime_error("Prometheus is missing (/usr/bin/prometheus): install the prometheus package (scripts/setup.sh does)");
  }
  const auto config_file = dir_.write("prometheus.yml", config(targets, interval_s));
  port_ = free_port();
  server_ = std::make_unique<ChildProcess>(
      std::vector<std::string>{kPrometheus, "--config.file=" + config_file, "--storage.tsdb.path=" + dir_.file("data"),
                               "--web.listen-address=127.0.0.1:" + std::to_string(port_), "--log.level=warn"},
      /*merge_stderr=*/true);
  httplib::Client client("127.0.0.1", port_);
  client.set_connection_timeout(1);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline) {
    if (const auto ready = client.Get("/-/ready"); ready && ready->status == 200) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  throw std::runtime_error(fmt::format("Prometheus did not become ready on 127.0.0.1:{} within 30 s", port_));
}

PrivatePrometheus::~PrivatePrometheus() {
  if (!server_) return;
  server_->signal(SIGTERM);
  if (!server_->wait(10.0)) server_->signal(SIGKILL);
}

nlohmann::json PrivatePrometheus::query(const std::string& promql) const {
  httplib::Client client("127.0.0.1", port_);
  client.set_read_timeout(10);
  const auto answer = client.Get("/api/v1/query", httplib::Params{{"query", promql}}, httplib::Headers{});
  if (!answer || answer->status != 200) {
    throw std::runtime_error("Prometheus query failed: " + promql + (answer ? ": " + answer->body : std::string()));
  }
  const auto json = nlohmann::json::parse(answer->body);
  if (json.value("status", "") != "success") throw std::runtime_error("Prometheus query failed: " + answer->body);
  return json.at("data");
}

std::vector<std::pair<double, double>> PrivatePrometheus::samples(const std::string& series_selector) const {
  // A range selector at an instant query returns the raw samples, not an interpolated grid.
  const auto data = query(series_selector + "[1h]");
  std::vector<std::pair<double, double>> out;
  if (data.at("result").empty()) return out;
  for (const auto& value : data.at("result").front().at("values")) {
    out.emplace_back(value.at(0).get<double>(), std::stod(value.at(1).get<std::string>()));
  }
  return out;
}

}  // namespace gpucap::test
