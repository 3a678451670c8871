// Throughput and latency of `gpucap bso serve`'s GET /jobs/batch_size under many clients at once.
//
//   build-ci/benchmarks/bso_serve_load --clients 200 --rate 2000 --seconds 10
//
// Starts the server in this process on a fresh SQLite file (or --db URL; or measures a running
// server at --url), registers one job per client, and has every client (a thread with its own
// keep-alive connection) ask for batch sizes. With --rate R the clients together send R requests
// per second on a fixed schedule and each latency counts from the scheduled send time (so a
// server that falls behind is not flattered by clients that wait for it); --rate 0 sends as fast
// as answers come back (the server's capacity). Prints requests/s and latency percentiles.

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <httplib.h>
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
  double rate = 2000.0;
  double seconds = 10.0;
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
};

// One client: requests on schedule (or back to back) until `end`, latencies into `results`.
void client_loop(const std::string& host, int port, int index, const Options& o, Clock::time_point start, Clock::time_point end,
                 Results& results) {
  httplib::Client client(host, port);
  client.set_keep_alive(true);
  client.set_tcp_nodelay(true);
  const auto path = fmt::format("/jobs/batch_size?job_id=load-{}", index);
  std::vector<double> mine;
  const bool paced = o.rate > 0.0;
  const auto interval = std::chrono::duration<double>(paced ? o.clients / o.rate : 0.0);
  // Spread the clients' schedules over one interval so they do not all fire at once.
  auto due = start + std::chrono::duration_cast<Clock::duration>(interval * (static_cast<double>(index) / o.clients));
  while (true) {
    if (paced) std::this_thread::sleep_until(due);
    const auto sent = paced ? due : Clock::now();
    if (sent >= end) break;
    const auto res = client.Get(path);
    if (!res || res->status != 200) ++results.errors;
    mine.push_back(std::chrono::duration<double, std::milli>(Clock::now() - sent).count());
    due += std::chrono::duration_cast<Clock::duration>(interval);
  }
  std::lock_guard lock(results.mutex);
  results.latencies_ms.insert(results.latencies_ms.end(), mine.begin(), mine.end());
}

int run(const Options& o) {
  std::unique_ptr<gpucap::service::Store> store;
  std::unique_ptr<gpucap::service::BsoServer> server;
  std::thread serving;
  std::string host = "127.0.0.1";
  int port = 0;
  std::string db_file;
  if (o.url) {
    const auto parsed = gpucap::service::parse_listen_address(o.url->substr(o.url->find("://") + 3));
    host = parsed.first;
    port = parsed.second;
  } else {
    if (!o.db) db_file = (std::filesystem::temp_directory_path() / fmt::format("bso_serve_load-{}.db", ::getpid())).string();
    store = gpucap::service::open_store(o.db.value_or("sqlite:" + db_file));
    gpucap::service::ServerOptions options;
    options.port = 0;
    options.threads = static_cast<std::size_t>(o.clients) + 16;
    server = std::make_unique<gpucap::service::BsoServer>(*store, options);
    port = server->bind();
    serving = std::thread([&] { server->serve(); });
  }
  httplib::Client setup(host, port);
  for (int i = 0; i < o.clients; ++i) {
    const auto res = setup.Post("/jobs", job_body(i), "application/json");
    if (!res || (res->status != 201 && res->status != 200)) throw std::runtime_error("cannot register job load-" + std::to_string(i));
  }
  Results results;
  const auto start = Clock::now() + std::chrono::milliseconds(500);  // the clients connect first
  const auto end = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.seconds));
  std::vector<std::thread> clients;
  for (int i = 0; i < o.clients; ++i) {
    clients.emplace_back(client_loop, host, port, i, std::cref(o), start, end, std::ref(results));
  }
  for (auto& t : clients) t.join();
  if (server) {
    server->stop();
    serving.join();
  }
  auto& lat = results.latencies_ms;
  std::sort(lat.begin(), lat.end());
  const double measured_s = o.seconds;
  std::printf("bso serve load: %d clients, %s, %.0f s, store %s\n", o.clients,
              o.rate > 0 ? fmt::format("offered {:.0f} requests/s", o.rate).c_str() : "closed loop", o.seconds,
              store ? store->describe().c_str() : o.url->c_str());
  std::printf("  GET /jobs/batch_size  %.0f requests/s  (%zu requests, %d errors)\n", static_cast<double>(lat.size()) / measured_s,
              lat.size(), results.errors.load());
  std::printf("  latency ms            p50 %.2f  p90 %.2f  p99 %.2f  max %.2f\n", percentile(lat, 50), percentile(lat, 90),
              percentile(lat, 99), lat.empty() ? 0.0 : lat.back());
  store.reset();
  if (!db_file.empty()) {
    for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(db_file + suffix);
  }
  return results.errors.load() == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Requests/s and latency of gpucap bso serve's GET /jobs/batch_size under many clients"};
  Options o;
  app.add_option("--db", o.db, "Store of the in-process server (default: a fresh SQLite file in the temp folder)");
  app.add_option("--url", o.url, "Measure a running server instead (http://HOST:PORT)");
  app.add_option("--clients", o.clients, "Clients at once, one keep-alive connection each")->check(CLI::Range(1, 2000));
  app.add_option("--rate", o.rate, "Requests/s offered by all clients together; 0: back to back")->check(CLI::NonNegativeNumber);
  app.add_option("--seconds", o.seconds, "Measured duration")->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  try {
    return run(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bso_serve_load: error: %s\n", e.what());
    return 2;
  }
}
