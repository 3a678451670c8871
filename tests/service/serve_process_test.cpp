// `gpucap bso serve` as a process: its flags, a clean stop on SIGTERM, and SIGKILL at any moment —
// nothing acknowledged is lost, trial numbers continue, and a restarted server takes exactly the
// decisions an uninterrupted one takes (the random stream is in the database).

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <thread>

#include "gpucap/core/error.hpp"
#include "service/backends.hpp"
#include "service/harness.hpp"
#include "support/cli_runner.hpp"

namespace gpucap::test {
namespace {

TEST(ServeCommand, BadFlagsAreOneClearError) {
  TempDir dir;
  const int usage = exit_code(ErrorCode::usage);
  expect_error({"bso", "serve", "--listen", "localhost"}, usage, "--listen 'localhost': expected HOST:PORT");
  expect_error({"bso", "serve", "--listen", "127.0.0.1:99999"}, usage, "from 0 to 65535");
  expect_error({"bso", "serve", "--db", "mysql://db/bso"}, usage, "expected sqlite:PATH or a PostgreSQL URI");
  expect_error({"bso", "serve", "--token-file", dir.file("missing")}, exit_code(ErrorCode::io), dir.file("missing"));
  expect_error({"bso", "serve", "--token-file", dir.write("token", "\n")}, usage,
               "--token-file " + dir.file("token") + ": the file is empty");
  // cpp-httplib decodes %-escapes in a header and trims it: such a token could never match.
  expect_error({"bso", "serve", "--token-file", dir.write("token", "ab%20\n")}, usage, "a blank or a control character");
  expect_error({"bso", "serve", "--token-file", dir.write("token", "ab%00cd\n")}, usage, "a blank or a control character");
  expect_error({"bso", "serve", "--threads", "0"}, usage, "--threads");
  expect_error({"bso", "serve", "--db", "sqlite:" + dir.file("no/such/dir/bso.db")}, exit_code(ErrorCode::io), "cannot open");
}

// --durability full (the default) or normal: the line the server prints says the setting the
// database runs with, read back from it (PRAGMA synchronous), not the flag's text.
TEST(ServeCommand, DurabilityIsTheSqliteSettingInForce) {
  TempDir dir;
  expect_error({"bso", "serve", "--durability", "fast"}, exit_code(ErrorCode::usage), "--durability 'fast': expected full or normal");
  {
    ServeProcess server("sqlite:" + dir.file("bso.db"));
    EXPECT_NE(server.listening_line().find("(SQLite " + dir.file("bso.db") + ", synchronous=FULL"), std::string::npos)
        << server.listening_line();
  }
  {
    ServeProcess server("sqlite:" + dir.file("bso.db"), {"--durability", "full"});
    EXPECT_NE(server.listening_line().find("synchronous=FULL"), std::string::npos) << server.listening_line();
  }
  ServeProcess server("sqlite:" + dir.file("bso.db"), {"--durability", "normal"});
  EXPECT_NE(server.listening_line().find("synchronous=NORMAL"), std::string::npos) << server.listening_line();
  auto client = client_for(server.port());
  register_zeus_job(*client, zeus_job_json("dur", "dur-1", 1), 201);
}

TEST(ServeCommand, APortInUseIsAnError) {
  TempDir dir;
  ServeProcess first("sqlite:" + dir.file("a.db"));
  expect_error({"bso", "serve", "--db", "sqlite:" + dir.file("b.db"), "--listen", "127.0.0.1:" + std::to_string(first.port())},
               exit_code(ErrorCode::io), "cannot listen on 127.0.0.1:" + std::to_string(first.port()));
}

TEST(ServeCommand, StopsCleanlyOnSigtermAndSigint) {
  TempDir dir;
  for (const int signal : {SIGTERM, SIGINT}) {
    ServeProcess server("sqlite:" + dir.file("bso.db"), {"--token-file", dir.write("token", "t0k\n")});
    auto client = client_for(server.port());
    client->set_bearer_token_auth("t0k");
    register_zeus_job(*client, zeus_job_json("sig", std::nullopt, std::nullopt), 201);
    server.child().signal(signal);
    const auto status = server.child().wait(10.0);
    ASSERT_TRUE(status) << "did not stop on signal " << signal;
    EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << *status;
  }
}

bool same_runs(const std::vector<Recurrence>& a, const std::vector<Recurrence>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i].batch_size != b[i].batch_size || a[i].trial_number != b[i].trial_number || a[i].reports != b[i].reports) return false;
  }
  return true;
}

class KillTest : public ::testing::TestWithParam<Backend> {};

// SIGKILL twice during twenty recurrences (once with reports of a trial acknowledged, once
// right after a batch size was handed out): the restarted server continues the same trials, and
// every answer equals that of an uninterrupted run with the same mab_seed.
TEST_P(KillTest, RestartedServerContinuesWithTheSameDecisions) {
  TempDir dir;
  const auto spec = zeus_job_json("kill", "kill-1", 20240607);
  std::vector<Recurrence> reference;
  auto reference_store = service::open_store(fresh_database(GetParam(), dir, "reference.db"));
  {
    InProcessServer server(*reference_store);
    auto client = client_for(server.port());
    register_zeus_job(*client, spec, 201);
    for (int r = 1; r <= 20; ++r) reference.push_back(run_zeus_recurrence(*client, "kill-1", r));
  }

  const auto db = fresh_database(GetParam(), dir, "killed.db");
  std::vector<Recurrence> killed;
  auto server = std::make_unique<ServeProcess>(db);
  auto client = client_for(server->port());
  register_zeus_job(*client, spec, 201);
  const auto restart = [&] {
    server->kill_now();
    server = std::make_unique<ServeProcess>(db);
    client = client_for(server->port());
    register_zeus_job(*client, spec, 200);  // the next run of the training script registers again
  };
  for (int r = 1; r <= 20; ++r) {
    if (r == 6 || r == 14) {
      killed.push_back(run_zeus_recurrence(*client, "kill-1", r, r == 6 ? 2 : 0));
      restart();
      finish_zeus_recurrence(*client, "kill-1", r, killed.back());
    } else {
      killed.push_back(run_zeus_recurrence(*client, "kill-1", r));
    }
  }
  EXPECT_TRUE(same_runs(reference, killed));
  server->kill_now();
  const auto after = service::open_store(db)->load_job("kill-1");
  ASSERT_TRUE(after);
  EXPECT_EQ(after, reference_store->load_job("kill-1"));  // every trial, the arms and the random state
  EXPECT_EQ(after->stage, bso::Stage::mab);
}

// SIGKILL while eight clients are in the middle of requests on four jobs: every answer a client
// got is in the database after the restart, and the jobs go on from there.
TEST_P(KillTest, KillUnderLoadLosesNothingAcknowledged) {
  TempDir dir;
  const auto db = fresh_database(GetParam(), dir);
  auto server = std::make_unique<ServeProcess>(db);
  const std::vector<std::string> jobs = {"load-1", "load-2", "load-3", "load-4"};
  {
    auto client = client_for(server->port());
    for (const auto& job : jobs) register_zeus_job(*client, zeus_job_json("load", job, 1), 201);
  }
  Ledger ledger;
  std::vector<std::thread> clients;
  for (int c = 0; c < 8; ++c) {
    clients.emplace_back([&, c] {
      auto client = client_for(server->port());
      (void)drive_recurrences({client.get()}, jobs[static_cast<std::size_t>(c) % jobs.size()], 1, 1000, ledger);
    });
  }
  // Kill once the clients are well into their work.
  for (int i = 0; i < 1500 && ledger.trials() < 24; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  server->kill_now();
  for (auto& t : clients) t.join();
  ASSERT_GE(ledger.trials(), 24u);

  server = std::make_unique<ServeProcess>(db);
  ledger.check(*service::open_store(db), false);
  // Trial numbers continue after the highest stored one.
  auto client = client_for(server->port());
  const auto stored = service::open_store(db)->load_job("load-1")->trials.size();
  EXPECT_EQ(run_zeus_recurrence(*client, "load-1", 99).trial_number, static_cast<int>(stored) + 1);
}

INSTANTIATE_TEST_SUITE_P(Backends, KillTest, ::testing::Values(Backend::sqlite, Backend::postgres), backend_name);

}  // namespace
}  // namespace gpucap::test
