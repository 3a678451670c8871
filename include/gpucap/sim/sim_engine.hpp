#pragma once
// The engine of the simulated platform: each batch's latency comes from the twin's
// performance model, and running it advances virtual time.

#include <mutex>

#include "gpucap/engine/engine.hpp"
#include "gpucap/sim/gpu_twin.hpp"

namespace gpucap::engine {

class SimEngine final : public Engine {
 public:
  // `guard`: held while a batch runs on the twin, so that another thread's SimDevice over the same
  // twin (one given the same guard) may write its controls meanwhile (a drain that restores the GPU
  // beside a hung batch); nullptr: the twin is used from one thread only.
  explicit SimEngine(sim::GpuTwin& twin, std::mutex* guard = nullptr) : twin_(twin), guard_(guard) {}

  [[nodiscard]] std::string name() const override;
  BatchResult run_batch(int batch_size) override;
  BatchResult run_tenants(const std::vector<TenantKnobs>& tenants) override;

 private:
  sim::GpuTwin& twin_;
  std::mutex* guard_;
};

}  // namespace gpucap::engine
