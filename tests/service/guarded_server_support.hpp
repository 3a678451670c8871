#pragma once
// What the GuardedServer tests share: a server with a few routes on a free port, a raw client
// socket, and readers of what comes back. Real sockets on 127.0.0.1.

#include <arpa/inet.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <spdlog/sinks/ringbuffer_sink.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "gpucap/service/guarded_server.hpp"

namespace gpucap::service::guarded_test {

using namespace std::chrono_literals;

inline void json_error(httplib::Response& response, int status, const std::string& message) {
  response.status = status;
  response.set_content(fmt::format(R"({{"error": "{}"}})", message), "application/json");
}

// A GuardedServer with GET /hello and POST /echo (answers the body's size), on a free port.
class TestServer {
 public:
  explicit TestServer(HttpLimits limits, GuardedServer::EarlyCheck early = {})
      : http_(with_name(std::move(limits)), json_error, "not found: try /hello") {
    if (early) http_.set_early_check(std::move(early));
    http_.get("/hello", [](const httplib::Request&, httplib::Response& response) { response.set_content("hi", "text/plain"); });
    http_.post("/echo", [](const httplib::Request& request, httplib::Response& response) {
      response.set_content(std::to_string(request.body.size()), "text/plain");
    });
    // Holds its worker for ?ms=N milliseconds.
    http_.get("/sleep", [](const httplib::Request& request, httplib::Response& response) {
      std::this_thread::sleep_for(std::chrono::milliseconds(std::stoi(request.get_param_value("ms"))));
      response.set_content("awake", "text/plain");
    });
    // Says whether the early check kept a ticket for this request; a second take has nothing.
    http_.post("/ticket", [](const httplib::Request&, httplib::Response& response) {
      const auto ticket = GuardedServer::take_early_ticket();
      const bool once = GuardedServer::take_early_ticket() == nullptr;
      response.set_content(ticket && once ? "taken" : ticket ? "twice" : "none", "text/plain");
    });
    port_ = http_.bind_listener("127.0.0.1", 0);
    thread_ = std::thread([this] { http_.listen_after_bind(); });
    while (!http_.is_running()) std::this_thread::sleep_for(1ms);
  }
  ~TestServer() {
    http_.stop();
    thread_.join();
  }
  TestServer(const TestServer&) = delete;
  TestServer& operator=(const TestServer&) = delete;

  [[nodiscard]] int port() const { return port_; }
  [[nodiscard]] GuardedServer& http() { return http_; }

 private:
  static HttpLimits with_name(HttpLimits limits) {
    limits.log_name = "test";
    return limits;
  }
  GuardedServer http_;
  int port_ = 0;
  std::thread thread_;
};

// A raw client socket: what a real attacker has, rather than a well-behaved HTTP library.
class Socket {
 public:
  explicit Socket(int port) : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<std::uint16_t>(port));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0;
  }
  ~Socket() { ::close(fd_); }
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;

  [[nodiscard]] bool connected() const { return connected_; }
  bool send(std::string_view bytes) const {
    return ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size());
  }
  [[nodiscard]] bool readable(std::chrono::milliseconds wait = 0ms) const {
    pollfd p{fd_, POLLIN, 0};
    return ::poll(&p, 1, static_cast<int>(wait.count())) > 0;
  }
  // What arrives within `wait`, until the server closes or `enough` bytes came.
  std::string receive(std::chrono::milliseconds wait, std::size_t enough = 1 << 20) const {
    std::string got;
    const auto until = std::chrono::steady_clock::now() + wait;
    char buffer[4096];
    while (got.size() < enough) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now());
      if (left <= 0ms || !readable(left)) break;
      const auto n = ::recv(fd_, buffer, sizeof buffer, 0);
      if (n <= 0) break;
      got.append(buffer, static_cast<std::size_t>(n));
    }
    return got;
  }
  [[nodiscard]] int fd() const { return fd_; }

 private:
  int fd_;
  bool connected_ = false;
};

// `count` answers (their headers and the bodies their Content-Length announces), or those that
// came within `wait`; a read may hold the end of one answer and the next.
inline std::vector<std::string> receive_answers(const Socket& client, std::size_t count, std::chrono::milliseconds wait) {
  std::vector<std::string> answers;
  std::string got;
  const auto until = std::chrono::steady_clock::now() + wait;
  while (answers.size() < count) {
    const auto end = got.find("\r\n\r\n");
    if (end != std::string::npos) {
      const auto at = got.find("Content-Length: ");
      const auto length = at == std::string::npos || at > end ? 0 : std::stoul(got.substr(at + 16));
      if (got.size() >= end + 4 + length) {
        answers.push_back(got.substr(0, end + 4 + length));
        got.erase(0, end + 4 + length);
        continue;
      }
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now());
    if (left <= 0ms) break;
    const auto more = client.receive(left, 1);
    if (more.empty()) break;
    got += more;
  }
  if (!got.empty()) answers.push_back(got);  // an answer cut short, for the failure's message
  return answers;
}

inline std::string receive_answer(const Socket& client, std::chrono::milliseconds wait) {
  const auto answers = receive_answers(client, 1, wait);
  return answers.empty() ? std::string() : answers.front();
}

inline int status_of(std::string_view response) {
  if (!response.starts_with("HTTP/1.1 ") || response.size() < 12) return 0;
  return std::stoi(std::string(response.substr(9, 3)));
}

// How many answers (status lines) the bytes hold.
inline std::size_t answers_in(std::string_view bytes) {
  std::size_t count = 0;
  for (auto at = bytes.find("HTTP/1.1 "); at != std::string_view::npos; at = bytes.find("HTTP/1.1 ", at + 1)) ++count;
  return count;
}

// The log lines written while it lives (the default logger's).
class CapturedLog {
 public:
  CapturedLog() : sink_(std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(1000)), previous_(spdlog::default_logger()) {
    auto logger = std::make_shared<spdlog::logger>("captured", sink_);
    sink_->set_pattern("%v");
    spdlog::set_default_logger(logger);
  }
  ~CapturedLog() { spdlog::set_default_logger(previous_); }
  CapturedLog(const CapturedLog&) = delete;
  CapturedLog& operator=(const CapturedLog&) = delete;
  [[nodiscard]] std::vector<std::string> lines() const { return sink_->last_formatted(); }

 private:
  std::shared_ptr<spdlog::sinks::ringbuffer_sink_mt> sink_;
  std::shared_ptr<spdlog::logger> previous_;
};

inline bool has_line(const std::vector<std::string>& lines, std::string_view fragment) {
  return std::any_of(lines.begin(), lines.end(), [&](const std::string& line) { return line.find(fragment) != std::string::npos; });
}

inline std::string get_hello() { return "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n"; }

inline HttpLimits small_limits() {
  HttpLimits limits;
  limits.max_body_bytes = 1 << 20;
  limits.header_timeout_s = 1.0;
  limits.request_timeout_s = 1.5;
  limits.idle_timeout_s = 5.0;
  limits.workers = 4;
  return limits;
}

}  // namespace gpucap::service::guarded_test
