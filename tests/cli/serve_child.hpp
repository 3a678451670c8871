#pragma once
// What the tests of `gpucap serve` as a process share: a serve child on free ports with the URLs
// it announced, and a request as tritonclient.http sends it with binary data.

#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <regex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "cli/metrics_scrape.hpp"
#include "support/child_process.hpp"
#include "support/paths.hpp"

namespace gpucap::test {

// A `gpucap serve` child on free ports, with the URLs it announced.
class Server {
 public:
  // `merge_stderr`: what the server says on stderr comes on the same pipe (read_line).
  explicit Server(std::vector<std::string> extra, bool merge_stderr = false) {
    std::vector<std::string> argv = {GPUCAP_CLI_PATH, "--data-dir", test::data_dir(), "serve", "--listen", "127.0.0.1:0"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    child_ = std::make_unique<test::ChildProcess>(argv, merge_stderr);
    static const std::regex inference(R"(inference \(KServe v2\)\s+http://127\.0\.0\.1:([0-9]+)/)");
    static const std::regex metrics(R"(metrics\s+http://127\.0\.0\.1:([0-9]+)/metrics)");
    static const std::regex admin(R"(admin\s+http://127\.0\.0\.1:([0-9]+)/v1/power)");
    while (const auto line = child_->read_line(60.0)) {
      std::smatch m;
      if (std::regex_search(*line, m, inference)) port_ = std::stoi(m[1]);
      if (std::regex_search(*line, m, metrics)) metrics_port_ = std::stoi(m[1]);
      if (std::regex_search(*line, m, admin)) admin_port_ = std::stoi(m[1]);
      if (line->find("stop with Ctrl-C") != std::string::npos) break;
    }
  }
  [[nodiscard]] bool started() const { return port_ > 0; }
  [[nodiscard]] httplib::Client client() const { return client_for(port_); }
  [[nodiscard]] httplib::Client metrics() const { return client_for(metrics_port_); }
  // The metrics page; a failure (and "") when the server does not answer.
  [[nodiscard]] std::string scrape() const {
    const auto got = metrics().Get("/metrics");
    if (!got) ADD_FAILURE() << "the metrics endpoint did not answer";
    return got ? got->body : std::string();
  }
  // Scrapes the metrics until the page holds `fragment` (at most `timeout_s`); the last page, and a
  // failure when it never came.
  std::string wait_for_metrics(const std::string& fragment, double timeout_s = 10.0) const {
    std::string text;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    while (std::chrono::steady_clock::now() < deadline) {
      text = scrape();
      if (text.find(fragment) != std::string::npos) return text;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    ADD_FAILURE() << "no " << fragment << " in\n" << text;
    return text;
  }
  [[nodiscard]] httplib::Client admin() const { return client_for(admin_port_); }
  // Waits until `count` requests to `model` are pending or answered (Triton's gauges, scraped from
  // --metrics), at most `timeout_s`; the last count seen.
  double wait_until_admitted(const std::string& model, double count, double timeout_s) const {
    const auto labels = R"({model=")" + model + R"(",version="1"})";
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    double admitted = 0.0;
    while (std::chrono::steady_clock::now() < deadline) {
      const auto scraped = metrics().Get("/metrics");
      if (!scraped) {
        ADD_FAILURE() << "the metrics endpoint stopped answering";
        return admitted;
      }
      admitted = test::series_value(scraped->body, "gpucap_serve_requests_in_flight", labels).value_or(0.0) +
                 test::series_value(scraped->body, "nv_inference_request_success", labels).value_or(0.0);
      if (admitted >= count) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return admitted;
  }
  [[nodiscard]] int port() const { return port_; }
  test::ChildProcess& process() { return *child_; }

 private:
  static httplib::Client client_for(int port) {
    httplib::Client c("127.0.0.1", port);
    c.set_connection_timeout(5);
    c.set_read_timeout(30);
    return c;
  }
  std::unique_ptr<test::ChildProcess> child_;
  int port_ = 0;
  int metrics_port_ = 0;
  int admin_port_ = 0;
};

// What tritonclient.http sends for one binary FP32 input and binary outputs: the JSON header,
// then the raw bytes, and Inference-Header-Content-Length.
inline std::pair<std::string, std::size_t> binary_request(const std::vector<float>& values, std::vector<std::int64_t> shape) {
  const nlohmann::json header = {
      {"inputs",
       {{{"name", "input"}, {"shape", shape}, {"datatype", "FP32"}, {"parameters", {{"binary_data_size", values.size() * 4}}}}}},
      {"parameters", {{"binary_data_output", true}}}};
  auto body = header.dump();
  const auto header_length = body.size();
  body.append(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float));
  return {body, header_length};
}

}  // namespace gpucap::test
