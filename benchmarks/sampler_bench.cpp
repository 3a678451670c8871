// CPU overhead of the power sampler thread (runtime/power_sampler.hpp) reading NVML: the fake
// NVML the tests build stands in for the driver, so this measures gpucap's own cost (thread
// wake-ups, the ring buffer, the NVML call path) — a real driver's call adds its own time (on the
// order of 0.1 ms per nvmlDeviceGetPowerUsage).

#include <benchmark/benchmark.h>
#include <sys/resource.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "gpucap/device/nvml_device.hpp"
#include "gpucap/runtime/nvml_platform.hpp"
#include "gpucap/runtime/power_sampler.hpp"

namespace {

double process_cpu_s() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  const auto seconds = [](const timeval& t) { return static_cast<double>(t.tv_sec) + 1e-6 * static_cast<double>(t.tv_usec); };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

std::string fake_state_file() {
  const auto path = (std::filesystem::temp_directory_path() / "gpucap-bench-nvml.json").string();
  std::ofstream(path) << R"({"devices": [{"name": "bench GPU", "uuid": "GPU-bench", "bus_id": "0", "power_mw": 100000,
    "power_limit_mw": 250000, "power_limit_min_mw": 100000, "power_limit_max_mw": 250000,
    "power_limit_default_mw": 250000, "memory_clocks_mhz": [5001], "graphics_clocks_mhz": [1500, 500]}]})";
  return path;
}

// One iteration = one second of sampling with the main thread asleep: the process's CPU time is
// the sampler's.
void BM_PowerSamplerCpu(benchmark::State& state) {
  setenv("GPUCAP_FAKE_NVML_STATE", fake_state_file().c_str(), 1);
  const gpucap::device::NvmlLibrary nvml(GPUCAP_BENCH_FAKE_NVML_PATH);
  gpucap::device::NvmlDevice gpu(nvml, 0);
  const gpucap::runtime::SteadyClock clock;
  const double rate_hz = static_cast<double>(state.range(0));
  double cpu_s = 0.0, wall_s = 0.0;
  std::size_t samples = 0;
  for (auto _ : state) {
    gpucap::runtime::PowerSampler sampler([&gpu] { return gpu.read(gpucap::device::Signal::power_w); },
                                          [&clock] { return clock.now_s(); }, rate_hz);
    const double cpu0 = process_cpu_s();
    const auto t0 = std::chrono::steady_clock::now();
    std::this_thread::sleep_for(std::chrono::seconds(1));
    sampler.take_until(1e18, [&samples](const gpucap::PowerSample&) { ++samples; });
    cpu_s += process_cpu_s() - cpu0;
    wall_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  state.counters["cpu_pct_of_one_core"] = 100.0 * cpu_s / wall_s;
  state.counters["samples_per_s"] = static_cast<double>(samples) / wall_s;
}
BENCHMARK(BM_PowerSamplerCpu)->Arg(100)->Arg(1000)->Iterations(3)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
