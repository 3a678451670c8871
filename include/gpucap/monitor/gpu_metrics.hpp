#pragma once
// A GPU's readings under NVIDIA dcgm-exporter's metric names and labels, so that dashboards and
// alerts written for dcgm-exporter work unchanged on gpucap's exporter:
//   DCGM_FI_DEV_POWER_USAGE (W), DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION (mJ, counter),
//   DCGM_FI_DEV_SM_CLOCK and DCGM_FI_DEV_MEM_CLOCK (MHz), DCGM_FI_DEV_GPU_UTIL and
//   DCGM_FI_DEV_MEM_COPY_UTIL (%), DCGM_FI_DEV_GPU_TEMP (C), DCGM_FI_DEV_POWER_MGMT_LIMIT (W);
//   labels gpu, UUID, pci_bus_id, device, modelName, hostname.
// dcgm-exporter spelled the host label `Hostname` until its 2026-05 rename (commit d5e5f51,
// "Rename Hostname label to hostname (#655)"); gpucap emits the current spelling, and the old one
// for dashboards written before it (--hostname-label Hostname).
// modelName is the board's name as NVML gives it ("NVIDIA H200"); the twin's is its GPU file's
// name with " (simulated twin)", on every command.
// dcgm-exporter's names break two of Prometheus's style rules (a counter without "_total", the
// camelCase label modelName); they are kept, since matching them is the point.
//
// A signal the device lacks (the twin has no temperature) is NaN: the series is there, and says
// it was not measured. The twin's series also carry simulated="true", its UUID and model name
// say SIMULATED, so no simulated figure passes for a real one.

#include <string>
#include <vector>

#include "gpucap/device/device.hpp"
#include "gpucap/device/nvml_device.hpp"
#include "gpucap/monitor/exposition.hpp"

namespace gpucap::monitor {

inline constexpr const char* kHostnameLabel = "hostname";
inline constexpr const char* kLegacyHostnameLabel = "Hostname";

// --hostname-label: "hostname" or "Hostname"; Error(usage) otherwise.
[[nodiscard]] std::string parse_hostname_label(const std::string& text);

struct GpuIdentity {
  unsigned index = 0;
  std::string uuid;
  std::string pci_bus_id;
  std::string model_name;
  std::string hostname;
  bool simulated = false;
  std::string hostname_label = kHostnameLabel;  // the label's key: kHostnameLabel or kLegacyHostnameLabel
};

// A real GPU as NVML names it.
[[nodiscard]] GpuIdentity nvml_identity(const device::NvmlDeviceInfo& info, const std::string& hostname);
// The twin of `gpu_name` as GPU `index`: stable made-up UUID and bus id that say SIMULATED.
[[nodiscard]] GpuIdentity twin_identity(unsigned index, const std::string& gpu_name, const std::string& hostname);
// This machine's host name (gethostname); "localhost" if it has none.
[[nodiscard]] std::string local_hostname();

struct GpuReading {
  double power_w = 0.0;
  double energy_j = 0.0;           // since measuring began (counter or integrated)
  double sm_clock_mhz = 0.0;
  double memory_clock_mhz = 0.0;
  double utilization_pct = 0.0;
  double memory_utilization_pct = 0.0;
  double temperature_c = 0.0;
  double power_limit_w = 0.0;      // the board's enforced limit (its default where none was set), never a software cap
};

// Every signal of `device` (NaN for those it lacks); energy is the caller's (a Monitor's).
[[nodiscard]] GpuReading read_gpu(device::Device& device, double energy_j);

// dcgm-exporter's labels for a GPU (plus simulated="true" on the twin).
[[nodiscard]] Labels dcgm_labels(const GpuIdentity& gpu);
// Declares the DCGM families (idempotent).
void declare_dcgm_metrics(MetricsRegistry& registry);
// Sets a GPU's series from a reading (declare_dcgm_metrics first).
void publish_dcgm(MetricsRegistry& registry, const GpuIdentity& gpu, const GpuReading& reading);

// The DCGM metric names, in the order they are declared (tests check that every one is exported).
[[nodiscard]] const std::vector<std::string>& dcgm_metric_names();

}  // namespace gpucap::monitor
