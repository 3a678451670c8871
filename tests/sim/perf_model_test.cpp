#include "gpucap/sim/perf_model.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "gpucap/sim/catalog.hpp"
#include "support/paths.hpp"

namespace gpucap::sim {
namespace {

class PerfModel : public ::testing::Test {
 protected:
  Catalog catalog = Catalog::load(test::data_dir());
  const GpuSpec& p40 = catalog.gpu("p40");

  double busy_power(const ModelSpec& model, int batch, double sm_mhz) const {
    const OperatingPoint point{sm_mhz, p40.default_memory_clock_mhz};
    const auto profile = profile_batch(p40, model, model.precision, batch, point);
    return busy_power_w(p40, point, profile.sm_activity, profile.memory_activity);
  }
  // The busy phase of a profile's three parts, as profile_batch combines them.
  static double profile_busy_s(const GpuSpec& gpu, const BatchProfile& p) {
    const double k = gpu.busy_overlap_exponent;
    if (k <= 0.0) return std::max({p.compute_s, p.memory_s, p.launch_s});
    return std::pow(std::pow(p.compute_s, k) + std::pow(p.memory_s, k) + std::pow(p.launch_s, k), 1.0 / k);
  }
  double throughput(const ModelSpec& model, int batch, double sm_mhz) const {
    const auto profile = profile_batch(p40, model, model.precision, batch, {sm_mhz, p40.default_memory_clock_mhz});
    return batch / profile.latency_s();
  }
};

TEST_F(PerfModel, PowerRisesWithBatchAndClock) {
  for (const auto& model : catalog.models()) {
    double previous = 0.0;
    for (const int batch : {1, 2, 4, 8, 16, 32, 64, 128, 255}) {
      const double power = busy_power(model, batch, 1063);
      EXPECT_GE(power, previous - 1e-9) << model.id << " batch " << batch;
      previous = power;
    }
    previous = 0.0;
    for (const double clock : p40.dvfs_levels_mhz) {
      const double power = busy_power(model, 64, clock);
      EXPECT_GT(power, previous) << model.id << " at " << clock;
      previous = power;
    }
  }
}

TEST_F(PerfModel, ThroughputRisesWithBatchAndClock) {
  const auto& model = catalog.model("resnet_v2_50");
  EXPECT_LT(throughput(model, 1, 1063), throughput(model, 16, 1063));
  EXPECT_LT(throughput(model, 16, 1063), throughput(model, 128, 1063));
  EXPECT_LT(throughput(model, 64, 544), throughput(model, 64, 1531));
}

TEST_F(PerfModel, EfficiencySaturatesWithBatch) {
  // Doubling a large batch gains far less than doubling a small one.
  const auto& model = catalog.model("inception_v3");
  const double small_gain = throughput(model, 2, 1303) / throughput(model, 1, 1303);
  const double large_gain = throughput(model, 256, 1303) / throughput(model, 128, 1303);
  EXPECT_GT(small_gain, 1.3);
  EXPECT_LT(large_gain, 1.1);
}

TEST_F(PerfModel, MemoryBoundModelsGainLessFromClock) {
  // Throughput of a compute-heavy net scales with the SM clock more than a depthwise one's.
  const auto gain = [&](const char* name) {
    const auto& model = catalog.model(name);
    return throughput(model, 128, 1531) / throughput(model, 128, 544);
  };
  EXPECT_GT(gain("resnet_v2_152"), gain("mobilenet_v2_1.0"));
}

TEST_F(PerfModel, P40IdleWithContextMatchesTheLogs) {
  // nvidia-smi logs of the BatchDVFS runs, samples at 0 % utilisation: median 47.4 W at 1063 MHz
  // (1,551 samples) and 51.1 W at 1303 MHz (445); warm runs read up to ~57 W.
  EXPECT_NEAR(idle_loaded_power_w(p40, {1063, 3615}), 47.4, 0.05 * 47.4);
  EXPECT_NEAR(idle_loaded_power_w(p40, {1303, 3615}), 51.1, 0.05 * 51.1);
  EXPECT_LT(idle_loaded_power_w(p40, {544, 3615}), idle_loaded_power_w(p40, {1531, 3615}));
}

TEST_F(PerfModel, BusyPhaseDrawsMoreThanPreparation) {
  const auto& model = catalog.model("resnet_v2_101");
  const OperatingPoint point{1303, 3615};
  const auto profile = profile_batch(p40, model, model.precision, 32, point);
  EXPECT_GT(profile.prep_s, 0.0);
  EXPECT_GT(busy_power_w(p40, point, profile.sm_activity, profile.memory_activity),
            idle_loaded_power_w(p40, point) + 20.0);
  EXPECT_LT(average_batch_power_w(p40, profile, point),
            busy_power_w(p40, point, profile.sm_activity, profile.memory_activity));
}

TEST_F(PerfModel, BusyHalvesKeepTheMeanAndSpreadOnlyWhenTheGpuIsNotFull) {
  const auto& model = catalog.model("inception_v4");
  const OperatingPoint point{1531, p40.default_memory_clock_mhz};
  ASSERT_GT(p40.activity_spread, 0.0);
  double previous_spread = 1.0;
  for (const int batch : {1, 4, 16, 64, 255}) {
    const auto profile = profile_batch(p40, model, model.precision, batch, point);
    const auto halves = busy_halves_w(p40, point, profile);
    const double mean_w = busy_power_w(p40, point, profile.sm_activity, profile.memory_activity);
    EXPECT_NEAR((halves.first_w + halves.second_w) / 2.0, mean_w, 1e-9 * mean_w) << batch;
    EXPECT_GT(halves.first_w, halves.second_w) << batch;
    EXPECT_LT(profile.activity_spread, previous_spread) << batch;  // larger batches fill the GPU: less spread
    previous_spread = profile.activity_spread;
  }
}

TEST_F(PerfModel, PowerSaturationScaleRaisesSmallBatchPowerAndLeavesTimeAlone) {
  const auto& model = catalog.model("inception_v4");
  ASSERT_DOUBLE_EQ(model.power_saturation_scale, 1.0);  // inference models: power follows occupancy
  auto busy_small_batches = model;
  busy_small_batches.power_saturation_scale = 0.2;
  const OperatingPoint point{1531, p40.default_memory_clock_mhz};
  for (const int batch : {1, 4, 16}) {
    const auto idle_sms = profile_batch(p40, model, model.precision, batch, point);
    const auto busy_sms = profile_batch(p40, busy_small_batches, model.precision, batch, point);
    EXPECT_DOUBLE_EQ(busy_sms.busy_s, idle_sms.busy_s) << batch;
    EXPECT_GT(busy_sms.sm_activity, idle_sms.sm_activity) << batch;
    EXPECT_LT(busy_sms.activity_spread, idle_sms.activity_spread) << batch;  // fuller: less spread
  }
  // Once the batch fills the GPU both read alike.
  const auto full = profile_batch(p40, model, model.precision, 4096, point);
  const auto full_scaled = profile_batch(p40, busy_small_batches, model.precision, 4096, point);
  EXPECT_NEAR(full_scaled.sm_activity, full.sm_activity, 0.01 * full.sm_activity);
}

TEST_F(PerfModel, APhaseSpreadSplitsTheBusyHalvesAtEveryBatchAndKeepsTheMean) {
  auto model = catalog.model("resnet50");
  ASSERT_DOUBLE_EQ(model.power_phase_spread, 0.0);
  const OperatingPoint point{1531, p40.default_memory_clock_mhz};
  const auto plain = profile_batch(p40, model, model.precision, 4096, point);
  model.power_phase_spread = 0.2;
  const auto phased = profile_batch(p40, model, model.precision, 4096, point);
  EXPECT_NEAR(phased.activity_spread, plain.activity_spread + 0.2, 1e-12);
  EXPECT_DOUBLE_EQ(phased.sm_activity, plain.sm_activity);
  const auto halves = busy_halves_w(p40, point, phased);
  EXPECT_NEAR(halves.mean_w(), busy_power_w(p40, point, phased.sm_activity, phased.memory_activity), 1e-9);
  const auto plain_halves = busy_halves_w(p40, point, plain);
  EXPECT_GT(halves.first_w, plain_halves.first_w + 1.0);  // a batch that fills the GPU still has a busier phase
  EXPECT_LT(halves.second_w, plain_halves.second_w - 1.0);
}

TEST_F(PerfModel, PeakReadingAveragesWhatTheSensorWindowCovers) {
  BatchProfile profile;
  profile.busy_s = 0.010;
  const BusyHalves halves{200.0, 100.0};
  EXPECT_DOUBLE_EQ(peak_reading_w(profile, halves, 50.0, 0.004), 200.0);   // inside the first half
  EXPECT_DOUBLE_EQ(peak_reading_w(profile, halves, 50.0, 0.010), 150.0);   // the whole busy phase
  EXPECT_DOUBLE_EQ(peak_reading_w(profile, halves, 50.0, 0.020), 100.0);   // half busy, half idle
  EXPECT_DOUBLE_EQ(peak_reading_w(profile, halves, 50.0, 0.0), 200.0);     // an instantaneous sensor
}

TEST_F(PerfModel, AutotuneGrowsWithTheBatchsComputeTime) {
  const auto& model = catalog.model("resnet_v2_50");
  const OperatingPoint point{1303, p40.default_memory_clock_mhz};
  const auto small = profile_batch(p40, model, model.precision, 1, point);
  const auto large = profile_batch(p40, model, model.precision, 128, point);
  EXPECT_GE(autotune_s(p40, small), p40.autotune_fixed_s);
  EXPECT_GT(autotune_s(p40, large), autotune_s(p40, small));
  EXPECT_DOUBLE_EQ(autotune_s(p40, large) - autotune_s(p40, small),
                   p40.autotune_compute_factor * (large.compute_s - small.compute_s));
}

TEST_F(PerfModel, AHostStallLengthensTheBusyPhaseOnlyWhereTheLaunchesPaceIt) {
  BatchProfile launch_paced;  // the host launches slower than the GPU runs the kernels
  launch_paced.compute_s = 0.002;
  launch_paced.memory_s = 0.001;
  launch_paced.launch_s = 0.020;
  BatchProfile compute_bound = launch_paced;  // kernels queued for far longer than the launches take
  compute_bound.compute_s = 2.0;
  for (const double k : {1.6, 2.7, 4.0}) {
    GpuSpec gpu = p40;
    gpu.busy_overlap_exponent = k;
    EXPECT_GT(launch_stall_share(gpu, launch_paced, 0.0), 0.97) << k;
    EXPECT_GT(launch_stall_share(gpu, launch_paced, 0.5), 0.97) << k;
    EXPECT_LT(launch_stall_share(gpu, compute_bound, 0.0), 0.1) << k;
    BatchProfile longer = compute_bound;
    longer.compute_s *= 10.0;
    EXPECT_LT(launch_stall_share(gpu, longer, 0.0), launch_stall_share(gpu, compute_bound, 0.0)) << k;
    // Stalls that add up to most of the compute time catch up with it and start to count.
    EXPECT_GT(launch_stall_share(gpu, compute_bound, 1.5), launch_stall_share(gpu, compute_bound, 0.1)) << k;
    // The share over a stretch of stalls is what that much launch time adds to the busy phase.
    BatchProfile stretched = compute_bound;
    stretched.launch_s += 0.3;
    const double added_s = profile_busy_s(gpu, stretched) - profile_busy_s(gpu, compute_bound);
    EXPECT_NEAR(launch_stall_share(gpu, compute_bound, 0.3), added_s / 0.3, 1e-9) << k;
    // ... and over no stall, the derivative.
    stretched.launch_s = compute_bound.launch_s + 1e-7;
    EXPECT_NEAR(launch_stall_share(gpu, compute_bound, 0.0),
                (profile_busy_s(gpu, stretched) - profile_busy_s(gpu, compute_bound)) / 1e-7, 1e-5)
        << k;
  }
  GpuSpec roofline = p40;  // exponent 0: the busy phase is the largest of the three
  roofline.busy_overlap_exponent = 0.0;
  EXPECT_DOUBLE_EQ(launch_stall_share(roofline, launch_paced, 0.0), 1.0);
  EXPECT_DOUBLE_EQ(launch_stall_share(roofline, compute_bound, 0.0), 0.0);
  EXPECT_DOUBLE_EQ(launch_stall_share(roofline, compute_bound, 2.98), 1.0 / 2.98) << "0.02 + 2.98 passes 2.0 by 1.0";
}

TEST_F(PerfModel, LargeBatchesOfLargeModelsRideThroughHostStallsAndBatchOneDoesNot) {
  const auto& model = catalog.model("resnet_v2_152");
  const OperatingPoint point{1531, p40.default_memory_clock_mhz};
  const auto big = profile_batch(p40, model, model.precision, 256, point);
  const auto one = profile_batch(p40, model, model.precision, 1, point);
  EXPECT_LT(launch_stall_share(p40, big, 0.0), launch_stall_share(p40, one, 0.0));
  EXPECT_LT(launch_stall_share(p40, big, 0.0), 0.1);
  EXPECT_DOUBLE_EQ(big.launch_s, model.layers * p40.host.layer_launch_s * model.launch_scale);
  EXPECT_GT(big.compute_s, 0.0);
  EXPECT_GT(big.memory_s, 0.0);
}

TEST_F(PerfModel, FirmwareLimitLowersTheClockUntilPowerFits) {
  const auto& model = catalog.model("resnet_v2_152");
  const OperatingPoint top{1531, 3615};
  const double unlimited = power_limited_sm_clock_mhz(p40, model, model.precision, 255, top, 250);
  EXPECT_DOUBLE_EQ(unlimited, 1531) << "under the default 250 W limit nothing throttles";
  const double limited = power_limited_sm_clock_mhz(p40, model, model.precision, 255, top, 130);
  EXPECT_LT(limited, 1531);
  const OperatingPoint at{limited, 3615};
  EXPECT_LE(average_batch_power_w(p40, profile_batch(p40, model, model.precision, 255, at), at), 130.0);
  // One supported step higher would not fit.
  const auto it = std::upper_bound(p40.sm_clocks_mhz.begin(), p40.sm_clocks_mhz.end(), limited);
  ASSERT_NE(it, p40.sm_clocks_mhz.end());
  const OperatingPoint above{*it, 3615};
  EXPECT_GT(average_batch_power_w(p40, profile_batch(p40, model, model.precision, 255, above), above), 130.0);
}

TEST_F(PerfModel, DitheringBetweenTwoClocksPutsTheAveragedPowerAtTheLimit) {
  const std::vector<double> clocks = {500, 600, 700, 800};
  const auto watts = [](double mhz) { return mhz / 10.0; };  // 50 W at 500 MHz .. 80 W at 800 MHz
  const auto between = dithered_clock_within_limit(clocks, 800, watts, 67.5);
  EXPECT_DOUBLE_EQ(between.lower_mhz, 600);
  EXPECT_DOUBLE_EQ(between.upper_mhz, 700);
  EXPECT_DOUBLE_EQ(between.upper_fraction, 0.75);  // 0.25·60 W + 0.75·70 W = 67.5 W
  const auto unlimited = dithered_clock_within_limit(clocks, 800, watts, 100);
  EXPECT_DOUBLE_EQ(unlimited.lower_mhz, 800);
  EXPECT_DOUBLE_EQ(unlimited.upper_fraction, 0.0);
  const auto capped_request = dithered_clock_within_limit(clocks, 700, watts, 100);
  EXPECT_DOUBLE_EQ(capped_request.lower_mhz, 700) << "never above the requested clock";
  EXPECT_DOUBLE_EQ(capped_request.upper_fraction, 0.0);
  const auto none_fits = dithered_clock_within_limit(clocks, 800, watts, 40);
  EXPECT_DOUBLE_EQ(none_fits.lower_mhz, 500);
  EXPECT_DOUBLE_EQ(none_fits.upper_fraction, 0.0);
  EXPECT_DOUBLE_EQ(highest_clock_within_limit(clocks, 800, watts, 67.5), between.lower_mhz);
}

TEST_F(PerfModel, ClockIndependentComputeDoesNotFollowTheSmClock) {
  const auto& a100 = catalog.gpu("a100");
  auto model = catalog.model("mobilenet_v2");
  const auto compute_s = [&](const ModelSpec& m, double sm_mhz) {
    return profile_batch(a100, m, Precision::fp16, 64, {sm_mhz, a100.default_memory_clock_mhz}).compute_s;
  };
  model.clock_independent_fraction.clear();
  const double low = compute_s(model, 510), high = compute_s(model, a100.boost_clock_mhz);
  model.clock_independent_fraction["a100"] = 0.6;
  EXPECT_NEAR(compute_s(model, a100.boost_clock_mhz), high, 1e-12) << "the same at boost";
  // 40 % still scales with the clock, 60 % runs at the boost clock's time.
  EXPECT_NEAR(compute_s(model, 510), 0.4 * low + 0.6 * high, 1e-12);
  model.clock_independent_fraction.clear();
  model.clock_independent_fraction["rtx3080ti"] = 0.6;
  EXPECT_NEAR(compute_s(model, 510), low, 1e-12) << "another GPU's fraction does not apply";
}

TEST_F(PerfModel, AModelsEfficiencyOnOneGpuScalesOnlyThatGpusCompute) {
  auto model = catalog.model("vgg19");
  model.gpu_efficiency_scale.clear();
  const auto compute_s = [&](const ModelSpec& m, const std::string& gpu) {
    const auto& spec = catalog.gpu(gpu);
    return profile_batch(spec, m, Precision::fp16, 64, {spec.boost_clock_mhz, spec.default_memory_clock_mhz}).compute_s;
  };
  const double h200 = compute_s(model, "h200"), a100 = compute_s(model, "a100");
  model.gpu_efficiency_scale["h200"] = 2.0;
  EXPECT_NEAR(compute_s(model, "h200"), h200 / 2.0, 1e-15) << "twice as efficient: half the compute time";
  EXPECT_NEAR(compute_s(model, "a100"), a100, 1e-15) << "another GPU keeps the model's own efficiency";
}

TEST_F(PerfModel, NearestClock) {
  EXPECT_DOUBLE_EQ(nearest_clock_mhz(p40.sm_clocks_mhz, 1000.4), 1000);
  EXPECT_DOUBLE_EQ(nearest_clock_mhz(p40.sm_clocks_mhz, 100), 544);
  EXPECT_DOUBLE_EQ(nearest_clock_mhz(p40.sm_clocks_mhz, 5000), 1531);
}

}  // namespace
}  // namespace gpucap::sim
