#pragma once
// `gpucap serve`'s inference API: KServe v2 / the Open Inference Protocol over HTTP, as Triton
// speaks it, so existing clients and load generators (tritonclient.http, perf_analyzer, gpucap
// load) work unchanged:
//   GET  /v2/health/live, /v2/health/ready          200 / 503 (ready: draining, or the GPU stalled), empty body
//   GET  /v2                                        server metadata
//   GET  /v2/models/{m}[/versions/{v}]              model metadata (input shape -1: the batch)
//   GET  /v2/models/{m}[/versions/{v}]/ready        200, or 404 for an unknown model
//   GET  /v2/models/{m}[/versions/{v}]/config       Triton's model config (perf_analyzer reads it)
//   POST /v2/models/{m}[/versions/{v}]/infer        JSON tensors, or Triton's binary extension
// Errors are {"error": "..."}: 400 a bad request, 404 an unknown model or route, 405 a known route
// with the wrong method, 413 a body over the limit, 429 shed under the cap (Retry-After, seconds),
// 503 a full queue, a queue timeout, a draining server or a GPU stalled in a batch (past the
// runtime's batch timeout), 500 an engine failure. Each refusal is
// one log line. The body's size, the time to read a request and the time an answer may take are
// bounded; a slow client holds one of the threads only until its read deadline.

#include <cstddef>
#include <memory>
#include <string>

#include "gpucap/serve/serving_runtime.hpp"
#include "gpucap/service/inference_backend.hpp"
#include "gpucap/service/serve_metrics.hpp"

namespace gpucap::service {

struct InferenceServerOptions {
  std::string host = "127.0.0.1";
  int port = 8000;  // 0: a free one (bind() says which)
  // Requests processed at once (worker threads); an idle or still-arriving connection holds none.
  std::size_t threads = 128;
  // Open connections; more are answered 503 and closed. Each is a file descriptor: keep it under
  // the process's open-file limit (connection_limit_within_open_files).
  std::size_t max_connections = 8192;
  std::size_t max_request_bytes = std::size_t{64} << 20U;  // --max-request-mib
  double read_timeout_s = 5.0;    // a request's headers and body must arrive within this
  double write_timeout_s = 5.0;
  std::string version;            // the server's, for GET /v2
};

// The connections a server may hold under the process's open-file limit (RLIMIT_NOFILE, its soft
// value), leaving `other_files` for everything else the process opens (the admin and metrics
// servers' connections, the GPU's files, the cap file): at most `limit`, at least 16. Past the
// open-file limit accept() fails and no 503 can be answered, so the server's limit must come first.
[[nodiscard]] std::size_t connection_limit_within_open_files(std::size_t limit, std::size_t other_files);

class InferenceServer {
 public:
  // `metrics` may be null. The backend and metrics must outlive the server.
  InferenceServer(InferenceBackend& backend, InferenceServerOptions options, ServeMetrics* metrics);
  ~InferenceServer();
  InferenceServer(const InferenceServer&) = delete;
  InferenceServer& operator=(const InferenceServer&) = delete;

  // What the serving runtime runs a batch with: the backend on the requests' data.
  [[nodiscard]] serve::ServingRuntime::Executor executor();
  // The runtime requests go to; before serve().
  void attach(serve::ServingRuntime& runtime);

  // Binds the address; returns the port. Error(io) when it cannot be bound.
  int bind();
  // Serves until stop().
  void serve();
  // Stops accepting; requests in flight are answered first. From any thread.
  void stop();
  [[nodiscard]] std::string url() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpucap::service
