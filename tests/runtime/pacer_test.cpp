// Pacing the twin to the wall clock, with a fake wall clock and a sleep that only moves it.

#include "gpucap/runtime/pacer.hpp"

#include <gtest/gtest.h>

#include <vector>

#include "gpucap/core/error.hpp"

namespace gpucap::runtime {
namespace {

struct FakeWall {
  double now_s = 100.0;
  std::vector<double> sleeps_s;
  Pacer pacer(double factor) {
    return Pacer(factor, [this] { return now_s; }, [this](double s) {
      sleeps_s.push_back(s);
      now_s += s;
    });
  }
};

TEST(Pacer, SleepsUntilTheWallClockCatchesUpWithVirtualTime) {
  FakeWall wall;
  auto pacer = wall.pacer(2.0);  // two virtual seconds per wall second
  pacer.wait_until(10.0);        // the origin: no sleep
  EXPECT_TRUE(wall.sleeps_s.empty());
  pacer.wait_until(14.0);        // 4 virtual s = 2 wall s
  ASSERT_EQ(wall.sleeps_s.size(), 1u);
  EXPECT_DOUBLE_EQ(wall.sleeps_s[0], 2.0);
  wall.now_s += 5.0;             // the host fell behind: no sleep until virtual time is ahead again
  pacer.wait_until(18.0);
  EXPECT_EQ(wall.sleeps_s.size(), 1u);
  pacer.wait_until(30.0);        // due at 100 + 10 = 110 s; now 107
  EXPECT_DOUBLE_EQ(wall.sleeps_s.back(), 3.0);
}

TEST(Pacer, ParsesRealtimeAndFactorsAndRefusesTheRest) {
  EXPECT_DOUBLE_EQ(parse_pace("realtime"), 1.0);
  EXPECT_DOUBLE_EQ(parse_pace("4"), 4.0);
  EXPECT_DOUBLE_EQ(parse_pace("0.5"), 0.5);
  for (const char* bad : {"0", "-1", "fast", "", "1e9", "nan"}) EXPECT_THROW((void)parse_pace(bad), Error) << bad;
}

}  // namespace
}  // namespace gpucap::runtime
