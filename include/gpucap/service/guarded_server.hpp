#pragma once
// The HTTP server every gpucap service runs on (bso serve, serve, serve's admin API, the metrics
// endpoints): cpp-httplib's request parsing and routing, with the limits a network service needs
// and cpp-httplib 0.11 does not have.
//
// cpp-httplib gives every open connection a thread from its pool for as long as the connection
// lives, reads a request with only a per-read timeout, and holds a chunked body to no size limit.
// A few hundred clients that drip their headers one byte every few seconds therefore hold every
// thread forever, and one chunked body can fill the memory. Here, a connection holds no thread
// while its request arrives: one thread waits on all connections at once (epoll), collects each
// request's headers, and its body when it is small, under a deadline, and hands a worker only a
// request that has arrived (the way nginx and Go's net/http bound slow clients: a header deadline
// and a whole-request deadline). A larger body is read by the worker, under the request's deadline
// (with a short grace when it waited for a worker while its client went on sending) and a byte limit that holds for chunked bodies too; a
// quarter of the workers answer only requests that came whole (src/service/worker_pool.hpp), so
// bodies held back by their clients cannot take every worker. Idle keep-alive connections hold no thread
// either, so a thousand open connections cost a thousand sockets, not a thousand threads.
//
// Every refused request is answered in the server's own error format and leaves one log line
// (rate-limited). A known path asked with a method it does not take gets 405 with Allow.

#include <httplib.h>

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <regex>
#include <string>
#include <string_view>
#include <vector>

namespace gpucap::service {
namespace detail {
class LogLimiter;
}

struct HttpLimits {
  std::string log_name = "http";       // the prefix of the server's log lines, e.g. "bso serve"
  std::size_t max_body_bytes = std::size_t{1} << 20U;  // larger bodies get 413, chunked or not
  std::size_t max_header_bytes = std::size_t{64} << 10U;  // the request line and headers (431)
  double header_timeout_s = 10.0;      // from a request's first byte to the end of its headers
  double request_timeout_s = 30.0;     // from a request's first byte to the end of its body (408)
  double idle_timeout_s = 5.0;         // a connection with no request is closed after this
  double write_timeout_s = 10.0;       // an answer the client does not read in this time is dropped
  std::size_t keep_alive_requests = 1000;  // requests on one connection before it is closed
  std::size_t workers = 64;            // requests processed at once (threads, started as needed)
  std::size_t max_connections = 8192;  // open connections; more are answered 503 and closed
  // Bodies up to this size are collected before a worker is given the request; larger ones are
  // read by the worker (an inference batch of images should not be copied twice).
  std::size_t collect_body_bytes = std::size_t{64} << 10U;
};

// What the first bytes of a connection say about the request they start (a pure function, so the
// waiting thread's decisions can be tested on bytes).
struct RequestScan {
  std::size_t header_bytes = 0;  // up to and with the blank line; 0 while the headers are incomplete
  std::optional<std::size_t> content_length;  // nullopt: absent, or not one valid number
  bool chunked = false;
  bool expect_continue = false;
  bool malformed_length = false;  // a Content-Length that is not a number, or two that differ
  bool client_closes = false;     // Connection: close, or HTTP/1.0 without Connection: keep-alive
  bool encoded = false;           // a Content-Encoding other than identity (refused: 415)
  bool bad_line = false;  // whitespace before a colon, a folded line, a bare CR or LF (400)
  bool unsupported_coding = false;  // a Transfer-Encoding other than one "chunked" (501)
};
[[nodiscard]] RequestScan scan_request(std::string_view bytes);

// Why a request whose headers are in is refused before any worker or cpp-httplib reads it: its
// status and message, or nullopt. Headers over the limit (431); framing that two HTTP readers could
// read two ways, a door to request smuggling (400: two Content-Lengths that differ or one that is
// not a number, a Content-Length beside Transfer-Encoding, a malformed header line — RFC 9112
// §§2.2, 5.1, 5.2, 6.3 let a server refuse each); a transfer coding other than chunked (501); an
// announced body over the limit (413); a body with a Content-Encoding (415).
struct ScanRefusal {
  int status = 0;
  std::string message;
};
[[nodiscard]] std::optional<ScanRefusal> refusal_of(const RequestScan& scan, const HttpLimits& limits);

// Whether the bytes hold a whole request a worker can answer without waiting on the client: the
// headers and, for a body of at most `collect_body_bytes` announced by Content-Length, the body.
[[nodiscard]] bool request_arrived(const RequestScan& scan, std::size_t buffered_bytes, std::size_t collect_body_bytes);

class GuardedServer : public httplib::Server {
 public:
  // The body and content type of an error in the server's protocol, e.g. {"error": "..."}.
  using ErrorWriter = std::function<void(httplib::Response& response, int status, const std::string& message)>;

  // `not_found`: the 404 message, which should name the routes there are.
  GuardedServer(HttpLimits limits, ErrorWriter write_error, std::string not_found);
  ~GuardedServer() override;
  GuardedServer(const GuardedServer&) = delete;
  GuardedServer& operator=(const GuardedServer&) = delete;

  // An answer given as soon as a request's headers are in, before its body is read.
  struct EarlyAnswer {
    int status = 0;
    std::string message;       // written in the server's error format
    httplib::Headers headers;  // e.g. Retry-After
  };
  // What an early check may keep for a request it lets through (a place held in a queue): it
  // stays with the request, and the request's handler may take it (take_early_ticket()). It is
  // dropped, which is how its holder learns to give the place back, when the handler leaves it or
  // the request never reaches a handler (its body does not come, the client goes away).
  using EarlyTicket = std::shared_ptr<void>;
  struct EarlyDecision {
    EarlyDecision() = default;
    EarlyDecision(std::nullopt_t /*no answer*/) {}                        // NOLINT(google-explicit-constructor)
    EarlyDecision(EarlyAnswer early) : answer(std::move(early)) {}        // NOLINT(google-explicit-constructor)
    EarlyDecision(std::optional<EarlyAnswer> early) : answer(std::move(early)) {}  // NOLINT(google-explicit-constructor)
    std::optional<EarlyAnswer> answer;  // sent at once
    EarlyTicket ticket;                 // else, kept with the request for its handler
  };
  // Asked on the waiting thread once a request's headers have arrived, with its method, its path
  // (without the query) and when its first byte came; it must not block. An answer is sent at
  // once, and the body the client still sends is read and dropped: the connection stays open
  // when the body's length is announced (HTTP/1.1 lets a server answer before the body is in),
  // and is closed after the answer when it is chunked or the client waits for 100 Continue.
  // Requests that arrive pipelined behind another are not asked (their handler answers them).
  using EarlyCheck = std::function<EarlyDecision(std::string_view method, std::string_view path,
                                                 std::chrono::steady_clock::time_point first_byte)>;
  // Before listen().
  void set_early_check(EarlyCheck check) { early_check_ = std::move(check); }
  // When the request the calling handler answers arrived: its first byte at the server; nullopt
  // outside a handler of a GuardedServer.
  [[nodiscard]] static std::optional<std::chrono::steady_clock::time_point> request_arrival();
  // In a handler: the ticket the early check kept for its request (null if none), handed over once.
  [[nodiscard]] static EarlyTicket take_early_ticket();

  // Routes: the same as httplib's Get/Post/..., and known to the 405 answer.
  GuardedServer& get(const std::string& pattern, Handler handler);
  GuardedServer& post(const std::string& pattern, Handler handler);
  GuardedServer& put(const std::string& pattern, Handler handler);
  GuardedServer& patch(const std::string& pattern, Handler handler);
  GuardedServer& del(const std::string& pattern, Handler handler);

  // Binds host:port (port 0: a free one) and returns the port, or -1 when it cannot be bound.
  // cpp-httplib listens with a backlog of 5, compiled in: two hundred clients that connect at
  // once would overflow it and wait a second or more for the kernel to retry their connection.
  // Linux lets listen() be called again on a listening socket to change its backlog.
  [[nodiscard]] int bind_listener(const std::string& host, int port);

  [[nodiscard]] const HttpLimits& limits() const { return limits_; }
  // Connections open now (waiting for a request, or being answered).
  [[nodiscard]] std::size_t open_connections() const;

  // Logs one refused request (rate-limited), as the server does for its own refusals.
  void log_refusal(int status, std::string_view method, std::string_view path, std::string_view remote,
                   std::string_view message) const;

  class Connections;  // the waiting thread and the workers (guarded_server.cpp)

 private:
  bool process_and_close_socket(socket_t sock) override;
  GuardedServer& route(const char* method, const std::string& pattern, Handler handler);
  // A worker answers the requests of one connection that have arrived; the first one waited
  // `queued` for the worker.
  void answer(int fd, std::string buffered, std::size_t served, std::chrono::steady_clock::time_point first_byte,
              EarlyTicket ticket, std::chrono::steady_clock::duration queued);
  [[nodiscard]] std::string allowed_methods(const std::string& path) const;
  HandlerResponse on_error(const httplib::Request& request, httplib::Response& response) const;
  HandlerResponse refuse_encoded_body(const httplib::Request& request, httplib::Response& response) const;
  // Before any answer is written: no Range is honoured and no answer compressed (guarded_routes.cpp).
  static void answer_whole_and_plain(const httplib::Request& request);
  [[nodiscard]] static std::optional<std::pair<int, std::string>> unread_body_refusal(const httplib::Request& request);
  void on_answer(const httplib::Request& request, const httplib::Response& response) const;

  HttpLimits limits_;
  ErrorWriter write_error_;
  EarlyCheck early_check_;
  std::string not_found_;
  std::vector<std::pair<std::string, std::regex>> routes_;  // method, path
  // Made by the listening thread when listen() starts; read by open_connections() and the
  // destructor on other threads, hence the mutex.
  mutable std::mutex connections_mutex_;
  std::unique_ptr<Connections> connections_;
  std::unique_ptr<detail::LogLimiter> log_limiter_;
};

}  // namespace gpucap::service
