#include "torch_support.hpp"

#include <fmt/format.h>
#include <torch/cuda.h>

#include "gpucap/core/error.hpp"

namespace gpucap::engine {

torch::Device parse_torch_device(const std::string& device) {
  torch::Device parsed{torch::kCPU};
  try {
    parsed = torch::Device(device);
  } catch (const c10::Error&) {
    throw usage_error(fmt::format("device '{}' is not cpu, cuda or cuda:N", device));
  }
  if (parsed.is_cuda() && !torch::cuda::is_available()) {
    throw Error(ErrorCode::unsupported,
                fmt::format("device {}: this LibTorch has no CUDA, or no CUDA GPU is visible", device));
  }
  if (parsed.is_cuda() && parsed.has_index() &&
      static_cast<std::size_t>(parsed.index()) >= torch::cuda::device_count()) {
    throw Error(ErrorCode::unsupported,
                fmt::format("device {}: only {} CUDA GPU(s) visible", device, torch::cuda::device_count()));
  }
  if (!parsed.is_cpu() && !parsed.is_cuda()) {
    throw usage_error(fmt::format("device '{}' is not cpu, cuda or cuda:N", device));
  }
  return parsed;
}

torch::jit::Module load_torchscript(const std::string& file, const torch::Device& device) {
  try {
    return torch::jit::load(file, device);
  } catch (const c10::Error& e) {
    throw Error(ErrorCode::invalid_data,
                fmt::format("{}: not a TorchScript model LibTorch can load: {}", file, e.what_without_backtrace()));
  }
}

void synchronize(const torch::Device& device) {
  if (device.is_cuda()) torch::cuda::synchronize(device.has_index() ? device.index() : -1);
}

std::string error_summary(const std::exception& error) {
  const auto* c10_error = dynamic_cast<const c10::Error*>(&error);
  const std::string text = c10_error != nullptr ? c10_error->what_without_backtrace() : error.what();
  constexpr std::string_view kMarker = "RuntimeError: ";
  auto begin = text.rfind(kMarker);
  begin = begin == std::string::npos ? 0 : begin + kMarker.size();
  const auto end = text.find('\n', begin);
  return text.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
}

}  // namespace gpucap::engine
