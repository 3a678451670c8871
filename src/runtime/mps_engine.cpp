#include "gpucap/runtime/mps_engine.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <cmath>

#include "gpucap/control/mps_plan.hpp"
#include "gpucap/core/error.hpp"

namespace gpucap::runtime {

MpsPoolEngine::MpsPoolEngine(MpsPoolOptions pool, std::function<double()> now_s, double round_s)
    : pool_options_(std::move(pool)), now_s_(std::move(now_s)), round_s_(round_s) {
  if (!(round_s_ >= 0.05 && round_s_ <= 60.0)) {
    throw usage_error(fmt::format("an MPS round of {:g} s must be between 0.05 and 60 s", round_s_));
  }
}

MpsPoolEngine::~MpsPoolEngine() {
  try {
    if (pool_) pool_->stop();
  } catch (const std::exception& e) {
    spdlog::error("stopping the MPS workers: {}", e.what());
  }
}

std::string MpsPoolEngine::name() const {
  return fmt::format("MPS workers ({})", pool_options_.worker_command.empty() ? "none" : pool_options_.worker_command[0]);
}

engine::BatchResult MpsPoolEngine::run_batch(int batch_size) {
  return run_tenants({TenantKnobs{100.0, batch_size}});
}

engine::BatchResult MpsPoolEngine::run_tenants(const std::vector<TenantKnobs>& tenants) {
  const auto partition = control::to_tenants(tenants);
  if (!pool_) pool_ = std::make_unique<MpsWorkerPool>(pool_options_, partition);
  engine::BatchResult result;
  result.start_s = now_s_();
  // The workers measure right away: a round follows the last one without a pause, so there is
  // nothing to warm up but after a restart (which the first round's images show).
  const auto round = pool_->run_round(partition, MpsRunRequest{0.0, round_s_});
  result.end_s = now_s_();
  for (const auto& t : round.tenants) {
    result.tenant_images.push_back(static_cast<int>(t.images));
    result.images += static_cast<int>(t.images);
  }
  return result;
}

}  // namespace gpucap::runtime
