#include "gpucap/sim/sim_device.hpp"

#include <gtest/gtest.h>

#include "gpucap/core/error.hpp"
#include "gpucap/device/control_session.hpp"
#include "gpucap/sim/catalog.hpp"
#include "support/paths.hpp"

namespace gpucap::device {
namespace {

class SimDeviceTest : public ::testing::Test {
 protected:
  sim::Catalog catalog = sim::Catalog::load(test::data_dir());
  sim::GpuTwin twin{catalog.gpu("p40"), catalog.model("resnet_v2_50"), sim::Precision::fp32, 1};
};

TEST_F(SimDeviceTest, SignalsHaveNamesUnitsAndValues) {
  SimDevice device(twin);
  EXPECT_EQ(describe(Signal::power_w).name, "GPU_POWER");
  EXPECT_EQ(describe(Signal::power_w).unit, "W");
  EXPECT_EQ(describe(Control::power_limit_w).name, "GPU_POWER_LIMIT_CONTROL");
  EXPECT_DOUBLE_EQ(device.read(Signal::power_limit_max_w), 250.0);
  EXPECT_DOUBLE_EQ(device.read(Signal::power_limit_min_w), 125.0);
  EXPECT_DOUBLE_EQ(device.read(Signal::sm_clock_mhz), 1531.0);
  (void)twin.run_batch(16);
  EXPECT_GT(device.read(Signal::energy_j), 0.0);
  EXPECT_GT(device.read(Signal::utilization), 0.5);
  EXPECT_NE(device.name().find("simulated"), std::string::npos);
}

TEST_F(SimDeviceTest, ControlsGoThroughAndComeBack) {
  SimDevice device(twin);
  {
    ControlSession session(device);
    Knobs knobs;
    knobs.sm_clock_mhz = 1063.0;
    knobs.power_limit_w = 200.0;
    session.apply(knobs);
    EXPECT_DOUBLE_EQ(*device.read_control(Control::sm_clock_lock_mhz), 1063.0);
    EXPECT_DOUBLE_EQ(twin.power_limit_w(), 200.0);
    EXPECT_DOUBLE_EQ(twin.run_batch(4).sm_clock_mhz, 1063.0);
  }
  EXPECT_FALSE(device.read_control(Control::sm_clock_lock_mhz).has_value());
  EXPECT_FALSE(device.read_control(Control::power_limit_w).has_value());
  EXPECT_EQ(device.range(Control::sm_clock_lock_mhz).supported.size(), 79u);
}

TEST_F(SimDeviceTest, UnprivilegedDeviceRefusesWrites) {
  SimDevice device(twin, /*writes_permitted=*/false);
  EXPECT_FALSE(device.can_write(Control::sm_clock_lock_mhz));
  ControlSession session(device);
  EXPECT_THROW(session.write(Control::sm_clock_lock_mhz, 1063.0), Error);
  EXPECT_THROW(device.write_control(Control::power_limit_w, 200.0), Error);
  EXPECT_FALSE(twin.sm_clock_lock_mhz().has_value());
}

}  // namespace
}  // namespace gpucap::device
