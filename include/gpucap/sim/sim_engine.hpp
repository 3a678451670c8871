#pragma once
// The engine of the simulated platform: each batch's latency comes from the twin's
// performance model, and running it advances virtual time.

#include "gpucap/engine/engine.hpp"
#include "gpucap/sim/gpu_twin.hpp"

namespace gpucap::engine {

class SimEngine final : public Engine {
 public:
  explicit SimEngine(sim::GpuTwin& twin) : twin_(twin) {}

  [[nodiscard]] std::string name() const override;
  BatchResult run_batch(int batch_size) override;
  BatchResult run_tenants(const std::vector<TenantKnobs>& tenants) override;

 private:
  sim::GpuTwin& twin_;
};

}  // namespace gpucap::engine
