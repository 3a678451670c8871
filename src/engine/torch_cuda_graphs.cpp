#include "torch_cuda_graphs.hpp"

#include <fmt/format.h>

#include <map>

#include "gpucap/core/error.hpp"

#if GPUCAP_TORCH_CUDA
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace gpucap::engine {

#if GPUCAP_TORCH_CUDA
namespace {

class CapturedGraphs final : public CudaGraphs {
 public:
  explicit CapturedGraphs(torch::Device device) : device_(device) {}

  void run(torch::jit::Module& module, const torch::Tensor& input) override {
    const torch::InferenceMode inference;
    auto& entry = graphs_[input.size(0)];
    if (!entry) entry = capture(module, input);
    entry->input.copy_(input);
    entry->graph.replay();
  }

 private:
  struct Entry {
    at::cuda::CUDAGraph graph;
    torch::Tensor input;   // the graph reads its input from this tensor
    torch::IValue output;  // and writes its output here: kept alive with the graph
  };

  // Capture must not run on the default stream; the warm-up pass lets cuDNN choose its kernels
  // and the allocator reserve memory outside the capture.
  std::unique_ptr<Entry> capture(torch::jit::Module& module, const torch::Tensor& input) const {
    auto entry = std::make_unique<Entry>();
    entry->input = input.clone();
    auto stream = c10::cuda::getStreamFromPool(/*isHighPriority=*/false, device_.index());
    const c10::cuda::CUDAStreamGuard on_side_stream(stream);
    (void)module.forward({entry->input});
    stream.synchronize();
    entry->graph.capture_begin();
    entry->output = module.forward({entry->input});
    entry->graph.capture_end();
    stream.synchronize();
    return entry;
  }

  torch::Device device_;
  std::map<std::int64_t, std::unique_ptr<Entry>> graphs_;
};

}  // namespace
#endif

std::unique_ptr<CudaGraphs> make_cuda_graphs(const torch::Device& device) {
  if (!device.is_cuda()) throw Error(ErrorCode::unsupported, "CUDA graphs need a CUDA device (--engine-device cuda)");
#if GPUCAP_TORCH_CUDA
  return std::make_unique<CapturedGraphs>(device);
#else
  throw Error(ErrorCode::unsupported, "this gpucap's LibTorch has no CUDA: no CUDA graphs");
#endif
}

}  // namespace gpucap::engine
