// GPUs under dcgm-exporter's names, and monitor windows against known power on the fake NVML
// (loaded through the real dlopen path): its energy counter moves at the scripted power, so a
// window's energy is that power times the window's time.

#include "gpucap/monitor/gpu_metrics.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <thread>

#include "gpucap/core/error.hpp"
#include "gpucap/monitor/gpu_exporter.hpp"
#include "gpucap/monitor/monitor.hpp"
#include "gpucap/monitor/session.hpp"
#include "gpucap/sim/catalog.hpp"
#include "gpucap/sim/sim_device.hpp"
#include "support/fake_nvml_gpu.hpp"
#include "support/paths.hpp"

namespace gpucap::monitor {
namespace {

constexpr double kFakePowerW = 120.0;  // FakeNvmlGpu's power_mw
constexpr double kOneCallSkewS = 0.01;

void sleep_s(double seconds) { std::this_thread::sleep_for(std::chrono::duration<double>(seconds)); }

// The window's clock and the counter are read one NVML call apart; the fake's calls read and write
// its state file, which under ASan on a busy 2-core machine took over a millisecond (a 0.40088-s
// window read 48.26 J, 0.32 % over 120 W): 10 ms of the power is allowed for that, on top of 0.1 %.
TEST(FakeNvmlWindows, TheCounterGivesPowerTimesTimeToATenthOfAPercentAndOneCallsSkew) {
  test::FakeNvmlGpu fake(/*energy_counter=*/true);
  device::NvmlLibrary nvml(GPUCAP_FAKE_NVML_PATH);
  device::NvmlDevice gpu(nvml, 0, false);
  Monitor monitor({&gpu}, steady_seconds_clock());
  monitor.begin_window("outer");
  sleep_s(0.2);
  monitor.begin_window("inner");
  sleep_s(0.4);
  const auto inner = monitor.end_window("inner");
  const auto outer = monitor.end_window("outer");
  for (const auto& m : {inner, outer}) {
    EXPECT_EQ(m.sources[0], EnergySource::counter);
    EXPECT_NEAR(m.total_energy_j, kFakePowerW * m.time_s, kFakePowerW * (1e-3 * m.time_s + kOneCallSkewS)) << m.name;
  }
  EXPECT_GT(outer.time_s, inner.time_s);
  EXPECT_FALSE(outer.simulated);
}

TEST(FakeNvmlWindows, WithoutACounterTheIntegralOfConstantPowerIsExact) {
  test::FakeNvmlGpu fake(/*energy_counter=*/false);
  device::NvmlLibrary nvml(GPUCAP_FAKE_NVML_PATH);
  device::NvmlDevice gpu(nvml, 0, false);
  Monitor monitor({&gpu}, steady_seconds_clock());
  monitor.begin_window("w");
  for (int i = 0; i < 5; ++i) {
    sleep_s(0.05);
    monitor.sample();
  }
  const auto m = monitor.end_window("w");
  EXPECT_EQ(m.sources[0], EnergySource::integrated);
  EXPECT_NEAR(m.total_energy_j, kFakePowerW * m.time_s, 1e-9);
}

TEST(FakeNvmlWindows, ScriptedPowerStepsAreIntegratedAsTrapezoids) {
  // One reading per call: 100 W at the monitor's start, 100 W at begin, then 300 W, 300 W.
  test::FakeNvmlGpu fake(/*energy_counter=*/false, {{"power_mw", {100000, 100000, 300000}}});
  device::NvmlLibrary nvml(GPUCAP_FAKE_NVML_PATH);
  device::NvmlDevice gpu(nvml, 0, false);
  double now_s = 0.0;
  Monitor monitor({&gpu}, [&now_s] { return now_s; });  // reading 1: 100 W at t=0
  monitor.begin_window("w");                            // reading 2: 100 W at t=0
  now_s = 1.0;
  monitor.sample();                                     // reading 3: 300 W at t=1 → 200 J
  now_s = 3.0;
  const auto m = monitor.end_window("w");               // reading 4: 300 W at t=3 → 600 J
  EXPECT_DOUBLE_EQ(m.total_energy_j, 800.0);
}

TEST(GpuMetrics, AnNvmlGpuHasDcgmExportersLabels) {
  test::FakeNvmlGpu fake;
  device::NvmlLibrary nvml(GPUCAP_FAKE_NVML_PATH);
  device::NvmlDevice gpu(nvml, 0, false);
  const auto labels = dcgm_labels(nvml_identity(gpu.info(), "node7"));
  EXPECT_EQ(labels, (Labels{{"gpu", "0"},
                            {"UUID", "GPU-run"},
                            {"pci_bus_id", "00000000:07:00.0"},
                            {"device", "nvidia0"},
                            {"modelName", "NVIDIA A100-SXM4-40GB"},
                            {"hostname", "node7"}}));
  const auto r = read_gpu(gpu, 12.5);
  EXPECT_DOUBLE_EQ(r.power_w, 120.0);
  EXPECT_DOUBLE_EQ(r.sm_clock_mhz, 1410.0);
  EXPECT_DOUBLE_EQ(r.memory_clock_mhz, 1215.0);
  EXPECT_DOUBLE_EQ(r.utilization_pct, 90.0);
  EXPECT_DOUBLE_EQ(r.temperature_c, 45.0);
  EXPECT_DOUBLE_EQ(r.power_limit_w, 400.0);
  MetricsRegistry registry;
  declare_dcgm_metrics(registry);
  publish_dcgm(registry, nvml_identity(gpu.info(), "node7"), r);
  EXPECT_DOUBLE_EQ(registry.value("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", labels), 12500.0);  // mJ
  EXPECT_DOUBLE_EQ(registry.value("DCGM_FI_DEV_GPU_UTIL", labels), 90.0);
}

TEST(GpuMetrics, TheTwinSaysItIsSimulatedAndLeavesOutWhatItLacks) {
  const auto catalog = sim::Catalog::load(test::data_dir());
  sim::GpuTwin twin{catalog.gpu("p40"), catalog.model("resnet50"), sim::Precision::fp32, 1};
  device::SimDevice gpu(twin, false);
  const auto id = twin_identity(0, "Tesla P40", "host");
  const auto labels = dcgm_labels(id);
  EXPECT_EQ(labels.back(), (std::pair<std::string, std::string>{"simulated", "true"}));
  EXPECT_NE(id.uuid.find("SIMULATED"), std::string::npos);
  EXPECT_NE(id.model_name.find("simulated"), std::string::npos);
  const auto r = read_gpu(gpu, 0.0);
  EXPECT_TRUE(std::isnan(r.temperature_c));
  EXPECT_TRUE(std::isnan(r.memory_utilization_pct));
  EXPECT_GT(r.sm_clock_mhz, 0.0);
  EXPECT_DOUBLE_EQ(r.power_limit_w, catalog.gpu("p40").power_limit_default_w);
  // What the twin lacks is left out of the exposition, not exported as a number.
  MetricsRegistry registry;
  declare_dcgm_metrics(registry);
  publish_dcgm(registry, id, r);
  const auto text = registry.render();
  EXPECT_EQ(text.find("DCGM_FI_DEV_GPU_TEMP{"), std::string::npos) << text;
  EXPECT_EQ(text.find("DCGM_FI_DEV_MEM_COPY_UTIL{"), std::string::npos) << text;
  EXPECT_NE(text.find("DCGM_FI_DEV_SM_CLOCK{"), std::string::npos) << text;
}

TEST(GpuMetrics, TheHostLabelIsSpelledAsAsked) {
  auto id = twin_identity(0, "Tesla P40", "node7");
  EXPECT_EQ(dcgm_labels(id)[5], (std::pair<std::string, std::string>{"hostname", "node7"}));
  id.hostname_label = parse_hostname_label("Hostname");
  EXPECT_EQ(dcgm_labels(id)[5], (std::pair<std::string, std::string>{"Hostname", "node7"}));
  EXPECT_THROW((void)parse_hostname_label("HOSTNAME"), gpucap::Error);
}

TEST(Exposition, AnUnknownValueRemovesItsSeries) {
  MetricsRegistry registry;
  registry.declare("g", MetricType::gauge, "a gauge");
  registry.set_if_known("g", {{"a", "1"}}, 2.0);
  EXPECT_NE(registry.render().find("g{a=\"1\"} 2"), std::string::npos);
  registry.set_if_known("g", {{"a", "1"}}, std::nan(""));
  EXPECT_EQ(registry.render().find("g{a="), std::string::npos);
}

TEST(GpuExporter, PublishesEveryDcgmMetricForEveryGpu) {
  test::FakeNvmlGpu fake;
  device::NvmlLibrary nvml(GPUCAP_FAKE_NVML_PATH);
  device::NvmlDevice gpu(nvml, 0, false);
  MetricsRegistry registry;
  GpuExporter exporter(registry, {&gpu}, {nvml_identity(gpu.info(), "h")}, steady_seconds_clock());
  EXPECT_FALSE(exporter.integrates_power());
  exporter.publish();
  const auto text = registry.render();
  for (const auto& name : dcgm_metric_names()) {
    EXPECT_NE(text.find(name + "{gpu=\"0\",UUID=\"GPU-run\""), std::string::npos) << name;
  }
}

TEST(Session, ReportsTimeEnergyMeanAndMaxPowerAndATimeline) {
  // Readings: 100 W at the start (twice: the monitor, the window), then 300 W from t=1 on.
  test::FakeNvmlGpu fake(/*energy_counter=*/false, {{"power_mw", {100000, 100000, 300000}}});
  device::NvmlLibrary nvml(GPUCAP_FAKE_NVML_PATH);
  device::NvmlDevice gpu(nvml, 0, false);
  double now_s = 0.0;
  Session session({&gpu}, [&now_s] { return now_s; });
  now_s = 1.0;
  const auto samples = session.sample();
  ASSERT_EQ(samples.size(), 1u);
  EXPECT_DOUBLE_EQ(samples[0].time_s, 1.0);
  now_s = 2.0;
  const auto report = session.finish();
  EXPECT_DOUBLE_EQ(report.time_s, 2.0);
  EXPECT_EQ(report.gpus[0].source, EnergySource::integrated);
  EXPECT_DOUBLE_EQ(report.total_energy_j, 200.0 + 300.0);  // trapezoids 0-1 s and 1-2 s
  EXPECT_DOUBLE_EQ(report.mean_power_w, 250.0);
  EXPECT_DOUBLE_EQ(report.max_power_w, 300.0);
  EXPECT_EQ(report.samples, 2u);
  EXPECT_EQ(timeline_csv_row(samples[0], false).substr(0, 8), "1.000,0,");
  EXPECT_EQ(timeline_csv_header().substr(0, 15), "time_s,gpu,powe");
}

}  // namespace
}  // namespace gpucap::monitor
