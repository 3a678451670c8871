#pragma once
// `gpucap serve --admin HOST:PORT`: the cap as an operator or a power manager sets it while the
// server runs, on an address of its own, every route behind a bearer token (--admin-token-file):
//   GET /v1/power                  {"cap_w": ..., "source": ..., "power_w": ..., "min_w", "max_w"}
//   PUT /v1/power/cap {"watts": W} the cap from now on (source "admin"); answers as GET does
// 401 without the token (WWW-Authenticate: Bearer), 400 a body that is not {"watts": number},
// 422 a cap outside what the GPU can draw (nothing changes), 404/405 other routes and methods,
// 413 a body over 4 KiB. Errors are {"error": "..."}; each refusal is one log line.

#include <functional>
#include <memory>
#include <string>

#include "gpucap/serve/cap_state.hpp"

namespace gpucap::service {

struct AdminServerOptions {
  std::string host = "127.0.0.1";
  int port = 8001;
  std::string token;  // required: the server refuses to start without one
  bool simulated = false;  // GET /v1/power says whether its power is the twin's
};

class AdminServer {
 public:
  // `now_s`: the serving clock (seconds from the start); `power_w`: the newest power reading;
  // `cap_set`: told after a cap was set (wakes the serving loop). All called from its threads.
  AdminServer(serve::CapState& cap, AdminServerOptions options, std::function<double()> now_s,
              std::function<double()> power_w, std::function<void()> cap_set);
  ~AdminServer();
  AdminServer(const AdminServer&) = delete;
  AdminServer& operator=(const AdminServer&) = delete;

  // Binds and serves on a thread of its own; returns the port. Error(io) if it cannot bind.
  int start();
  void stop();
  [[nodiscard]] std::string url() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpucap::service
