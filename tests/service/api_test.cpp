// The HTTP API against a real server in this process: Zeus's Python client's exact requests for
// twenty recurrences, and every kind of bad request, each answered with the right status and a
// JSON message and leaving the database exactly as it was.

#include <gtest/gtest.h>

#include <atomic>
#include <regex>
#include <set>

#include "gpucap/core/error.hpp"
#include "gpucap/service/bso_api.hpp"
#include "service/backends.hpp"
#include "service/harness.hpp"
#include "support/expect_error.hpp"

namespace gpucap::test {
namespace {

class ZeusClientTest : public ::testing::TestWithParam<Backend> {};

// Zeus's client registers (job_id null: the server names the job), then each run of the
// training script asks for a batch size, reports every epoch and ends the trial at exit.
TEST_P(ZeusClientTest, TwentyRecurrencesFromPruningIntoTheBandit) {
  TempDir dir;
  auto store = service::open_store(fresh_database(GetParam(), dir));
  InProcessServer server(*store);
  auto client = client_for(server.port());
  const auto job_id = register_zeus_job(*client, zeus_job_json("mnist", std::nullopt, std::nullopt), 201);
  EXPECT_TRUE(std::regex_match(job_id, std::regex("mnist-[0-9a-f]{8}"))) << job_id;

  std::set<int> pruned;
  for (int r = 1; r <= 20; ++r) {
    const auto run = run_zeus_recurrence(*client, job_id, r);
    EXPECT_EQ(run.trial_number, r);
    ASSERT_FALSE(run.reports.empty());
    EXPECT_TRUE(run.reports.back().at("stop_train").get<bool>());
    EXPECT_TRUE(run.ended);
    if (!run.reports.back().at("converged").get<bool>()) pruned.insert(run.batch_size);
  }
  const auto job = store->load_job(job_id);
  ASSERT_TRUE(job);
  EXPECT_EQ(job->stage, bso::Stage::mab);
  ASSERT_EQ(job->trials.size(), 20u);
  for (const auto& trial : job->trials) EXPECT_EQ(trial.status, bso::TrialStatus::succeeded) << trial.trial_number;
  EXPECT_TRUE(pruned.contains(8) && pruned.contains(256));
  // The bandit only plays sizes that survived pruning.
  for (const auto& trial : job->trials) {
    if (trial.type == bso::TrialType::mab) {
      EXPECT_FALSE(pruned.contains(trial.batch_size)) << trial.batch_size;
    }
  }
}

// A recurring job with a fixed job_id registers at every run: 201 the first time, 200 after.
TEST_P(ZeusClientTest, ReRegistrationWithTheSameConfigIsAccepted) {
  TempDir dir;
  auto store = service::open_store(fresh_database(GetParam(), dir));
  InProcessServer server(*store);
  auto client = client_for(server.port());
  for (int r = 1; r <= 3; ++r) {
    EXPECT_EQ(register_zeus_job(*client, zeus_job_json("bert", "bert-nightly", 42), r == 1 ? 201 : 200), "bert-nightly");
    EXPECT_EQ(run_zeus_recurrence(*client, "bert-nightly", r).trial_number, r);
  }
  // Another config under that id is refused, and the stored one stays.
  auto other = nlohmann::json::parse(zeus_job_json("bert", "bert-nightly", 42));
  other["max_epochs"] = 30;
  const auto res = client->Post("/jobs", other.dump(), "");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 409);
  EXPECT_NE(nlohmann::json::parse(res->body).at("message").get<std::string>().find("different configuration"), std::string::npos);
  EXPECT_EQ(store->load_job("bert-nightly")->spec.max_epochs, 12);
}

INSTANTIATE_TEST_SUITE_P(Backends, ZeusClientTest, ::testing::Values(Backend::sqlite, Backend::postgres), backend_name);

// A server on SQLite with one job that has handed out three trials: 1 reporting, 2 ended
// (Failed) before any report, 3 succeeded.
class BadRequestTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = service::open_store("sqlite:" + dir_.file("bso.db"));
    server_ = std::make_unique<InProcessServer>(*store_, options());
    client_ = client_for(server_->port());
    client_->set_bearer_token_auth(token_);
    register_zeus_job(*client_, zeus_job_json("job", "job-1", 3), 201);
    first_ = run_zeus_recurrence(*client_, "job-1", 1, 1);
    second_ = run_zeus_recurrence(*client_, "job-1", 2, 0);
    const auto patch = R"({"job_id": "job-1", "batch_size": )" + std::to_string(second_.batch_size) + R"(, "trial_number": 2})";
    ASSERT_EQ(client_->Patch("/trials", patch, "")->status, 200);  // ended before any report: Failed
    third_ = run_zeus_recurrence(*client_, "job-1", 3);
    snapshot_ = store_->load_job("job-1");
    ASSERT_EQ(snapshot_->trials.at(1).status, bso::TrialStatus::failed);
  }

  virtual service::ServerOptions options() {
    service::ServerOptions o;
    o.bearer_token = token_;
    return o;
  }

  // The status and a JSON {"message"} containing `fragment`; the database unchanged.
  void expect_refused(const httplib::Result& res, int status, const std::string& fragment) {
    ASSERT_TRUE(res) << "no answer";
    EXPECT_EQ(res->status, status) << res->body;
    const auto body = nlohmann::json::parse(res->body, nullptr, false);
    ASSERT_TRUE(body.is_object() && body.contains("message") && body.at("message").is_string()) << res->body;
    EXPECT_NE(body.at("message").get<std::string>().find(fragment), std::string::npos) << res->body;
    EXPECT_EQ(res->get_header_value("Content-Type"), "application/json");
    EXPECT_EQ(store_->load_job("job-1"), snapshot_);
    EXPECT_EQ(store_->job_ids(), std::vector<std::string>{"job-1"});
  }

  std::string report(int batch_size, int trial, const std::string& time, const std::string& energy, int epoch = 2,
                     const std::string& metric = "0.3") const {
    return R"({"job_id": "job-1", "batch_size": )" + std::to_string(batch_size) + R"(, "trial_number": )" + std::to_string(trial) +
           R"(, "time": )" + time + R"(, "energy": )" + energy + R"(, "metric": )" + metric + R"(, "current_epoch": )" +
           std::to_string(epoch) + "}";
  }

  TempDir dir_;
  std::string token_ = "s3cret-token";
  std::unique_ptr<service::Store> store_;
  std::unique_ptr<InProcessServer> server_;
  std::unique_ptr<httplib::Client> client_;
  Recurrence first_, second_, third_;
  std::optional<bso::JobState> snapshot_;
};

TEST_F(BadRequestTest, MalformedOrMistypedBodies) {
  expect_refused(client_->Post("/report", "{\"job_id\": ", ""), 422, "not valid JSON");
  expect_refused(client_->Post("/report", "[1, 2]", ""), 422, "JSON object");
  expect_refused(client_->Post("/report", report(first_.batch_size, 1, "NaN", "10.0"), ""), 422, "NaN");
  expect_refused(client_->Post("/report", report(first_.batch_size, 1, "Infinity", "10.0"), ""), 422, "NaN or Infinity");
  expect_refused(client_->Post("/report", report(first_.batch_size, 1, "\"10\"", "10.0"), ""), 422, "time: must be a number");
  expect_refused(client_->Post("/report", R"({"job_id": "job-1", "batch_size": 32})", ""), 422, "trial_number: field required");
  // A byte that is not UTF-8 where the parser stops: its message quotes the byte, and the answer
  // was a 500 "internal error" (nlohmann's dump() threw on it; a fuzz finding, bso_api).
  expect_refused(client_->Post("/report", std::string(R"({"job_id":)") + '\xa0' + "nul}", ""), 422, "not valid JSON");
}

TEST_F(BadRequestTest, ReportsTheOptimizerRefuses) {
  const int b = first_.batch_size;
  expect_refused(client_->Post("/report", report(b, 1, "-1.0", "10.0"), ""), 400, "time must be a finite number >= 0");
  expect_refused(client_->Post("/report", report(b, 1, "1e9", "-5.0"), ""), 400, "energy must be a finite number >= 0");
  expect_refused(client_->Post("/report", report(b, 1, "1e9", "1e9", 0), ""), 400, "current_epoch must be 1 or more");
  expect_refused(client_->Post("/report", report(b == 8 ? 16 : 8, 1, "1e9", "1e9"), ""), 400, "unknown trial 1");
  expect_refused(client_->Post("/report", report(b, 99, "1e9", "1e9"), ""), 400, "unknown trial 99");
  expect_refused(client_->Post("/report", report(second_.batch_size, 2, "1e9", "1e9", 1), ""), 400, "Failed");
  auto unknown_job = nlohmann::json::parse(report(b, 1, "1e9", "1e9"));
  unknown_job["job_id"] = "job-2";
  expect_refused(client_->Post("/report", unknown_job.dump(), ""), 400, "Unknown job(job-2)");
}

TEST_F(BadRequestTest, UnknownJobsTrialsAndRoutes) {
  expect_refused(client_->Get("/jobs/batch_size?job_id=job-2"), 400, "Unknown job(job-2)");
  expect_refused(client_->Get("/jobs/batch_size"), 422, "job_id: query parameter required");
  expect_refused(client_->Patch("/trials", R"({"job_id": "job-1", "batch_size": 32, "trial_number": 77})", ""), 404,
                 "Could not find the trial");
  expect_refused(client_->Patch("/trials", R"({"job_id": "job-9", "batch_size": 32, "trial_number": 1})", ""), 404, "Unknown job");
  expect_refused(client_->Delete("/jobs?job_id=job-9"), 404, "Unknown job(job-9)");
  expect_refused(client_->Get("/nothing/here"), 404, "the routes are");
  // A known route with a method it does not take: 405 with Allow (issue 38; it was 404).
  const auto put = client_->Put("/jobs", "{}", "");
  expect_refused(put, 405, "method not allowed (allowed: POST, DELETE)");
  EXPECT_EQ(put->get_header_value("Allow"), "POST, DELETE");
}

TEST_F(BadRequestTest, BadJobSpecs) {
  auto spec = nlohmann::json::parse(zeus_job_json("job", "job-2", std::nullopt));
  spec["default_batch_size"] = 48;
  expect_refused(client_->Post("/jobs", spec.dump(), ""), 422, "default_batch_size: 48 is not in batch_sizes");
  spec = nlohmann::json::parse(zeus_job_json("job", "other-2", std::nullopt));
  expect_refused(client_->Post("/jobs", spec.dump(), ""), 422, "does not start with prefix");
  spec.erase("gpu_model");
  spec["job_id"] = "job-2";
  expect_refused(client_->Post("/jobs", spec.dump(), ""), 422, "gpu_model: field required");
  expect_refused(client_->Post("/jobs", "\"job\"", ""), 422, "JSON object");
}

TEST_F(BadRequestTest, OversizedBodies) {
  const std::string huge(2 << 20, ' ');
  expect_refused(client_->Post("/report", huge, ""), 413, "too large");
  expect_refused(client_->Post("/jobs", "{\"x\": \"" + std::string(1 << 20, 'x') + "\"}", ""), 413, "too large");
  // The connection (or a new one) still serves the next request.
  EXPECT_EQ(client_->Get("/jobs/batch_size?job_id=job-2")->status, 400);
}

TEST_F(BadRequestTest, WrongOrMissingToken) {
  auto anonymous = client_for(server_->port());
  expect_refused(anonymous->Get("/jobs/batch_size?job_id=job-1"), 401, "bearer token");
  expect_refused(anonymous->Post("/jobs", zeus_job_json("job", "job-3", std::nullopt), ""), 401, "bearer token");
  anonymous->set_bearer_token_auth("s3cret-tokeN");
  expect_refused(anonymous->Post("/report", report(first_.batch_size, 1, "1e9", "1e9"), ""), 401, "bearer token");
  anonymous->set_bearer_token_auth("s3cret-token");
  EXPECT_EQ(anonymous->Delete("/jobs?job_id=job-1")->status, 200);
  EXPECT_FALSE(store_->load_job("job-1"));
}

TEST_F(BadRequestTest, RepeatedAndLateReportsAreAnsweredAgainNotAppliedTwice) {
  // The last report of trial 1 again (a client retrying after a lost answer).
  const auto& sent = first_.reports;
  ASSERT_EQ(sent.size(), 1u);
  finish_zeus_recurrence(*client_, "job-1", 1, first_);
  const auto done = store_->load_job("job-1");
  // A report on the finished trial: stop again, nothing changes.
  const auto res = client_->Post("/report", report(first_.batch_size, 1, "1e9", "1e9", 40), "");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_TRUE(nlohmann::json::parse(res->body).at("stop_train").get<bool>());
  EXPECT_EQ(store_->load_job("job-1"), done);
}

// The metrics hook (bso serve --metrics) throws at every answer: the API answers as without it.
class ThrowingMetricsTest : public BadRequestTest {
 protected:
  service::ServerOptions options() override {
    auto o = BadRequestTest::options();
    o.on_answer = [this](std::string_view, std::string_view, const service::ApiResponse&) {
      ++calls_;
      throw std::runtime_error("the metrics broke");
    };
    return o;
  }
  std::atomic<int> calls_{0};
};

TEST_F(ThrowingMetricsTest, AHookThatThrowsChangesNoAnswer) {
  // SetUp registered the job and ran three recurrences, every answer as expected.
  EXPECT_GE(calls_.load(), 8);
  const auto res = client_->Get("/jobs/batch_size?job_id=job-1");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200) << res->body;
  EXPECT_TRUE(nlohmann::json::parse(res->body).at("batch_size").is_number_integer()) << res->body;
}

// A number beyond a double (1e400, -1e999) in any numeric field of POST /jobs, POST /report or
// PATCH /trials is a bad body, answered 422 with a message naming the number (it was a 500
// "internal error": the JSON parser reports it as out of range, not as a syntax error), and
// changes nothing. A whole number beyond 64 bits is read as a double by the parser: 422 too.
TEST(BsoApi, NumbersTooLargeForADoubleAre422NotInternalErrors) {
  TempDir dir;
  auto store = service::open_store("sqlite:" + dir.file("bso.db"));
  service::BsoApi api(*store);
  ASSERT_EQ(api.register_job(zeus_job_json("job", "job-1", 3)).status, 201);
  const auto trial = api.next_batch_size("job-1");
  ASSERT_EQ(trial.status, 200) << trial.body.dump();
  const int batch = trial.body.at("batch_size").get<int>();
  const auto before = store->load_job("job-1");

  const auto expect_422 = [&](const service::ApiResponse& answer, const std::string& fragment, const std::string& body) {
    EXPECT_EQ(answer.status, 422) << body << " -> " << answer.body.dump();
    const auto message = answer.body.value("message", std::string());
    EXPECT_NE(message.find(fragment), std::string::npos) << body << " -> " << message;
    EXPECT_EQ(message.find("internal error"), std::string::npos) << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  };
  const auto report = [&](const std::string& field, const std::string& value) {
    auto j = nlohmann::json::parse(zeus_report_json("job-1", batch, 1, 1, 1));
    std::string body = j.dump();
    const auto key = "\"" + field + "\":";
    const auto at = body.find(key);
    EXPECT_NE(at, std::string::npos) << body;
    const auto end = body.find_first_of(",}", at);
    return body.substr(0, at + key.size()) + value + body.substr(end);
  };
  for (const std::string field : {"time", "energy", "metric", "batch_size", "trial_number", "current_epoch"}) {
    for (const std::string value : {"1e400", "-1e999"}) {
      const auto body = report(field, value);
      expect_422(api.report(body), "too large", body);
    }
  }
  const std::string patch = R"({"job_id": "job-1", "batch_size": 1e400, "trial_number": 1})";
  expect_422(api.end_trial(patch), "1e400 is too large for a number", patch);
  for (const std::string field : {"max_power", "eta_knob", "target_metric", "default_batch_size", "mab_seed"}) {
    auto spec = nlohmann::json::parse(zeus_job_json("big", "big-1", 3));
    spec[field] = 12345.0;
    auto body = spec.dump();
    const auto at = body.find("12345.0");
    ASSERT_NE(at, std::string::npos) << body;
    body.replace(at, 7, "1e400");
    expect_422(api.register_job(body), "too large", body);
  }
  const std::string huge_int = R"({"job_id": "job-1", "batch_size": 99999999999999999999999, "trial_number": 1})";
  expect_422(api.end_trial(huge_int), "batch_size: must be a whole number", huge_int);
  // A whole number that fits 64 bits unsigned but not an int: refused, not wrapped to -1.
  const std::string u64 = R"({"job_id": "job-1", "batch_size": 18446744073709551615, "trial_number": 1})";
  expect_422(api.end_trial(u64), "batch_size: must be a whole number", u64);
  EXPECT_EQ(store->load_job("job-1"), before);
  EXPECT_EQ(store->job_ids(), std::vector<std::string>{"job-1"});
}

TEST(ServerAddress, ListenAndTokenFlags) {
  const auto parse = [](const std::string& text) { return service::parse_listen_address(text, "--listen", "127.0.0.1:8000"); };
  EXPECT_EQ(parse("127.0.0.1:0"), (std::pair<std::string, int>{"127.0.0.1", 0}));
  EXPECT_EQ(parse("[::1]:8000"), (std::pair<std::string, int>{"::1", 8000}));
  for (const auto* bad : {"8000", "host:", ":80", "h:65536", "h:-1", "h:80x"}) {
    EXPECT_THROW((void)parse(bad), Error) << bad;
  }
  // The message names the flag the address came from, with an example of its own.
  test::expect_error_from([] { (void)service::parse_listen_address("nowhere", "--metrics", "127.0.0.1:9400"); },
                          ErrorCode::usage, "--metrics 'nowhere': expected HOST:PORT, e.g. 127.0.0.1:9400");
  test::expect_error_from([] { (void)service::parse_listen_address("h:99999", "--metrics", "127.0.0.1:9400"); },
                          ErrorCode::usage, "--metrics 'h:99999': the port must be");
  TempDir dir;
  EXPECT_EQ(service::read_token_file(dir.write("token", "  abc\n"), "--token-file"), "abc");
  test::expect_error_from([&] { (void)service::read_token_file(dir.write("empty", "\n"), "--admin-token-file"); },
                          ErrorCode::usage, "--admin-token-file ");
}

}  // namespace
}  // namespace gpucap::test
