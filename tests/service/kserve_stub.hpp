#pragma once
// An in-process KServe v2 server for gpucap load's tests (cpp-httplib on 127.0.0.1, a port the
// kernel picks unless told): Triton's "simple" model, answers that can be delayed, shed (429),
// unavailable (503), failed (500) or cut every Nth request, and what it saw; and the helpers the
// tests share.

#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>

#include "gpucap/core/error.hpp"
#include "gpucap/service/kserve_protocol.hpp"
#include "gpucap/service/load_generator.hpp"
#include "support/expect_error.hpp"

namespace gpucap::service::load_stub {

using std::chrono::milliseconds;

struct StubConfig {
  milliseconds delay{0};
  int reject_every = 0;       // every Nth inference request: 429 with Retry-After
  std::string retry_after = "1";
  int unavailable_every = 0;  // every Nth: 503
  int fail_every = 0;         // every Nth: 500 {"error": "engine failed"}
  int cut_every = 0;          // every Nth: the connection is cut in the middle of the answer
  int hold_nth = 0;           // the Nth inference request alone waits `hold` (beside `delay`)
  milliseconds hold{0};
  // Every answer trickles: a byte every `trickle_every` (`trickle_bytes` of them, chunked), then
  // the JSON; each read takes less than a read timeout, the whole answer more.
  milliseconds trickle_every{0};
  int trickle_bytes = 0;
  std::size_t keep_alive_max = 10'000;
  int threads = 32;
  int port = 0;  // 0: any free one
};

// Triton's "simple" model, with one INT32 and one FP32 input so that the order shows.
inline kserve::ModelMetadata stub_model() {
  return {"simple",
          {"1"},
          "pytorch_libtorch",
          {{"INPUT0", kserve::Datatype::int32, {-1, 16}}, {"INPUT1", kserve::Datatype::fp32, {-1, 16}}},
          {{"OUTPUT0", kserve::Datatype::int32, {-1, 16}}},
          8};
}

class KserveStub {
 public:
  explicit KserveStub(StubConfig config, kserve::ModelMetadata model = stub_model())
      : config_(std::move(config)), model_(std::move(model)) {
    const int threads = config_.threads;
    server_.new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<std::size_t>(threads)); };
    server_.set_keep_alive_max_count(config_.keep_alive_max);
    server_.set_tcp_nodelay(true);
    const auto model_route = "/v2/models/" + model_.name;
    server_.Get(model_route, [this](const httplib::Request&, httplib::Response& res) {
      res.set_content(kserve::to_json(model_).dump(), "application/json");
    });
    server_.Get(R"(/v2/models/([^/]+))", [](const httplib::Request& req, httplib::Response& res) {
      res.status = 404;
      res.set_content(kserve::error_json("unknown model '" + std::string(req.matches[1]) + "'"), "application/json");
    });
    server_.Post(model_route + "/infer",
                 [this](const httplib::Request& req, httplib::Response& res) { infer(req, res); });
    if (config_.port > 0) {
      if (!server_.bind_to_port("127.0.0.1", config_.port)) throw std::runtime_error("the stub's port is taken");
      port_ = config_.port;
    } else {
      port_ = server_.bind_to_any_port("127.0.0.1");
    }
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::sleep_for(milliseconds(1));
  }
  ~KserveStub() {
    server_.stop();
    thread_.join();
  }
  KserveStub(const KserveStub&) = delete;
  KserveStub& operator=(const KserveStub&) = delete;

  [[nodiscard]] std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  [[nodiscard]] int infers() const { return infers_.load(); }
  [[nodiscard]] int max_in_flight() const { return max_in_flight_.load(); }
  // Distinct client connections that sent inference requests.
  [[nodiscard]] std::size_t connections() const {
    const std::lock_guard lock(mutex_);
    return ports_.size();
  }
  [[nodiscard]] httplib::Request last_request() const {
    const std::lock_guard lock(mutex_);
    return last_;
  }

 private:
  void infer(const httplib::Request& req, httplib::Response& res) {
    const int n = ++infers_;
    const int now = ++in_flight_;
    int seen = max_in_flight_.load();
    while (now > seen && !max_in_flight_.compare_exchange_weak(seen, now)) {
    }
    {
      const std::lock_guard lock(mutex_);
      last_ = req;
      ports_.insert(req.remote_port);
    }
    std::this_thread::sleep_for(config_.delay);
    if (n == config_.hold_nth) std::this_thread::sleep_for(config_.hold);
    --in_flight_;
    const auto every = [n](int k) { return k > 0 && n % k == 0; };
    if (every(config_.reject_every)) {
      res.status = 429;
      res.set_header("Retry-After", config_.retry_after);
      res.set_content(kserve::error_json("queue full: request shed"), "application/json");
      return;
    }
    if (every(config_.unavailable_every)) {
      res.status = 503;
      res.set_content(kserve::error_json("model not ready"), "application/json");
      return;
    }
    if (every(config_.fail_every)) {
      res.status = 500;
      res.set_content(kserve::error_json("engine failed"), "application/json");
      return;
    }
    if (every(config_.cut_every)) {
      // Headers promise a body that never comes: the server closes the connection.
      res.set_content_provider(1000, "application/json", [](std::size_t, std::size_t, httplib::DataSink&) {
        return false;
      });
      return;
    }
    if (config_.trickle_every.count() > 0) {
      auto sent = std::make_shared<int>(0);
      res.set_chunked_content_provider("application/json", [this, sent](std::size_t, httplib::DataSink& sink) {
        std::this_thread::sleep_for(config_.trickle_every);
        if ((*sent)++ < config_.trickle_bytes) return sink.write(" ", 1);
        (void)sink.write("{}", 2);
        sink.done();
        return true;
      });
      return;
    }
    try {
      std::optional<std::size_t> header_length;
      if (req.has_header("Inference-Header-Content-Length")) {
        header_length = kserve::parse_header_length(req.get_header_value("Inference-Header-Content-Length"));
      }
      const auto parsed = kserve::parse_infer_request(req.body, header_length, model_);
      res.set_content(R"({"model_name":"simple","outputs":[{"name":"OUTPUT0","datatype":"INT32","shape":[)" +
                          std::to_string(parsed.batch_size) + R"(,16],"data":[]}]})",
                      "application/json");
    } catch (const kserve::ProtocolError& e) {
      res.status = e.http_status();
      res.set_content(kserve::error_json(e.what()), "application/json");
    }
  }

  StubConfig config_;
  kserve::ModelMetadata model_;
  httplib::Server server_;
  std::thread thread_;
  int port_ = 0;
  std::atomic<int> infers_{0};
  std::atomic<int> in_flight_{0};
  std::atomic<int> max_in_flight_{0};
  mutable std::mutex mutex_;
  httplib::Request last_;
  std::set<int> ports_;
};

inline LoadOptions open_loop(const KserveStub& stub, double rate, double duration_s, int connections) {
  LoadOptions options;
  options.url = stub.url();
  options.model = "simple";
  options.schedule = serve::RateSchedule::constant(rate);
  options.spacing = serve::ArrivalSpacing::constant;
  options.duration_s = duration_s;
  options.connections = connections;
  options.timeout_s = 5.0;
  return options;
}

inline LoadOptions closed_loop(const KserveStub& stub, int clients, double duration_s) {
  LoadOptions options;
  options.url = stub.url();
  options.model = "simple";
  options.mode = LoadMode::closed_loop;
  options.clients = clients;
  options.duration_s = duration_s;
  options.timeout_s = 5.0;
  return options;
}

// test::expect_error_from, and the message is one line (main() prints it as one).
inline void expect_error(const std::function<void()>& call, ErrorCode code, const std::string& fragment) {
  test::expect_error_from(
      [&] {
        try {
          call();
        } catch (const Error& e) {
          EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << "not one line: " << e.what();
          throw;
        }
      },
      code, fragment);
}

inline std::uint64_t count_of(const LoadReport& report, int status) {
  for (const auto& e : report.errors) {
    if (e.http_status == status) return e.count;
  }
  return 0;
}

}  // namespace gpucap::service::load_stub
