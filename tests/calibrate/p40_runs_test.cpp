#include "gpucap/calibrate/p40_runs.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <algorithm>
#include <map>
#include <set>

#include "gpucap/calibrate/p40_emulation.hpp"
#include "gpucap/calibrate/p40_observations.hpp"
#include "gpucap/core/error.hpp"
#include "support/paths.hpp"

namespace gpucap::calibrate {
namespace {

const sim::Catalog& catalog() {
  static const auto instance = sim::Catalog::load(test::data_dir());
  return instance;
}

const std::vector<P40Run>& shared_runs() {
  static const auto runs = load_p40_runs(test::shared_file("batchdvfs-p40"), catalog());
  return runs;
}

TEST(P40Runs, LoadsEveryLogWithItsJobModelAndNvidiaSmiLog) {
  const auto& runs = shared_runs();
  ASSERT_EQ(runs.size(), 60u) << "runtimes.csv is not a log";
  const auto& first = runs.front();
  EXPECT_EQ(first.name, "01_InceptionV1_BatchDVFS");
  EXPECT_EQ(first.job, 1);
  EXPECT_EQ(first.model, "inception_v1");
  EXPECT_EQ(first.dataset, "imagenet");
  ASSERT_FALSE(first.smi.empty());
  // nvidia-smi's local-time stamps moved onto the log's Unix clock: the first sample is seconds
  // before the first step.
  EXPECT_NEAR(first.smi.front().time_s, first.log.rows.front().time_s, 60.0);
  EXPECT_TRUE(first.window_closed.front());
  for (const auto& run : runs) {
    EXPECT_EQ(run.clock_mhz.size(), run.log.rows.size()) << run.name;
    if (run.job > 15) {
      EXPECT_EQ(run.dataset, "caltech256");
    }
  }
}

TEST(P40Runs, MarksTheFirstStepAtEachNewBatchSize) {
  for (const auto& run : shared_runs()) {
    ASSERT_EQ(run.new_batch_size.size(), run.log.rows.size()) << run.name;
    std::set<int> sizes;
    for (const auto& row : run.log.rows) sizes.insert(row.batch_size);
    const auto marked = std::count(run.new_batch_size.begin(), run.new_batch_size.end(), true);
    // Row 0 ran while the graph loaded: its batch size is not new afterwards.
    EXPECT_EQ(static_cast<std::size_t>(marked), sizes.size() - 1) << run.name;
    EXPECT_FALSE(run.new_batch_size.front()) << run.name;
    for (std::size_t i = 1; i < run.log.rows.size(); ++i) {
      if (!run.new_batch_size[i]) continue;
      for (std::size_t j = 0; j < i; ++j) EXPECT_NE(run.log.rows[j].batch_size, run.log.rows[i].batch_size);
    }
  }
}

TEST(P40Runs, ClipperClocksComeFromNvidiaSmi) {
  for (const auto& run : shared_runs()) {
    if (run.name != "18_InceptionV3_Clipper") continue;
    // The GPU held this run mostly at 1303 MHz (nvidia-smi), not at the 1531-MHz boost clock.
    std::size_t at_1303 = 0;
    for (const double f : run.clock_mhz) at_1303 += f == 1303.0 ? 1u : 0u;
    EXPECT_GT(at_1303, run.clock_mhz.size() / 2);
    return;
  }
  FAIL() << "18_InceptionV3_Clipper not found";
}

TEST(P40Runs, AClipperRunsGpuChosenClockIsItsMedianBusyNvidiaSmiClock) {
  std::map<int, double> clipper_mhz;
  for (const auto& run : shared_runs()) {
    if (run.log.kind != bench::P40LogKind::clipper) continue;
    const auto mhz = gpu_chosen_sm_clock_mhz(run);
    ASSERT_TRUE(mhz.has_value()) << run.name;
    clipper_mhz[run.job] = *mhz;
  }
  ASSERT_EQ(clipper_mhz.size(), 20u);
  EXPECT_DOUBLE_EQ(clipper_mhz.at(18), 1303) << "the P40 settled at 1,303 MHz through most of job 18";
  EXPECT_DOUBLE_EQ(clipper_mhz.at(15), 1531);
  P40Run silent = shared_runs().front();
  silent.smi.clear();
  EXPECT_FALSE(gpu_chosen_sm_clock_mhz(silent).has_value()) << "no nvidia-smi log, no clock";
}

TEST(P40Runs, BadFolderContentsAreReported) {
  test::TempDir dir;
  EXPECT_THROW((void)load_p40_runs(dir.path(), catalog()), Error) << "no logs";
  dir.write("01_InceptionV1_Frobnicate.csv", "x\n");
  EXPECT_THROW((void)load_p40_runs(dir.path(), catalog()), Error) << "unknown controller";
  test::TempDir model;
  model.write("01_ResNet18_BatchDVFS.csv", "x\n");
  EXPECT_THROW((void)load_p40_runs(model.path(), catalog()), Error) << "unknown model";
  EXPECT_THROW((void)load_p40_runs("/nonexistent", catalog()), Error);
}

TEST(P40Observations, CoverEveryKindAndPredictFinitely) {
  const auto observations = p40_observations(shared_runs());
  const auto params = TwinParams::from(catalog());
  std::map<std::string, int> kinds;
  for (const auto& o : observations) {
    ++kinds[o.quantity];
    EXPECT_GT(o.target, 0.0) << o.label;
    EXPECT_TRUE(std::isfinite(o.predict(params))) << o.label;
  }
  EXPECT_GT(kinds["idle_power_w"], 50);
  EXPECT_GT(kinds["busy_power_w"], 100);
  EXPECT_GT(kinds["busy_s"], 50);
  EXPECT_GT(kinds["throughput_img_s"], 300);
  // One busy fraction (mean utilisation) and one caught fraction of window maxima per run.
  EXPECT_GT(kinds["busy_fraction"], 50);
  EXPECT_GT(kinds["caught_fraction"], 50);
  for (const auto& o : observations) {
    if (o.quantity == "busy_fraction" || o.quantity == "caught_fraction") {
      EXPECT_LE(o.target, 1.0) << o.label;
      const double predicted = o.predict(params);
      EXPECT_GE(predicted, 0.0) << o.label;
      EXPECT_LE(predicted, 1.0) << o.label;
    }
  }
  // The harness's nvidia-smi stalls, from the groups of short steps: ~60 ms each, ~5.5 a second.
  EXPECT_GT(kinds["sampler_stall_s"], 8);
  EXPECT_EQ(kinds["sampler_stall_s"], kinds["sampler_stall_rate_hz"]);
  for (const auto& o : observations) {
    if (o.quantity == "sampler_stall_s") {
      EXPECT_GT(o.target, 0.04) << o.label;
      EXPECT_LT(o.target, 0.08) << o.label;
    }
    if (o.quantity == "sampler_stall_rate_hz") {
      EXPECT_GT(o.target, 4.0) << o.label;
      EXPECT_LT(o.target, 7.0) << o.label;
    }
  }
  // One per run: its first row, the graph load and the first step.
  EXPECT_EQ(kinds["first_step_power_w"], static_cast<int>(shared_runs().size()));
  // One per run whose first steps at new batch sizes were measurably longer (TF1 autotuning).
  EXPECT_GT(kinds["autotune_s"], 20);
  EXPECT_LE(kinds["autotune_s"], 60);
  // The measured idle with a model loaded: 45-57 W at steady temperature, up to ~70 W hot.
  for (const auto& o : observations) {
    if (o.quantity == "idle_power_w") {
      EXPECT_GT(o.target, 40.0) << o.label;
      EXPECT_LT(o.target, 75.0) << o.label;
    }
  }
}

TEST(P40Observations, AStallCostsAStepWholeWhereTheHostPacesItAndLittleWhereKernelsAreQueued) {
  const auto params = TwinParams::from(catalog());
  const double stall_s = p40_sampler(params).stall_s;
  // MobileNet-V1 0.25 at batch 1: the step is the JPEG decode and the launches.
  EXPECT_GT(p40_felt_stall_s(params, "mobilenet_v1_0.25", "imagenet", 1, 1531), 0.9 * stall_s);
  // NASNet-A-Large at batch 256 and 544 MHz: seconds of queued kernels after the decode.
  const double queued = p40_felt_stall_s(params, "nasnet_a_large", "imagenet", 256, 544);
  EXPECT_GT(queued, 0.0);
  EXPECT_LT(queued, 0.5 * stall_s);
}

TEST(P40Observations, CaughtChanceFollowsThePhaseThePeriodAndTheWindow) {
  // Long steps (3 s, one 0.1-s phase each) read every 0.4 s: a phase is caught a quarter of the time.
  EXPECT_NEAR(p40_caught_chance(0.1, 3.0, 3.0, 0.4), 0.25, 1e-12);
  // A window of two such steps has two tries.
  EXPECT_NEAR(p40_caught_chance(0.1, 3.0, 6.0, 0.4), 1.0 - 0.75 * 0.75, 1e-12);
  // Short steps (0.2 s with 0.05 s of compute): each of the window's five readings lands in a
  // phase with chance 1/4.
  EXPECT_NEAR(p40_caught_chance(0.05, 0.2, 2.0, 0.4), 1.0 - std::pow(0.75, 5.0), 1e-12);
  // A phase as long as the period is always caught.
  EXPECT_DOUBLE_EQ(p40_caught_chance(0.5, 3.0, 3.0, 0.4), 1.0);
}

TEST(P40Observations, TheSensorsHoldRaisesThePredictedCaughtFraction) {
  auto params = TwinParams::from(catalog());
  auto held = params;
  params.gpus.at(kP40).sensor.hold_s = 0.0;
  held.gpus.at(kP40).sensor.hold_s = 0.1;
  int checked = 0;
  for (const auto& o : p40_observations(shared_runs())) {
    if (o.quantity != "caught_fraction") continue;
    const double without = o.predict(params);
    const double with = o.predict(held);
    EXPECT_GE(with, without) << o.label;
    if (without < 0.9) {
      EXPECT_GT(with, without + 0.01) << o.label << ": short phases are caught more often when held";
      ++checked;
    }
  }
  EXPECT_GT(checked, 10);
}

TEST(P40Emulation, TheSensorsHoldCatchesShortPhasesMoreOften) {
  auto params = TwinParams::from(catalog());
  auto held = params;
  params.gpus.at(kP40).sensor.hold_s = 0.0;
  held.gpus.at(kP40).sensor.hold_s = 0.15;
  for (const auto& run : shared_runs()) {
    if (run.name != "01_InceptionV1_DVFS") continue;
    // Inception-V1 at batch 256: a ~0.1-s compute phase in 3-s steps, read every ~0.37 s.
    const auto plain = emulate_p40_run(run, params);
    const auto holding = emulate_p40_run(run, held);
    ASSERT_EQ(plain.size(), holding.size());
    double plain_sum = 0.0, held_sum = 0.0;
    for (std::size_t i = 0; i < plain.size(); ++i) {
      EXPECT_GE(holding[i].power_w, plain[i].power_w * 0.97) << "row " << plain[i].row;
      plain_sum += plain[i].power_w;
      held_sum += holding[i].power_w;
    }
    EXPECT_GT(held_sum, plain_sum * 1.1) << "more windows show the compute phase";
    return;
  }
  FAIL() << "01_InceptionV1_DVFS not found";
}

TEST(P40Emulation, PredictsEveryLoggedRowDeterministically) {
  const auto params = TwinParams::from(catalog());
  for (const auto& run : shared_runs()) {
    if (run.name != "15_ResNetV2_152_DVFS") continue;
    const auto rows = emulate_p40_run(run, params);
    ASSERT_EQ(rows.size(), run.log.rows.size() - 2) << "all but the first and last row";
    EXPECT_EQ(emulate_p40_run(run, params).front().power_w, rows.front().power_w);
    // A heavy model at batch 256: every window catches a long compute phase near 190-200 W.
    std::size_t close = 0;
    for (const auto& r : rows) close += std::abs(r.power_w - r.logged_power_w) / r.logged_power_w < 0.1 ? 1u : 0u;
    EXPECT_GT(close, rows.size() * 8 / 10);
    return;
  }
  FAIL() << "15_ResNetV2_152_DVFS not found";
}

}  // namespace
}  // namespace gpucap::calibrate
