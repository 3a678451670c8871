#pragma once
// NVML, loaded at run time: dlopen("libnvidia-ml.so.1") — or another path (--nvml-lib) — so
// gpucap builds and runs without the NVIDIA driver, and tests load a fake NVML through the same
// path. Only the entry points gpucap uses are declared (their C signatures are NVML's public
// API). This layer speaks NVML's units — milliwatts, millijoules, MHz, percent — and turns every
// NVML error into a gpucap::Error carrying the function's name and NVML's own message;
// NvmlDevice (nvml_device.hpp) converts to the SI units of the Device interface.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace gpucap::device {

inline constexpr const char* kDefaultNvmlLibrary = "libnvidia-ml.so.1";

// NVML return codes gpucap distinguishes (nvmlReturn_t).
enum class NvmlStatus : int {
  success = 0,
  uninitialized = 1,
  invalid_argument = 2,
  not_supported = 3,
  no_permission = 4,
  not_found = 6,
  insufficient_size = 7,
  driver_not_loaded = 9,
  gpu_is_lost = 15,
  unknown = 999,
};

// NVML's opaque device handle.
using NvmlHandle = void*;

struct NvmlUtilization {
  unsigned gpu_pct = 0;
  unsigned memory_pct = 0;
};

struct NvmlPowerLimits {
  unsigned min_mw = 0;
  unsigned max_mw = 0;
  unsigned default_mw = 0;
  unsigned current_mw = 0;
};

class NvmlLibrary {
 public:
  // Loads the library and calls nvmlInit_v2. Throws Error(no_gpu) when the library cannot be
  // loaded or NVML finds no driver (the message says which and names the path), Error(device)
  // for any other failure or a missing required entry point.
  explicit NvmlLibrary(const std::string& path = kDefaultNvmlLibrary);
  // nvmlShutdown, then dlclose.
  ~NvmlLibrary();
  NvmlLibrary(const NvmlLibrary&) = delete;
  NvmlLibrary& operator=(const NvmlLibrary&) = delete;

  [[nodiscard]] const std::string& path() const { return path_; }

  [[nodiscard]] unsigned device_count() const;
  // Throws Error(usage) for an index that does not exist.
  [[nodiscard]] NvmlHandle device(unsigned index) const;

  [[nodiscard]] std::string name(NvmlHandle device) const;
  [[nodiscard]] std::string uuid(NvmlHandle device) const;
  [[nodiscard]] std::string pci_bus_id(NvmlHandle device) const;

  // NVML's power reading: a 1-s average on Ampere and later boards (instantaneous before).
  [[nodiscard]] unsigned power_usage_mw(NvmlHandle device) const;
  // The instantaneous reading (field NVML_FI_DEV_POWER_INSTANT, drivers from R530 on); nullopt
  // where the driver or the GPU does not have it.
  [[nodiscard]] std::optional<unsigned> instant_power_mw(NvmlHandle device) const;
  // nullopt where the GPU or driver has no energy counter (before Volta).
  [[nodiscard]] std::optional<std::uint64_t> total_energy_mj(NvmlHandle device) const;
  [[nodiscard]] unsigned sm_clock_mhz(NvmlHandle device) const;
  [[nodiscard]] unsigned memory_clock_mhz(NvmlHandle device) const;
  [[nodiscard]] NvmlUtilization utilization(NvmlHandle device) const;
  [[nodiscard]] unsigned temperature_c(NvmlHandle device) const;
  [[nodiscard]] NvmlPowerLimits power_limits(NvmlHandle device) const;
  [[nodiscard]] std::vector<unsigned> supported_memory_clocks_mhz(NvmlHandle device) const;
  [[nodiscard]] std::vector<unsigned> supported_graphics_clocks_mhz(NvmlHandle device, unsigned memory_mhz) const;

  // Locked clocks exist from Volta on; false (nothing written) where the GPU does not support
  // them, so the caller can use application clocks instead.
  [[nodiscard]] bool set_locked_sm_clocks(NvmlHandle device, unsigned min_mhz, unsigned max_mhz) const;
  [[nodiscard]] bool reset_locked_sm_clocks(NvmlHandle device) const;
  // Application clocks (memory, SM): the SM clock control of older GPUs (Kepler to Pascal, e.g.
  // the seeds' Tesla P40).
  void set_applications_clocks(NvmlHandle device, unsigned memory_mhz, unsigned sm_mhz) const;
  void reset_applications_clocks(NvmlHandle device) const;
  // Error(unsupported) where the driver lacks memory-clock locking (before R470).
  void set_locked_memory_clocks(NvmlHandle device, unsigned min_mhz, unsigned max_mhz) const;
  void reset_locked_memory_clocks(NvmlHandle device) const;
  void set_power_limit_mw(NvmlHandle device, unsigned limit_mw) const;

  struct Api;  // the resolved entry points (nvml_library.cpp)

 private:
  std::string path_;
  void* handle_ = nullptr;
  std::unique_ptr<Api> api_;
};

}  // namespace gpucap::device
