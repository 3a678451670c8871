// `gpucap load` against an in-process KServe v2 stub on 127.0.0.1 (cpp-httplib, a port the
// kernel picks): counts of answers, rejections and failures, goodput against the SLO, latency
// from the scheduled time when connections are few, the closed loop's bound on requests in
// flight, the request framing (checked with gpucap's own codec and by hand against Triton's
// client), and stopping; its own errors are load_generator_errors_test.cpp's. Every run is bounded
// to well under a second or two.

#include "gpucap/service/load_generator.hpp"

#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "gpucap/core/error.hpp"
#include "gpucap/service/kserve_client.hpp"
#include "gpucap/service/kserve_protocol.hpp"
#include "service/kserve_stub.hpp"

namespace gpucap::service {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;
using load_stub::closed_loop;
using load_stub::count_of;
using load_stub::expect_error;
using load_stub::KserveStub;
using load_stub::open_loop;
using load_stub::StubConfig;
using load_stub::stub_model;

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
  // A --duration that cuts the trace short is what ended the run.
  options.duration_s = 0.2;
  const auto cut = run_load(options, nullptr);
  EXPECT_EQ(cut.answered, 3U);
  EXPECT_EQ(cut.stop_reason, "duration");
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
  // A Retry-After of more seconds than a clock holds in nanoseconds is a wait to the end of the
  // run, not a wrapped (negative) one that resends at once.
  config.retry_after = "10000000000000";
  KserveStub far(config);
  const auto waiting = run_load(closed_loop(far, 1, 0.3), nullptr);
  EXPECT_EQ(waiting.sent, 1U);
  EXPECT_EQ(waiting.max_retry_after_s, 7 * 24 * 3600.0);
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

// One request that hangs to its timeout ends nothing: the rates are over the run's sending
// window and answers, not stretched to the hung request's end (which would read them at half).
TEST(LoadGeneratorTest, AHungRequestDoesNotStretchTheRatesOfTheRun) {
  StubConfig config;
  config.hold_nth = 5;
  config.hold = milliseconds(1500);
  KserveStub stub(config);
  auto options = open_loop(stub, 100.0, 0.5, 8);
  options.timeout_s = 1.0;
  const auto report = run_load(options, nullptr);
  EXPECT_EQ(report.timed_out, 1U);
  EXPECT_EQ(report.answered + 1, report.sent);
  EXPECT_NEAR(report.elapsed_s, 0.5, 0.1);
  EXPECT_GT(report.throughput_rps, 80.0);
  EXPECT_GT(report.goodput_rps, 80.0);
}

// --timeout-ms bounds the whole answer: a server that trickles it (each read well inside the
// timeout) is stopped at the deadline, and the request counts as timed out, not answered.
TEST(LoadGeneratorTest, TheTimeoutIsADeadlineForTheWholeAnswer) {
  StubConfig config;
  config.trickle_every = milliseconds(40);
  config.trickle_bytes = 20;  // 0.8 s in all
  KserveStub stub(config);
  auto options = open_loop(stub, 10.0, 0.05, 1);
  options.timeout_s = 0.2;
  const auto started = std::chrono::steady_clock::now();
  const auto report = run_load(options, nullptr);
  const auto took = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  EXPECT_EQ(report.sent, 1U);
  EXPECT_EQ(report.timed_out, 1U);
  EXPECT_EQ(report.answered, 0U);
  EXPECT_LT(took, 0.6) << "the run waited for the trickled answer";
}

// A stop while the open loop is behind judges every arrival already due: those still waiting for
// a connection are unsent (SLO misses), not forgotten.
TEST(LoadGeneratorTest, AStopDuringOverloadCountsTheBacklogAsUnsent) {
  StubConfig config;
  config.delay = milliseconds(200);
  KserveStub stub(config);
  auto options = open_loop(stub, 100.0, 5.0, 1);
  options.slo_s = 1.0;
  std::atomic<bool> stop{false};
  std::thread stopper([&stop] {
    std::this_thread::sleep_for(milliseconds(500));
    stop = true;
  });
  const auto report = run_load(options, &stop);
  stopper.join();
  EXPECT_TRUE(report.interrupted);
  // One arrival every 10 ms up to the stop (the run's own time: its setup came out of the 500 ms;
  // elapsed_s runs on to the last answer, the one in flight at the stop).
  EXPECT_GE(report.scheduled, 20U);
  EXPECT_LE(static_cast<double>(report.scheduled), report.elapsed_s * 100.0 + 2.0);
  EXPECT_EQ(report.scheduled, report.sent + report.unsent);
  EXPECT_LE(report.sent, 5U) << "one connection, 200 ms a request";
  EXPECT_LT(report.slo_attainment, 0.25);
}

}  // namespace
}  // namespace gpucap::service
