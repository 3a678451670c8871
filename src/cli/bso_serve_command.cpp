// gpucap bso serve: Zeus's batch-size optimizer server (its Python client works unchanged) on
// SQLite or PostgreSQL. Stops cleanly on SIGINT/SIGTERM; every acknowledged request is already
// committed, so a SIGKILL loses nothing either; with --durability full (the default) a power cut
// neither (service::Durability).

#include <fmt/format.h>
#include <pthread.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <tuple>

#include "gpucap/cli/commands.hpp"
#include "gpucap/core/error.hpp"
#include "gpucap/service/bso_metrics.hpp"
#include "gpucap/service/bso_server.hpp"
#include "live_metrics.hpp"
#include "gpucap/service/store.hpp"

namespace gpucap::cli {
namespace {

struct ServeFlags {
  std::string db = "sqlite:bso.db";
  std::string listen = "127.0.0.1:8000";
  std::optional<std::string> token_file;
  std::size_t threads = service::ServerOptions{}.threads;
  std::optional<std::string> metrics;  // HOST:PORT
  std::string durability = "full";
};

// SIGINT and SIGTERM are blocked in every thread while this lives (the server's threads inherit
// the mask) and taken by one thread with sigwait, which stops the server.
class StopOnSignal {
 public:
  explicit StopOnSignal(service::BsoServer& server) {
    waiter_ = std::thread([this, &server] {
      const sigset_t set = stop_signal_set();
      int signal = 0;
      sigwait(&set, &signal);
      if (!done_) {
        signal_ = signal;
        server.stop();
      }
    });
  }
  ~StopOnSignal() {
    done_ = true;
    if (signal_ == 0) pthread_kill(waiter_.native_handle(), SIGTERM);  // wake the waiter: serve() ended by itself
    waiter_.join();
  }
  StopOnSignal(const StopOnSignal&) = delete;
  StopOnSignal& operator=(const StopOnSignal&) = delete;
  [[nodiscard]] int signal() const { return signal_; }

 private:
  std::atomic<bool> done_{false};
  std::atomic<int> signal_{0};
  std::thread waiter_;
};

void serve(const ServeFlags& flags) {
  const auto durability = service::parse_durability(flags.durability);
  service::ServerOptions options;
  std::tie(options.host, options.port) = service::parse_listen_address(flags.listen, "--listen", "127.0.0.1:8000");
  if (flags.token_file) options.bearer_token = service::read_token_file(*flags.token_file, "--token-file");
  options.threads = flags.threads;

  // Before any server thread starts (the exporter's too), so that they inherit the mask.
  const sigset_t set = stop_signal_set();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  // Before the store is opened: a bad --metrics address or one in use fails first.
  std::unique_ptr<LiveExport> live;
  if (flags.metrics) {
    live = std::make_unique<LiveExport>("bso serve", *flags.metrics, monitor::Labels{{"algorithm", "bso"}, {"simulated", "false"}},
                                        false, /*windows=*/false);
    options.on_answer = [&live](std::string_view route, std::string_view body, const service::ApiResponse& answer) {
      service::record_bso_answer(live->work(), route, body, answer);
    };
  }
  const auto store = service::open_store(flags.db, durability);
  service::BsoServer server(*store, options);
  const int port = server.bind();
  // The durability as the database reports it (PRAGMA synchronous, SHOW synchronous_commit).
  std::printf("gpucap bso serve: listening on http://%s:%d (%s, %s%s)\n", options.host.c_str(), port, store->describe().c_str(),
              store->durability_setting().c_str(), options.bearer_token ? ", bearer token required" : "");
  std::fflush(stdout);
  int signal = 0;
  {
    StopOnSignal stopper(server);
    server.serve();
    signal = stopper.signal();
  }
  std::fprintf(stderr, "gpucap bso serve: stopped by %s\n", signal == SIGINT ? "SIGINT" : "SIGTERM");
}

}  // namespace

Command add_bso_serve_command(CLI::App& bso, const GlobalOptions& /*global*/) {
  auto flags = std::make_shared<ServeFlags>();
  auto* app = bso.add_subcommand("serve", "Serve Zeus's batch-size optimizer API (Zeus's Python client works unchanged)");
  app->add_option("--db", flags->db,
                  "Database: sqlite:PATH (one server) or a PostgreSQL URI postgresql://USER@HOST:PORT/DB (several "
                  "servers may share it)")
      ->capture_default_str();
  app->add_option("--listen", flags->listen, "HOST:PORT to listen on; port 0 picks a free one (printed)")->capture_default_str();
  app->add_option("--token-file", flags->token_file,
                  "File with a bearer token every request must carry (Authorization: Bearer TOKEN)");
  app->add_option("--threads", flags->threads, "Worker threads: requests answered at once (a connection holds none while idle or while its request arrives)")
      ->capture_default_str()
      ->check(CLI::Range(1, 4096));
  app->add_option("--metrics", flags->metrics,
                  "Serve Prometheus metrics at HOST:PORT/metrics: jobs registered, trials dispatched, reports "
                  "(continue, converged, failed) and trials ended, by batch size");
  app->add_option("--durability", flags->durability,
                  "full: every acknowledged trial is on disk before the answer (SQLite synchronous=FULL, an fsync "
                  "per request; PostgreSQL: the server's synchronous_commit) and survives a power cut; normal: survives "
                  "a crash of the server process, but a power cut (or, on PostgreSQL, a crash of the database server, "
                  "which runs with synchronous_commit=off) may lose the last acknowledged trials (SQLite "
                  "synchronous=NORMAL)")
      ->capture_default_str();
  return {app, [flags] { serve(*flags); }};
}

}  // namespace gpucap::cli
