// The monitor's sampling overhead (monitor/session.hpp, monitor/gpu_exporter.hpp): one tick of
// `gpucap monitor -- CMD` (every signal of a GPU read, energy brought up to now) and one scrape's
// work of the exporter (read + render), on the fake NVML the tests build — gpucap's own cost; a
// real driver adds its calls' time (on the order of 0.1 ms each). And a window's cost on the twin.

#include <benchmark/benchmark.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "gpucap/device/nvml_device.hpp"
#include "gpucap/monitor/gpu_exporter.hpp"
#include "gpucap/monitor/session.hpp"
#include "gpucap/monitor/work_metrics.hpp"

namespace {

void use_fake_nvml(bool energy_counter) {
  const auto path = (std::filesystem::temp_directory_path() / "gpucap-bench-monitor-nvml.json").string();
  std::ofstream(path) << R"({"devices": [{"name": "bench GPU", "uuid": "GPU-bench", "bus_id": "00000000:01:00.0",
    "power_mw": 100000, )" << (energy_counter ? R"("energy_mj": 1000, )" : "")
                      << R"("power_limit_mw": 250000, "power_limit_min_mw": 100000, "power_limit_max_mw": 250000,
    "power_limit_default_mw": 250000, "memory_clocks_mhz": [5001], "graphics_clocks_mhz": [1500, 500],
    "sm_clock_mhz": 1500, "memory_clock_mhz": 5001, "utilization_gpu": 90, "utilization_memory": 30,
    "temperature_c": 50}]})";
  setenv("GPUCAP_FAKE_NVML_STATE", path.c_str(), 1);
}

// One sampling tick of `gpucap monitor -- CMD`; range(0): 1 = the GPU has an energy counter.
void BM_MonitorSessionTick(benchmark::State& state) {
  use_fake_nvml(state.range(0) == 1);
  const gpucap::device::NvmlLibrary nvml(GPUCAP_BENCH_FAKE_NVML_PATH);
  gpucap::device::NvmlDevice gpu(nvml, 0, false);
  gpucap::monitor::Session session({&gpu}, gpucap::monitor::steady_seconds_clock());
  for (auto _ : state) benchmark::DoNotOptimize(session.sample());
}
BENCHMARK(BM_MonitorSessionTick)->Arg(1)->Arg(0);

// What one scrape of `gpucap monitor --listen` costs before HTTP: read the GPU, render the text.
void BM_ExporterScrapeWork(benchmark::State& state) {
  use_fake_nvml(true);
  const gpucap::device::NvmlLibrary nvml(GPUCAP_BENCH_FAKE_NVML_PATH);
  gpucap::device::NvmlDevice gpu(nvml, 0, false);
  gpucap::monitor::MetricsRegistry registry;
  gpucap::monitor::GpuExporter exporter(registry, {&gpu}, {gpucap::monitor::nvml_identity(gpu.info(), "bench")},
                                        gpucap::monitor::steady_seconds_clock());
  gpucap::monitor::WorkMetrics work(registry, {{"algorithm", "batchdvfs"}, {"model", "resnet50"}});
  work.window(gpucap::monitor::WindowFigures{});
  std::size_t bytes = 0;
  for (auto _ : state) {
    exporter.publish();
    const auto text = registry.render();
    bytes = text.size();
    benchmark::DoNotOptimize(text);
  }
  state.counters["bytes"] = static_cast<double>(bytes);
}
BENCHMARK(BM_ExporterScrapeWork);

// A begin/end pair of a named window on a GPU with a counter.
void BM_MonitorWindow(benchmark::State& state) {
  use_fake_nvml(true);
  const gpucap::device::NvmlLibrary nvml(GPUCAP_BENCH_FAKE_NVML_PATH);
  gpucap::device::NvmlDevice gpu(nvml, 0, false);
  gpucap::monitor::Monitor monitor({&gpu}, gpucap::monitor::steady_seconds_clock());
  for (auto _ : state) {
    monitor.begin_window("step");
    benchmark::DoNotOptimize(monitor.end_window("step"));
  }
}
BENCHMARK(BM_MonitorWindow);

}  // namespace
