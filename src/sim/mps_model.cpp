#include "gpucap/sim/mps_model.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "gpucap/core/error.hpp"

namespace gpucap::sim {

namespace {

constexpr int kStretchBisections = 50;

struct Demand {
  std::vector<MpsTenantProfile> tenants;
  double bandwidth_fraction = 0.0;  // time-averaged share of the raw bandwidth the tenants use
};

Demand tenant_demand(const GpuSpec& gpu, const ModelSpec& model, Precision precision,
                     const std::vector<MpsTenant>& tenants, OperatingPoint point, bool copy_input, double stretch) {
  const double slowdown = 1.0 + gpu.mps_interference_per_tenant * static_cast<double>(tenants.size() - 1);
  Demand demand;
  demand.tenants.reserve(tenants.size());
  for (const auto& tenant : tenants) {
    const GpuSlice slice{tenant.share_pct / 100.0, slowdown, stretch};
    MpsTenantProfile t;
    t.batch = profile_batch(gpu, model, precision, tenant.batch, point, copy_input, slice);
    t.images_per_s = tenant.batch / t.batch.latency_s();
    t.sm_activity = slice.sm_share * t.batch.sm_activity;
    t.memory_activity = t.batch.memory_activity;
    demand.bandwidth_fraction += t.memory_activity * t.batch.busy_s / t.batch.latency_s();
    demand.tenants.push_back(t);
  }
  return demand;
}

}  // namespace

void check_mps_tenants(const std::vector<MpsTenant>& tenants) {
  if (tenants.empty()) throw usage_error("an MPS partition needs at least one tenant");
  double total_pct = 0.0;
  for (const auto& tenant : tenants) {
    if (!(tenant.share_pct > 0.0 && tenant.share_pct <= 100.0)) {
      throw usage_error(fmt::format("MPS share {:g} % must be in (0, 100]", tenant.share_pct));
    }
    if (tenant.batch < 1) throw usage_error(fmt::format("batch size {} must be >= 1", tenant.batch));
    total_pct += tenant.share_pct;
  }
  if (total_pct > 100.0 + 1e-9) {
    throw usage_error(fmt::format("MPS shares add up to {:g} %, more than 100 %", total_pct));
  }
}

MpsProfile profile_mps(const GpuSpec& gpu, const ModelSpec& model, Precision precision,
                       const std::vector<MpsTenant>& tenants, OperatingPoint point, bool copy_input) {
  check_mps_tenants(tenants);
  // The bandwidth the tenants can use together is what one process achieves alone.
  const double achievable = gpu.memory_efficiency;
  double stretch = 1.0;
  auto demand = tenant_demand(gpu, model, precision, tenants, point, copy_input, stretch);
  if (demand.bandwidth_fraction > achievable) {
    // Demand falls as the stretch grows (each tenant's memory phase takes longer); N tenants
    // that are all memory-bound need a stretch of N, so that bounds the search.
    double lo = 1.0;
    double hi = static_cast<double>(tenants.size()) + 1.0;
    for (int i = 0; i < kStretchBisections; ++i) {
      const double mid = (lo + hi) / 2.0;
      if (tenant_demand(gpu, model, precision, tenants, point, copy_input, mid).bandwidth_fraction > achievable) {
        lo = mid;
      } else {
        hi = mid;
      }
    }
    stretch = hi;
    demand = tenant_demand(gpu, model, precision, tenants, point, copy_input, stretch);
  }
  MpsProfile profile;
  profile.memory_stretch = stretch;
  profile.tenants = std::move(demand.tenants);
  for (const auto& t : profile.tenants) {
    const double duty = t.batch.busy_s / t.batch.latency_s();
    profile.throughput_img_s += t.images_per_s;
    profile.sm_activity += t.sm_activity * duty;
    profile.memory_activity += t.memory_activity * duty;
  }
  return profile;
}

double mps_average_power_w(const GpuSpec& gpu, const MpsProfile& profile, OperatingPoint point) {
  return busy_power_w(gpu, point, profile.sm_activity, profile.memory_activity);
}

double mps_tenant_busy_power_w(const GpuSpec& gpu, const MpsTenantProfile& tenant, OperatingPoint point) {
  return busy_power_w(gpu, point, tenant.sm_activity, tenant.memory_activity) - idle_loaded_power_w(gpu, point);
}

double mps_power_limited_sm_clock_mhz(const GpuSpec& gpu, const ModelSpec& model, Precision precision,
                                      const std::vector<MpsTenant>& tenants, OperatingPoint requested,
                                      double power_limit_w) {
  const auto power_at = [&](double sm_mhz) {
    const OperatingPoint point{sm_mhz, requested.memory_clock_mhz};
    return mps_average_power_w(gpu, profile_mps(gpu, model, precision, tenants, point), point);
  };
  return highest_clock_within_limit(gpu.sm_clocks_mhz, requested.sm_clock_mhz, power_at, power_limit_w);
}

}  // namespace gpucap::sim
