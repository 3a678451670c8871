#include "gpucap/control/batchsizer.hpp"

#include <gtest/gtest.h>

namespace gpucap::control {
namespace {

constexpr double kCap = 100.0;  // band [80, 100]
constexpr double kLow = 50.0;
constexpr double kHigh = 120.0;
constexpr double kInBand = 90.0;

TEST(BatchSizer, DefaultsAreThePapers) {
  const BatchSizerParams params;
  EXPECT_DOUBLE_EQ(params.alpha, 0.8);
  EXPECT_EQ(params.period, DecisionPeriod::every_batches(10));
  EXPECT_EQ(params.batch_sizes, (std::vector<int>{1, 2, 4, 8, 16, 32, 64, 128, 256}));
  BatchSizerController controller(params);
  EXPECT_EQ(controller.initial_knobs(100.0).batch_size(), 1);
  EXPECT_FALSE(controller.initial_knobs(100.0).sm_clock_mhz.has_value()) << "batch size only: clocks untouched";
  const auto needs = controller.requirements();
  EXPECT_FALSE(needs.sm_clock || needs.memory_clock || needs.power_limit);
}

TEST(BatchSizer, BinarySearchFollowsAlgorithm1) {
  BatchSizerController controller{BatchSizerParams{}};
  Observation obs;
  obs.cap_w = kCap;
  const auto decide = [&](double power_w) {
    obs.power.max_w = power_w;
    return controller.decide(obs).batch_size();
  };
  EXPECT_EQ(decide(kLow), 16);     // min=0, cur=ceil((0+8)/2)=4
  EXPECT_EQ(decide(kLow), 64);     // min=4, cur=6
  EXPECT_EQ(decide(kHigh), 32);    // max=6, cur=floor((4+6)/2)=5
  EXPECT_EQ(decide(kInBand), 32);  // hold
  EXPECT_EQ(decide(kHigh), 16);    // max=5, cur=4
  EXPECT_EQ(decide(kHigh), 4);     // cur == min: restart on [0, 4], cur=2
  EXPECT_EQ(decide(kHigh), 2);
  EXPECT_EQ(decide(kHigh), 1);
  EXPECT_EQ(decide(kHigh), 1) << "batch 1 is the floor";
}

TEST(BatchSizer, GrowsAgainAfterTheCapRises) {
  // Algorithm 1 as printed never raises maxBS again; the search re-opens the upper half at
  // cur == max, as the authors' BatchDVFS code does (docs/algorithms.md).
  const BatchSizerParams params;
  auto s = BatchSearch{0, 4, 4};
  s = batchsizer_step(params, s, kLow, kCap);
  EXPECT_EQ(s, (BatchSearch{4, 8, 6}));
  s = batchsizer_step(params, BatchSearch{4, 8, 8}, kLow, kCap);
  EXPECT_EQ(s, (BatchSearch{4, 8, 8})) << "at the largest batch nothing more can grow";
}

}  // namespace
}  // namespace gpucap::control
