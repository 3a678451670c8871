#include "gpucap/sim/training_step.hpp"

#include <gtest/gtest.h>

#include <cmath>

#include "gpucap/core/error.hpp"
#include "gpucap/sim/catalog.hpp"
#include "support/paths.hpp"

namespace gpucap::sim {
namespace {

class TrainingStep : public ::testing::Test {
 protected:
  Catalog catalog = Catalog::load(test::data_dir());
  const GpuSpec& v100 = catalog.gpu("v100-pcie");
  const ModelSpec& resnet50 = catalog.model("resnet50");
  const DatasetSpec& imagenet = catalog.dataset("imagenet_train");

  // ResNet-50 whose training step fills the GPU `saturation` × later than its forward pass, its
  // SMs drawing half their power at `power_saturation` × that batch.
  [[nodiscard]] ModelSpec resnet50_training_with(double saturation, double power_saturation) const {
    auto m = resnet50;
    m.training_saturation_scale = saturation;
    m.training_power_saturation_scale = power_saturation;
    return m;
  }
};

TEST_F(TrainingStep, ALowerLimitNeverRaisesPowerAboveItAndSlowsTheEpoch) {
  double previous_epoch_s = 0.0;
  double previous_power_w = 1e9;
  for (double limit = v100.power_limit_max_w; limit >= v100.power_limit_min_w; limit -= 25.0) {
    const auto p = training_under_power_limit(v100, resnet50, imagenet, Precision::fp32, 256, limit);
    EXPECT_LE(p.average_power_w, limit + 1e-9) << limit;
    EXPECT_LE(p.average_power_w, previous_power_w + 1e-9) << limit;
    EXPECT_GE(p.epoch_s, previous_epoch_s - 1e-9) << limit;
    EXPECT_LE(p.sm_clock_mhz, v100.boost_clock_mhz);
    previous_epoch_s = p.epoch_s;
    previous_power_w = p.average_power_w;
  }
  const auto full = training_under_power_limit(v100, resnet50, imagenet, Precision::fp32, 256, v100.power_limit_max_w);
  const auto tight = training_under_power_limit(v100, resnet50, imagenet, Precision::fp32, 256, v100.power_limit_min_w);
  EXPECT_GT(tight.epoch_s, 1.2 * full.epoch_s);  // a compute-bound step at 40 % of the board's power is much slower
}

TEST_F(TrainingStep, UnderABindingLimitTheClockMovesContinuouslyAndPowerSitsAtTheLimit) {
  // The firmware alternates between adjacent clocks: a limit 1 W lower lowers the averaged clock a
  // little, not by whole clock steps, and a compute-bound step averages at the limit.
  const auto at = [&](double limit) {
    return training_under_power_limit(v100, resnet50, imagenet, Precision::fp32, 256, limit);
  };
  const auto p150 = at(150.0), p149 = at(149.0);
  EXPECT_LT(p149.sm_clock_mhz, p150.sm_clock_mhz);
  EXPECT_GT(p149.sm_clock_mhz, p150.sm_clock_mhz - 30.0);
  EXPECT_LT(p150.average_power_w, 150.0 + 1e-9);
  EXPECT_GT(p150.average_power_w, 150.0 - 5.0);
  EXPECT_GT(p149.epoch_s, p150.epoch_s);
}

TEST_F(TrainingStep, AnEpochIsEveryBatchOfTheDatasetAtTheStepTime) {
  const OperatingPoint point{v100.boost_clock_mhz, v100.default_memory_clock_mhz};
  const auto p = training_step(v100, resnet50, imagenet, Precision::fp32, 100, point);
  EXPECT_DOUBLE_EQ(p.epoch_s, 12812.0 * p.step_s);  // ceil(1,281,167 / 100) steps
  EXPECT_GT(p.gpu_busy_s, 0.0);
  EXPECT_LE(p.gpu_busy_s, p.step_s);
  // Three times the inference work: the step is slower than an inference batch at the same clocks.
  const auto inference = profile_batch(v100, resnet50, Precision::fp32, 100, point);
  EXPECT_GT(p.gpu_busy_s, 2.0 * inference.busy_s);
}

TEST_F(TrainingStep, AHostBoundLoopLeavesTheGpuIdleAndTheLimitWithoutEffect) {
  auto slow_host = imagenet;
  slow_host.host_s_per_batch = 5.0;  // far longer than any step's kernels
  slow_host.host_s_per_image = 0.0;
  const auto a = training_under_power_limit(v100, resnet50, slow_host, Precision::fp32, 32, v100.power_limit_max_w);
  const auto b = training_under_power_limit(v100, resnet50, slow_host, Precision::fp32, 32, v100.power_limit_min_w);
  // (gpu⁴ + host⁴)^¼ with the GPU's part a few ms: the host's 5 s to a millionth.
  EXPECT_NEAR(a.step_s, 5.0, 5e-6);
  EXPECT_NEAR(b.step_s, 5.0, 5e-6);
  const double idle_w = idle_loaded_power_w(v100, {a.sm_clock_mhz, v100.default_memory_clock_mhz});
  EXPECT_LT(a.average_power_w, idle_w * 1.2);
  // The host's speed scales the loop.
  auto slower = v100;
  slower.host.training_loop_scale = 2.0;
  EXPECT_NEAR(training_under_power_limit(slower, resnet50, slow_host, Precision::fp32, 32, 200.0).step_s, 10.0, 1e-6);
}

TEST_F(TrainingStep, TheLimiterHoldsTheBurstsSoAGappedStepAveragesBelowTheLimit) {
  // The host loop takes twice the kernels' time: the GPU computes in bursts between gaps.
  const OperatingPoint boost{v100.boost_clock_mhz, v100.default_memory_clock_mhz};
  auto gapped = imagenet;
  gapped.host_s_per_image = 0.0;
  gapped.host_s_per_batch = 2.0 * training_step(v100, resnet50, imagenet, Precision::fp32, 256, boost).gpu_busy_s;
  const auto free = training_step(v100, resnet50, gapped, Precision::fp32, 256, boost);
  const double limit = 0.9 * free.average_power_w;  // under the free-running mean: the limiter must act
  const auto held = training_under_power_limit(v100, resnet50, gapped, Precision::fp32, 256, limit);
  EXPECT_LT(held.sm_clock_mhz, v100.boost_clock_mhz);
  // Held to the limit during its bursts, the step's mean lies well below it.
  EXPECT_LT(held.average_power_w, 0.8 * limit);
}

TEST_F(TrainingStep, BadBatchOrLimitIsAUsageError) {
  EXPECT_THROW((void)training_under_power_limit(v100, resnet50, imagenet, Precision::fp32, 0, 200.0), Error);
  EXPECT_THROW((void)training_under_power_limit(v100, resnet50, imagenet, Precision::fp32, 64, 90.0), Error);
  EXPECT_THROW((void)training_under_power_limit(v100, resnet50, imagenet, Precision::fp32, 64, 300.0), Error);
}

TEST_F(TrainingStep, PaddedSamplesStretchLargerBatchesAndNotASingleSample) {
  const OperatingPoint point{v100.boost_clock_mhz, v100.default_memory_clock_mhz};
  auto padded = imagenet;
  ASSERT_DOUBLE_EQ(imagenet.padding_growth, 0.0);  // images are all one size
  padded.padding_growth = 0.1;
  const auto single = training_step(v100, resnet50, imagenet, Precision::fp32, 1, point);
  EXPECT_DOUBLE_EQ(training_step(v100, resnet50, padded, Precision::fp32, 1, point).gpu_busy_s, single.gpu_busy_s);
  for (const int batch : {8, 64, 256}) {
    const auto fixed = training_step(v100, resnet50, imagenet, Precision::fp32, batch, point);
    const auto stretched = training_step(v100, resnet50, padded, Precision::fp32, batch, point);
    // Padded work grows as 1 + g·ln(batch); the weight traffic and the launches do not.
    EXPECT_GT(stretched.gpu_busy_s, fixed.gpu_busy_s) << batch;
    EXPECT_LT(stretched.gpu_busy_s, fixed.gpu_busy_s * (1.0 + 0.1 * std::log(batch)) + 1e-12) << batch;
  }
  const auto limited = training_under_power_limit(v100, resnet50, padded, Precision::fp32, 64, 150.0);
  EXPECT_GT(limited.epoch_s, training_under_power_limit(v100, resnet50, imagenet, Precision::fp32, 64, 150.0).epoch_s);
}

TEST_F(TrainingStep, ALimiterHoldsTheBusierPhaseSoAPhasedStepAveragesBelowTheLimit) {
  auto phased = resnet50;
  phased.power_phase_spread = 0.3;
  const double limit = 150.0;
  const auto even = training_under_power_limit(v100, resnet50, imagenet, Precision::fp32, 256, limit);
  const auto uneven = training_under_power_limit(v100, phased, imagenet, Precision::fp32, 256, limit);
  EXPECT_LT(uneven.average_power_w, even.average_power_w - 5.0);
  EXPECT_GT(uneven.epoch_s, even.epoch_s);
  EXPECT_LT(uneven.sm_clock_mhz, even.sm_clock_mhz);
}

TEST_F(TrainingStep, ASlowerFillingTrainingStepCostsSmallBatchesMoreAndLeavesLargeOnesAlone) {
  const OperatingPoint point{v100.boost_clock_mhz, v100.default_memory_clock_mhz};
  const auto as_inference = resnet50_training_with(1.0, 1.0);  // fills the GPU as the forward pass does
  const auto slow_filling = resnet50_training_with(3.0, 1.0);
  const auto busy_s = [&](const ModelSpec& m, int batch) {
    return training_step(v100, m, imagenet, Precision::fp32, batch, point).gpu_busy_s;
  };
  // Compute is (batch + half-saturation batch) images' work: tripling the half-saturation batch
  // costs batch 8 a large share and batch 1024 little.
  EXPECT_GT(busy_s(slow_filling, 8), 1.3 * busy_s(as_inference, 8));
  EXPECT_LT(busy_s(slow_filling, 1024), 1.05 * busy_s(as_inference, 1024));
  EXPECT_GT(busy_s(slow_filling, 1024), busy_s(as_inference, 1024));
  // The half-saturation batch is the forward pass's × the scale; inference never sees the scale.
  EXPECT_DOUBLE_EQ(half_saturation_batch(v100, training_step_model(slow_filling)),
                   3.0 * half_saturation_batch(v100, training_step_model(as_inference)));
  EXPECT_DOUBLE_EQ(profile_batch(v100, slow_filling, Precision::fp32, 8, point).busy_s,
                   profile_batch(v100, as_inference, Precision::fp32, 8, point).busy_s);
}

TEST_F(TrainingStep, SmSwitchingAtSmallBatchesKeepsTheirPowerNearTheLargeBatchesPower) {
  const OperatingPoint point{v100.boost_clock_mhz, v100.default_memory_clock_mhz};
  const auto idle_sms = resnet50_training_with(3.0, 1.0);
  const auto busy_sms = resnet50_training_with(3.0, 0.05);
  const auto power_w = [&](const ModelSpec& m, int batch) {
    return training_step(v100, m, imagenet, Precision::fp32, batch, point).average_power_w;
  };
  // Time is the same either way; only how much of it the SMs spend switching differs.
  EXPECT_DOUBLE_EQ(training_step(v100, busy_sms, imagenet, Precision::fp32, 8, point).step_s,
                   training_step(v100, idle_sms, imagenet, Precision::fp32, 8, point).step_s);
  EXPECT_GT(power_w(busy_sms, 8), power_w(idle_sms, 8) + 10.0);
  EXPECT_GT(power_w(busy_sms, 8), 0.9 * power_w(busy_sms, 512));
  EXPECT_DOUBLE_EQ(training_step_model(busy_sms).power_saturation_scale, 0.05 * resnet50.power_saturation_scale);
}

class AllocatorHostTime : public TrainingStep {
 protected:
  const ModelSpec& deepspeech2 = catalog.model("deepspeech2");
  const DatasetSpec& librispeech = catalog.dataset("librispeech_train");
  const GpuSpec& rtx6000 = catalog.gpu("rtx6000");
};

TEST_F(AllocatorHostTime, TheFillIsTheBatchsPaddedFootprintOverTheGpusMemory) {
  ASSERT_GT(librispeech.padding_growth, 0.0);
  for (const int batch : {1, 48, 128}) {
    const double stretch = 1.0 + librispeech.padding_growth * std::log(batch);
    const double mib = batch * deepspeech2.training_mib_per_sample * stretch;
    EXPECT_NEAR(memory_fill_fraction(rtx6000, deepspeech2, librispeech, batch), mib / (24.0 * 1024.0), 1e-12) << batch;
    // The V100's 32 GiB hold the same batch at three quarters of the RTX 6000's fill.
    EXPECT_NEAR(memory_fill_fraction(v100, deepspeech2, librispeech, batch),
                0.75 * memory_fill_fraction(rtx6000, deepspeech2, librispeech, batch), 1e-12);
  }
  auto unknown = rtx6000;
  unknown.memory_gib = 0.0;
  EXPECT_EQ(memory_fill_fraction(unknown, deepspeech2, librispeech, 64), 0.0);
  EXPECT_EQ(memory_fill_fraction(rtx6000, resnet50, librispeech, 64), 0.0);  // no footprint given
  EXPECT_THROW((void)memory_fill_fraction(rtx6000, deepspeech2, librispeech, 0), Error);
}

TEST_F(AllocatorHostTime, OnlyBatchesOfChangingShapeTakeItAndItGrowsAsTheFourthPowerOfTheFill) {
  ASSERT_GT(rtx6000.host.allocator_s, 0.0);
  auto fixed_shape = librispeech;
  fixed_shape.padding_growth = 0.0;
  EXPECT_EQ(allocator_host_s(rtx6000, deepspeech2, fixed_shape, 128), 0.0);
  const double at_64 = allocator_host_s(rtx6000, deepspeech2, librispeech, 64);
  const double at_128 = allocator_host_s(rtx6000, deepspeech2, librispeech, 128);
  const double fill_ratio = memory_fill_fraction(rtx6000, deepspeech2, librispeech, 128) /
                            memory_fill_fraction(rtx6000, deepspeech2, librispeech, 64);
  EXPECT_NEAR(at_128 / at_64, std::pow(fill_ratio, kAllocatorPressureExponent), 1e-9);
  const double full = rtx6000.host.allocator_s;
  EXPECT_NEAR(allocator_host_s(rtx6000, deepspeech2, librispeech, 128),
              full * std::pow(memory_fill_fraction(rtx6000, deepspeech2, librispeech, 128), 4.0), 1e-12);
}

TEST_F(AllocatorHostTime, ANearlyFullGpuLengthensTheEpochAndLowersItsPower) {
  // Zeus's DeepSpeech2 on the RTX 6000: past batch 48 the epochs lengthen and the power falls.
  auto without = rtx6000;
  without.host.allocator_s = 0.0;
  const auto with_it = training_under_power_limit(rtx6000, deepspeech2, librispeech, Precision::fp16, 128, 260.0);
  const auto free = training_under_power_limit(without, deepspeech2, librispeech, Precision::fp16, 128, 260.0);
  EXPECT_GT(with_it.epoch_s, free.epoch_s * 1.05);
  EXPECT_LT(with_it.average_power_w, free.average_power_w);
  // Where the batch holds a small share of the memory it is nearly free.
  const auto small = training_under_power_limit(rtx6000, deepspeech2, librispeech, Precision::fp16, 16, 260.0);
  const auto small_free = training_under_power_limit(without, deepspeech2, librispeech, Precision::fp16, 16, 260.0);
  EXPECT_NEAR(small.epoch_s, small_free.epoch_s, 0.01 * small_free.epoch_s);
  // The fitted twin turns the epoch time back up with the batch, as the trace does (5,929 s at
  // batch 48 and 8,136 s at 128, 260 W); without the allocator it keeps falling.
  const auto at_48 = training_under_power_limit(rtx6000, deepspeech2, librispeech, Precision::fp16, 48, 260.0);
  EXPECT_GT(with_it.epoch_s, 1.2 * at_48.epoch_s);
  EXPECT_LT(free.epoch_s,
            training_under_power_limit(without, deepspeech2, librispeech, Precision::fp16, 48, 260.0).epoch_s);
}

}  // namespace
}  // namespace gpucap::sim
