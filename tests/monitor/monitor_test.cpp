// The monitor API: named windows over GPUs, from the energy counter or integrated power, nested,
// overlapping and from several threads; on fake Devices, the twin and (gpu_metrics_test) the fake
// NVML.

#include "gpucap/monitor/monitor.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "gpucap/core/error.hpp"
#include "gpucap/sim/catalog.hpp"
#include "gpucap/sim/sim_device.hpp"
#include "support/fake_gpu.hpp"
#include "support/paths.hpp"

namespace gpucap::monitor {
namespace {

using test::FakeClock;
using test::FakeGpu;

TEST(Monitor, AWindowIsEachCountersDifferenceAndTheirSum) {
  FakeGpu a;
  FakeGpu b;
  FakeClock clock;
  a.energy_j = 1000.0;
  Monitor monitor({&a, &b}, clock.function());
  clock.now_s = 5.0;
  monitor.begin_window("epoch");
  a.energy_j += 300.0;
  b.energy_j += 200.0;
  clock.now_s = 7.5;
  const auto m = monitor.end_window("epoch");
  EXPECT_EQ(m.name, "epoch");
  EXPECT_DOUBLE_EQ(m.time_s, 2.5);
  ASSERT_EQ(m.energy_j.size(), 2u);
  EXPECT_DOUBLE_EQ(m.energy_j[0], 300.0);
  EXPECT_DOUBLE_EQ(m.energy_j[1], 200.0);
  EXPECT_DOUBLE_EQ(m.total_energy_j, 500.0);
  EXPECT_EQ(m.sources, (std::vector<EnergySource>{EnergySource::counter, EnergySource::counter}));
  EXPECT_FALSE(m.simulated);
  EXPECT_FALSE(monitor.window_open("epoch"));
}

TEST(Monitor, WithoutACounterPowerIsIntegratedBetweenSamples) {
  FakeGpu gpu("Old GPU", /*energy_counter=*/false);
  FakeClock clock;
  gpu.power_w = 100.0;
  Monitor monitor({&gpu}, clock.function());
  monitor.begin_window("w");
  clock.now_s = 1.0;
  gpu.power_w = 200.0;
  monitor.sample();  // trapezoid: 150 J
  clock.now_s = 3.0;
  const auto m = monitor.end_window("w");  // 2 s at 200 W: 400 J
  EXPECT_DOUBLE_EQ(m.energy_j[0], 550.0);
  EXPECT_DOUBLE_EQ(m.time_s, 3.0);
  EXPECT_EQ(m.sources[0], EnergySource::integrated);
}

TEST(Monitor, WindowsNestAndOverlap) {
  FakeGpu gpu;
  FakeClock clock;
  Monitor monitor({&gpu}, clock.function());
  monitor.begin_window("training");            // t=0, 0 J
  clock.now_s = 1.0;
  gpu.energy_j = 100.0;
  monitor.begin_window("epoch 1");             // t=1, 100 J
  clock.now_s = 2.0;
  gpu.energy_j = 250.0;
  monitor.begin_window("checkpoint");          // t=2, 250 J: overlaps epoch 1 and outlives it
  clock.now_s = 3.0;
  gpu.energy_j = 300.0;
  const auto epoch = monitor.end_window("epoch 1");
  EXPECT_DOUBLE_EQ(epoch.time_s, 2.0);
  EXPECT_DOUBLE_EQ(epoch.total_energy_j, 200.0);
  EXPECT_EQ(monitor.open_windows(), (std::vector<std::string>{"checkpoint", "training"}));
  clock.now_s = 4.0;
  gpu.energy_j = 340.0;
  EXPECT_DOUBLE_EQ(monitor.end_window("checkpoint").total_energy_j, 90.0);
  EXPECT_DOUBLE_EQ(monitor.end_window("training").total_energy_j, 340.0);
}

TEST(Monitor, RefusesAWindowOpenTwiceOrClosedUnopened) {
  FakeGpu gpu;
  FakeClock clock;
  Monitor monitor({&gpu}, clock.function());
  monitor.begin_window("a");
  EXPECT_THROW(monitor.begin_window("a"), Error);
  EXPECT_THROW((void)monitor.end_window("b"), Error);
  (void)monitor.end_window("a");
  EXPECT_THROW((void)monitor.end_window("a"), Error);
}

TEST(Monitor, RefusesNoGpusAndGpusWithNothingToMeasure) {
  FakeClock clock;
  EXPECT_THROW(Monitor({}, clock.function()), Error);
  class Blind final : public device::Device {
   public:
    [[nodiscard]] std::string name() const override { return "blind"; }
    [[nodiscard]] bool simulated() const override { return false; }
    [[nodiscard]] bool has_signal(device::Signal /*s*/) const override { return false; }
    [[nodiscard]] double read(device::Signal /*s*/) override { return 0.0; }
    [[nodiscard]] bool has_control(device::Control /*c*/) const override { return false; }
    [[nodiscard]] bool can_write(device::Control /*c*/) const override { return false; }
    [[nodiscard]] device::ControlRange range(device::Control /*c*/) const override { return {}; }
    [[nodiscard]] device::ControlValue read_control(device::Control /*c*/) override { return std::nullopt; }
    void write_control(device::Control /*c*/, device::ControlValue /*v*/) override {}
  } blind;
  try {
    Monitor monitor({&blind}, clock.function());
    FAIL() << "a GPU with neither energy nor power was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::unsupported);
  }
}

// A clock that moves one second at every call, and a GPU drawing a constant 100 W on it: its
// counter is 100 J × the seconds so far, or (without a counter) its power is integrated. Every
// Monitor call reads the clock, then the GPU, under the monitor's lock, so each window's energy is
// exactly 100 W × its time whatever the other threads do.
class TickingGpu final : public device::Device {
 public:
  static constexpr double kPowerW = 100.0;
  explicit TickingGpu(bool energy_counter) : energy_counter_(energy_counter) {}
  [[nodiscard]] SecondsClock clock() {
    return [this] { return static_cast<double>(++ticks_); };
  }
  [[nodiscard]] std::string name() const override { return "ticking"; }
  [[nodiscard]] bool simulated() const override { return false; }
  [[nodiscard]] bool has_signal(device::Signal s) const override {
    return s == device::Signal::power_w || (s == device::Signal::energy_j && energy_counter_);
  }
  [[nodiscard]] double read(device::Signal s) override {
    return s == device::Signal::energy_j ? kPowerW * static_cast<double>(ticks_.load()) : kPowerW;
  }
  [[nodiscard]] bool has_control(device::Control /*c*/) const override { return false; }
  [[nodiscard]] bool can_write(device::Control /*c*/) const override { return false; }
  [[nodiscard]] device::ControlRange range(device::Control /*c*/) const override { return {}; }
  [[nodiscard]] device::ControlValue read_control(device::Control /*c*/) override { return std::nullopt; }
  void write_control(device::Control /*c*/, device::ControlValue /*v*/) override {}

 private:
  bool energy_counter_;
  std::atomic<long> ticks_{0};
};

// Threads open and close nested windows of their own, overlapping each other's and one around
// them all, while time moves at every call: each window is exactly power × its own time, a nested
// window's energy is inside its parent's, and the window around all of them holds the energy of
// every call the threads made.
TEST(Monitor, NestedAndOverlappingWindowsFromManyThreadsAddUp) {
  for (const bool counter : {true, false}) {
    SCOPED_TRACE(counter ? "energy counter" : "integrated power");
    TickingGpu gpu(counter);
    Monitor monitor({&gpu}, gpu.clock());
    constexpr std::size_t kThreads = 4;
    constexpr int kEpochs = 50;
    constexpr int kSteps = 3;
    monitor.begin_window("all");
    std::vector<std::thread> threads;
    std::vector<int> exact(kThreads, 0);
    std::vector<int> nested(kThreads, 0);
    for (std::size_t t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        const auto prefix = "t" + std::to_string(t);
        for (int e = 0; e < kEpochs; ++e) {
          monitor.begin_window(prefix + " epoch");
          double steps_j = 0.0;
          double steps_s = 0.0;
          for (int i = 0; i < kSteps; ++i) {
            monitor.begin_window(prefix + " step");
            monitor.sample();
            const auto step = monitor.end_window(prefix + " step");
            steps_j += step.total_energy_j;
            steps_s += step.time_s;
            if (step.time_s >= 2.0 && step.total_energy_j == TickingGpu::kPowerW * step.time_s) ++exact[t];
          }
          const auto epoch = monitor.end_window(prefix + " epoch");
          if (epoch.total_energy_j == TickingGpu::kPowerW * epoch.time_s) ++exact[t];
          if (steps_s < epoch.time_s && steps_j < epoch.total_energy_j) ++nested[t];
        }
      });
    }
    for (auto& thread : threads) thread.join();
    const auto all = monitor.end_window("all");
    for (std::size_t t = 0; t < kThreads; ++t) {
      EXPECT_EQ(exact[t], kEpochs * (kSteps + 1));
      EXPECT_EQ(nested[t], kEpochs);
    }
    // Every begin, sample and end of every thread moved the clock once; the window around them saw
    // all of it.
    EXPECT_EQ(all.total_energy_j, TickingGpu::kPowerW * all.time_s);
    EXPECT_GE(all.time_s, static_cast<double>(kThreads) * kEpochs * (2.0 + kSteps * 3.0));
    EXPECT_TRUE(monitor.open_windows().empty());
  }
}

TEST(Monitor, OnTheTwinItReadsTheTwinsCounterAndVirtualClock) {
  const auto catalog = sim::Catalog::load(test::data_dir());
  sim::GpuTwin twin{catalog.gpu("p40"), catalog.model("resnet50"), sim::Precision::fp32, 1};
  device::SimDevice gpu(twin, false);
  Monitor monitor({&gpu}, [&twin] { return twin.now_s(); });
  EXPECT_TRUE(monitor.simulated());
  const double energy_before_j = twin.energy_j();
  const double start_s = twin.now_s();
  monitor.begin_window("batches");
  for (int i = 0; i < 5; ++i) (void)twin.run_batch(32);
  const auto m = monitor.end_window("batches");
  EXPECT_TRUE(m.simulated);
  EXPECT_DOUBLE_EQ(m.time_s, twin.now_s() - start_s);
  EXPECT_DOUBLE_EQ(m.total_energy_j, twin.energy_j() - energy_before_j);
  EXPECT_GT(m.total_energy_j, 0.0);
}

}  // namespace
}  // namespace gpucap::monitor
