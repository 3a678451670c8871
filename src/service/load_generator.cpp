#include "gpucap/service/load_generator.hpp"

// The HTTP side of `gpucap load`: worker threads, one keep-alive connection each, sending one
// pre-encoded request. The report's arithmetic is in load_report.cpp.

#include <fmt/format.h>
#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cmath>
#include <exception>
#include <latch>
#include <memory>
#include <mutex>
#include <system_error>
#include <thread>

#include "gpucap/core/error.hpp"
#include "gpucap/core/text.hpp"
#include "load_connections.hpp"

namespace gpucap::service {
namespace {

using load_detail::Clock;

using load_detail::ErrorLog;
using load_detail::kStopPoll;
using load_detail::RequestWatch;
using load_detail::WorkerPool;

constexpr int kMaxWorkers = 1024;
constexpr auto kDriverPoll = std::chrono::milliseconds(5);
constexpr double kMetadataTimeoutS = 10.0;
constexpr double kServerUpPollS = 0.2;
constexpr auto kServerUpPoll = std::chrono::milliseconds(200);
constexpr double kLongestWaitS = 3600.0;
// The longest timeout and think time a flag may ask for (kLongestLoadRunS bounds the run).
constexpr double kLongestTimeoutS = 3600.0;
constexpr double kLongestThinkS = 3600.0;
// httplib's read timeout is per read: a request that failed after this share of the timeout
// ran out of time rather than into an error.
constexpr double kTimedOutShare = 0.95;
// Outcome storage reserved up front per worker, at most (it grows past this if it must).
constexpr std::uint64_t kMaxReservePerWorker = 1 << 20;

double seconds_between(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

Clock::duration to_duration(double seconds) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

void set_timeouts(httplib::Client& client, double timeout_s) {
  const auto whole = static_cast<time_t>(std::floor(timeout_s));
  const auto micro = static_cast<time_t>((timeout_s - static_cast<double>(whole)) * 1e6);
  client.set_connection_timeout(whole, micro);
  client.set_read_timeout(whole, micro);
  client.set_write_timeout(whole, micro);
}

std::string transport_message(httplib::Error error) {
  switch (error) {
    case httplib::Error::Connection: return "could not connect to the server";
    case httplib::Error::ConnectionTimeout: return "connecting to the server timed out";
    case httplib::Error::Read: return "the connection failed or closed before the answer was read";
    case httplib::Error::Write: return "sending the request failed";
    default: return fmt::format("HTTP client error: {}", httplib::to_string(error));
  }
}

// Retry-After as delta-seconds (RFC 9110); an HTTP-date is not read. A wait past the longest run
// is the longest run (the client waits at most to the run's end anyway).
std::optional<double> parse_retry_after(const std::string& value) {
  const auto seconds = parse_integer(value);
  if (!seconds || *seconds < 0) return std::nullopt;
  return std::min(static_cast<double>(*seconds), kLongestLoadRunS);
}

struct Run {
  Run(const LoadOptions& options_, const kserve::InferRequestBody& request_, std::string path_,
      const std::atomic<bool>* stop_)
      : options(options_), request(request_), path(std::move(path_)), stop(stop_) {}

  const LoadOptions& options;
  const kserve::InferRequestBody& request;
  std::string path;
  httplib::Headers headers;
  Clock::time_point start;
  const std::atomic<bool>* stop = nullptr;

  std::optional<serve::ArrivalProcess> arrivals;  // open loop: read by the dispatcher only
  std::atomic<std::uint64_t> claimed{0};          // closed loop: requests begun
  std::atomic<bool> hit_max_requests{false};
  std::atomic<bool> cancelling{false};
  std::atomic<int> in_flight{0};
  std::atomic<int> max_in_flight{0};
  ErrorLog errors;

  [[nodiscard]] bool stopped() const { return stop != nullptr && stop->load(std::memory_order_relaxed); }
};

// Sleeps until `when` unless a stop is requested first (then false).
bool sleep_until_or_stop(const Run& run, Clock::time_point when) {
  while (true) {
    if (run.stopped()) return false;
    const auto now = Clock::now();
    if (now >= when) return true;
    std::this_thread::sleep_until(std::min(when, now + kStopPoll));
  }
}

// Sends the request scheduled at scheduled_s and records its outcome; returns the Retry-After of
// a 429 that carried one.
std::optional<double> send_one(Run& run, httplib::Client& client, RequestWatch& watch, double scheduled_s,
                               std::vector<RequestOutcome>& outcomes) {
  const auto sent_at = Clock::now();
  watch.begin(sent_at);
  // A warm-up request is sent as any other and left out of every figure, its errors included.
  const bool counted = scheduled_s >= run.options.warmup_s;
  const int now_in_flight = run.in_flight.fetch_add(1, std::memory_order_relaxed) + 1;
  int seen = run.max_in_flight.load(std::memory_order_relaxed);
  while (counted && now_in_flight > seen && !run.max_in_flight.compare_exchange_weak(seen, now_in_flight)) {
  }
  // The body is streamed from the one encoded copy: handing it to Post() as a string would copy
  // it into each request, megabytes of fresh memory per image request that a cold process faults
  // in a page at a time (the generator's first second, on this VM, went mostly to that).
  const std::string& body = run.request.body;
  const auto result = client.Post(
      run.path, run.headers, body.size(),
      [&body](std::size_t offset, std::size_t length, httplib::DataSink& sink) {
        // A failed write is cpp-httplib's to report (Error::Write); false here would read as the
        // caller cancelling.
        (void)sink.write(body.data() + offset, std::min(length, body.size() - offset));
        return true;
      },
      run.request.content_type);
  const bool past_deadline = watch.end();
  const auto done = Clock::now();
  run.in_flight.fetch_sub(1, std::memory_order_relaxed);

  RequestOutcome outcome;
  outcome.scheduled_s = scheduled_s;
  outcome.latency_s = static_cast<float>(seconds_between(run.start + to_duration(scheduled_s), done));
  outcome.service_s = static_cast<float>(seconds_between(sent_at, done));
  std::optional<double> retry_after;
  ErrorLog ignored;
  auto& errors = counted ? run.errors : ignored;
  if (run.cancelling.load() && !result) {
    outcome.kind = OutcomeKind::cancelled;
  } else if (past_deadline || static_cast<double>(outcome.service_s) > run.options.timeout_s) {
    // Stopped at the deadline, or answered after it: no answer within the timeout.
    outcome.kind = OutcomeKind::timed_out;
    errors.add(0, fmt::format("no answer within the timeout of {:g} ms", run.options.timeout_s * 1e3));
  } else if (!result) {
    const auto error = result.error();
    if (error != httplib::Error::Connection && outcome.service_s >= kTimedOutShare * run.options.timeout_s) {
      outcome.kind = OutcomeKind::timed_out;
      errors.add(0, fmt::format("no answer within the timeout of {:g} ms", run.options.timeout_s * 1e3));
    } else {
      outcome.kind = OutcomeKind::failed_transport;
      errors.add(0, transport_message(error));
    }
  } else if (result->status == 200) {
    outcome.kind = OutcomeKind::ok;
  } else {
    const int status = result->status;
    outcome.kind = status == 429   ? OutcomeKind::rejected_429
                   : status == 503 ? OutcomeKind::rejected_503
                                   : OutcomeKind::failed_http;
    if (status == 429 && result->has_header("Retry-After")) {
      retry_after = parse_retry_after(result->get_header_value("Retry-After"));
      if (retry_after) errors.add_retry_after(*retry_after);
    }
    errors.add(status, kserve::error_message_of(result->body, status));
  }
  outcomes.push_back(outcome);
  return retry_after;
}

void open_loop_worker(Run& run, WorkerPool& pool, std::size_t index, httplib::Client& client, RequestWatch& watch,
                      std::vector<RequestOutcome>& outcomes) {
  while (const auto scheduled_s = pool.next_job(index)) {
    send_one(run, client, watch, *scheduled_s, outcomes);
    pool.release(index);
  }
}

RequestOutcome unsent_outcome(double scheduled_s, double sending_end_s) {
  RequestOutcome outcome;
  outcome.scheduled_s = scheduled_s;
  outcome.latency_s = static_cast<float>(std::max(0.0, sending_end_s - scheduled_s));
  outcome.kind = OutcomeKind::unsent;
  return outcome;
}

// Takes the arrivals in order, waits for each one's time, then for an idle worker. The wait for a
// worker is part of the request's latency (measured from its scheduled time). A request that
// finds no worker before sending stops is unsent, and so is every arrival after it. After a stop
// request, the arrivals already due (waiting for a connection, or due while one was awaited) are
// unsent too: an overloaded run stopped early is judged on all it was asked to send by then.
void dispatch_arrivals(Run& run, WorkerPool& pool, std::vector<RequestOutcome>& unsent) {
  const auto window_end = run.start + to_duration(run.options.duration_s);
  bool sending = true;
  while (const auto arrival_s = run.arrivals->next()) {
    std::optional<std::size_t> worker;
    if (sending) {
      const bool due = sleep_until_or_stop(run, run.start + to_duration(*arrival_s));
      if (due) worker = pool.acquire(run.stop, window_end);
      if (!worker && run.stopped()) {
        const double stop_s = std::min(seconds_between(run.start, Clock::now()), run.options.duration_s);
        for (auto late_s = arrival_s; late_s && *late_s <= stop_s; late_s = run.arrivals->next()) {
          unsent.push_back(unsent_outcome(*late_s, stop_s));
        }
        break;
      }
      sending = worker.has_value();
    }
    if (worker) {
      pool.assign(*worker, *arrival_s);
      continue;
    }
    unsent.push_back(unsent_outcome(*arrival_s, run.options.duration_s));
  }
  pool.close();
}

void closed_loop_worker(Run& run, httplib::Client& client, RequestWatch& watch, std::vector<RequestOutcome>& outcomes) {
  const auto end = run.start + to_duration(run.options.duration_s);
  while (!run.stopped()) {
    const auto now = Clock::now();
    if (now >= end) return;
    if (run.claimed.fetch_add(1) >= run.options.max_requests) {
      run.hit_max_requests = true;
      return;
    }
    const auto retry_after_s = send_one(run, client, watch, seconds_between(run.start, now), outcomes);
    const double pause_s = std::max(run.options.think_s, retry_after_s.value_or(0.0));
    if (pause_s > 0.0 && !sleep_until_or_stop(run, std::min(end, Clock::now() + to_duration(pause_s)))) return;
  }
}

std::string describe_arrivals(const LoadOptions& options) {
  if (options.mode == LoadMode::closed_loop) {
    return options.think_s > 0.0 ? fmt::format("closed loop, think time {:g} ms", options.think_s * 1e3)
                                 : "closed loop";
  }
  if (options.trace_s) return fmt::format("trace {}", options.trace_name.empty() ? "(given)" : options.trace_name);
  return fmt::format("{} at {}", serve::to_string(options.spacing), options.schedule->to_string());
}

}  // namespace

void validate(const LoadOptions& options) {
  const auto positive = [](double value) { return std::isfinite(value) && value > 0.0; };
  if (options.model.empty()) throw usage_error("--model is required");
  if (!(positive(options.duration_s) && options.duration_s <= kLongestLoadRunS)) {
    throw usage_error(fmt::format("--duration must be a positive number of seconds up to {:g} (a week), got {:g}",
                                  kLongestLoadRunS, options.duration_s));
  }
  if (options.max_requests < 1) throw usage_error("--max-requests must be at least 1");
  if (!(std::isfinite(options.warmup_s) && options.warmup_s >= 0.0 && options.warmup_s < options.duration_s)) {
    throw usage_error(fmt::format("--warmup must be from 0 to less than --duration ({:g} s), got {:g}",
                                  options.duration_s, options.warmup_s));
  }
  if (!(std::isfinite(options.wait_s) && options.wait_s >= 0.0 && options.wait_s <= kLongestWaitS)) {
    throw usage_error(fmt::format("--wait-s must be from 0 to {:g} seconds, got {:g}", kLongestWaitS, options.wait_s));
  }
  if (options.batch < 1) throw usage_error(fmt::format("--batch must be at least 1, got {}", options.batch));
  if (!(positive(options.timeout_s) && options.timeout_s <= kLongestTimeoutS)) {
    throw usage_error(fmt::format("--timeout-ms must be positive and at most {:.0f} (an hour)", kLongestTimeoutS * 1e3));
  }
  if (!positive(options.slo_s)) throw usage_error("--slo-ms must be positive");
  if (!(std::isfinite(options.stop_grace_s) && options.stop_grace_s >= 0.0)) {
    throw usage_error("the stop grace must be >= 0 s");
  }
  if (options.mode == LoadMode::open_loop) {
    if (!options.schedule && !options.trace_s) {
      throw usage_error("open loop needs a rate, a rate schedule or a trace (--rate, --rate-schedule, --trace)");
    }
    if (options.trace_s && !options.trace_s->empty() && options.trace_s->front() >= options.duration_s) {
      throw usage_error(fmt::format("the trace's first arrival ({:g} s) is at or after --duration ({:g} s): nothing "
                                    "would be sent",
                                    options.trace_s->front(), options.duration_s));
    }
    if (options.connections < 1 || options.connections > kMaxWorkers) {
      throw usage_error(fmt::format("--connections must be from 1 to {}, got {}", kMaxWorkers, options.connections));
    }
  } else {
    if (options.clients < 1 || options.clients > kMaxWorkers) {
      throw usage_error(fmt::format("--clients must be from 1 to {}, got {}", kMaxWorkers, options.clients));
    }
    if (!(std::isfinite(options.think_s) && options.think_s >= 0.0 && options.think_s <= kLongestThinkS)) {
      throw usage_error(fmt::format("--think-ms must be from 0 to {:.0f} (an hour)", kLongestThinkS * 1e3));
    }
  }
}

namespace {

// The model's metadata, asked again while the server cannot be reached or answers 5xx (an io
// error), for up to options.wait_s or until *stop; a 4xx (an unknown model) is final at once.
kserve::ModelMetadata metadata_once_up(const kserve::ServerUrl& url, const LoadOptions& options,
                                       const std::atomic<bool>* stop) {
  const auto deadline = Clock::now() + to_duration(options.wait_s);
  const double longest_ask_s = std::min(options.timeout_s, kMetadataTimeoutS);
  for (;;) {
    // While waiting, no ask outlasts the wait by more than a poll (a server that accepts the
    // connection but does not answer yet, e.g. gpucap serve in its warm-up, is asked again).
    const double time_left_s = seconds_between(Clock::now(), deadline);
    const double ask_s = options.wait_s > 0.0 ? std::min(longest_ask_s, std::max(time_left_s, kServerUpPollS)) : longest_ask_s;
    try {
      return kserve::fetch_model_metadata(url, options.model, options.model_version, ask_s);
    } catch (const Error& e) {
      if (e.code() != ErrorCode::io || options.wait_s <= 0.0) throw;
      if (stop != nullptr && stop->load()) {
        throw Error(ErrorCode::interrupted, fmt::format("stopped while waiting for the server: {}", e.what()));
      }
      if (Clock::now() >= deadline) {
        throw Error(ErrorCode::io, fmt::format("{} (asked for {:g} s, --wait-s)", e.what(), options.wait_s));
      }
    }
    std::this_thread::sleep_for(kServerUpPoll);
  }
}

}  // namespace

LoadReport run_load(const LoadOptions& options, const std::atomic<bool>* stop) {
  validate(options);
  const auto url = kserve::parse_server_url(options.url);
  const auto metadata = metadata_once_up(url, options, stop);
  const auto inputs = kserve::make_request_inputs(metadata, options.batch, options.shapes, options.seed);
  const auto request = kserve::encode_infer_request(inputs, options.binary);

  LoadReport report;
  report.url = options.url;
  report.model = options.model;
  report.model_version = options.model_version;
  report.mode = options.mode;
  report.arrivals = describe_arrivals(options);
  report.connections = options.mode == LoadMode::open_loop ? options.connections : options.clients;
  report.think_s = options.think_s;
  report.batch = options.batch;
  report.binary = options.binary;
  report.inputs = kserve::describe_inputs(inputs);
  report.request_bytes = request.body.size();
  report.slo_s = options.slo_s;
  report.duration_s = options.duration_s;
  report.warmup_s = options.warmup_s;
  report.timeout_s = options.timeout_s;
  report.max_requests = options.max_requests;
  report.seed = options.seed;

  Run run(options, request, kserve::model_path(url, options.model, options.model_version) + "/infer", stop);
  // Servers compress answers for clients that accept it (cpp-httplib's client does by default),
  // which would load both sides with work no inference client does.
  run.headers.emplace("Accept-Encoding", "identity");
  if (request.header_length) {
    run.headers.emplace(std::string(kserve::kInferenceHeaderContentLength), std::to_string(*request.header_length));
  }
  std::uint64_t expected = options.max_requests;
  if (options.mode == LoadMode::open_loop) {
    if (options.trace_s) {
      run.arrivals = serve::ArrivalProcess::from_trace(*options.trace_s, options.duration_s, options.max_requests);
      expected = std::min<std::uint64_t>(expected, options.trace_s->size());
    } else {
      run.arrivals = serve::ArrivalProcess::from_schedule(*options.schedule, options.spacing, options.seed,
                                                          options.duration_s, options.max_requests);
      const double mean = options.schedule->expected_arrivals(options.duration_s);
      expected = static_cast<std::uint64_t>(std::min(static_cast<double>(expected), mean + 4.0 * std::sqrt(mean) + 16.0));
    }
  }

  const auto workers = static_cast<std::size_t>(report.connections);
  std::vector<std::unique_ptr<httplib::Client>> clients;
  std::vector<RequestWatch> watches(workers);
  std::vector<std::vector<RequestOutcome>> outcomes(workers);
  for (std::size_t i = 0; i < workers; ++i) {
    auto client = std::make_unique<httplib::Client>(url.scheme_host_port);
    client->set_keep_alive(true);
    client->set_tcp_nodelay(true);
    set_timeouts(*client, options.timeout_s);
    clients.push_back(std::move(client));
    outcomes[i].reserve(static_cast<std::size_t>(std::min(kMaxReservePerWorker, expected / workers + 64)));
  }

  // Open the connections before the clock starts, one after another (a cheap GET), so that the
  // first requests do not pay for connecting, and N closed-loop clients connecting at once do not
  // overflow a small listen backlog (cpp-httplib's is 5: the kernel drops the excess SYNs and the
  // clients retry a second later). Open loop: the first connection only, the pool opens more as
  // the load needs them.
  const auto warm = options.mode == LoadMode::closed_loop ? workers : std::size_t{1};
  const auto health_path = url.path_prefix + "/v2/health/ready";
  for (std::size_t i = 0; i < warm && !run.stopped(); ++i) (void)clients[i]->Get(health_path, run.headers);

  WorkerPool pool(workers);
  std::vector<RequestOutcome> unsent;
  std::atomic<std::size_t> running{workers};
  std::mutex failure_mutex;
  std::exception_ptr failure;
  const auto guarded = [&](auto&& work) {
    try {
      work();
    } catch (...) {
      const std::lock_guard lock(failure_mutex);
      if (!failure) failure = std::current_exception();
    }
  };
  std::vector<std::thread> threads;
  // The clock starts once every thread is up: starting a thousand of them takes long enough to
  // show in the first arrivals' latency.
  std::latch clock_started(1);
  std::atomic<bool> abandoned{false};  // a thread could not be started: those that were end at once
  const auto start_thread = [&](auto&& body) {
    threads.emplace_back([&, body] {
      clock_started.wait();
      if (!abandoned.load()) body();
    });
  };
  try {
    for (std::size_t i = 0; i < workers; ++i) {
      start_thread([&, i] {
        guarded([&] {
          if (options.mode == LoadMode::open_loop) {
            open_loop_worker(run, pool, i, *clients[i], watches[i], outcomes[i]);
          } else {
            closed_loop_worker(run, *clients[i], watches[i], outcomes[i]);
          }
        });
        running.fetch_sub(1);
      });
    }
    if (options.mode == LoadMode::open_loop) {
      start_thread([&] {
        guarded([&] { dispatch_arrivals(run, pool, unsent); });
        pool.close();  // also when the dispatcher failed: the workers must end
      });
    }
  } catch (const std::system_error& e) {
    abandoned = true;
    clock_started.count_down();
    for (auto& thread : threads) thread.join();
    const auto wanted = workers + (options.mode == LoadMode::open_loop ? 1 : 0);
    throw Error(ErrorCode::io, fmt::format("could not start the load's {} threads ({} started): {}; use fewer "
                                           "--connections or --clients",
                                           wanted, threads.size(), e.what()));
  }
  run.start = Clock::now();
  clock_started.count_down();
  // Wait, stopping each request at its deadline; after a stop request, give the requests in
  // flight stop_grace_s, then cut them off.
  const auto timeout = to_duration(options.timeout_s);
  std::optional<Clock::time_point> stop_seen;
  while (running.load() > 0) {
    std::this_thread::sleep_for(kDriverPoll);
    const auto now = Clock::now();
    for (std::size_t i = 0; i < workers; ++i) watches[i].stop_if_past(now, timeout, *clients[i]);
    if (!stop_seen && run.stopped()) stop_seen = now;
    if (stop_seen && now - *stop_seen >= to_duration(options.stop_grace_s)) {
      run.cancelling = true;
      for (auto& client : clients) client->stop();
    }
  }
  for (auto& thread : threads) thread.join();
  if (failure) std::rethrow_exception(failure);

  for (const auto& part : outcomes) report.connections_used += part.empty() ? 0 : 1;
  std::vector<RequestOutcome> all;
  std::size_t total = 0;
  for (const auto& part : outcomes) total += part.size();
  all.reserve(total + unsent.size());
  all.insert(all.end(), unsent.begin(), unsent.end());
  for (auto& part : outcomes) {
    all.insert(all.end(), part.begin(), part.end());
    part = {};
  }
  std::sort(all.begin(), all.end(),
            [](const RequestOutcome& a, const RequestOutcome& b) { return a.scheduled_s < b.scheduled_s; });

  report.interrupted = stop_seen.has_value();
  if (report.interrupted) {
    report.stop_reason = "signal";
  } else if (run.hit_max_requests || (run.arrivals && run.arrivals->produced() >= options.max_requests)) {
    report.stop_reason = "max_requests";
  } else {
    const bool trace_ended = options.trace_s && options.mode == LoadMode::open_loop && options.trace_s->back() < options.duration_s;
    report.stop_reason = trace_ended ? "trace_end" : "duration";
  }
  // Elapsed: to the last answer or send, and over the whole sending window when the run used all
  // of it. A request that timed out, failed or was cancelled ends nothing: one that hung to its
  // timeout would stretch the run (and shrink every rate) by that timeout.
  double last_s = 0.0;
  for (const auto& outcome : all) {
    if (outcome.kind == OutcomeKind::unsent) continue;
    const double end_s = outcome.scheduled_s + static_cast<double>(outcome.latency_s);
    const bool answered = outcome.kind == OutcomeKind::ok || outcome.kind == OutcomeKind::rejected_429 ||
                          outcome.kind == OutcomeKind::rejected_503 || outcome.kind == OutcomeKind::failed_http;
    last_s = std::max(last_s, answered ? end_s : end_s - static_cast<double>(outcome.service_s));
  }
  if (report.stop_reason == "duration") last_s = std::max(last_s, options.duration_s);
  if (stop_seen) last_s = std::max(last_s, std::min(seconds_between(run.start, *stop_seen), options.duration_s));
  report.elapsed_s = last_s;
  report.max_in_flight = run.max_in_flight.load();
  run.errors.into(report);
  summarize_outcomes(report, all, options.mode == LoadMode::open_loop && !options.trace_s ? &*options.schedule : nullptr);
  return report;
}

}  // namespace gpucap::service
