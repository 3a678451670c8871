// gpucap devices: the NVIDIA GPUs this machine has, through NVML, and what this process may
// write on each. Reads only; never writes a control.

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <iostream>
#include <memory>

#include "gpucap/cli/commands.hpp"
#include "gpucap/device/nvml_device.hpp"

namespace gpucap::cli {

namespace {

struct DevicesFlags {
  std::string nvml_library = default_nvml_library();
  bool json = false;
};

std::string clock_list(const std::vector<double>& clocks) {
  if (clocks.empty()) return "none reported";
  const auto [low, high] = std::minmax_element(clocks.begin(), clocks.end());
  if (clocks.size() == 1) return fmt::format("{:g} MHz", *low);
  return fmt::format("{:g}-{:g} MHz ({} levels)", *low, *high, clocks.size());
}

std::string permission_text(const device::NvmlDevice& gpu, device::Control control) {
  if (!gpu.has_control(control)) return "not available";
  return gpu.can_write(control) ? "yes" : "no (needs root)";
}

nlohmann::json device_json(const device::NvmlDevice& gpu) {
  const auto& i = gpu.info();
  nlohmann::json writable;
  for (const auto control : device::all_controls()) {
    writable[std::string(device::describe(control).name)] = gpu.can_write(control);
  }
  return {{"index", i.index},
          {"name", i.name},
          {"uuid", i.uuid},
          {"pci_bus_id", i.pci_bus_id},
          {"power_limit_w",
           {{"min", i.power_limit_min_w},
            {"max", i.power_limit_max_w},
            {"default", i.power_limit_default_w},
            {"current", i.power_limit_w}}},
          {"memory_clocks_mhz", i.memory_clocks_mhz},
          {"sm_clocks_mhz", i.sm_clocks_mhz},
          {"energy_counter", i.energy_counter},
          {"instant_power", i.instant_power},
          {"writable", writable},
          {"simulated", false}};
}

void print_device(const device::NvmlDevice& gpu) {
  const auto& i = gpu.info();
  fmt::print("GPU {}: {}\n", i.index, i.name);
  fmt::print("  uuid                {}\n", i.uuid);
  fmt::print("  pci bus id          {}\n", i.pci_bus_id);
  fmt::print("  power limit         {:g} W (settable {:g}-{:g} W, default {:g} W)\n", i.power_limit_w,
             i.power_limit_min_w, i.power_limit_max_w, i.power_limit_default_w);
  fmt::print("  memory clocks       {}\n", clock_list(i.memory_clocks_mhz));
  fmt::print("  SM clocks           {}\n", clock_list(i.sm_clocks_mhz));
  fmt::print("  energy counter      {}\n", i.energy_counter ? "yes" : "no");
  fmt::print("  power reading       {}\n", i.instant_power ? "instantaneous (NVML_FI_DEV_POWER_INSTANT)"
                                                           : "nvmlDeviceGetPowerUsage (a 1-s average from Ampere on)");
  for (const auto control : device::all_controls()) {
    fmt::print("  may write {:<33} {}\n", device::describe(control).name, permission_text(gpu, control));
  }
}

}  // namespace

Command add_devices_command(CLI::App& app, const GlobalOptions& /*global*/) {
  auto flags = std::make_shared<DevicesFlags>();
  auto* cmd = app.add_subcommand("devices", "List the NVIDIA GPUs (through NVML) and what gpucap may write on each");
  cmd->add_option("--nvml-lib", flags->nvml_library, "NVML library to load (default: $GPUCAP_NVML_LIB, else libnvidia-ml.so.1)")->capture_default_str();
  cmd->add_flag("--json", flags->json, "Print the list as JSON");
  return Command{cmd, [flags] {
                   const device::NvmlLibrary nvml(flags->nvml_library);
                   const auto count = nvml.device_count();
                   std::vector<std::unique_ptr<device::NvmlDevice>> gpus;
                   for (unsigned index = 0; index < count; ++index) {
                     gpus.push_back(std::make_unique<device::NvmlDevice>(nvml, index));
                   }
                   if (flags->json) {
                     nlohmann::json list = nlohmann::json::array();
                     for (const auto& gpu : gpus) list.push_back(device_json(*gpu));
                     std::cout << nlohmann::json{{"nvml_library", nvml.path()}, {"devices", list}}.dump(2) << "\n";
                     return;
                   }
                   fmt::print("{} NVIDIA GPU{} (NVML: {}); real hardware, nothing simulated\n", count,
                              count == 1 ? "" : "s", nvml.path());
                   for (const auto& gpu : gpus) print_device(*gpu);
                   if (!device::process_may_write_gpu_controls()) {
                     fmt::print("Not root: controllers that lock clocks or set the power limit will refuse to start; "
                                "batchsizer (batch size only) needs no privileges.\n");
                   }
                 }};
}

}  // namespace gpucap::cli
