// The entry points of libgpucap_torch_engine.so (see gpucap/engine/torch_plugin.hpp).

#include <exception>

#include "gpucap/core/error.hpp"
#include "gpucap/engine/torch_plugin.hpp"

namespace {

// Runs `make`; an exception becomes a code and a message (they must not cross the C boundary).
template <typename Make>
auto create_or_report(Make&& make, int* error_code, std::string* error_message) -> decltype(make()) {
  try {
    return make();
  } catch (const gpucap::Error& e) {
    *error_code = static_cast<int>(e.code());
    *error_message = e.what();
  } catch (const std::exception& e) {
    *error_code = static_cast<int>(gpucap::ErrorCode::internal);
    *error_message = e.what();
  }
  return nullptr;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) gpucap::engine::Engine* gpucap_create_torch_engine(
    const gpucap::engine::TorchEngineOptions* options, const std::function<double()>* now_s, int* error_code,
    std::string* error_message) {
  return create_or_report([&]() -> gpucap::engine::Engine* { return new gpucap::engine::TorchEngine(*options, *now_s); },
                          error_code, error_message);
}

extern "C" __attribute__((visibility("default"))) gpucap::engine::TorchTrainer* gpucap_create_torch_trainer(
    const gpucap::engine::TorchTrainerOptions* options, int* error_code, std::string* error_message) {
  return create_or_report(
      [&]() -> gpucap::engine::TorchTrainer* { return gpucap::engine::make_torch_trainer(*options).release(); },
      error_code, error_message);
}
