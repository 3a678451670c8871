#include "gpucap/predict/profile_model.hpp"

#include <gtest/gtest.h>

#include <cmath>

#include "gpucap/core/error.hpp"
#include "support/paths.hpp"

namespace gpucap::predict {
namespace {

TEST(ProfileModel, ExactAtProfiledPointsAndLinearInLogBatchBetween) {
  const ProfileModel model({{1, 500, std::nullopt, 100, 50}, {4, 500, std::nullopt, 300, 90},
                            {2, 1000, 5001.0, 400, 120}});
  ASSERT_EQ(model.columns().size(), 2u);
  EXPECT_FALSE(model.columns()[0].memory_clock_mhz.has_value()) << "the driver's default memory clock sorts first";
  EXPECT_TRUE(model.has_memory_clocks());
  const auto& column = model.columns()[0];
  EXPECT_DOUBLE_EQ(model.predict(column, 4)->max_power_w, 90);
  // Batch 2 lies half-way between 1 and 4 on a log axis.
  EXPECT_NEAR(model.predict(column, 2)->throughput_img_s, 200, 1e-9);
  EXPECT_NEAR(model.predict(column, 2)->max_power_w, 70, 1e-9);
  EXPECT_NEAR(model.predict(column, 3)->max_power_w, 50 + 40 * std::log(3.0) / std::log(4.0), 1e-9);
  EXPECT_FALSE(model.predict(column, 5).has_value()) << "no extrapolation";
  EXPECT_FALSE(model.predict(model.columns()[1], 1).has_value());
}

TEST(ProfileModel, RejectsBadProfiles) {
  EXPECT_THROW(ProfileModel({}), Error);
  EXPECT_THROW(ProfileModel({{0, 500, std::nullopt, 1, 1}}), Error);
  EXPECT_THROW(ProfileModel({{1, -5, std::nullopt, 1, 1}}), Error);
  EXPECT_THROW(ProfileModel({{1, 500, std::nullopt, NAN, 1}}), Error);
  EXPECT_THROW(ProfileModel({{1, 500, std::nullopt, 1, 1}, {1, 500, std::nullopt, 2, 2}}), Error) << "twice";
}

class ProfileFile : public ::testing::Test {
 protected:
  // A new file in the test's own directory (removed with it) for each text.
  std::string write(const std::string& text) { return dir_.write("profile-" + std::to_string(++written_) + ".json", text); }

 private:
  gpucap::test::TempDir dir_;
  int written_ = 0;
};

TEST_F(ProfileFile, ReadsTheTrialsOfTuneJson) {
  const auto path = write(R"({"trials": [
    {"batch_size": 1, "sm_clock_mhz": 544, "memory_clock_mhz": null, "throughput_img_s": 90, "max_power_w": 60},
    {"batch_size": 8, "sm_clock_mhz": 544, "memory_clock_mhz": 3615, "throughput_img_s": 400, "max_power_w": 80}]})");
  const auto samples = load_profile_json(path);
  ASSERT_EQ(samples.size(), 2u);
  EXPECT_FALSE(samples[0].memory_clock_mhz.has_value());
  EXPECT_EQ(samples[1].memory_clock_mhz, 3615.0);
  EXPECT_EQ(samples[1].throughput_img_s, 400.0);
}

TEST_F(ProfileFile, NamesTheFileAndTheEntryOnBadInput) {
  const auto expect_error = [&](const std::string& text, const std::string& fragment) {
    const auto path = write(text);
    try {
      (void)load_profile_json(path);
      FAIL() << "accepted: " << text;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::invalid_data);
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    }
  };
  expect_error("[1, 2]", "JSON object");
  expect_error(R"({"trials": []})", "trials");
  expect_error(R"({"trials": [{"batch_size": 0, "sm_clock_mhz": 544, "throughput_img_s": 1, "max_power_w": 1}]})",
               "batch_size");
  expect_error(R"({"trials": [{"batch_size": 2, "throughput_img_s": 1, "max_power_w": 1}]})", "sm_clock_mhz");
  expect_error(R"({"trials": [{"batch_size": 2, "sm_clock_mhz": 544, "throughput_img_s": -1, "max_power_w": 1}]})",
               "throughput_img_s");
  EXPECT_THROW((void)load_profile_json("/nonexistent/profile.json"), Error);
}

}  // namespace
}  // namespace gpucap::predict
