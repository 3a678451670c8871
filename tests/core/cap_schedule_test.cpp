#include "gpucap/core/cap_schedule.hpp"

#include <gtest/gtest.h>

#include "gpucap/core/error.hpp"

namespace gpucap {
namespace {

TEST(CapSchedule, ConstantHoldsForever) {
  const auto schedule = CapSchedule::constant(131);
  EXPECT_TRUE(schedule.is_constant());
  EXPECT_DOUBLE_EQ(schedule.cap_at(0.0), 131);
  EXPECT_DOUBLE_EQ(schedule.cap_at(1e6), 131);
  EXPECT_EQ(schedule.to_string(), "131 W");
}

TEST(CapSchedule, StepsChangeAtTheirTimes) {
  // BatchDVFS sensitivity run for InceptionV4: 150 → 125 → 100 W every 85 s.
  const auto schedule = CapSchedule::parse("0:150,85:125,170:100");
  EXPECT_DOUBLE_EQ(schedule.cap_at(0.0), 150);
  EXPECT_DOUBLE_EQ(schedule.cap_at(84.999), 150);
  EXPECT_DOUBLE_EQ(schedule.cap_at(85.0), 125);
  EXPECT_DOUBLE_EQ(schedule.cap_at(169.0), 125);
  EXPECT_DOUBLE_EQ(schedule.cap_at(170.0), 100);
  EXPECT_DOUBLE_EQ(schedule.cap_at(1000.0), 100);
  EXPECT_DOUBLE_EQ(schedule.min_cap_w(), 100);
  EXPECT_DOUBLE_EQ(schedule.max_cap_w(), 150);
  EXPECT_EQ(schedule.to_string(), "0:150,85:125,170:100");
}

TEST(CapSchedule, LateFirstStepUsesInitialCap) {
  const double initial = 200;
  const auto schedule = CapSchedule::parse(" 60:120 , 120:80 ", &initial);
  EXPECT_DOUBLE_EQ(schedule.cap_at(10), 200);
  EXPECT_DOUBLE_EQ(schedule.cap_at(60), 120);
  EXPECT_DOUBLE_EQ(schedule.cap_at(500), 80);
}

void expect_usage_error(const std::string& text, const std::string& fragment) {
  try {
    (void)CapSchedule::parse(text);
    FAIL() << "no error for '" << text << "'";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::usage);
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TEST(CapSchedule, MalformedSchedulesAreRejected) {
  expect_usage_error("", "empty");
  expect_usage_error("0:150,abc", "TIME_S:CAP_W");
  expect_usage_error("0:150,85", "TIME_S:CAP_W");
  expect_usage_error("0:150,x:12", "numbers");
  expect_usage_error("0:150,85:125,85:100", "times must increase");
  expect_usage_error("0:150,85:125,40:100", "times must increase");
  expect_usage_error("0:-5", "positive");
  expect_usage_error("0:0", "positive");
  expect_usage_error("-1:100", "time");
  expect_usage_error("10:100", "--power-cap");
  expect_usage_error("0:nan", "numbers");
}

TEST(CapSchedule, RangeCheckNamesTheCap) {
  const auto schedule = CapSchedule::parse("0:150,85:260");
  EXPECT_NO_THROW(schedule.check_range(10, 300, "range"));
  try {
    schedule.check_range(9.8, 250, "P40 range");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::usage);
    EXPECT_NE(std::string(e.what()).find("260"), std::string::npos);
  }
}

}  // namespace
}  // namespace gpucap
