#pragma once
// The stream a GuardedServer's worker reads one connection's requests from (internal to
// src/service): the bytes the waiting thread already collected, then the socket, under the
// request's deadline and byte limit. cpp-httplib parses requests from it.

#include <httplib.h>

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "gpucap/service/guarded_server.hpp"

namespace gpucap::service::detail {

using Clock = std::chrono::steady_clock;

// body_unread: an answer was given before the request's body was read (a refusal); the rest of
// the connection cannot be parsed as the next request, so it is closed after the answer.
enum class StreamFailure { none, timed_out, too_large, peer_closed, body_unread };

// The 415 of a body sent with a Content-Encoding (the waiting thread's and a worker's refusal).
inline constexpr const char* kEncodedBodyMessage =
    "a body sent with a Content-Encoding (gzip, br, ...) is not accepted: send it as it is (identity)";

// The most a request that waited for a worker gets past its deadline (no more than it waited),
// when its client went on sending meanwhile (GuardedServer::answer).
inline constexpr auto kQueuedGrace = std::chrono::seconds(1);
// Whether the socket has received bytes not yet read.
[[nodiscard]] bool bytes_pending(int fd);

class RequestStream final : public httplib::Stream {
 public:
  RequestStream(int fd, std::string buffered, const HttpLimits& limits);

  // A new request starts (at `first_byte`): its deadline and byte count start from here; the
  // deadline comes no sooner than `not_before`.
  void start_request(Clock::time_point first_byte, Clock::time_point not_before = {});
  [[nodiscard]] Clock::time_point first_byte() const { return first_byte_; }
  [[nodiscard]] StreamFailure failure() const { return failure_; }
  void leave_body_unread() {
    if (failure_ == StreamFailure::none) failure_ = StreamFailure::body_unread;
  }
  // Bytes received but not read by the parser (the start of a pipelined request).
  [[nodiscard]] std::string_view unread() const;
  [[nodiscard]] std::string take_unread();

  bool is_readable() const override;
  bool is_writable() const override;
  ssize_t read(char* ptr, size_t size) override;
  ssize_t write(const char* ptr, size_t size) override;
  void get_remote_ip_and_port(std::string& ip, int& port) const override;
  void get_local_ip_and_port(std::string& ip, int& port) const override;
  // cpp-httplib only asks this to refuse sockets its own select()-based stream cannot wait on;
  // this stream waits with poll(), so any descriptor works.
  socket_t socket() const override { return fd_ < FD_SETSIZE ? fd_ : 0; }

 private:
  [[nodiscard]] bool wait_readable();
  // Serves a read from what is buffered: first the bytes the waiting thread collected, then the
  // last chunk read from the socket. 0 when nothing is buffered.
  std::size_t take_buffered(char* ptr, std::size_t size);
  int fd_;
  const HttpLimits& limits_;
  std::string buffer_;  // what the waiting thread collected
  std::size_t offset_ = 0;
  // The socket is read in chunks this large (cpp-httplib asks for 4 KiB at a time, and for the
  // headers a byte at a time): a 600-kB image is a few reads, not a hundred and fifty.
  static constexpr std::size_t kChunkBytes = std::size_t{256} << 10U;
  std::unique_ptr<char[]> chunk_;  // allocated on the first read from the socket
  std::size_t chunk_offset_ = 0;
  std::size_t chunk_size_ = 0;
  Clock::time_point first_byte_;
  Clock::time_point deadline_;
  std::size_t received_ = 0;  // bytes of this request taken from the socket
  std::size_t byte_limit_;
  StreamFailure failure_ = StreamFailure::none;
};

// One request held in memory, for GuardedServer's constructor to parse before any worker does
// (guarded_server.cpp says why); what is written back is dropped.
class RequestLineStream final : public httplib::Stream {
 public:
  explicit RequestLineStream(std::string_view text) : text_(text) {}
  bool is_readable() const override { return true; }
  bool is_writable() const override { return true; }
  ssize_t read(char* ptr, size_t size) override;
  ssize_t write(const char*, size_t size) override { return static_cast<ssize_t>(size); }
  void get_remote_ip_and_port(std::string& ip, int& port) const override;
  void get_local_ip_and_port(std::string& ip, int& port) const override;
  socket_t socket() const override { return INVALID_SOCKET; }

 private:
  std::string_view text_;
};

// The stream the calling thread is answering a request from (for the error handler), or null.
[[nodiscard]] const RequestStream* current_stream();
void set_current_stream(RequestStream* stream);
// The calling thread's request is answered without its body being read: its connection closes
// after the answer (a no-op outside a worker).
void leave_current_body_unread();

// "host:port" of a socket's peer, for log lines.
[[nodiscard]] std::string peer_of(int fd);

}  // namespace gpucap::service::detail
