#include "gpucap/control/registry.hpp"

#include <gtest/gtest.h>

#include "gpucap/core/error.hpp"

namespace gpucap::control {
namespace {

const PlatformLimits kP40{{544, 632, 734, 835, 949, 1063, 1189, 1303, 1430, 1531},
                          {544, 632, 734, 835, 949, 1000, 1063, 1189, 1303, 1430, 1531}};

void expect_usage(const std::string& algorithm, const ControllerOptions& options, const std::string& fragment) {
  try {
    (void)make_controller(algorithm, options, kP40);
    FAIL() << "no error for " << algorithm;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::usage);
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TEST(Registry, BuildsEveryListedAlgorithm) {
  for (const auto& info : algorithms()) {
    ControllerOptions options;
    if (needs_profile(info.name)) {
      options.profile = std::make_shared<const predict::ProfileModel>(
          std::vector<predict::ProfileSample>{{1, 544.0, std::nullopt, 100.0, 60.0}});
    }
    if (needs_offline_search(info.name)) {
      options.tuned_table = std::make_shared<const CapTable>(CapTable{{100.0, single_tenant_knobs(8, 544.0)}});
    }
    if (needs_mps_planning(info.name)) {
      auto planning = std::make_shared<MpsPlanning>();
      planning->plan = [](double) { return std::optional<PartitionPlan>(); };
      planning->sm_clocks_mhz = {544.0};
      planning->memory_clocks_mhz = {3615.0};
      options.mps_planning = planning;
    }
    const auto controller = make_controller(info.name, options, kP40);
    EXPECT_EQ(controller->name(), info.name);
  }
  EXPECT_EQ(make_controller("BatchDVFS", {}, kP40)->name(), "batchdvfs");
}

TEST(Registry, UnknownAlgorithmListsTheKnownOnes) {
  expect_usage("zeus", {}, "known: batchsizer, batchdvfs, dvfs, clipper");
}

TEST(Registry, OptionsAreValidated) {
  ControllerOptions o;
  o.alpha = 1.5;
  expect_usage("batchdvfs", o, "--alpha 1.5");
  o = {};
  o.start_batch = 3;
  expect_usage("batchsizer", o, "--start-batch 3 is not in the batch size set");
  o = {};
  o.clock_levels_mhz = std::vector<double>{544, 1000.5};
  expect_usage("batchdvfs", o, "1000.5 MHz is not a supported SM clock");
  o = {};
  o.clock_levels_mhz = std::vector<double>{1063, 949};
  expect_usage("dvfs", o, "strictly increasing");
  o = {};
  o.batch_sizes = std::vector<int>{4, 2};
  expect_usage("clipper", o, "strictly increasing");
  o = {};
  o.start_clock_mhz = 1000;
  expect_usage("batchdvfs", o, "--start-clock 1000 MHz is not one of the clock levels");
  o = {};
  o.clock_levels_mhz = std::vector<double>{544};
  expect_usage("batchsizer", o, "does not apply");
  o = {};
  o.fixed_batch = 0;
  expect_usage("dvfs", o, "--batch 0");
}

TEST(Registry, OptionsChangeTheController) {
  ControllerOptions o;
  o.start_batch = 8;
  o.start_clock_mhz = 1303;
  o.window = DecisionPeriod::every_seconds(6);
  const auto controller = make_controller("batchdvfs", o, kP40);
  EXPECT_EQ(controller->initial_knobs(100.0).batch_size(), 8);
  EXPECT_EQ(controller->initial_knobs(100.0).sm_clock_mhz, 1303.0);
  EXPECT_EQ(controller->period(), DecisionPeriod::every_seconds(6));
}

TEST(Registry, OtherGpusUseTheirOwnLadder) {
  const PlatformLimits a100{{210, 345, 480, 615, 750, 870, 1005, 1140, 1275, 1410}, {}};
  const auto controller = make_controller("batchdvfs", {}, a100);
  EXPECT_EQ(controller->initial_knobs(100.0).sm_clock_mhz, 870.0) << "the sixth of ten levels, like 1063 MHz on the P40";
}

TEST(Registry, ParsesBatchSetsAndClockLists) {
  EXPECT_EQ(parse_batch_sizes("1,2,4"), (std::vector<int>{1, 2, 4}));
  EXPECT_EQ(parse_batch_sizes("3..6"), (std::vector<int>{3, 4, 5, 6}));
  EXPECT_THROW((void)parse_batch_sizes("0..4"), Error);
  EXPECT_THROW((void)parse_batch_sizes("1,x"), Error);
  EXPECT_THROW((void)parse_batch_sizes("5..2"), Error);
  EXPECT_EQ(parse_clock_levels("544, 632"), (std::vector<double>{544, 632}));
  EXPECT_THROW((void)parse_clock_levels("544,-1"), Error);
}

TEST(DecisionPeriod, ParsesSecondsAndBatches) {
  EXPECT_EQ(DecisionPeriod::parse("3"), DecisionPeriod::every_seconds(3));
  EXPECT_EQ(DecisionPeriod::parse("2.5s"), DecisionPeriod::every_seconds(2.5));
  EXPECT_EQ(DecisionPeriod::parse("10b"), DecisionPeriod::every_batches(10));
  EXPECT_THROW((void)DecisionPeriod::parse("0"), Error);
  EXPECT_THROW((void)DecisionPeriod::parse("fast"), Error);
  EXPECT_THROW((void)DecisionPeriod::parse("0b"), Error);
  // Upstream: a window closes when strictly more than W has passed.
  EXPECT_FALSE(DecisionPeriod::every_seconds(3).due(3.0, 100));
  EXPECT_TRUE(DecisionPeriod::every_seconds(3).due(3.01, 1));
  EXPECT_TRUE(DecisionPeriod::every_batches(10).due(0.001, 10));
  EXPECT_FALSE(DecisionPeriod::every_batches(10).due(100.0, 9));
}

}  // namespace
}  // namespace gpucap::control
