#include "gpucap/service/inference_server.hpp"

#include <fmt/format.h>
#include <httplib.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <thread>

#include "gpucap/core/error.hpp"
#include "http_common.hpp"

namespace gpucap::service {
namespace {

constexpr std::size_t kKeepAliveRequests = 10000;
constexpr time_t kKeepAliveIdleS = 5;

const std::vector<std::string> kExtensions = {"binary_tensor_data", "schedule_policy", "model_configuration"};

// httplib's seconds + microseconds from seconds.
std::pair<time_t, time_t> split_seconds(double seconds) {
  const auto whole = static_cast<time_t>(seconds);
  return {whole, static_cast<time_t>((seconds - static_cast<double>(whole)) * 1e6)};
}

void send_error(httplib::Response& response, int status, std::string_view message) {
  response.status = status;
  response.set_content(kserve::error_json(message), std::string(kserve::kJsonContentType));
}

// The messages cpp-httplib's own refusals get (it answers those without a handler).
std::string status_text(int status) {
  switch (status) {
    case 400: return "Bad Request: the request could not be read";
    case 404: return "Not Found: the routes are /v2, /v2/health/{live,ready} and /v2/models/{model}[/versions/{v}][/ready|/config|/infer]";
    case 408: return "Request Timeout: the request did not arrive in time";
    case 413: return "the request body is larger than the server's limit (--max-request-mib)";
    case 414: return "URI Too Long";
    case 431: return "Request Header Fields Too Large";
    default: return fmt::format("HTTP error {}", status);
  }
}

int status_of(const serve::Answer& answer) {
  switch (answer.kind) {
    case serve::AnswerKind::ok: return 200;
    case serve::AnswerKind::shed: return 429;
    case serve::AnswerKind::refused:
      return answer.admission == serve::AdmissionResult::queue_full ? 503 : 400;
    case serve::AnswerKind::timed_out:
    case serve::AnswerKind::stopping: return 503;
    case serve::AnswerKind::failed: return 500;
  }
  return 500;
}

}  // namespace

struct InferenceServer::Impl {
  Impl(InferenceBackend& b, InferenceServerOptions o, ServeMetrics* m) : backend(b), options(std::move(o)), metrics(m) {}

  // Whether the path's model (and version) is the one served; else a 404 is sent.
  bool known_model(const httplib::Request& request, httplib::Response& response) const {
    const auto& model = backend.metadata();
    const std::string name = request.matches[1];
    const std::string version = request.matches.size() > 2 ? std::string(request.matches[2]) : std::string();
    if (name != model.name) {
      send_error(response, 404, fmt::format("Request for unknown model: '{}' is not found (this server serves '{}')", name,
                                            model.name));
      spdlog::warn("serve: 404 {} {}: unknown model '{}'", request.method, request.path, name);
      return false;
    }
    if (!version.empty() && std::find(model.versions.begin(), model.versions.end(), version) == model.versions.end()) {
      send_error(response, 404, fmt::format("Request for unknown model: '{}' version {} is not found", name, version));
      spdlog::warn("serve: 404 {} {}: unknown version '{}'", request.method, request.path, version);
      return false;
    }
    return true;
  }

  void infer(const httplib::Request& request, httplib::Response& response) {
    const auto started = std::chrono::steady_clock::now();
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
      if (metrics != nullptr) metrics->bad_request();
      spdlog::warn("serve: {} POST {}: {}", e.http_status(), request.path, e.what());
      return;
    }
    const auto batch = parsed.batch_size;
    const int priority = parsed.priority ? static_cast<int>(std::min<std::int64_t>(*parsed.priority, 1'000'000)) : 0;
    const auto timeout_s =
        parsed.timeout_us ? std::optional<double>(static_cast<double>(*parsed.timeout_us) / 1e6) : std::nullopt;
    const auto id = table.add(std::move(parsed));
    auto answered = runtime->submit(id, static_cast<int>(batch), priority, timeout_s);
    if (metrics != nullptr) metrics->pending(runtime->pending());
    // The runtime answers every request it admitted (a queue timeout bounds the wait).
    const auto answer = answered.get();
    auto entry = table.take(id);
    const double total_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    if (metrics != nullptr) {
      metrics->request(answer, batch, total_s);
      metrics->pending(runtime->pending());
    }
    const int status = status_of(answer);
    if (status != 200) {
      if (answer.kind == serve::AnswerKind::shed) {
        response.set_header("Retry-After", std::to_string(std::max<long>(1, std::lround(std::ceil(answer.retry_after_s)))));
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
      spdlog::warn("serve: {} POST {}: {}", e.http_status(), request.path, e.what());
    }
  }

  // Answers 405 (with Allow) for the methods a known route does not take.
  void method_not_allowed(const std::string& pattern, const char* allowed) {
    const httplib::Server::Handler refuse = [allowed](const httplib::Request& request, httplib::Response& response) {
      response.set_header("Allow", allowed);
      send_error(response, 405, fmt::format("{} {}: method not allowed (allowed: {})", request.method, request.path, allowed));
      spdlog::warn("serve: 405 {} {}", request.method, request.path);
    };
    const std::string allow = allowed;
    if (allow != "GET") http.Get(pattern, refuse);
    if (allow != "POST") http.Post(pattern, refuse);
    http.Put(pattern, refuse);
    http.Patch(pattern, refuse);
    http.Delete(pattern, refuse);
  }

  void configure() {
    http.new_task_queue = [threads = options.threads] { return new httplib::ThreadPool(threads); };
    http.set_payload_max_length(options.max_request_bytes);
    const auto [read_s, read_us] = split_seconds(options.read_timeout_s);
    http.set_read_timeout(read_s, read_us);
    const auto [write_s, write_us] = split_seconds(options.write_timeout_s);
    http.set_write_timeout(write_s, write_us);
    http.set_keep_alive_max_count(kKeepAliveRequests);
    http.set_keep_alive_timeout(kKeepAliveIdleS);
    http.set_tcp_nodelay(true);
    detail::refuse_shared_ports(http);
    const httplib::Server::HandlerWithResponse json_errors = [](const httplib::Request& request,
                                                                httplib::Response& response) {
      if (!response.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
      spdlog::warn("serve: {} {} {}", response.status, request.method, request.path);
      send_error(response, response.status, status_text(response.status));
      return httplib::Server::HandlerResponse::Handled;
    };
    http.set_error_handler(json_errors);
    http.set_exception_handler([](const httplib::Request& request, httplib::Response& response, std::exception_ptr error) {
      std::string message = "internal error";
      try {
        std::rethrow_exception(error);
      } catch (const std::exception& e) {
        message = fmt::format("internal error: {}", e.what());
      } catch (...) {
      }
      spdlog::error("serve: 500 {} {}: {}", request.method, request.path, message);
      send_error(response, 500, message);
    });

    const std::string model_path = R"(/v2/models/([^/]+)(?:/versions/([^/]+))?)";
    http.Get("/v2/health/live", [](const httplib::Request&, httplib::Response& response) { response.status = 200; });
    http.Get("/v2/health/ready", [this](const httplib::Request&, httplib::Response& response) {
      response.status = runtime != nullptr && !runtime->draining() ? 200 : 503;
    });
    http.Get("/v2", [this](const httplib::Request&, httplib::Response& response) {
      response.set_content(kserve::server_metadata_json("gpucap", options.version, kExtensions).dump(),
                           std::string(kserve::kJsonContentType));
    });
    http.Get(model_path, [this](const httplib::Request& request, httplib::Response& response) {
      if (known_model(request, response)) {
        response.set_content(kserve::to_json(backend.metadata()).dump(), std::string(kserve::kJsonContentType));
      }
    });
    http.Get(model_path + "/ready", [this](const httplib::Request& request, httplib::Response& response) {
      if (known_model(request, response)) response.status = runtime != nullptr && !runtime->draining() ? 200 : 503;
    });
    http.Get(model_path + "/config", [this](const httplib::Request& request, httplib::Response& response) {
      if (known_model(request, response)) {
        response.set_content(kserve::model_config_json(backend.metadata(), true).dump(), std::string(kserve::kJsonContentType));
      }
    });
    http.Post(model_path + "/infer", [this](const httplib::Request& request, httplib::Response& response) { infer(request, response); });
    for (const auto& path : {std::string("/v2/health/live"), std::string("/v2/health/ready"), std::string("/v2"), model_path,
                             model_path + "/ready", model_path + "/config"}) {
      method_not_allowed(path, "GET");
    }
    method_not_allowed(model_path + "/infer", "POST");
  }

  InferenceBackend& backend;
  InferenceServerOptions options;
  ServeMetrics* metrics;
  RequestTable table;
  serve::ServingRuntime* runtime = nullptr;
  httplib::Server http;
  std::atomic<bool> serving{false};
  std::atomic<bool> stop_requested{false};
};

InferenceServer::InferenceServer(InferenceBackend& backend, InferenceServerOptions options, ServeMetrics* metrics)
    : impl_(std::make_unique<Impl>(backend, std::move(options), metrics)) {
  if (impl_->options.threads == 0) throw usage_error("the server needs at least one thread");
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
  const int port = o.port == 0 ? impl_->http.bind_to_any_port(o.host) : (impl_->http.bind_to_port(o.host, o.port) ? o.port : -1);
  if (port < 0) {
    throw Error(ErrorCode::io, fmt::format("cannot listen on {}:{} (address in use, or not an address of this host)", o.host, o.port));
  }
  o.port = port;
  detail::widen_listen_backlog(port);
  return port;
}

void InferenceServer::serve() {
  if (impl_->runtime == nullptr) throw Error(ErrorCode::internal, "the inference server has no serving runtime");
  impl_->serving = true;
  const bool clean = impl_->stop_requested || impl_->http.listen_after_bind();
  impl_->serving = false;
  if (!clean) throw Error(ErrorCode::io, "the inference server stopped accepting connections");
}

void InferenceServer::stop() {
  impl_->stop_requested = true;
  while (impl_->serving && !impl_->http.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  impl_->http.stop();
}

std::string InferenceServer::url() const {
  const auto& host = impl_->options.host;
  const bool ipv6 = host.find(':') != std::string::npos;
  return fmt::format("http://{}{}{}:{}", ipv6 ? "[" : "", host, ipv6 ? "]" : "", impl_->options.port);
}

}  // namespace gpucap::service
