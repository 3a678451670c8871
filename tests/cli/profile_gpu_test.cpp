// `gpucap profile --platform nvml` end to end on fakes at the narrowest boundaries: a fake NVML
// library (loaded through the real dlopen path), a fake MPS control binary and fake worker
// processes that speak the worker protocol. Everything between them is the real code.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "gpucap/core/files.hpp"
#include "gpucap/core/text.hpp"
#include "support/cli_runner.hpp"
#include "support/paths.hpp"

namespace gpucap::test {
namespace {

constexpr const char* kA100 = R"({"devices": [{"name": "NVIDIA A100-SXM4-40GB", "uuid": "GPU-prof",
    "bus_id": "00000000:07:00.0", "power_mw": 150000, "power_limit_mw": 400000, "power_limit_min_mw": 100000,
    "power_limit_max_mw": 400000, "power_limit_default_mw": 400000, "memory_clocks_mhz": [1215],
    "graphics_clocks_mhz": [1410, 1260, 1110, 960, 810, 660, 510, 360, 210], "sm_clock_mhz": 1410,
    "memory_clock_mhz": 1215, "utilization_gpu": 80, "utilization_memory": 40, "locked_sm_mhz": null,
    "locked_memory_mhz": null}]})";

// Points gpucap at the fakes for the life of the object.
class FakeGpuWithMps {
 public:
  explicit FakeGpuWithMps(const TempDir& dir)
      : state_(dir.write("nvml.json", kA100)), mps_state_(dir.file("mps-events.txt")) {
    setenv("GPUCAP_FAKE_NVML_STATE", state_.c_str(), 1);
    setenv("GPUCAP_RESTORE_JOURNAL", dir.file("journal.json").c_str(), 1);
    setenv("GPUCAP_MPS_CONTROL", GPUCAP_FAKE_MPS_CONTROL_PATH, 1);
    setenv("GPUCAP_MPS_WORKER", GPUCAP_FAKE_MPS_WORKER_PATH, 1);
    setenv("GPUCAP_FAKE_MPS_STATE", mps_state_.c_str(), 1);
    setenv("GPUCAP_FAKE_MPS_RATE", "1000", 1);
  }
  ~FakeGpuWithMps() {
    for (const char* name : {"GPUCAP_FAKE_NVML_STATE", "GPUCAP_RESTORE_JOURNAL", "GPUCAP_MPS_CONTROL",
                             "GPUCAP_MPS_WORKER", "GPUCAP_FAKE_MPS_STATE", "GPUCAP_FAKE_MPS_RATE"}) {
      unsetenv(name);
    }
  }
  FakeGpuWithMps(const FakeGpuWithMps&) = delete;
  FakeGpuWithMps& operator=(const FakeGpuWithMps&) = delete;

  [[nodiscard]] nlohmann::json gpu() const { return nlohmann::json::parse(read_text_file(state_))["devices"][0]; }
  [[nodiscard]] std::vector<std::string> writes() const {
    return nlohmann::json::parse(read_text_file(state_)).value("writes", std::vector<std::string>{});
  }
  [[nodiscard]] std::string mps_events() const { return read_text_file(mps_state_); }

 private:
  std::string state_;
  std::string mps_state_;
};

std::vector<std::vector<std::string>> csv_rows(const std::string& text) {
  std::vector<std::vector<std::string>> rows;
  for (const auto line : split(text, '\n')) {
    if (line.empty()) continue;
    // Lists are quoted ("[5, 5]"); split outside the quotes.
    std::vector<std::string> fields(1);
    bool quoted = false;
    for (const char c : line) {
      if (c == '"') {
        quoted = !quoted;
      } else if (c == ',' && !quoted) {
        fields.emplace_back();
      } else {
        fields.back() += c;
      }
    }
    rows.push_back(fields);
  }
  return rows;
}

std::vector<std::string> profile_args(const TempDir& dir, const std::vector<std::string>& more) {
  std::vector<std::string> args = {"profile", "--platform", "nvml", "--nvml-lib", GPUCAP_FAKE_NVML_PATH,
                                   "--model-file", dir.file("resnet50.pt"), "--out", dir.file("profile.csv"),
                                   "--warmup-s", "0.05", "--measure-s", "0.3", "--sample-hz", "50"};
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

TEST(CliProfileGpu, MeasuresEachConfigurationThroughMpsWorkersAndNvml) {
  TempDir dir;
  const FakeGpuWithMps fakes(dir);
  const auto r = gpucap(profile_args(dir, {"--limit", "3"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("real hardware"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("clocks left to the GPU"), std::string::npos) << r.out;
  const auto rows = csv_rows(read_text_file(dir.file("profile.csv")));
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows[0].front(), "model_name");
  // PctoDL's matrix starts with one tenant at 5 % at batches 4, 8 and 16.
  const std::vector<std::string> batches = {"[4]", "[8]", "[16]"};
  for (std::size_t i = 0; i < batches.size(); ++i) {
    const auto& row = rows[i + 1];
    ASSERT_EQ(row.size(), 11u);
    EXPECT_EQ(row[0], "resnet50") << "the model file's name";
    EXPECT_EQ(row[1], "[5]");
    EXPECT_EQ(row[2], batches[i]);
    EXPECT_EQ(row[3], "0") << "no target clock: the clocks stay with the GPU";
    EXPECT_EQ(row[4], "1215");
    EXPECT_DOUBLE_EQ(std::stod(row[5]), 1410.0) << "the SM clock NVML read";
    EXPECT_DOUBLE_EQ(std::stod(row[6]), 80.0);
    EXPECT_DOUBLE_EQ(std::stod(row[7]), 40.0);
    // The fake worker runs 1000 img/s at 100 % in proportion to its share.
    EXPECT_NEAR(std::stod(row[8]), 50.0, 2.5) << row[2];
    EXPECT_DOUBLE_EQ(std::stod(row[9]), 150.0);
    EXPECT_DOUBLE_EQ(std::stod(row[10]), 150.0);
  }
  // One daemon, told to quit at the end; nothing written to the GPU.
  const auto events = fakes.mps_events();
  EXPECT_NE(events.find("start"), std::string::npos) << events;
  EXPECT_NE(events.find("stopped"), std::string::npos) << events;
  EXPECT_TRUE(fakes.writes().empty());
  // The profile is what `gpucap fit` reads.
  EXPECT_EQ(gpucap({"fit", "--profile", dir.file("profile.csv"), "--out", dir.file("m.json")}).exit_code, 3)
      << "three rows are too few to fit (an error, not a crash)";
}

TEST(CliProfileGpu, WithControlItLocksEachConfigurationsClockAndRestoresIt) {
  if (geteuid() != 0) GTEST_SKIP() << "NVML writes need root";
  TempDir dir;
  const FakeGpuWithMps fakes(dir);
  const auto r = gpucap(profile_args(dir, {"--limit", "2", "--allow-gpu-control"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto rows = csv_rows(read_text_file(dir.file("profile.csv")));
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[1][3], "1410") << "the stress matrix runs at the highest SM clock";
  const auto writes = fakes.writes();
  ASSERT_FALSE(writes.empty());
  EXPECT_NE(writes.front().find("1410 1410"), std::string::npos) << writes.front();
  EXPECT_TRUE(fakes.gpu()["locked_sm_mhz"].is_null()) << "the lock is reset at the end";
}

TEST(CliProfileGpu, BadInputIsOneErrorLine) {
  TempDir dir;
  const FakeGpuWithMps fakes(dir);
  expect_error(profile_args(dir, {"--sweeps"}), 2, "--sweeps locks the SM clock: it needs --allow-gpu-control");
  expect_error(profile_args(dir, {"--mem", "1215"}), 2, "--mem locks the memory clock");
  expect_error(profile_args(dir, {"--gpu", "a100"}), 2, "--gpu does not apply to --platform nvml");
  expect_error({"profile", "--platform", "nvml", "--nvml-lib", GPUCAP_FAKE_NVML_PATH, "--out", dir.file("p.csv")}, 2,
               "--model-file FILE.pt is required");
  expect_error(profile_args(dir, {"--limit", "0"}), 2, "--limit must be at least 1");
  expect_error({"profile", "--platform", "gpu", "--out", dir.file("p.csv")}, 2, "--platform 'gpu' must be sim or nvml");
  expect_error({"profile", "--model-file", "x.pt", "--gpu", "a100", "--model", "resnet50", "--out", dir.file("p.csv")}, 2,
               "--model-file does not apply to --platform sim");
  // A worker that crashes: one error naming the tenant, and no daemon left behind.
  setenv("GPUCAP_FAKE_MPS_FAULT", "0:abort:1", 1);
  const auto crashed = gpucap(profile_args(dir, {"--limit", "2"}));
  unsetenv("GPUCAP_FAKE_MPS_FAULT");
  EXPECT_EQ(crashed.exit_code, 6) << crashed.err;
  EXPECT_NE(crashed.err.find("MPS worker of tenant 0"), std::string::npos) << crashed.err;
  const auto events = fakes.mps_events();
  EXPECT_EQ(events.rfind("stopped"), events.size() - std::string("stopped\n").size()) << events;
  EXPECT_FALSE(std::filesystem::exists(dir.file("profile.csv"))) << "no half-written profile";
}

}  // namespace
}  // namespace gpucap::test

namespace gpucap::test {
namespace {

// mpsfit on a real GPU: the twin's profile of the A100 stands in for `gpucap profile --platform
// nvml` (tested above), the fake NVML for the GPU and fake workers for the model.
TEST(CliRunMps, MpsfitRunsMpsWorkersOnARealGpuFromAFittedPredictor) {
  TempDir dir;
  const FakeGpuWithMps fakes(dir);
  ASSERT_EQ(gpucap({"profile", "--gpu", "a100", "--model", "resnet50", "--sweeps", "--out", dir.file("p.csv")}).exit_code, 0);
  ASSERT_EQ(gpucap({"fit", "--profile", dir.file("p.csv"), "--out", dir.file("m.json")}).exit_code, 0);
  const std::vector<std::string> run = {"run", "--platform", "nvml", "--nvml-lib", GPUCAP_FAKE_NVML_PATH,
                                        "--model-file", dir.file("resnet50.pt"), "--algorithm", "mpsfit",
                                        "--power-cap", "200", "--duration", "1.5", "--mps-round-s", "0.2",
                                        "--power-settle-s", "0"};
  expect_error(run, 2, "--fitted MODEL.json");
  auto pctodl = run;
  pctodl[8] = "pctodl";
  expect_error(with(pctodl, {"--fitted", dir.file("m.json")}), 2, "--fitted does not apply to pctodl");
  auto unknown_model = pctodl;
  unknown_model[6] = dir.file("mine.pt");
  expect_error(unknown_model, 2, "'mine' is no model gpucap knows");
  expect_error(with(run, {"--fitted", dir.file("missing.json")}), 4, "missing.json");
  auto batchdvfs = run;
  batchdvfs[8] = "batchdvfs";
  expect_error(with(batchdvfs, {"--fitted", dir.file("m.json")}), 2, "--fitted does not apply to batchdvfs");
  if (geteuid() != 0) GTEST_SKIP() << "mpsfit locks the SM clock: NVML writes need root";
  const auto r = gpucap(with(run, {"--fitted", dir.file("m.json"), "--allow-gpu-control", "--json", "--trace",
                                   dir.file("trace.csv")}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto json = nlohmann::json::parse(r.out);
  EXPECT_GT(json["images"].get<long long>(), 0);
  EXPECT_NE(json["engine"].get<std::string>().find("MPS workers"), std::string::npos) << json.dump();
  // The trace names the partition the fitted planner chose; the SM clock was locked, then reset.
  const auto trace = read_text_file(dir.file("trace.csv"));
  EXPECT_NE(trace.find(",real"), std::string::npos) << trace;
  bool locked = false;
  for (const auto& w : fakes.writes()) locked = locked || w.find("nvmlDeviceSetGpuLockedClocks") != std::string::npos;
  EXPECT_TRUE(locked);
  EXPECT_TRUE(fakes.gpu()["locked_sm_mhz"].is_null());
  const auto events = fakes.mps_events();
  EXPECT_NE(events.find("stopped"), std::string::npos) << "the daemon stopped at the end: " << events;
}

// pctodl and directcap on a real GPU: PctoDL's published A100 fits for the model the file is named
// after, MPS workers (fake), the SM clock locked through the journaled session.
TEST(CliRunMps, PctodlAndDirectcapRunMpsWorkersOnARealGpuFromPctodlsPublishedFits) {
  TempDir dir;
  const FakeGpuWithMps fakes(dir);
  for (const std::string algorithm : {"pctodl", "directcap"}) {
    const std::vector<std::string> run = {"run", "--platform", "nvml", "--nvml-lib", GPUCAP_FAKE_NVML_PATH,
                                          "--model-file", dir.file("resnet50.pt"), "--algorithm", algorithm,
                                          "--power-cap", "200", "--duration", "1.5", "--mps-round-s", "0.2",
                                          "--power-settle-s", "0", "--params", shared_file("pctodl")};
    expect_error(run, 5, "needs write access to");
    if (geteuid() != 0) GTEST_SKIP() << algorithm << " locks the SM clock: NVML writes need root";
    const auto r = gpucap(with(run, {"--allow-gpu-control", "--json", "--trace", dir.file(algorithm + ".csv")}));
    ASSERT_EQ(r.exit_code, 0) << algorithm << ": " << r.err;
    EXPECT_GT(nlohmann::json::parse(r.out)["images"].get<long long>(), 0);
    EXPECT_NE(read_text_file(dir.file(algorithm + ".csv")).find(",real"), std::string::npos);
    EXPECT_TRUE(fakes.gpu()["locked_sm_mhz"].is_null()) << algorithm << ": restored";
  }
  EXPECT_NE(fakes.mps_events().find("stopped"), std::string::npos);
}

}  // namespace
}  // namespace gpucap::test
