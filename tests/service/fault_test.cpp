// `bso serve` on PostgreSQL under faults (issue 38): the database crashed and restarted mid-run,
// the database unreachable for 10 s, a client that sends its body a byte at a time, a thousand
// idle connections. Training jobs keep asking (a failed request is asked again, as a job's
// restart would); the server answers the others, recovers, and loses no acknowledged trial.
// Bounded loopback tests with a PostgreSQL server of their own.

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "service/harness.hpp"
#include "service/private_postgres.hpp"
#include "support/free_port.hpp"

namespace gpucap::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

bool ok(const httplib::Result& res) { return res && res->status >= 200 && res->status < 300; }

// A request asked until it is answered 2xx or `until`; what a refusal may be during the fault is
// a 503 (database unavailable), never another error.
struct Tally {
  std::atomic<int> unexpected{0};   // answers other than 2xx and 503
  std::atomic<int> unavailable{0};  // 503s or no answer: the fault was met
};

template <typename Request>
httplib::Result ask(const Request& request, Clock::time_point until, Tally& tally) {
  while (true) {
    auto res = request();
    if (ok(res) || Clock::now() >= until) return res;
    if (res && res->status != 503) {
      ++tally.unexpected;
      return res;
    }
    ++tally.unavailable;
    std::this_thread::sleep_for(100ms);
  }
}

// Recurrences of the synthetic job as a training job runs them, each request asked again until it
// is answered, from before the fault until after it (at least three); the ledger holds what was
// acknowledged. The recurrences run, or -1 when a request was never answered.
int run_through_faults(httplib::Client& client, const std::string& job_id, int first, const std::atomic<bool>& fault_over,
                       Ledger& ledger, Clock::time_point until, Tally& tally) {
  int r = first;
  for (; r < first + 3 || !fault_over; ++r) {
    const auto given = ask([&] { return client.Get("/jobs/batch_size?job_id=" + url_encode(job_id)); }, until, tally);
    if (!ok(given)) return -1;
    const auto trial = nlohmann::json::parse(given->body);
    const int b = trial.at("batch_size").get<int>();
    const int number = trial.at("trial_number").get<int>();
    ledger.trial_given(job_id, number, b);
    for (int epoch = 1; epoch <= 40; ++epoch) {
      const auto res = ask([&] { return client.Post("/report", zeus_report_json(job_id, b, number, epoch, r), ""); }, until, tally);
      if (!ok(res)) return -1;
      const auto answer = nlohmann::json::parse(res->body);
      const bool stop = answer.at("stop_train").get<bool>();
      ledger.report_answered(job_id, number, epoch, stop, answer.at("converged").get<bool>());
      if (stop) break;
    }
    if (!ok(ask([&] { return client.Patch("/trials", zeus_trial_json(job_id, b, number), ""); }, until, tally))) return -1;
  }
  return r - first;
}

struct Run {
  int finished = 0;     // clients whose every request was answered in the end
  int recurrences = 0;  // run by them
  int unexpected = 0;
  int unavailable = 0;
};

// `clients` training jobs on four jobs, while `fault` runs on this thread.
template <typename Fault>
Run run_with_fault(int port, int clients, Ledger& ledger, const Fault& fault) {
  auto setup = client_for(port);
  for (int j = 0; j < 4; ++j) register_zeus_job(*setup, zeus_job_json("fault", "fault-" + std::to_string(j), j), 201);
  std::atomic<int> finished{0};
  std::atomic<int> recurrences{0};
  std::atomic<bool> fault_over{false};
  Tally tally;
  const auto until = Clock::now() + 90s;
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      auto client = client_for(port);
      client->set_read_timeout(10, 0);
      const int run = run_through_faults(*client, "fault-" + std::to_string(c % 4), c * 1000, fault_over, ledger, until, tally);
      if (run >= 0) {
        ++finished;
        recurrences += run;
      }
    });
  }
  fault();
  fault_over = true;
  for (auto& t : threads) t.join();
  return {finished.load(), recurrences.load(), tally.unexpected.load(), tally.unavailable.load()};
}

TEST(DatabaseFaults, ThePostgresServerCrashesAndRestartsMidRun) {
  PrivatePostgres postgres;
  const auto db = postgres.new_database();
  auto store = service::open_store(db);
  InProcessServer server(*store);
  Ledger ledger;
  const auto run = run_with_fault(server.port(), 8, ledger, [&] {
    std::this_thread::sleep_for(300ms);
    postgres.crash();
    std::this_thread::sleep_for(1s);
    postgres.restart();
  });
  EXPECT_EQ(run.finished, 8) << "training jobs that never got an answer";
  EXPECT_EQ(run.unexpected, 0) << "answers other than 2xx or 503";
  EXPECT_GT(run.unavailable, 0) << "no request met the crash";
  EXPECT_EQ(ledger.trials(), static_cast<std::size_t>(run.recurrences));
  // A request in flight at the crash may have been applied without its answer: not exact.
  ledger.check(*service::open_store(db), false);
}

TEST(DatabaseFaults, ThePostgresServerIsUnreachableForTenSeconds) {
  PrivatePostgres postgres;
  const auto db = postgres.new_database();
  auto store = service::open_store(db);
  InProcessServer server(*store);
  Ledger ledger;
  double outage_answer_s = 0.0;
  int outage_status = 0;
  const auto run = run_with_fault(server.port(), 4, ledger, [&] {
    std::this_thread::sleep_for(300ms);
    postgres.crash();
    std::this_thread::sleep_for(1s);
    // While the database is away the server answers at once that it is unavailable.
    auto probe = client_for(server.port());
    const auto asked = Clock::now();
    const auto res = probe->Get("/jobs/batch_size?job_id=fault-0");
    outage_answer_s = std::chrono::duration<double>(Clock::now() - asked).count();
    outage_status = res ? res->status : -1;
    std::this_thread::sleep_for(9s);
    postgres.restart();
  });
  EXPECT_EQ(outage_status, 503);
  EXPECT_LT(outage_answer_s, 5.0);
  EXPECT_EQ(run.finished, 4);
  EXPECT_EQ(run.unexpected, 0);
  EXPECT_GT(run.unavailable, 10) << "the clients did not wait through the outage";
  ledger.check(*service::open_store(db), false);
}

using test::connect_to;

TEST(ClientFaults, AByteASecondBodyAndAThousandIdleConnectionsDelayNobody) {
  const auto db = private_postgres().new_database();
  auto store = service::open_store(db);
  service::ServerOptions options;
  options.threads = 8;
  options.request_timeout_s = 3.0;
  InProcessServer server(*store, options);
  std::vector<int> idle;
  for (int i = 0; i < 1000; ++i) {
    const int fd = connect_to(server.port());
    ASSERT_GE(fd, 0);
    idle.push_back(fd);
  }
  // A report whose body comes one byte a second.
  const int slow = connect_to(server.port());
  ASSERT_GE(slow, 0);
  std::atomic<bool> stop_dripping{false};
  std::thread dripper([&] {
    const std::string head = "POST /report HTTP/1.1\r\nHost: x\r\nContent-Length: 200\r\n\r\n";
    ::send(slow, head.data(), head.size(), MSG_NOSIGNAL);
    for (int i = 0; i < 10 && !stop_dripping; ++i) {
      if (::send(slow, "{", 1, MSG_NOSIGNAL) != 1) break;
      std::this_thread::sleep_for(1s);
    }
  });
  Ledger ledger;
  const auto started = Clock::now();
  const auto run = run_with_fault(server.port(), 8, ledger, [] {});
  const double took_s = std::chrono::duration<double>(Clock::now() - started).count();
  stop_dripping = true;
  dripper.join();
  // The slow report was cut at its deadline with 408.
  char answer[64] = {};
  timeval wait{5, 0};
  setsockopt(slow, SOL_SOCKET, SO_RCVTIMEO, &wait, sizeof wait);
  const auto n = ::recv(slow, answer, sizeof answer - 1, 0);
  EXPECT_GT(n, 0);
  EXPECT_EQ(std::string(answer).substr(0, 12), "HTTP/1.1 408") << answer;
  ::close(slow);
  for (const int fd : idle) ::close(fd);
  EXPECT_EQ(run.finished, 8);
  EXPECT_EQ(run.unexpected, 0);
  EXPECT_EQ(run.unavailable, 0);
  EXPECT_LT(took_s, 30.0);
  ledger.check(*store, true);
}

}  // namespace
}  // namespace gpucap::test
