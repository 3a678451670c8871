#pragma once
// The stream a GuardedServer's worker reads one connection's requests from (internal to
// src/service): the bytes the waiting thread already collected, then the socket, under the
// request's deadline and byte limit. cpp-httplib parses requests from it.

#include <httplib.h>

#include <chrono>
#include <cstddef>
#include <string>

#include "gpucap/service/guarded_server.hpp"

namespace gpucap::service::detail {

using Clock = std::chrono::steady_clock;

enum class StreamFailure { none, timed_out, too_large, peer_closed };

class RequestStream final : public httplib::Stream {
 public:
  RequestStream(int fd, std::string buffered, const HttpLimits& limits);

  // A new request starts (at `first_byte`): its deadline and byte count start from here.
  void start_request(Clock::time_point first_byte);
  [[nodiscard]] StreamFailure failure() const { return failure_; }
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
  int fd_;
  const HttpLimits& limits_;
  std::string buffer_;
  std::size_t offset_ = 0;
  Clock::time_point deadline_;
  std::size_t received_ = 0;  // bytes of this request taken from the socket
  std::size_t byte_limit_;
  StreamFailure failure_ = StreamFailure::none;
};

// The stream the calling thread is answering a request from (for the error handler), or null.
[[nodiscard]] const RequestStream* current_stream();
void set_current_stream(const RequestStream* stream);

// "host:port" of a socket's peer, for log lines.
[[nodiscard]] std::string peer_of(int fd);

}  // namespace gpucap::service::detail
