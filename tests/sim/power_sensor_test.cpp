#include "gpucap/sim/power_sensor.hpp"

#include <gtest/gtest.h>

#include "gpucap/core/error.hpp"

namespace gpucap::sim {
namespace {

TEST(PowerSensor, InstantSensorFollowsThePowerOfEachPeriod) {
  PowerSensor sensor(SensorParams{0.1, 0.1, 0.0}, 50.0, 1);
  sensor.add_segment(0.0, 0.25, 100.0);
  sensor.add_segment(0.25, 0.5, 200.0);
  const auto readings = sensor.take_readings();
  ASSERT_EQ(readings.size(), 5u);
  EXPECT_DOUBLE_EQ(readings[0].time_s, 0.1);
  EXPECT_NEAR(readings[0].power_w, 100.0, 1e-9);
  EXPECT_NEAR(readings[2].power_w, 150.0, 1e-9) << "period [0.2, 0.3) is half 100 W, half 200 W";
  EXPECT_NEAR(readings[4].power_w, 200.0, 1e-9);
  EXPECT_TRUE(sensor.take_readings().empty());
  EXPECT_NEAR(sensor.latest().power_w, 200.0, 1e-9);
}

TEST(PowerSensor, AveragingSensorSmoothsSpikes) {
  // 1-s averages published every 0.1 s, as NVML reports on GPUs after GA100.
  PowerSensor sensor(SensorParams{0.1, 1.0, 0.0}, 60.0, 1);
  sensor.add_segment(0.0, 0.2, 300.0);
  sensor.add_segment(0.2, 2.0, 60.0);
  const auto readings = sensor.take_readings();
  ASSERT_EQ(readings.size(), 20u);
  EXPECT_NEAR(readings[1].power_w, 60.0 + 0.2 * 240.0, 1e-9) << "at 0.2 s: 0.2 s of 300 W in the last second";
  EXPECT_NEAR(readings[9].power_w, 108.0, 1e-9);
  EXPECT_NEAR(readings[19].power_w, 60.0, 1e-9) << "the spike has left the window";
}

TEST(PowerSensor, AHoldShowsTheHighestAverageOfTheLastHoldSeconds) {
  // Instant readings every 0.1 s held for 0.2 s: a 0.1-s spike shows in three readings, not one.
  SensorParams params{0.1, 0.1, 0.0};
  params.hold_s = 0.2;
  PowerSensor sensor(params, 50.0, 1);
  sensor.add_segment(0.0, 0.2, 50.0);
  sensor.add_segment(0.2, 0.3, 200.0);
  sensor.add_segment(0.3, 1.0, 50.0);
  const auto readings = sensor.take_readings();
  ASSERT_EQ(readings.size(), 10u);
  EXPECT_NEAR(readings[1].power_w, 50.0, 1e-9) << "[0.1, 0.2): before the spike";
  for (const std::size_t i : {2u, 3u, 4u}) EXPECT_NEAR(readings[i].power_w, 200.0, 1e-9) << "reading " << i;
  EXPECT_NEAR(readings[5].power_w, 50.0, 1e-9) << "0.2 s after the spike it has left the hold";

  PowerSensor without(SensorParams{0.1, 0.1, 0.0}, 50.0, 1);
  without.add_segment(0.0, 0.2, 50.0);
  without.add_segment(0.2, 0.3, 200.0);
  without.add_segment(0.3, 1.0, 50.0);
  const auto plain = without.take_readings();
  EXPECT_NEAR(plain[3].power_w, 50.0, 1e-9) << "without a hold only the spike's own reading shows it";
}

TEST(PowerSensor, NoiseIsSeeded) {
  const auto run = [](std::uint64_t seed) {
    PowerSensor sensor(SensorParams{0.01, 0.01, 0.02}, 80.0, seed);
    sensor.add_segment(0.0, 1.0, 100.0);
    return sensor.take_readings();
  };
  const auto a = run(7);
  const auto b = run(7);
  const auto c = run(8);
  ASSERT_EQ(a.size(), 100u);
  double spread = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_DOUBLE_EQ(a[i].power_w, b[i].power_w);
    spread = std::max(spread, std::abs(a[i].power_w - c[i].power_w));
  }
  EXPECT_GT(spread, 0.1) << "another seed gives other noise";
}

TEST(PowerSensor, SegmentsMustBeContiguous) {
  PowerSensor sensor(SensorParams{0.1, 0.1, 0.0}, 50.0, 1);
  sensor.add_segment(0.0, 0.05, 100.0);
  EXPECT_THROW(sensor.add_segment(0.06, 0.1, 100.0), Error);
}

}  // namespace
}  // namespace gpucap::sim
