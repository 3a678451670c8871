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

TEST_F(SimPlatformTest, SamplesTakenPowerSettleAfterAChangeShowOnlyTheNewKnobs) {
  // Big batches at a high clock (above 95 W), then batch 2 at the lowest clock (below 70 W): no
  // sample from power_settle_s() after the change on may still show the old power. The change
  // falls at many phases of the sensor's update period (one warm-up batch size each); a sample
  // at the instant a reading is published once read the reading before it, through rounding.
  int changes_seen = 0;
  for (int warm_batch = 100; warm_batch < 140; ++warm_batch) {
    auto platform = make(100.0);
    auto& device = platform.device();
    device.write_control(device::Control::sm_clock_lock_mhz, 1531.0);
    for (int i = 0; i < 3; ++i) (void)platform.engine().run_batch(warm_batch);
    (void)collect(platform.meter(), platform.clock().now_s());
    const double change_s = platform.clock().now_s();
    device.write_control(device::Control::sm_clock_lock_mhz, 544.0);
    while (platform.clock().now_s() < change_s + 0.5) (void)platform.engine().run_batch(2);
    const auto after = collect(platform.meter(), platform.clock().now_s());
    ASSERT_FALSE(after.empty());
    if (after.front().power_w > 95.0) ++changes_seen;
    for (const auto& sample : after) {
      if (sample.time_s >= change_s + platform.power_settle_s()) {
        EXPECT_LT(sample.power_w, 75.0) << "at " << sample.time_s << " s, change at " << change_s << " s";
      }
    }
  }
  EXPECT_GT(changes_seen, 20) << "the first sample after a change mostly still shows the big batches";
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

TEST_F(SimPlatformTest, ASpawnedNvidiaSmiSamplerReadsWhenEachCyclesFirstProcessExits) {
  SimOptions options;
  options.spawned_nvidia_smi = true;
  const auto& gpu = catalog.gpu("p40");
  SimPlatform platform(gpu, catalog.model("resnet_v2_50"), sim::Precision::fp32, options);
  const sim::SpawnedSampler sampler{gpu.host.nvidia_smi_process_s, gpu.host.nvidia_smi_stall_s};
  EXPECT_NEAR(platform.meter().sample_hz(), 1.0 / sampler.period_s(), 1e-12);
  while (platform.clock().now_s() < 3.0) (void)platform.engine().run_batch(4);
  const auto samples = collect(platform.meter(), platform.clock().now_s());
  ASSERT_GE(samples.size(), 5u);
  for (std::size_t j = 0; j < samples.size(); ++j) {
    EXPECT_NEAR(samples[j].time_s, sampler.reading_time_s(static_cast<long long>(j)), 1e-9);
  }
  EXPECT_NE(platform.description().find("spawned nvidia-smi"), std::string::npos);
}

TEST_F(SimPlatformTest, AGovernorClockOptionHoldsTheUnlockedTwinThere) {
  SimOptions options;
  options.governor_sm_clock_mhz = 1303.0;
  SimPlatform platform(catalog.gpu("p40"), catalog.model("resnet_v2_50"), sim::Precision::fp32, options);
  (void)platform.engine().run_batch(8);
  EXPECT_DOUBLE_EQ(platform.device().read(device::Signal::sm_clock_mhz), 1303);
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
