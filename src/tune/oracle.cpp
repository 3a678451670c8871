#include "gpucap/tune/oracle.hpp"

#include <utility>

namespace gpucap::tune {

OracleTuner::OracleTuner(SearchSpace space) : space_(std::move(space)) { space_.validate(); }

std::optional<ConfigPoint> OracleTuner::propose() {
  if (next_ >= space_.size()) return std::nullopt;
  return space_.point(next_++);
}

// Exhaustive search learns nothing from results: the best is chosen from all trials afterwards.
void OracleTuner::tell(const ConfigPoint&, const TrialResult&) {}

}  // namespace gpucap::tune
