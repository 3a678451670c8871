// Throughput and latency of `gpucap bso serve`'s GET /jobs/batch_size under many clients at once.
//
//   build-ci/benchmarks/bso_serve_load --clients 200 --rate 2000 --seconds 10
//
// Starts the server in this process on a fresh SQLite file (or --db URL; or measures a running
// server at --url), registers one job per client, and has every client (a thread with its own
// keep-alive connection) ask for batch sizes. With --rate R the clients together send R requests
// per second on a fixed schedule and each latency counts from the scheduled send time (so a
// server that falls behind is not flattered by clients that wait for it); --rate 0 sends as fast
// as answers come back (the server's capacity). With --replicas N (PostgreSQL) N servers, each
// with its own connection pool, share the database and the clients take turns between them.
// Prints requests/s and latency percentiles.

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <httplib.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "gpucap/core/error.hpp"
#include "gpucap/service/bso_server.hpp"
#include "gpucap/service/store.hpp"

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  std::optional<std::string> db;
  std::optional<std::string> url;
  int clients = 200;
  int replicas = 1;
  double rate = 2000.0;
  double seconds = 10.0;
  std::string durability = "full";
};

std::string job_body(int i) {
  return fmt::format(
      R"({{"max_power": 250.0, "number_of_gpus": 1, "gpu_model": "NVIDIA A40", "job_id": "load-{}", "job_id_prefix": "load", )"
      R"("batch_sizes": [8, 16, 32, 64, 128, 256], "default_batch_size": 32, "max_epochs": 12, "mab_seed": {}}})",
      i, i);
}

double percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0.0;
  const auto index = static_cast<std::size_t>(p / 100.0 * static_cast<double>(sorted.size() - 1) + 0.5);
  return sorted[std::min(index, sorted.size() - 1)];
}

struct Results {
  std::mutex mutex;
  std::vector<double> latencies_ms;
  std::atomic<int> errors{0};
  std::vector<std::vector<int>> trial_numbers;  // per client, as answered by the server
};

// One client: requests on schedule (or back to back) until `end`, latencies into `results`.
void client_loop(std::string host, int port, int index, const Options& o, Clock::time_point start, Clock::time_point end,
                 Results& results) {
  httplib::Client client(host, port);
  client.set_keep_alive(true);
  client.set_tcp_nodelay(true);
  const auto path = fmt::format("/jobs/batch_size?job_id=load-{}", index);
  std::vector<double> mine;
  std::vector<int> numbers;
  const bool paced = o.rate > 0.0;
  const auto interval = std::chrono::duration<double>(paced ? o.clients / o.rate : 0.0);
  // Spread the clients' schedules over one interval so they do not all fire at once.
  auto due = start + std::chrono::duration_cast<Clock::duration>(interval * (static_cast<double>(index) / o.clients));
  while (true) {
    if (paced) std::this_thread::sleep_until(due);
    const auto sent = paced ? due : Clock::now();
    if (sent >= end) break;
    const auto res = client.Get(path);
    if (!res || res->status != 200) {
      ++results.errors;
    } else {
      numbers.push_back(nlohmann::json::parse(res->body, nullptr, false).value("trial_number", -1));
    }
    mine.push_back(std::chrono::duration<double, std::milli>(Clock::now() - sent).count());
    due += std::chrono::duration_cast<Clock::duration>(interval);
  }
  std::lock_guard lock(results.mutex);
  results.latencies_ms.insert(results.latencies_ms.end(), mine.begin(), mine.end());
  results.trial_numbers[static_cast<std::size_t>(index)] = std::move(numbers);
}

// Lost or duplicated trials: every answered trial number must be new, distinct and stored, and
// every trial stored since the start must have been answered. Returns how many are wrong.
int count_trial_mismatches(gpucap::service::Store& store, const std::vector<std::size_t>& stored_before,
                           const std::vector<std::vector<int>>& answered) {
  int wrong = 0;
  for (std::size_t i = 0; i < answered.size(); ++i) {
    const auto job = store.load_job(fmt::format("load-{}", i));
    const std::size_t stored = job ? job->trials.size() : 0;
    auto numbers = answered[i];
    std::sort(numbers.begin(), numbers.end());
    std::vector<int> expected(stored - std::min(stored, stored_before[i]));
    for (std::size_t k = 0; k < expected.size(); ++k) expected[k] = static_cast<int>(stored_before[i] + k + 1);
    if (numbers != expected) {
      ++wrong;
      std::fprintf(stderr, "job load-%zu: %zu trials answered, %zu new trials stored\n", i, numbers.size(), expected.size());
    }
  }
  return wrong;
}

// One in-process server on its own store.
struct Replica {
  std::unique_ptr<gpucap::service::Store> store;
  std::unique_ptr<gpucap::service::BsoServer> server;
  std::thread serving;
  int port = 0;
};

int run(const Options& o) {
  if (o.url && o.replicas > 1) throw std::runtime_error("--replicas starts servers in this process; it does not go with --url");
  std::vector<std::unique_ptr<Replica>> replicas;
  std::string host = "127.0.0.1";
  std::vector<int> ports;
  std::string db_file;
  if (o.url) {
    const auto parsed = gpucap::service::parse_listen_address(o.url->substr(o.url->find("://") + 3), "--url",
                                                                    "http://127.0.0.1:8000");
    host = parsed.first;
    ports.push_back(parsed.second);
  } else {
    if (!o.db) db_file = (std::filesystem::temp_directory_path() / fmt::format("bso_serve_load-{}.db", ::getpid())).string();
    for (int r = 0; r < o.replicas; ++r) {
      auto replica = std::make_unique<Replica>();
      replica->store =
          gpucap::service::open_store(o.db.value_or("sqlite:" + db_file), gpucap::service::parse_durability(o.durability));
      gpucap::service::ServerOptions options;
      options.port = 0;
      options.threads = static_cast<std::size_t>(o.clients / o.replicas) + 16;
      replica->server = std::make_unique<gpucap::service::BsoServer>(*replica->store, options);
      replica->port = replica->server->bind();
      replica->serving = std::thread([server = replica->server.get()] { server->serve(); });
      ports.push_back(replica->port);
      replicas.push_back(std::move(replica));
    }
  }
  const int port = ports.front();
  httplib::Client setup(host, port);
  for (int i = 0; i < o.clients; ++i) {
    const auto res = setup.Post("/jobs", job_body(i), "application/json");
    if (!res || (res->status != 201 && res->status != 200)) throw std::runtime_error("cannot register job load-" + std::to_string(i));
  }
  Results results;
  results.trial_numbers.resize(static_cast<std::size_t>(o.clients));
  std::vector<std::size_t> stored_before(static_cast<std::size_t>(o.clients), 0);
  if (!replicas.empty()) {
    for (int i = 0; i < o.clients; ++i) {
      const auto job = replicas.front()->store->load_job(fmt::format("load-{}", i));
      stored_before[static_cast<std::size_t>(i)] = job ? job->trials.size() : 0;
    }
  }
  const auto start = Clock::now() + std::chrono::milliseconds(500);  // the clients connect first
  const auto end = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.seconds));
  std::vector<std::thread> clients;
  for (int i = 0; i < o.clients; ++i) {
    const int client_port = ports[static_cast<std::size_t>(i) % ports.size()];
    clients.emplace_back(client_loop, host, client_port, i, std::cref(o), start, end, std::ref(results));
  }
  for (auto& t : clients) t.join();
  for (auto& replica : replicas) {
    replica->server->stop();
    replica->serving.join();
  }
  auto& lat = results.latencies_ms;
  std::sort(lat.begin(), lat.end());
  const double measured_s = o.seconds;
  std::printf("bso serve load: %d clients, %s, %.0f s, %s\n", o.clients,
              o.rate > 0 ? fmt::format("offered {:.0f} requests/s", o.rate).c_str() : "closed loop", o.seconds,
              replicas.empty() ? o.url->c_str()
                               : fmt::format("{} server(s) on {}", replicas.size(), replicas.front()->store->describe()).c_str());
  std::printf("  GET /jobs/batch_size  %.0f requests/s  (%zu requests, %d errors)\n", static_cast<double>(lat.size()) / measured_s,
              lat.size(), results.errors.load());
  std::printf("  latency ms            p50 %.2f  p90 %.2f  p99 %.2f  max %.2f\n", percentile(lat, 50), percentile(lat, 90),
              percentile(lat, 99), lat.empty() ? 0.0 : lat.back());
  int mismatches = 0;
  if (!replicas.empty()) {
    mismatches = count_trial_mismatches(*replicas.front()->store, stored_before, results.trial_numbers);
    std::printf("  trials                %d jobs with lost or duplicated trials\n", mismatches);
  }
  replicas.clear();
  if (!db_file.empty()) {
    for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(db_file + suffix);
  }
  return results.errors.load() == 0 && mismatches == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Requests/s and latency of gpucap bso serve's GET /jobs/batch_size under many clients"};
  Options o;
  app.add_option("--db", o.db, "Store of the in-process server (default: a fresh SQLite file in the temp folder)");
  app.add_option("--url", o.url, "Measure a running server instead (http://HOST:PORT)");
  app.add_option("--clients", o.clients, "Clients at once, one keep-alive connection each")->check(CLI::Range(1, 2000));
  app.add_option("--replicas", o.replicas, "In-process servers on the one --db, clients taking turns between them")
      ->check(CLI::Range(1, 16));
  app.add_option("--rate", o.rate, "Requests/s offered by all clients together; 0: back to back")->check(CLI::NonNegativeNumber);
  app.add_option("--seconds", o.seconds, "Measured duration")->check(CLI::PositiveNumber);
  app.add_option("--durability", o.durability, "The in-process server's, as gpucap bso serve --durability: full or normal")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  try {
    return run(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bso_serve_load: error: %s\n", e.what());
    return 2;
  }
}
