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

std::unique_ptr<Engine> load_torch_engine(const TorchEngineOptions& options, std::function<double()> now_s) {
  static std::mutex mutex;
  static GpucapCreateTorchEngine create = nullptr;
  {
    const std::lock_guard lock(mutex);
    if (create == nullptr) {
      const auto path = torch_plugin_path();
      // Never closed: engines it made may live until the process ends.
      void* plugin = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (plugin == nullptr) {
        const char* why = dlerror();
        throw Error(ErrorCode::unsupported,
                    fmt::format("no LibTorch engine: cannot load {} ({}); gpucap was built without LibTorch? "
                                "(scripts/setup.sh installs libtorch-dev; then rebuild)",
                                path, why != nullptr ? why : "unknown reason"));
      }
      create = reinterpret_cast<GpucapCreateTorchEngine>(dlsym(plugin, kGpucapCreateTorchEngineSymbol));
      if (create == nullptr) {
        throw Error(ErrorCode::unsupported, fmt::format("{}: not a gpucap engine plugin", path));
      }
    }
  }
  int code = 0;
  std::string message;
  Engine* engine = create(&options, &now_s, &code, &message);
  if (engine == nullptr) throw Error(static_cast<ErrorCode>(code), message);
  return std::unique_ptr<Engine>(engine);
}

}  // namespace gpucap::engine
