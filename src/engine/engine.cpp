#include "gpucap/engine/engine.hpp"

#include <fmt/format.h>

#include "gpucap/core/error.hpp"

namespace gpucap::engine {

BatchResult Engine::run_tenants(const std::vector<TenantKnobs>& tenants) {
  if (tenants.size() == 1 && tenants.front().mps_share_pct == 100.0) return run_batch(tenants.front().batch_size);
  throw Error(ErrorCode::unsupported,
              fmt::format("the {} engine runs one process at 100 % of the GPU; {} MPS tenants need the twin "
                          "(--platform sim)",
                          name(), tenants.size()));
}

std::vector<TensorData> Engine::run_data(const TensorData& /*input*/) {
  throw Error(ErrorCode::unsupported, fmt::format("the {} engine times batches; it does not run on data", name()));
}

}  // namespace gpucap::engine
