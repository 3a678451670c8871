// Two hundred clients at once, on SQLite (one server) and on PostgreSQL (two server processes,
// every client alternating between them): not timed — the check is that no trial is lost,
// handed out twice or numbered out of order, and every acknowledged report is applied exactly
// once. (Throughput and latency: benchmarks/bso_serve_load.cpp.)

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "service/backends.hpp"
#include "service/harness.hpp"

namespace gpucap::test {
namespace {

constexpr int clients_at_once = 200;
constexpr int jobs_count = 20;
constexpr int recurrences_per_client = 2;

std::string job_name(int i) { return "many-" + std::to_string(i % jobs_count); }

// Each client thread runs its recurrences on one of the jobs (ten clients per job), its
// requests spread over `ports` in turn.
void run_clients(const std::vector<int>& ports, Ledger& ledger) {
  std::atomic<int> failed{0};
  std::vector<std::thread> threads;
  threads.reserve(clients_at_once);
  for (int c = 0; c < clients_at_once; ++c) {
    threads.emplace_back([&, c] {
      std::vector<std::unique_ptr<httplib::Client>> owned;
      std::vector<httplib::Client*> clients;
      for (std::size_t i = 0; i < ports.size(); ++i) {
        owned.push_back(client_for(ports[(i + static_cast<std::size_t>(c)) % ports.size()]));
        clients.push_back(owned.back().get());
      }
      if (!drive_recurrences(clients, job_name(c), c * 10, recurrences_per_client, ledger)) ++failed;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failed.load(), 0) << "clients whose request was not answered 2xx";
  EXPECT_EQ(ledger.trials(), static_cast<std::size_t>(clients_at_once * recurrences_per_client));
}

void register_jobs(int port) {
  auto client = client_for(port);
  for (int j = 0; j < jobs_count; ++j) register_zeus_job(*client, zeus_job_json("many", job_name(j), j), 201);
}

TEST(Load, TwoHundredClientsOnSqlite) {
  TempDir dir;
  auto store = service::open_store("sqlite:" + dir.file("bso.db"));
  InProcessServer server(*store);
  register_jobs(server.port());
  Ledger ledger;
  run_clients({server.port()}, ledger);
  ledger.check(*store, true);
}

TEST(Load, TwoHundredClientsOnTwoPostgresReplicas) {
  const auto db = private_postgres().new_database();
  ServeProcess first(db, {"--threads", "220"});
  ServeProcess second(db, {"--threads", "220"});
  register_jobs(first.port());
  Ledger ledger;
  run_clients({first.port(), second.port()}, ledger);
  ledger.check(*service::open_store(db), true);
}

}  // namespace
}  // namespace gpucap::test
