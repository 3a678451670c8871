#include "gpucap/control/controller.hpp"

#include <fmt/format.h>

#include "gpucap/core/error.hpp"
#include "gpucap/core/text.hpp"

namespace gpucap::control {

std::string DecisionPeriod::to_string() const {
  return batches > 0 ? fmt::format("{} batches", batches) : fmt::format("{:g}s", seconds);
}

DecisionPeriod DecisionPeriod::parse(std::string_view text) {
  const auto trimmed = trim(text);
  const auto bad = [&] {
    return usage_error(fmt::format("window '{}' is not a duration like '3' or '3s' or a batch count like '10b'", text));
  };
  if (trimmed.empty()) throw bad();
  if (trimmed.back() == 'b') {
    const auto count = parse_integer(trimmed.substr(0, trimmed.size() - 1));
    if (!count) throw bad();
    if (*count < 1 || *count > 1'000'000) {
      throw usage_error(fmt::format("window of {} batches must be between 1 and 1000000", *count));
    }
    return every_batches(static_cast<int>(*count));
  }
  const auto number = trimmed.back() == 's' ? trimmed.substr(0, trimmed.size() - 1) : trimmed;
  const auto seconds = parse_double(number);
  if (!seconds) throw bad();
  if (*seconds <= 0.0 || *seconds > kMaxWindowS) {
    throw usage_error(fmt::format("window of {:g} s must be > 0 and at most {:g} s", *seconds, kMaxWindowS));
  }
  return every_seconds(*seconds);
}

}  // namespace gpucap::control
