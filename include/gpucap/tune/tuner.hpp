#pragma once
// The interface every offline search implements: propose a configuration, be told its result.

#include <optional>
#include <string_view>

#include "gpucap/tune/space.hpp"

namespace gpucap::tune {

class Tuner {
 public:
  Tuner() = default;
  Tuner(const Tuner&) = delete;
  Tuner& operator=(const Tuner&) = delete;
  virtual ~Tuner() = default;

  [[nodiscard]] virtual std::string_view name() const = 0;
  // The next configuration to measure; nullopt when the search is done.
  [[nodiscard]] virtual std::optional<ConfigPoint> propose() = 0;
  // The measurement of the configuration propose() returned last.
  virtual void tell(const ConfigPoint& point, const TrialResult& result) = 0;
};

}  // namespace gpucap::tune
