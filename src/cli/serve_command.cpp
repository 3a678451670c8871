// gpucap serve: an inference server (KServe v2 over HTTP) that keeps its throughput and its p99
// latency SLO under a power cap someone else sets, at any moment, through a flag, a schedule, an
// admin API or a file. On the twin (the default) every batch takes the twin's time and power,
// paced to the wall clock; on a real GPU (--platform nvml) a TorchScript model runs through the
// LibTorch engine on the requests' data.

#include <fmt/format.h>
#include <malloc.h>
#include <nlohmann/json.hpp>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <condition_variable>
#include <iostream>
#include <memory>
#include <mutex>
#include <thread>

#include "gpucap/cli/commands.hpp"
#include "gpucap/core/error.hpp"
#include "gpucap/core/stderr_line.hpp"
#include "gpucap/monitor/gpu_exporter.hpp"
#include "gpucap/runtime/sim_platform.hpp"
#include "gpucap/serve/latency_stats.hpp"
#include "gpucap/serve/serving_runtime.hpp"
#include "gpucap/service/admin_server.hpp"
#include "gpucap/service/bso_server.hpp"
#include "gpucap/service/inference_server.hpp"
#include "gpucap/service/serve_dashboard.hpp"
#include "gpucap/service/serve_metrics.hpp"
#include "gpucap/sim/catalog.hpp"
#include "cap_file_watcher.hpp"
#include "cluster_node.hpp"
#include "live_metrics.hpp"
#include "serve_setup.hpp"

#ifndef GPUCAP_VERSION
#define GPUCAP_VERSION "unknown"
#endif

namespace gpucap::cli {
namespace {

// A request of images is megabytes: the buffers its body, tensors and batch take are freed when it
// is answered. glibc would give that memory back to the kernel each time (a large block is mapped
// and unmapped; a worker's heap is trimmed), and the next request would fault it in again, a page
// at a time. Keeping it cut the mean time from a 600-kB image's body to its answer from about 660
// to 210-270 us (docs/benchmarks.md, "gpucap serve's own overhead").
void keep_request_memory() {
  constexpr int kKeepBytes = 256 << 20;
  mallopt(M_MMAP_THRESHOLD, 64 << 20);
  mallopt(M_TRIM_THRESHOLD, kKeepBytes);
}

// What serving exports on --metrics: the GPU's DCGM series (at each power sample), gpucap's window
// series, Triton's request families and the dashboard.
struct Exports {
  // First, so destroyed last: the dashboard's pages read it from live's server threads until live
  // (and its server) is gone.
  service::SeriesBuffer series;
  std::unique_ptr<LiveExport> live;
  std::unique_ptr<service::ServeMetrics> serve;
  std::unique_ptr<monitor::GpuExporter> gpu;
};

void print_summary(const ServeFlags& f, const Served& served, const serve::WindowCounts& c, const serve::LatencySummary& slo,
                   const serve::ServingTotals& t, double seconds) {
  const char* tag = served.platform->simulated() ? "simulated" : "real";
  if (f.json) {
    nlohmann::json out = {{"simulated", served.platform->simulated()},
                          {"seconds", seconds},
                          {"arrivals", c.arrivals},
                          {"answered", c.answered},
                          {"good", c.good},
                          {"shed", c.shed},
                          {"refused", c.refused},
                          {"failed", c.failed},
                          {"batches", c.batches},
                          {"windows", t.windows},
                          {"windows_over_cap", t.windows_over_cap},
                          {"time_over_cap_s", t.time_over_cap_s},
                          {"energy_j", t.energy_j},
                          {"max_power_w", t.max_power_w},
                          {"device_writes", t.device_writes}};
    std::cout << out.dump(2) << "\n";
    return;
  }
  const auto line = [tag](const char* label, const std::string& value) {
    fmt::print("  {:<22} {:>16}  [{}]\n", label, value, tag);
  };
  fmt::print("gpucap serve: stopped after {:.1f} s\n", seconds);
  line("requests", fmt::format("{}", c.arrivals));
  line("answered", fmt::format("{}", c.answered));
  line("within the SLO", fmt::format("{}", c.good));
  line("shed (429)", fmt::format("{}", c.shed));
  line("refused or failed", fmt::format("{}", c.refused + c.failed));
  line("batches", fmt::format("{}", c.batches));
  line("p99, last 10 s", fmt::format("{:.1f} ms", slo.p99_s * 1e3));
  line("windows over cap", fmt::format("{}/{}", t.windows_over_cap, t.windows));
  line("time over cap", fmt::format("{:.2f} s", t.time_over_cap_s));
  line("energy", fmt::format("{:.1f} J", t.energy_j));
  line("max power", fmt::format("{:.2f} W", t.max_power_w));
}

// The drain gave up on a batch that has not returned (a hung engine or driver): every request was
// answered and the GPU's settings put back (or the failure to is reported below), but the GPU
// thread is still in the batch, and
// destroying what it uses (the runtime, the engine, the platform) would wait for it or pull them
// from under it. So the process ends here, without unwinding; the exit code is main's mapping of
// a device error.
[[noreturn]] void exit_beside_a_hung_batch(double batch_timeout_s, bool in_driver_call,
                                           const std::optional<std::string>& restore_error) noexcept {
  try {  // a failed write to stderr must not unwind either
    const auto restored = restore_error ? fmt::format("restoring the GPU's settings failed ({}); the next start "
                                                      "restores them from the journal",
                                                      *restore_error)
                                        : std::string("every GPU setting was restored");
    fmt::print(stderr, "gpucap: error: {} in {:g} s (--batch-timeout-s): the requests left were answered 503 and {}; exiting {}\n",
               in_driver_call ? "the GPU's driver has not answered a settings call" : "the GPU has not finished its batch",
               batch_timeout_s, restored, in_driver_call ? "without waiting for it" : "without the batch");
    std::cout.flush();
  } catch (...) {
  }
  std::fflush(stdout);
  std::fflush(stderr);
  std::_Exit(exit_code(ErrorCode::device));
}

void run_serve(const ServeFlags& f, const GlobalOptions& global) {
  // SIGINT and SIGTERM are blocked before any thread starts (the power sampler, the engine's pool,
  // the servers), so that every thread inherits the mask and only the wait below takes them: a
  // signal that came to another thread would end the process without draining or restoring.
  // SIGUSR2 is the GPU thread's own: its failure (RuntimeOptions::on_failure) drains the server too.
  sigset_t signals = stop_signal_set();
  sigaddset(&signals, SIGUSR2);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  // A server outlives the reader of its log: stderr piped into a reader that has gone must cost
  // log lines (print_stderr_line), not the process, whose GPU settings would wait for the next
  // start to be restored. cpp-httplib's server ignores SIGPIPE too once it is built (and systemd
  // for its services); this holds from the first line on, whatever builds what.
  ::signal(SIGPIPE, SIG_IGN);
  // Every flag first: nothing starts, binds or writes before they are all good.
  if (!(f.slo_ms > 0.0 && f.slo_ms <= 3.6e6)) {
    throw usage_error(fmt::format("--slo-ms {:g} must be above 0 and at most 3600000 (an hour)", f.slo_ms));
  }
  check_serve_algorithm(f.algorithm);
  if (!(f.max_request_mib > 0.0 && f.max_request_mib <= 4096.0)) {
    throw usage_error(fmt::format("--max-request-mib {:g} must be between 0 and 4096", f.max_request_mib));
  }
  if (f.threads < 2 || f.threads > 4096) throw usage_error(fmt::format("--threads {} must be between 2 and 4096", f.threads));
  if (!(f.batch_timeout_s > 0.0 && f.batch_timeout_s <= 86'400.0)) {
    throw usage_error(fmt::format("--batch-timeout-s {:g} must be above 0 and at most 86400", f.batch_timeout_s));
  }
  const auto [listen_host, listen_port] = service::parse_listen_address(f.listen, "--listen", kServeListenDefault);
  if (f.metrics) (void)service::parse_listen_address(*f.metrics, "--metrics", "127.0.0.1:9400");
  std::optional<std::pair<std::string, int>> admin_address;
  std::string token;
  if (f.admin) {
    admin_address = service::parse_listen_address(*f.admin, "--admin", "127.0.0.1:8001");
    if (!f.admin_token_file) throw usage_error("--admin needs --admin-token-file (the API is refused without a token)");
    token = service::read_token_file(*f.admin_token_file, "--admin-token-file");
  } else if (f.admin_token_file) {
    throw usage_error("--admin-token-file goes with --admin HOST:PORT");
  }
  const auto hostname_label = monitor::parse_hostname_label(f.hostname_label);
  const auto batcher = batcher_config(f);
  check_cluster_node_flags(f.cluster);
  if (f.cluster.enabled() && (f.power_cap_w || f.cap_schedule || f.cap_file || f.admin)) {
    throw usage_error("with --cluster-etcd the cluster's coordinator sets the cap: --power-cap, --cap-schedule, --cap-file "
                      "and --admin do not go with it");
  }
  if (f.platform != "twin" && f.platform != "sim" && f.platform != "nvml") {
    throw usage_error(fmt::format("--platform '{}' must be twin or nvml", f.platform));
  }
  const bool twin = f.platform != "nvml";
  if (!twin && f.pace != "realtime") throw usage_error("--pace does not apply to --platform nvml (a real GPU runs in real time)");
  runtime::check_sample_hz(f.sample_hz);
  // --cap-file is read once here: its cap is the one at the start, and the watcher knows it. The
  // cap sources are checked before the GPU and the model are loaded; only the GPU's range waits.
  const auto cap_file_text = f.cap_file ? std::optional<std::string>(read_text_file(*f.cap_file)) : std::nullopt;
  const auto start_cap = f.cluster.enabled() ? std::nullopt : std::optional(initial_cap(f, cap_file_text));

  auto served = twin ? twin_served(f, sim::Catalog::load(resolve_data_dir(global))) : nvml_served(f);
  served.identity.hostname_label = hostname_label;
  auto& platform = *served.platform;
  const auto limits = platform.controller_limits();
  // A cluster node starts at its lowest cap, until its first allocation.
  auto [schedule, source] = start_cap ? *start_cap : std::pair{CapSchedule::constant(served.capacity->min_cap_w), std::string("cluster")};
  serve::CapState cap(schedule, source, served.min_cap_w, limits.power_limit_max_w);
  // Beside a schedule, the file's cap (or --power-cap) holds from the start until the schedule's
  // first step, and its source says so.
  if (start_cap && f.cap_schedule && (cap_file_text || f.power_cap_w)) {
    cap.set(schedule.cap_at(0.0), cap_file_text ? "file" : "flag", 0.0);
  }
  const bool gpu_writes = twin || f.allow_gpu_control;
  const serve::LatencyStatsConfig latency_stats;  // the serving loop's p99 and its span
  auto controller = make_serving_controller(f, served, gpu_writes, latency_stats.window_s);
  const auto& model_name = served.backend->metadata().name;
  const double pace = twin ? runtime::parse_pace(f.pace) : 1.0;  // the runtime's seconds per wall second

  Exports exports;
  if (f.metrics) {
    service::DashboardInfo info{model_name, served.gpu_name, f.algorithm, f.slo_ms, platform.simulated()};
    // Three windows of wall time, at least 5 s (a window of batches: 5 s).
    const auto period = controller->period();
    info.stale_after_s = std::max(5.0, period.seconds > 0.0 ? 3.0 * period.seconds / pace : 0.0);
    exports.live = std::make_unique<LiveExport>(
        "serve", *f.metrics, run_labels(f.algorithm, model_name, served.gpu_id, served.identity.index, platform.simulated()),
        platform.simulated(), true, [&exports, &info](service::MetricsServer& server) {
          if (const auto warning = service::add_dashboard(server, exports.series, info)) {
            print_stderr_line("gpucap serve: warning: {}", *warning);
          }
        });
    exports.serve = std::make_unique<service::ServeMetrics>(exports.live->registry(), model_name, "1", f.slo_ms / 1e3,
                                                            pace);
    exports.gpu = std::make_unique<monitor::GpuExporter>(exports.live->registry(), std::vector<device::Device*>{&platform.device()},
                                                         std::vector<monitor::GpuIdentity>{served.identity},
                                                         [&platform] { return platform.clock().now_s(); });
  }
  keep_request_memory();
  service::InferenceServerOptions server_options;
  server_options.host = listen_host;
  server_options.port = listen_port;
  server_options.threads = f.threads;
  // Room for the admin API's and the metrics' connections (256 each) and the process's own files.
  server_options.max_connections = service::connection_limit_within_open_files(server_options.max_connections, 640);
  server_options.max_request_bytes = static_cast<std::size_t>(f.max_request_mib * 1024.0 * 1024.0);
  server_options.version = GPUCAP_VERSION;
  service::InferenceServer server(*served.backend, server_options, exports.serve.get());
  (void)server.bind();  // a busy address fails before the GPU is touched

  std::atomic<double> last_power_w{std::nan("")};
  serve::RuntimeOptions runtime_options;
  runtime_options.slo_s = f.slo_ms / 1e3;
  runtime_options.stats = latency_stats;
  runtime_options.batcher = batcher;
  runtime_options.pace = pace;
  runtime_options.on_failure = [] { ::kill(::getpid(), SIGUSR2); };
  runtime_options.batch_timeout_s = f.batch_timeout_s;
  std::optional<std::string> warmup_note;
  if (served.warm_up) runtime_options.prepare = [&served, &warmup_note] { warmup_note = served.warm_up(); };
  std::atomic<ClusterNode*> cluster_node{nullptr};
  const auto on_window = [&exports, &cluster_node](const serve::ServingWindow& w) {
    if (auto* node = cluster_node.load()) node->observe(w);
    exports.series.add(w);
    if (!exports.live) return;
    monitor::WindowFigures figures;
    figures.cap_w = w.cap_w;
    figures.max_power_w = w.power.empty() ? std::nan("") : w.power.max_w;
    figures.mean_power_w = w.power.empty() ? std::nan("") : w.power.mean_w;
    figures.batch_size = w.knobs.max_batch_size;
    figures.sm_clock_mhz = w.sm_clock_mhz;
    figures.memory_clock_mhz = std::nan("");
    const double length_s = std::max(w.end_s - w.start_s, 1e-9);
    figures.throughput_img_s = static_cast<double>(w.counts.items) / length_s;
    figures.images = static_cast<std::int64_t>(w.counts.items);
    figures.over_cap = w.over_cap;
    exports.live->work().window(figures);
    exports.serve->window(w);
  };
  const auto on_sample = [&exports, &last_power_w](const PowerSample& sample, double cap_w) {
    last_power_w = sample.power_w;
    if (!exports.gpu) return;
    exports.gpu->publish_with_power(sample.power_w);
    exports.live->work().cap(cap_w);
  };

  serve::ServingRuntime runtime(platform, *controller, cap, runtime_options, server.executor(), on_window, on_sample);
  // The pending requests are counted when a scrape asks: no count left by the last handler can go
  // stale (after a stalled batch returns, none is left to report its answers). The guard takes the
  // hook away before the runtime it reads is gone.
  struct ScrapeHookGuard {
    LiveExport* live;
    ~ScrapeHookGuard() {
      if (live != nullptr) live->set_scrape_hook({});
    }
  } scrape_hook_guard{exports.live.get()};
  if (exports.live) {
    exports.live->set_scrape_hook([&runtime, &exports] { exports.serve->pending(runtime.pending(), runtime.in_flight()); });
  }
  server.attach(runtime);
  std::unique_ptr<service::AdminServer> admin;
  if (admin_address) {
    admin = std::make_unique<service::AdminServer>(
        cap, service::AdminServerOptions{admin_address->first, admin_address->second, token, platform.simulated()},
        [&runtime] { return runtime.now_s(); }, [&last_power_w] { return last_power_w.load(); },
        [&runtime] { runtime.cap_changed(); });
    (void)admin->start();
  }
  std::unique_ptr<CapFileWatcher> watcher;
  if (f.cap_file) watcher = std::make_unique<CapFileWatcher>(*f.cap_file, *cap_file_text, cap, runtime, exports.serve.get());
  std::unique_ptr<ClusterNode> node;
  if (f.cluster.enabled()) {
    node = std::make_unique<ClusterNode>(
        f.cluster, ClusterNodeSetup{*served.capacity, served.gpu_id, model_name, platform.simulated(),
                                    [&cap, &runtime](double cap_w) {
                                      cap.set(cap_w, "cluster", runtime.now_s());
                                      runtime.cap_changed();
                                    }});
    cluster_node = node.get();
  }

  std::exception_ptr serve_failure;
  std::atomic<bool> listener_failed{false};
  std::thread http([&server, &serve_failure, &listener_failed] {
    try {
      server.serve();
    } catch (...) {
      serve_failure = std::current_exception();
      listener_failed = true;
      ::kill(::getpid(), SIGUSR2);  // the listener died (accept failed): drain, restore, say why
    }
  });
  const auto started = std::chrono::steady_clock::now();
  fmt::print("gpucap serve: {} on {} {}, algorithm {}, p99 SLO {:g} ms, cap {} ({})\n", model_name,
             platform.simulated() ? "the SIMULATED" : "a REAL", served.gpu_name,
             f.algorithm, f.slo_ms, schedule.to_string(), cap_file_text && f.cap_schedule ? "file, then schedule" : source);
  fmt::print("  inference (KServe v2)  {}/v2/models/{}/infer\n", server.url(), model_name);
  if (exports.live) {
    const auto metrics_url = exports.live->url();
    fmt::print("  metrics                {}\n  dashboard              {}/\n", metrics_url,
               metrics_url.substr(0, metrics_url.rfind("/metrics")));
  }
  if (admin) fmt::print("  admin                  {}/v1/power\n", admin->url());
  if (warmup_note) fmt::print("  warmed up              {}\n", *warmup_note);
  fmt::print("  stop with Ctrl-C or SIGTERM: the queue drains and every GPU setting is restored\n");
  std::fflush(stdout);

  int signal = -1;
  while (signal < 0) signal = sigwaitinfo(&signals, nullptr);
  print_stderr_line("gpucap serve: {}: draining",
                    signal == SIGINT    ? "SIGINT"
                    : signal == SIGTERM ? "SIGTERM"
                    : listener_failed   ? "the inference API's listener failed"
                                        : "the serving loop failed");
  server.stop();  // no new connections; the handlers in flight wait for their answers
  http.join();
  // The queue drains under the node's allocation (still counted); then the node leaves (0 W).
  const auto totals = runtime.drain(serve::ServingRuntime::HungBatch::give_up);
  const bool hung = runtime.abandoned();
  try {
    cluster_node = nullptr;
    node.reset();
    watcher.reset();
    if (admin) admin->stop();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    print_summary(f, served, runtime.counts(), runtime.slo(), totals, seconds);
  } catch (const std::exception& e) {
    if (!hung) throw;
    std::fprintf(stderr, "gpucap serve: %s\n", e.what());  // unwinding would wait for the hung batch
  }
  if (hung) exit_beside_a_hung_batch(f.batch_timeout_s, runtime.abandoned_in_device_call(), runtime.abandoned_restore_error());
  if (serve_failure) std::rethrow_exception(serve_failure);
}

}  // namespace

Command add_serve_command(CLI::App& app, const GlobalOptions& global) {
  auto flags = std::make_shared<ServeFlags>();
  auto* cmd = app.add_subcommand(
      "serve",
      "Serve a model over KServe v2 (HTTP) under a power cap that may change at any moment (flag, schedule, admin API, "
      "file): the batch cap, queue delay, clocks and power limit follow the cap and the p99 SLO");
  cmd->add_option("--platform", flags->platform,
                  "twin: the GPU twin, each batch taking its time and power, paced to the wall clock (default); nvml: a "
                  "real NVIDIA GPU with a TorchScript model (LibTorch)")
      ->capture_default_str();
  cmd->add_option("--gpu", flags->gpu, "twin: the GPU (see 'gpucap list gpus'; default a100)");
  cmd->add_option("--model", flags->model,
                  "twin: the model, its KServe name (see 'gpucap list models'; default resnet50); noop: a model that "
                  "takes no time and answers the first 16 values of its input (input FP32 [-1,16] by default), to measure the server itself");
  cmd->add_option("--noop-shape", flags->noop_shape,
                  "--model noop: its input's dimensions after the batch, e.g. 3,224,224 (default 16)")
      ->capture_default_str();
  cmd->add_option("--precision", flags->precision, "fp32 or fp16 (twin default: the model's; nvml: fp32, also bf16)");
  cmd->add_option("--algorithm", flags->algorithm,
                  "capserve (gpucap's serving controller, default), static (Triton as a user sets it: fixed batch cap "
                  "and delay, default clocks, power limit = cap where gpucap may set it), or a batch-level controller "
                  "of 'gpucap list algorithms' (batchsizer, batchdvfs, dvfs, clipper, powercap, morak, pctodl-batchdvfs, "
                  "capfit; not the MPS partitioners nor bobd): its batch size is the batch cap. nvml without "
                  "--allow-gpu-control: those that lock clocks or set the power limit are refused")
      ->capture_default_str();
  cmd->add_option("--listen", flags->listen, "The inference API's address, HOST:PORT (port 0: a free one)")
      ->capture_default_str();
  cmd->add_option("--metrics", flags->metrics,
                  "Serve Prometheus metrics (Triton's nv_inference_*, gpucap_*, DCGM_*) at HOST:PORT/metrics and the "
                  "live dashboard at HOST:PORT/");
  cmd->add_option("--admin", flags->admin, "Serve the admin API (GET /v1/power, PUT /v1/power/cap) at HOST:PORT");
  cmd->add_option("--admin-token-file", flags->admin_token_file,
                  "The admin API's bearer token, read from this file (required with --admin)");
  cmd->add_option("--slo-ms", flags->slo_ms, "The p99 latency SLO, ms")->capture_default_str();
  cmd->add_option("--power-cap", flags->power_cap_w, "The cap to start with, W");
  cmd->add_option("--cap-schedule", flags->cap_schedule, "A cap that steps: SECONDS:WATTS,... from the start");
  cmd->add_option("--cap-file", flags->cap_file,
                  "A file holding the cap in W (a number, or {\"watts\": W}) that a power agent rewrites: the cap at the "
                  "start (not with --power-cap; until the first step of a --cap-schedule that starts later), then "
                  "watched; a malformed or unreadable content keeps the last good cap");
  cmd->add_option("--pace", flags->pace, "twin: realtime, or a speed factor (virtual seconds per wall second)")
      ->capture_default_str();
  cmd->add_option("--max-batch-size", flags->max_batch_size,
                  "Triton's max_batch_size: the model's bound and the static setting's batch cap")
      ->capture_default_str();
  cmd->add_option("--max-queue-delay-us", flags->max_queue_delay_us,
                  "Triton's max_queue_delay_microseconds: static's and the seeds' queue delay (capserve sets its own)")
      ->capture_default_str();
  cmd->add_option("--preferred-batch-size", flags->preferred_batch_sizes, "Triton's preferred_batch_size (repeatable)");
  cmd->add_option("--priority-levels", flags->priority_levels,
                  "Triton's priority_levels N: requests' \"priority\" parameter 1 (highest) to N, and a request "
                  "without one (or 0) at level N; 0 or 1: one level")
      ->capture_default_str();
  cmd->add_option("--max-queue-size", flags->max_queue_size,
                  "Triton's max_queue_size per priority level (0: unbounded; a full queue answers 503)")
      ->capture_default_str();
  cmd->add_option("--queue-timeout-ms", flags->queue_timeout_ms,
                  "Triton's default_timeout_microseconds, in ms: a request still queued then is answered 503 (a "
                  "request's \"timeout\" parameter may shorten it)")
      ->capture_default_str();
  cmd->add_option("--batch-timeout-s", flags->batch_timeout_s,
                  "Wall seconds a batch (or a driver call between batches: a knob write, a clock read) may take "
                  "before the GPU counts as stalled: until it returns, requests get 503 and /v2/health/ready says 503; "
                  "SIGTERM/SIGINT then restores the GPU (a hung driver call: leaves it to the journal) and exits with "
                  "code 6 without waiting for it")
      ->capture_default_str();
  cmd->add_option("--max-request-mib", flags->max_request_mib, "The largest inference request body, MiB (larger: 413)")
      ->capture_default_str();
  cmd->add_option("--threads", flags->threads, "HTTP worker threads: requests answered at once (a connection holds none while idle or while its request arrives)")->capture_default_str();
  cmd->add_option("--profile", flags->profile_path,
                  "capserve and capfit: the model's profile on this GPU (the JSON of 'gpucap tune --json', taken with "
                  "this server's --precision, --input-size and --engine-device: one measured otherwise is refused); the "
                  "twin measures one when none is given; required on a real GPU");
  cmd->add_flag("--allow-gpu-control", flags->allow_gpu_control,
                "nvml: let the controller lock clocks and set the power limit (root; restored at exit and after a crash "
                "by the next gpucap start); without it only the batch cap, delay and admission move");
  cmd->add_option("--hostname-label", flags->hostname_label,
                  "The host label of the DCGM_* series: hostname (dcgm-exporter since 2026-05) or Hostname (before)")
      ->capture_default_str();
  cmd->add_option("--seed", flags->seed, "twin: seed of its noise")->capture_default_str();
  cmd->add_option("--sample-hz", flags->sample_hz, "Power sampling rate, Hz")->capture_default_str();
  cmd->add_option("--warmup", flags->warmup,
                  "nvml: before serving, run the model twice at every batch size up to --max-batch-size, so that no "
                  "request waits for a batch size's first, slow run (kernel selection, the TorchScript executor's "
                  "specialisation): auto (on with a CUDA engine), on or off. Its time grows with the square of "
                  "--max-batch-size")
      ->capture_default_str();
  cmd->add_flag("--json", flags->json, "At exit, print the summary as JSON");
  add_cluster_node_flags(*cmd, flags->cluster);
  flags->real.add_to(*cmd);
  // Shared with run and tune, where they apply; serve refuses them (reject_for_requests), and its
  // help says so.
  cmd->get_option("--images-dir")->description("not with serve: the model runs on the requests' own data");
  cmd->get_option("--cuda-graphs")->description("not with serve: the requests' batches run as they come, not as graphs");
  return Command{cmd, [flags, &global] { run_serve(*flags, global); }};
}

}  // namespace gpucap::cli
