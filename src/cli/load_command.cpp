// gpucap load: a load generator for any KServe v2 / Open Inference Protocol HTTP server (gpucap
// serve, Triton, KServe's runtimes): open loop (Poisson or constant arrivals at a rate, a rate
// schedule, or a trace file's times) or closed loop (N clients), with a report of throughput,
// goodput within the SLO, latency percentiles, and rejected and failed requests. Figures are
// measured over HTTP against a real server.

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gpucap/cli/commands.hpp"
#include "gpucap/core/error.hpp"
#include "gpucap/core/files.hpp"
#include "gpucap/serve/arrivals.hpp"
#include "gpucap/service/load_generator.hpp"

namespace gpucap::cli {
namespace {

// With --trace and no --duration, sending stays open this long after the last arrival.
constexpr double kTraceTailS = 1.0;

struct LoadFlags {
  std::string url;
  std::string model;
  std::string model_version;
  std::optional<double> rate;
  std::optional<std::string> rate_schedule;
  std::optional<std::string> trace;
  std::optional<std::string> distribution;
  std::optional<int> clients;
  std::optional<double> think_ms;
  std::optional<double> duration_s;
  double warmup_s = 0.0;
  double wait_s = 0.0;
  long long max_requests = 1'000'000;
  std::optional<int> connections;
  long long batch = 1;
  std::vector<std::string> shapes;
  bool binary = false;
  double timeout_ms = 30'000.0;
  double slo_ms = 100.0;
  std::string seed = "1";
  bool json = false;
};

service::LoadOptions load_options(const LoadFlags& flags) {
  service::LoadOptions options;
  options.url = flags.url;
  options.model = flags.model;
  options.model_version = flags.model_version;

  const int sources = (flags.rate ? 1 : 0) + (flags.rate_schedule ? 1 : 0) + (flags.trace ? 1 : 0);
  if (sources + (flags.clients ? 1 : 0) != 1) {
    throw usage_error(
        "give exactly one of --rate, --rate-schedule, --trace (open loop) or --clients (closed loop)");
  }
  if (flags.clients) {
    if (flags.connections) throw usage_error("--connections is for the open loop; --clients sets the closed loop's");
    if (flags.distribution) throw usage_error("--distribution is for --rate and --rate-schedule");
    options.mode = service::LoadMode::closed_loop;
    options.clients = *flags.clients;
    if (flags.think_ms) options.think_s = *flags.think_ms / 1e3;
  } else {
    if (flags.think_ms) throw usage_error("--think-ms is for the closed loop (--clients)");
    options.connections = flags.connections.value_or(options.connections);
    if (flags.trace) {
      if (flags.distribution) throw usage_error("--distribution does not apply to --trace: its times are given");
      // No more times are kept than the run sends (--max-requests; its own check is below).
      options.trace_s = serve::parse_arrival_trace(read_text_file(*flags.trace), *flags.trace,
                                                   static_cast<std::size_t>(std::max(flags.max_requests, 1LL)));
      options.trace_name = *flags.trace;
    } else {
      options.schedule = flags.rate ? serve::RateSchedule::constant(*flags.rate)
                                    : serve::RateSchedule::parse(*flags.rate_schedule);
      options.spacing = serve::parse_arrival_spacing(flags.distribution.value_or("poisson"));
    }
  }
  if (flags.duration_s) {
    options.duration_s = *flags.duration_s;
  } else if (options.trace_s) {
    options.duration_s = options.trace_s->back() + kTraceTailS;
    if (options.duration_s > service::kLongestLoadRunS) {
      throw usage_error(fmt::format("--trace {}: its last arrival is at {:g} s, past a week; give --duration to send its "
                                    "first part",
                                    *flags.trace, options.trace_s->back()));
    }
  }
  options.warmup_s = flags.warmup_s;
  options.wait_s = flags.wait_s;
  if (flags.max_requests < 1) throw usage_error(fmt::format("--max-requests must be at least 1, got {}", flags.max_requests));
  options.max_requests = static_cast<std::uint64_t>(flags.max_requests);
  options.batch = flags.batch;
  for (const auto& shape : flags.shapes) options.shapes.push_back(service::kserve::parse_input_shape(shape));
  options.binary = flags.binary;
  if (!(std::isfinite(flags.timeout_ms) && flags.timeout_ms > 0.0)) {
    throw usage_error(fmt::format("--timeout-ms must be a positive number, got {:g}", flags.timeout_ms));
  }
  options.timeout_s = flags.timeout_ms / 1e3;
  if (!(std::isfinite(flags.slo_ms) && flags.slo_ms > 0.0)) {
    throw usage_error(fmt::format("--slo-ms must be a positive number, got {:g}", flags.slo_ms));
  }
  options.slo_s = flags.slo_ms / 1e3;
  options.seed = parse_seed(flags.seed);
  service::validate(options);
  return options;
}

}  // namespace

Command add_load_command(CLI::App& app, const GlobalOptions& /*global*/) {
  auto flags = std::make_shared<LoadFlags>();
  auto* cmd = app.add_subcommand(
      "load",
      "Load generator for any KServe v2 inference server (gpucap serve, Triton): open or closed loop; reports "
      "throughput, goodput within the SLO, latency percentiles, rejected and failed requests (measured over HTTP)");
  cmd->footer(
      "Open loop (--rate, --rate-schedule, --trace): requests arrive on schedule whatever the server does, with at\n"
      "most --connections in flight. Latency counts from each request's SCHEDULED send time, so a request that\n"
      "waits for a free connection has that wait in its latency (no coordinated omission); requests still waiting\n"
      "when sending stops are reported as unsent and count as SLO misses. Closed loop (--clients N): each client\n"
      "sends its next request when the last was answered (after --think-ms, or a 429's Retry-After); latency\n"
      "counts from the send. Answers: 200 answered; 429 and 503 rejected (counted apart); other statuses,\n"
      "transport errors and timeouts failed. The input is built from the model's metadata (GET v2/models/M) with\n"
      "seeded random data, encoded once. Point it only at servers you run: it is a load test.");
  cmd->add_option("--url", flags->url, "The server, http://HOST[:PORT][/PREFIX]")->required();
  cmd->add_option("--model", flags->model, "The model's name on the server")->required();
  cmd->add_option("--model-version", flags->model_version, "The model's version (default: the server's choice)");
  cmd->add_option("--rate", flags->rate, "Open loop: requests per second");
  cmd->add_option("--rate-schedule", flags->rate_schedule,
                  "Open loop: a rate that changes, SECONDS:RATE,... from 0 (e.g. \"0:50,30:100\"; a rate of 0 pauses)");
  cmd->add_option("--trace", flags->trace,
                  "Open loop: arrival times from a file, one time in seconds per line, or CSV with a time_s column");
  cmd->add_option("--distribution", flags->distribution,
                  "Open loop with --rate or --rate-schedule: poisson (default) or constant spacing");
  cmd->add_option("--clients", flags->clients, "Closed loop: this many clients, each with one request in flight");
  cmd->add_option("--think-ms", flags->think_ms, "Closed loop: pause between an answer and the next request (default 0)");
  cmd->add_option("--duration", flags->duration_s,
                  "Seconds of sending (default 10; with --trace, until 1 s after its last arrival)");
  cmd->add_option("--warmup", flags->warmup_s,
                  "Seconds at the start whose requests are sent but not counted in any figure (a server's first "
                  "requests open its connections and touch its memory for the first time; default 0)");
  cmd->add_option("--wait-s", flags->wait_s,
                  "Wait up to this many seconds for a server that cannot be reached yet (or answers 5xx, or not in time) to answer "
                  "the model's metadata before the run starts: a server started a moment before (default 0: fail at once)");
  cmd->add_option("--max-requests", flags->max_requests,
                  "Stop after this many requests (this bounds memory: under 100 bytes per request)")
      ->capture_default_str();
  cmd->add_option("--connections", flags->connections,
                  "Open loop: most requests in flight, one keep-alive connection each (default 64)");
  cmd->add_option("--batch", flags->batch, "Items per request: the size of the inputs' batch dimension (-1 first)")
      ->capture_default_str();
  cmd->add_option("--shape", flags->shapes,
                  "NAME:D1,D2,...: dimensions of an input the metadata leaves variable, after the batch dimension "
                  "(repeatable)");
  cmd->add_flag("--binary", flags->binary,
                "Send the input with Triton's binary tensor data extension instead of JSON numbers");
  cmd->add_option("--timeout-ms", flags->timeout_ms,
                  "A request whose whole answer has not come by then, from its send, is stopped and has timed out "
                  "(at most 3600000)")
      ->capture_default_str();
  cmd->add_option("--slo-ms", flags->slo_ms, "Latency SLO: answers within it (from the scheduled time) are goodput")
      ->capture_default_str();
  cmd->add_option("--seed", flags->seed, "Seed of the arrivals and of the input data")->capture_default_str();
  cmd->add_flag("--json", flags->json, "Print the report as JSON");
  return {cmd, [flags] {
            const auto options = load_options(*flags);
            stop_requested.store(false);
            service::LoadReport report;
            {
              const StopOnSignals on_signals;
              report = service::run_load(options, &stop_requested);
            }
            if (flags->json) {
              std::cout << service::to_json(report).dump(2, ' ', false, nlohmann::json::error_handler_t::replace)
                        << '\n';
            } else {
              std::cout << service::to_text(report);
            }
            if (report.interrupted) {
              std::cout.flush();
              throw Error(ErrorCode::interrupted, "stopped by a signal after the report above");
            }
            if (report.scheduled == 0) {
              // No request after the warm-up: the figures above measure nothing.
              std::cout.flush();
              if (report.warmup_requests == 0) {
                throw usage_error(fmt::format("nothing was measured: no request was scheduled in the {:g} s of the run "
                                              "(a rate too low for --duration, or a schedule at 0 over it)",
                                              report.duration_s));
              }
              throw usage_error(fmt::format("nothing was measured: all {} requests were scheduled in the {:g}-s warm-up "
                                            "(--warmup); send more (--max-requests, --duration) or warm up less",
                                            report.warmup_requests, report.warmup_s));
            }
          }};
}

}  // namespace gpucap::cli
