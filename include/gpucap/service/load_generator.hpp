#pragma once
// `gpucap load`: a load generator for any KServe v2 / Open Inference Protocol HTTP server
// (gpucap serve, Triton, KServe's runtimes). It reads the model's metadata, builds one request
// with seeded random data (kserve_client.hpp), and sends it over keep-alive connections:
//
// - Open loop: requests arrive by an arrival process (serve/arrivals.hpp: Poisson or constant
//   spacing at a rate or a rate schedule, or a trace's times) whatever the server does, with at
//   most `connections` in flight: a dispatcher takes the arrivals in order, waits for each one's
//   time, then hands it to an idle connection's worker. Latency counts from the SCHEDULED time,
//   not from when a connection was free: if every connection is busy the request waits, and the
//   wait is part of its latency (no coordinated omission, in Gil Tene's words; wrk2 measures the
//   same way). Requests still waiting when sending stops are `unsent`: SLO misses.
// - Closed loop: `clients` clients, each sending its next request when its last one was answered
//   (after an optional think time), so at most `clients` are ever in flight. A client told 429
//   with Retry-After waits that long (at most to the end of the run) before it sends again.
//
// Outcomes: answered (200), rejected (429: shed by the server; 503: unavailable), failed (any other
// status, a transport error, or no answer within the timeout), cancelled (in flight when a stop
// signal's grace ran out). Figures are measured over HTTP from this process: the report says so.
// Bounded: the run ends at duration_s, after max_requests requests, or on *stop, and each request
// at its timeout_s (the driver stops its connection: a deadline for the whole answer). Memory is one
// 24-byte outcome per request while it runs (about three times that while the report's exact
// percentiles are computed), so it is bounded by max_requests; the arrival process produces its
// times one at a time.
// Connections: the open loop hands each request to the connection that went idle last, so a
// light load keeps few connections open; a closed-loop client opens its connection before the
// clock starts. (A server that gives each open connection a thread, as cpp-httplib does, serves
// no more connections than it has threads: the others wait.)

#include <atomic>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "gpucap/serve/arrivals.hpp"
#include "gpucap/service/kserve_client.hpp"

namespace gpucap::service {

enum class LoadMode { open_loop, closed_loop };

// The longest run (--duration) a load takes: far past any load test, and far inside what a clock's
// nanosecond count holds (a longer one would wrap it, silently).
inline constexpr double kLongestLoadRunS = 7 * 24 * 3600.0;

struct LoadOptions {
  std::string url;            // http://HOST[:PORT][/PREFIX]
  std::string model;
  std::string model_version;  // "" lets the server choose
  LoadMode mode = LoadMode::open_loop;

  // Open loop: arrivals from trace_s when it is set, else from schedule with spacing.
  std::optional<serve::RateSchedule> schedule;
  serve::ArrivalSpacing spacing = serve::ArrivalSpacing::poisson;
  std::optional<std::vector<double>> trace_s;
  std::string trace_name;  // the trace's file, for the report
  int connections = 64;    // open loop: most requests in flight (one worker thread each)

  // Closed loop
  int clients = 0;
  double think_s = 0.0;  // pause between an answer and the client's next request

  double duration_s = 10.0;  // sending stops at this time from the start
  std::uint64_t max_requests = 1'000'000;
  std::int64_t batch = 1;  // items per request: the inputs' batch dimension
  std::vector<kserve::InputShape> shapes;
  bool binary = false;       // Triton's binary tensor data extension instead of JSON numbers
  double timeout_s = 30.0;   // a request with no answer by then has failed
  double slo_s = 0.1;        // answered within this, from the scheduled time, counts as goodput
  std::uint64_t seed = 1;    // arrivals and input data
  double stop_grace_s = 1.0; // after *stop, requests in flight get this long before they are cancelled
  // Requests scheduled in the first warmup_s seconds are sent as the others but left out of every
  // figure (perf_analyzer's warm-up): a server's first requests open its connections and touch
  // its memory for the first time. Less than duration_s.
  double warmup_s = 0.0;
  // A server that cannot be reached yet, or answers the metadata request with a 5xx or not in
  // time, is asked again every 0.2 s for up to this long before the run starts (a server started
  // a moment before); 0: the first refusal is the error.
  double wait_s = 0.0;
};

// Error(usage) naming the first bad option.
void validate(const LoadOptions& options);

enum class OutcomeKind : std::uint8_t {
  ok,
  rejected_429,
  rejected_503,
  failed_http,
  failed_transport,
  timed_out,
  cancelled,
  unsent,
};

// One request as the generator saw it.
struct RequestOutcome {
  double scheduled_s = 0.0;  // from the start; closed loop: when it was sent
  float latency_s = 0.0F;    // answer - scheduled; unsent: end of sending - scheduled
  float service_s = 0.0F;    // answer - sent (the part the server and the network took)
  OutcomeKind kind = OutcomeKind::ok;
};

// Nearest-rank percentiles (the ceil(q * n)-th smallest value), exact; all 0 when count is 0.
struct Percentiles {
  std::uint64_t count = 0;
  double p50_s = 0.0;
  double p90_s = 0.0;
  double p95_s = 0.0;
  double p99_s = 0.0;
  double max_s = 0.0;
  double mean_s = 0.0;
};
[[nodiscard]] Percentiles percentiles(std::vector<double> values_s);

struct ErrorSample {
  int http_status = 0;  // 0 for a transport error or a timeout
  std::string message;
  std::uint64_t count = 0;
};

// The requests scheduled in one step of a rate schedule (by their scheduled time).
struct SegmentReport {
  double start_s = 0.0;
  double end_s = 0.0;
  double rate_per_s = 0.0;
  std::uint64_t scheduled = 0;
  std::uint64_t answered = 0;
  std::uint64_t within_slo = 0;
  double p99_s = 0.0;
};

struct LoadReport {
  // What ran
  std::string url;
  std::string model;
  std::string model_version;
  LoadMode mode = LoadMode::open_loop;
  std::string arrivals;  // "poisson at 50/s", "constant at 0:50,30:100", "trace FILE", "closed loop"
  int connections = 0;   // open loop: workers; closed loop: clients
  double think_s = 0.0;
  std::int64_t batch = 1;
  bool binary = false;
  std::string inputs;  // "INPUT0 FP32 [1,16]"
  std::uint64_t request_bytes = 0;
  double slo_s = 0.0;
  double duration_s = 0.0;
  double timeout_s = 0.0;
  std::uint64_t max_requests = 0;
  std::uint64_t seed = 0;
  double warmup_s = 0.0;               // the first seconds, not counted
  std::uint64_t warmup_requests = 0;   // requests scheduled in them (sent or not), left out

  // How it ended
  double elapsed_s = 0.0;   // start to the last answer or send (at least duration_s when it ran that long)
  std::string stop_reason;  // "duration", "max_requests", "trace_end", "signal"
  bool interrupted = false;

  // Counts: scheduled = sent + unsent; sent = answered + rejected + failed + cancelled.
  std::uint64_t scheduled = 0;
  std::uint64_t sent = 0;
  std::uint64_t unsent = 0;
  std::uint64_t answered = 0;
  std::uint64_t within_slo = 0;
  std::uint64_t rejected_429 = 0;
  std::uint64_t rejected_503 = 0;
  std::uint64_t failed_http = 0;
  std::uint64_t failed_transport = 0;
  std::uint64_t timed_out = 0;
  std::uint64_t cancelled = 0;
  [[nodiscard]] std::uint64_t rejected() const { return rejected_429 + rejected_503; }
  [[nodiscard]] std::uint64_t failed() const { return failed_http + failed_transport + timed_out; }

  double offered_rps = 0.0;     // scheduled / elapsed (open loop)
  double throughput_rps = 0.0;  // answered / elapsed
  double goodput_rps = 0.0;     // within_slo / elapsed
  double slo_attainment = 1.0;  // within_slo / (scheduled - cancelled); 1 when nothing was scheduled

  Percentiles latency;     // answered requests, from the scheduled time
  Percentiles service;     // answered requests, from the send
  Percentiles send_lag;    // sent requests: send - scheduled (open loop: waiting for a connection)
  Percentiles rejection;   // 429 answers, from the send: how fast the server sheds
  std::uint64_t retry_after_count = 0;   // 429 answers that carried Retry-After
  std::optional<double> max_retry_after_s;
  int max_in_flight = 0;
  int connections_used = 0;  // connections (clients) that sent at least one request

  std::vector<ErrorSample> errors;  // the first few distinct messages, with their counts
  std::uint64_t other_errors = 0;   // error answers whose message was not among them
  std::vector<SegmentReport> segments;  // one per step of a rate schedule with several steps
};

// Fills the counts, rates, percentiles and segments of `report` from the outcomes scheduled after
// the warm-up (the rates over the time after it); report's slo_s, duration_s, warmup_s,
// elapsed_s, interrupted and mode must be set. `schedule` gives the segments (none when
// null or constant). Pure.
void summarize_outcomes(LoadReport& report, const std::vector<RequestOutcome>& outcomes,
                        const serve::RateSchedule* schedule);

// Runs the load. Errors of the tool itself, before the first request, are thrown: Error(usage)
// for bad options or an unknown model, Error(io) for a server that cannot be reached,
// Error(invalid_data) for metadata that is not. Everything that happens to the requests is in
// the report. `stop` (may be null) ends the run early; the report then says interrupted.
[[nodiscard]] LoadReport run_load(const LoadOptions& options, const std::atomic<bool>* stop);

[[nodiscard]] nlohmann::json to_json(const LoadReport& report);
[[nodiscard]] std::string to_text(const LoadReport& report);

}  // namespace gpucap::service
