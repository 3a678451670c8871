// gpucap monitor: measure your own job — time, energy and power of the GPUs while a command runs
// (`gpucap monitor -- python train.py`) — or serve the GPUs' metrics to Prometheus under
// dcgm-exporter's names (`gpucap monitor --listen 127.0.0.1:9400`). Reads only; never writes a
// control.

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
#include <set>

#include "gpucap/cli/commands.hpp"
#include "gpucap/core/error.hpp"
#include "gpucap/core/text.hpp"
#include "gpucap/monitor/command_process.hpp"
#include "gpucap/monitor/gpu_exporter.hpp"
#include "gpucap/monitor/session.hpp"
#include "gpucap/service/bso_server.hpp"
#include "gpucap/service/metrics_server.hpp"

namespace gpucap::cli {
namespace {

constexpr const char* kDefaultListen = "127.0.0.1:9400";
constexpr int kMinIntervalMs = 10;
constexpr int kMaxIntervalMs = 60'000;

struct MonitorFlags {
  std::string nvml_library = default_nvml_library();
  std::optional<std::string> gpus;
  int interval_ms = 100;
  bool json = false;
  std::optional<std::string> csv;
  std::vector<std::string> listen;  // given without a value: the default address
  std::string hostname_label = monitor::kHostnameLabel;
  CLI::Option* listen_option = nullptr;
  CLI::Option* hostname_label_option = nullptr;
  std::vector<std::string> command;
};

// The GPUs of this machine, through NVML, opened read-only.
struct Gpus {
  std::unique_ptr<device::NvmlLibrary> nvml;
  std::vector<std::unique_ptr<device::NvmlDevice>> devices;

  [[nodiscard]] std::vector<device::Device*> pointers() const {
    std::vector<device::Device*> out;
    for (const auto& d : devices) out.push_back(d.get());
    return out;
  }
  [[nodiscard]] std::vector<monitor::GpuIdentity> identities() const {
    const auto host = monitor::local_hostname();
    std::vector<monitor::GpuIdentity> out;
    for (const auto& d : devices) out.push_back(monitor::nvml_identity(d->info(), host));
    return out;
  }
  // The identities with the host label spelled as `label` (--hostname-label).
  [[nodiscard]] std::vector<monitor::GpuIdentity> identities(const std::string& label) const {
    auto out = identities();
    for (auto& gpu : out) gpu.hostname_label = label;
    return out;
  }
};

// --gpus "0,1": distinct indices; all GPUs when absent.
std::vector<unsigned> gpu_indices(const std::optional<std::string>& text, unsigned count) {
  std::vector<unsigned> out;
  if (!text) {
    for (unsigned i = 0; i < count; ++i) out.push_back(i);
    return out;
  }
  std::set<unsigned> seen;
  for (const auto& part : split(*text, ',')) {
    const auto value = parse_integer(trim(part));
    if (!value || *value < 0 || *value >= count) {
      throw usage_error(fmt::format("--gpus '{}': '{}' is not a GPU index of this machine (0 to {})", *text,
                                    std::string(trim(part)), count - 1));
    }
    if (!seen.insert(static_cast<unsigned>(*value)).second) {
      throw usage_error(fmt::format("--gpus '{}': GPU {} is listed twice", *text, *value));
    }
    out.push_back(static_cast<unsigned>(*value));
  }
  return out;
}

Gpus open_gpus(const MonitorFlags& flags) {
  Gpus gpus;
  try {
    gpus.nvml = std::make_unique<device::NvmlLibrary>(flags.nvml_library);
  } catch (const Error& e) {
    if (e.code() != ErrorCode::no_gpu) throw;
    // NVML's own message suggests the twin, which monitor does not watch: say where it is.
    throw Error(ErrorCode::no_gpu,
                fmt::format("no GPU to measure on this machine ({}); to try the exporter without a GPU, "
                            "'gpucap run --gpu a100 --model resnet50 --power-cap 250 --algorithm capfit --duration 600 "
                            "--pace realtime --metrics {}' serves a simulated GPU's metrics under the same names",
                            e.what(), kDefaultListen));
  }
  const auto count = gpus.nvml->device_count();
  if (count == 0) throw Error(ErrorCode::no_gpu, "no GPU to measure on this machine: NVML lists no NVIDIA GPU");
  for (const auto index : gpu_indices(flags.gpus, count)) {
    gpus.devices.push_back(std::make_unique<device::NvmlDevice>(*gpus.nvml, index, /*writes_allowed=*/false));
  }
  return gpus;
}

// The --csv timeline. Opened before the command starts (a path that cannot be opened is an error
// then); rows are flushed at each sample while it runs, and a write that fails then stops the
// timeline with one warning instead of ending the measurement.
class CsvFile {
 public:
  explicit CsvFile(const std::string& path) : path_(path), out_(path, std::ios::trunc) {
    if (!out_) throw Error(ErrorCode::io, fmt::format("--csv {}: cannot open for writing ({})", path, std::strerror(errno)));
    out_ << monitor::timeline_csv_header();
  }
  // False once a write has failed (the warning is printed once, on stderr).
  bool write(const std::vector<monitor::TimelineSample>& samples) {
    if (failed_) return false;
    for (const auto& s : samples) out_ << monitor::timeline_csv_row(s, false);
    out_.flush();
    if (!out_) {
      failed_ = true;
      const int error = errno;
      std::fprintf(stderr, "gpucap monitor: warning: --csv %s: write failed (%s); the timeline stops here, the "
                   "measurement goes on\n", path_.c_str(), error != 0 ? std::strerror(error) : "I/O error");
      std::fflush(stderr);
    }
    return !failed_;
  }
  [[nodiscard]] bool failed() const { return failed_; }

 private:
  std::string path_;
  std::ofstream out_;
  bool failed_ = false;
};

std::string how_it_ended(int wait_status) {
  if (WIFSIGNALED(wait_status)) return fmt::format("was killed by signal {} ({})", WTERMSIG(wait_status), strsignal(WTERMSIG(wait_status)));
  return fmt::format("exited with code {}", monitor::shell_exit_code(wait_status));
}

nlohmann::json report_json(const std::vector<std::string>& command, int wait_status, const monitor::SessionReport& r,
                           const Gpus& gpus) {
  nlohmann::json list = nlohmann::json::array();
  for (std::size_t i = 0; i < r.gpus.size(); ++i) {
    const auto& g = r.gpus[i];
    const auto& info = gpus.devices[i]->info();
    list.push_back({{"index", info.index},
                    {"name", g.name},
                    {"uuid", info.uuid},
                    {"energy_j", g.energy_j},
                    {"energy_source", monitor::to_string(g.source)},
                    {"mean_power_w", g.mean_power_w},
                    {"max_power_w", g.max_power_w}});
  }
  return {{"command", command},
          {"exit_code", monitor::shell_exit_code(wait_status)},
          {"complete", r.complete},
          {"incomplete_reason", r.complete ? nlohmann::json(nullptr) : nlohmann::json(r.incomplete_reason)},
          {"time_s", r.time_s},
          {"energy_j", r.total_energy_j},
          {"mean_power_w", r.mean_power_w},
          {"max_power_w", r.max_power_w},
          {"samples", r.samples},
          {"gpus", list},
          {"simulated", r.simulated}};
}

void print_report(const std::vector<std::string>& command, int wait_status, const monitor::SessionReport& r,
                  const Gpus& gpus) {
  const char* tag = r.simulated ? "simulated" : "real";
  const auto measured = r.complete ? fmt::format("after {:.2f} s", r.time_s) : std::string("(measurement incomplete)");
  fmt::print("gpucap monitor: '{}' {} {}  [{}]\n", join(command, " "), how_it_ended(wait_status), measured, tag);
  for (std::size_t i = 0; i < r.gpus.size(); ++i) {
    const auto& g = r.gpus[i];
    fmt::print("  GPU {} {:<28} energy {:>12.2f} J ({:<10})  mean {:>8.2f} W  max {:>8.2f} W  [{}]\n",
               gpus.devices[i]->info().index, g.name, g.energy_j, monitor::to_string(g.source), g.mean_power_w,
               g.max_power_w, tag);
  }
  fmt::print("  {:<34} energy {:>12.2f} J {:<12}  mean {:>8.2f} W  max {:>8.2f} W  [{}]\n", "total", r.total_energy_j, "",
             r.mean_power_w, r.max_power_w, tag);
  if (!r.complete) {
    fmt::print("  INCOMPLETE: the figures cover the first {:.2f} s only: {}\n", r.time_s, r.incomplete_reason);
  }
}

// Runs the command, sampling every GPU each interval until it ends; its exit code is ours. Once
// the command runs nothing ends the measurement early: a failed reading or CSV write is one
// warning on stderr, the command is waited for, and the report says what it lacks.
int measure_command(const MonitorFlags& flags) {
  const auto gpus = open_gpus(flags);
  std::unique_ptr<CsvFile> csv;
  if (flags.csv) csv = std::make_unique<CsvFile>(*flags.csv);
  monitor::Session session(gpus.pointers(), monitor::steady_seconds_clock());
  const auto first = session.sample();  // before the command: a failure here is gpucap's error
  // Handlers first, with SIGINT and SIGTERM blocked until the command's pid is known: a signal in
  // between is held, then passed on; none ends gpucap with the command left running.
  monitor::ForwardSignals forward;
  monitor::CommandProcess command(flags.command);
  forward.forward_to(command.pid());
  if (csv) (void)csv->write(first);
  std::optional<int> status;
  const double interval_s = flags.interval_ms / 1000.0;
  bool warned = false;
  while (!(status = command.wait_for(interval_s))) {
    try {
      const auto samples = session.sample();
      if (csv) (void)csv->write(samples);
    } catch (const std::exception& e) {
      session.note_failure(e.what());
      if (!warned) {
        std::fprintf(stderr, "gpucap monitor: warning: reading the GPUs failed (%s); sampling goes on and the report "
                     "is marked incomplete\n", e.what());
        std::fflush(stderr);
        warned = true;
      }
    }
  }
  const auto report = session.finish();
  if (flags.json) {
    auto json = report_json(flags.command, *status, report, gpus);
    if (csv) json["timeline"] = {{"path", *flags.csv}, {"complete", !csv->failed()}};
    std::cout << json.dump(2) << "\n";
  } else {
    print_report(flags.command, *status, report, gpus);
    if (csv) fmt::print("  timeline                          {}{}\n", *flags.csv, csv->failed() ? " (incomplete: a write failed)" : "");
  }
  return monitor::shell_exit_code(*status);
}

// Serves the GPUs' readings, taken at each scrape, until SIGINT or SIGTERM.
void serve_metrics(const MonitorFlags& flags) {
  // `--listen` alone: CLI11 hands an empty value.
  const auto address = flags.listen.empty() || flags.listen.front().empty() ? std::string(kDefaultListen) : flags.listen.front();
  const auto [host, port] = service::parse_listen_address(address, "--listen", kDefaultListen);
  const auto gpus = open_gpus(flags);
  monitor::MetricsRegistry registry;
  monitor::GpuExporter exporter(registry, gpus.pointers(), gpus.identities(flags.hostname_label),
                                monitor::steady_seconds_clock());
  // Blocked before the server's threads start, so that they inherit the mask and only sigtimedwait
  // below takes the signals.
  const sigset_t set = stop_signal_set();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  service::MetricsServer server(host, port, [&exporter, &registry] {
    exporter.publish();
    return registry.render();
  });
  (void)server.start();
  fmt::print("gpucap monitor: serving the metrics of {} GPU{} at {} (real GPUs, dcgm-exporter's names)\n",
             gpus.devices.size(), gpus.devices.size() == 1 ? "" : "s", server.url());
  std::fflush(stdout);
  // GPUs without an energy counter have their power integrated every interval between scrapes.
  const timespec interval{flags.interval_ms / 1000, static_cast<long>(flags.interval_ms % 1000) * 1'000'000L};
  int signal = -1;
  while (signal < 0) {
    signal = exporter.integrates_power() ? sigtimedwait(&set, nullptr, &interval) : sigwaitinfo(&set, nullptr);
    if (signal < 0 && errno == EAGAIN) exporter.sample();
  }
  server.stop();
  std::fprintf(stderr, "gpucap monitor: stopped by %s\n", signal == SIGINT ? "SIGINT" : "SIGTERM");
}

int run_monitor(const MonitorFlags& flags) {
  if (flags.interval_ms < kMinIntervalMs || flags.interval_ms > kMaxIntervalMs) {
    throw usage_error(fmt::format("--interval-ms {} must be between {} and {}", flags.interval_ms, kMinIntervalMs,
                                  kMaxIntervalMs));
  }
  const bool listening = flags.listen_option->count() > 0;
  if (listening && !flags.command.empty()) {
    throw usage_error("give either --listen (serve metrics) or a command after '--' (measure it), not both");
  }
  (void)monitor::parse_hostname_label(flags.hostname_label);
  if (!listening && flags.hostname_label_option->count() > 0) {
    throw usage_error("--hostname-label names the host label of --listen's metrics; measuring a command prints none");
  }
  if (listening) {
    if (flags.json || flags.csv) throw usage_error("--json and --csv are for measuring a command, not for --listen");
    serve_metrics(flags);
    return 0;
  }
  if (flags.command.empty()) {
    throw usage_error("give a command to measure after '--' (gpucap monitor -- python train.py) or --listen HOST:PORT");
  }
  return measure_command(flags);
}

}  // namespace

Command add_monitor_command(CLI::App& app, const GlobalOptions& /*global*/) {
  auto flags = std::make_shared<MonitorFlags>();
  auto* cmd = app.add_subcommand("monitor",
                                 "Measure a command's GPU time, energy and power (-- COMMAND ARGS...), or serve the GPUs' "
                                 "metrics to Prometheus (--listen)");
  cmd->add_option("--gpus", flags->gpus, "GPUs to measure, by NVML index: '0,1' (default: all)");
  cmd->add_option("--interval-ms", flags->interval_ms,
                  "Sampling interval in ms: the timeline's rows, max power, and the power integral of GPUs without "
                  "an energy counter")
      ->capture_default_str();
  cmd->add_flag("--json", flags->json, "Print the measurement as JSON");
  cmd->add_option("--csv", flags->csv, "Write the power/clock/utilisation timeline (one row per GPU and sample) to this file")
      ->check(output_path());
  flags->listen_option =
      cmd->add_option("--listen", flags->listen,
                      fmt::format("Serve Prometheus metrics (dcgm-exporter's names and labels) at HOST:PORT/metrics "
                                  "until SIGINT/SIGTERM (default {})",
                                  kDefaultListen))
          ->expected(0, 1);
  flags->hostname_label_option = cmd->add_option("--hostname-label", flags->hostname_label,
                  "--listen: the host label of the DCGM_* series: hostname (dcgm-exporter since its 2026-05 rename) or "
                  "Hostname (dashboards written before it)")
      ->capture_default_str();
  cmd->add_option("--nvml-lib", flags->nvml_library, "NVML library to load (default: $GPUCAP_NVML_LIB, else libnvidia-ml.so.1)")
      ->capture_default_str();
  cmd->add_option("command", flags->command, "The command to measure, after '--'");
  auto status = std::make_shared<int>(0);
  return Command{cmd, [flags, status] { *status = run_monitor(*flags); }, status};
}

}  // namespace gpucap::cli
