#pragma once
// An inference engine runs one batch at a time and says how long it took.

#include <cstdint>
#include <string>
#include <vector>

#include "gpucap/core/knobs.hpp"

namespace gpucap::engine {

struct BatchResult {
  int images = 0;
  double start_s = 0.0;  // platform time (virtual on the twin, steady clock on hardware)
  double end_s = 0.0;
  int tenant = 0;        // the MPS tenant whose batch this was (run_tenants)
  // Engines that run every tenant at once (a round of MPS worker processes) report the round as
  // one result: `images` is the total, this the images of each tenant (empty otherwise).
  std::vector<int> tenant_images;
  [[nodiscard]] double latency_s() const { return end_s - start_s; }
};

// A tensor of FP32 values, row-major: what a served request's batch carries to an engine that
// runs on data (gpucap serve's LibTorch backend).
struct TensorData {
  std::vector<std::int64_t> shape;
  std::vector<float> values;
};

class Engine {
 public:
  Engine() = default;
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;
  virtual ~Engine() = default;

  [[nodiscard]] virtual std::string name() const = 0;
  // Runs one batch of `batch_size` images (>= 1) to completion.
  virtual BatchResult run_batch(int batch_size) = 0;
  // Runs MPS tenants (each an MPS share and a batch size), each back to back, until the next
  // batch of any of them finishes. An engine without MPS runs one tenant at 100 % only: the
  // default runs that as run_batch and throws Error(unsupported) for anything else.
  virtual BatchResult run_tenants(const std::vector<TenantKnobs>& tenants);
  // Runs the model on `input` (its first dimension the batch) and returns its outputs, in the
  // model's order. An engine that only times batches throws Error(unsupported).
  virtual std::vector<TensorData> run_data(const TensorData& input);
};

}  // namespace gpucap::engine
