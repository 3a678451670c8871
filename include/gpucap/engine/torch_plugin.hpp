#pragma once
// The LibTorch engine is a plugin (libgpucap_torch_engine.so), loaded with dlopen only when a run
// needs it: linking LibTorch into the gpucap binary would load ~300 shared libraries at every
// start (0.7 s for `gpucap list`). The plugin exports two C functions, one that makes an engine
// and one that makes a trainer; their errors cross the boundary as a code and a message, never as
// exceptions. (The objects they return are used through their virtual functions, which may throw
// gpucap::Error.)

#include <functional>
#include <memory>
#include <string>

#include "gpucap/engine/engine.hpp"
#include "gpucap/engine/torch_engine.hpp"
#include "gpucap/engine/torch_trainer.hpp"

// The plugin's entry point: returns a new engine, or nullptr with `error_code` (an ErrorCode) and
// `error_message` set.
extern "C" {
using GpucapCreateTorchEngine = gpucap::engine::Engine* (*)(const gpucap::engine::TorchEngineOptions* options,
                                                             const std::function<double()>* now_s, int* error_code,
                                                             std::string* error_message);
}
inline constexpr const char* kGpucapCreateTorchEngineSymbol = "gpucap_create_torch_engine";

// The plugin's trainer entry point: a new trainer, or nullptr with `error_code` and `error_message`.
extern "C" {
using GpucapCreateTorchTrainer = gpucap::engine::TorchTrainer* (*)(const gpucap::engine::TorchTrainerOptions* options,
                                                                    int* error_code, std::string* error_message);
}
inline constexpr const char* kGpucapCreateTorchTrainerSymbol = "gpucap_create_torch_trainer";

namespace gpucap::engine {

// Where the plugin is looked for: $GPUCAP_TORCH_ENGINE, else next to the running gpucap binary
// (where the build puts it).
[[nodiscard]] std::string torch_plugin_path();

// Loads the plugin (once per process; it stays loaded) and creates an engine. Error(unsupported)
// when there is no plugin (gpucap was built without LibTorch), the engine's own errors otherwise.
[[nodiscard]] std::unique_ptr<Engine> load_torch_engine(const TorchEngineOptions& options, std::function<double()> now_s);

// Loads the plugin likewise and creates a training job (torch_trainer.hpp); Error(unsupported)
// without the plugin, the trainer's own errors otherwise.
[[nodiscard]] std::unique_ptr<TorchTrainer> load_torch_trainer(const TorchTrainerOptions& options);

}  // namespace gpucap::engine
