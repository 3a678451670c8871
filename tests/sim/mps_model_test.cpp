#include "gpucap/sim/mps_model.hpp"

#include <gtest/gtest.h>

#include <map>

#include "gpucap/core/error.hpp"
#include "gpucap/sim/catalog.hpp"
#include "gpucap/sim/gpu_twin.hpp"
#include "support/paths.hpp"

namespace gpucap::sim {
namespace {

class MpsModelTest : public ::testing::Test {
 protected:
  Catalog catalog = Catalog::load(test::data_dir());
  GpuSpec gpu = catalog.gpu("rtx3080ti");
  OperatingPoint top{gpu.max_sm_clock_mhz(), gpu.max_memory_clock_mhz()};
  MpsProfile profile(const char* model, const std::vector<MpsTenant>& tenants, OperatingPoint point) const {
    const auto& m = catalog.model(model);
    return profile_mps(gpu, m, m.precision, tenants, point);
  }
};

TEST_F(MpsModelTest, OneTenantAtTheWholeGpuIsTheSingleTenantBatch) {
  const auto& model = catalog.model("resnet50");
  const auto single = profile_batch(gpu, model, model.precision, 64, top);
  const auto mps = profile("resnet50", {{100.0, 64}}, top);
  EXPECT_DOUBLE_EQ(mps.memory_stretch, 1.0);
  EXPECT_NEAR(mps.throughput_img_s, 64.0 / single.latency_s(), 1e-9);
  EXPECT_NEAR(mps_average_power_w(gpu, mps, top), average_batch_power_w(gpu, single, top), 1e-9);
}

TEST_F(MpsModelTest, ASmallerShareRunsTheSameBatchMoreSlowlyAndDrawsLessPower) {
  const auto full = profile("resnet50", {{100.0, 32}}, top);
  const auto quarter = profile("resnet50", {{25.0, 32}}, top);
  EXPECT_LT(quarter.throughput_img_s, 0.6 * full.throughput_img_s);
  EXPECT_LT(mps_average_power_w(gpu, quarter, top), mps_average_power_w(gpu, full, top));
}

TEST_F(MpsModelTest, TenantsFillTheGapsOfASmallBatch) {
  // Batch 4 leaves the GPU idle during each batch's synchronisation and partly empty during
  // kernels; four processes at 25 % overlap those gaps.
  gpu.mps_interference_per_tenant = 0.0;
  const auto one = profile("mobilenet_v2", {{100.0, 4}}, top);
  const auto four = profile("mobilenet_v2", {{25.0, 4}, {25.0, 4}, {25.0, 4}, {25.0, 4}}, top);
  EXPECT_GT(four.throughput_img_s, 1.5 * one.throughput_img_s);
  EXPECT_GT(four.sm_activity, one.sm_activity);
}

TEST_F(MpsModelTest, InterferenceSlowsEveryTenant) {
  const std::vector<MpsTenant> two{{50.0, 32}, {50.0, 32}};
  gpu.mps_interference_per_tenant = 0.0;
  const auto without = profile("resnet50", two, top);
  gpu.mps_interference_per_tenant = 0.2;
  const auto with = profile("resnet50", two, top);
  EXPECT_LT(with.throughput_img_s, 0.95 * without.throughput_img_s);
}

TEST_F(MpsModelTest, TenantsShareTheMemoryBandwidth) {
  // On a GPU with a tenth of the bandwidth every tenant is memory-bound: three of them get a third
  // of it each, so together they do no better than one.
  gpu.memory_bandwidth_gbps /= 10.0;
  gpu.mps_interference_per_tenant = 0.0;
  const auto one = profile("vgg19", {{100.0, 64}}, top);
  const auto three = profile("vgg19", {{30.0, 64}, {30.0, 64}, {30.0, 64}}, top);
  EXPECT_GT(three.memory_stretch, 2.5);
  EXPECT_LE(three.memory_activity, gpu.memory_efficiency + 1e-6);
  EXPECT_LT(three.throughput_img_s, 1.05 * one.throughput_img_s);
}

TEST_F(MpsModelTest, ThePowerLimiterLowersTheClockUntilTheAverageFits) {
  const auto& model = catalog.model("resnet50");
  const std::vector<MpsTenant> tenants{{50.0, 32}, {50.0, 32}};
  const double full_w = mps_average_power_w(gpu, profile("resnet50", tenants, top), top);
  const double limit_w = full_w - 60.0;
  const double clock = mps_power_limited_sm_clock_mhz(gpu, model, model.precision, tenants, top, limit_w);
  EXPECT_LT(clock, top.sm_clock_mhz);
  const OperatingPoint limited{clock, top.memory_clock_mhz};
  EXPECT_LE(mps_average_power_w(gpu, profile("resnet50", tenants, limited), limited), limit_w);
  EXPECT_DOUBLE_EQ(mps_power_limited_sm_clock_mhz(gpu, model, model.precision, tenants, top, full_w + 1.0),
                   top.sm_clock_mhz);
}

TEST_F(MpsModelTest, InvalidPartitionsAreUsageErrors) {
  const auto expect_usage = [&](const std::vector<MpsTenant>& tenants) {
    try {
      (void)profile("resnet50", tenants, top);
      ADD_FAILURE() << "accepted an invalid partition";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::usage) << e.what();
    }
  };
  expect_usage({});
  expect_usage({{60.0, 8}, {50.0, 8}});
  expect_usage({{0.0, 8}});
  expect_usage({{50.0, 0}});
}

class MpsTwinTest : public MpsModelTest {
 protected:
  GpuTwin make(std::uint64_t seed = 1) {
    const auto& m = catalog.model("mobilenet_v2");
    return GpuTwin(gpu, m, m.precision, seed);
  }
};

TEST_F(MpsTwinTest, RunningTenantsMatchesTheSteadyStateModel) {
  auto twin = make();
  const std::vector<MpsTenant> tenants{{50.0, 32}, {25.0, 16}, {25.0, 8}};
  std::map<int, long long> images;
  while (twin.now_s() < 30.0) {
    const auto record = twin.run_tenants(tenants);
    EXPECT_LE(record.end_s, twin.now_s() + 1e-12);
    images[record.tenant] += record.batch_size;
  }
  const OperatingPoint point{gpu.boost_clock_mhz, gpu.default_memory_clock_mhz};
  const auto steady = profile("mobilenet_v2", tenants, point);
  long long total = 0;
  for (const auto& [tenant, count] : images) {
    total += count;
    const double rate = static_cast<double>(count) / twin.now_s();
    EXPECT_NEAR(rate, steady.tenants[static_cast<std::size_t>(tenant)].images_per_s,
                0.03 * steady.tenants[static_cast<std::size_t>(tenant)].images_per_s);
  }
  EXPECT_EQ(images.size(), 3u);
  EXPECT_NEAR(static_cast<double>(total) / twin.now_s(), steady.throughput_img_s, 0.02 * steady.throughput_img_s);
  EXPECT_NEAR(twin.energy_j() / twin.now_s(), mps_average_power_w(gpu, steady, point), 0.02 * twin.energy_j() / twin.now_s());
}

TEST_F(MpsTwinTest, ANewPartitionRestartsTheProcessesButNewBatchSizesDoNot) {
  auto twin = make();
  for (int i = 0; i < 20; ++i) (void)twin.run_tenants({{50.0, 32}, {50.0, 32}});
  double before_s = twin.now_s();
  auto record = twin.run_tenants({{50.0, 16}, {50.0, 64}});
  EXPECT_LT(record.end_s - before_s, 0.5 * gpu.mps_restart_s) << "a batch-size change is not a restart";
  before_s = twin.now_s();
  record = twin.run_tenants({{25.0, 16}, {75.0, 64}});
  EXPECT_GE(record.start_s - before_s, gpu.mps_restart_s) << "new shares restart the worker processes";
  before_s = twin.now_s();
  (void)twin.run_batch(32);
  EXPECT_GE(twin.now_s() - before_s, gpu.mps_restart_s) << "back to one process at 100 %";
}

TEST_F(MpsTwinTest, TheSameSeedGivesTheSameRun) {
  auto a = make(7);
  auto b = make(7);
  for (int i = 0; i < 100; ++i) {
    const auto ra = a.run_tenants({{40.0, 16}, {60.0, 32}});
    const auto rb = b.run_tenants({{40.0, 16}, {60.0, 32}});
    EXPECT_EQ(ra.tenant, rb.tenant);
    EXPECT_DOUBLE_EQ(ra.end_s, rb.end_s);
  }
  EXPECT_DOUBLE_EQ(a.energy_j(), b.energy_j());
}

}  // namespace
}  // namespace gpucap::sim
