#include "torch_cuda_graphs.hpp"

#include <fmt/format.h>

#include <map>

#include "gpucap/core/error.hpp"

#if GPUCAP_TORCH_CUDA
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace gpucap::engine {

#if GPUCAP_TORCH_CUDA
namespace {

class CapturedGraphs final : public CudaGraphs {
 public:
  // Every graph draws from one memory pool: replays are serial and no output is read after the
  // next replay, so the graphs of many batch sizes (batchdvfs visits up to 255) do not each keep
  // their own activations.
  explicit CapturedGraphs(torch::Device device) : device_(device), pool_(at::cuda::graph_pool_handle()) {}

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
    // The side stream waits for the clone, queued on the current stream.
    at::cuda::CUDAEvent cloned;
    cloned.record(c10::cuda::getCurrentCUDAStream(device_.index()));
    auto stream = c10::cuda::getStreamFromPool(/*isHighPriority=*/false, device_.index());
    cloned.block(stream);
    const c10::cuda::CUDAStreamGuard on_side_stream(stream);
    (void)module.forward({entry->input});
    stream.synchronize();
    entry->graph.capture_begin(pool_);
    try {
      entry->output = module.forward({entry->input});
    } catch (...) {
      try {
        entry->graph.capture_end();  // leave capture mode; the half-captured graph is dropped
      } catch (...) {
      }
      throw;
    }
    entry->graph.capture_end();
    stream.synchronize();
    return entry;
  }

  torch::Device device_;
  at::cuda::MempoolId_t pool_;
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
