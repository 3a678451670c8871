#pragma once
// CUDA graphs of a module's forward pass, one per batch size (inside the plugin only). Built for
// real only against a LibTorch with CUDA (CMake defines GPUCAP_TORCH_CUDA); elsewhere asking for
// them is Error(unsupported).

#include <torch/script.h>

#include <memory>

namespace gpucap::engine {

class CudaGraphs {
 public:
  virtual ~CudaGraphs() = default;
  // module.forward(input): the first call at a batch size runs a warm-up pass and captures a
  // graph of the next one on a side stream; every call copies `input` into the graph's static
  // input and replays the graph. Not re-entrant (the engine holds its lock).
  virtual void run(torch::jit::Module& module, const torch::Tensor& input) = 0;
};

// Error(unsupported) for a device that is not CUDA or a LibTorch built without CUDA.
[[nodiscard]] std::unique_ptr<CudaGraphs> make_cuda_graphs(const torch::Device& device);

}  // namespace gpucap::engine
