#include <dlfcn.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <mutex>

#include "gpucap/core/error.hpp"
#include "gpucap/engine/torch_plugin.hpp"

namespace gpucap::engine {

namespace {

constexpr const char* kPluginFile = "libgpucap_torch_engine.so";

std::string running_binary_dir() {
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : self.parent_path().string();
}

}  // namespace

std::string torch_plugin_path() {
  if (const char* path = std::getenv("GPUCAP_TORCH_ENGINE"); path != nullptr && *path != '\0') return path;
  return (std::filesystem::path(running_binary_dir()) / kPluginFile).string();
}

namespace {

// The plugin's entry point `symbol`. The plugin is loaded once per process and never closed:
// engines and trainers it made may live until the process ends.
void* plugin_symbol(const char* symbol) {
  static std::mutex mutex;
  static void* plugin = nullptr;
  const std::lock_guard lock(mutex);
  const auto path = torch_plugin_path();
  if (plugin == nullptr) {
    plugin = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (plugin == nullptr) {
      const char* why = dlerror();
      throw Error(ErrorCode::unsupported,
                  fmt::format("no LibTorch engine: cannot load {} ({}); gpucap was built without LibTorch? "
                              "(scripts/setup.sh installs libtorch-dev; then rebuild)",
                              path, why != nullptr ? why : "unknown reason"));
    }
  }
  void* entry = dlsym(plugin, symbol);
  if (entry == nullptr) throw Error(ErrorCode::unsupported, fmt::format("{}: not a gpucap engine plugin", path));
  return entry;
}

// What a plugin entry point returned: the object, or its error thrown as a gpucap::Error.
template <typename T>
std::unique_ptr<T> created(T* object, int code, const std::string& message) {
  if (object == nullptr) throw Error(static_cast<ErrorCode>(code), message);
  return std::unique_ptr<T>(object);
}

}  // namespace

std::unique_ptr<Engine> load_torch_engine(const TorchEngineOptions& options, std::function<double()> now_s) {
  const auto create = reinterpret_cast<GpucapCreateTorchEngine>(plugin_symbol(kGpucapCreateTorchEngineSymbol));
  int code = 0;
  std::string message;
  Engine* engine = create(&options, &now_s, &code, &message);
  return created(engine, code, message);
}

std::unique_ptr<TorchTrainer> load_torch_trainer(const TorchTrainerOptions& options) {
  const auto create = reinterpret_cast<GpucapCreateTorchTrainer>(plugin_symbol(kGpucapCreateTorchTrainerSymbol));
  int code = 0;
  std::string message;
  TorchTrainer* trainer = create(&options, &code, &message);
  return created(trainer, code, message);
}

}  // namespace gpucap::engine
