#include "gpucap/service/inference_server.hpp"

#include <fmt/format.h>
#include <httplib.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <future>
#include <optional>
#include <regex>
#include <string_view>
#include <thread>

#include "gpucap/core/error.hpp"
#include "gpucap/service/guarded_server.hpp"
#include "http_common.hpp"

namespace gpucap::service {
namespace {

constexpr std::size_t kKeepAliveRequests = 10000;
constexpr double kKeepAliveIdleS = 5.0;
// How often a request waiting for its answer looks whether the GPU has stalled.
constexpr auto kStallPoll = std::chrono::milliseconds(100);
constexpr const char* kNotFound =
    "Not Found: the routes are /v2, /v2/health/{live,ready} and /v2/models/{model}[/versions/{v}][/ready|/config|/infer]";

// The routes of one model: its name, and a version (optional).
constexpr const char* kModelPath = R"(/v2/models/([^/]+)(?:/versions/([^/]+))?)";

const std::vector<std::string> kExtensions = {"binary_tensor_data", "classification", "schedule_policy",
                                               "model_configuration"};

void send_error(httplib::Response& response, int status, std::string_view message) {
  response.status = status;
  response.set_content(kserve::error_json(message), std::string(kserve::kJsonContentType));
}

HttpLimits limits_of(const InferenceServerOptions& options) {
  HttpLimits limits;
  limits.log_name = "serve";
  limits.max_body_bytes = options.max_request_bytes;
  limits.header_timeout_s = options.read_timeout_s;
  limits.request_timeout_s = options.read_timeout_s;
  limits.write_timeout_s = options.write_timeout_s;
  limits.idle_timeout_s = kKeepAliveIdleS;
  limits.keep_alive_requests = kKeepAliveRequests;
  limits.workers = options.threads;
  limits.max_connections = options.max_connections;
  return limits;
}

int status_of(const serve::Answer& answer) {
  switch (answer.kind) {
    case serve::AnswerKind::ok: return 200;
    case serve::AnswerKind::shed: return 429;
    case serve::AnswerKind::refused:
      return answer.admission == serve::AdmissionResult::queue_full ? 503 : 400;
    case serve::AnswerKind::timed_out:
    case serve::AnswerKind::stopping:
    case serve::AnswerKind::stalled: return 503;
    case serve::AnswerKind::failed: return 500;
  }
  return 500;
}

}  // namespace

struct InferenceServer::Impl {
  Impl(InferenceBackend& b, InferenceServerOptions o, ServeMetrics* m)
      : backend(b),
        options(std::move(o)),
        metrics(m),
        http(limits_of(options), [](httplib::Response& response, int status, const std::string& message) {
          send_error(response, status, message);
        }, kNotFound) {}

  // Whether `version` (empty: any) is one of the served model's.
  [[nodiscard]] bool serves_version(const std::string& version) const {
    const auto& versions = backend.metadata().versions;
    return version.empty() || std::find(versions.begin(), versions.end(), version) != versions.end();
  }

  // Whether the path's model (and version) is the one served; else a 404 is sent.
  bool known_model(const httplib::Request& request, httplib::Response& response) const {
    const auto& model = backend.metadata();
    const std::string name = request.matches[1];
    const std::string version = request.matches.size() > 2 ? std::string(request.matches[2]) : std::string();
    if (name != model.name) {
      send_error(response, 404, fmt::format("Request for unknown model: '{}' is not found (this server serves '{}')", name,
                                            model.name));
      return false;
    }
    if (!serves_version(version)) {
      send_error(response, 404, fmt::format("Request for unknown model: '{}' version {} is not found", name, version));
      return false;
    }
    return true;
  }

  // A request to infer that the runtime sheds whatever its size (the admit rate has no token, or
  // the queue is over its bound) is answered 429 as soon as its headers are in, on the server's
  // waiting thread: megabytes of images need not be read and parsed to be refused, and a worker
  // is not taken from the requests that are served.
  // One it lets through gets a place held in the queue while its body comes (the ticket its
  // handler takes), so that its fate is decided once, as its headers came in.
  GuardedServer::EarlyDecision shed_early(std::string_view method, std::string_view path,
                                          std::chrono::steady_clock::time_point first_byte) {
    if (method != "POST" || runtime == nullptr || !is_infer_path(path)) return std::nullopt;
    auto arrival = runtime->arrive_early();
    if (!arrival.refusal) {
      GuardedServer::EarlyDecision through;
      through.ticket = std::move(arrival.place);
      return through;
    }
    const auto& answer = *arrival.refusal;
    // Decided as its headers came in: no processing time of its own.
    if (metrics != nullptr) metrics->request(answer, 0, 0.0, seconds_since(first_byte));
    if (answer.kind != serve::AnswerKind::shed) return GuardedServer::EarlyAnswer{status_of(answer), answer.message, {}};
    return GuardedServer::EarlyAnswer{429, answer.message, {{"Retry-After", retry_after(answer)}}};
  }

  // POST /v2/models/{the served model}[/versions/{one of its versions}]/infer, read with the
  // route's own pattern (no other request is shed before its handler).
  [[nodiscard]] bool is_infer_path(std::string_view path) const {
    static const std::regex infer_path(std::string(kModelPath) + "/infer");
    std::match_results<std::string_view::const_iterator> match;
    if (!std::regex_match(path.begin(), path.end(), match, infer_path)) return false;
    return match[1].str() == backend.metadata().name && serves_version(match[2].str());
  }

  static std::string retry_after(const serve::Answer& answer) {
    return std::to_string(std::max<long>(1, std::lround(std::ceil(answer.retry_after_s))));
  }

  // The request's answer, or, once the GPU has stalled in a batch while it waits, one that says so
  // (given_up: its entry is gone from the table). A request still queued is withdrawn, so it will
  // never run; one in the stalled batch is abandoned, and its entry goes when the batch returns.
  struct Awaited {
    serve::Answer answer;
    bool given_up = false;
  };
  Awaited await(std::future<serve::Answer>& answered, std::uint64_t id) {
    while (answered.wait_for(kStallPoll) != std::future_status::ready) {
      const auto withdrawal = runtime->withdraw(id);  // does nothing unless the GPU has stalled
      if (withdrawal == serve::ServingRuntime::Withdrawal::not_stalled) continue;
      if (withdrawal == serve::ServingRuntime::Withdrawal::withdrawn) {
        (void)table.take(id);
        return {runtime->stalled_answer(), true};
      }
      // Not queued: answered meanwhile (the future is ready now), or in the stalled batch.
      if (answered.wait_for(std::chrono::seconds(0)) == std::future_status::ready) break;
      table.abandon(id);
      return {runtime->stalled_answer(), true};
    }
    return {answered.get(), false};
  }

  static double seconds_since(std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
  }

  void infer(const httplib::Request& request, httplib::Response& response) {
    const auto started = std::chrono::steady_clock::now();
    const auto arrived = GuardedServer::request_arrival().value_or(started);
    // The place held for it as its headers came in, if any; left unused, it is given back.
    const auto place = std::static_pointer_cast<serve::ServingRuntime::HeldPlace>(GuardedServer::take_early_ticket());
    if (!known_model(request, response)) return;
    kserve::InferRequest parsed;
    try {
      std::optional<std::size_t> header_length;
      if (request.has_header(std::string(kserve::kInferenceHeaderContentLength).c_str())) {
        header_length =
            kserve::parse_header_length(request.get_header_value(std::string(kserve::kInferenceHeaderContentLength).c_str()));
      }
      parsed = kserve::parse_infer_request(request.body, header_length, backend.metadata());
    } catch (const kserve::ProtocolError& e) {
      send_error(response, e.http_status(), e.what());
      if (metrics != nullptr) metrics->bad_request(seconds_since(arrived), seconds_since(started));
      return;
    }
    const auto batch = parsed.batch_size;
    const int priority = parsed.priority ? static_cast<int>(std::min<std::int64_t>(*parsed.priority, 1'000'000)) : 0;
    const auto timeout_s =
        parsed.timeout_us ? std::optional<double>(static_cast<double>(*parsed.timeout_us) / 1e6) : std::nullopt;
    const auto id = table.add(std::move(parsed));
    auto answered = runtime->submit(id, static_cast<int>(batch), priority, timeout_s, place);
    // The runtime answers every request it admitted (a queue timeout bounds the wait), unless its
    // GPU stalls in a batch: then the request is answered 503 now rather than holding this thread
    // for as long as the engine hangs.
    const auto [answer, given_up] = await(answered, id);
    if (given_up) {
      if (metrics != nullptr) metrics->request(answer, batch, seconds_since(started), seconds_since(arrived));
      send_error(response, status_of(answer), answer.message);
      return;
    }
    auto entry = table.take(id);
    if (metrics != nullptr) metrics->request(answer, batch, seconds_since(started), seconds_since(arrived));
    const int status = status_of(answer);
    if (status != 200) {
      if (answer.kind == serve::AnswerKind::shed) {
        response.set_header("Retry-After", retry_after(answer));
      }
      send_error(response, status, answer.message);
      return;
    }
    kserve::InferResponse out;
    out.model_name = backend.metadata().name;
    out.model_version = backend.metadata().versions.front();
    out.id = entry.request.id;
    out.outputs = std::move(entry.outputs);
    try {
      auto encoded = kserve::encode_infer_response(out, entry.request);
      if (encoded.header_length) {
        response.set_header(std::string(kserve::kInferenceHeaderContentLength).c_str(), std::to_string(*encoded.header_length));
      }
      if (backend.simulated()) response.set_header("X-Gpucap-Simulated", "true");
      response.set_content(std::move(encoded.body), std::string(encoded.content_type));
    } catch (const kserve::ProtocolError& e) {
      send_error(response, e.http_status(), e.what());
    }
  }

  void configure() {
    http.set_exception_handler([](const httplib::Request&, httplib::Response& response, std::exception_ptr error) {
      std::string message = "internal error";
      try {
        std::rethrow_exception(error);
      } catch (const std::exception& e) {
        message = fmt::format("internal error: {}", e.what());
      } catch (...) {
      }
      send_error(response, 500, message);
    });

    http.set_early_check([this](std::string_view method, std::string_view path, std::chrono::steady_clock::time_point first_byte) {
      return shed_early(method, path, first_byte);
    });
    const std::string model_path = kModelPath;
    http.get("/v2/health/live", [](const httplib::Request&, httplib::Response& response) { response.status = 200; });
    http.get("/v2/health/ready", [this](const httplib::Request&, httplib::Response& response) {
      response.status = runtime != nullptr && runtime->serving() ? 200 : 503;
    });
    http.get("/v2", [this](const httplib::Request&, httplib::Response& response) {
      response.set_content(kserve::server_metadata_json("gpucap", options.version, kExtensions).dump(),
                           std::string(kserve::kJsonContentType));
    });
    http.get(model_path, [this](const httplib::Request& request, httplib::Response& response) {
      if (known_model(request, response)) {
        response.set_content(kserve::to_json(backend.metadata()).dump(), std::string(kserve::kJsonContentType));
      }
    });
    http.get(model_path + "/ready", [this](const httplib::Request& request, httplib::Response& response) {
      if (known_model(request, response)) response.status = runtime != nullptr && runtime->serving() ? 200 : 503;
    });
    http.get(model_path + "/config", [this](const httplib::Request& request, httplib::Response& response) {
      if (known_model(request, response)) {
        response.set_content(kserve::model_config_json(backend.metadata(), true).dump(), std::string(kserve::kJsonContentType));
      }
    });
    http.post(model_path + "/infer", [this](const httplib::Request& request, httplib::Response& response) { infer(request, response); });
  }

  InferenceBackend& backend;
  InferenceServerOptions options;
  ServeMetrics* metrics;
  RequestTable table;
  serve::ServingRuntime* runtime = nullptr;
  GuardedServer http;
  std::atomic<bool> serving{false};
  std::atomic<bool> stop_requested{false};
};

InferenceServer::InferenceServer(InferenceBackend& backend, InferenceServerOptions options, ServeMetrics* metrics)
    : impl_(std::make_unique<Impl>(backend, std::move(options), metrics)) {
  impl_->configure();
}

InferenceServer::~InferenceServer() { stop(); }

serve::ServingRuntime::Executor InferenceServer::executor() {
  return [impl = impl_.get()](serve::ServingLoop& loop, const serve::Launch& launch) {
    auto run = impl->table.run(impl->backend, loop, launch);
    if (impl->metrics != nullptr && run.ok) impl->metrics->batch(launch.items);
    return run;
  };
}

void InferenceServer::attach(serve::ServingRuntime& runtime) { impl_->runtime = &runtime; }

int InferenceServer::bind() {
  auto& o = impl_->options;
  const int port = impl_->http.bind_listener(o.host, o.port);
  if (port < 0) {
    throw Error(ErrorCode::io, fmt::format("cannot listen on {}:{} (address in use, or not an address of this host)", o.host, o.port));
  }
  o.port = port;
  return port;
}

void InferenceServer::serve() {
  if (impl_->runtime == nullptr) throw Error(ErrorCode::internal, "the inference server has no serving runtime");
  impl_->serving = true;
  const bool clean = impl_->stop_requested || impl_->http.listen_after_bind();
  impl_->serving = false;
  if (!clean) throw Error(ErrorCode::io, "the inference server stopped accepting connections: accept() failed on its socket");
}

void InferenceServer::stop() {
  impl_->stop_requested = true;
  while (impl_->serving && !impl_->http.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  impl_->http.stop();
}

std::size_t connection_limit_within_open_files(std::size_t limit, std::size_t other_files) {
  constexpr std::size_t kFewest = 16;
  rlimit open_files{};
  if (getrlimit(RLIMIT_NOFILE, &open_files) != 0 || open_files.rlim_cur == RLIM_INFINITY) return limit;
  const auto room = open_files.rlim_cur > other_files ? static_cast<std::size_t>(open_files.rlim_cur) - other_files : 0;
  return std::max(kFewest, std::min(limit, room));
}

std::string InferenceServer::url() const {
  const auto& host = impl_->options.host;
  const bool ipv6 = host.find(':') != std::string::npos;
  return fmt::format("http://{}{}{}:{}", ipv6 ? "[" : "", host, ipv6 ? "]" : "", impl_->options.port);
}

}  // namespace gpucap::service
