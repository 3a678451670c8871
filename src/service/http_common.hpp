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

// cpp-httplib listens with a backlog of 5, compiled into the library: two hundred clients that
// connect at once would overflow it and wait a second or more for the kernel to retry their
// connection. Linux lets listen() be called again on a listening socket to change its backlog;
// the socket is found among this process's descriptors by its port. Best effort: a server that
// keeps the small backlog still works.
void widen_listen_backlog(int port);

// Whether the request's "Authorization: Bearer TOKEN" carries `token`, compared in a time that
// does not depend on where the strings differ.
[[nodiscard]] bool bearer_matches(const httplib::Request& request, std::string_view token);

}  // namespace gpucap::service::detail
