#pragma once
// One GPU behind the fake NVML library (tests/support/fake_nvml.cpp): an A100 drawing 120 W with
// six SM clocks, its state file in a temporary folder, and the environment that points gpucap
// (and the fake) at it and at a restore journal of its own, for the life of the object.

#include <cstdlib>
#include <string>

#include <nlohmann/json.hpp>

#include "gpucap/core/files.hpp"
#include "support/paths.hpp"

namespace gpucap::test {

class FakeNvmlGpu {
 public:
  // `extra`: fields merged into the device (e.g. "power_mw_at_locked_sm").
  explicit FakeNvmlGpu(bool energy_counter = true, const nlohmann::json& extra = nlohmann::json::object()) {
    nlohmann::json device = {
        {"name", "NVIDIA A100-SXM4-40GB"}, {"uuid", "GPU-run"}, {"bus_id", "00000000:07:00.0"}, {"power_mw", 120000},
        {"power_limit_mw", 400000}, {"power_limit_min_mw", 100000}, {"power_limit_max_mw", 400000},
        {"power_limit_default_mw", 400000}, {"memory_clocks_mhz", {1215}},
        {"graphics_clocks_mhz", {1410, 1200, 1005, 810, 615, 420}}, {"sm_clock_mhz", 1410}, {"memory_clock_mhz", 1215},
        {"utilization_gpu", 90}, {"utilization_memory", 30}, {"temperature_c", 45}, {"locked_sm_mhz", nullptr}};
    if (energy_counter) device["energy_mj"] = 5000000;
    device.update(extra);
    state_ = dir_.write("nvml.json", nlohmann::json{{"devices", {device}}}.dump());
    journal_ = dir_.file("journal.json");
    setenv("GPUCAP_FAKE_NVML_STATE", state_.c_str(), 1);
    setenv("GPUCAP_RESTORE_JOURNAL", journal_.c_str(), 1);
  }
  ~FakeNvmlGpu() {
    unsetenv("GPUCAP_FAKE_NVML_STATE");
    unsetenv("GPUCAP_RESTORE_JOURNAL");
  }
  FakeNvmlGpu(const FakeNvmlGpu&) = delete;
  FakeNvmlGpu& operator=(const FakeNvmlGpu&) = delete;

  [[nodiscard]] nlohmann::json gpu() const { return nlohmann::json::parse(read_text_file(state_))["devices"][0]; }
  [[nodiscard]] nlohmann::json writes() const { return nlohmann::json::parse(read_text_file(state_))["writes"]; }
  [[nodiscard]] const std::string& journal() const { return journal_; }
  [[nodiscard]] const std::string& gpu_state_path() const { return state_; }

 private:
  TempDir dir_;
  std::string state_;
  std::string journal_;
};

}  // namespace gpucap::test
