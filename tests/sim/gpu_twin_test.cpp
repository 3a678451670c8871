#include "gpucap/sim/gpu_twin.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "gpucap/core/error.hpp"
#include "gpucap/sim/catalog.hpp"
#include "support/paths.hpp"

namespace gpucap::sim {
namespace {

class GpuTwinTest : public ::testing::Test {
 protected:
  Catalog catalog = Catalog::load(test::data_dir());
  double p40_sensor_period_s() const { return catalog.gpu("p40").sensor.update_period_s; }
  GpuTwin make(const char* gpu, const char* model, std::uint64_t seed = 1) {
    const auto& m = catalog.model(model);
    return GpuTwin(catalog.gpu(gpu), m, m.precision, seed);
  }
};

TEST_F(GpuTwinTest, SameSeedSameRun) {
  auto a = make("p40", "inception_v3", 42);
  auto b = make("p40", "inception_v3", 42);
  auto c = make("p40", "inception_v3", 43);
  for (int i = 0; i < 50; ++i) {
    const auto ra = a.run_batch(16);
    const auto rb = b.run_batch(16);
    (void)c.run_batch(16);
    EXPECT_DOUBLE_EQ(ra.end_s, rb.end_s);
  }
  EXPECT_DOUBLE_EQ(a.energy_j(), b.energy_j());
  EXPECT_NE(a.now_s(), c.now_s()) << "latency jitter depends on the seed";
}

TEST_F(GpuTwinTest, VirtualTimeAndEnergyAdvanceTogether) {
  auto twin = make("p40", "resnet_v2_50");
  const auto record = twin.run_batch(32);
  EXPECT_DOUBLE_EQ(record.start_s, 0.0);
  EXPECT_GT(record.latency_s(), 0.0);
  EXPECT_DOUBLE_EQ(twin.now_s(), record.end_s);
  EXPECT_GT(record.busy_power_w, record.prep_power_w);
  EXPECT_GT(twin.energy_j(), record.prep_power_w * record.latency_s());
  EXPECT_LT(twin.energy_j(), record.busy_power_w * record.latency_s());
  twin.idle(1.0);
  EXPECT_DOUBLE_EQ(twin.now_s(), record.end_s + 1.0);
  EXPECT_DOUBLE_EQ(twin.utilization(), 0.0);
}

TEST_F(GpuTwinTest, LockedClocksSnapToSupportedValues) {
  auto twin = make("p40", "resnet_v2_50");
  twin.lock_sm_clock(1000.4);
  EXPECT_DOUBLE_EQ(*twin.sm_clock_lock_mhz(), 1000);
  EXPECT_DOUBLE_EQ(twin.run_batch(8).sm_clock_mhz, 1000);
  twin.lock_sm_clock(std::nullopt);
  EXPECT_DOUBLE_EQ(twin.run_batch(8).sm_clock_mhz, 1531) << "unlocked: the boost clock";
}

TEST_F(GpuTwinTest, BoardPowerLimitThrottles) {
  auto twin = make("p40", "resnet_v2_152");
  EXPECT_FALSE(twin.run_batch(255).power_limited);
  twin.set_power_limit(130.0);
  const auto record = twin.run_batch(255);
  EXPECT_TRUE(record.power_limited);
  EXPECT_LT(record.sm_clock_mhz, 1531);
  EXPECT_LE(record.busy_power_w, 135.0);
  twin.set_power_limit(std::nullopt);
  EXPECT_DOUBLE_EQ(twin.power_limit_w(), 250.0);
}

TEST_F(GpuTwinTest, SensorSeesTheInputPreparationDipsUnlessItsHoldBridgesThem) {
  // Large 331x331 batches: the host-to-device copy (~28 ms) is longer than the P40 sensor's
  // 20-ms period, so readings without a hold dip to idle-with-context power between compute
  // phases; the P40's fitted hold (~48 ms) bridges the dips.
  const auto& m = catalog.model("nasnet_a_large");
  const auto range = [&](double hold_s) {
    auto gpu = catalog.gpu("p40");
    gpu.sensor.hold_s = hold_s;
    GpuTwin twin(gpu, m, m.precision, 1);
    for (int i = 0; i < 5; ++i) (void)twin.run_batch(255);
    const auto readings = twin.sensor().take_readings();
    EXPECT_GT(readings.size(), 100u);
    double max_w = 0.0, min_w = 1e9;
    for (std::size_t i = 10; i < readings.size(); ++i) {  // after the first batch's start
      max_w = std::max(max_w, readings[i].power_w);
      min_w = std::min(min_w, readings[i].power_w);
    }
    return std::make_pair(min_w, max_w);
  };
  const auto [plain_min_w, plain_max_w] = range(0.0);
  EXPECT_GT(plain_max_w, 150.0);
  EXPECT_LT(plain_min_w, 0.7 * plain_max_w);
  ASSERT_GT(catalog.gpu("p40").sensor.hold_s, 0.03);
  const auto [held_min_w, held_max_w] = range(catalog.gpu("p40").sensor.hold_s);
  EXPECT_GT(held_min_w, 0.7 * held_max_w) << "no reading dips to idle (the two busy halves still differ)";
}

TEST_F(GpuTwinTest, AutotunesOnlyTheFirstBatchOfEachSizeAndOnlyWhenAsked) {
  auto plain = make("p40", "resnet_v2_50");
  EXPECT_EQ(plain.run_batch(8).autotune_s, 0.0);

  auto twin = make("p40", "resnet_v2_50");
  twin.set_autotune_new_shapes(true);
  const auto first = twin.run_batch(8);
  const auto second = twin.run_batch(8);
  const auto other_size = twin.run_batch(16);
  const auto again = twin.run_batch(8);
  EXPECT_GT(first.autotune_s, 0.0);
  EXPECT_EQ(second.autotune_s, 0.0);
  EXPECT_GT(other_size.autotune_s, 0.0);
  EXPECT_EQ(again.autotune_s, 0.0);
  EXPECT_NEAR(first.latency_s() - second.latency_s(), first.autotune_s, 0.05 * first.autotune_s);
  // The GPU is busy while it autotunes: the sensor sees busy power for that long.
  EXPECT_GT(first.autotune_s, 0.1);
  const auto readings = twin.sensor().take_readings();
  const auto busy = std::count_if(readings.begin(), readings.end(), [&](const auto& r) {
    return r.time_s < first.end_s && r.power_w > 0.9 * first.busy_power_w;
  });
  EXPECT_GT(static_cast<double>(busy) * p40_sensor_period_s(), 0.8 * first.autotune_s);
}

TEST_F(GpuTwinTest, TheFirstShapesAutotuningRunsAtTheModelsActivityAtTheFirstShapeBatch) {
  auto gpu = catalog.gpu("p40");
  const auto& model = catalog.model("inception_v4");
  gpu.first_autotune_batch = 16.0;
  GpuTwin twin(gpu, model, model.precision, 1);
  twin.set_autotune_new_shapes(true);
  const auto first = twin.run_batch(1);
  const auto second_shape = twin.run_batch(2);
  ASSERT_GT(first.autotune_s, 0.1);
  // Mean power over each autotuning: the first at batch 16's activity, the next at the batch's own.
  const auto mean_between = [&](double from, double to) {
    double sum = 0.0;
    int n = 0;
    for (const auto& r : twin.sensor().take_readings()) {
      if (r.time_s > from && r.time_s <= to) {
        sum += r.power_w;
        ++n;
      }
    }
    return n > 0 ? sum / n : 0.0;
  };
  const double first_w = mean_between(first.end_s - first.autotune_s * 0.9 - 0.04, first.end_s - 0.05);
  const OperatingPoint point{first.sm_clock_mhz, first.memory_clock_mhz};
  const auto profile = profile_batch(gpu, model, model.precision, 1, point);
  const double tuning_w = first_autotune_power_w(gpu, model, model.precision, point, profile);
  EXPECT_NEAR(first_w, tuning_w, 0.05 * first_w);
  const auto at_16 = profile_batch(gpu, model, model.precision, 16, point);
  EXPECT_NEAR(tuning_w, busy_power_w(gpu, point, at_16.sm_activity, profile.memory_activity), 1e-9);
  EXPECT_GT(tuning_w, 1.2 * first.busy_power_w) << "batch 1 fills the GPU poorly; the first shape's autotuning does not";
  EXPECT_GT(second_shape.autotune_s, 0.0);
  gpu.first_autotune_batch = 0.0;
  EXPECT_NEAR(first_autotune_power_w(gpu, model, model.precision, point, profile), first.busy_power_w, 1e-9)
      << "0: the batch's own";
}

TEST_F(GpuTwinTest, TheFirstShapesAutotuningDrawsMoreOnAWideModelThanOnANarrowOne) {
  auto gpu = catalog.gpu("p40");
  gpu.first_autotune_batch = 4.0;
  const OperatingPoint point{1063.0, gpu.default_memory_clock_mhz};
  const auto tuning_w = [&](const char* name) {
    const auto& model = catalog.model(name);
    return first_autotune_power_w(gpu, model, model.precision, point,
                                  profile_batch(gpu, model, model.precision, 1, point));
  };
  // The P40 logs' first rows: 90-97 W for Inception-V4, 56-58 W for MobileNet-V1 0.25.
  EXPECT_GT(tuning_w("inception_v4"), tuning_w("mobilenet_v1_0.25") + 15.0);
  // A fractional batch size moves the power smoothly (calibration needs a gradient).
  const auto& model = catalog.model("inception_v4");
  const auto at = [&](double batch) {
    gpu.first_autotune_batch = batch;
    return first_autotune_power_w(gpu, model, model.precision, point, profile_batch(gpu, model, model.precision, 1, point));
  };
  EXPECT_LT(at(4.0), at(4.5));
  EXPECT_LT(at(4.5), at(5.0));
}

TEST_F(GpuTwinTest, AGovernorClockHoldsTheUnlockedGpuBelowBoostAndALockStillWins) {
  auto twin = make("p40", "resnet_v2_50");
  twin.set_governor_sm_clock(1300.0);
  EXPECT_DOUBLE_EQ(twin.governor_sm_clock_mhz(), 1303) << "snaps to a supported clock";
  EXPECT_DOUBLE_EQ(twin.run_batch(8).sm_clock_mhz, 1303);
  twin.lock_sm_clock(949.0);
  EXPECT_DOUBLE_EQ(twin.run_batch(8).sm_clock_mhz, 949);
  twin.lock_sm_clock(std::nullopt);
  EXPECT_DOUBLE_EQ(twin.run_batch(8).sm_clock_mhz, 1303);
  twin.set_governor_sm_clock(std::nullopt);
  EXPECT_DOUBLE_EQ(twin.run_batch(8).sm_clock_mhz, 1531) << "back to the boost clock";
}

TEST_F(GpuTwinTest, ASpawnedSamplersProcessesStallTheBatchesTheyStartIn) {
  // Processes start at 0, 0.1, 0.3, 0.4, ...; each costs the batch running then 40 ms. The host's
  // launches pace these batches (slow launches, busy phase = the largest part), so the stalls
  // count whole.
  const SpawnedSampler sampler{0.1, 0.04, 0.1};
  GpuSpec gpu = catalog.gpu("p40");
  gpu.host.layer_launch_s = 1e-3;
  gpu.busy_overlap_exponent = 0.0;
  const auto& model = catalog.model("resnet_v2_50");
  GpuTwin plain(gpu, model, model.precision, 1);
  GpuTwin twin(gpu, model, model.precision, 1);
  twin.set_spawned_sampler(sampler);
  int stalled = 0;
  while (twin.now_s() < 3.0) {
    const auto unstalled = plain.run_batch(4);
    const auto batch = twin.run_batch(4);
    const double work_s = unstalled.latency_s();
    const double stalls = std::round(batch.stall_s / sampler.stall_s);
    EXPECT_NEAR(batch.stall_s, stalls * sampler.stall_s, 1e-12);
    EXPECT_EQ(static_cast<long long>(stalls), sampler.process_starts(batch.start_s, batch.end_s - 1e-12));
    EXPECT_NEAR(batch.latency_s(), work_s + batch.stall_s, 1e-6 * work_s) << "the same noise stream, stalls added";
    if (stalls > 0) ++stalled;
  }
  EXPECT_GT(stalled, 10);
  // While stalled the GPU idles with the context loaded: the twin's energy over the run is the
  // plain one's plus the stalls at that power.
  EXPECT_GT(twin.energy_j(), plain.energy_j());
  EXPECT_EQ(plain.run_batch(4).stall_s, 0.0) << "no sampler, no stall";
  // A stall as long as a process could never end a batch: refused.
  EXPECT_THROW(plain.set_spawned_sampler(SpawnedSampler{0.1, 0.1, 0.1}), Error);
}

TEST_F(GpuTwinTest, ALongComputeBoundBatchRidesThroughTheSamplersStalls) {
  // ResNet-V2-152 at batch 256: seconds of queued kernels. The host's stalls hold up the launches,
  // not the GPU, so the batch gains a small fraction of the stalls that start in it.
  // The busy phase is close to the largest of its parts (exponent 4).
  const SpawnedSampler sampler{0.1, 0.04, 0.1};
  GpuSpec gpu = catalog.gpu("p40");
  gpu.busy_overlap_exponent = 4.0;
  const auto& model = catalog.model("resnet_v2_152");
  GpuTwin twin(gpu, model, model.precision, 1);
  twin.set_spawned_sampler(sampler);
  // Only the input copy before each batch's kernels (~13 ms) feels a stall whole.
  long long starts = 0;
  double stalled_s = 0.0;
  for (int i = 0; i < 6; ++i) {
    const auto batch = twin.run_batch(256);
    starts += sampler.process_starts(batch.start_s, batch.end_s);
    stalled_s += batch.stall_s;
  }
  EXPECT_GT(starts, 30);
  EXPECT_GT(stalled_s, 0.0);
  EXPECT_LT(stalled_s, 0.2 * static_cast<double>(starts) * sampler.stall_s);
  // With the host decoding the batch first, the stalls that land in the decode count whole.
  InputPipeline decode;
  decode.mode = PipelineMode::serial;
  decode.seconds_per_image = 0.01;
  GpuTwin decoding(gpu, model, model.precision, 1, decode);
  decoding.set_spawned_sampler(sampler);
  (void)decoding.run_batch(256);
  const auto decoded = decoding.run_batch(256);
  const auto decode_starts = sampler.process_starts(decoded.start_s, decoded.start_s + decoded.host_s);
  EXPECT_GT(decode_starts, 10);
  EXPECT_GE(decoded.stall_s, static_cast<double>(decode_starts) * sampler.stall_s - 1e-12);
}

}  // namespace
}  // namespace gpucap::sim
