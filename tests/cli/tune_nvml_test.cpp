// `gpucap tune --platform nvml` end to end without a GPU: the fake NVML at the library boundary and
// the LibTorch engine running a small exported model on the CPU (fixture export_torch_models).

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <thread>

#include "gpucap/core/files.hpp"
#include "support/child_process.hpp"
#include "support/cli_runner.hpp"
#include "support/fake_nvml_gpu.hpp"
#include "support/paths.hpp"

namespace gpucap {
namespace {

using test::expect_error;
using test::gpucap;
using test::with;

// Under a 150 W cap only the two lowest locked clocks are feasible on this fake.
const nlohmann::json kPowerByClock = {
    {"power_mw_at_locked_sm", {{"810", 110000}, {"1005", 140000}, {"1200", 160000}, {"1410", 200000}}}};

std::vector<std::string> real_tune(const std::string& algorithm, const std::string& measure_s = "0.4",
                                   const std::string& warmup_s = "0.1") {
  return {"tune", "--platform", "nvml", "--nvml-lib", GPUCAP_FAKE_NVML_PATH, "--model-file",
          std::string(GPUCAP_TEST_MODELS_DIR) + "/mnasnet0_5.pt", "--engine-device", "cpu", "--input-size", "32",
          "--power-settle-s", "0", "--warmup-s", warmup_s, "--measure-s", measure_s, "--power-cap", "150", "--algorithm",
          algorithm};
}

// The best trial whose highest sample stays under the cap, by the trials' own numbers.
nlohmann::json best_feasible(const nlohmann::json& trials, double cap_w) {
  nlohmann::json best;
  for (const auto& t : trials) {
    if (t["max_power_w"].get<double>() <= cap_w &&
        (best.is_null() || t["throughput_img_s"].get<double>() > best["throughput_img_s"].get<double>())) {
      best = t;
    }
  }
  return best;
}

std::size_t count(const std::string& text, const std::string& fragment) {
  std::size_t n = 0;
  for (auto at = text.find(fragment); at != std::string::npos; at = text.find(fragment, at + 1)) ++n;
  return n;
}

TEST(TuneNvml, WithoutGpuControlItSearchesBatchSizesOnlyAndWritesNothing) {
  const test::FakeNvmlGpu fake;
  const auto r = gpucap(with(real_tune("oracle"), {"--batch-sizes", "1,4,8", "--json"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto json = nlohmann::json::parse(r.out);
  EXPECT_FALSE(json["simulated"].get<bool>());
  EXPECT_EQ(json["platform"], "nvml");
  EXPECT_FALSE(json["clocks_locked"].get<bool>());
  // What serve --profile checks a profile against: the engine's setup, as tune --out's file holds it.
  EXPECT_EQ(json["setup"]["gpu"], "NVIDIA A100-SXM4-40GB");
  EXPECT_EQ(json["setup"]["precision"], "fp32");
  EXPECT_EQ(json["setup"]["input_size"], 32);
  EXPECT_EQ(json["setup"]["engine_device"], "cpu");
  ASSERT_EQ(json["trials"].size(), 3U);
  for (const auto& t : json["trials"]) {
    EXPECT_EQ(t["sm_clock_mhz"], 1410) << "the GPU's highest clock, as a label";
    EXPECT_NEAR(t["max_power_w"].get<double>(), 120.0, 1e-9) << "the fake's power, through the sampler";
    EXPECT_GT(t["throughput_img_s"].get<double>(), 0.0);
  }
  EXPECT_EQ(json["best"]["batch_size"], best_feasible(json["trials"], 150.0)["batch_size"]);
  EXPECT_TRUE(fake.writes().empty());
  EXPECT_NE(r.err.find("batch size only, at the GPU's own clocks"), std::string::npos) << r.err;
  EXPECT_EQ(count(r.err, "[measured]"), 3U) << "progress on stderr";
}

TEST(TuneNvml, LockedClocksFindTheExhaustiveSweepsBestAndBobdAgreesOnTheSameMeasurements) {
  if (geteuid() != 0) GTEST_SKIP() << "NVML writes need root";
  const test::FakeNvmlGpu fake(true, kPowerByClock);
  test::TempDir dir;
  const auto grid = std::vector<std::string>{"--batch-sizes", "1,8", "--clock-levels", "810,1005,1200,1410",
                                             "--allow-gpu-control", "--out", dir.file("trials.json"), "--json"};
  const auto sweep = gpucap(with(real_tune("oracle"), grid));
  ASSERT_EQ(sweep.exit_code, 0) << sweep.err;
  const auto swept = nlohmann::json::parse(sweep.out);
  ASSERT_EQ(swept["trials"].size(), 8U);
  for (const auto& t : swept["trials"]) {
    const auto clock = std::to_string(t["sm_clock_mhz"].get<int>());
    EXPECT_NEAR(t["max_power_w"].get<double>(), kPowerByClock["power_mw_at_locked_sm"][clock].get<double>() / 1000.0, 1e-9)
        << "each trial ran at its own locked clock";
  }
  for (const auto& t : nlohmann::json::parse(read_text_file(dir.file("trials.json")))["trials"]) {
    EXPECT_DOUBLE_EQ(t["measured_sm_clock_mhz"].get<double>(), t["sm_clock_mhz"].get<double>()) << "the GPU read back the lock";
  }
  const auto best = best_feasible(swept["trials"], 150.0);
  EXPECT_EQ(swept["best"]["batch_size"], best["batch_size"]);
  EXPECT_EQ(swept["best"]["sm_clock_mhz"], best["sm_clock_mhz"]);
  EXPECT_LE(best["sm_clock_mhz"].get<double>(), 1005.0);
  EXPECT_TRUE(fake.gpu()["locked_sm_mhz"].is_null()) << "every lock undone";
  EXPECT_EQ(fake.writes().back(), "nvmlDeviceResetGpuLockedClocks ");

  // BOBD over the same grid and trial file: every answer comes from the file, none is measured.
  const auto bobd = gpucap(with(real_tune("bobd"), grid));
  ASSERT_EQ(bobd.exit_code, 0) << bobd.err;
  const auto searched = nlohmann::json::parse(bobd.out);
  EXPECT_EQ(searched["best"]["batch_size"], best["batch_size"]);
  EXPECT_EQ(searched["best"]["sm_clock_mhz"], best["sm_clock_mhz"]);
  EXPECT_DOUBLE_EQ(searched["best"]["throughput_img_s"].get<double>(), best["throughput_img_s"].get<double>());
  EXPECT_EQ(count(bobd.err, "[measured]"), 0U) << bobd.err;
}

TEST(TuneNvml, ASearchKilledHalfwayResumesWithoutMeasuringAgain) {
  const test::FakeNvmlGpu fake;
  test::TempDir dir;
  const auto file = dir.file("trials.json");
  const auto args = with(real_tune("oracle", "0.6"), {"--batch-sizes", "1,2,3,4,6,8,12,16", "--out", file});
  std::vector<std::string> argv = {GPUCAP_CLI_PATH};
  argv.insert(argv.end(), args.begin(), args.end());
  nlohmann::json before;
  {
    test::ChildProcess child(argv);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (std::chrono::steady_clock::now() < deadline) {
      ASSERT_FALSE(child.wait(0.0).has_value()) << "the search ended before it was killed";
      if (std::filesystem::exists(file)) {
        before = nlohmann::json::parse(read_text_file(file));
        if (before["trials"].size() >= 2) break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    child.signal(SIGKILL);
    ASSERT_TRUE(child.wait(10.0).has_value());
  }
  before = nlohmann::json::parse(read_text_file(file));  // what the kill left: the old file or the new one
  const auto kept = before["trials"].size();
  ASSERT_GE(kept, 2U);
  ASSERT_LT(kept, 8U) << "killed before the end";

  const auto again = gpucap(args);
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_NE(again.err.find(std::to_string(kept) + " trials already measured"), std::string::npos) << again.err;
  EXPECT_EQ(count(again.err, "[from --out]"), kept);
  EXPECT_EQ(count(again.err, "[measured]"), 8U - kept);
  const auto after = nlohmann::json::parse(read_text_file(file));
  ASSERT_EQ(after["trials"].size(), 8U);
  for (std::size_t i = 0; i < kept; ++i) EXPECT_EQ(after["trials"][i], before["trials"][i]) << "trial " << i << " kept as measured";
}

// SIGINT in the middle of a trial: that trial is dropped (the file keeps only whole ones), every
// lock is undone, the exit code is 130; started again, the search measures only what is missing.
TEST(TuneNvml, ASignalDropsTheTrialInFlightAndRestoresTheGpu) {
  const bool root = geteuid() == 0;
  const test::FakeNvmlGpu fake(true, kPowerByClock);
  test::TempDir dir;
  const auto file = dir.file("trials.json");
  auto args = with(real_tune("oracle", "1.0"), {"--batch-sizes", "1,8", "--out", file});
  if (root) args = with(args, {"--clock-levels", "810,1005", "--allow-gpu-control"});
  const std::size_t grid = root ? 4U : 2U;
  std::vector<std::string> argv = {GPUCAP_CLI_PATH};
  argv.insert(argv.end(), args.begin(), args.end());
  std::size_t kept = 0;
  {
    test::ChildProcess child(argv);
    // Once the first trial is in the file, the second is running: interrupt it halfway.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (std::chrono::steady_clock::now() < deadline &&
           !(std::filesystem::exists(file) && nlohmann::json::parse(read_text_file(file))["trials"].size() >= 1)) {
      ASSERT_FALSE(child.wait(0.0).has_value()) << "the search ended before it was interrupted";
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(400));
    child.signal(SIGINT);
    const auto status = child.wait(30.0);
    ASSERT_TRUE(status.has_value());
    ASSERT_TRUE(WIFEXITED(*status));
    EXPECT_EQ(WEXITSTATUS(*status), 130);
    kept = nlohmann::json::parse(read_text_file(file))["trials"].size();
  }
  EXPECT_EQ(kept, 1U) << "the interrupted trial is not kept";
  EXPECT_TRUE(fake.gpu()["locked_sm_mhz"].is_null()) << "restored";
  EXPECT_FALSE(std::filesystem::exists(fake.journal())) << "nothing left to recover";
  const auto again = gpucap(args);
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(count(again.err, "[from --out]"), 1U);
  EXPECT_EQ(count(again.err, "[measured]"), grid - 1);
}

TEST(TuneNvml, BadInputIsAClearErrorAndTouchesNoGpu) {
  const test::FakeNvmlGpu fake;
  test::TempDir dir;
  expect_error(with(real_tune("oracle"), {"--clock-levels", "1005"}), 2, "need --allow-gpu-control");
  expect_error(with(real_tune("oracle"), {"--model", "resnet50"}), 2, "--model does not apply to --platform nvml");
  expect_error({"tune", "--platform", "nvml", "--nvml-lib", GPUCAP_FAKE_NVML_PATH, "--power-cap", "150", "--algorithm",
                "oracle"},
               2, "--model-file FILE.pt is required");
  expect_error(real_tune("oracle", "0.4", "-1"), 2, "a trial's warm-up of -1 s must be between 0 and 600 s");
  expect_error(with(real_tune("oracle"), {"--precision", "int8"}), 2, "--precision 'int8' must be fp32, fp16 or bf16");
  expect_error({"tune", "--algorithm", "oracle", "--model", "resnet50", "--power-cap", "150", "--out", dir.file("x.json")}, 2,
               "--out does not apply to --platform sim");
  expect_error({"tune", "--algorithm", "oracle", "--model", "resnet50", "--power-cap", "150", "--warmup-s", "1"}, 2,
               "--warmup-s does not apply to --platform sim");
  expect_error({"tune", "--algorithm", "oracle", "--model", "resnet50", "--power-cap", "150", "--device", "1"}, 2,
               "--device does not apply to --platform sim");
  const auto other = dir.write("other.json", R"({"setup": {"gpu": "another"}, "trials": []})");
  expect_error(with(real_tune("oracle"), {"--batch-sizes", "1", "--out", other}), 2, "holds the trials of another search");
  const auto broken = dir.write("broken.json", "{\"setup\": ");
  expect_error(with(real_tune("oracle"), {"--batch-sizes", "1", "--out", broken}), 3, "broken.json");
  EXPECT_TRUE(fake.writes().empty());
}

}  // namespace
}  // namespace gpucap
