#pragma once
// What GuardedServer's waiting thread reads and writes on a raw socket, before or instead of
// cpp-httplib (internal to src/service).

#include <chrono>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gpucap::service::detail {

// The reason phrase of a status the waiting thread answers itself.
[[nodiscard]] const char* reason_phrase(int status);

// "METHOD /path" of a request's first line, for the log line of a request refused before parsing.
[[nodiscard]] std::pair<std::string, std::string> request_line(std::string_view bytes);

// Whether bytes wait unread in the socket.
[[nodiscard]] bool bytes_waiting(int fd);

// Closing a socket with unread bytes resets the connection, and the client may lose the answer
// written just before: what these sockets' clients still send is read and dropped until they
// close, for at most `linger`; then `close` is called for each.
void drain_then_close(std::vector<int> fds, std::chrono::milliseconds linger, const std::function<void(int)>& close);

}  // namespace gpucap::service::detail
