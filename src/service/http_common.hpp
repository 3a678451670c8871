#pragma once
// Settings every gpucap HTTP server shares (internal to src/service).

#include <httplib.h>
#include <sys/socket.h>

#include <string_view>

namespace gpucap::service::detail {

// cpp-httplib's default also sets SO_REUSEPORT, which would let a second server bind a port that
// is in use (and share its clients) instead of failing: only SO_REUSEADDR here.
inline void refuse_shared_ports(httplib::Server& server) {
  server.set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
}

// Whether the request's "Authorization: Bearer TOKEN" carries `token`, compared in a time that
// does not depend on where the strings differ.
[[nodiscard]] bool bearer_matches(const httplib::Request& request, std::string_view token);

}  // namespace gpucap::service::detail
