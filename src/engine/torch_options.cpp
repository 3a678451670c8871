// The engine's options that gpucap parses itself (no LibTorch here: gpucap links this, the plugin
// the rest of torch_engine.hpp).

#include <fmt/format.h>

#include "gpucap/core/error.hpp"
#include "gpucap/engine/torch_engine.hpp"

namespace gpucap::engine {

const char* to_string(TorchPrecision precision) {
  switch (precision) {
    case TorchPrecision::fp16: return "fp16";
    case TorchPrecision::bf16: return "bf16";
    case TorchPrecision::fp32: break;
  }
  return "fp32";
}

TorchPrecision parse_torch_precision(const std::string& text) {
  if (text == "fp32") return TorchPrecision::fp32;
  if (text == "fp16") return TorchPrecision::fp16;
  if (text == "bf16") return TorchPrecision::bf16;
  throw usage_error(fmt::format("--precision '{}' must be fp32, fp16 or bf16", text));
}

}  // namespace gpucap::engine
