#pragma once
// An inference engine over the MPS worker pool (runtime/mps.hpp), for `gpucap run --platform nvml`
// with MPS tenants: the model runs in one worker process per tenant, not in gpucap. Each call runs
// one round — every tenant at its batch size for `round_s` seconds, side by side — and returns it
// as one result whose `tenant_images` split the images by tenant. The pool starts with the first
// round and restarts its workers only when the shares change.

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "gpucap/engine/engine.hpp"
#include "gpucap/runtime/mps.hpp"

namespace gpucap::runtime {

class MpsPoolEngine final : public engine::Engine {
 public:
  // Error(usage) for a round under 0.05 s or over 60 s.
  MpsPoolEngine(MpsPoolOptions pool, std::function<double()> now_s, double round_s = 1.0);
  ~MpsPoolEngine() override;

  [[nodiscard]] std::string name() const override;
  // One worker at 100 %.
  engine::BatchResult run_batch(int batch_size) override;
  engine::BatchResult run_tenants(const std::vector<TenantKnobs>& tenants) override;

 private:
  MpsPoolOptions pool_options_;
  std::function<double()> now_s_;
  double round_s_;
  std::unique_ptr<MpsWorkerPool> pool_;
};

}  // namespace gpucap::runtime
