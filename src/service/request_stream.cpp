#include "request_stream.hpp"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstring>

#include "gpucap/core/text.hpp"

namespace gpucap::service {
namespace {

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

std::optional<std::size_t> parse_length(std::string_view text) {
  std::size_t value = 0;
  const auto* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc() || ptr != end || text.empty()) return std::nullopt;
  return value;
}

}  // namespace

RequestScan scan_request(std::string_view bytes) {
  RequestScan scan;
  const auto end = bytes.find("\r\n\r\n");
  if (end == std::string_view::npos) return scan;
  scan.header_bytes = end + 4;
  auto lines = bytes.substr(0, end);
  // cpp-httplib ends a line at a bare LF (and skips it): a CR or LF outside a CRLF would make it
  // read other header lines than these.
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const bool crlf = lines[i] == '\r' && i + 1 < lines.size() && lines[i + 1] == '\n';
    if (crlf) ++i;
    else if (lines[i] == '\r' || lines[i] == '\n') scan.bad_line = true;
  }
  const auto request_line_end = lines.find("\r\n");  // the headers follow the request line
  const bool http10 = lines.substr(0, request_line_end).ends_with(" HTTP/1.0");
  bool keep_alive = false;
  int codings = 0;
  lines = request_line_end == std::string_view::npos ? std::string_view() : lines.substr(request_line_end + 2);
  while (!lines.empty()) {
    const auto line_end = lines.find("\r\n");
    const auto line = lines.substr(0, line_end);
    lines.remove_prefix(line_end == std::string_view::npos ? lines.size() : line_end + 2);
    // A folded line (obs-fold) and whitespace before a colon are refused (RFC 9112 §§5.1, 5.2):
    // cpp-httplib keeps the blank in the name, this scan would not.
    if (!line.empty() && (line.front() == ' ' || line.front() == '\t')) scan.bad_line = true;
    const auto colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    const auto raw_name = line.substr(0, colon);
    if (!raw_name.empty() && std::isspace(static_cast<unsigned char>(raw_name.back()))) scan.bad_line = true;
    const auto name = trim(raw_name);
    // cpp-httplib decodes %-escapes in every header's value: the framing is read as it reads it.
    const auto decoded = httplib::detail::decode_url(std::string(trim(line.substr(colon + 1))), false);
    const auto value = trim(decoded);
    if (iequals(name, "Content-Length")) {
      const auto length = parse_length(value);
      if (!length || (scan.content_length && *scan.content_length != *length)) scan.malformed_length = true;
      if (length) scan.content_length = length;
    } else if (iequals(name, "Transfer-Encoding")) {
      // cpp-httplib reads the first such header alone, and only "chunked" as chunked.
      scan.chunked = ++codings == 1 && iequals(value, "chunked");
      scan.unsupported_coding = !scan.chunked;
    } else if (iequals(name, "Expect")) {
      scan.expect_continue = scan.expect_continue || iequals(value, "100-continue");
    } else if (iequals(name, "Content-Encoding")) {
      scan.encoded = scan.encoded || !(value.empty() || iequals(value, "identity"));
    } else if (iequals(name, "Connection")) {
      scan.client_closes = scan.client_closes || iequals(value, "close");
      keep_alive = keep_alive || iequals(value, "keep-alive");
    }
  }
  if (http10 && !keep_alive) scan.client_closes = true;
  if (scan.malformed_length) scan.content_length.reset();
  return scan;
}

std::optional<ScanRefusal> refusal_of(const RequestScan& scan, const HttpLimits& limits) {
  if (scan.header_bytes > limits.max_header_bytes) {
    return ScanRefusal{431, fmt::format("the request's headers are larger than {} KiB", limits.max_header_bytes >> 10U)};
  }
  if (scan.malformed_length) return ScanRefusal{400, "the request's Content-Length is not one valid number"};
  if (scan.chunked && scan.content_length) {
    return ScanRefusal{400, "a request with both Transfer-Encoding and Content-Length is not accepted"};
  }
  if (scan.bad_line) {
    return ScanRefusal{400, "a header line is malformed: whitespace before its colon, a folded line, or a bare CR or LF"};
  }
  if (scan.unsupported_coding) return ScanRefusal{501, "of the transfer codings, only one Transfer-Encoding: chunked is accepted"};
  if (scan.content_length && *scan.content_length > limits.max_body_bytes) {
    return ScanRefusal{413, fmt::format("the body is too large: the server's limit is {} bytes", limits.max_body_bytes)};
  }
  if (scan.encoded) return ScanRefusal{415, detail::kEncodedBodyMessage};
  return std::nullopt;
}

bool request_arrived(const RequestScan& scan, std::size_t buffered_bytes, std::size_t collect_body_bytes) {
  if (scan.header_bytes == 0) return false;
  // The worker reads a chunked body, a large one, or one the client sends only after a 100 Continue.
  if (scan.chunked || scan.expect_continue || scan.malformed_length || !scan.content_length) return true;
  if (*scan.content_length > collect_body_bytes) return true;
  return buffered_bytes >= scan.header_bytes + *scan.content_length;
}

namespace detail {
namespace {

thread_local RequestStream* tls_stream = nullptr;

int remaining_ms(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return static_cast<int>(std::clamp<long long>(left, 0, 1'000'000));
}

std::string address_text(const sockaddr_storage& address, int& port) {
  char text[INET6_ADDRSTRLEN] = {};
  if (address.ss_family == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(&address);
    inet_ntop(AF_INET, &v4->sin_addr, text, sizeof text);
    port = ntohs(v4->sin_port);
  } else if (address.ss_family == AF_INET6) {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(&address);
    inet_ntop(AF_INET6, &v6->sin6_addr, text, sizeof text);
    port = ntohs(v6->sin6_port);
  }
  return text;
}

}  // namespace

const RequestStream* current_stream() { return tls_stream; }
void set_current_stream(RequestStream* stream) { tls_stream = stream; }
void leave_current_body_unread() {
  if (tls_stream != nullptr) tls_stream->leave_body_unread();
}

std::string peer_of(int fd) {
  sockaddr_storage address{};
  socklen_t length = sizeof address;
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) return "?";
  int port = 0;
  const auto ip = address_text(address, port);
  return address.ss_family == AF_INET6 ? fmt::format("[{}]:{}", ip, port) : fmt::format("{}:{}", ip, port);
}

RequestStream::RequestStream(int fd, std::string buffered, const HttpLimits& limits)
    : fd_(fd),
      limits_(limits),
      buffer_(std::move(buffered)),
      // Room for the headers, the body and a chunked body's framing (chunks of 32 bytes or more);
      // a handler refuses a body over the limit exactly, this only bounds what is read.
      byte_limit_(limits.max_header_bytes + limits.max_body_bytes + limits.max_body_bytes / 4 + 4096) {}

ssize_t RequestLineStream::read(char* ptr, size_t size) {
  const auto n = text_.copy(ptr, size);
  text_.remove_prefix(n);
  return static_cast<ssize_t>(n);
}

void RequestLineStream::get_remote_ip_and_port(std::string& ip, int& port) const {
  ip.clear();
  port = 0;
}

void RequestLineStream::get_local_ip_and_port(std::string& ip, int& port) const { get_remote_ip_and_port(ip, port); }

bool bytes_pending(int fd) {
  int pending = 0;
  return ::ioctl(fd, FIONREAD, &pending) == 0 && pending > 0;
}

void RequestStream::start_request(Clock::time_point first_byte, Clock::time_point not_before) {
  first_byte_ = first_byte;
  deadline_ = std::max(
      first_byte + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(limits_.request_timeout_s)),
      not_before);
  received_ = 0;
  failure_ = StreamFailure::none;
}

std::string_view RequestStream::unread() const {
  if (offset_ < buffer_.size()) return std::string_view(buffer_).substr(offset_);
  return {chunk_.get() + chunk_offset_, chunk_size_ - chunk_offset_};
}

std::string RequestStream::take_unread() {
  std::string rest(unread());
  buffer_.clear();
  offset_ = 0;
  chunk_offset_ = chunk_size_ = 0;
  return rest;
}

std::size_t RequestStream::take_buffered(char* ptr, std::size_t size) {
  if (offset_ < buffer_.size()) {
    const auto n = std::min(size, buffer_.size() - offset_);
    std::memcpy(ptr, buffer_.data() + offset_, n);
    offset_ += n;
    return n;
  }
  const auto n = std::min(size, chunk_size_ - chunk_offset_);
  if (n > 0) std::memcpy(ptr, chunk_.get() + chunk_offset_, n);
  chunk_offset_ += n;
  return n;
}

bool RequestStream::is_readable() const {
  if (offset_ < buffer_.size() || chunk_offset_ < chunk_size_) return true;
  pollfd p{fd_, POLLIN, 0};
  return ::poll(&p, 1, 0) > 0;
}

bool RequestStream::is_writable() const {
  pollfd p{fd_, POLLOUT, 0};
  const int timeout_ms = static_cast<int>(limits_.write_timeout_s * 1000.0);
  return ::poll(&p, 1, timeout_ms) > 0 && (p.revents & (POLLERR | POLLHUP)) == 0;
}

bool RequestStream::wait_readable() {
  while (true) {
    const int left = remaining_ms(deadline_);
    if (left == 0) {
      failure_ = StreamFailure::timed_out;
      return false;
    }
    pollfd p{fd_, POLLIN, 0};
    const int ready = ::poll(&p, 1, left);
    if (ready > 0) return true;
    if (ready < 0 && errno != EINTR) {
      failure_ = StreamFailure::peer_closed;
      return false;
    }
  }
}

ssize_t RequestStream::read(char* ptr, size_t size) {
  if (const auto n = take_buffered(ptr, size); n > 0) return static_cast<ssize_t>(n);
  if (failure_ != StreamFailure::none) return -1;
  if (received_ >= byte_limit_) {
    failure_ = StreamFailure::too_large;
    return -1;
  }
  if (Clock::now() >= deadline_) {  // a client that keeps sending, but too slowly for the deadline
    failure_ = StreamFailure::timed_out;
    return -1;
  }
  if (!chunk_) chunk_ = std::make_unique_for_overwrite<char[]>(kChunkBytes);
  const auto want = std::min(kChunkBytes, byte_limit_ - received_);
  while (true) {
    // What has come is taken at once; the deadline is waited on only when nothing has.
    const auto n = ::recv(fd_, chunk_.get(), want, MSG_DONTWAIT);
    if (n > 0) {
      received_ += static_cast<std::size_t>(n);
      chunk_offset_ = 0;
      chunk_size_ = static_cast<std::size_t>(n);
      return static_cast<ssize_t>(take_buffered(ptr, size));
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (!wait_readable()) return -1;
      continue;
    }
    failure_ = StreamFailure::peer_closed;
    return -1;
  }
}

ssize_t RequestStream::write(const char* ptr, size_t size) {
  std::size_t sent = 0;
  const auto deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(limits_.write_timeout_s));
  while (sent < size) {
    const auto n = ::send(fd_, ptr + sent, size - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      sent += static_cast<std::size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      pollfd p{fd_, POLLOUT, 0};
      const int left = remaining_ms(deadline);
      if (left > 0 && ::poll(&p, 1, left) > 0) continue;
    }
    return -1;
  }
  return static_cast<ssize_t>(sent);
}

void RequestStream::get_remote_ip_and_port(std::string& ip, int& port) const {
  sockaddr_storage address{};
  socklen_t length = sizeof address;
  if (getpeername(fd_, reinterpret_cast<sockaddr*>(&address), &length) == 0) ip = address_text(address, port);
}

void RequestStream::get_local_ip_and_port(std::string& ip, int& port) const {
  sockaddr_storage address{};
  socklen_t length = sizeof address;
  if (getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length) == 0) ip = address_text(address, port);
}

}  // namespace detail
}  // namespace gpucap::service
