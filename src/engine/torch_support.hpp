#pragma once
// LibTorch helpers shared by the engine and the trainer (inside the plugin only: they name
// LibTorch types).

#include <torch/script.h>

#include <string>

namespace gpucap::engine {

// "cpu", "cuda" or "cuda:N" as a torch::Device. Error(usage) for a string LibTorch does not parse,
// Error(unsupported) for a CUDA device this LibTorch or this machine does not have.
[[nodiscard]] torch::Device parse_torch_device(const std::string& device);

// A TorchScript module loaded onto `device`. Error(invalid_data) naming the file when it does not
// load (missing, not TorchScript, ...).
[[nodiscard]] torch::jit::Module load_torchscript(const std::string& file, const torch::Device& device);

// Waits until the device has finished the work queued on it (nothing to wait for on the CPU).
void synchronize(const torch::Device& device);

// The line of a LibTorch error that says what went wrong. TorchScript's interpreter throws a
// std::runtime_error (not a c10::Error) with the script's traceback first and the cause last
// ("RuntimeError: ..."); a c10::Error's C++ backtrace is left out.
[[nodiscard]] std::string error_summary(const std::exception& error);

}  // namespace gpucap::engine
