#include "http_common.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <charconv>
#include <filesystem>

#include "gpucap/core/text.hpp"

namespace gpucap::service::detail {

void widen_listen_backlog(int port) {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd", ec)) {
    int fd = -1;
    const auto name = entry.path().filename().string();
    if (std::from_chars(name.data(), name.data() + name.size(), fd).ec != std::errc()) continue;
    int listening = 0;
    socklen_t length = sizeof listening;
    if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &length) != 0 || listening == 0) continue;
    sockaddr_storage address{};
    socklen_t address_length = sizeof address;
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&address), &address_length) != 0) continue;
    int bound = -1;
    if (address.ss_family == AF_INET) bound = ntohs(reinterpret_cast<const sockaddr_in*>(&address)->sin_port);
    if (address.ss_family == AF_INET6) bound = ntohs(reinterpret_cast<const sockaddr_in6*>(&address)->sin6_port);
    if (bound == port) ::listen(fd, SOMAXCONN);
  }
}

bool bearer_matches(const httplib::Request& request, std::string_view token) {
  const auto header = request.get_header_value("Authorization");
  constexpr std::string_view scheme = "Bearer ";
  if (!header.starts_with(scheme)) return false;
  const auto given = trim(std::string_view(header).substr(scheme.size()));
  if (given.size() != token.size()) return false;
  unsigned char difference = 0;
  for (std::size_t i = 0; i < given.size(); ++i) difference |= static_cast<unsigned char>(given[i] ^ token[i]);
  return difference == 0;
}

}  // namespace gpucap::service::detail
