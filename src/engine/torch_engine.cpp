#include "gpucap/engine/torch_engine.hpp"

#include <fmt/format.h>
#include <torch/script.h>
#include <torch/torch.h>

#include <limits>
#include <mutex>

#include "gpucap/core/error.hpp"
#include "gpucap/engine/jpeg_folder.hpp"
#include "torch_cuda_graphs.hpp"
#include "torch_support.hpp"

namespace gpucap::engine {

namespace {

constexpr int kMaxInputSize = 4096;
constexpr int kMaxBatch = 1'000'000;

torch::ScalarType scalar_type(TorchPrecision precision) {
  switch (precision) {
    case TorchPrecision::fp16: return torch::kFloat16;
    case TorchPrecision::bf16: return torch::kBFloat16;
    case TorchPrecision::fp32: break;
  }
  return torch::kFloat32;
}

}  // namespace

struct TorchEngine::Impl {
  TorchEngineOptions options;
  torch::Device device{torch::kCPU};
  torch::ScalarType dtype = torch::kFloat32;
  mutable torch::jit::Module module;
  torch::Tensor synthetic;  // the largest batch asked for so far; smaller ones are slices of it
  torch::Tensor images;     // the folder's images, N × 3 × S × S on the device (empty: synthetic)
  std::int64_t next_image = 0;
  std::unique_ptr<CudaGraphs> graphs;  // with options.cuda_graphs
  std::mutex mutex;         // module.forward is not re-entrant on one module
};

namespace {

// Decoded images → N × 3 × size × size, resized (bilinear) and normalised as torchvision's
// ImageNet models expect.
torch::Tensor image_tensor(const std::vector<DecodedImage>& decoded, int size) {
  const auto mean = torch::tensor({0.485f, 0.456f, 0.406f}).view({1, 3, 1, 1});
  const auto stdev = torch::tensor({0.229f, 0.224f, 0.225f}).view({1, 3, 1, 1});
  std::vector<torch::Tensor> images;
  images.reserve(decoded.size());
  for (const auto& image : decoded) {
    auto pixels = torch::from_blob(const_cast<std::uint8_t*>(image.rgb.data()), {image.height, image.width, 3},
                                   torch::kUInt8)
                      .permute({2, 0, 1})
                      .unsqueeze(0)
                      .to(torch::kFloat32)
                      .div(255.0);
    namespace F = torch::nn::functional;
    pixels = F::interpolate(pixels, F::InterpolateFuncOptions()
                                        .size(std::vector<std::int64_t>{size, size})
                                        .mode(torch::kBilinear)
                                        .align_corners(false));
    images.push_back((pixels - mean) / stdev);
  }
  return torch::cat(images, 0);
}

}  // namespace

TorchEngine::TorchEngine(const TorchEngineOptions& options, std::function<double()> now_s)
    : impl_(std::make_unique<Impl>()), now_s_(std::move(now_s)) {
  auto& i = *impl_;
  i.options = options;
  if (options.input_size < 8 || options.input_size > kMaxInputSize) {
    throw usage_error(fmt::format("input size {} must be between 8 and {}", options.input_size, kMaxInputSize));
  }
  i.device = parse_torch_device(options.device);
  if (options.precision == TorchPrecision::fp16 && !i.device.is_cuda()) {
    throw Error(ErrorCode::unsupported, "FP16 inference needs a CUDA device (BF16 runs on the CPU too)");
  }
  if (options.cuda_graphs) i.graphs = make_cuda_graphs(i.device);  // Error(unsupported) without CUDA
  i.dtype = scalar_type(options.precision);
  i.module = load_torchscript(options.model_file, i.device);
  i.module.eval();
  if (i.dtype != torch::kFloat32) i.module.to(i.dtype);
  if (!options.images_dir.empty()) {
    if (options.max_images < 1) throw usage_error("at least one image must be kept");
    i.images = image_tensor(decode_jpeg_folder(options.images_dir, options.input_size, options.max_images),
                            options.input_size)
                   .to(i.device, i.dtype);
  }
}

TorchEngine::~TorchEngine() = default;

std::string TorchEngine::name() const {
  return fmt::format("LibTorch {} ({}, {}{})", impl_->options.model_file, impl_->options.device,
                     to_string(impl_->options.precision), impl_->options.cuda_graphs ? ", CUDA graphs" : "");
}

BatchResult TorchEngine::run_batch(int batch_size) {
  if (batch_size < 1 || batch_size > kMaxBatch) {
    throw usage_error(fmt::format("batch size {} must be between 1 and {}", batch_size, kMaxBatch));
  }
  auto& i = *impl_;
  const std::lock_guard lock(i.mutex);
  torch::Tensor input;
  if (i.images.defined()) {
    // The next batch_size images of the folder, cycling.
    const auto count = i.images.size(0);
    const auto index = torch::arange(i.next_image, i.next_image + batch_size, torch::kLong).remainder(count);
    input = i.images.index_select(0, index.to(i.device));
    i.next_image = (i.next_image + batch_size) % count;
  } else {
    if (!i.synthetic.defined() || i.synthetic.size(0) < batch_size) {
      auto generator = at::make_generator<at::CPUGeneratorImpl>(i.options.seed);
      const auto size = i.options.input_size;
      i.synthetic = torch::rand({batch_size, 3, size, size}, generator, torch::kFloat32).to(i.device, i.dtype);
    }
    input = i.synthetic.narrow(0, 0, batch_size);
  }
  BatchResult result;
  result.images = batch_size;
  result.start_s = now_s_();
  if (i.graphs) {
    i.graphs->run(i.module, input);
  } else {
    const torch::InferenceMode guard;
    (void)i.module.forward({input});
  }
  synchronize(i.device);
  result.end_s = now_s_();
  return result;
}

std::vector<float> TorchEngine::infer(const std::vector<float>& input, int batch_size,
                                      std::vector<std::int64_t>* output_shape) const {
  auto& i = *impl_;
  const auto size = static_cast<std::int64_t>(i.options.input_size);
  const auto expected = static_cast<std::size_t>(batch_size) * 3u * static_cast<std::size_t>(size * size);
  if (batch_size < 1 || input.size() != expected) {
    throw usage_error(fmt::format("input of {} values is not {} × 3 × {} × {}", input.size(), batch_size, size, size));
  }
  const std::lock_guard lock(i.mutex);
  const auto tensor = torch::from_blob(const_cast<float*>(input.data()), {batch_size, 3, size, size}, torch::kFloat32)
                          .to(i.device, i.dtype);
  torch::Tensor output;
  {
    const torch::InferenceMode guard;
    output = i.module.forward({tensor}).toTensor().to(torch::kCPU, torch::kFloat32).contiguous();
  }
  if (output_shape != nullptr) output_shape->assign(output.sizes().begin(), output.sizes().end());
  const auto* data = output.data_ptr<float>();
  return std::vector<float>(data, data + output.numel());
}

std::vector<TensorData> TorchEngine::run_data(const TensorData& input) {
  if (input.shape.empty() || input.shape.front() < 1 || input.shape.front() > std::numeric_limits<int>::max()) {
    throw usage_error("an input's first dimension is its batch, at least 1");
  }
  TensorData output;
  output.values = infer(input.values, static_cast<int>(input.shape.front()), &output.shape);
  return {std::move(output)};
}

}  // namespace gpucap::engine
