#include "raw_http.hpp"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <cerrno>

namespace gpucap::service::detail {

const char* reason_phrase(int status) {
  switch (status) {
    case 400: return "Bad Request";
    case 408: return "Request Timeout";
    case 411: return "Length Required";
    case 413: return "Payload Too Large";
    case 415: return "Unsupported Media Type";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 503: return "Service Unavailable";
    default: return "Error";
  }
}

// "METHOD /path" of a request's first line, for the log line of a request refused before parsing.
std::pair<std::string, std::string> request_line(std::string_view bytes) {
  const auto line = bytes.substr(0, std::min(bytes.find("\r\n"), std::size_t{512}));
  const auto space = line.find(' ');
  if (space == std::string_view::npos) return {"-", "-"};
  auto rest = line.substr(space + 1);
  return {std::string(line.substr(0, space)), std::string(rest.substr(0, rest.find(' ')))};
}

bool bytes_waiting(int fd) {
  char byte = 0;
  return ::recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT) > 0;
}

void drain_then_close(std::vector<int> fds, std::chrono::milliseconds linger, const std::function<void(int)>& close) {
  using Clock = std::chrono::steady_clock;
  const auto until = Clock::now() + linger;
  std::array<char, 16384> sink{};
  while (!fds.empty() && Clock::now() < until) {
    std::vector<pollfd> polled;
    for (const int fd : fds) polled.push_back({fd, POLLIN, 0});
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now()).count();
    if (::poll(polled.data(), polled.size(), static_cast<int>(std::max<long long>(1, left))) <= 0) break;
    std::vector<int> open;
    for (const auto& p : polled) {
      if (p.revents == 0) {
        open.push_back(p.fd);
        continue;
      }
      ssize_t n = 0;
      do {
        n = ::recv(p.fd, sink.data(), sink.size(), MSG_DONTWAIT);
      } while (n > 0);
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
        close(p.fd);
      } else {
        open.push_back(p.fd);
      }
    }
    fds = std::move(open);
  }
  for (const int fd : fds) close(fd);
}

}  // namespace gpucap::service::detail
