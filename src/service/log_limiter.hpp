#pragma once
// A limit on log lines (internal to src/service): a flood of bad requests must not become a flood
// of log lines. At most kBurst lines at once and kPerSecond a second after that; the lines left
// out are counted in the next one.

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <mutex>
#include <optional>
#include <utility>

namespace gpucap::service::detail {

class LogLimiter {
 public:
  static constexpr double kPerSecond = 20.0;
  static constexpr double kBurst = 50.0;

  // How many lines were left out before this one, or nullopt to leave this one out.
  std::optional<std::size_t> admit() {
    const std::lock_guard lock(mutex_);
    const auto now = std::chrono::steady_clock::now();
    tokens_ = std::min(kBurst, tokens_ + std::chrono::duration<double>(now - last_).count() * kPerSecond);
    last_ = now;
    if (tokens_ < 1.0) {
      ++skipped_;
      return std::nullopt;
    }
    tokens_ -= 1.0;
    return std::exchange(skipped_, 0);
  }

 private:
  std::mutex mutex_;
  double tokens_ = kBurst;
  std::chrono::steady_clock::time_point last_ = std::chrono::steady_clock::now();
  std::size_t skipped_ = 0;
};

}  // namespace gpucap::service::detail
