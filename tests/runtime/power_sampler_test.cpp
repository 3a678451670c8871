#include "gpucap/runtime/power_sampler.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "gpucap/core/error.hpp"
#include "gpucap/runtime/nvml_platform.hpp"

namespace gpucap::runtime {
namespace {

using namespace std::chrono_literals;

TEST(PowerSampler, SamplesAtItsRateInTimeOrderAndHandsThemOutOnce) {
  const SteadyClock clock;
  std::atomic<int> reads{0};
  PowerSampler sampler([&reads] { return 100.0 + (reads++ % 7); }, [&clock] { return clock.now_s(); }, 200.0);
  std::this_thread::sleep_for(300ms);
  std::vector<PowerSample> first;
  const double cut_s = clock.now_s() - 0.1;
  sampler.take_until(cut_s, [&first](const PowerSample& s) { first.push_back(s); });
  ASSERT_FALSE(first.empty());
  EXPECT_LE(first.back().time_s, cut_s) << "nothing after the end asked for";
  std::vector<PowerSample> rest;
  sampler.take_until(clock.now_s(), [&rest](const PowerSample& s) { rest.push_back(s); });
  ASSERT_FALSE(rest.empty());
  EXPECT_GT(rest.front().time_s, first.back().time_s) << "each sample once";
  const auto total = first.size() + rest.size();
  EXPECT_GT(total, 10u) << "about 60 at 200 Hz over 0.3 s; a loaded CI machine may lag";
  EXPECT_LT(total, 80u);
  for (std::size_t i = 1; i < first.size(); ++i) EXPECT_GT(first[i].time_s, first[i - 1].time_s);
  EXPECT_EQ(sampler.taken(), total);
  EXPECT_EQ(sampler.dropped(), 0u);
}

TEST(PowerSampler, AFullBufferDropsTheOldestAndCountsThem) {
  const SteadyClock clock;
  PowerSampler sampler([] { return 50.0; }, [&clock] { return clock.now_s(); }, 1000.0, /*buffer_s=*/1.0);
  // 2.5 s at 1 kHz into a 1-s buffer: even a sampler slowed to half its rate by a loaded machine
  // overflows it.
  std::this_thread::sleep_for(2500ms);
  std::size_t kept = 0;
  sampler.take_until(clock.now_s(), [&kept](const PowerSample&) { ++kept; });
  EXPECT_LE(kept, 1000u) << "the buffer holds one second";
  EXPECT_GT(sampler.dropped(), 0u);
}

// A driver that answers a reading with an error now and then: that sample is skipped, the
// sampling goes on.
TEST(PowerSampler, AReadingThatFailsNowAndThenIsSkipped) {
  const SteadyClock clock;
  std::atomic<int> reads{0};
  PowerSampler sampler(
      [&reads]() -> double {
        if (++reads % 3 == 0) throw Error(ErrorCode::device, "nvmlDeviceGetPowerUsage: Unknown Error");
        return 80.0;
      },
      [&clock] { return clock.now_s(); }, 500.0);
  std::this_thread::sleep_for(100ms);
  std::size_t kept = 0;
  EXPECT_NO_THROW(sampler.take_until(clock.now_s(), [&kept](const PowerSample& s) {
    EXPECT_EQ(s.power_w, 80.0);
    ++kept;
  }));
  EXPECT_GT(kept, 10U);
  EXPECT_GT(sampler.failed_reads(), 5U);
}

TEST(PowerSampler, AFailedReadStopsSamplingAndSurfacesOnCollect) {
  const SteadyClock clock;
  std::atomic<int> reads{0};
  PowerSampler sampler(
      [&reads]() -> double {
        if (++reads > 3) throw Error(ErrorCode::device, "nvmlDeviceGetPowerUsage: GPU is lost");
        return 80.0;
      },
      [&clock] { return clock.now_s(); }, 500.0);
  std::this_thread::sleep_for(100ms);
  try {
    sampler.take_until(clock.now_s(), [](const PowerSample&) {});
    FAIL() << "the sampler's error must reach the reader";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::device);
    EXPECT_NE(std::string(e.what()).find("GPU is lost"), std::string::npos);
  }
  EXPECT_THROW(PowerSampler([] { return 1.0; }, [] { return 0.0; }, 0.0), Error) << "0 Hz";
}

}  // namespace
}  // namespace gpucap::runtime
