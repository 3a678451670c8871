#pragma once
// Log lines of a long-running server that a failed write cannot end. fmt::print throws
// std::system_error when its write fails (stderr on a full disk, or a pipe whose reader has gone
// while SIGPIPE is ignored, as systemd starts services); thrown on a thread of its own, that is
// std::terminate, and the GPU's settings are left for the next start to restore from the journal.
// A lost log line is the lesser harm, and no report of it could be read anyway.

#include <fmt/format.h>

#include <cstdio>
#include <string>
#include <utility>

namespace gpucap {

template <typename... Args>
void print_stderr_line(fmt::format_string<Args...> format, Args&&... args) noexcept {
  try {
    std::string text = fmt::format(format, std::forward<Args>(args)...);
    text += '\n';
    (void)std::fwrite(text.data(), 1, text.size(), stderr);
  } catch (...) {  // out of memory for a log line: the server goes on without it
  }
}

}  // namespace gpucap
