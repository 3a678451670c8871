#pragma once
// The URL of an HTTP server gpucap talks to as a client (`gpucap load`'s KServe server, the BSO
// client's optimizer service): http(s)://HOST[:PORT][/PREFIX].

#include <string>
#include <string_view>

namespace gpucap {

struct ServerUrl {
  std::string text;              // as given, for messages
  std::string scheme_host_port;  // "http://127.0.0.1:8000": what an HTTP client connects to
  std::string path_prefix;       // "" or "/some/prefix", without a trailing slash
};

// "http://HOST[:PORT][/PREFIX]" (or https). Error(usage) naming what is wrong: no scheme or
// another than http(s), no host, a malformed host, a port that is not 1 to 65535, a query or a
// fragment.
[[nodiscard]] ServerUrl parse_server_url(std::string_view url);

}  // namespace gpucap
