// gpucap monitor end to end, and the live metrics of run, share and bso serve: on no GPU, on the
// fake NVML (loaded through the real dlopen path), and on the paced twin, scraped while it runs.

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <thread>

#include "cli/metrics_scrape.hpp"
#include "gpucap/core/files.hpp"
#include "gpucap/core/text.hpp"
#include "support/child_process.hpp"
#include "support/cli_runner.hpp"
#include "support/fake_nvml_gpu.hpp"
#include "support/paths.hpp"

namespace gpucap {
namespace {

using test::expect_error;
using test::gpucap;

constexpr double kFakePowerW = 120.0;
// dcgm-exporter's labels, as the fake NVML's GPU has them.
constexpr const char* kFakeGpuLabels = R"({gpu="0",UUID="GPU-run",pci_bus_id="00000000:07:00.0",device="nvidia0",modelName="NVIDIA A100-SXM4-40GB",Hostname=")";

// The fake NVML for this test's life: gpucap loads it as its NVML library.
class FakeNvmlMonitor : public ::testing::Test {
 protected:
  void SetUp() override { setenv("GPUCAP_NVML_LIB", GPUCAP_FAKE_NVML_PATH, 1); }
  void TearDown() override { unsetenv("GPUCAP_NVML_LIB"); }
  test::FakeNvmlGpu fake_;
};

nlohmann::json last_json(const std::string& out) { return nlohmann::json::parse(out.substr(out.find('{'))); }

TEST(MonitorCli, WithoutAGpuItSaysSoAndExitsWithNoGpu) {
  setenv("GPUCAP_NVML_LIB", "/nonexistent/libnvidia-ml.so.1", 1);
  expect_error({"monitor", "--", "sleep", "2"}, 8, "no GPU to measure on this machine");
  unsetenv("GPUCAP_NVML_LIB");
}

TEST(MonitorCli, BadInputIsOneLineAndExitTwo) {
  expect_error({"monitor"}, 2, "give a command to measure after '--'");
  expect_error({"monitor", "--interval-ms", "0", "--", "true"}, 2, "--interval-ms 0 must be between");
  expect_error({"monitor", "--listen", "127.0.0.1:9400", "--", "true"}, 2, "not both");
  expect_error({"monitor", "--listen", "nonsense"}, 2, "expected HOST:PORT");
}

TEST_F(FakeNvmlMonitor, ReportsTheEnergyTheFakeCounterMovedToATenthOfAPercent) {
  const auto r = gpucap({"monitor", "--json", "--interval-ms", "50", "--", "sleep", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto report = last_json(r.out);
  EXPECT_EQ(report.at("exit_code"), 0);
  EXPECT_FALSE(report.at("simulated").get<bool>());
  const double time_s = report.at("time_s");
  EXPECT_GE(time_s, 1.0);
  const auto& gpu = report.at("gpus").at(0);
  EXPECT_EQ(gpu.at("energy_source"), "counter");
  EXPECT_EQ(gpu.at("uuid"), "GPU-run");
  // The fake's counter moves at its scripted power: the window's energy is that power × its time.
  const double energy_j = report.at("energy_j");
  EXPECT_NEAR(energy_j, kFakePowerW * time_s, 1e-3 * kFakePowerW * time_s);
  EXPECT_DOUBLE_EQ(gpu.at("max_power_w").get<double>(), kFakePowerW);
  EXPECT_NEAR(report.at("mean_power_w").get<double>(), kFakePowerW, 0.12);
  EXPECT_GE(report.at("samples").get<int>(), 10);
}

TEST_F(FakeNvmlMonitor, PrintsLabelledTextAndTheTimeline) {
  test::TempDir dir;
  const auto csv = dir.file("timeline.csv");
  const auto r = gpucap({"monitor", "--csv", csv, "--", "sleep", "0.3"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("gpucap monitor: 'sleep 0.3' exited with code 0"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("GPU 0 NVIDIA A100-SXM4-40GB"), std::string::npos) << r.out;
  for (const auto line : split(r.out, '\n')) {
    if (std::string(line).find("energy") != std::string::npos) {
      EXPECT_NE(std::string(line).find("[real]"), std::string::npos) << line;
    }
  }
  const auto text = read_text_file(csv);
  const auto rows = split(text, '\n');
  ASSERT_GE(rows.size(), 4u);  // header, a sample at 0 s, every 100 ms, the last
  EXPECT_EQ(std::string(rows[0]).substr(0, 18), "time_s,gpu,power_w");
  EXPECT_NE(std::string(rows[1]).find(",120.00,"), std::string::npos) << rows[1];
  EXPECT_NE(std::string(rows[1]).find(",real"), std::string::npos);
}

TEST_F(FakeNvmlMonitor, PassesTheCommandsExitCodeOn) {
  const auto r = gpucap({"monitor", "--json", "--", "sh", "-c", "exit 7"});
  EXPECT_EQ(r.exit_code, 7) << r.err;
  EXPECT_EQ(last_json(r.out).at("exit_code"), 7);
  expect_error({"monitor", "--", "/no/such/program"}, 2, "cannot run '/no/such/program'");
}

TEST_F(FakeNvmlMonitor, IntegratesPowerOnAGpuWithoutACounter) {
  test::FakeNvmlGpu old(/*energy_counter=*/false);
  const auto r = gpucap({"monitor", "--json", "--", "sleep", "0.3"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto report = last_json(r.out);
  EXPECT_EQ(report.at("gpus").at(0).at("energy_source"), "integrated");
  EXPECT_NEAR(report.at("energy_j").get<double>(), kFakePowerW * report.at("time_s").get<double>(), 1e-6);
}

// A SIGINT sent to gpucap alone is passed to the command; gpucap still prints what it measured
// and exits as the command did (130: killed by SIGINT).
TEST_F(FakeNvmlMonitor, SigintReachesTheCommandAndTheMeasurementIsStillPrinted) {
  test::ChildProcess child({GPUCAP_CLI_PATH, "monitor", "--json", "--", "sleep", "30"});
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  child.signal(SIGINT);
  const auto status = child.wait(10.0);
  ASSERT_TRUE(status.has_value()) << "gpucap monitor did not end after SIGINT";
  ASSERT_TRUE(WIFEXITED(*status));
  EXPECT_EQ(WEXITSTATUS(*status), 130);
  std::string out;
  while (const auto line = child.read_line(5.0)) out += *line + "\n";
  const auto report = last_json(out);
  EXPECT_EQ(report.at("exit_code"), 130);
  EXPECT_LT(report.at("time_s").get<double>(), 10.0);
  EXPECT_GT(report.at("energy_j").get<double>(), 0.0);
}

TEST_F(FakeNvmlMonitor, ListenServesDcgmExportersMetricsThatPromtoolAccepts) {
  test::ChildProcess child({GPUCAP_CLI_PATH, "monitor", "--listen", "127.0.0.1:0"});
  const auto url = test::read_metrics_url(child);
  ASSERT_FALSE(url.empty()) << "no metrics URL announced";
  const auto text = test::scrape(url);
  ASSERT_TRUE(text.has_value());
  for (const char* name : {"DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "DCGM_FI_DEV_SM_CLOCK",
                           "DCGM_FI_DEV_MEM_CLOCK", "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_GPU_TEMP",
                           "DCGM_FI_DEV_POWER_MGMT_LIMIT"}) {
    EXPECT_NE(text->find(std::string(name) + kFakeGpuLabels), std::string::npos) << name << "\n" << *text;
  }
  EXPECT_NE(text->find("# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter"), std::string::npos);
  EXPECT_EQ(test::series_value(*text, "DCGM_FI_DEV_POWER_USAGE"), kFakePowerW);
  EXPECT_EQ(test::series_value(*text, "DCGM_FI_DEV_GPU_TEMP"), 45.0);
  EXPECT_EQ(test::promtool_problems(*text), std::vector<std::string>{});
  // The energy counter grows between scrapes.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const auto again = test::scrape(url);
  ASSERT_TRUE(again.has_value());
  EXPECT_GT(*test::series_value(*again, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"),
            *test::series_value(*text, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"));
  child.signal(SIGTERM);
  const auto status = child.wait(10.0);
  ASSERT_TRUE(status.has_value());
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0);
}

// A paced twin run, scraped while it runs: every metric with its labels, promtool clean, and the
// cap step of its schedule in the scraped series.
TEST(LiveMetrics, APacedTwinRunIsScrapedLiveAndShowsItsCapStep) {
  test::ChildProcess child({GPUCAP_CLI_PATH, "--data-dir", test::data_dir(), "run", "--gpu", "p40", "--model", "inception_v1",
                            "--algorithm", "batchdvfs", "--window", "1", "--cap-schedule", "0:180,6:120", "--duration",
                            "12", "--pace", "4", "--metrics", "127.0.0.1:0"},
                           /*merge_stderr=*/true);
  const auto url = test::read_metrics_url(child);
  ASSERT_FALSE(url.empty()) << "no metrics URL announced";
  const std::string run_labels = R"({algorithm="batchdvfs",model="inception_v1",gpu="p40",simulated="true"})";
  std::vector<double> caps;
  std::string during;  // a scrape after some windows, while the run goes on
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline) {
    const auto text = test::scrape(url);
    if (!text) break;  // the run ended and took its exporter with it
    if (const auto windows = test::series_value(*text, "gpucap_windows_total"); windows && *windows >= 2) {
      caps.push_back(*test::series_value(*text, "gpucap_power_cap_watts"));
      if (during.empty()) during = *text;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_FALSE(during.empty()) << "no scrape saw two windows";
  for (const auto& name : {"gpucap_info", "gpucap_power_cap_watts", "gpucap_window_max_power_watts",
                           "gpucap_window_mean_power_watts", "gpucap_batch_size", "gpucap_sm_clock_hertz",
                           "gpucap_memory_clock_hertz", "gpucap_throughput_images_per_second", "gpucap_windows_total",
                           "gpucap_windows_over_cap_total", "gpucap_images_total"}) {
    EXPECT_NE(during.find(std::string(name) + run_labels), std::string::npos) << name;
  }
  EXPECT_NE(during.find("gpucap_tenant_mps_share_ratio{algorithm=\"batchdvfs\",model=\"inception_v1\",gpu=\"p40\","
                        "simulated=\"true\",tenant=\"0\"} 1"),
            std::string::npos);
  const std::string twin_labels =
      R"({gpu="0",UUID="GPU-SIMULATED-00000000",pci_bus_id="SIMULATED:00:00.0",device="nvidia0",modelName="Tesla P40 (simulated twin)",Hostname=")";
  for (const char* name : {"DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "DCGM_FI_DEV_SM_CLOCK",
                           "DCGM_FI_DEV_MEM_CLOCK", "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_GPU_TEMP",
                           "DCGM_FI_DEV_POWER_MGMT_LIMIT"}) {
    EXPECT_NE(during.find(std::string(name) + twin_labels), std::string::npos) << name;
  }
  EXPECT_EQ(test::promtool_problems(during), std::vector<std::string>{});
  // The schedule's step, 180 W then 120 W, in the scraped series.
  ASSERT_FALSE(caps.empty());
  EXPECT_EQ(caps.front(), 180.0);
  EXPECT_EQ(caps.back(), 120.0);
  EXPECT_TRUE(std::is_sorted(caps.rbegin(), caps.rend()));
  const auto status = child.wait(30.0);
  ASSERT_TRUE(status.has_value());
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0);
}

TEST(LiveMetrics, APacedShareExportsItsWindowsAndPreemptions) {
  test::ChildProcess child({GPUCAP_CLI_PATH, "--data-dir", test::data_dir(), "share", "--gpu", "rtx2080ti", "--job",
                            "bg=train:keras_resnet50:batch=32:until=fg", "--job",
                            "fg=infer:keras_vgg16:batch=1:priority=high:requests=200:start=0.5", "--pace", "2",
                            "--metrics", "127.0.0.1:0"},
                           /*merge_stderr=*/true);
  const auto url = test::read_metrics_url(child);
  ASSERT_FALSE(url.empty());
  std::optional<std::string> text;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < deadline) {
    text = test::scrape(url);
    if (!text || test::series_value(*text, "gpucap_preemptions_total").value_or(0.0) >= 1.0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(text.has_value()) << "the share ended before a preemption was scraped";
  EXPECT_GE(*test::series_value(*text, "gpucap_preemptions_total"), 1.0);
  EXPECT_NE(text->find("gpucap_tenant_batch_size{algorithm=\"none\",policy=\"switchflow\""), std::string::npos);
  EXPECT_NE(text->find("DCGM_FI_DEV_POWER_USAGE{gpu=\"0\",UUID=\"GPU-SIMULATED-00000000\""), std::string::npos);
  EXPECT_EQ(test::promtool_problems(*text), std::vector<std::string>{});
  child.signal(SIGKILL);
}

TEST(LiveMetrics, BadFlagsAreOneLine) {
  expect_error({"run", "--gpu", "p40", "--model", "resnet50", "--algorithm", "batchdvfs", "--power-cap", "150", "--pace", "fast"},
               2, "--pace 'fast' must be 'realtime' or a speed factor");
  expect_error({"run", "--gpu", "p40", "--model", "resnet50", "--algorithm", "batchdvfs", "--power-cap", "150",
                "--metrics", "nowhere"},
               2, "expected HOST:PORT");
  expect_error({"share", "--job", "a=train:keras_vgg16", "--pace", "0"}, 2, "--pace '0' must be");
}

}  // namespace
}  // namespace gpucap
