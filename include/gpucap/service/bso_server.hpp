#pragma once
// `gpucap bso serve`'s HTTP server: Zeus's batch-size optimizer routes (service/bso_api.hpp) on
// a GuardedServer, with an optional bearer token, limits on size and time, and JSON errors throughout.

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "gpucap/service/bso_api.hpp"
#include "gpucap/service/store.hpp"

namespace gpucap::service {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8000;                          // 0: any free port (bind() says which)
  std::optional<std::string> bearer_token;  // required on every route when set
  // Requests answered at once (threads, started as needed). Open connections hold no thread
  // while their request arrives or while they are idle (service/guarded_server.hpp).
  std::size_t threads = 256;
  std::size_t max_body_bytes = std::size_t{1} << 20U;  // larger bodies are refused (413), chunked too
  double header_timeout_s = 10.0;   // a request's headers must arrive within this (408)
  double request_timeout_s = 30.0;  // and its body within this, both from its first byte
  // Told of every answer of a route ("POST /jobs", "GET /jobs/batch_size", "POST /report",
  // "PATCH /trials", "DELETE /jobs") with the request's body, from the server's threads (metrics).
  // What it throws is logged and changes nothing of the answer.
  std::function<void(std::string_view route, std::string_view request_body, const ApiResponse& answer)> on_answer;
};

// HOST:PORT (PORT 0 to 65535); Error(usage) otherwise, naming `option` (the flag it came from,
// e.g. "--metrics") and giving `example` (e.g. "127.0.0.1:9400").
[[nodiscard]] std::pair<std::string, int> parse_listen_address(const std::string& text, std::string_view option,
                                                               std::string_view example);

// The token in `path` (surrounding whitespace removed); Error(io) if it cannot be read,
// Error(usage) naming `flag` (the option that gave the path) if it is empty or unusable.
[[nodiscard]] std::string read_token_file(const std::string& path, std::string_view flag);

class BsoServer {
 public:
  BsoServer(Store& store, ServerOptions options);
  ~BsoServer();
  BsoServer(const BsoServer&) = delete;
  BsoServer& operator=(const BsoServer&) = delete;

  // Binds the address and returns the port (the one picked when the options said 0).
  // Error(io) when the address cannot be bound.
  int bind();
  // Serves until stop(); bind() first.
  void serve();
  // From any thread (or a signal-waiting thread): serve() returns once open requests finish.
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpucap::service
