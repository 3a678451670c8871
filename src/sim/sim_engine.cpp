#include "gpucap/sim/sim_engine.hpp"

#include <fmt/format.h>

namespace gpucap::engine {

std::string SimEngine::name() const {
  return fmt::format("twin:{} ({})", twin_.model().id, sim::to_string(twin_.precision()));
}

BatchResult SimEngine::run_batch(int batch_size) {
  const auto lock = guard_ ? std::unique_lock(*guard_) : std::unique_lock<std::mutex>();
  const auto record = twin_.run_batch(batch_size);
  return BatchResult{batch_size, record.start_s, record.end_s, 0, {}};
}

BatchResult SimEngine::run_tenants(const std::vector<TenantKnobs>& tenants) {
  // One process at 100 % is the single-tenant path, exactly as run_batch.
  if (tenants.size() == 1 && tenants.front().mps_share_pct == 100.0) return run_batch(tenants.front().batch_size);
  const auto lock = guard_ ? std::unique_lock(*guard_) : std::unique_lock<std::mutex>();
  std::vector<sim::MpsTenant> mps;
  mps.reserve(tenants.size());
  for (const auto& tenant : tenants) mps.push_back(sim::MpsTenant{tenant.mps_share_pct, tenant.batch_size});
  const auto record = twin_.run_tenants(mps);
  return BatchResult{record.batch_size, record.start_s, record.end_s, record.tenant, {}};
}

}  // namespace gpucap::engine
