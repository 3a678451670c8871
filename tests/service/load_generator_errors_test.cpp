// `gpucap load`'s own errors against the in-process stub (service/kserve_stub.hpp): one line and a
// code main() maps to an exit status; a server still starting is waited for (--wait-s). Every run
// is bounded to a few seconds.

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gpucap/core/error.hpp"
#include "gpucap/service/kserve_client.hpp"
#include "gpucap/service/kserve_protocol.hpp"
#include "gpucap/service/load_generator.hpp"
#include "service/kserve_stub.hpp"
#include "support/free_port.hpp"

namespace gpucap::service {
namespace {

using std::chrono::milliseconds;
using load_stub::count_of;
using load_stub::expect_error;
using load_stub::KserveStub;
using load_stub::open_loop;
using load_stub::StubConfig;

// A run of a few requests against 127.0.0.1:`port`, waiting up to `wait_s` for the server.
LoadOptions options_for_port(int port, double rate, double duration_s, double wait_s) {
  LoadOptions options;
  options.url = "http://127.0.0.1:" + std::to_string(port);
  options.model = "simple";
  options.schedule = serve::RateSchedule::constant(rate);
  options.duration_s = duration_s;
  options.wait_s = wait_s;
  return options;
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
  const auto options = options_for_port(test::free_port(), 10.0, 0.1, 0.0);
  expect_error([&] { (void)run_load(options, nullptr); }, ErrorCode::io, "cannot reach the KServe server at");
}

// --wait-s: a server that comes up a moment after the load generator starts is waited for, and
// one that does not come up is the same io error, after the wait, saying so.
TEST(LoadGeneratorTest, WaitsForAServerThatComesUpWithinWaitS) {
  const int port = test::free_port();
  const auto options = options_for_port(port, 50.0, 0.2, 20.0);
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
  auto options = options_for_port(test::free_port(), 10.0, 0.1, 0.6);
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
  const auto options = options_for_port(ntohs(address.sin_port), 10.0, 0.1, 1.0);
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
  // Times a clock's nanoseconds could not hold: refused, not wrapped.
  options = open_loop(stub, 10.0, 1e10, 1);
  expect_error([&] { (void)run_load(options, nullptr); }, ErrorCode::usage, "--duration must be a positive number of seconds up to 604800");
  options = open_loop(stub, 10.0, 0.1, 1);
  options.timeout_s = 1e300;
  expect_error([&] { (void)run_load(options, nullptr); }, ErrorCode::usage, "--timeout-ms must be positive and at most 3600000");
  options = closed_loop(stub, 1, 0.1);
  options.think_s = 1e10;
  expect_error([&] { (void)run_load(options, nullptr); }, ErrorCode::usage, "--think-ms must be from 0 to 3600000");
  options = open_loop(stub, 10.0, 5.0, 1);
  options.schedule.reset();
  options.trace_s = std::vector<double>{10.0, 20.0};
  expect_error([&] { (void)run_load(options, nullptr); }, ErrorCode::usage,
               "the trace's first arrival (10 s) is at or after --duration (5 s): nothing would be sent");
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

}  // namespace
}  // namespace gpucap::service
