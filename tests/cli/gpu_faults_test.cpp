// `gpucap run --platform nvml` while the GPU misbehaves (issue 38, services under faults), end to
// end through the fake NVML (tests/support/fake_nvml.cpp) loaded by the real dlopen path:
//  - NVML calls that fail at random (a seeded share of the calls of the functions named);
//  - a driver reset mid-run: the energy counter starts again from 0, the clock locks and the
//    power limit go back to their defaults;
//  - the disk full while gpucap writes the restore journal and --search-out.
// Every run must end by itself with the GPU's settings as they were before it, a finite energy,
// and each kind of fault said once in the log (not once per call).

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "gpucap/core/files.hpp"
#include "gpucap/device/restore_journal.hpp"
#include "support/cli_runner.hpp"
#include "support/fake_nvml_gpu.hpp"
#include "support/paths.hpp"
#include "support/small_disk.hpp"

namespace gpucap {
namespace {

using test::gpucap;
using test::with;

// The GPU before the run: a power limit of 350 W (not the 400 W default, so that a reset and a
// restore are told apart) and no clock lock.
constexpr int kOriginalLimitMw = 350000;

std::vector<std::string> real_run(const std::string& algorithm) {
  return {"run", "--platform", "nvml", "--nvml-lib", GPUCAP_FAKE_NVML_PATH, "--model-file",
          std::string(GPUCAP_TEST_MODELS_DIR) + "/mnasnet0_5.pt", "--engine-device", "cpu", "--input-size", "32",
          "--power-settle-s", "0", "--allow-gpu-control", "--json", "--algorithm", algorithm};
}

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// The clocks unlocked and the power limit at `limit_mw` (the GPU's before the run, unless a
// driver reset put back its default under a run that never wrote it).
void expect_settings_as_before(const test::FakeNvmlGpu& fake, int limit_mw = kOriginalLimitMw) {
  const auto gpu = fake.gpu();
  EXPECT_TRUE(gpu["locked_sm_mhz"].is_null()) << gpu.dump();
  EXPECT_TRUE(!gpu.contains("locked_memory_mhz") || gpu["locked_memory_mhz"].is_null()) << gpu.dump();
  EXPECT_EQ(gpu["power_limit_mw"], limit_mw) << gpu.dump();
  EXPECT_FALSE(std::filesystem::exists(fake.journal())) << "restored: nothing left to recover";
}

// The run's summary: it ended by itself, its energy finite, not negative, and no more than the
// fake's 120 W could give it (with a second to spare).
nlohmann::json expect_sane_summary(const test::CliResult& r) {
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const auto json = nlohmann::json::parse(r.out, nullptr, false);
  if (json.is_discarded()) {
    ADD_FAILURE() << "no JSON summary: " << r.out << r.err;
    return {};
  }
  const double energy_j = json["energy_j"];
  const double duration_s = json["duration_s"];
  EXPECT_TRUE(std::isfinite(energy_j));
  EXPECT_GE(energy_j, 0.0);
  EXPECT_LE(energy_j, 120.0 * (duration_s + 1.0)) << "absurd energy";
  return json;
}

const std::vector<std::string> kFlakyFunctions = {
    "nvmlDeviceSetGpuLockedClocks",      "nvmlDeviceResetGpuLockedClocks",    "nvmlDeviceSetPowerManagementLimit",
    "nvmlDeviceGetPowerManagementLimit", "nvmlDeviceGetPowerUsage",           "nvmlDeviceGetTotalEnergyConsumption",
    "nvmlDeviceGetClockInfo"};

nlohmann::json flaky(int seed) {
  return {{"power_limit_mw", kOriginalLimitMw},
          {"random_faults",
           {{"seed", seed}, {"probability", 0.15}, {"status", 999}, {"after_s", 0.3}, {"functions", kFlakyFunctions}}}};
}

std::size_t injected(const test::FakeNvmlGpu& fake) {
  const auto state = nlohmann::json::parse(read_text_file(fake.gpu_state_path()));
  std::size_t n = 0;
  if (state.contains("faults_injected")) {
    for (const auto& [function, calls] : state["faults_injected"].items()) n += calls.get<std::size_t>();
  }
  return n;
}

TEST(GpuFaults, CallsThatFailAtRandomHoldTheLastSettingsAndRestoreAtTheEnd) {
  if (geteuid() != 0) GTEST_SKIP() << "NVML writes need root";
  for (const int seed : {1, 2}) {
    SCOPED_TRACE(seed);
    const test::FakeNvmlGpu fake(true, flaky(seed));
    // batchdvfs locks the SM clock; a decision every 5 batches: many writes, some refused.
    const auto r = gpucap(with(real_run("batchdvfs"), {"--power-cap", "150", "--duration", "3", "--window", "5b"}));
    expect_sane_summary(r);
    EXPECT_GT(injected(fake), 0U) << "the fake failed no call: the test tests nothing";
    EXPECT_LE(count(r.err, "holding the last settings"), 1U) << "once per kind, not per call:\n" << r.err;
    EXPECT_LE(count(r.err, "a power reading failed"), 1U) << r.err;
    EXPECT_LE(count(r.err, "reading the energy counter failed"), 1U) << r.err;
    EXPECT_NE(r.err.find("GPU faults ridden out in this run: "), std::string::npos) << r.err;
    expect_settings_as_before(fake);
  }
}

TEST(GpuFaults, APowerLimitThatFailsAtRandomIsRestoredToo) {
  if (geteuid() != 0) GTEST_SKIP() << "NVML writes need root";
  const test::FakeNvmlGpu fake(true, flaky(3));
  // powercap sets the power limit to the cap: three caps, three limits.
  const auto r = gpucap(with(real_run("powercap"), {"--cap-schedule", "0:150,1:200,2:170", "--duration", "3",
                                                    "--window", "5b"}));
  expect_sane_summary(r);
  EXPECT_GT(injected(fake), 0U);
  EXPECT_LE(count(r.err, "holding the last settings"), 1U) << r.err;
  bool limited = false;
  for (const auto& w : fake.writes()) limited = limited || w.get<std::string>().rfind("nvmlDeviceSetPowerManagementLimit 1", 0) == 0;
  EXPECT_TRUE(limited) << fake.writes().dump();
  expect_settings_as_before(fake);
}

// The writes after the fake's "driver reset" mark.
std::vector<std::string> writes_after_reset(const test::FakeNvmlGpu& fake) {
  std::vector<std::string> after;
  bool reset = false;
  for (const auto& w : fake.writes()) {
    if (reset) after.push_back(w.get<std::string>());
    reset = reset || w == "driver reset";
  }
  EXPECT_TRUE(reset) << "the fake's driver reset never came: " << fake.writes().dump();
  return after;
}

TEST(GpuFaults, ADriverResetMidRunIsSaidOnceAndTheSettingsAreSetAgainThenRestored) {
  if (geteuid() != 0) GTEST_SKIP() << "NVML writes need root";
  {
    SCOPED_TRACE("powercap: the power limit goes back to its default");
    const test::FakeNvmlGpu fake(true, {{"power_limit_mw", kOriginalLimitMw}, {"reset", {{"after_energy_calls", 2}}}});
    const auto r = gpucap(with(real_run("powercap"), {"--power-cap", "150", "--duration", "3", "--window", "5b"}));
    const auto json = expect_sane_summary(r);
    const auto after = writes_after_reset(fake);
    ASSERT_FALSE(after.empty());
    EXPECT_EQ(after.front(), "nvmlDeviceSetPowerManagementLimit 150000") << "the run's limit, set again";
    EXPECT_EQ(count(r.err, "the energy counter went back"), 1U) << r.err;
    EXPECT_EQ(count(r.err, "setting it again"), 1U) << r.err;
    // The counter's restart loses at most the part of one window before it.
    EXPECT_GE(json.value("energy_j", 0.0), 120.0 * (json.value("duration_s", 0.0) - 1.0)) << json.dump();
    expect_settings_as_before(fake);
  }
  {
    SCOPED_TRACE("batchdvfs: the clock lock is cleared");
    const test::FakeNvmlGpu fake(true, {{"power_limit_mw", kOriginalLimitMw}, {"reset", {{"after_energy_calls", 2}}}});
    const auto r = gpucap(with(real_run("batchdvfs"), {"--power-cap", "150", "--duration", "3", "--window", "5b"}));
    expect_sane_summary(r);
    const auto after = writes_after_reset(fake);
    ASSERT_FALSE(after.empty());
    EXPECT_EQ(after.front().rfind("nvmlDeviceSetGpuLockedClocks", 0), 0U) << "the lock, set again: " << after.front();
    EXPECT_EQ(count(r.err, "the energy counter went back"), 1U) << r.err;
    EXPECT_EQ(count(r.err, "setting it again"), 1U) << r.err;
    // batchdvfs controls the clocks only: the power limit is the driver's business, not the run's.
    // It never writes it, so it leaves it at the default the reset put back (it does not know the
    // 350 W an administrator had set, and must not guess).
    for (const auto& write : fake.writes()) {
      EXPECT_EQ(write.get<std::string>().find("PowerManagementLimit"), std::string::npos) << write;
    }
    expect_settings_as_before(fake, fake.gpu()["power_limit_default_mw"].get<int>());
  }
}

// The restore journal on a full disk: the run stops before it changes anything (a write that
// could not be journaled is not made), says why in one line, and the journal another run left
// (here: the settings a gpucap still running holds on another GPU — this test process stands in
// for it, so recovery leaves them alone) is as it was.
TEST(GpuFaults, AFullDiskStopsTheRunBeforeAnUnjournaledWriteAndKeepsTheJournal) {
  if (geteuid() != 0) GTEST_SKIP() << "NVML writes need root";
  const test::FakeNvmlGpu fake(true, {{"power_limit_mw", kOriginalLimitMw}});
  const auto owner = device::this_process();
  const auto previous = nlohmann::json{{"version", 1},
                                       {"entries",
                                        {{{"device", "GPU-elsewhere"},
                                          {"control", "GPU_POWER_LIMIT_CONTROL"},
                                          {"original", 250.0},
                                          {"pid", owner.pid},
                                          {"pid_start_ticks", owner.start_ticks}}}}}
                            .dump(2) +
                        "\n";
  const auto run = test::run_on_full_disk("journal.json", previous, 0,
                                          with(real_run("powercap"), {"--power-cap", "150", "--images", "100"}), 120,
                                          {"GPUCAP_RESTORE_JOURNAL={DISK}/journal.json"});
  test::expect_failed_cleanly(run, "journal.json", previous, "journal.json", /*failed_existed=*/true);
  EXPECT_TRUE(fake.writes().empty()) << "nothing written that the journal does not hold: " << fake.writes().dump();
  EXPECT_EQ(fake.gpu()["power_limit_mw"], kOriginalLimitMw);
}

// --search-out on a full disk: the trials the file held are still there, byte for byte.
TEST(GpuFaults, AFullDiskKeepsTheSearchOutFileAsItWas) {
  const test::FakeNvmlGpu fake;
  test::TempDir dir;
  auto args = real_run("capfit");
  args.erase(std::find(args.begin(), args.end(), "--allow-gpu-control"));
  args = with(args, {"--trial-warmup-s", "0.1", "--trial-measure-s", "0.3", "--power-cap", "150", "--images", "100"});
  const auto first = gpucap(with(args, {"--batch-sizes", "1,8", "--search-out", dir.file("profile.json")}));
  ASSERT_EQ(first.exit_code, 0) << first.err;
  const auto previous = read_text_file(dir.file("profile.json"));
  // A third batch size is measured and added: the file cannot grow.
  const auto run = test::run_on_full_disk("profile.json", previous, 0,
                                          with(args, {"--batch-sizes", "1,8,16", "--search-out", "{DISK}/profile.json"}));
  test::expect_failed_cleanly(run, "profile.json", previous, "profile.json", /*failed_existed=*/true);
}

}  // namespace
}  // namespace gpucap
