#include "gpucap/control/tuned.hpp"

#include <fmt/format.h>

#include <cmath>

#include "gpucap/core/error.hpp"

namespace gpucap::control {

namespace {

constexpr double kSameCapW = 1e-3;

}  // namespace

const TunedEntry& entry_for_cap(const CapTable& table, double cap_w) {
  if (table.empty()) throw usage_error("bobd: no tuned configuration (the offline search gave none)");
  const TunedEntry* below = nullptr;
  const TunedEntry* lowest = &table.front();
  for (const auto& entry : table) {
    if (std::abs(entry.cap_w - cap_w) <= kSameCapW) return entry;
    if (entry.cap_w < cap_w && (below == nullptr || entry.cap_w > below->cap_w)) below = &entry;
    if (entry.cap_w < lowest->cap_w) lowest = &entry;
  }
  return below != nullptr ? *below : *lowest;
}

TunedController::TunedController(TunedParams params) : params_(std::move(params)) {
  if (!params_.table || params_.table->empty()) {
    throw usage_error("bobd: no tuned configuration (the offline search gave none)");
  }
}

Requirements TunedController::requirements() const {
  Requirements needs;
  for (const auto& entry : *params_.table) {
    needs.sm_clock = needs.sm_clock || entry.knobs.sm_clock_mhz.has_value();
    needs.memory_clock = needs.memory_clock || entry.knobs.mem_clock_mhz.has_value();
    needs.power_limit = needs.power_limit || entry.knobs.power_limit_w.has_value();
  }
  return needs;
}

Knobs TunedController::initial_knobs(double cap_w) const { return entry_for_cap(*params_.table, cap_w).knobs; }

Knobs TunedController::decide(const Observation& observation) {
  const auto& entry = entry_for_cap(*params_.table, observation.cap_w);
  tuned_for_w_ = entry.cap_w;
  return entry.knobs;
}

std::string TunedController::describe_state() const { return fmt::format("tuned_for={:g}W", tuned_for_w_); }

}  // namespace gpucap::control
