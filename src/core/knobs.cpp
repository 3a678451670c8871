#include "gpucap/core/knobs.hpp"

#include <fmt/format.h>

namespace gpucap {

Knobs single_tenant_knobs(int batch_size, std::optional<double> sm_clock_mhz) {
  Knobs knobs;
  knobs.tenants = {TenantKnobs{100.0, batch_size}};
  knobs.sm_clock_mhz = sm_clock_mhz;
  return knobs;
}

namespace {
std::string optional_value(const std::optional<double>& value, const char* unit) {
  return value ? fmt::format("{:g}{}", *value, unit) : std::string("auto");
}
}  // namespace

std::string describe(const Knobs& knobs) {
  std::string batches;
  for (const auto& tenant : knobs.tenants) {
    if (!batches.empty()) batches += ',';
    batches += knobs.tenants.size() == 1 ? fmt::format("{}", tenant.batch_size)
                                         : fmt::format("{}@{:g}%", tenant.batch_size, tenant.mps_share_pct);
  }
  return fmt::format("batch={} sm={} mem={} pl={}", batches, optional_value(knobs.sm_clock_mhz, "MHz"),
                     optional_value(knobs.mem_clock_mhz, "MHz"), optional_value(knobs.power_limit_w, "W"));
}

}  // namespace gpucap
