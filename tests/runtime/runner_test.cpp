#include "gpucap/runtime/runner.hpp"

#include <gtest/gtest.h>

#include "gpucap/core/error.hpp"
#include "gpucap/runtime/sim_job.hpp"
#include "gpucap/sim/catalog.hpp"
#include "support/paths.hpp"

namespace gpucap::runtime {
namespace {

class RunnerTest : public ::testing::Test {
 protected:
  sim::Catalog catalog = sim::Catalog::load(test::data_dir());

  SimJobSpec spec(const std::string& algorithm, double cap_w, const std::string& model = "inception_v1") {
    SimJobSpec s;
    s.gpu = "p40";
    s.model = model;
    s.dataset = "imagenet";
    s.algorithm = algorithm;
    s.schedule = CapSchedule::constant(cap_w);
    return s;
  }
  std::pair<RunSummary, std::vector<TraceRow>> run(const SimJobSpec& s) {
    std::vector<TraceRow> rows;
    SimJob job(catalog, s);
    const auto summary = job.run([&rows](const TraceRow& row) { rows.push_back(row); });
    return {summary, rows};
  }
};

TEST_F(RunnerTest, SummaryAgreesWithTheTrace) {
  const auto [summary, rows] = run(spec("batchdvfs", 131));
  EXPECT_TRUE(summary.simulated);
  EXPECT_EQ(summary.images, 15000);
  ASSERT_EQ(static_cast<std::size_t>(summary.windows), rows.size());
  long long images = 0;
  int over = 0;
  for (const auto& row : rows) {
    images += row.images;
    over += row.over_cap ? 1 : 0;
    EXPECT_DOUBLE_EQ(row.cap_w, 131);
    EXPECT_GE(row.window_max_w, row.window_mean_w);
    EXPECT_GT(row.samples, 0u);
  }
  EXPECT_EQ(images, 15000);
  EXPECT_EQ(over, summary.windows_over_cap);
  EXPECT_NEAR(rows.back().time_s, summary.duration_s, 1e-9);
  EXPECT_NEAR(summary.mean_power_w * summary.duration_s, summary.energy_j, 1e-6 * summary.energy_j);
  EXPECT_NEAR(summary.throughput_img_s, 15000 / summary.duration_s, 1e-9);
  EXPECT_NEAR(summary.images_per_joule, 15000 / summary.energy_j, 1e-12);
  EXPECT_GE(summary.max_power_w, rows.front().window_max_w);
}

TEST_F(RunnerTest, SameSeedSameRunOtherSeedOtherNoise) {
  const auto a = run(spec("batchdvfs", 131)).first;
  const auto b = run(spec("batchdvfs", 131)).first;
  EXPECT_DOUBLE_EQ(a.duration_s, b.duration_s);
  EXPECT_DOUBLE_EQ(a.energy_j, b.energy_j);
  EXPECT_DOUBLE_EQ(a.max_power_w, b.max_power_w);
  auto other = spec("batchdvfs", 131);
  other.sim.seed = 99;
  EXPECT_NE(run(other).first.energy_j, a.energy_j);
}

TEST_F(RunnerTest, TighterCapMeansSmallerBatchesAndLowerPower) {
  const auto [loose, loose_rows] = run(spec("batchdvfs", 200, "resnet_v2_101"));
  const auto [tight, tight_rows] = run(spec("batchdvfs", 90, "resnet_v2_101"));
  EXPECT_LT(tight.mean_power_w, loose.mean_power_w);
  EXPECT_LT(tight.throughput_img_s, loose.throughput_img_s);
  EXPECT_LT(tight_rows.back().batch_size, loose_rows.back().batch_size);
  EXPECT_LE(tight_rows.back().window_max_w, 90.0 * 1.05) << "settled near or under the cap";
}

TEST_F(RunnerTest, CapStepsAreFollowedOnTheTwin) {
  // BatchDVFS's InceptionV4 sensitivity run: 150 → 125 → 100 W every 85 s, for 255 s.
  auto s = spec("batchdvfs", 150, "inception_v4");
  s.schedule = CapSchedule::parse("0:150,85:125,170:100");
  s.duration_s = 255.0;
  const auto [summary, rows] = run(s);
  // Each phase ends settled under its cap (the last window before the next step).
  for (const double step_s : {85.0, 170.0, 255.0}) {
    const TraceRow* last = nullptr;
    for (const auto& row : rows) {
      if (row.time_s <= step_s) last = &row;
    }
    ASSERT_NE(last, nullptr);
    EXPECT_LE(last->window_max_w, s.schedule.cap_at(step_s - 1.0) * 1.03) << "phase ending at " << step_s << " s";
  }
  EXPECT_NEAR(summary.duration_s, 255.0, 5.0) << "a duration-limited run";
  EXPECT_GT(summary.images, 0);
  EXPECT_LE(rows.back().window_max_w, 100.0 * 1.05);
}

TEST_F(RunnerTest, ControlsAreRestoredAfterTheRun) {
  SimOptions options;
  SimPlatform platform(catalog.gpu("p40"), catalog.model("resnet_v2_50"), sim::Precision::fp32, options);
  auto controller = control::make_controller("dvfs", {}, platform.controller_limits());
  RunConfig config;
  config.images = 3000;
  config.schedule = CapSchedule::constant(120);
  const auto summary = run_job(platform, *controller, config);
  EXPECT_GT(summary.device_writes, 0);
  EXPECT_FALSE(platform.device().read_control(device::Control::sm_clock_lock_mhz).has_value());
}

TEST_F(RunnerTest, UnprivilegedBatchSizerRunsAndDvfsControllersRefuse) {
  SimOptions options;
  options.writes_permitted = false;
  SimPlatform platform(catalog.gpu("p40"), catalog.model("resnet_v2_50"), sim::Precision::fp32, options);
  RunConfig config;
  config.images = 2000;
  config.schedule = CapSchedule::constant(120);
  auto batchsizer = control::make_controller("batchsizer", {}, platform.controller_limits());
  EXPECT_EQ(run_job(platform, *batchsizer, config).images, 2000);
  auto batchdvfs = control::make_controller("batchdvfs", {}, platform.controller_limits());
  const double before_s = platform.clock().now_s();
  try {
    (void)run_job(platform, *batchdvfs, config);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::unsupported);
    EXPECT_NE(std::string(e.what()).find("GPU_CORE_FREQUENCY_LOCK_CONTROL"), std::string::npos) << e.what();
  }
  EXPECT_DOUBLE_EQ(platform.clock().now_s(), before_s) << "refused before running anything";
}

TEST_F(RunnerTest, BadJobsAreRejectedBeforeRunning) {
  EXPECT_THROW(SimJob(catalog, spec("batchdvfs", 5)), Error) << "below the P40's idle power";
  EXPECT_THROW(SimJob(catalog, spec("batchdvfs", 300)), Error) << "above the P40's maximum power limit";
  EXPECT_THROW(SimJob(catalog, spec("pid", 100)), Error);
  auto s = spec("batchdvfs", 100);
  s.model = "resnet18";
  EXPECT_THROW(SimJob(catalog, s), Error);
}

TEST(TraceCsv, HeaderAndRowsAgree) {
  const auto header = trace_csv_header();
  TraceRow row;
  row.time_s = 3.0;
  row.cap_w = 131;
  row.batch_size = 64;
  const auto line = trace_csv_row(row, true);
  EXPECT_EQ(std::count(header.begin(), header.end(), ','), std::count(line.begin(), line.end(), ','));
  EXPECT_NE(line.find(",sim\n"), std::string::npos);
  EXPECT_NE(header.find("window_max_w"), std::string::npos);
}

}  // namespace
}  // namespace gpucap::runtime

namespace gpucap::runtime {
namespace {

class RunnerCapChangeTest : public RunnerTest {};

TEST_F(RunnerCapChangeTest, AControllerThatReactsGetsAWindowEndingAtTheCapChange) {
  auto s = spec("capfit", 200, "resnet_v2_152");
  s.schedule = CapSchedule::parse("0:200,10:120");
  s.images = 0;
  s.duration_s = 30;
  const auto rows = run(s).second;
  const auto step = std::find_if(rows.begin(), rows.end(), [](const TraceRow& r) { return r.time_s >= 10.0; });
  ASSERT_NE(step, rows.end());
  EXPECT_LT(step->time_s - 10.0, 1.5) << "closed at the first batch boundary after the change, not 3 s later";
  auto seeds = s;
  seeds.algorithm = "batchdvfs";
  const auto seed_rows = run(seeds).second;
  // The transition: the window of the change, and for capfit the moment until the sensor shows
  // its answer; windows before the change are not part of it.
  EXPECT_TRUE(step->cap_transition);
  EXPECT_FALSE(rows.front().cap_transition);
  EXPECT_FALSE(rows.back().cap_transition);
  ASSERT_GT(seed_rows.size(), 2u);
  for (std::size_t i = 0; i + 1 < seed_rows.size(); ++i) {  // the last window ends with the run
    EXPECT_GT(seed_rows[i].time_s - seed_rows[i].window_start_s, 2.9) << "seeds keep their timing";
  }
}

TEST_F(RunnerCapChangeTest, SettledPowerLeavesOutTheSensorsAveragingAfterAChangeOfKnobs) {
  // The RTX 3080 Ti's sensor averages over 1 s: after capfit changes its knobs, the first second
  // of readings still shows the old configuration.
  SimJobSpec s = spec("capfit", 200, "resnet50");
  s.gpu = "rtx3080ti";
  s.schedule = CapSchedule::parse("0:250,9:140");
  s.images = 0;
  s.duration_s = 30;
  std::vector<Observation> seen;
  SimJob job(catalog, s);
  std::vector<TraceRow> rows;
  (void)job.run([&rows](const TraceRow& row) { rows.push_back(row); });
  // The window after the step starts with readings of the hotter configuration before it.
  const auto after = std::find_if(rows.begin(), rows.end(), [](const TraceRow& r) { return r.window_start_s >= 9.0; });
  ASSERT_NE(after, rows.end());
  ASSERT_NE(after + 1, rows.end());
  EXPECT_GT(after->window_max_w, (after + 1)->window_max_w + 5.0) << "the lagging sensor shows the old knobs";
  EXPECT_LE((after + 1)->window_max_w, 140.0) << "capfit learned from the settled part and stays under the cap";
}

TEST_F(RunnerCapChangeTest, TheFirstWindowDoesNotShowTheGpuAsItWasBeforeTheJob) {
  // The twin starts idle at boost clocks with the default memory clock (about 133 W on the
  // 3080 Ti); a job at the lowest clocks must not see that in its first samples.
  SimJobSpec s = spec("capfit", 120, "mnasnet1_0");
  s.gpu = "rtx3080ti";
  s.images = 0;
  s.duration_s = 9;
  const auto rows = run(s).second;
  ASSERT_FALSE(rows.empty());
  EXPECT_FALSE(rows.front().over_cap) << rows.front().window_max_w;
}

}  // namespace
}  // namespace gpucap::runtime
