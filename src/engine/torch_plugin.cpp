// The entry point of libgpucap_torch_engine.so (see gpucap/engine/torch_plugin.hpp).

#include <exception>

#include "gpucap/core/error.hpp"
#include "gpucap/engine/torch_plugin.hpp"

extern "C" __attribute__((visibility("default"))) gpucap::engine::Engine* gpucap_create_torch_engine(
    const gpucap::engine::TorchEngineOptions* options, const std::function<double()>* now_s, int* error_code,
    std::string* error_message) {
  try {
    return new gpucap::engine::TorchEngine(*options, *now_s);
  } catch (const gpucap::Error& e) {
    *error_code = static_cast<int>(e.code());
    *error_message = e.what();
  } catch (const std::exception& e) {
    *error_code = static_cast<int>(gpucap::ErrorCode::internal);
    *error_message = e.what();
  }
  return nullptr;
}
