// `gpucap run --platform nvml` end to end without a GPU: the real code from the CLI down, with the
// fake NVML at the library boundary and the LibTorch engine running a small exported model on the
// CPU (the CTest fixture export_torch_models).

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <thread>

#include "cli/metrics_scrape.hpp"
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

using FakeGpu = test::FakeNvmlGpu;

std::vector<std::string> real_run(const std::string& algorithm) {
  return {"run", "--platform", "nvml", "--nvml-lib", GPUCAP_FAKE_NVML_PATH, "--model-file",
          std::string(GPUCAP_TEST_MODELS_DIR) + "/mnasnet0_5.pt", "--engine-device", "cpu", "--input-size", "32",
          "--power-settle-s", "0", "--power-cap", "150", "--algorithm", algorithm};
}

TEST(RunNvml, BatchsizerRunsUnprivilegedAndWritesNothing) {
  const FakeGpu fake;
  const auto r = gpucap(with(real_run("batchsizer"), {"--images", "300", "--json"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto json = nlohmann::json::parse(r.out);
  EXPECT_FALSE(json["simulated"].get<bool>());
  EXPECT_EQ(json["platform"], "nvml");
  EXPECT_EQ(json["uuid"], "GPU-run");
  EXPECT_EQ(json["images"], 300);
  EXPECT_GT(json["windows"].get<int>(), 0);
  EXPECT_NEAR(json["max_power_w"].get<double>(), 120.0, 1e-9) << "the fake's power, through the sampler";
  EXPECT_NEAR(json["mean_power_w"].get<double>(), 120.0, 6.0) << "energy from the GPU's counter / duration";
  EXPECT_EQ(json["device_writes"], 0);
  EXPECT_TRUE(fake.writes().empty());
  const auto text = gpucap(with(real_run("batchsizer"), {"--images", "50"}));
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("gpucap run on a REAL NVIDIA A100-SXM4-40GB"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("[real]"), std::string::npos);
  EXPECT_EQ(text.out.find("simulated"), std::string::npos) << text.out;
}

TEST(RunNvml, WithoutAnEnergyCounterEnergyIsTheIntegralOfTheSamples) {
  const FakeGpu fake(/*energy_counter=*/false);
  const auto r = gpucap(with(real_run("batchsizer"), {"--images", "300", "--json"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto json = nlohmann::json::parse(r.out);
  EXPECT_NEAR(json["mean_power_w"].get<double>(), 120.0, 1.0);
  EXPECT_NEAR(json["energy_j"].get<double>(), 120.0 * json["duration_s"].get<double>(), 2.0);
}

TEST(RunNvml, DvfsControllersNeedPermissionAndRestoreEverythingTheyChanged) {
  const FakeGpu fake;
  expect_error(with(real_run("batchdvfs"), {"--images", "100"}), 5,
               "batchdvfs needs write access to GPU_CORE_FREQUENCY_LOCK_CONTROL");
  EXPECT_TRUE(fake.writes().empty()) << "refused before anything was written";
  if (geteuid() != 0) GTEST_SKIP() << "NVML writes need root";
  const auto r = gpucap(with(real_run("batchdvfs"), {"--images", "400", "--allow-gpu-control", "--window", "10b"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto writes = fake.writes();
  ASSERT_GE(writes.size(), 2u);
  EXPECT_EQ(writes.front().get<std::string>().rfind("nvmlDeviceSetGpuLockedClocks", 0), 0u) << writes.dump();
  EXPECT_EQ(writes.back(), "nvmlDeviceResetGpuLockedClocks ") << "restored at the end";
  EXPECT_TRUE(fake.gpu()["locked_sm_mhz"].is_null());
  EXPECT_FALSE(std::filesystem::exists(fake.journal())) << "a clean exit leaves nothing to recover";
}

TEST(RunNvml, ASignalStopsTheRunAndRestoresTheGpu) {
  if (geteuid() != 0) GTEST_SKIP() << "NVML writes need root";
  const FakeGpu fake;
  test::TempDir dir;
  std::string command;
  for (const auto& arg : with(real_run("batchdvfs"), {"--duration", "120", "--allow-gpu-control"})) {
    command += " " + test::quote(arg);
  }
  const pid_t pid = fork();
  if (pid == 0) {
    const auto full = "exec " + test::quote(GPUCAP_CLI_PATH) + command + " >" + test::quote(dir.file("out")) +
                      " 2>" + test::quote(dir.file("err"));
    execl("/bin/sh", "sh", "-c", full.c_str(), nullptr);
    _exit(127);
  }
  // Wait until the run has locked the clock, then interrupt it.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (fake.gpu()["locked_sm_mhz"].is_null() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_FALSE(fake.gpu()["locked_sm_mhz"].is_null()) << "the run never locked the clock";
  kill(pid, SIGINT);
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 130) << read_text_file(dir.file("err"));
  EXPECT_NE(read_text_file(dir.file("err")).find("stopped by a signal"), std::string::npos);
  EXPECT_NE(read_text_file(dir.file("out")).find("[real]"), std::string::npos) << "the summary so far is printed";
  EXPECT_TRUE(fake.gpu()["locked_sm_mhz"].is_null()) << "restored";
  EXPECT_FALSE(std::filesystem::exists(fake.journal()));
}

TEST(RunNvml, BadInputIsAClearErrorAndTouchesNoGpu) {
  const FakeGpu fake;
  test::TempDir dir;
  auto args = real_run("batchsizer");
  args[6] = dir.write("broken.pt", "not a model");
  expect_error(with(args, {"--images", "10"}), 3, "broken.pt: not a TorchScript model");
  expect_error(with(real_run("batchsizer"), {"--images", "10", "--device", "4"}), 2, "GPU 4 does not exist");
  dir.write("images/notes.txt", "not an image");
  expect_error(with(real_run("batchsizer"), {"--images", "10", "--images-dir", dir.file("images")}), 3,
               "notes.txt: not a JPEG image");
  expect_error(with(real_run("batchsizer"), {"--images", "10", "--gpu", "p40"}), 2,
               "--gpu does not apply to --platform nvml");
  expect_error(with(real_run("batchsizer"), {"--images", "10", "--sampler", "nvidia-smi"}), 2,
               "--sampler does not apply to --platform nvml");
  expect_error(with(real_run("batchsizer"), {"--images", "10", "--governor-clock", "1300"}), 2,
               "--governor-clock does not apply to --platform nvml");
  expect_error(with(real_run("batchsizer"), {}), 2, "give --images N or --duration S");
  expect_error(with(real_run("batchsizer"), {"--images", "10", "--dataset", "caltech256"}), 2,
               "--dataset does not apply to --platform nvml");
  // A real GPU's flags with a default are refused on the twin too, where they would go unused.
  expect_error({"run", "--model", "inception_v1", "--algorithm", "dvfs", "--power-cap", "150", "--input-size", "299"}, 2,
               "--input-size does not apply to --platform sim");
  expect_error({"run", "--model", "inception_v1", "--algorithm", "dvfs", "--power-cap", "150", "--engine-device", "cpu"},
               2, "--engine-device does not apply to --platform sim");
  expect_error({"run", "--platform", "nvml", "--nvml-lib", "/nonexistent/libnvidia-ml.so.1", "--model-file", "x.pt",
                "--power-cap", "150", "--algorithm", "batchsizer", "--images", "10"},
               8, "no NVIDIA driver");
  auto tpu = real_run("batchsizer");
  tpu[2] = "tpu";
  expect_error(with(tpu, {"--images", "10"}), 2, "--platform 'tpu' must be sim or nvml");
  expect_error(with(real_run("batchsizer"), {"--images", "10", "--search-out", dir.file("s.json")}), 2,
               "--search-out does not apply to batchsizer");
  // The controller's options are checked before the profile is measured (one line on stderr: no
  // trial was printed).
  expect_error(with(real_run("capfit"), {"--images", "10", "--window", "0"}), 2, "window of 0 s");
  expect_error(with(real_run("bobd"), {"--images", "10", "--batch-sizes", "1,2"}), 2, "--batch-sizes");
  expect_error(with(real_run("capfit"), {"--images", "10", "--trial-measure-s", "0"}), 2,
               "a trial's measurement of 0 s must be between 0.1 and 3600 s");
  EXPECT_TRUE(fake.writes().empty());
}

std::size_t count(const std::string& text, const std::string& fragment) {
  std::size_t n = 0;
  for (auto at = text.find(fragment); at != std::string::npos; at = text.find(fragment, at + 1)) ++n;
  return n;
}

// Short trials before the run, so that a test's profile or search takes seconds.
std::vector<std::string> with_short_trials(const std::string& algorithm, const std::vector<std::string>& more) {
  return with(with(real_run(algorithm), {"--trial-warmup-s", "0.1", "--trial-measure-s", "0.3"}), more);
}

TEST(RunNvml, CapfitProfilesTheGpuFirstAndAProfileKeptIsNotMeasuredAgain) {
  const FakeGpu fake;
  test::TempDir dir;
  const auto args = with_short_trials("capfit", {"--batch-sizes", "1,8", "--images", "400", "--json", "--search-out",
                                                 dir.file("profile.json")});
  const auto first = gpucap(args);
  ASSERT_EQ(first.exit_code, 0) << first.err;
  EXPECT_NE(first.err.find("capfit: profiling the model first, 2 configurations (batch sizes at the GPU's own clocks"),
            std::string::npos)
      << first.err;
  EXPECT_EQ(count(first.err, "[measured]"), 2U);
  const auto profile = nlohmann::json::parse(read_text_file(dir.file("profile.json")));
  ASSERT_EQ(profile["trials"].size(), 2U);
  EXPECT_EQ(nlohmann::json::parse(first.out)["images"], 400);
  EXPECT_TRUE(fake.writes().empty()) << "without --allow-gpu-control capfit moves the batch size only";

  const auto again = gpucap(args);
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(count(again.err, "[from --search-out]"), 2U) << again.err;
  EXPECT_EQ(count(again.err, "[measured]"), 0U);
  // The same file is a profile `--profile` reads: no measurement at all then.
  const auto given = gpucap(with(real_run("capfit"), {"--images", "100", "--profile", dir.file("profile.json")}));
  ASSERT_EQ(given.exit_code, 0) << given.err;
  EXPECT_EQ(given.err.find("profiling"), std::string::npos) << given.err;
  // ... and one measured with other flags (images of 64 pixels, not 32) is refused by its
  // difference, before the model is loaded and with nothing written to the GPU.
  auto other_input = with(real_run("capfit"), {"--images", "100", "--profile", dir.file("profile.json")});
  std::replace(other_input.begin(), other_input.end(), std::string("32"), std::string("64"));
  expect_error(other_input, 2,
               "--profile " + dir.file("profile.json") + ": it was measured with input size 32, and this runs 64; measure "
               "this one's with 'gpucap tune --platform nvml --model-file " + std::string(GPUCAP_TEST_MODELS_DIR) +
               "/mnasnet0_5.pt --precision fp32 --input-size 64 --engine-device cpu --algorithm oracle --power-cap W --json'");
  EXPECT_TRUE(fake.writes().empty());
}

TEST(RunNvml, BobdSearchesEveryCapOfTheScheduleOnTheGpuBeforeTheRun) {
  const FakeGpu fake;
  test::TempDir dir;
  const auto r = gpucap(with(with_short_trials("bobd", {"--cap-schedule", "0:150,1:130", "--duration", "2", "--bobd-budget",
                                                        "3", "--search-out", dir.file("search.json")}),
                             {}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("bobd: searching 256 configurations for each of 2 caps first"), std::string::npos) << r.err;
  EXPECT_EQ(count(r.err, "  trial "), 6U) << "3 per cap";
  const auto trials = nlohmann::json::parse(read_text_file(dir.file("search.json")))["trials"].size();
  EXPECT_EQ(trials, count(r.err, "[measured]")) << "a point both caps' searches chose is measured once";
  EXPECT_GE(trials, 3U);
  EXPECT_TRUE(fake.writes().empty());
}

TEST(RunNvml, CapfitWithClockControlProfilesFiveClocksAndRestoresThem) {
  if (geteuid() != 0) GTEST_SKIP() << "NVML writes need root";
  const FakeGpu fake;
  const auto r = gpucap(with_short_trials("capfit", {"--batch-sizes", "1,8", "--images", "300", "--allow-gpu-control"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("capfit: profiling the model first, 10 configurations"), std::string::npos) << r.err;
  std::size_t locks = 0;
  for (const auto& w : fake.writes()) locks += w.get<std::string>().rfind("nvmlDeviceSetGpuLockedClocks", 0) == 0 ? 1U : 0U;
  EXPECT_GE(locks, 10U) << "one lock per profiled configuration, then the run's";
  EXPECT_TRUE(fake.gpu()["locked_sm_mhz"].is_null());
  EXPECT_FALSE(std::filesystem::exists(fake.journal()));
}

// A run on the (fake) real GPU with --metrics, scraped while it runs: gpucap's own series with the
// GPU's model and index, the GPU's DCGM series with the same index, promtool-clean.
TEST(RunNvml, MetricsAreScrapedWhileItRuns) {
  const FakeGpu fake;
  auto args = with(real_run("batchsizer"), {"--duration", "4", "--window", "0.5", "--metrics", "127.0.0.1:0"});
  args.insert(args.begin(), GPUCAP_CLI_PATH);
  test::ChildProcess child(args, /*merge_stderr=*/true);
  const auto url = test::read_metrics_url(child);
  ASSERT_FALSE(url.empty()) << "no metrics URL announced";
  std::optional<std::string> during;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline) {
    const auto text = test::scrape(url);
    if (!text) break;
    if (test::series_value(*text, "gpucap_windows_total").value_or(0.0) >= 1.0) {
      during = text;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(during.has_value()) << "no scrape saw a window";
  EXPECT_NE(during->find(R"(gpucap_power_cap_watts{algorithm="batchsizer",model="mnasnet0_5",)"
                         R"(gpu_model="NVIDIA A100-SXM4-40GB",gpu="0",simulated="false"} 150)"),
            std::string::npos)
      << *during;
  EXPECT_EQ(test::series_value(*during, "DCGM_FI_DEV_POWER_USAGE", R"(gpu="0",UUID="GPU-run")"), 120.0);
  EXPECT_EQ(during->find("simulated=\"true\""), std::string::npos);
  EXPECT_EQ(test::promtool_problems(*during), std::vector<std::string>{});
  const auto status = child.wait(60.0);
  ASSERT_TRUE(status.has_value());
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0);
}

}  // namespace
}  // namespace gpucap

namespace gpucap {
namespace {

// `gpucap list algorithms` says what each one needs on a real GPU; each in-process one runs on the
// fake NVML with the CPU engine and leaves the GPU as it found it (the MPS ones:
// profile_gpu_test.cpp; capfit and bobd: above).
TEST(RunNvml, EveryAlgorithmListedRunsOnARealGpuAsTheListSays) {
  const auto list = gpucap({"list", "algorithms", "--json"});
  ASSERT_EQ(list.exit_code, 0) << list.err;
  const auto algorithms = nlohmann::json::parse(list.out);
  ASSERT_GE(algorithms.size(), 12U);
  for (const auto& a : algorithms) {
    const auto name = a["name"].get<std::string>();
    const auto real = a["real_gpu"].get<std::string>();
    EXPECT_TRUE(a["twin"].get<bool>()) << name;
    ASSERT_FALSE(real.empty()) << name;
    if (real.find("MPS workers") != std::string::npos || name == "capfit" || name == "bobd") continue;
    const FakeGpu fake;
    const bool unprivileged = real.rfind("unprivileged", 0) == 0;
    if (!unprivileged && geteuid() != 0) continue;  // NVML writes need root
    auto args = with(real_run(name), {"--duration", "1.5", "--window", "0.5"});
    if (!unprivileged) args.emplace_back("--allow-gpu-control");
    const auto r = gpucap(args);
    ASSERT_EQ(r.exit_code, 0) << name << ": " << r.err;
    EXPECT_NE(r.out.find("[real]"), std::string::npos) << name;
    EXPECT_EQ(fake.writes().empty(), unprivileged) << name << ": " << fake.writes().dump();
    EXPECT_TRUE(fake.gpu()["locked_sm_mhz"].is_null()) << name << ": restored";
    EXPECT_EQ(fake.gpu()["power_limit_mw"], 400000) << name << ": restored";
  }
}

}  // namespace
}  // namespace gpucap
