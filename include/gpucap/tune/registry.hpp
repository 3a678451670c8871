#pragma once
// Builds offline tuners by name, for `gpucap tune` and the bench harness.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "gpucap/tune/tuner.hpp"

namespace gpucap::tune {

struct TunerInfo {
  std::string name;
  std::string summary;
  std::size_t default_budget;  // evaluations when the user gives none; 0: the whole space
  bool adaptive;               // proposals depend on earlier results, so progress is worth showing
};

[[nodiscard]] const std::vector<TunerInfo>& tuners();

// The tuner `name` over `space` for the cap `cap_w`; `seed` randomises what a tuner randomises
// (BOBD's initial design). Throws Error(usage) for an unknown name or an invalid space or cap.
[[nodiscard]] std::unique_ptr<Tuner> make_tuner(std::string_view name, const SearchSpace& space, double cap_w,
                                                std::uint64_t seed);

// The tuner's entry (Error(usage) for an unknown name, listing the available ones).
[[nodiscard]] const TunerInfo& tuner_info(std::string_view name);

}  // namespace gpucap::tune
