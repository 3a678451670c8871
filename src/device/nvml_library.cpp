#include "gpucap/device/nvml_library.hpp"

#include <dlfcn.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <array>

#include "gpucap/core/error.hpp"

namespace gpucap::device {

namespace {

// NVML's C types, declared here so that nothing from the driver is needed at build time.
using nvmlReturn_t = int;
using nvmlDevice_t = void*;
struct NvmlPciInfo {  // nvmlPciInfo_t (v3)
  char bus_id_legacy[16];
  unsigned domain;
  unsigned bus;
  unsigned device;
  unsigned pci_device_id;
  unsigned pci_subsystem_id;
  char bus_id[32];
};
struct NvmlUtilizationC {  // nvmlUtilization_t
  unsigned gpu;
  unsigned memory;
};
constexpr int kClockSm = 1;          // NVML_CLOCK_SM
constexpr int kClockMem = 2;         // NVML_CLOCK_MEM
constexpr int kTemperatureGpu = 0;   // NVML_TEMPERATURE_GPU
constexpr unsigned kNameSize = 96;   // NVML_DEVICE_NAME_V2_BUFFER_SIZE
constexpr unsigned kUuidSize = 80;   // NVML_DEVICE_UUID_V2_BUFFER_SIZE
constexpr unsigned kMaxClocks = 512;
constexpr unsigned kFieldPowerInstant = 186;  // NVML_FI_DEV_POWER_INSTANT
struct NvmlFieldValue {  // nvmlFieldValue_t
  unsigned field_id;
  unsigned scope_id;
  long long timestamp;
  long long latency_us;
  int value_type;  // nvmlValueType_t
  int status;      // nvmlReturn_t
  union {
    double d;
    unsigned ui;
    unsigned long ul;
    unsigned long long ull;
    long long sll;
    int si;
  } value;
};

}  // namespace

struct NvmlLibrary::Api {
  nvmlReturn_t (*init)() = nullptr;
  nvmlReturn_t (*shutdown)() = nullptr;
  const char* (*error_string)(nvmlReturn_t) = nullptr;
  nvmlReturn_t (*device_count)(unsigned*) = nullptr;
  nvmlReturn_t (*handle_by_index)(unsigned, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*name)(nvmlDevice_t, char*, unsigned) = nullptr;
  nvmlReturn_t (*uuid)(nvmlDevice_t, char*, unsigned) = nullptr;
  nvmlReturn_t (*pci_info)(nvmlDevice_t, NvmlPciInfo*) = nullptr;
  nvmlReturn_t (*power_usage)(nvmlDevice_t, unsigned*) = nullptr;
  nvmlReturn_t (*field_values)(nvmlDevice_t, int, NvmlFieldValue*) = nullptr;  // optional
  nvmlReturn_t (*total_energy)(nvmlDevice_t, unsigned long long*) = nullptr;  // optional
  nvmlReturn_t (*clock_info)(nvmlDevice_t, int, unsigned*) = nullptr;
  nvmlReturn_t (*utilization)(nvmlDevice_t, NvmlUtilizationC*) = nullptr;
  nvmlReturn_t (*temperature)(nvmlDevice_t, int, unsigned*) = nullptr;
  nvmlReturn_t (*limit_constraints)(nvmlDevice_t, unsigned*, unsigned*) = nullptr;
  nvmlReturn_t (*default_limit)(nvmlDevice_t, unsigned*) = nullptr;
  nvmlReturn_t (*limit)(nvmlDevice_t, unsigned*) = nullptr;
  nvmlReturn_t (*memory_clocks)(nvmlDevice_t, unsigned*, unsigned*) = nullptr;
  nvmlReturn_t (*graphics_clocks)(nvmlDevice_t, unsigned, unsigned*, unsigned*) = nullptr;
  nvmlReturn_t (*lock_sm)(nvmlDevice_t, unsigned, unsigned) = nullptr;
  nvmlReturn_t (*reset_sm)(nvmlDevice_t) = nullptr;
  nvmlReturn_t (*lock_memory)(nvmlDevice_t, unsigned, unsigned) = nullptr;  // optional
  nvmlReturn_t (*reset_memory)(nvmlDevice_t) = nullptr;                     // optional
  nvmlReturn_t (*set_limit)(nvmlDevice_t, unsigned) = nullptr;
  nvmlReturn_t (*set_app_clocks)(nvmlDevice_t, unsigned, unsigned) = nullptr;
  nvmlReturn_t (*reset_app_clocks)(nvmlDevice_t) = nullptr;
};

namespace {

template <typename Function>
void resolve(void* library, const std::string& path, const char* symbol, Function& out, bool required = true) {
  out = reinterpret_cast<Function>(dlsym(library, symbol));
  if (out == nullptr && required) {
    throw Error(ErrorCode::device, fmt::format("{}: NVML entry point {} is missing (driver too old?)", path, symbol));
  }
}

ErrorCode code_for(nvmlReturn_t status) {
  switch (static_cast<NvmlStatus>(status)) {
    case NvmlStatus::not_supported:
    case NvmlStatus::no_permission:
      return ErrorCode::unsupported;
    case NvmlStatus::driver_not_loaded:
      return ErrorCode::no_gpu;
    case NvmlStatus::invalid_argument:
      return ErrorCode::usage;
    default:
      return ErrorCode::device;
  }
}

}  // namespace

NvmlLibrary::NvmlLibrary(const std::string& path) : path_(path), api_(std::make_unique<Api>()) {
  handle_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle_ == nullptr) {
    const char* why = dlerror();
    throw Error(ErrorCode::no_gpu, fmt::format("no NVIDIA driver: cannot load {} ({})", path,
                                               why != nullptr ? why : "unknown reason"));
  }
  try {
    auto& a = *api_;
    resolve(handle_, path, "nvmlInit_v2", a.init);
    resolve(handle_, path, "nvmlShutdown", a.shutdown);
    resolve(handle_, path, "nvmlErrorString", a.error_string);
    resolve(handle_, path, "nvmlDeviceGetCount_v2", a.device_count);
    resolve(handle_, path, "nvmlDeviceGetHandleByIndex_v2", a.handle_by_index);
    resolve(handle_, path, "nvmlDeviceGetName", a.name);
    resolve(handle_, path, "nvmlDeviceGetUUID", a.uuid);
    resolve(handle_, path, "nvmlDeviceGetPciInfo_v3", a.pci_info);
    resolve(handle_, path, "nvmlDeviceGetPowerUsage", a.power_usage);
    resolve(handle_, path, "nvmlDeviceGetFieldValues", a.field_values, false);
    resolve(handle_, path, "nvmlDeviceGetTotalEnergyConsumption", a.total_energy, false);
    resolve(handle_, path, "nvmlDeviceGetClockInfo", a.clock_info);
    resolve(handle_, path, "nvmlDeviceGetUtilizationRates", a.utilization);
    resolve(handle_, path, "nvmlDeviceGetTemperature", a.temperature);
    resolve(handle_, path, "nvmlDeviceGetPowerManagementLimitConstraints", a.limit_constraints);
    resolve(handle_, path, "nvmlDeviceGetPowerManagementDefaultLimit", a.default_limit);
    resolve(handle_, path, "nvmlDeviceGetPowerManagementLimit", a.limit);
    resolve(handle_, path, "nvmlDeviceGetSupportedMemoryClocks", a.memory_clocks);
    resolve(handle_, path, "nvmlDeviceGetSupportedGraphicsClocks", a.graphics_clocks);
    resolve(handle_, path, "nvmlDeviceSetGpuLockedClocks", a.lock_sm);
    resolve(handle_, path, "nvmlDeviceResetGpuLockedClocks", a.reset_sm);
    resolve(handle_, path, "nvmlDeviceSetMemoryLockedClocks", a.lock_memory, false);
    resolve(handle_, path, "nvmlDeviceResetMemoryLockedClocks", a.reset_memory, false);
    resolve(handle_, path, "nvmlDeviceSetPowerManagementLimit", a.set_limit);
    resolve(handle_, path, "nvmlDeviceSetApplicationsClocks", a.set_app_clocks);
    resolve(handle_, path, "nvmlDeviceResetApplicationsClocks", a.reset_app_clocks);
    const auto status = a.init();
    if (status != 0) {
      const auto code = code_for(status);
      throw Error(code == ErrorCode::usage ? ErrorCode::device : code,
                  fmt::format("{}: nvmlInit_v2 failed: {}", path, a.error_string(status)));
    }
  } catch (...) {
    dlclose(handle_);
    throw;
  }
}

NvmlLibrary::~NvmlLibrary() {
  if (const auto status = api_->shutdown(); status != 0) {
    spdlog::warn("{}: nvmlShutdown failed: {}", path_, api_->error_string(status));
  }
  dlclose(handle_);
}

namespace {

void check(const NvmlLibrary::Api& api, nvmlReturn_t status, const char* function) {
  if (status != 0) throw Error(code_for(status), fmt::format("{}: {}", function, api.error_string(status)));
}

std::string text(const char* buffer, std::size_t size) {
  std::size_t length = 0;
  while (length < size && buffer[length] != '\0') ++length;
  return std::string(buffer, length);
}

}  // namespace

unsigned NvmlLibrary::device_count() const {
  unsigned count = 0;
  check(*api_, api_->device_count(&count), "nvmlDeviceGetCount_v2");
  return count;
}

NvmlHandle NvmlLibrary::device(unsigned index) const {
  const auto count = device_count();
  if (index >= count) {
    throw usage_error(fmt::format("GPU {} does not exist ({} NVIDIA GPU{} found)", index, count, count == 1 ? "" : "s"));
  }
  nvmlDevice_t handle = nullptr;
  check(*api_, api_->handle_by_index(index, &handle), "nvmlDeviceGetHandleByIndex_v2");
  return handle;
}

std::string NvmlLibrary::name(NvmlHandle device) const {
  std::array<char, kNameSize> buffer{};
  check(*api_, api_->name(device, buffer.data(), kNameSize), "nvmlDeviceGetName");
  return text(buffer.data(), buffer.size());
}

std::string NvmlLibrary::uuid(NvmlHandle device) const {
  std::array<char, kUuidSize> buffer{};
  check(*api_, api_->uuid(device, buffer.data(), kUuidSize), "nvmlDeviceGetUUID");
  return text(buffer.data(), buffer.size());
}

std::string NvmlLibrary::pci_bus_id(NvmlHandle device) const {
  NvmlPciInfo info{};
  check(*api_, api_->pci_info(device, &info), "nvmlDeviceGetPciInfo_v3");
  return text(info.bus_id, sizeof(info.bus_id));
}

unsigned NvmlLibrary::power_usage_mw(NvmlHandle device) const {
  unsigned mw = 0;
  check(*api_, api_->power_usage(device, &mw), "nvmlDeviceGetPowerUsage");
  return mw;
}

std::optional<unsigned> NvmlLibrary::instant_power_mw(NvmlHandle device) const {
  if (api_->field_values == nullptr) return std::nullopt;
  NvmlFieldValue field{};
  field.field_id = kFieldPowerInstant;
  if (api_->field_values(device, 1, &field) != 0 || field.status != 0) return std::nullopt;
  switch (field.value_type) {
    case 0: return static_cast<unsigned>(field.value.d);
    case 1: return field.value.ui;
    case 2: return static_cast<unsigned>(field.value.ul);
    case 3: return static_cast<unsigned>(field.value.ull);
    case 4: return static_cast<unsigned>(field.value.sll);
    case 5: return static_cast<unsigned>(field.value.si);
    default: return std::nullopt;
  }
}

std::optional<std::uint64_t> NvmlLibrary::total_energy_mj(NvmlHandle device) const {
  if (api_->total_energy == nullptr) return std::nullopt;
  unsigned long long mj = 0;
  const auto status = api_->total_energy(device, &mj);
  if (static_cast<NvmlStatus>(status) == NvmlStatus::not_supported) return std::nullopt;
  check(*api_, status, "nvmlDeviceGetTotalEnergyConsumption");
  return static_cast<std::uint64_t>(mj);
}

unsigned NvmlLibrary::sm_clock_mhz(NvmlHandle device) const {
  unsigned mhz = 0;
  check(*api_, api_->clock_info(device, kClockSm, &mhz), "nvmlDeviceGetClockInfo(SM)");
  return mhz;
}

unsigned NvmlLibrary::memory_clock_mhz(NvmlHandle device) const {
  unsigned mhz = 0;
  check(*api_, api_->clock_info(device, kClockMem, &mhz), "nvmlDeviceGetClockInfo(MEM)");
  return mhz;
}

NvmlUtilization NvmlLibrary::utilization(NvmlHandle device) const {
  NvmlUtilizationC rates{};
  check(*api_, api_->utilization(device, &rates), "nvmlDeviceGetUtilizationRates");
  return {rates.gpu, rates.memory};
}

unsigned NvmlLibrary::temperature_c(NvmlHandle device) const {
  unsigned celsius = 0;
  check(*api_, api_->temperature(device, kTemperatureGpu, &celsius), "nvmlDeviceGetTemperature");
  return celsius;
}

NvmlPowerLimits NvmlLibrary::power_limits(NvmlHandle device) const {
  NvmlPowerLimits limits;
  check(*api_, api_->limit_constraints(device, &limits.min_mw, &limits.max_mw),
        "nvmlDeviceGetPowerManagementLimitConstraints");
  check(*api_, api_->default_limit(device, &limits.default_mw), "nvmlDeviceGetPowerManagementDefaultLimit");
  check(*api_, api_->limit(device, &limits.current_mw), "nvmlDeviceGetPowerManagementLimit");
  return limits;
}

namespace {

// A list NVML fills in: `query(count, values)` with room for kMaxClocks entries.
template <typename Query>
std::vector<unsigned> clock_list(const NvmlLibrary::Api& api, const char* function, Query query) {
  std::vector<unsigned> clocks(kMaxClocks);
  auto count = kMaxClocks;
  check(api, query(&count, clocks.data()), function);
  clocks.resize(std::min(count, kMaxClocks));
  return clocks;
}

}  // namespace

std::vector<unsigned> NvmlLibrary::supported_memory_clocks_mhz(NvmlHandle device) const {
  return clock_list(*api_, "nvmlDeviceGetSupportedMemoryClocks",
                    [&](unsigned* count, unsigned* values) { return api_->memory_clocks(device, count, values); });
}

std::vector<unsigned> NvmlLibrary::supported_graphics_clocks_mhz(NvmlHandle device, unsigned memory_mhz) const {
  return clock_list(*api_, "nvmlDeviceGetSupportedGraphicsClocks", [&](unsigned* count, unsigned* values) {
    return api_->graphics_clocks(device, memory_mhz, count, values);
  });
}

bool NvmlLibrary::set_locked_sm_clocks(NvmlHandle device, unsigned min_mhz, unsigned max_mhz) const {
  const auto status = api_->lock_sm(device, min_mhz, max_mhz);
  if (static_cast<NvmlStatus>(status) == NvmlStatus::not_supported) return false;
  check(*api_, status, "nvmlDeviceSetGpuLockedClocks");
  return true;
}

void NvmlLibrary::set_applications_clocks(NvmlHandle device, unsigned memory_mhz, unsigned sm_mhz) const {
  check(*api_, api_->set_app_clocks(device, memory_mhz, sm_mhz), "nvmlDeviceSetApplicationsClocks");
}

void NvmlLibrary::reset_applications_clocks(NvmlHandle device) const {
  check(*api_, api_->reset_app_clocks(device), "nvmlDeviceResetApplicationsClocks");
}

bool NvmlLibrary::reset_locked_sm_clocks(NvmlHandle device) const {
  const auto status = api_->reset_sm(device);
  if (static_cast<NvmlStatus>(status) == NvmlStatus::not_supported) return false;
  check(*api_, status, "nvmlDeviceResetGpuLockedClocks");
  return true;
}

void NvmlLibrary::set_locked_memory_clocks(NvmlHandle device, unsigned min_mhz, unsigned max_mhz) const {
  if (api_->lock_memory == nullptr) {
    throw Error(ErrorCode::unsupported, fmt::format("{}: this driver cannot lock memory clocks", path_));
  }
  check(*api_, api_->lock_memory(device, min_mhz, max_mhz), "nvmlDeviceSetMemoryLockedClocks");
}

void NvmlLibrary::reset_locked_memory_clocks(NvmlHandle device) const {
  if (api_->reset_memory == nullptr) {
    throw Error(ErrorCode::unsupported, fmt::format("{}: this driver cannot lock memory clocks", path_));
  }
  check(*api_, api_->reset_memory(device), "nvmlDeviceResetMemoryLockedClocks");
}

void NvmlLibrary::set_power_limit_mw(NvmlHandle device, unsigned limit_mw) const {
  check(*api_, api_->set_limit(device, limit_mw), "nvmlDeviceSetPowerManagementLimit");
}

}  // namespace gpucap::device
