#include "gpucap/monitor/gpu_metrics.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <array>
#include <limits>

#include "gpucap/core/error.hpp"

namespace gpucap::monitor {
namespace {

using device::Signal;

constexpr double kNotMeasured = std::numeric_limits<double>::quiet_NaN();
constexpr double kMillijoulesPerJoule = 1e3;
constexpr double kPercent = 100.0;

struct DcgmField {
  const char* name;
  MetricType type;
  const char* help;
  double GpuReading::*value;
  double scale;  // gpucap's unit to dcgm-exporter's
};

// dcgm-exporter's metric names (they must match for its dashboards to work) and types; the help
// texts are gpucap's own words, saying what gpucap puts in each.
const std::array<DcgmField, 8>& dcgm_fields() {
  static const std::array<DcgmField, 8> fields = {{
      {"DCGM_FI_DEV_SM_CLOCK", MetricType::gauge, "Streaming-multiprocessor clock, in MHz.", &GpuReading::sm_clock_mhz,
       1.0},
      {"DCGM_FI_DEV_MEM_CLOCK", MetricType::gauge, "Memory clock, in MHz.", &GpuReading::memory_clock_mhz, 1.0},
      {"DCGM_FI_DEV_GPU_TEMP", MetricType::gauge, "GPU temperature in degrees Celsius; absent without a sensor (the twin).",
       &GpuReading::temperature_c, 1.0},
      {"DCGM_FI_DEV_POWER_USAGE", MetricType::gauge,
       "Power the board draws, in W: NVML's instantaneous reading where the driver has one, else its power usage.",
       &GpuReading::power_w, 1.0},
      {"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", MetricType::counter,
       "Energy the board used since gpucap began measuring, in mJ.", &GpuReading::energy_j, kMillijoulesPerJoule},
      {"DCGM_FI_DEV_GPU_UTIL", MetricType::gauge, "Share of time a kernel ran on the GPU, in %.",
       &GpuReading::utilization_pct, 1.0},
      {"DCGM_FI_DEV_MEM_COPY_UTIL", MetricType::gauge,
       "Share of time device memory was read or written, in %; absent where not measured (the twin).",
       &GpuReading::memory_utilization_pct, 1.0},
      {"DCGM_FI_DEV_POWER_MGMT_LIMIT", MetricType::gauge,
       "The board's enforced power limit, in W (its default where none was set); gpucap's own cap is "
       "gpucap_power_cap_watts.",
       &GpuReading::power_limit_w, 1.0},
  }};
  return fields;
}

// NaN for a signal the device lacks, or one its driver answers "not supported" for (NVML lists
// every signal; a board without, say, a utilization counter says so only when read).
double read_or_nan(device::Device& device, Signal signal) {
  if (!device.has_signal(signal)) return kNotMeasured;
  try {
    return device.read(signal);
  } catch (const Error& e) {
    if (e.code() == ErrorCode::unsupported) return kNotMeasured;
    throw;
  }
}

// The limit in force: the control where it was set, else the board's default.
double power_limit_w(device::Device& device) {
  if (device.has_control(device::Control::power_limit_w)) {
    if (const auto limit = device.read_control(device::Control::power_limit_w)) return *limit;
  }
  return read_or_nan(device, Signal::power_limit_default_w);
}

}  // namespace

std::string parse_hostname_label(const std::string& text) {
  if (text == kHostnameLabel || text == kLegacyHostnameLabel) return text;
  throw usage_error(fmt::format("--hostname-label '{}' must be {} (dcgm-exporter since 2026-05) or {} (before)", text,
                                kHostnameLabel, kLegacyHostnameLabel));
}

GpuIdentity nvml_identity(const device::NvmlDeviceInfo& info, const std::string& hostname) {
  return {info.index, info.uuid, info.pci_bus_id, info.name, hostname, false};
}

GpuIdentity twin_identity(unsigned index, const std::string& gpu_name, const std::string& hostname) {
  return {index, fmt::format("GPU-SIMULATED-{:08x}", index), fmt::format("SIMULATED:{:02x}:00.0", index),
          fmt::format("{} (simulated twin)", gpu_name), hostname, true};
}

std::string local_hostname() {
  std::array<char, 256> name{};
  if (gethostname(name.data(), name.size() - 1) != 0 || name[0] == '\0') return "localhost";
  return name.data();
}

GpuReading read_gpu(device::Device& device, double energy_j) {
  GpuReading r;
  r.power_w = read_or_nan(device, Signal::power_w);
  r.energy_j = energy_j;
  r.sm_clock_mhz = read_or_nan(device, Signal::sm_clock_mhz);
  r.memory_clock_mhz = read_or_nan(device, Signal::memory_clock_mhz);
  r.utilization_pct = kPercent * read_or_nan(device, Signal::utilization);
  r.memory_utilization_pct = kPercent * read_or_nan(device, Signal::memory_utilization);
  r.temperature_c = read_or_nan(device, Signal::temperature_c);
  r.power_limit_w = power_limit_w(device);
  return r;
}

Labels dcgm_labels(const GpuIdentity& gpu) {
  Labels labels = {{"gpu", std::to_string(gpu.index)},
                   {"UUID", gpu.uuid},
                   {"pci_bus_id", gpu.pci_bus_id},
                   {"device", fmt::format("nvidia{}", gpu.index)},
                   {"modelName", gpu.model_name},
                   {gpu.hostname_label, gpu.hostname}};
  if (gpu.simulated) labels.emplace_back("simulated", "true");
  return labels;
}

void declare_dcgm_metrics(MetricsRegistry& registry) {
  for (const auto& field : dcgm_fields()) registry.declare(field.name, field.type, field.help);
}

void publish_dcgm(MetricsRegistry& registry, const GpuIdentity& gpu, const GpuReading& reading) {
  const auto labels = dcgm_labels(gpu);
  for (const auto& field : dcgm_fields()) registry.set_if_known(field.name, labels, reading.*field.value * field.scale);
}

const std::vector<std::string>& dcgm_metric_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const auto& field : dcgm_fields()) out.emplace_back(field.name);
    return out;
  }();
  return names;
}

}  // namespace gpucap::monitor
