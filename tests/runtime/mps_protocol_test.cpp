// The MPS path's pure parts and its worker in process: partitions of shares and batches, the
// worker protocol's commands and messages, and a worker (runtime/mps_worker.hpp) driven over a
// socket pair with a counting engine. The daemon and the worker pool as real processes:
// mps_test.cpp.

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "gpucap/core/error.hpp"
#include "gpucap/runtime/mps.hpp"
#include "gpucap/runtime/mps_protocol.hpp"
#include "gpucap/runtime/mps_worker.hpp"
#include "support/expect_error.hpp"
#include "support/scoped_env.hpp"

namespace gpucap::runtime {
namespace {

using test::expect_error_from;
using test::ScopedEnv;

// ---------------------------------------------------------------------------------------------
// Partitions

TEST(MpsPartition, AcceptsSharesInStepsUpToAHundred) {
  EXPECT_NO_THROW(check_mps_shares({50, 25, 25}));
  EXPECT_NO_THROW(check_mps_shares({100}));
  EXPECT_NO_THROW(check_mps_shares({10, 20}, 10));
  const auto tenants = mps_tenants({40, 30}, {8, 16});
  EXPECT_EQ(tenants, (std::vector<tune::Tenant>{{40, 8}, {30, 16}}));
  EXPECT_EQ(describe_mps_tenants(tenants), "40 %×8, 30 %×16");
}

TEST(MpsPartition, RejectsBadSharesAndBatchesWithOneClearLine) {
  expect_error_from([] { check_mps_shares({}); }, ErrorCode::usage, "no MPS shares");
  expect_error_from([] { check_mps_shares({50, 27}); }, ErrorCode::usage,
                    "MPS share 27 % in [50,27] is not a positive multiple of the 5 % step");
  expect_error_from([] { check_mps_shares({0, 50}); }, ErrorCode::usage, "share 0 %");
  expect_error_from([] { check_mps_shares({-5}); }, ErrorCode::usage, "share -5 %");
  expect_error_from([] { check_mps_shares({50, 55}); }, ErrorCode::usage, "add up to 105 %, more than 100 %");
  expect_error_from([] { check_mps_shares({30}, 7); }, ErrorCode::usage, "must divide 100");
  expect_error_from([] { check_mps_batches({8, 8}, 3); }, ErrorCode::usage,
                    "2 batch sizes [8,8] for 3 MPS tenants: give one per tenant");
  expect_error_from([] { check_mps_batches({8, 0}, 2); }, ErrorCode::usage, "batch size 0 in [8,0] must be at least 1");
  expect_error_from([] { (void)mps_tenants({50}, {8, 8}); }, ErrorCode::usage, "give one per tenant");
  Knobs knobs;
  knobs.tenants = {{50.0, 8}, {12.5, 8}};
  expect_error_from([&] { (void)mps_tenants(knobs); }, ErrorCode::usage, "12.5 % is not a whole percentage");
  knobs.tenants = {{50.0, 8}, {25.0, 4}};
  EXPECT_EQ(mps_tenants(knobs), (std::vector<tune::Tenant>{{50, 8}, {25, 4}}));
}

// ---------------------------------------------------------------------------------------------
// The protocol

TEST(MpsProtocol, CommandsAndMessagesRoundTrip) {
  MpsCommand run;
  run.kind = MpsCommand::Kind::run;
  run.batch = 16;
  run.warmup_s = 2.0;
  run.measure_s = 3.0;
  EXPECT_EQ(encode(run), "{\"batch\":16,\"cmd\":\"run\",\"measure_s\":3.0,\"warmup_s\":2.0}\n");
  const auto parsed = parse_mps_command(encode(run));
  EXPECT_EQ(parsed.kind, MpsCommand::Kind::run);
  EXPECT_EQ(parsed.batch, 16);
  EXPECT_EQ(parse_mps_command(encode(MpsCommand{})).kind, MpsCommand::Kind::quit);

  MpsMessage ready;
  ready.kind = MpsMessage::Kind::ready;
  ready.share_pct = 25;
  ready.engine = "fake";
  const auto back = parse_mps_message(encode(ready));
  EXPECT_EQ(back.kind, MpsMessage::Kind::ready);
  EXPECT_EQ(back.share_pct, 25);
  EXPECT_EQ(back.engine, "fake");
  EXPECT_EQ(parse_mps_message(R"({"type":"ready","share_pct":null})").share_pct, std::nullopt);
  const auto result = parse_mps_message(R"({"type":"result","images":480,"seconds":3.0,"batch":16})");
  EXPECT_EQ(result.images, 480);
  EXPECT_EQ(result.batch, 16);
}

TEST(MpsProtocol, RejectsGarbageSayingWhatIsWrong) {
  expect_error_from([] { (void)parse_mps_message("hello"); }, ErrorCode::invalid_data, "not JSON: 'hello'");
  expect_error_from([] { (void)parse_mps_message("[1]"); }, ErrorCode::invalid_data, "not a JSON object");
  expect_error_from([] { (void)parse_mps_message(R"({"type":"result","images":1,"seconds":1})"); },
                    ErrorCode::invalid_data, "no \"batch\"");
  expect_error_from([] { (void)parse_mps_message(R"({"type":"result","images":-1,"seconds":1,"batch":1})"); },
                    ErrorCode::invalid_data, "\"images\" -1 is not between");
  expect_error_from([] { (void)parse_mps_message(R"({"type":"bye"})"); }, ErrorCode::invalid_data,
                    "unknown message type 'bye'");
  expect_error_from([] { (void)parse_mps_command(R"({"cmd":"run","batch":0,"warmup_s":0,"measure_s":1})"); },
                    ErrorCode::invalid_data, "\"batch\" 0");
  expect_error_from([] { (void)parse_mps_command(R"({"cmd":"run","batch":1,"warmup_s":0,"measure_s":0})"); },
                    ErrorCode::invalid_data, "\"measure_s\" must be > 0");
}

TEST(MpsProtocol, LineReaderWaitsNoLongerThanAskedAndSeesTheEnd) {
  int pair[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair), 0);
  UniqueFd ours(pair[0]);
  UniqueFd theirs(pair[1]);
  LineReader reader(ours.get());
  std::string line;
  const double start_s = steady_now_s();
  EXPECT_EQ(reader.next(start_s + 0.05, &line), LineReader::Status::timeout);
  EXPECT_LT(steady_now_s() - start_s, 1.0);
  ASSERT_TRUE(write_all(theirs.get(), "one\ntw"));
  EXPECT_EQ(reader.next(steady_now_s() + 1.0, &line), LineReader::Status::line);
  EXPECT_EQ(line, "one");
  ASSERT_TRUE(write_all(theirs.get(), "o\n"));
  theirs.reset();
  EXPECT_EQ(reader.next(steady_now_s() + 1.0, &line), LineReader::Status::line);
  EXPECT_EQ(line, "two");
  EXPECT_EQ(reader.next(steady_now_s() + 1.0, &line), LineReader::Status::closed);
  EXPECT_FALSE(write_all(ours.get(), "nobody listens\n")) << "and no SIGPIPE kills the test";
}

// ---------------------------------------------------------------------------------------------
// The worker side, in process, over a socket pair

class CountingEngine final : public engine::Engine {
 public:
  explicit CountingEngine(int max_batch_that_fits = 1 << 20) : max_batch_(max_batch_that_fits) {}
  [[nodiscard]] std::string name() const override { return "counting engine"; }
  engine::BatchResult run_batch(int batch_size) override {
    if (batch_size > max_batch_) throw std::runtime_error("CUDA out of memory. Tried to allocate 2.00 GiB");
    return {batch_size, 0.0, 0.0, 0, {}};
  }

 private:
  int max_batch_;
};

// Runs serve_mps_worker in a thread on one end of a socket pair; the test talks on the other.
class InProcessWorker {
 public:
  explicit InProcessWorker(EngineLoader load) {
    int pair[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) throw std::runtime_error("socketpair");
    ours_.reset(pair[0]);
    theirs_.reset(pair[1]);
    reader_ = LineReader(ours_.get());
    thread_ = std::thread([this, load = std::move(load)] {
      try {
        serve_mps_worker(load, theirs_.get(), theirs_.get(), steady_now_s);
      } catch (const std::exception& e) {
        failure_ = e.what();
      }
    });
  }
  ~InProcessWorker() { join(); }
  InProcessWorker(const InProcessWorker&) = delete;
  InProcessWorker& operator=(const InProcessWorker&) = delete;

  void send(const std::string& line) { ASSERT_TRUE(write_all(ours_.get(), line)); }
  MpsMessage receive() {
    std::string line;
    if (reader_.next(steady_now_s() + 5.0, &line) != LineReader::Status::line) throw std::runtime_error("no reply");
    return parse_mps_message(line);
  }
  // Closes our end (the worker sees the end of its input) and waits for the worker to return.
  void join() {
    ours_.reset();
    if (thread_.joinable()) thread_.join();
  }
  // What the worker threw; empty if it returned normally (valid after join()).
  [[nodiscard]] const std::string& failure() const { return failure_; }

 private:
  UniqueFd ours_;
  UniqueFd theirs_;
  LineReader reader_{-1};
  std::thread thread_;
  std::string failure_;
};

TEST(MpsWorker, SaysReadyWithItsShareThenMeasuresEachRound) {
  const ScopedEnv share(kMpsShareEnv, "35");
  InProcessWorker worker([] { return std::make_unique<CountingEngine>(); });
  const auto ready = worker.receive();
  EXPECT_EQ(ready.kind, MpsMessage::Kind::ready);
  EXPECT_EQ(ready.share_pct, 35);
  EXPECT_EQ(ready.engine, "counting engine");
  worker.send(R"({"cmd":"run","batch":16,"warmup_s":0.01,"measure_s":0.02})" "\n");
  const auto result = worker.receive();
  EXPECT_EQ(result.kind, MpsMessage::Kind::result);
  EXPECT_EQ(result.batch, 16);
  EXPECT_GT(result.images, 0);
  EXPECT_EQ(result.images % 16, 0);
  EXPECT_GE(result.seconds, 0.02);
  worker.send(encode(MpsCommand{}));
  worker.join();
  EXPECT_EQ(worker.failure(), "");
}

TEST(MpsWorker, HalvesTheBatchOnOutOfMemoryAsUpstream) {
  InProcessWorker worker([] { return std::make_unique<CountingEngine>(/*max_batch_that_fits=*/5); });
  (void)worker.receive();
  worker.send(R"({"cmd":"run","batch":32,"warmup_s":0,"measure_s":0.01})" "\n");
  const auto result = worker.receive();
  EXPECT_EQ(result.kind, MpsMessage::Kind::result);
  EXPECT_EQ(result.batch, 4) << "32 → 16 → 8 → 4";
  EXPECT_EQ(result.images % 4, 0);
}

TEST(MpsWorker, ReportsAnEngineThatDoesNotLoadAndAMalformedCommand) {
  {
    InProcessWorker worker([]() -> std::unique_ptr<engine::Engine> {
      throw Error(ErrorCode::invalid_data, "m.pt: not a TorchScript model");
    });
      const auto message = worker.receive();
    EXPECT_EQ(message.kind, MpsMessage::Kind::error);
    EXPECT_EQ(message.message, "m.pt: not a TorchScript model");
    worker.join();
    EXPECT_EQ(worker.failure(), "m.pt: not a TorchScript model");
  }
  InProcessWorker worker([] { return std::make_unique<CountingEngine>(); });
  (void)worker.receive();
  worker.send("{\"cmd\":\"dance\"}\n");
  const auto message = worker.receive();
  EXPECT_EQ(message.kind, MpsMessage::Kind::error);
  EXPECT_NE(message.message.find("unknown command 'dance'"), std::string::npos) << message.message;
}

}  // namespace
}  // namespace gpucap::runtime
