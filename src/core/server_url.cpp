#include "gpucap/core/server_url.hpp"

#include <fmt/format.h>

#include "gpucap/core/error.hpp"
#include "gpucap/core/text.hpp"

namespace gpucap {

ServerUrl parse_server_url(std::string_view url) {
  const auto bad = [&](const char* why) {
    return usage_error(fmt::format("server URL '{}' {} (expected http://HOST[:PORT][/PREFIX])", url, why));
  };
  const auto scheme_end = url.find("://");
  if (scheme_end == std::string_view::npos) throw bad("has no scheme");
  const auto scheme = url.substr(0, scheme_end);
  if (scheme != "http" && scheme != "https") throw bad("has a scheme other than http or https");
  const auto rest = url.substr(scheme_end + 3);
  const auto slash = rest.find('/');
  const auto host_port = rest.substr(0, slash);
  if (host_port.empty()) throw bad("has no host");
  if (host_port.find_first_of("@?# ") != std::string_view::npos) throw bad("has a malformed host");
  const auto colon = host_port.rfind(':');
  if (colon != std::string_view::npos && host_port.find(']') == std::string_view::npos) {
    const auto port = parse_integer(host_port.substr(colon + 1));
    if (!port || *port < 1 || *port > 65535) throw bad("has a port that is not a number from 1 to 65535");
  }
  ServerUrl parsed;
  parsed.text = std::string(url);
  parsed.scheme_host_port = std::string(url.substr(0, scheme_end + 3 + host_port.size()));
  if (slash != std::string_view::npos) {
    parsed.path_prefix = std::string(rest.substr(slash));
    while (!parsed.path_prefix.empty() && parsed.path_prefix.back() == '/') parsed.path_prefix.pop_back();
  }
  if (parsed.path_prefix.find_first_of("?# ") != std::string::npos) throw bad("has a query or fragment");
  return parsed;
}

}  // namespace gpucap
