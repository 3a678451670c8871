// `gpucap load` against an in-process KServe v2 stub on 127.0.0.1 (cpp-httplib, a port the
// kernel picks): counts of answers, rejections and failures, goodput against the SLO, latency
// from the scheduled time when connections are few, the closed loop's bound on requests in
// flight, the request framing (checked with gpucap's own codec and by hand against Triton's
// client), and the tool's own errors. Every run is bounded to well under a second or two.

#include "gpucap/service/load_generator.hpp"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "gpucap/core/error.hpp"
#include "gpucap/service/kserve_client.hpp"
#include "gpucap/service/kserve_protocol.hpp"
#include "support/free_port.hpp"

namespace gpucap::service {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;

struct StubConfig {
  milliseconds delay{0};
  int reject_every = 0;       // every Nth inference request: 429 with Retry-After
  std::string retry_after = "1";
  int unavailable_every = 0;  // every Nth: 503
  int fail_every = 0;         // every Nth: 500 {"error": "engine failed"}
  int cut_every = 0;          // every Nth: the connection is cut in the middle of the answer
  std::size_t keep_alive_max = 10'000;
  int threads = 32;
  int port = 0;  // 0: any free one
};

// Triton's "simple" model, with one INT32 and one FP32 input so that the order shows.
kserve::ModelMetadata stub_model() {
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

LoadOptions open_loop(const KserveStub& stub, double rate, double duration_s, int connections) {
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

LoadOptions closed_loop(const KserveStub& stub, int clients, double duration_s) {
  LoadOptions options;
  options.url = stub.url();
  options.model = "simple";
  options.mode = LoadMode::closed_loop;
  options.clients = clients;
  options.duration_s = duration_s;
  options.timeout_s = 5.0;
  return options;
}

void expect_error(const std::function<void()>& call, ErrorCode code, const std::string& fragment) {
  try {
    call();
    ADD_FAILURE() << "no error; expected one containing: " << fragment;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << "not one line: " << e.what();
  }
}

std::uint64_t count_of(const LoadReport& report, int status) {
  for (const auto& e : report.errors) {
    if (e.http_status == status) return e.count;
  }
  return 0;
}

// --- Counts, goodput, the report ---

TEST(LoadGeneratorTest, OpenLoopAnswersEveryRequestOfAFastServer) {
  KserveStub stub({});
  auto options = open_loop(stub, 200.0, 0.5, 8);
  options.slo_s = 1.0;  // loopback answers take well under a millisecond, even on a busy machine
  const auto report = run_load(options, nullptr);
  EXPECT_EQ(report.scheduled, 100U);  // constant spacing: exactly rate x duration
  EXPECT_EQ(report.sent, 100U);
  EXPECT_EQ(report.answered, 100U);
  EXPECT_EQ(report.rejected(), 0U);
  EXPECT_EQ(report.failed(), 0U);
  EXPECT_EQ(stub.infers(), 100);
  EXPECT_EQ(report.within_slo, 100U);
  EXPECT_DOUBLE_EQ(report.slo_attainment, 1.0);
  EXPECT_EQ(report.stop_reason, "duration");
  EXPECT_NEAR(report.throughput_rps, 200.0, 20.0);
  EXPECT_NEAR(report.offered_rps, 200.0, 20.0);
  EXPECT_LT(report.latency.p99_s, 0.1);
  EXPECT_LE(report.latency.p50_s, report.latency.p95_s);
  EXPECT_LE(report.latency.p95_s, report.latency.p99_s);
  EXPECT_LE(report.latency.p99_s, report.latency.max_s);

  const auto j = to_json(report);
  for (const char* key : {"sent", "answered", "rejected", "failed", "throughput_rps", "goodput_rps", "slo_attainment"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  for (const char* key : {"p50", "p95", "p99", "max"}) EXPECT_TRUE(j["latency_ms"].contains(key)) << key;
  EXPECT_EQ(j["measured"], true);
  EXPECT_EQ(j["latency_from"], "scheduled");
  const auto text = to_text(report);
  EXPECT_NE(text.find("MEASURED over HTTP"), std::string::npos) << text;
  EXPECT_NE(text.find("scheduled send time"), std::string::npos) << text;
}

TEST(LoadGeneratorTest, SeparatesSheddingUnavailabilityAndFailures) {
  StubConfig config;
  config.reject_every = 5;       // 5, 10, ..., 70: 14
  config.unavailable_every = 11; // 11, 22, 33, 44, 66 (55 is shed first): 5
  config.fail_every = 7;         // 7, 14, 21, 28, 42, 49, 56, 63 (35, 70 shed first): 8
  KserveStub stub(config);
  const auto report = run_load(open_loop(stub, 100.0, 0.7, 4), nullptr);
  ASSERT_EQ(report.sent, 70U);
  EXPECT_EQ(report.rejected_429, 14U);
  EXPECT_EQ(report.rejected_503, 5U);
  EXPECT_EQ(report.rejected(), 19U);
  EXPECT_EQ(report.failed_http, 8U);
  EXPECT_EQ(report.failed(), 8U);
  EXPECT_EQ(report.answered, 43U);
  EXPECT_NEAR(report.slo_attainment, 43.0 / 70.0, 1e-9);
  EXPECT_NEAR(report.goodput_rps, 43.0 / report.elapsed_s, 1e-9);
  EXPECT_EQ(count_of(report, 429), 14U);
  EXPECT_EQ(count_of(report, 503), 5U);
  EXPECT_EQ(count_of(report, 500), 8U);
  bool engine_message = false;
  for (const auto& e : report.errors) engine_message = engine_message || e.message == "engine failed";
  EXPECT_TRUE(engine_message);
  // How fast the 429s came back, and their Retry-After.
  EXPECT_EQ(report.rejection.count, 14U);
  EXPECT_LT(report.rejection.p99_s, 0.1);
  EXPECT_EQ(report.retry_after_count, 14U);
  ASSERT_TRUE(report.max_retry_after_s);
  EXPECT_DOUBLE_EQ(*report.max_retry_after_s, 1.0);
  const auto j = to_json(report);
  EXPECT_EQ(j["rejected_429"], 14);
  EXPECT_EQ(j["retry_after"]["max_s"], 1.0);
  EXPECT_TRUE(j["rejection_latency_ms"].contains("p99"));
}

TEST(LoadGeneratorTest, TheWarmUpsRequestsAreSentButNotCounted) {
  StubConfig config;
  config.fail_every = 10;  // the 10th, 20th, ..., 50th requests: one in the warm-up (at 90 ms), four after it
  KserveStub stub(config);
  auto options = open_loop(stub, 100.0, 0.5, 4);
  options.warmup_s = 0.15;  // constant spacing: requests at 0, 10, ..., 140 ms are the warm-up's 15
  const auto report = run_load(options, nullptr);
  EXPECT_EQ(stub.infers(), 50);  // every request was sent
  EXPECT_EQ(report.warmup_requests, 15U);
  EXPECT_EQ(report.scheduled, 35U);
  EXPECT_EQ(report.sent, 35U);
  EXPECT_EQ(report.failed_http, 4U);  // the 20th to 50th requests, at 190 to 490 ms
  EXPECT_EQ(count_of(report, 500), report.failed_http) << "the warm-up's failure is not among the errors";
  EXPECT_EQ(report.answered + report.failed_http, 35U);
  // Rates over the time after the warm-up (to the last answer), not over the whole run.
  EXPECT_NEAR(report.offered_rps, 35.0 / (report.elapsed_s - 0.15), 1e-9);
  EXPECT_NEAR(report.throughput_rps, static_cast<double>(report.answered) / (report.elapsed_s - 0.15), 1e-9);
  const auto j = to_json(report);
  EXPECT_EQ(j["warmup_requests"], 15);
  EXPECT_DOUBLE_EQ(j["warmup_s"].get<double>(), 0.15);
  EXPECT_NE(to_text(report).find("the 15 requests scheduled in the first 0.15 s are not counted"), std::string::npos)
      << to_text(report);

  options.warmup_s = 0.5;  // not less than the duration
  expect_error([&] { (void)run_load(options, nullptr); }, ErrorCode::usage, "--warmup");
  options.warmup_s = -1.0;
  expect_error([&] { (void)run_load(options, nullptr); }, ErrorCode::usage, "--warmup");
}

TEST(LoadGeneratorTest, CountsCutConnectionsAsFailuresAndCarriesOn) {
  StubConfig config;
  config.cut_every = 4;
  KserveStub stub(config);
  const auto report = run_load(open_loop(stub, 100.0, 0.4, 4), nullptr);
  EXPECT_EQ(report.sent, 40U);
  EXPECT_EQ(report.failed_transport, 10U);
  EXPECT_EQ(report.answered, 30U);
  EXPECT_EQ(count_of(report, 0), 10U);
}

TEST(LoadGeneratorTest, ReconnectsWhenTheServerClosesKeepAliveConnections) {
  StubConfig config;
  config.keep_alive_max = 3;  // the server closes each connection after three requests
  KserveStub stub(config);
  const auto report = run_load(open_loop(stub, 200.0, 0.3, 2), nullptr);
  // What this asks: a connection the server closed is reopened, and no request fails on it. A
  // reconnect can take tens of ms on a loaded or instrumented (TSan) build, so the last arrival
  // may find no free connection before sending stops: it is then unsent, never failed.
  EXPECT_EQ(report.scheduled, 60U);
  EXPECT_EQ(report.sent + report.unsent, 60U);
  EXPECT_GE(report.sent, 55U) << to_text(report);
  EXPECT_EQ(report.answered, report.sent) << to_text(report);
  EXPECT_EQ(report.failed(), 0U) << to_text(report);
}

TEST(LoadGeneratorTest, GoodputCountsOnlyAnswersWithinTheSlo) {
  StubConfig config;
  config.delay = milliseconds(30);
  KserveStub stub(config);
  auto options = open_loop(stub, 50.0, 0.4, 8);
  options.slo_s = 0.010;  // every answer takes >= 30 ms
  const auto missed = run_load(options, nullptr);
  EXPECT_EQ(missed.answered, 20U);
  EXPECT_EQ(missed.within_slo, 0U);
  EXPECT_DOUBLE_EQ(missed.goodput_rps, 0.0);
  EXPECT_DOUBLE_EQ(missed.slo_attainment, 0.0);
  EXPECT_GT(missed.throughput_rps, 0.0);
  options.slo_s = 1.0;
  const auto met = run_load(options, nullptr);
  EXPECT_EQ(met.within_slo, 20U);
  EXPECT_DOUBLE_EQ(met.goodput_rps, met.throughput_rps);
}

// --- Open loop: latency from the scheduled time ---

TEST(LoadGeneratorTest, OpenLoopLatencyIncludesWaitingForAConnection) {
  StubConfig config;
  config.delay = milliseconds(50);
  KserveStub stub(config);
  // 40/s (every 25 ms) against 50 ms answers on one connection: request k goes out at ~50k ms,
  // 25k ms late, so latency grows by 25 ms per request; requests not sent by 0.5 s are unsent.
  const auto queued = run_load(open_loop(stub, 40.0, 0.5, 1), nullptr);
  EXPECT_EQ(queued.scheduled, 20U);
  EXPECT_EQ(queued.sent + queued.unsent, 20U);
  EXPECT_GE(queued.unsent, 7U) << to_text(queued);
  EXPECT_LE(queued.sent, 12U);
  EXPECT_LT(queued.service.p99_s, 0.2);
  EXPECT_GT(queued.latency.max_s, 0.2) << "latency must count from the scheduled time";
  EXPECT_GT(queued.latency.max_s, 3.0 * queued.service.p50_s);
  EXPECT_GT(queued.send_lag.max_s, 0.15);
  EXPECT_EQ(queued.max_in_flight, 1);
  EXPECT_LT(queued.slo_attainment, 0.3);  // unsent requests are misses too
  // Enough connections: no waiting, latency is the service time.
  const auto spread = run_load(open_loop(stub, 40.0, 0.5, 8), nullptr);
  EXPECT_EQ(spread.answered, 20U);
  EXPECT_EQ(spread.unsent, 0U);
  EXPECT_LT(spread.latency.max_s, 0.2);
  EXPECT_GE(spread.max_in_flight, 2);
}

TEST(LoadGeneratorTest, OpenLoopUsesNoMoreConnectionsThanTheLoadNeeds) {
  // A server that gives each connection a thread (cpp-httplib) must not find them all held by a
  // light load: the most recently idle connection takes the next request.
  KserveStub stub({});
  const auto report = run_load(open_loop(stub, 100.0, 0.3, 16), nullptr);
  EXPECT_EQ(report.answered, 30U);
  // ~0.1 requests in flight on average: one or two connections, a few on a slow machine; not 16.
  EXPECT_LE(report.connections_used, 6);
  EXPECT_LE(stub.connections(), 6U);
  EXPECT_EQ(to_json(report)["connections_used"], report.connections_used);
}

TEST(LoadGeneratorTest, RateScheduleReportsEachStep) {
  KserveStub stub({});
  auto options = open_loop(stub, 1.0, 0.75, 8);
  options.schedule = serve::RateSchedule::parse("0:40,0.25:0,0.5:80");
  const auto report = run_load(options, nullptr);
  ASSERT_EQ(report.segments.size(), 3U);
  EXPECT_EQ(report.segments[0].scheduled, 10U);
  EXPECT_EQ(report.segments[1].scheduled, 0U);
  EXPECT_EQ(report.segments[2].scheduled, 20U);
  EXPECT_EQ(report.segments[2].answered, 20U);
  EXPECT_DOUBLE_EQ(report.segments[2].rate_per_s, 80.0);
  EXPECT_EQ(to_json(report)["segments"].size(), 3U);
}

TEST(LoadGeneratorTest, TraceArrivalsAreSentAtTheirTimes) {
  KserveStub stub({});
  auto options = open_loop(stub, 1.0, 1.0, 4);
  options.schedule.reset();
  options.trace_s = serve::parse_arrival_trace("time_s\n0\n0.05\n0.1\n0.3\n", "trace.csv");
  options.trace_name = "trace.csv";
  const auto started = std::chrono::steady_clock::now();
  const auto report = run_load(options, nullptr);
  const auto took = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  EXPECT_EQ(report.answered, 4U);
  EXPECT_EQ(report.stop_reason, "trace_end");
  EXPECT_GE(report.elapsed_s, 0.3);
  EXPECT_LT(took, 0.9) << "the run ends with the trace, not at --duration";
  EXPECT_EQ(report.arrivals, "trace trace.csv");
}

TEST(LoadGeneratorTest, MaxRequestsBoundsTheRun) {
  KserveStub stub({});
  auto options = open_loop(stub, 1000.0, 5.0, 4);
  options.max_requests = 25;
  const auto report = run_load(options, nullptr);
  EXPECT_EQ(report.sent, 25U);
  EXPECT_EQ(report.stop_reason, "max_requests");
  EXPECT_LT(report.elapsed_s, 1.0);
}

// --- Closed loop ---

TEST(LoadGeneratorTest, ClosedLoopKeepsAtMostNClientsInFlight) {
  StubConfig config;
  config.delay = milliseconds(20);
  KserveStub stub(config);
  const auto report = run_load(closed_loop(stub, 3, 0.5), nullptr);
  EXPECT_LE(stub.max_in_flight(), 3);
  EXPECT_EQ(stub.max_in_flight(), 3) << "three clients should overlap";
  EXPECT_LE(report.max_in_flight, 3);
  EXPECT_GE(report.answered, 30U);  // ~3 x 0.5 s / 20 ms = 75 on an idle machine
  EXPECT_LE(report.answered, 78U);
  EXPECT_EQ(report.unsent, 0U);
  EXPECT_EQ(to_json(report)["latency_from"], "sent");
  EXPECT_EQ(to_json(report)["clients"], 3);
}

TEST(LoadGeneratorTest, ManyClosedLoopClientsConnectBeforeTheStart) {
  // Sixteen clients connecting at once would overflow cpp-httplib's listen backlog of 5, and the
  // dropped connections would retry a second later: they connect one by one before the clock.
  KserveStub stub({});
  const auto report = run_load(closed_loop(stub, 16, 0.3), nullptr);
  EXPECT_EQ(report.connections_used, 16);
  EXPECT_EQ(stub.connections(), 16U);
  EXPECT_LT(report.latency.max_s, 0.5) << to_text(report);
  EXPECT_EQ(report.failed(), 0U);
}

TEST(LoadGeneratorTest, ClosedLoopThinkTimeAndRetryAfterPauseTheClient) {
  KserveStub fast({});
  auto thinking = closed_loop(fast, 1, 0.5);
  thinking.think_s = 0.1;
  const auto thought = run_load(thinking, nullptr);
  EXPECT_GE(thought.sent, 4U);
  EXPECT_LE(thought.sent, 5U);

  StubConfig config;
  config.reject_every = 1;  // every request is shed with Retry-After: 1
  KserveStub shedding(config);
  const auto report = run_load(closed_loop(shedding, 2, 0.5), nullptr);
  EXPECT_EQ(report.sent, 2U) << "each client waits Retry-After (past the end of the run)";
  EXPECT_EQ(report.rejected_429, 2U);
}

// --- The request on the wire ---

TEST(LoadGeneratorTest, BinaryRequestIsFramedAsTritonsClientFramesIt) {
  KserveStub stub({});
  auto options = open_loop(stub, 100.0, 1.0, 1);
  options.binary = true;
  options.batch = 4;
  options.max_requests = 1;
  const auto report = run_load(options, nullptr);
  ASSERT_EQ(report.answered, 1U) << to_text(report);  // the stub parsed it with gpucap's codec
  const auto request = stub.last_request();
  EXPECT_EQ(request.get_header_value("Content-Type"), "application/octet-stream");
  EXPECT_EQ(request.get_header_value("Accept-Encoding"), "identity");
  const auto header_length = std::stoul(request.get_header_value("Inference-Header-Content-Length"));
  ASSERT_LT(header_length, request.body.size());
  const auto header = json::parse(request.body.substr(0, header_length));
  EXPECT_EQ(header["id"], "");
  EXPECT_EQ(header["parameters"]["binary_data_output"], true);
  ASSERT_EQ(header["inputs"].size(), 2U);
  EXPECT_EQ(header["inputs"][0]["name"], "INPUT0");
  EXPECT_EQ(header["inputs"][0]["datatype"], "INT32");
  EXPECT_EQ(header["inputs"][0]["shape"], json::array({4, 16}));
  EXPECT_EQ(header["inputs"][0]["parameters"]["binary_data_size"], 4 * 16 * 4);
  EXPECT_FALSE(header["inputs"][0].contains("data"));
  EXPECT_EQ(header["inputs"][1]["name"], "INPUT1");
  EXPECT_EQ(request.body.size(), header_length + 2 * 4 * 16 * 4);
  EXPECT_EQ(report.request_bytes, request.body.size());
  EXPECT_EQ(report.inputs, "INPUT0 INT32 [4,16], INPUT1 FP32 [4,16]");
}

TEST(LoadGeneratorTest, JsonRequestCarriesTheDataAsNumbers) {
  KserveStub stub({});
  auto options = open_loop(stub, 100.0, 1.0, 1);
  options.max_requests = 1;
  const auto report = run_load(options, nullptr);
  ASSERT_EQ(report.answered, 1U) << to_text(report);
  const auto request = stub.last_request();
  EXPECT_EQ(request.get_header_value("Content-Type"), "application/json");
  EXPECT_FALSE(request.has_header("Inference-Header-Content-Length"));
  const auto body = json::parse(request.body);
  ASSERT_EQ(body["inputs"].size(), 2U);
  EXPECT_EQ(body["inputs"][0]["shape"], json::array({1, 16}));
  EXPECT_EQ(body["inputs"][0]["data"].size(), 16U);
  EXPECT_TRUE(body["inputs"][1]["data"][0].is_number_float());
}

TEST(LoadGeneratorTest, SameSeedSameRequest) {
  const auto model = stub_model();
  const auto a = kserve::encode_infer_request(kserve::make_request_inputs(model, 2, {}, 5), false);
  const auto b = kserve::encode_infer_request(kserve::make_request_inputs(model, 2, {}, 5), false);
  const auto c = kserve::encode_infer_request(kserve::make_request_inputs(model, 2, {}, 6), false);
  EXPECT_EQ(a.body, b.body);
  EXPECT_NE(a.body, c.body);
  // Every datatype encodes and parses back with gpucap's codec, as JSON and as binary.
  kserve::ModelMetadata all_types{"all", {"1"}, "", {}, {{"OUT", kserve::Datatype::fp32, {-1, 1}}}, 4};
  for (const auto datatype :
       {kserve::Datatype::boolean, kserve::Datatype::uint8, kserve::Datatype::uint16, kserve::Datatype::uint32,
        kserve::Datatype::uint64, kserve::Datatype::int8, kserve::Datatype::int16, kserve::Datatype::int32,
        kserve::Datatype::int64, kserve::Datatype::fp32, kserve::Datatype::fp64, kserve::Datatype::bytes}) {
    all_types.inputs.push_back({"IN_" + std::string(kserve::to_string(datatype)), datatype, {-1, 3}});
  }
  const auto inputs = kserve::make_request_inputs(all_types, 2, {}, 1);
  for (const bool binary : {false, true}) {
    const auto encoded = kserve::encode_infer_request(inputs, binary);
    const auto parsed = kserve::parse_infer_request(encoded.body, encoded.header_length, all_types);
    ASSERT_EQ(parsed.inputs.size(), inputs.size());
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      EXPECT_EQ(parsed.inputs[i].data, inputs[i].data) << inputs[i].name << (binary ? " binary" : " JSON");
    }
  }
}

// --- The tool's own errors: one line, a code main() maps to an exit status ---

TEST(LoadGeneratorTest, UnknownModelIsTheServers404) {
  KserveStub stub({});
  auto options = open_loop(stub, 10.0, 0.1, 1);
  options.model = "nope";
  expect_error([&] { (void)run_load(options, nullptr); }, ErrorCode::usage, "does not know model 'nope'");
  expect_error([&] { (void)run_load(options, nullptr); }, ErrorCode::usage, "404: unknown model 'nope'");
  EXPECT_EQ(stub.infers(), 0);
}

TEST(LoadGeneratorTest, UnreachableServerIsAnIoError) {
  LoadOptions options;
  options.url = "http://127.0.0.1:" + std::to_string(test::free_port());
  options.model = "simple";
  options.schedule = serve::RateSchedule::constant(10.0);
  options.duration_s = 0.1;
  expect_error([&] { (void)run_load(options, nullptr); }, ErrorCode::io, "cannot reach the KServe server at");
}

// --wait-s: a server that comes up a moment after the load generator starts is waited for, and
// one that does not come up is the same io error, after the wait, saying so.
TEST(LoadGeneratorTest, WaitsForAServerThatComesUpWithinWaitS) {
  const int port = test::free_port();
  LoadOptions options;
  options.url = "http://127.0.0.1:" + std::to_string(port);
  options.model = "simple";
  options.schedule = serve::RateSchedule::constant(50.0);
  options.duration_s = 0.2;
  options.wait_s = 20.0;
  std::unique_ptr<KserveStub> stub;
  std::string stub_error;  // the port taken meanwhile: the test fails rather than the binary
  std::thread later([&] {
    std::this_thread::sleep_for(milliseconds(500));
    StubConfig config;
    config.port = port;
    try {
      stub = std::make_unique<KserveStub>(config);
    } catch (const std::exception& e) {
      stub_error = e.what();
    }
  });
  const auto started = std::chrono::steady_clock::now();
  LoadReport report;
  EXPECT_NO_THROW(report = run_load(options, nullptr));
  later.join();
  ASSERT_EQ(stub_error, "");
  EXPECT_GE(std::chrono::steady_clock::now() - started, milliseconds(500));
  EXPECT_GT(report.answered, 0U);
  EXPECT_EQ(report.failed(), 0U);
  ASSERT_TRUE(stub);
  EXPECT_EQ(static_cast<std::uint64_t>(stub->infers()), report.answered);
}

TEST(LoadGeneratorTest, AServerThatDoesNotComeUpWithinWaitSIsAnIoError) {
  LoadOptions options;
  options.url = "http://127.0.0.1:" + std::to_string(test::free_port());
  options.model = "simple";
  options.schedule = serve::RateSchedule::constant(10.0);
  options.duration_s = 0.1;
  options.wait_s = 0.6;
  const auto started = std::chrono::steady_clock::now();
  expect_error([&] { (void)run_load(options, nullptr); }, ErrorCode::io, "(asked for 0.6 s, --wait-s)");
  EXPECT_GE(std::chrono::steady_clock::now() - started, milliseconds(600));
  // A model the server does not know is final at once, also with a wait.
  KserveStub stub({});
  options.url = stub.url();
  options.model = "nope";
  options.wait_s = 30.0;
  const auto asked = std::chrono::steady_clock::now();
  expect_error([&] { (void)run_load(options, nullptr); }, ErrorCode::usage, "does not know model 'nope'");
  EXPECT_LT(std::chrono::steady_clock::now() - asked, std::chrono::seconds(10));
}

// A server that takes the connection but does not answer yet (gpucap serve in its warm-up: its
// socket listens, nothing accepts): no ask outlasts the wait, where one ask alone may take 10 s.
TEST(LoadGeneratorTest, AServerThatDoesNotAnswerYetIsAskedAgainWithinWaitS) {
  const int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(listener, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(listener, reinterpret_cast<const sockaddr*>(&address), sizeof address), 0);
  ASSERT_EQ(::listen(listener, 64), 0);  // the kernel completes connections; nobody reads them
  socklen_t length = sizeof address;
  ASSERT_EQ(::getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length), 0);
  LoadOptions options;
  options.url = "http://127.0.0.1:" + std::to_string(ntohs(address.sin_port));
  options.model = "simple";
  options.schedule = serve::RateSchedule::constant(10.0);
  options.duration_s = 0.1;
  options.wait_s = 1.0;
  const auto started = std::chrono::steady_clock::now();
  expect_error([&] { (void)run_load(options, nullptr); }, ErrorCode::io, "(asked for 1 s, --wait-s)");
  const auto waited = std::chrono::steady_clock::now() - started;
  ::close(listener);
  EXPECT_GE(waited, milliseconds(1000));
  EXPECT_LT(waited, milliseconds(5000)) << "an ask outlasted the wait";
}

TEST(LoadGeneratorTest, BadUrlsAndOptionsAreUsageErrors) {
  expect_error([] { (void)kserve::parse_server_url("127.0.0.1:8000"); }, ErrorCode::usage, "has no scheme");
  expect_error([] { (void)kserve::parse_server_url("ftp://host"); }, ErrorCode::usage, "other than http");
  expect_error([] { (void)kserve::parse_server_url("http://"); }, ErrorCode::usage, "has no host");
  expect_error([] { (void)kserve::parse_server_url("http://host:99999"); }, ErrorCode::usage, "port");
  const auto prefixed = kserve::parse_server_url("http://host:8000/serving/");
  EXPECT_EQ(prefixed.scheme_host_port, "http://host:8000");
  EXPECT_EQ(kserve::model_path(prefixed, "m", "2"), "/serving/v2/models/m/versions/2");

  KserveStub stub({});
  auto options = open_loop(stub, 10.0, 0.1, 1);
  options.url = "localhost:1";
  expect_error([&] { (void)run_load(options, nullptr); }, ErrorCode::usage, "has no scheme");
  options = open_loop(stub, 10.0, 0.1, 0);
  expect_error([&] { (void)run_load(options, nullptr); }, ErrorCode::usage, "--connections");
  options = open_loop(stub, 10.0, 0.1, 1);
  options.schedule.reset();
  expect_error([&] { (void)run_load(options, nullptr); }, ErrorCode::usage, "--rate");
  options = open_loop(stub, 10.0, 0.1, 1);
  options.wait_s = -1.0;
  expect_error([&] { (void)run_load(options, nullptr); }, ErrorCode::usage, "--wait-s must be from 0 to 3600 seconds, got -1");
  options = open_loop(stub, 10.0, 0.1, 1);
  options.batch = 9;
  options.max_requests = 1;
  // The stub's model batches up to 8: the server refuses, the run reports it.
  const auto refused = run_load(options, nullptr);
  EXPECT_EQ(refused.failed_http, 1U);
  EXPECT_EQ(count_of(refused, 400), 1U);
}

TEST(LoadGeneratorTest, ShapesComeFromTheMetadataOrFromShapeFlags) {
  kserve::ModelMetadata fixed{"fixed", {"1"}, "", {{"X", kserve::Datatype::fp32, {3, 4}}}, {}, 0};
  EXPECT_EQ(kserve::make_request_inputs(fixed, 1, {}, 1)[0].shape, (std::vector<std::int64_t>{3, 4}));
  expect_error([&] { (void)kserve::make_request_inputs(fixed, 2, {}, 1); }, ErrorCode::usage,
               "without a batch dimension");
  kserve::ModelMetadata variable{"var", {"1"}, "", {{"TOKENS", kserve::Datatype::int64, {-1, -1}}}, {}, 8};
  expect_error([&] { (void)kserve::make_request_inputs(variable, 1, {}, 1); }, ErrorCode::usage,
               "--shape TOKENS:D1,D2");
  const std::vector<kserve::InputShape> shapes = {kserve::parse_input_shape("TOKENS:128")};
  EXPECT_EQ(kserve::make_request_inputs(variable, 2, shapes, 1)[0].shape, (std::vector<std::int64_t>{2, 128}));
  const std::vector<kserve::InputShape> wrong = {kserve::parse_input_shape("OTHER:1")};
  expect_error([&] { (void)kserve::make_request_inputs(variable, 1, wrong, 1); }, ErrorCode::usage,
               "not an input of model 'var'");
  expect_error([] { (void)kserve::parse_input_shape("X:0"); }, ErrorCode::usage, "NAME:D1,D2");
  kserve::ModelMetadata half{"half", {"1"}, "", {{"H", kserve::Datatype::fp16, {-1, 2}}}, {}, 8};
  const auto inputs = kserve::make_request_inputs(half, 1, {}, 1);
  expect_error([&] { (void)kserve::encode_infer_request(inputs, false); }, ErrorCode::usage, "add --binary");
  EXPECT_TRUE(kserve::encode_infer_request(inputs, true).header_length);
}

TEST(LoadGeneratorTest, MetadataThatIsNotMetadataIsInvalidData) {
  expect_error([] { (void)kserve::parse_model_metadata("<html>", "http://x/v2/models/m"); }, ErrorCode::invalid_data,
               "model metadata from http://x/v2/models/m: not a JSON object");
  expect_error([] { (void)kserve::parse_model_metadata(R"({"name":"m"})", "s"); }, ErrorCode::invalid_data,
               "no \"inputs\"");
  expect_error([] { (void)kserve::parse_model_metadata(R"({"inputs":[{"name":"x","datatype":"FP8","shape":[1]}]})", "s"); },
               ErrorCode::invalid_data, "unknown datatype 'FP8'");
  const auto triton = kserve::parse_model_metadata(
      R"({"name":"simple","versions":["1"],"platform":"tensorflow_graphdef","inputs":[{"name":"INPUT0","datatype":"INT32","shape":[-1,16]}],"outputs":[{"name":"OUTPUT0","datatype":"INT32","shape":[-1,16]}]})",
      "s");
  EXPECT_EQ(triton.inputs[0].shape, (std::vector<std::int64_t>{-1, 16}));
  EXPECT_EQ(triton.outputs.size(), 1U);
}

// --- Stopping ---

TEST(LoadGeneratorTest, StopsOnRequestAndReportsWhatItMeasured) {
  KserveStub stub({});
  std::atomic<bool> stop{false};
  std::thread stopper([&stop] {
    std::this_thread::sleep_for(milliseconds(200));
    stop = true;
  });
  const auto started = std::chrono::steady_clock::now();
  const auto report = run_load(open_loop(stub, 100.0, 10.0, 4), &stop);
  stopper.join();
  const auto took = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  EXPECT_LT(took, 1.5);
  EXPECT_TRUE(report.interrupted);
  EXPECT_EQ(report.stop_reason, "signal");
  EXPECT_GE(report.answered, 10U);
  EXPECT_LE(report.answered, 40U);
  EXPECT_NEAR(report.elapsed_s, 0.2, 0.15);
  EXPECT_NEAR(report.offered_rps, 100.0, 40.0) << "over the time it ran, not the --duration it was given";
}

TEST(LoadGeneratorTest, StopCancelsRequestsStillInFlightAfterTheGrace) {
  StubConfig config;
  config.delay = milliseconds(1500);
  KserveStub stub(config);
  std::atomic<bool> stop{false};
  auto options = closed_loop(stub, 2, 10.0);
  options.stop_grace_s = 0.1;
  std::thread stopper([&stop] {
    std::this_thread::sleep_for(milliseconds(100));
    stop = true;
  });
  const auto started = std::chrono::steady_clock::now();
  const auto report = run_load(options, &stop);
  stopper.join();
  const auto took = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  EXPECT_LT(took, 1.0);
  EXPECT_EQ(report.cancelled, 2U);
  EXPECT_EQ(report.failed(), 0U);
  EXPECT_DOUBLE_EQ(report.slo_attainment, 1.0) << "cancelled requests are not judged";
}

TEST(LoadGeneratorTest, TimeoutIsAFailureOfItsOwn) {
  StubConfig config;
  config.delay = milliseconds(400);
  KserveStub stub(config);
  auto options = open_loop(stub, 10.0, 0.2, 2);
  options.timeout_s = 0.1;
  const auto report = run_load(options, nullptr);
  EXPECT_EQ(report.sent, 2U);
  EXPECT_EQ(report.timed_out, 2U);
  EXPECT_EQ(report.failed(), 2U);
  EXPECT_EQ(report.answered, 0U);
}

}  // namespace
}  // namespace gpucap::service
