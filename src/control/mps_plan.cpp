#include "gpucap/control/mps_plan.hpp"

#include <fmt/format.h>

namespace gpucap::control {

PartitionPlan plan_or_smallest(const MpsPlanning& planning, double cap_w) {
  if (auto plan = planning.plan(cap_w)) return *plan;
  PartitionPlan smallest;
  smallest.tenants = {TenantKnobs{static_cast<double>(planning.mps_step_pct), 1}};
  smallest.sm_clock_mhz = planning.sm_clocks_mhz.front();
  smallest.memory_clock_mhz = planning.memory_clocks_mhz.front();
  return smallest;
}

std::string describe(const std::vector<TenantKnobs>& tenants) {
  std::string text;
  for (const auto& t : tenants) text += fmt::format("{}{:g}%:{}", text.empty() ? "" : " ", t.mps_share_pct, t.batch_size);
  return text;
}

}  // namespace gpucap::control
