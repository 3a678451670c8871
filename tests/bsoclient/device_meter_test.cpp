#include "gpucap/bsoclient/device_meter.hpp"

#include <gtest/gtest.h>

#include "gpucap/core/error.hpp"
#include "gpucap/device/sim_device.hpp"
#include "gpucap/sim/catalog.hpp"
#include "support/fake_gpu.hpp"
#include "support/paths.hpp"

namespace gpucap::bsoclient {
namespace {

using test::FakeClock;
using test::FakeGpu;

TEST(DeviceMeter, AWindowIsTheCountersDifferenceOverAllGpus) {
  FakeGpu a;
  FakeGpu b;
  FakeClock clock;
  DeviceMeter meter({&a, &b}, clock.function());
  a.energy_j = 1000.0;
  clock.now_s = 5.0;
  meter.begin_window();
  a.energy_j += 300.0;
  b.energy_j += 200.0;
  clock.now_s = 7.5;
  const auto m = meter.end_window();
  EXPECT_DOUBLE_EQ(m.time_s, 2.5);
  EXPECT_DOUBLE_EQ(m.energy_j, 500.0);
  EXPECT_FALSE(meter.window_open());
  EXPECT_THROW((void)meter.end_window(), Error);
}

TEST(DeviceMeter, WithoutACounterPowerIsIntegratedBetweenSamples) {
  FakeGpu gpu("Old GPU", /*energy_counter=*/false);
  FakeClock clock;
  DeviceMeter meter({&gpu}, clock.function());
  gpu.power_w = 100.0;
  meter.begin_window();
  clock.now_s = 1.0;
  gpu.power_w = 200.0;
  meter.sample();  // trapezoid: 150 J
  clock.now_s = 3.0;
  const auto m = meter.end_window();  // 2 s at 200 W: 400 J
  EXPECT_DOUBLE_EQ(m.energy_j, 550.0);
  EXPECT_DOUBLE_EQ(m.time_s, 3.0);
}

TEST(DeviceMeter, GpuConfigIsZeusesAndRefusesMixedModels) {
  FakeGpu a("A100", true, 400.9);
  FakeGpu b("A100", true, 400.9);
  const auto config = gpu_config_of({&a, &b});
  EXPECT_DOUBLE_EQ(config.max_power_w, 800.0);
  EXPECT_EQ(config.number_of_gpus, 2);
  EXPECT_EQ(config.gpu_model, "A100");
  FakeGpu v("V100");
  EXPECT_THROW((void)gpu_config_of({&a, &v}), Error);
  EXPECT_THROW((void)gpu_config_of({}), Error);
}

TEST(DeviceMeter, OnTheTwinItReadsTheTwinsMeterAndVirtualClock) {
  const auto catalog = sim::Catalog::load(test::data_dir());
  sim::GpuTwin twin{catalog.gpu("p40"), catalog.model("resnet50"), sim::Precision::fp32, 1};
  device::SimDevice gpu(twin, false);
  DeviceMeter meter({&gpu}, [&twin] { return twin.now_s(); });
  EXPECT_TRUE(meter.simulated());
  const double energy_before_j = twin.energy_j();
  const double start_s = twin.now_s();
  meter.begin_window();
  for (int i = 0; i < 5; ++i) (void)twin.run_batch(32);
  const auto m = meter.end_window();
  EXPECT_DOUBLE_EQ(m.time_s, twin.now_s() - start_s);
  EXPECT_DOUBLE_EQ(m.energy_j, twin.energy_j() - energy_before_j);
  EXPECT_GT(m.energy_j, 0.0);
  EXPECT_DOUBLE_EQ(gpu_config_of({&gpu}).max_power_w, 250.0);
}

}  // namespace
}  // namespace gpucap::bsoclient
