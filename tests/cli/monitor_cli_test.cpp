// gpucap monitor end to end: on no GPU, and on the fake NVML (loaded through the real dlopen
// path) — its report, timeline and exporter, and a command that outlives failed readings, a failed
// --csv and signals that come while it starts. (The live metrics of run, share and bso serve:
// live_metrics_cli_test.cpp.)

#include <gtest/gtest.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
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
#include "support/scoped_env.hpp"

namespace gpucap {
namespace {

using test::expect_error;
using test::gpucap;

constexpr double kFakePowerW = 120.0;
// dcgm-exporter's labels, as the fake NVML's GPU has them.
constexpr const char* kFakeGpuLabels = R"({gpu="0",UUID="GPU-run",pci_bus_id="00000000:07:00.0",device="nvidia0",modelName="NVIDIA A100-SXM4-40GB",hostname=")";

// The fake NVML for this test's life: gpucap loads it as its NVML library.
class FakeNvmlMonitor : public ::testing::Test {
 protected:
  test::ScopedEnv library_{"GPUCAP_NVML_LIB", GPUCAP_FAKE_NVML_PATH};
  test::FakeNvmlGpu fake_;
};

nlohmann::json last_json(const std::string& out) { return nlohmann::json::parse(out.substr(out.find('{'))); }

TEST(MonitorCli, WithoutAGpuItSaysSoAndExitsWithNoGpu) {
  const test::ScopedEnv library("GPUCAP_NVML_LIB", "/nonexistent/libnvidia-ml.so.1");
  expect_error({"monitor", "--", "sleep", "2"}, 8, "no GPU to measure on this machine");
  // --listen alone takes the default address (it got as far as looking for a GPU), and the way to
  // try the exporter without one is a command that exists: not monitor --platform sim.
  const auto r = test::gpucap({"monitor", "--listen"});
  EXPECT_EQ(r.exit_code, 8) << r.err;
  EXPECT_NE(r.err.find("--pace realtime --metrics 127.0.0.1:9400"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("--platform sim"), std::string::npos) << r.err;
}

TEST(MonitorCli, BadInputIsOneLineAndExitTwo) {
  expect_error({"monitor"}, 2, "give a command to measure after '--'");
  expect_error({"monitor", "--interval-ms", "0", "--", "true"}, 2, "--interval-ms 0 must be between");
  expect_error({"monitor", "--listen", "127.0.0.1:9400", "--", "true"}, 2, "not both");
  expect_error({"monitor", "--listen", "nonsense"}, 2, "expected HOST:PORT");
  expect_error({"monitor", "--listen", "127.0.0.1:0", "--hostname-label", "host"}, 2,
               "--hostname-label 'host' must be hostname");
}

// `--listen` with no address serves at the documented default, 127.0.0.1:9400.
TEST_F(FakeNvmlMonitor, ListenAloneServesAtTheDefaultAddress) {
  test::ChildProcess child({GPUCAP_CLI_PATH, "monitor", "--listen"});
  EXPECT_EQ(test::read_metrics_url(child), "http://127.0.0.1:9400/metrics");
  child.signal(SIGTERM);
  EXPECT_TRUE(child.wait(10.0).has_value());
}

// Dashboards written before dcgm-exporter's 2026-05 rename get the old spelling on request.
TEST_F(FakeNvmlMonitor, TheOldHostnameSpellingOnRequest) {
  test::ChildProcess child({GPUCAP_CLI_PATH, "monitor", "--listen", "127.0.0.1:0", "--hostname-label", "Hostname"});
  const auto url = test::read_metrics_url(child);
  ASSERT_FALSE(url.empty());
  const auto text = test::scrape(url);
  ASSERT_TRUE(text.has_value());
  EXPECT_NE(text->find(R"(modelName="NVIDIA A100-SXM4-40GB",Hostname=")"), std::string::npos) << *text;
  EXPECT_EQ(text->find("hostname="), std::string::npos);
  child.signal(SIGTERM);
  EXPECT_TRUE(child.wait(10.0).has_value());
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
  // The command says when it runs: gpucap's handlers are in place before it starts the command,
  // and a fixed wait is not enough where gpucap starts slowly (an ASan build: 1-3 s).
  test::ChildProcess child({GPUCAP_CLI_PATH, "monitor", "--json", "--", "sh", "-c", "echo started; exec sleep 30"});
  const auto started = child.read_line(30.0);
  ASSERT_TRUE(started.has_value()) << "the command never started";
  ASSERT_EQ(*started, "started");
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

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  for (const auto line : split(text, '\n')) {
    if (!trim(line).empty()) out.emplace_back(line);
  }
  return out;
}

// `sh -c '...; exit 3'` measured: its exit code passed on (not 137: it was not killed), in the
// report too, and exactly one warning line on stderr, containing `warning`. The JSON report.
nlohmann::json expect_exit_3_and_one_warning(const test::CliResult& r, const std::string& warning) {
  EXPECT_EQ(r.exit_code, 3) << r.err;
  const auto warnings = lines_of(r.err);
  EXPECT_EQ(warnings.size(), 1U) << r.err;
  EXPECT_NE(r.err.find(warning), std::string::npos) << r.err;
  const auto report = last_json(r.out);
  EXPECT_EQ(report.at("exit_code"), 3);
  return report;
}

// A --csv that cannot be written once the command runs (/dev/full: the first flush fails) stops
// the timeline with one warning; the command runs to its end and its exit code is gpucap's.
TEST_F(FakeNvmlMonitor, AFailedCsvWriteStopsTheTimelineNotTheCommand) {
  const auto r = gpucap({"monitor", "--json", "--csv", "/dev/full", "--", "sh", "-c", "sleep 0.3; exit 3"});
  const auto report = expect_exit_3_and_one_warning(r, "gpucap monitor: warning: --csv /dev/full: write failed");
  EXPECT_TRUE(report.at("complete").get<bool>());
  EXPECT_FALSE(report.at("timeline").at("complete").get<bool>());
  EXPECT_GE(report.at("time_s").get<double>(), 0.3);
}

// NVML's readings start failing while the command runs: one warning, the command is waited for,
// and the report covers it up to the last good reading, marked incomplete.
TEST_F(FakeNvmlMonitor, ReadingsThatStartFailingMarkTheReportIncompleteAndTheCommandRunsOn) {
  test::FakeNvmlGpu failing(true, {{"fail_after", {{"nvmlDeviceGetPowerUsage", {3, 999}}}}});
  const auto r = gpucap({"monitor", "--json", "--interval-ms", "20", "--", "sh", "-c", "sleep 0.5; exit 3"});
  const auto report = expect_exit_3_and_one_warning(r, "gpucap monitor: warning: reading the GPUs failed");
  EXPECT_FALSE(report.at("complete").get<bool>());
  EXPECT_NE(report.at("incomplete_reason").get<std::string>().find("readings of the GPUs failed"), std::string::npos);
  EXPECT_EQ(report.at("samples"), 3);  // the 3 readings that succeeded
  const double time_s = report.at("time_s");
  EXPECT_GT(time_s, 0.0);
  EXPECT_LT(time_s, 0.5);  // up to the last good reading, not the command's end
  EXPECT_NEAR(report.at("energy_j").get<double>(), kFakePowerW * time_s, 1e-2 * kFakePowerW * time_s + 1.0);

  const auto text = gpucap({"monitor", "--", "true"});  // the fake's count starts again: this one is fine
  EXPECT_EQ(text.out.find("INCOMPLETE"), std::string::npos) << text.out;
}

// A driver reset sends NVML's counter back towards 0 mid-run: the measured energy goes on from
// where it was instead of wrapping to ~1.8e13 J, and the timeline's energy never decreases.
TEST_F(FakeNvmlMonitor, AnEnergyCounterResetDoesNotWrap) {
  test::FakeNvmlGpu reset(true, {{"energy_mj", {5000000, 5100000, 5200000, 100000, 300000}}});
  test::TempDir dir;
  const auto csv = dir.file("timeline.csv");
  const auto r = gpucap({"monitor", "--json", "--csv", csv, "--interval-ms", "20", "--", "sleep", "0.2"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const double energy_j = last_json(r.out).at("energy_j");
  // Open 5000 J, monitor 5100 J, window 5200 J, reset (+100 J), +200 J: 300 J in the window.
  EXPECT_DOUBLE_EQ(energy_j, 300.0);
  double last_j = 0.0;
  const auto rows = lines_of(read_text_file(csv));
  ASSERT_GE(rows.size(), 3U);
  for (std::size_t i = 1; i < rows.size(); ++i) {
    const double row_j = std::stod(std::string(split(rows[i], ',')[3]));
    EXPECT_GE(row_j, last_j) << rows[i];
    last_j = row_j;
  }
}

// The command's pid as a child of `parent`, once it has one (within 10 s); 0 if it never did.
pid_t first_child_of(pid_t parent) {
  const auto path = fmt::format("/proc/{}/task/{}/children", parent, parent);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    std::ifstream in(path);
    pid_t child = 0;
    if (in >> child && child > 0) return child;
  }
  return 0;
}

// A SIGTERM to gpucap the moment its command exists (before exec, or just after): held until the
// command's pid is known, then passed on — gpucap does not die with the command left running.
TEST_F(FakeNvmlMonitor, ASignalWhileTheCommandStartsIsPassedOnNotLost) {
  if (!std::filesystem::exists(fmt::format("/proc/{}/task/{}/children", getpid(), getpid()))) {
    GTEST_SKIP() << "this kernel has no /proc/PID/task/TID/children";
  }
  test::ChildProcess child({GPUCAP_CLI_PATH, "monitor", "--json", "--", "sleep", "30"});
  const pid_t command = first_child_of(child.pid());
  ASSERT_GT(command, 0) << "gpucap monitor started no command";
  child.signal(SIGTERM);
  const auto status = child.wait(10.0);
  ASSERT_TRUE(status.has_value()) << "gpucap monitor did not end after SIGTERM";
  ASSERT_TRUE(WIFEXITED(*status)) << "gpucap died of signal " << WTERMSIG(*status);
  EXPECT_EQ(WEXITSTATUS(*status), 128 + SIGTERM);
  EXPECT_NE(::kill(command, 0), 0) << "the command was left running";
  std::string out;
  while (const auto line = child.read_line(5.0)) out += *line + "\n";
  EXPECT_EQ(last_json(out).at("exit_code"), 128 + SIGTERM);
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

}  // namespace
}  // namespace gpucap
