#include "gpucap/control/mps_plan.hpp"

#include <fmt/format.h>

#include <cmath>

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

std::vector<tune::Tenant> to_tenants(const std::vector<TenantKnobs>& knobs) {
  std::vector<tune::Tenant> tenants;
  tenants.reserve(knobs.size());
  for (const auto& k : knobs) tenants.push_back(tune::Tenant{static_cast<int>(std::lround(k.mps_share_pct)), k.batch_size});
  return tenants;
}

std::vector<TenantKnobs> to_tenant_knobs(const std::vector<tune::Tenant>& tenants) {
  std::vector<TenantKnobs> knobs;
  knobs.reserve(tenants.size());
  for (const auto& t : tenants) knobs.push_back(TenantKnobs{static_cast<double>(t.share_pct), t.batch});
  return knobs;
}

}  // namespace gpucap::control
