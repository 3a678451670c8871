#include "gpucap/service/guarded_server.hpp"

#include <fmt/format.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <spdlog/spdlog.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <utility>

#include "gpucap/core/error.hpp"
#include "http_common.hpp"
#include "log_limiter.hpp"
#include "raw_http.hpp"
#include "request_stream.hpp"
#include "worker_pool.hpp"

namespace gpucap::service {

using detail::Clock;

namespace {

// The early check's ticket of the request the calling worker's handler answers (take_early_ticket).
thread_local GuardedServer::EarlyTicket t_early_ticket;

Clock::duration seconds(double s) { return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s)); }

}  // namespace

// One thread waits on every connection that has no complete request yet (epoll); workers, started
// as needed up to `workers`, answer the requests that have arrived.
class GuardedServer::Connections {
 public:
  explicit Connections(GuardedServer& server)
      : server_(server),
        limits_(server.limits_),
        pool_(limits_.workers, [&server](detail::Work work, Clock::duration queued) {
          server.answer(work.fd, std::move(work.buffer), work.served, work.first_byte, std::move(work.ticket), queued);
        }) {
    epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
    wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (epoll_fd_ < 0 || wake_fd_ < 0) throw Error(ErrorCode::io, "cannot create the server's event queue");
    epoll_event event{};
    event.events = EPOLLIN;
    event.data.fd = wake_fd_;
    epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &event);
    waiter_ = std::thread([this] { wait_loop(); });
  }

  ~Connections() {
    stop();
    ::close(wake_fd_);
    ::close(epoll_fd_);
  }

  Connections(const Connections&) = delete;
  Connections& operator=(const Connections&) = delete;

  // A connection the listening thread accepted.
  void admit(int fd) {
    if (++open_ > limits_.max_connections || stopping_) {
      answer_error(fd, 503, "", fmt::format("the server has {} connections open, its limit", limits_.max_connections));
      closed(fd);
      return;
    }
    int yes = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof yes);
    hand_back(fd, {}, 0, Clock::now() + seconds(limits_.header_timeout_s));
  }

  // A connection whose worker answered its request waits for the next one here.
  void wait_again(int fd, std::string buffered, std::size_t served) {
    hand_back(fd, std::move(buffered), served, Clock::now() + seconds(limits_.idle_timeout_s));
  }

  void closed(int fd) {
    ::shutdown(fd, SHUT_RDWR);
    ::close(fd);
    --open_;
  }

  // A connection whose request was refused before it was read whole (too large, too slow): the
  // answer has been written; what the client still sends is read and dropped for a while, so
  // that its answer is not lost to the reset a close with unread data causes.
  void linger(int fd) {
    ::shutdown(fd, SHUT_WR);
    Waiting waiting;
    waiting.lingering = true;
    waiting.idle_until = Clock::now() + kLinger;
    bool taken = false;
    {
      const std::lock_guard lock(mutex_);
      if (!stopping_) {
        incoming_.emplace_back(fd, std::move(waiting));
        taken = true;
      }
    }
    if (!taken) {
      closed(fd);
      return;
    }
    wake();
  }

  [[nodiscard]] bool stopping() const { return stopping_; }
  [[nodiscard]] std::size_t open() const { return open_; }

  // Closes the connections that wait, lets the workers answer what has arrived, and joins them.
  void stop() {
    if (stopped_) return;
    stopped_ = true;
    stopping_ = true;
    wake();
    waiter_.join();
    pool_.stop();
    // Connections handed back while the waiting thread was ending.
    for (auto& [fd, waiting] : incoming_) closed(fd);
    incoming_.clear();
  }

 private:
  struct Waiting {
    std::string buffer;
    Clock::time_point idle_until;                 // while no byte of a request has come
    std::optional<Clock::time_point> first_byte;  // of the request that is arriving
    std::size_t served = 0;                       // requests answered on the connection
    std::size_t header_bytes = 0;                 // known once the blank line has arrived
    bool lingering = false;                       // refused: what comes is dropped (linger())
    std::size_t dropped_bytes = 0;
    // Answered early (EarlyCheck): this many bytes of its body are still to come and be dropped,
    // until `discard_until`; then the connection waits for its next request.
    std::size_t discard = 0;
    Clock::time_point discard_until;
    EarlyTicket ticket;  // what the early check kept for the request that is arriving
  };
  static constexpr auto kLinger = std::chrono::seconds(2);
  static constexpr auto kShutdownLinger = std::chrono::milliseconds(250);
  static constexpr std::size_t kLingerBytes = std::size_t{64} << 20U;

  void wake() const {
    const std::uint64_t one = 1;
    [[maybe_unused]] const auto written = ::write(wake_fd_, &one, sizeof one);
  }

  void hand_back(int fd, std::string buffered, std::size_t served, Clock::time_point idle_until) {
    Waiting waiting;
    if (!buffered.empty()) waiting.first_byte = Clock::now();  // the start of a pipelined request
    waiting.buffer = std::move(buffered);
    waiting.idle_until = idle_until;
    waiting.served = served;
    bool taken = false;
    {
      const std::lock_guard lock(mutex_);
      if (!stopping_) {
        incoming_.emplace_back(fd, std::move(waiting));
        taken = true;
      }
    }
    if (!taken) {
      closed(fd);
      return;
    }
    wake();
  }

  // The headers have their own deadline; the body has the rest of the request's.
  [[nodiscard]] Clock::time_point deadline(const Waiting& waiting) const {
    if (waiting.discard > 0) return waiting.discard_until;
    if (!waiting.first_byte || waiting.lingering) return waiting.idle_until;
    return *waiting.first_byte + seconds(waiting.header_bytes == 0 ? limits_.header_timeout_s : limits_.request_timeout_s);
  }

  void wait_loop() {
    std::array<epoll_event, 64> events{};
    auto next_sweep = Clock::now();
    while (!stopping_) {
      take_incoming();
      const int n = epoll_wait(epoll_fd_, events.data(), static_cast<int>(events.size()), 100);
      for (int i = 0; i < n; ++i) {
        const int fd = events[static_cast<std::size_t>(i)].data.fd;
        if (fd == wake_fd_) {
          std::uint64_t count = 0;
          [[maybe_unused]] const auto got = ::read(wake_fd_, &count, sizeof count);
          continue;
        }
        read_from(fd);
      }
      if (Clock::now() >= next_sweep) {
        expire(Clock::now());
        next_sweep = Clock::now() + std::chrono::milliseconds(100);
      }
    }
    take_incoming();
    std::vector<int> told;
    for (auto& [fd, waiting] : waiting_) {
      // A request that has begun to arrive (or waits unread in the socket) is told, not dropped
      // unanswered: the client knows it was not served and may send it again elsewhere.
      if (!waiting.lingering && waiting.discard == 0 && (waiting.first_byte || detail::bytes_waiting(fd))) {
        answer_error(fd, 503, waiting.buffer, "the server is shutting down");
        ::shutdown(fd, SHUT_WR);
        told.push_back(fd);
      } else {
        closed(fd);
      }
    }
    waiting_.clear();
    detail::drain_then_close(std::move(told), kShutdownLinger, [this](int fd) { closed(fd); });
  }

  void take_incoming() {
    std::vector<std::pair<int, Waiting>> arrived;
    {
      const std::lock_guard lock(mutex_);
      arrived.swap(incoming_);
    }
    for (auto& [fd, waiting] : arrived) {
      auto& entry = waiting_[fd] = std::move(waiting);
      if (entry.first_byte && !entry.lingering && consider(fd, entry)) continue;  // a pipelined request arrived whole
      epoll_event event{};
      event.events = EPOLLIN | EPOLLRDHUP;
      event.data.fd = fd;
      if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &event) != 0) drop(fd);
    }
  }

  // Drops up to max_bytes of what the socket has received, without copying them: MSG_TRUNC on a
  // TCP socket makes the kernel discard the bytes and write nothing. Made as the system call
  // itself (recv() is recvfrom() with no address in glibc) rather than through recv(): the
  // sanitizers' interceptors of recv() take the buffer to be written and check [nullptr, n),
  // which in a non-PIE executable is where its globals lie.
  static ssize_t drop_received(int fd, std::size_t max_bytes) {
    return ::syscall(SYS_recvfrom, fd, nullptr, max_bytes, MSG_DONTWAIT | MSG_TRUNC, nullptr, nullptr);
  }

  void read_from(int fd) {
    const auto found = waiting_.find(fd);
    if (found == waiting_.end()) return;
    auto& waiting = found->second;
    std::array<char, 16384> chunk{};
    while (true) {
      // Bytes to drop (a refused request's, or the body of one answered early) are dropped by
      // the kernel without a copy, up to what is to be dropped.
      const bool dropping = waiting.lingering || waiting.discard > 0;
      const auto n = dropping ? drop_received(fd, waiting.lingering ? kLingerBytes : waiting.discard)
                              : ::recv(fd, chunk.data(), chunk.size(), MSG_DONTWAIT);
      if (n > 0 && waiting.lingering) {
        waiting.dropped_bytes += static_cast<std::size_t>(n);
        if (waiting.dropped_bytes <= kLingerBytes) continue;
        drop(fd);
        return;
      }
      if (n > 0 && waiting.discard > 0) {  // the body of a request answered early
        waiting.discard -= std::min(waiting.discard, static_cast<std::size_t>(n));
        continue;
      }
      if (n > 0) {
        const auto bytes = std::string_view(chunk.data(), static_cast<std::size_t>(n));
        if (!waiting.first_byte) waiting.first_byte = Clock::now();
        waiting.buffer.append(bytes);
        if (waiting.buffer.size() > limits_.max_header_bytes + limits_.collect_body_bytes) break;
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      // The client closed the connection, or it failed; a request that came whole before a
      // half-close is still answered.
      if (n < 0 || waiting.lingering || !consider(fd, waiting)) drop(fd);
      return;
    }
    if (!waiting.lingering) consider(fd, waiting);
  }

  // Hands the connection to a worker once its request has arrived (true: it left the waiting
  // set), or refuses it (it lingers).
  bool consider(int fd, Waiting& waiting) {
    bool headers_just_in = false;
    if (waiting.header_bytes == 0) {
      const auto end = waiting.buffer.find("\r\n\r\n");
      if (end == std::string::npos) {
        if (waiting.buffer.size() <= limits_.max_header_bytes) return false;
        return refuse_waiting(fd, waiting, 431,
                              fmt::format("the request's headers are larger than {} KiB", limits_.max_header_bytes >> 10U));
      }
      waiting.header_bytes = end + 4;
      headers_just_in = true;
    }
    const auto scan = scan_request(waiting.buffer);
    if (const auto refusal = refusal_of(scan, limits_)) return refuse_waiting(fd, waiting, refusal->status, refusal->message);
    if (headers_just_in && !scan.content_length && !scan.chunked && !scan.malformed_length) {
      // cpp-httplib would read such a body until the client closes: a worker held to the deadline.
      const auto method = detail::request_line(waiting.buffer).first;
      if (method == "POST" || method == "PUT" || method == "PATCH" || method == "PRI") {
        return refuse_waiting(fd, waiting, 411, "a " + method + " needs a Content-Length or a chunked body");
      }
    }
    if (headers_just_in && server_.early_check_) {
      auto [method, path] = detail::request_line(waiting.buffer);
      path = path.substr(0, path.find('?'));
      auto decision = server_.early_check_(method, path, waiting.first_byte.value_or(Clock::now()));
      if (decision.answer) return answer_early(fd, waiting, scan, *decision.answer);
      waiting.ticket = std::move(decision.ticket);
    }
    if (!request_arrived(scan, waiting.buffer.size(), limits_.collect_body_bytes)) return false;
    const bool reads_body = scan.chunked || scan.expect_continue ||
                            (scan.content_length && waiting.buffer.size() < scan.header_bytes + *scan.content_length);
    detail::Work work{fd, std::move(waiting.buffer), waiting.served, waiting.first_byte.value_or(Clock::now()),
                      std::move(waiting.ticket), reads_body};
    forget(fd);
    dispatch(std::move(work));
    return true;
  }

  // Answers a request whose headers are in (EarlyCheck) and drops its body as it comes; the
  // connection then waits for its next request, or lingers and closes when the body's end cannot
  // be known, the client may not send it (it waits for 100 Continue) or the client closes.
  bool answer_early(int fd, Waiting& waiting, const RequestScan& scan, const EarlyAnswer& early) {
    const bool keep_alive = scan.content_length && !scan.chunked && !scan.expect_continue && !scan.malformed_length &&
                            !scan.client_closes && waiting.served + 1 < limits_.keep_alive_requests && !stopping_;
    if (!keep_alive) return refuse_waiting(fd, waiting, early.status, early.message, early.headers);
    write_error(fd, early.status, early.message, early.headers, false);
    if (early.status != 429) {  // as answer_error: a 429 is load, the metrics count those
      const auto [method, path] = detail::request_line(waiting.buffer);
      server_.log_refusal(early.status, method, path, detail::peer_of(fd), early.message);
    }
    const auto end = waiting.header_bytes + *scan.content_length;
    const auto now = Clock::now();
    waiting.discard = end > waiting.buffer.size() ? end - waiting.buffer.size() : 0;
    waiting.discard_until = now + seconds(limits_.request_timeout_s);
    waiting.buffer.erase(0, std::min(end, waiting.buffer.size()));  // what is left starts the next request
    waiting.header_bytes = 0;
    waiting.served += 1;
    waiting.first_byte = waiting.buffer.empty() ? std::nullopt : std::optional(now);
    waiting.idle_until = now + seconds(limits_.idle_timeout_s);
    return !waiting.buffer.empty() && consider(fd, waiting);
  }

  bool refuse_waiting(int fd, Waiting& waiting, int status, const std::string& message,
                      const httplib::Headers& headers = {}) {
    answer_error(fd, status, waiting.buffer, message, headers);
    ::shutdown(fd, SHUT_WR);
    waiting.ticket.reset();  // what the early check held for it goes back now, not after the linger
    waiting.lingering = true;
    waiting.idle_until = Clock::now() + kLinger;
    waiting.buffer.clear();
    waiting.buffer.shrink_to_fit();
    return false;  // it waits, lingering
  }

  void expire(Clock::time_point now) {
    std::vector<int> late;
    for (const auto& [fd, waiting] : waiting_) {
      if (now >= deadline(waiting)) late.push_back(fd);
    }
    for (const int fd : late) {
      auto& waiting = waiting_.at(fd);
      if (!waiting.first_byte || waiting.lingering || waiting.discard > 0) {
        // An idle connection: closed without a word, as HTTP/1.1 allows; or one whose request
        // was answered early and whose body did not come in time.
        drop(fd);
        continue;
      }
      const bool headers_in = waiting.header_bytes > 0;
      refuse_waiting(fd, waiting, 408,
                     headers_in ? fmt::format("the request's body did not arrive within {:g} s", limits_.request_timeout_s)
                                : fmt::format("the request's headers did not arrive within {:g} s", limits_.header_timeout_s));
    }
  }

  // Answers an error without a worker (the connection is closed or lingers after it), with one
  // log line; a 429 is load, not a fault (the metrics count those), as GuardedServer::on_answer.
  void answer_error(int fd, int status, std::string_view received, const std::string& message,
                    const httplib::Headers& headers = {}) {
    write_error(fd, status, message, headers, true);
    if (status == 429) return;
    const auto [method, path] = detail::request_line(received);
    server_.log_refusal(status, method, path, detail::peer_of(fd), message);
  }

  // Writes an error answer in the server's format. It is small and the connection has nothing
  // else in flight (its previous answer was written whole), so one non-blocking send takes it.
  void write_error(int fd, int status, const std::string& message, const httplib::Headers& headers, bool close) const {
    httplib::Response response;
    server_.write_error_(response, status, message);
    const auto content_type = response.get_header_value("Content-Type");
    std::string head = fmt::format("HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\n", status,
                                   detail::reason_phrase(status), content_type.empty() ? "text/plain" : content_type,
                                   response.body.size());
    for (const auto& [name, value] : headers) head += fmt::format("{}: {}\r\n", name, value);
    head += close ? "Connection: close\r\n\r\n" : "\r\n";
    const auto answer = head + response.body;
    [[maybe_unused]] const auto sent = ::send(fd, answer.data(), answer.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  }

  void forget(int fd) {
    epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
    waiting_.erase(fd);
  }

  void drop(int fd) {
    forget(fd);
    closed(fd);
  }

  void dispatch(detail::Work work) {
    if (auto refused = pool_.submit(std::move(work))) {
      answer_error(refused->fd, 503, refused->buffer, "the server could not start a thread to answer it");
      linger(refused->fd);  // a close with its body unread would reset the connection, and the 503 with it
    }
  }

  GuardedServer& server_;
  const HttpLimits& limits_;
  int epoll_fd_ = -1;
  int wake_fd_ = -1;
  std::thread waiter_;
  std::unordered_map<int, Waiting> waiting_;  // the waiting thread's own
  std::atomic<bool> stopping_{false};
  bool stopped_ = false;
  std::atomic<std::size_t> open_{0};

  std::mutex mutex_;  // guards incoming_
  std::vector<std::pair<int, Waiting>> incoming_;
  detail::WorkerPool pool_;
};

namespace {

// cpp-httplib hands each accepted connection to a task queue; here it goes to the waiting thread
// at once, on the listening thread (registering it does not block).
class InlineQueue final : public httplib::TaskQueue {
 public:
  explicit InlineQueue(GuardedServer::Connections& connections) : connections_(connections) {}
  void enqueue(std::function<void()> fn) override { fn(); }
  void shutdown() override;

 private:
  GuardedServer::Connections& connections_;
};

}  // namespace

void InlineQueue::shutdown() { connections_.stop(); }

GuardedServer::GuardedServer(HttpLimits limits, ErrorWriter write_error, std::string not_found)
    : limits_(std::move(limits)),
      write_error_(std::move(write_error)),
      not_found_(std::move(not_found)),
      log_limiter_(std::make_unique<detail::LogLimiter>()) {
  if (limits_.workers == 0) throw usage_error("the server needs at least one thread");
  // spdlog's registry is made on first use: here, before any worker logs, not by two workers at
  // once (ThreadSanitizer saw that race; spdlog's library is not instrumented).
  (void)spdlog::default_logger_raw();
  // The same for cpp-httplib's table of request methods, a function-local static that its
  // request-line parser builds on first use: parsed here once (an unknown method, refused before
  // any routing, and before this server has an error handler or a logger), the table is built
  // before any worker reads it. Built by the first worker instead, ThreadSanitizer saw the next
  // worker read it without an order between them: cpp-httplib is not instrumented, and the
  // guard's fast path is a plain load inside it.
  // So are the regular expressions its Range parser builds on first use (a Range header is parsed
  // before any handler of this server sees the request; the handlers then drop it).
  for (const char* warm_up : {"WARM-UP / HTTP/1.1\r\n\r\n", "GET /warm-up HTTP/1.1\r\nRange: bytes=0-0, 1-1\r\n\r\n"}) {
    detail::RequestLineStream line(warm_up);
    bool closed = false;
    (void)process_request(line, true, closed, nullptr);
  }
  new_task_queue = [this] {
    auto connections = std::make_unique<Connections>(*this);
    auto* queue = new InlineQueue(*connections);
    const std::lock_guard lock(connections_mutex_);
    connections_ = std::move(connections);
    return queue;
  };
  set_payload_max_length(limits_.max_body_bytes);
  set_keep_alive_max_count(limits_.keep_alive_requests);
  set_keep_alive_timeout(static_cast<time_t>(std::max(1.0, limits_.idle_timeout_s)));
  detail::refuse_shared_ports(*this);
  set_pre_routing_handler(HandlerWithResponse([this](const httplib::Request& request, httplib::Response& response) {
    answer_whole_and_plain(request);
    return refuse_encoded_body(request, response);
  }));
  set_error_handler(HandlerWithResponse([this](const httplib::Request& request, httplib::Response& response) {
    return on_error(request, response);
  }));
  set_logger([this](const httplib::Request& request, const httplib::Response& response) { on_answer(request, response); });
}

GuardedServer::~GuardedServer() {
  const std::lock_guard lock(connections_mutex_);
  if (connections_) connections_->stop();
}

int GuardedServer::bind_listener(const std::string& host, int port) {
  const int bound = port == 0 ? bind_to_any_port(host) : (bind_to_port(host, port) ? port : -1);
  if (bound >= 0) ::listen(svr_sock_, SOMAXCONN);
  return bound;
}

GuardedServer::EarlyTicket GuardedServer::take_early_ticket() { return std::exchange(t_early_ticket, nullptr); }

std::optional<Clock::time_point> GuardedServer::request_arrival() {
  const auto* stream = detail::current_stream();
  if (stream == nullptr) return std::nullopt;
  return stream->first_byte();
}

std::size_t GuardedServer::open_connections() const {
  const std::lock_guard lock(connections_mutex_);
  return connections_ ? connections_->open() : 0;
}

bool GuardedServer::process_and_close_socket(socket_t sock) {
  connections_->admit(sock);
  return true;
}

void GuardedServer::answer(int fd, std::string buffered, std::size_t served, Clock::time_point first_byte,
                           EarlyTicket ticket, Clock::duration queued) {
  detail::RequestStream stream(fd, std::move(buffered), limits_);
  // A request that waited for this worker while its client went on sending is not late by the
  // client's doing: past its deadline it gets as long as it waited, at most a short grace, to be
  // read. One whose client sent nothing meanwhile gets none, so that bodies held back cannot each
  // take a new deadline from the queue (the waiting thread answers a request that has arrived whole at once).
  const auto grace = std::min<Clock::duration>(queued, detail::kQueuedGrace);
  auto not_before = detail::bytes_pending(fd) ? Clock::now() + grace : Clock::time_point{};
  while (true) {
    stream.start_request(first_byte, not_before);
    not_before = {};  // a pipelined request is read at once
    detail::set_current_stream(&stream);
    t_early_ticket = std::move(ticket);  // the first request's; a pipelined one has none
    const bool last = connections_->stopping() || served + 1 >= limits_.keep_alive_requests;
    bool client_closes = false;
    const bool answered = process_request(stream, last, client_closes, nullptr);
    detail::WorkerPool::body_read();  // the request's body has been read, or never will be
    t_early_ticket.reset();  // one its handler left is dropped here
    detail::set_current_stream(nullptr);
    ++served;
    if (!answered || client_closes || last || stream.failure() != detail::StreamFailure::none) break;
    const auto rest = stream.unread();
    const auto scan = scan_request(rest);
    // A pipelined request that must be refused on its headers goes back to the waiting thread,
    // which refuses it before cpp-httplib reads it.
    if (rest.empty() || refusal_of(scan, limits_) || !request_arrived(scan, rest.size(), limits_.collect_body_bytes)) {
      connections_->wait_again(fd, stream.take_unread(), served);
      return;
    }
    first_byte = Clock::now();  // a pipelined request that has arrived whole
  }
  if (stream.failure() == detail::StreamFailure::timed_out || stream.failure() == detail::StreamFailure::too_large ||
      stream.failure() == detail::StreamFailure::body_unread) {
    connections_->linger(fd);
    return;
  }
  connections_->closed(fd);
}

}  // namespace gpucap::service
