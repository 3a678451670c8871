#include "gpucap/core/cap_timeline.hpp"

#include <gtest/gtest.h>

namespace gpucap {
namespace {

TEST(CapTimeline, TheScheduleUntilTheFirstChangeThenEachChangeFromItsTime) {
  CapTimeline timeline(CapSchedule::parse("0:200,10:150", nullptr));
  EXPECT_EQ(timeline.cap_at(5.0), 200.0);
  timeline.set(3.0, 180.0);
  timeline.set(6.0, 120.0);
  EXPECT_EQ(timeline.cap_at(2.9), 200.0) << "before any change: the schedule";
  EXPECT_EQ(timeline.cap_at(3.0), 180.0) << "a change holds from its time";
  EXPECT_EQ(timeline.cap_at(5.9), 180.0) << "a past time keeps the cap it had";
  EXPECT_EQ(timeline.cap_at(20.0), 120.0) << "after the changes, the schedule's later steps no longer count";
}

TEST(CapTimeline, AChangeDatedBeforeTheLastNeverRewritesThePast) {
  CapTimeline timeline(CapSchedule::constant(300.0));
  timeline.set(5.0, 250.0);
  timeline.set(4.0, 100.0);  // a late clock: counted from 5 s
  EXPECT_EQ(timeline.cap_at(4.5), 300.0);
  EXPECT_EQ(timeline.cap_at(5.0), 100.0);
}

}  // namespace
}  // namespace gpucap
