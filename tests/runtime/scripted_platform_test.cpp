// The Runner on a scripted platform: batches of fixed length, power as a function of time, and
// a meter that samples it at whole multiples of its period. Exact expectations, no twin.

#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "gpucap/core/error.hpp"
#include "gpucap/runtime/runner.hpp"

namespace gpucap::runtime {
namespace {

class ScriptedPlatform final : public Platform {
 public:
  ScriptedPlatform(double batch_s, double sample_hz, std::function<double(double)> power_w)
      : engine_(*this, batch_s), meter_(sample_hz, std::move(power_w)) {}

  [[nodiscard]] bool simulated() const override { return true; }
  [[nodiscard]] std::string description() const override { return "scripted"; }
  [[nodiscard]] Clock& clock() override { return clock_; }
  [[nodiscard]] engine::Engine& engine() override { return engine_; }
  [[nodiscard]] device::Device& device() override { return device_; }
  [[nodiscard]] PowerMeter& meter() override { return meter_; }
  [[nodiscard]] control::PlatformLimits controller_limits() const override { return {}; }
  void wait(double seconds) override { now_s += seconds; }

  double now_s = 0.0;

 private:
  struct ScriptClock final : Clock {
    explicit ScriptClock(const ScriptedPlatform& p) : platform(p) {}
    [[nodiscard]] double now_s() const override { return platform.now_s; }
    const ScriptedPlatform& platform;
  };
  struct ScriptEngine final : engine::Engine {
    ScriptEngine(ScriptedPlatform& p, double s) : platform(p), batch_s(s) {}
    [[nodiscard]] std::string name() const override { return "scripted"; }
    engine::BatchResult run_batch(int batch_size) override {
      const double start = platform.now_s;
      platform.now_s += batch_s;
      return {batch_size, start, platform.now_s, 0, {}};
    }
    ScriptedPlatform& platform;
    double batch_s;
  };
  struct NoControlsDevice final : device::Device {
    [[nodiscard]] std::string name() const override { return "scripted device"; }
    [[nodiscard]] bool simulated() const override { return true; }
    [[nodiscard]] bool has_signal(device::Signal /*s*/) const override { return true; }
    [[nodiscard]] double read(device::Signal /*s*/) override { return 0.0; }
    [[nodiscard]] bool has_control(device::Control /*c*/) const override { return false; }
    [[nodiscard]] bool can_write(device::Control /*c*/) const override { return false; }
    [[nodiscard]] device::ControlRange range(device::Control /*c*/) const override { return {}; }
    [[nodiscard]] device::ControlValue read_control(device::Control /*c*/) override { return std::nullopt; }
    void write_control(device::Control /*c*/, device::ControlValue /*v*/) override {
      throw Error(ErrorCode::internal, "no controls");
    }
  };
  struct FunctionMeter final : PowerMeter {
    FunctionMeter(double hz, std::function<double(double)> f) : hz_(hz), power(std::move(f)) {}
    [[nodiscard]] double sample_hz() const override { return hz_; }
    void collect(double end_s, const SampleSink& sink) override {
      for (; next / hz_ <= end_s + 1e-12; next += 1.0) sink({next / hz_, power(next / hz_)});
    }
    double hz_;
    double next = 1.0;
    std::function<double(double)> power;
  };

  ScriptClock clock_{*this};
  ScriptEngine engine_;
  NoControlsDevice device_;
  FunctionMeter meter_;
};

std::unique_ptr<control::Controller> clipper_every(double seconds) {
  control::ControllerOptions options;
  options.window = control::DecisionPeriod::every_seconds(seconds);
  return control::make_controller("clipper", options, {});
}

TEST(RunnerOnScript, EachSampleIsJudgedAgainstTheCapInForceWhenItWasTaken) {
  ScriptedPlatform platform(1.0, 1.0, [](double) { return 80.0; });
  const auto controller = clipper_every(3.0);
  RunConfig config;
  config.images = 8;  // 8 batches of 1 image, 1 s each
  config.schedule = CapSchedule::parse("0:100,4:50");
  std::vector<TraceRow> rows;
  const auto summary = run_job(platform, *controller, config, [&rows](const TraceRow& r) { rows.push_back(r); });
  // Windows close at the first batch end after 3 s: t = 4 and t = 8.
  ASSERT_EQ(rows.size(), 2u);
  // First window: samples at 1, 2, 3 (cap 100) are under; the sample at 4 s meets the new 50-W cap.
  EXPECT_DOUBLE_EQ(rows[0].time_s, 4.0);
  EXPECT_DOUBLE_EQ(rows[0].cap_w, 50.0);
  EXPECT_TRUE(rows[0].over_cap);
  EXPECT_TRUE(rows[1].over_cap);
  EXPECT_EQ(summary.windows_over_cap, 2);
  EXPECT_DOUBLE_EQ(summary.time_over_cap_s, 5.0) << "samples at 4..8 s, one second each";
  EXPECT_DOUBLE_EQ(summary.max_power_w, 80.0);
}

TEST(RunnerOnScript, ARaisedCapEndsTheViolationAtItsTime) {
  ScriptedPlatform platform(1.0, 1.0, [](double) { return 80.0; });
  const auto controller = clipper_every(3.0);
  RunConfig config;
  config.images = 8;
  config.schedule = CapSchedule::parse("0:50,4:100");
  std::vector<TraceRow> rows;
  const auto summary = run_job(platform, *controller, config, [&rows](const TraceRow& r) { rows.push_back(r); });
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_TRUE(rows[0].over_cap) << "samples at 1, 2, 3 s were over the 50-W cap";
  EXPECT_FALSE(rows[1].over_cap);
  EXPECT_DOUBLE_EQ(summary.time_over_cap_s, 3.0);
}

TEST(RunnerOnScript, AFinalWindowWithoutSamplesIsNotAWindow) {
  // 0.4-s batches, one sample per second: windows close at 3.2 s; the last 0.4 s hold no sample.
  ScriptedPlatform platform(0.4, 1.0, [](double) { return 70.0; });
  const auto controller = clipper_every(3.0);
  RunConfig config;
  config.images = 9;
  config.schedule = CapSchedule::constant(100);
  std::vector<TraceRow> rows;
  const auto summary = run_job(platform, *controller, config, [&rows](const TraceRow& r) { rows.push_back(r); });
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].images, 8);
  EXPECT_EQ(summary.windows, 1);
  EXPECT_EQ(summary.images, 9) << "the last batch's image still counts";
  EXPECT_NEAR(summary.duration_s, 3.6, 1e-12);
}

TEST(RunnerOnScript, ABatchThatLeavesTheWindowWithoutASampleIsFollowedByTheWait) {
  // 0.1-s batches of one image (90 W holds Clipper in its band), a sample every 0.5 s, 3-s
  // windows. With the wait, a batch that ends before its window's first sample is followed by 1 s
  // idle, as the BatchDVFS harness slept before logging an empty sample list.
  const auto run = [](double wait_s, std::vector<TraceRow>* rows) {
    ScriptedPlatform platform(0.1, 2.0, [](double) { return 90.0; });
    const auto controller = clipper_every(3.0);
    RunConfig config;
    config.images = 60;
    config.schedule = CapSchedule::constant(100);
    config.wait_without_sample_s = wait_s;
    return run_job(platform, *controller, config, [rows](const TraceRow& r) { rows->push_back(r); });
  };
  std::vector<TraceRow> plain_rows, rows;
  const auto plain = run(0.0, &plain_rows);
  EXPECT_NEAR(plain.duration_s, 6.0, 1e-9);
  const auto waiting = run(1.0, &rows);
  EXPECT_EQ(waiting.images, 60);
  // The first batch (to 0.1 s, then 1 s idle) and the first after each decision end before a
  // sample: the windows close at 3.0 and 6.1 s (the first batch end 3 s after each start), so
  // three waits in all.
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_NEAR(rows[0].time_s, 3.0, 1e-9);
  EXPECT_NEAR(rows[1].time_s, 6.1, 1e-9);
  EXPECT_NEAR(waiting.duration_s, 9.0, 1e-9);
  for (const auto& row : rows) EXPECT_GT(row.samples, 0u);

  RunConfig bad;
  bad.images = 1;
  bad.wait_without_sample_s = -1.0;
  ScriptedPlatform platform(0.1, 2.0, [](double) { return 90.0; });
  const auto controller = clipper_every(3.0);
  EXPECT_THROW((void)run_job(platform, *controller, bad), Error);
}

TEST(RunnerOnScript, DurationLimitStopsAtTheNextBatchBoundary) {
  ScriptedPlatform platform(0.7, 10.0, [](double) { return 70.0; });
  const auto controller = clipper_every(3.0);
  RunConfig config;
  config.duration_s = 5.0;
  config.schedule = CapSchedule::constant(100);
  const auto summary = run_job(platform, *controller, config);
  EXPECT_NEAR(summary.duration_s, 5.6, 1e-12);  // 8 batches of 0.7 s
  EXPECT_GE(summary.images, 8);
}

TEST(RunnerOnScript, RunLimitsAreEnforced) {
  ScriptedPlatform platform(1.0, 1.0, [](double) { return 70.0; });
  const auto controller = clipper_every(3.0);
  RunConfig config;
  config.schedule = CapSchedule::constant(100);
  EXPECT_THROW((void)run_job(platform, *controller, config), Error) << "neither images nor duration";
  config.duration_s = std::nan("");
  EXPECT_THROW((void)run_job(platform, *controller, config), Error);
  config.duration_s = 1e12;
  EXPECT_THROW((void)run_job(platform, *controller, config), Error);
  config.duration_s = 0.0;
  config.images = kMaxRunImages + 1;
  EXPECT_THROW((void)run_job(platform, *controller, config), Error);
  EXPECT_DOUBLE_EQ(platform.now_s, 0.0) << "nothing ran";
}

}  // namespace
}  // namespace gpucap::runtime
