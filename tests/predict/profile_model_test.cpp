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

// Where a profile was measured, from what `gpucap tune --json` writes on the twin and on a real GPU.
TEST_F(ProfileFile, ReadsWhereTheProfileWasMeasured) {
  const auto twin = load_profile_origin(write(R"({"simulated": true, "gpu": "a100", "model": "mobilenet_v1_0.25",
    "trials": []})"));
  EXPECT_EQ(twin.simulated, true);
  EXPECT_EQ(twin.gpu, "a100");
  EXPECT_EQ(twin.model, "mobilenet_v1_0.25") << "a twin's model is an id, dots and all";
  EXPECT_FALSE(twin.precision.has_value());

  const auto real = load_profile_origin(write(R"({"simulated": false, "gpu": "NVIDIA H200",
    "model": "models/resnet50.pt", "setup": {"gpu": "NVIDIA H200", "model_file": "/abs/models/resnet50.pt",
    "precision": "fp16", "input_size": 224, "engine_device": "cuda:1"}, "trials": []})"));
  EXPECT_EQ(real.simulated, false);
  EXPECT_EQ(real.gpu, "NVIDIA H200");
  EXPECT_EQ(real.model, "resnet50") << "a real GPU's model is its file's name";
  EXPECT_EQ(real.precision, "fp16");
  EXPECT_EQ(real.input_size, 224);
  EXPECT_EQ(real.engine_device, "cuda:1");

  // tune --out's trial file: the setup alone.
  const auto trial_file = load_profile_origin(write(R"({"setup": {"gpu": "NVIDIA H200",
    "model_file": "/abs/m.pt", "precision": "fp32", "input_size": 299, "engine_device": "cuda"}, "trials": []})"));
  EXPECT_EQ(trial_file.gpu, "NVIDIA H200");
  EXPECT_EQ(trial_file.model, "m");
  EXPECT_EQ(trial_file.input_size, 299);
  EXPECT_EQ(trial_file.simulated, false) << "only a real GPU's measurements hold a setup";

  // A profile written by hand says nothing, and nothing is compared; "model" without "simulated"
  // could be an id or a file, so it is not read.
  const auto bare = load_profile_origin(write(R"({"model": "x.pt", "trials": []})"));
  EXPECT_FALSE(bare.simulated || bare.gpu || bare.model || bare.precision || bare.input_size || bare.engine_device);

  const auto expect_invalid = [&](const std::string& text, const std::string& fragment) {
    try {
      (void)load_profile_origin(write(text));
      ADD_FAILURE() << "accepted: " << text;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::invalid_data);
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    }
  };
  expect_invalid(R"({"simulated": "yes", "trials": []})", "simulated");
  expect_invalid(R"({"gpu": 7, "trials": []})", "gpu");
  expect_invalid(R"({"setup": {"input_size": 0}, "trials": []})", "input_size");
  expect_invalid(R"({"setup": {"precision": 16}, "trials": []})", "precision");
}

TEST(ProfileOrigin, TheFirstDifferenceIsNamed) {
  ProfileOrigin measured;
  measured.simulated = false;
  measured.gpu = "NVIDIA H200";
  measured.model = "resnet50";
  measured.precision = "fp16";
  measured.input_size = 224;
  measured.engine_device = "cuda";
  EXPECT_FALSE(profile_mismatch(measured, measured).has_value());
  EXPECT_FALSE(profile_mismatch(measured, ProfileOrigin{}).has_value()) << "nothing said here, nothing compared";
  EXPECT_FALSE(profile_mismatch(ProfileOrigin{}, measured).has_value()) << "nothing said in the file, nothing compared";

  const auto with = [&measured](auto field, auto value) {
    auto here = measured;
    here.*field = value;
    return profile_mismatch(measured, here).value_or("(none)");
  };
  EXPECT_EQ(with(&ProfileOrigin::simulated, true), "it was measured on a real GPU, and this runs on the twin");
  EXPECT_EQ(with(&ProfileOrigin::gpu, std::string("NVIDIA A100-SXM4-40GB")),
            "it was measured on NVIDIA H200, and this GPU is NVIDIA A100-SXM4-40GB");
  EXPECT_EQ(with(&ProfileOrigin::model, std::string("vgg19")), "it was measured with model resnet50, and this runs vgg19");
  EXPECT_EQ(with(&ProfileOrigin::precision, std::string("fp32")), "it was measured with precision fp16, and this runs fp32");
  EXPECT_EQ(with(&ProfileOrigin::input_size, 299LL), "it was measured with input size 224, and this runs 299");
  EXPECT_EQ(with(&ProfileOrigin::engine_device, std::string("cpu")),
            "it was measured with the engine on cuda, and this runs it on cpu");
  EXPECT_EQ(with(&ProfileOrigin::engine_device, std::string("cuda:1")), "(none)") << "the same engine on another GPU";
}

}  // namespace
}  // namespace gpucap::predict
