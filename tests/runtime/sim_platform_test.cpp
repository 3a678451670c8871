#include "gpucap/runtime/sim_platform.hpp"

#include <gtest/gtest.h>

#include "gpucap/core/error.hpp"
#include "gpucap/sim/catalog.hpp"
#include "support/paths.hpp"

namespace gpucap::runtime {
namespace {

class SimPlatformTest : public ::testing::Test {
 protected:
  sim::Catalog catalog = sim::Catalog::load(test::data_dir());
  SimPlatform make(double sample_hz) {
    SimOptions options;
    options.sample_hz = sample_hz;
    return SimPlatform(catalog.gpu("p40"), catalog.model("resnet_v2_50"), sim::Precision::fp32, options);
  }
};

std::vector<PowerSample> collect(PowerMeter& meter, double end_s) {
  std::vector<PowerSample> samples;
  meter.collect(end_s, [&samples](const PowerSample& s) { samples.push_back(s); });
  return samples;
}

TEST_F(SimPlatformTest, MeterStreamsSamplesAtItsRateWithoutRepeats) {
  auto platform = make(50.0);
  while (platform.clock().now_s() < 1.0) (void)platform.engine().run_batch(8);
  const double t1 = platform.clock().now_s();
  const auto first = collect(platform.meter(), t1);
  ASSERT_FALSE(first.empty());
  EXPECT_NEAR(first.front().time_s, 0.02, 1e-12);
  EXPECT_NEAR(static_cast<double>(first.size()), t1 * 50.0, 1.0);
  for (std::size_t i = 1; i < first.size(); ++i) EXPECT_NEAR(first[i].time_s - first[i - 1].time_s, 0.02, 1e-9);
  EXPECT_LE(first.back().time_s, t1);
  while (platform.clock().now_s() < 2.0) (void)platform.engine().run_batch(8);
  const auto second = collect(platform.meter(), platform.clock().now_s());
  ASSERT_FALSE(second.empty());
  EXPECT_GT(second.front().time_s, t1);
  EXPECT_NEAR(second.front().time_s - first.back().time_s, 0.02, 1e-9) << "the stream continues where it stopped";
  EXPECT_TRUE(collect(platform.meter(), platform.clock().now_s()).empty()) << "nothing new";
}

TEST_F(SimPlatformTest, SamplesReflectTheWorkload) {
  auto platform = make(100.0);
  while (platform.clock().now_s() < 2.0) (void)platform.engine().run_batch(64);
  const auto busy = collect(platform.meter(), platform.clock().now_s());
  double mean_w = 0.0;
  for (const auto& s : busy) mean_w += s.power_w / static_cast<double>(busy.size());
  EXPECT_GT(mean_w, 100.0) << "ResNet-50 at batch 64 and 1531 MHz draws well above idle";
  EXPECT_NEAR(platform.device().read(device::Signal::power_w), mean_w, 0.1 * mean_w);
}

TEST_F(SimPlatformTest, InvalidRateIsAUsageError) {
  EXPECT_THROW(make(0.0), Error);
  EXPECT_THROW(make(-5.0), Error);
  EXPECT_THROW(make(0.5), Error);
  EXPECT_THROW(make(20000.0), Error);
}

TEST_F(SimPlatformTest, DescribesItselfAsSimulated) {
  auto platform = make(100.0);
  EXPECT_TRUE(platform.simulated());
  EXPECT_NE(platform.description().find("simulated Tesla P40"), std::string::npos);
  EXPECT_EQ(platform.controller_limits().dvfs_levels_mhz.size(), 10u);
}

}  // namespace
}  // namespace gpucap::runtime
