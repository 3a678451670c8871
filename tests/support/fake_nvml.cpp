// A fake NVML for tests: the same C entry points gpucap resolves from libnvidia-ml.so.1, backed
// by a JSON state file named by $GPUCAP_FAKE_NVML_STATE. Tests script devices, readings,
// permission refusals and failures in that file; every control write is saved back to it
// (atomically), so another process — the next gpucap start — sees what the last one left.
//
// State: {"init_status": 0, "devices": [{"name", "uuid", "bus_id", "power_mw" (a number, or a
// list read one entry per call, the last repeating), "energy_mj" (the counter at nvmlInit_v2, then
// advancing at the first scripted power; absent: not supported),
// "sm_clock_mhz", "memory_clock_mhz", "utilization_gpu", "utilization_memory", "temperature_c",
// "power_limit_mw", "power_limit_min_mw", "power_limit_max_mw", "power_limit_default_mw",
// "memory_clocks_mhz": [...], "graphics_clocks_mhz": [...], "locked_sm_mhz": null | [min, max],
// "locked_memory_mhz": null | [min, max], "power_mw_at_locked_sm": {"1200": 150000, ...} (while the
// SM clock is locked at a listed clock, the power reading is that value and the SM clock reading
// follows the lock; absent: readings ignore locks), "locked_clocks_supported": true (false: a pre-Volta GPU,
// application clocks only), "power_instant_mw" (absent: no instantaneous reading), "deny_writes":
// false, "fail": {"nvmlFunction": status}, "fail_after": {"nvmlFunction": [N, status]} (N calls
// succeed, then every call answers status: a GPU whose reads start failing mid-run)}],
// "energy_mj" may also be a list, read one entry per call (the last repeating) without advancing
// with time: a counter that a driver reset sends back towards 0.
// Faults of a device (issue 38), each drawn again by every process that loads the fake:
// "random_faults": {"seed": 1, "probability": 0.2, "status": 999, "functions": ["nvmlDevice...",
// ...]}: each call of a listed function fails with `status` (999 NVML_ERROR_UNKNOWN, 15
// NVML_ERROR_GPU_IS_LOST ...) with that probability, from a generator seeded with `seed`, once
// "after_s" (optional) have passed since nvmlInit_v2; every failure is counted in the state's "faults_injected": {"nvmlDevice...": N}.
// "reset": {"after_s": 1.5} or {"after_energy_calls": N}: once, that long after nvmlInit_v2 (or at
// that call of nvmlDeviceGetTotalEnergyConsumption), the driver "resets" the GPU: the energy
// counter starts again from 0, the clock locks are cleared and the power limit goes back to its
// default; "driver reset" is appended to "writes" at that point.
// "writes": ["nvmlDeviceSet... 0 1200 1200", ...]}

#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <vector>

namespace {

constexpr int kSuccess = 0;
constexpr int kUninitialized = 1;
constexpr int kInvalidArgument = 2;
constexpr int kNotSupported = 3;
constexpr int kNoPermission = 4;
constexpr int kInsufficientSize = 7;
constexpr int kDriverNotLoaded = 9;

// NVML is thread-safe (gpucap's sampler thread reads power while the Runner writes controls):
// every entry point holds this lock.
std::mutex fake_mutex;
nlohmann::json state;
bool initialised = false;
std::vector<std::size_t> power_calls;
std::vector<std::size_t> energy_calls;
// Calls so far of each function named in a device's "fail_after", by device uuid and function.
std::map<std::string, std::size_t> fail_after_calls;
std::chrono::steady_clock::time_point init_time;
// Per device: when its energy counter last started (nvmlInit_v2 or its reset), whether its reset
// has happened, and the generator of its random faults.
std::vector<std::chrono::steady_clock::time_point> energy_origin;
std::vector<bool> reset_done;
std::vector<std::mt19937_64> fault_rng;
// Handles are pointers into this array: one per device.
std::vector<int> handle_ids;

const char* state_path() { return std::getenv("GPUCAP_FAKE_NVML_STATE"); }

void save() {
  const std::string path = state_path();
  const std::string temporary = path + ".tmp";
  {
    std::ofstream out(temporary, std::ios::trunc);
    out << state.dump(2);
  }
  std::rename(temporary.c_str(), path.c_str());
}

// The scripted driver reset of device `index`, if it is due (at most once per process).
void reset_if_due(std::size_t index, nlohmann::json& device) {
  if (!device.contains("reset") || reset_done[index]) return;
  const auto& rule = device["reset"];
  const auto now = std::chrono::steady_clock::now();
  const bool due = (rule.contains("after_s") &&
                    std::chrono::duration<double>(now - init_time).count() >= rule["after_s"].get<double>()) ||
                   (rule.contains("after_energy_calls") && energy_calls[index] >= rule["after_energy_calls"].get<std::size_t>());
  if (!due) return;
  reset_done[index] = true;
  if (device.contains("energy_mj") && !device["energy_mj"].is_array()) device["energy_mj"] = 0;
  energy_origin[index] = now;
  device["locked_sm_mhz"] = nullptr;
  device["locked_memory_mhz"] = nullptr;
  if (device.contains("power_limit_default_mw")) device["power_limit_mw"] = device["power_limit_default_mw"];
  state["writes"].push_back("driver reset");
  save();
}

nlohmann::json* device_of(void* handle) {
  if (!initialised || handle == nullptr) return nullptr;
  const auto index = static_cast<std::size_t>(*static_cast<int*>(handle));
  auto& devices = state["devices"];
  if (index >= devices.size()) return nullptr;
  reset_if_due(index, devices[index]);
  return &devices[index];
}

// The scripted failure of `function` on this device, if any.
int scripted(const nlohmann::json& device, const char* function) {
  if (device.contains("fail") && device["fail"].contains(function)) return device["fail"][function].get<int>();
  if (device.contains("fail_after") && device["fail_after"].contains(function)) {
    const auto& rule = device["fail_after"][function];
    auto& calls = fail_after_calls[device.value("uuid", "") + " " + function];
    if (calls >= rule[0].get<std::size_t>()) return rule[1].get<int>();
    ++calls;
  }
  if (device.contains("random_faults")) {
    const auto& rule = device["random_faults"];
    const auto& functions = rule["functions"];
    // "after_s": no fault before that long after nvmlInit_v2 (the run's first settings go through).
    const bool started = !rule.contains("after_s") ||
                         std::chrono::duration<double>(std::chrono::steady_clock::now() - init_time).count() >=
                             rule["after_s"].get<double>();
    if (started && std::find(functions.begin(), functions.end(), function) != functions.end()) {
      const auto& devices = state["devices"];
      std::size_t index = 0;
      while (index < devices.size() && &devices[index] != &device) ++index;
      auto& rng = fault_rng[std::min(index, fault_rng.size() - 1)];
      if (std::uniform_real_distribution<double>(0.0, 1.0)(rng) < rule.value("probability", 0.0)) {
        auto& injected = state["faults_injected"][function];
        injected = injected.is_null() ? 1 : injected.get<int>() + 1;
        save();
        return rule.value("status", 999);
      }
    }
  }
  return kSuccess;
}

template <typename T>
int read_field(void* handle, const char* function, const char* field, T* out) {
  auto* device = device_of(handle);
  if (device == nullptr || out == nullptr) return initialised ? kInvalidArgument : kUninitialized;
  if (const int status = scripted(*device, function); status != kSuccess) return status;
  if (!device->contains(field)) return kNotSupported;
  *out = (*device)[field].get<T>();
  return kSuccess;
}

int write_call(void* handle, const char* function, const std::string& arguments,
               const std::function<void(nlohmann::json&)>& apply) {
  auto* device = device_of(handle);
  if (device == nullptr) return initialised ? kInvalidArgument : kUninitialized;
  if (const int status = scripted(*device, function); status != kSuccess) return status;
  if (device->value("deny_writes", false)) return kNoPermission;
  apply(*device);
  state["writes"].push_back(std::string(function) + " " + arguments);
  save();
  return kSuccess;
}

int copy_text(const std::string& text, char* buffer, unsigned length) {
  if (buffer == nullptr) return kInvalidArgument;
  if (text.size() + 1 > length) return kInsufficientSize;
  std::memcpy(buffer, text.c_str(), text.size() + 1);
  return kSuccess;
}

int copy_list(const nlohmann::json& list, unsigned* count, unsigned* values) {
  if (count == nullptr) return kInvalidArgument;
  const auto size = static_cast<unsigned>(list.size());
  if (*count < size) {
    *count = size;
    return kInsufficientSize;
  }
  *count = size;
  for (unsigned i = 0; i < size; ++i) values[i] = list[i].get<unsigned>();
  return kSuccess;
}

bool contains(const nlohmann::json& list, unsigned value) {
  for (const auto& v : list) {
    if (v.get<unsigned>() == value) return true;
  }
  return false;
}

// The scripted power at the locked SM clock, if the device lists one for it.
const nlohmann::json* locked_sm_power(const nlohmann::json& device) {
  if (!device.contains("power_mw_at_locked_sm") || !device.contains("locked_sm_mhz") || device["locked_sm_mhz"].is_null()) {
    return nullptr;
  }
  const auto key = std::to_string(device["locked_sm_mhz"][0].get<unsigned>());
  const auto& table = device["power_mw_at_locked_sm"];
  return table.contains(key) ? &table[key] : nullptr;
}

}  // namespace

extern "C" {

int nvmlInit_v2() {
  const std::lock_guard lock(fake_mutex);
  const char* path = state_path();
  if (path == nullptr) return kDriverNotLoaded;
  std::ifstream in(path);
  if (!in) return kDriverNotLoaded;
  state = nlohmann::json::parse(in);
  if (const int status = state.value("init_status", 0); status != kSuccess) return status;
  if (!state.contains("writes")) state["writes"] = nlohmann::json::array();
  handle_ids.resize(state["devices"].size());
  for (std::size_t i = 0; i < handle_ids.size(); ++i) handle_ids[i] = static_cast<int>(i);
  power_calls.assign(handle_ids.size(), 0);
  energy_calls.assign(handle_ids.size(), 0);
  fail_after_calls.clear();
  init_time = std::chrono::steady_clock::now();
  energy_origin.assign(handle_ids.size(), init_time);
  reset_done.assign(handle_ids.size(), false);
  fault_rng.clear();
  for (const auto& device : state["devices"]) {
    fault_rng.emplace_back(device.contains("random_faults") ? device["random_faults"].value("seed", 1ULL) : 1ULL);
  }
  initialised = true;
  return kSuccess;
}

int nvmlShutdown() {
  const std::lock_guard lock(fake_mutex);
  if (!initialised) return kUninitialized;
  initialised = false;
  return kSuccess;
}

const char* nvmlErrorString(int status) {
  const std::lock_guard lock(fake_mutex);
  switch (status) {
    case kSuccess: return "Success";
    case kUninitialized: return "Uninitialized";
    case kInvalidArgument: return "Invalid Argument";
    case kNotSupported: return "Not Supported";
    case kNoPermission: return "Insufficient Permissions";
    case kInsufficientSize: return "Insufficient Size";
    case kDriverNotLoaded: return "Driver Not Loaded";
    default: return "Unknown Error";
  }
}

int nvmlDeviceGetCount_v2(unsigned* count) {
  const std::lock_guard lock(fake_mutex);
  if (!initialised) return kUninitialized;
  *count = static_cast<unsigned>(state["devices"].size());
  return kSuccess;
}

int nvmlDeviceGetHandleByIndex_v2(unsigned index, void** handle) {
  const std::lock_guard lock(fake_mutex);
  if (!initialised) return kUninitialized;
  if (index >= handle_ids.size()) return kInvalidArgument;
  *handle = &handle_ids[index];
  return kSuccess;
}

int nvmlDeviceGetName(void* handle, char* name, unsigned length) {
  const std::lock_guard lock(fake_mutex);
  std::string text;
  if (const int s = read_field(handle, "nvmlDeviceGetName", "name", &text); s != kSuccess) return s;
  return copy_text(text, name, length);
}

int nvmlDeviceGetUUID(void* handle, char* uuid, unsigned length) {
  const std::lock_guard lock(fake_mutex);
  std::string text;
  if (const int s = read_field(handle, "nvmlDeviceGetUUID", "uuid", &text); s != kSuccess) return s;
  return copy_text(text, uuid, length);
}

struct PciInfo {
  char bus_id_legacy[16];
  unsigned domain, bus, device, pci_device_id, pci_subsystem_id;
  char bus_id[32];
};

int nvmlDeviceGetPciInfo_v3(void* handle, PciInfo* pci) {
  const std::lock_guard lock(fake_mutex);
  std::string text;
  if (const int s = read_field(handle, "nvmlDeviceGetPciInfo_v3", "bus_id", &text); s != kSuccess) return s;
  std::memset(pci, 0, sizeof(PciInfo));
  return copy_text(text, pci->bus_id, sizeof(pci->bus_id));
}

int nvmlDeviceGetPowerUsage(void* handle, unsigned* mw) {
  const std::lock_guard lock(fake_mutex);
  auto* device = device_of(handle);
  if (device == nullptr) return kInvalidArgument;
  if (const int s = scripted(*device, "nvmlDeviceGetPowerUsage"); s != kSuccess) return s;
  if (const auto* locked = locked_sm_power(*device)) {
    *mw = locked->get<unsigned>();
    return kSuccess;
  }
  const auto& power = (*device)["power_mw"];
  if (!power.is_array()) {
    *mw = power.get<unsigned>();
    return kSuccess;
  }
  auto& calls = power_calls[static_cast<std::size_t>(*static_cast<int*>(handle))];
  *mw = power[std::min(calls, power.size() - 1)].get<unsigned>();
  ++calls;
  return kSuccess;
}

// The counter advances at the device's (first scripted) power since nvmlInit_v2.
int nvmlDeviceGetTotalEnergyConsumption(void* handle, unsigned long long* mj) {
  const std::lock_guard lock(fake_mutex);
  if (auto* device = device_of(handle); device != nullptr && mj != nullptr && device->contains("energy_mj") &&
                                             (*device)["energy_mj"].is_array()) {
    if (const int s = scripted(*device, "nvmlDeviceGetTotalEnergyConsumption"); s != kSuccess) return s;
    const auto& list = (*device)["energy_mj"];
    auto& calls = energy_calls[static_cast<std::size_t>(*static_cast<int*>(handle))];
    *mj = list[std::min(calls, list.size() - 1)].get<unsigned long long>();
    ++calls;
    return kSuccess;
  }
  unsigned long long start = 0;
  if (const int s = read_field(handle, "nvmlDeviceGetTotalEnergyConsumption", "energy_mj", &start); s != kSuccess) {
    return s;
  }
  const auto& power = (*device_of(handle))["power_mw"];
  const double mw = (power.is_array() ? power[0] : power).get<double>();
  const auto index = static_cast<std::size_t>(*static_cast<int*>(handle));
  ++energy_calls[index];
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - energy_origin[index]).count();
  *mj = start + static_cast<unsigned long long>(mw * seconds);
  return kSuccess;
}

int nvmlDeviceGetClockInfo(void* handle, int type, unsigned* mhz) {
  const std::lock_guard lock(fake_mutex);
  if (const auto* device = device_of(handle); type == 1 && device != nullptr && mhz != nullptr && locked_sm_power(*device)) {
    *mhz = (*device)["locked_sm_mhz"][0].get<unsigned>();
    return kSuccess;
  }
  if (type == 1) return read_field(handle, "nvmlDeviceGetClockInfo", "sm_clock_mhz", mhz);
  if (type == 2) return read_field(handle, "nvmlDeviceGetClockInfo", "memory_clock_mhz", mhz);
  return kNotSupported;
}

struct Utilization {
  unsigned gpu, memory;
};

int nvmlDeviceGetUtilizationRates(void* handle, Utilization* rates) {
  const std::lock_guard lock(fake_mutex);
  if (const int s = read_field(handle, "nvmlDeviceGetUtilizationRates", "utilization_gpu", &rates->gpu); s != kSuccess) {
    return s;
  }
  return read_field(handle, "nvmlDeviceGetUtilizationRates", "utilization_memory", &rates->memory);
}

int nvmlDeviceGetTemperature(void* handle, int /*sensor*/, unsigned* celsius) {
  const std::lock_guard lock(fake_mutex);
  return read_field(handle, "nvmlDeviceGetTemperature", "temperature_c", celsius);
}

int nvmlDeviceGetPowerManagementLimitConstraints(void* handle, unsigned* min_mw, unsigned* max_mw) {
  const std::lock_guard lock(fake_mutex);
  const char* f = "nvmlDeviceGetPowerManagementLimitConstraints";
  if (const int s = read_field(handle, f, "power_limit_min_mw", min_mw); s != kSuccess) return s;
  return read_field(handle, f, "power_limit_max_mw", max_mw);
}

int nvmlDeviceGetPowerManagementDefaultLimit(void* handle, unsigned* mw) {
  const std::lock_guard lock(fake_mutex);
  return read_field(handle, "nvmlDeviceGetPowerManagementDefaultLimit", "power_limit_default_mw", mw);
}

int nvmlDeviceGetPowerManagementLimit(void* handle, unsigned* mw) {
  const std::lock_guard lock(fake_mutex);
  return read_field(handle, "nvmlDeviceGetPowerManagementLimit", "power_limit_mw", mw);
}

int nvmlDeviceGetSupportedMemoryClocks(void* handle, unsigned* count, unsigned* clocks) {
  const std::lock_guard lock(fake_mutex);
  auto* device = device_of(handle);
  if (device == nullptr) return kInvalidArgument;
  if (const int s = scripted(*device, "nvmlDeviceGetSupportedMemoryClocks"); s != kSuccess) return s;
  return copy_list((*device)["memory_clocks_mhz"], count, clocks);
}

int nvmlDeviceGetSupportedGraphicsClocks(void* handle, unsigned memory_mhz, unsigned* count, unsigned* clocks) {
  const std::lock_guard lock(fake_mutex);
  auto* device = device_of(handle);
  if (device == nullptr) return kInvalidArgument;
  if (const int s = scripted(*device, "nvmlDeviceGetSupportedGraphicsClocks"); s != kSuccess) return s;
  if (!contains((*device)["memory_clocks_mhz"], memory_mhz)) return kInvalidArgument;
  return copy_list((*device)["graphics_clocks_mhz"], count, clocks);
}

bool locks_clocks(void* handle) {
  auto* device = device_of(handle);
  return device == nullptr || device->value("locked_clocks_supported", true);
}

int nvmlDeviceSetGpuLockedClocks(void* handle, unsigned min_mhz, unsigned max_mhz) {
  const std::lock_guard lock(fake_mutex);
  if (!locks_clocks(handle)) return kNotSupported;
  return write_call(handle, "nvmlDeviceSetGpuLockedClocks", std::to_string(min_mhz) + " " + std::to_string(max_mhz),
                    [&](nlohmann::json& d) {
                      d["locked_sm_mhz"] = {min_mhz, max_mhz};
                      d["sm_clock_mhz"] = max_mhz;
                    });
}

int nvmlDeviceResetGpuLockedClocks(void* handle) {
  const std::lock_guard lock(fake_mutex);
  if (!locks_clocks(handle)) return kNotSupported;
  return write_call(handle, "nvmlDeviceResetGpuLockedClocks", "",
                    [](nlohmann::json& d) { d["locked_sm_mhz"] = nullptr; });
}

int nvmlDeviceSetMemoryLockedClocks(void* handle, unsigned min_mhz, unsigned max_mhz) {
  const std::lock_guard lock(fake_mutex);
  return write_call(handle, "nvmlDeviceSetMemoryLockedClocks",
                    std::to_string(min_mhz) + " " + std::to_string(max_mhz), [&](nlohmann::json& d) {
                      d["locked_memory_mhz"] = {min_mhz, max_mhz};
                      d["memory_clock_mhz"] = max_mhz;
                    });
}

int nvmlDeviceResetMemoryLockedClocks(void* handle) {
  const std::lock_guard lock(fake_mutex);
  return write_call(handle, "nvmlDeviceResetMemoryLockedClocks", "",
                    [](nlohmann::json& d) { d["locked_memory_mhz"] = nullptr; });
}

int nvmlDeviceSetPowerManagementLimit(void* handle, unsigned mw) {
  const std::lock_guard lock(fake_mutex);
  auto* device = device_of(handle);
  if (device != nullptr && (mw < (*device)["power_limit_min_mw"].get<unsigned>() ||
                            mw > (*device)["power_limit_max_mw"].get<unsigned>())) {
    return kInvalidArgument;
  }
  return write_call(handle, "nvmlDeviceSetPowerManagementLimit", std::to_string(mw),
                    [&](nlohmann::json& d) { d["power_limit_mw"] = mw; });
}

int nvmlDeviceSetApplicationsClocks(void* handle, unsigned memory_mhz, unsigned sm_mhz) {
  const std::lock_guard lock(fake_mutex);
  return write_call(handle, "nvmlDeviceSetApplicationsClocks", std::to_string(memory_mhz) + " " + std::to_string(sm_mhz),
                    [&](nlohmann::json& d) {
                      d["applications_clocks_mhz"] = {memory_mhz, sm_mhz};
                      d["sm_clock_mhz"] = sm_mhz;
                    });
}

int nvmlDeviceResetApplicationsClocks(void* handle) {
  const std::lock_guard lock(fake_mutex);
  return write_call(handle, "nvmlDeviceResetApplicationsClocks", "",
                    [](nlohmann::json& d) { d["applications_clocks_mhz"] = nullptr; });
}

struct FieldValue {  // nvmlFieldValue_t
  unsigned field_id, scope_id;
  long long timestamp, latency_us;
  int value_type, status;
  unsigned long long value;
};

// Only NVML_FI_DEV_POWER_INSTANT (186), from "power_instant_mw" (absent: not supported).
int nvmlDeviceGetFieldValues(void* handle, int count, FieldValue* values) {
  const std::lock_guard lock(fake_mutex);
  auto* device = device_of(handle);
  if (device == nullptr || count < 0) return kInvalidArgument;
  for (int i = 0; i < count; ++i) {
    auto& v = values[i];
    v.value = 0;
    if (v.field_id != 186 || !device->contains("power_instant_mw")) {
      v.status = kNotSupported;
      continue;
    }
    v.status = kSuccess;
    v.value_type = 1;  // unsigned int, in the union's first bytes
    const auto mw = (*device)["power_instant_mw"].get<unsigned>();
    std::memcpy(&v.value, &mw, sizeof(mw));
  }
  return kSuccess;
}

}  // extern "C"
