#pragma once
// The knobs gpucap turns. A value type: controllers return Knobs, the Runner applies them.

#include <optional>
#include <string>
#include <vector>

namespace gpucap {

struct TenantKnobs {
  double mps_share_pct = 100.0;  // share of the SMs (NVIDIA MPS active-thread percentage)
  int batch_size = 1;            // images per batch

  bool operator==(const TenantKnobs&) const = default;
};

struct Knobs {
  // std::nullopt means "gpucap does not set this": the control stays as it is (the GPU's own
  // boost governor or the driver default, unless an earlier decision set it).
  std::optional<double> sm_clock_mhz;
  std::optional<double> mem_clock_mhz;
  std::optional<double> power_limit_w;
  std::vector<TenantKnobs> tenants{TenantKnobs{}};  // single-tenant: one tenant at 100 %

  bool operator==(const Knobs&) const = default;

  // Batch size of the first tenant: the batch size in single-tenant runs.
  [[nodiscard]] int batch_size() const { return tenants.empty() ? 0 : tenants.front().batch_size; }
};

[[nodiscard]] Knobs single_tenant_knobs(int batch_size, std::optional<double> sm_clock_mhz = std::nullopt);

// "batch=64 sm=1063MHz mem=auto pl=auto" — for logs and error messages.
[[nodiscard]] std::string describe(const Knobs& knobs);

}  // namespace gpucap
