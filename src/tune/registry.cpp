#include "gpucap/tune/registry.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "gpucap/core/error.hpp"
#include "gpucap/tune/bobd.hpp"
#include "gpucap/tune/oracle.hpp"

namespace gpucap::tune {

const TunerInfo& tuner_info(std::string_view name) {
  const auto& all = tuners();
  const auto found = std::find_if(all.begin(), all.end(), [name](const TunerInfo& t) { return t.name == name; });
  if (found == all.end()) {
    std::string names;
    for (const auto& t : all) names += (names.empty() ? "" : ", ") + t.name;
    throw usage_error(fmt::format("unknown tuning algorithm '{}' (available: {})", name, names));
  }
  return *found;
}

const std::vector<TunerInfo>& tuners() {
  // BOBD's 50 is upstream's max-finished-jobs (seed-systems.md §1.6).
  static const std::vector<TunerInfo> all = {
      {"oracle", "exhaustive search of the whole space", 0, false},
      {"bobd", "Bayesian optimisation: GP surrogates and constrained expected improvement", 50, true},
  };
  return all;
}

std::unique_ptr<Tuner> make_tuner(std::string_view name, const SearchSpace& space, double cap_w, std::uint64_t seed) {
  const auto& tuner = tuner_info(name);
  if (tuner.name == "bobd") {
    BobdOptions options;
    options.seed = seed;
    return std::make_unique<BobdTuner>(space, cap_w, options);
  }
  return std::make_unique<OracleTuner>(space);
}

}  // namespace gpucap::tune
