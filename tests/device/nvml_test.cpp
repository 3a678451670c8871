// The NVML device through the real dlopen path, against the fake NVML the tests build
// (tests/support/fake_nvml.cpp), scripted through its state file.

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdlib>

#include "gpucap/core/error.hpp"
#include "gpucap/core/files.hpp"
#include "gpucap/device/control_session.hpp"
#include "gpucap/device/nvml_device.hpp"
#include "support/expect_error.hpp"
#include "support/paths.hpp"

namespace gpucap::device {
namespace {

nlohmann::json a100() {
  return {{"name", "NVIDIA A100-SXM4-40GB"},
          {"uuid", "GPU-1111"},
          {"bus_id", "00000000:07:00.0"},
          {"power_mw", {61250, 250500}},
          {"energy_mj", 1000000},
          {"sm_clock_mhz", 1410},
          {"memory_clock_mhz", 1215},
          {"utilization_gpu", 57},
          {"utilization_memory", 20},
          {"temperature_c", 41},
          {"power_limit_mw", 400000},
          {"power_limit_min_mw", 100000},
          {"power_limit_max_mw", 400000},
          {"power_limit_default_mw", 400000},
          {"memory_clocks_mhz", {1215}},
          {"graphics_clocks_mhz", {1410, 1200, 1005, 810, 615}},
          {"locked_sm_mhz", nullptr},
          {"locked_memory_mhz", nullptr}};
}

// A state file for the fake NVML, named in $GPUCAP_FAKE_NVML_STATE while the object lives.
class FakeNvml {
 public:
  explicit FakeNvml(nlohmann::json devices, int init_status = 0)
      : path_(dir_.write("nvml-state.json",
                         nlohmann::json{{"init_status", init_status}, {"devices", std::move(devices)}}.dump())) {
    setenv("GPUCAP_FAKE_NVML_STATE", path_.c_str(), 1);
  }
  ~FakeNvml() { unsetenv("GPUCAP_FAKE_NVML_STATE"); }
  FakeNvml(const FakeNvml&) = delete;
  FakeNvml& operator=(const FakeNvml&) = delete;
  [[nodiscard]] nlohmann::json state() const { return nlohmann::json::parse(read_text_file(path_)); }

 private:
  test::TempDir dir_;
  std::string path_;
};

const char* kFake = GPUCAP_FAKE_NVML_PATH;

using test::expect_error_from;

TEST(Nvml, ReadsIdentityAndSignalsInSiUnits) {
  auto second = a100();
  second["uuid"] = "GPU-2222";
  second.erase("energy_mj");
  const FakeNvml fake(nlohmann::json::array({a100(), second}));
  const NvmlLibrary nvml(kFake);
  ASSERT_EQ(nvml.device_count(), 2u);
  NvmlDevice gpu(nvml, 0);
  EXPECT_FALSE(gpu.simulated());
  EXPECT_EQ(gpu.name(), "NVIDIA A100-SXM4-40GB");
  EXPECT_EQ(gpu.info().uuid, "GPU-1111");
  EXPECT_EQ(gpu.info().pci_bus_id, "00000000:07:00.0");
  EXPECT_DOUBLE_EQ(gpu.read(Signal::power_w), 61.25) << "mW -> W";
  EXPECT_DOUBLE_EQ(gpu.read(Signal::power_w), 250.5) << "the scripted next reading";
  const double energy_j = gpu.read(Signal::energy_j);
  EXPECT_GE(energy_j, 0.0) << "energy since the device was opened";
  EXPECT_LT(energy_j, 61.25 * 5.0) << "opened moments ago (the fake's counter runs at 61.25 W)";
  EXPECT_DOUBLE_EQ(gpu.read(Signal::utilization), 0.57) << "percent -> fraction";
  EXPECT_DOUBLE_EQ(gpu.read(Signal::sm_clock_mhz), 1410.0);
  EXPECT_DOUBLE_EQ(gpu.read(Signal::temperature_c), 41.0);
  EXPECT_DOUBLE_EQ(gpu.read(Signal::power_limit_min_w), 100.0);
  EXPECT_DOUBLE_EQ(gpu.range(Control::power_limit_w).max, 400.0);
  EXPECT_EQ(gpu.range(Control::sm_clock_lock_mhz).supported.size(), 5u);
  EXPECT_FALSE(gpu.has_control(Control::memory_clock_lock_mhz)) << "one memory clock: nothing to lock";
  NvmlDevice other(nvml, 1);
  EXPECT_FALSE(other.has_signal(Signal::energy_j)) << "no energy counter on that one";
  EXPECT_TRUE(gpu.has_signal(Signal::energy_j));
  expect_error_from([&] { NvmlDevice missing(nvml, 2); }, ErrorCode::usage, "GPU 2 does not exist (2 NVIDIA GPUs found)");
}

// A driver reload or GPU reset starts NVML's counter again from 0: the energy since the open goes
// on from where it was (the reset's counter counted what came after), never backwards and never
// the unsigned wrap of a negative difference.
TEST(Nvml, AnEnergyCounterResetNeitherWrapsNorGoesBackwards) {
  auto gpu_state = a100();
  // At the open, then 3 reads: +500 J, a reset to 200 J, +300 J.
  gpu_state["energy_mj"] = {1000000, 1500000, 200000, 500000};
  const FakeNvml fake(nlohmann::json::array({gpu_state}));
  const NvmlLibrary nvml(kFake);
  NvmlDevice gpu(nvml, 0);
  EXPECT_DOUBLE_EQ(gpu.read(Signal::energy_j), 500.0);
  EXPECT_DOUBLE_EQ(gpu.read(Signal::energy_j), 700.0) << "the 200 J the counter counted since its reset";
  EXPECT_DOUBLE_EQ(gpu.read(Signal::energy_j), 1000.0);
  EXPECT_DOUBLE_EQ(gpu.read(Signal::energy_j), 1000.0) << "the counter stands still";
}

TEST(Nvml, PowerIsTheInstantaneousReadingWhereTheDriverHasOne) {
  auto instant = a100();
  instant["power_instant_mw"] = 287125;
  const FakeNvml fake(nlohmann::json::array({instant, a100()}));
  const NvmlLibrary nvml(kFake);
  NvmlDevice with(nvml, 0);
  EXPECT_TRUE(with.info().instant_power);
  EXPECT_DOUBLE_EQ(with.read(Signal::power_w), 287.125) << "not the 1-s average (61.25 W)";
  NvmlDevice without(nvml, 1);
  EXPECT_FALSE(without.info().instant_power);
  EXPECT_DOUBLE_EQ(without.read(Signal::power_w), 61.25);
}

TEST(Nvml, AGpuThatCannotLockClocksGetsApplicationClocks) {
  auto p40 = a100();
  p40["name"] = "Tesla P40";
  p40["locked_clocks_supported"] = false;
  p40["memory_clocks_mhz"] = {3615, 405};
  p40["graphics_clocks_mhz"] = {1531, 1303, 1063, 544};
  const FakeNvml fake(nlohmann::json::array({p40}));
  const NvmlLibrary nvml(kFake);
  {
    NvmlDevice gpu(nvml, 0);
    gpu.write_control(Control::sm_clock_lock_mhz, 1063.0);
    EXPECT_EQ(fake.state()["devices"][0]["applications_clocks_mhz"], nlohmann::json({3615, 1063}))
        << "at the highest memory clock";
    gpu.write_control(Control::sm_clock_lock_mhz, std::nullopt);
    EXPECT_TRUE(fake.state()["devices"][0]["applications_clocks_mhz"].is_null());
    gpu.write_control(Control::sm_clock_lock_mhz, 1303.0);
  }
  // A fresh process (recovery after a crash) does not know the kind: resetting still works.
  NvmlDevice fresh(nvml, 0);
  fresh.write_control(Control::sm_clock_lock_mhz, std::nullopt);
  EXPECT_TRUE(fake.state()["devices"][0]["applications_clocks_mhz"].is_null());
}

TEST(Nvml, NoLibraryOrNoDriverIsAClearNoGpuError) {
  expect_error_from([] { NvmlLibrary nvml("/nonexistent/libnvidia-ml.so.1"); }, ErrorCode::no_gpu,
               "no NVIDIA driver: cannot load /nonexistent/libnvidia-ml.so.1");
  {
    const FakeNvml fake(nlohmann::json::array(), /*init_status=*/9);
    expect_error_from([] { NvmlLibrary nvml(kFake); }, ErrorCode::no_gpu, "nvmlInit_v2 failed: Driver Not Loaded");
  }
  // A library that loads but is not NVML.
  expect_error_from([] { NvmlLibrary nvml("libm.so.6"); }, ErrorCode::device, "entry point nvmlInit_v2 is missing");
}

TEST(Nvml, WritesLockAndResetClocksAndSetThePowerLimit) {
  const FakeNvml fake(nlohmann::json::array({a100()}));
  const NvmlLibrary nvml(kFake);
  NvmlDevice gpu(nvml, 0);
  gpu.write_control(Control::sm_clock_lock_mhz, 1200.0);
  EXPECT_EQ(fake.state()["devices"][0]["locked_sm_mhz"], nlohmann::json({1200, 1200}));
  EXPECT_EQ(gpu.read_control(Control::sm_clock_lock_mhz), 1200.0);
  gpu.write_control(Control::sm_clock_lock_mhz, std::nullopt);
  EXPECT_TRUE(fake.state()["devices"][0]["locked_sm_mhz"].is_null());
  gpu.write_control(Control::power_limit_w, 250.0);
  EXPECT_EQ(fake.state()["devices"][0]["power_limit_mw"], 250000);
  EXPECT_DOUBLE_EQ(*gpu.read_control(Control::power_limit_w), 250.0);
  gpu.write_control(Control::power_limit_w, std::nullopt);
  EXPECT_EQ(fake.state()["devices"][0]["power_limit_mw"], 400000) << "nullopt: the board default";
}

TEST(Nvml, NvmlErrorsBecomeTypedErrorsWithNvmlsMessage) {
  auto refusing = a100();
  refusing["deny_writes"] = true;
  refusing["fail"] = {{"nvmlDeviceGetPowerUsage", 999}};
  const FakeNvml fake(nlohmann::json::array({refusing}));
  const NvmlLibrary nvml(kFake);
  NvmlDevice gpu(nvml, 0);
  expect_error_from([&] { gpu.write_control(Control::sm_clock_lock_mhz, 1200.0); }, ErrorCode::unsupported,
               "nvmlDeviceSetGpuLockedClocks: Insufficient Permissions");
  expect_error_from([&] { (void)gpu.read(Signal::power_w); }, ErrorCode::device, "nvmlDeviceGetPowerUsage: Unknown Error");
  EXPECT_TRUE(fake.state()["writes"].empty());
}

TEST(Nvml, AControlSessionChecksBeforeWritingAndRestoresWhatItChanged) {
  const FakeNvml fake(nlohmann::json::array({a100()}));
  const NvmlLibrary nvml(kFake);
  NvmlDevice gpu(nvml, 0);
  if (!gpu.can_write(Control::sm_clock_lock_mhz)) GTEST_SKIP() << "the process is not root: NVML writes need root";
  {
    ControlSession session(gpu);
    Knobs bad = single_tenant_knobs(8, 2000.0);  // above the highest supported clock
    bad.power_limit_w = 250.0;
    EXPECT_THROW(session.apply(bad), Error);
    EXPECT_TRUE(fake.state()["writes"].empty()) << "nothing half-applied";
    Knobs good = single_tenant_knobs(8, 1005.0);
    good.power_limit_w = 250.0;
    session.apply(good);
    EXPECT_EQ(fake.state()["devices"][0]["locked_sm_mhz"], nlohmann::json({1005, 1005}));
    session.apply(good);
    EXPECT_EQ(fake.state()["writes"].size(), 2u) << "the same values again are not written again";
  }
  const auto after = fake.state()["devices"][0];
  EXPECT_TRUE(after["locked_sm_mhz"].is_null()) << "restored: the lock is reset";
  EXPECT_EQ(after["power_limit_mw"], 400000) << "restored: the limit found at the start";
}

}  // namespace
}  // namespace gpucap::device
