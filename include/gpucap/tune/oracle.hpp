#pragma once
// The oracle: exhaustive search of the whole space for the highest throughput whose window-max
// power stays at or below the cap. Every controller is measured against it.

#include <cstddef>

#include "gpucap/tune/tuner.hpp"

namespace gpucap::tune {

class OracleTuner final : public Tuner {
 public:
  // Validates the space (Error(usage)).
  explicit OracleTuner(SearchSpace space);
  [[nodiscard]] std::string_view name() const override { return "oracle"; }
  [[nodiscard]] std::optional<ConfigPoint> propose() override;
  void tell(const ConfigPoint& point, const TrialResult& result) override;

 private:
  SearchSpace space_;
  std::size_t next_ = 0;
};

}  // namespace gpucap::tune
