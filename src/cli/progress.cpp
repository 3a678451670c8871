#include "progress.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>

namespace gpucap::cli {

StageProgress::StageProgress(std::string command)
    : command_(std::move(command)), start_(std::chrono::steady_clock::now()) {}

double StageProgress::elapsed_s() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

void StageProgress::stage(const std::string& what) const {
  fmt::print(stderr, "gpucap {} [{:>5.0f} s]: {}\n", command_, elapsed_s(), what);
  std::fflush(stderr);
}

CountProgress::CountProgress(std::string command, bool terminal) : lines_(std::move(command)), terminal_(terminal) {}

void CountProgress::operator()(std::size_t done, std::size_t total) {
  if (total == 0) return;
  if (terminal_) {
    constexpr std::size_t kWidth = 30;
    const auto filled = kWidth * done / total;
    fmt::print(stderr, "\r[{}{}] {:>3}% {}/{} (models, then runs)", std::string(filled, '#'),
               std::string(kWidth - filled, '.'), 100 * done / total, done, total);
    if (done == total) fmt::print(stderr, "\n");
    std::fflush(stderr);
    return;
  }
  constexpr std::size_t kLines = 10;
  const auto tenth = kLines * done / total;
  if (tenth == last_tenth_ && done != total) return;
  last_tenth_ = tenth;
  lines_.stage(fmt::format("{}/{} done (models, then runs)", done, total));
}

bool stderr_is_terminal() { return isatty(fileno(stderr)) != 0; }

}  // namespace gpucap::cli
