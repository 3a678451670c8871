#include "gpucap/tune/partition.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "gpucap/core/error.hpp"
#include "gpucap/predict/pctodl.hpp"
#include "gpucap/runtime/mps_planning.hpp"
#include "gpucap/sim/catalog.hpp"
#include "support/paths.hpp"

namespace gpucap::tune {
namespace {

// A GPU of tenants whose throughput saturates in batch size and grows with their share and the
// SM clock; power rises with the clock squared. Memory clock 2 is faster and costs 15 W.
PartitionPrediction synthetic(const std::vector<Tenant>& tenants, double f_mhz, double memory) {
  double throughput = 0.0, dynamic = 0.0;
  for (const auto& t : tenants) {
    const double share = t.share_pct / 100.0;
    throughput += 2000.0 * std::sqrt(share) * (t.batch / (t.batch + 24.0)) * (f_mhz / 1500.0) * (memory > 1 ? 1.1 : 1.0);
    dynamic += 150.0 * share * (0.6 + t.batch / 640.0);
  }
  const double scale = (f_mhz / 1500.0) * (f_mhz / 1500.0);
  return {throughput, 40.0 + (memory > 1 ? 15.0 : 0.0) + dynamic * scale};
}

PartitionSpace space() {
  PartitionSpace s;
  for (double f = 210; f <= 2100; f += 15) s.sm_clocks_mhz.push_back(f);
  s.memory_clocks_mhz = {1, 2};
  s.mps_step_pct = 20;  // keeps the exhaustive search small enough for a unit test
  return s;
}

TEST(PartitionSpace, AdmissibleBatchesFollowTheShare) {
  auto s = space();
  EXPECT_EQ(s.batches_for(5), (std::vector<int>{4, 8, 16, 32}));
  EXPECT_EQ(s.batches_for(100), (std::vector<int>{96, 128, 192, 256}));
  s.max_batch = 160;  // vgg19
  EXPECT_EQ(s.batches_for(100), (std::vector<int>{96, 128}));
  s.batch_pool = {64, 128};
  EXPECT_EQ(s.batches_for(5), (std::vector<int>{64})) << "none in range: the one closest to the lower end";
  s.mps_step_pct = 3;
  EXPECT_THROW(s.validate(), Error);
  s.mps_step_pct = 5;
  s.sm_clocks_mhz.clear();
  EXPECT_THROW(s.validate(), Error);
}

TEST(Partition, GreedyStaysUnderTheCapAndComesCloseToTheExhaustiveOptimumWithFarFewerPredictions) {
  for (const double cap : {90.0, 140.0, 200.0}) {
    const auto greedy = greedy_partition(space(), synthetic, cap);
    const auto exhaustive = exhaustive_partition(space(), synthetic, cap);
    ASSERT_TRUE(greedy.best.has_value()) << cap;
    ASSERT_TRUE(exhaustive.best.has_value()) << cap;
    const auto& g = *greedy.best;
    int total = 0;
    for (const auto& t : g.tenants) total += t.share_pct;
    EXPECT_LE(total, 100);
    EXPECT_EQ(total % 20, 0);
    EXPECT_LE(g.predicted.power_w, cap);
    EXPECT_LE(exhaustive.best->predicted.power_w, cap);
    // Both solve the clock by bisection to within 1 W under the cap, so greedy can land a hair
    // higher on the same partition; beyond that it cannot beat the search of every partition.
    EXPECT_LE(g.predicted.throughput_img_s, 1.005 * exhaustive.best->predicted.throughput_img_s) << cap;
    EXPECT_GE(g.predicted.throughput_img_s, 0.9 * exhaustive.best->predicted.throughput_img_s)
        << cap << ": greedy " << describe(g.tenants) << " vs " << describe(exhaustive.best->tenants);
    EXPECT_LT(greedy.predictor_calls * 5, exhaustive.predictor_calls) << cap;
  }
}

TEST(Partition, LocalSearchFindsTheExhaustiveOptimumOfTheTwinsModelWithFarFewerPredictions) {
  // Two tenants at most keeps the exhaustive search fast; with three it needs 200k-300k predictions
  // against the same few hundred (docs/benchmarks.md).
  // The twin's MPS model of the RTX 3080 Ti with resnet50 and mobilenet_v2, 5-% shares.
  const auto catalog = sim::Catalog::load(test::data_dir());
  const auto& gpu = catalog.gpu("rtx3080ti");
  for (const char* name : {"resnet50", "mobilenet_v2"}) {
    const auto& model = catalog.model(name);
    auto s = runtime::pctodl_partition_space(gpu, model);
    s.max_tenants = 2;
    const auto predict = runtime::twin_partition_predictor(gpu, model);
    for (const double cap : {130.0, 200.0}) {
      const auto exhaustive = exhaustive_partition(s, predict, cap);
      const auto local = local_search_partition(s, predict, cap);
      const auto greedy = greedy_partition(s, predict, cap);
      ASSERT_TRUE(exhaustive.best && local.best && greedy.best) << name << " " << cap;
      EXPECT_LE(local.best->predicted.power_w, cap);
      EXPECT_GE(local.best->predicted.throughput_img_s, 0.99 * exhaustive.best->predicted.throughput_img_s)
          << name << " " << cap << ": " << describe(local.best->tenants) << " vs " << describe(exhaustive.best->tenants);
      EXPECT_GE(local.best->predicted.throughput_img_s, greedy.best->predicted.throughput_img_s) << name << " " << cap;
      EXPECT_LT(local.predictor_calls * 50, exhaustive.predictor_calls) << name << " " << cap;
    }
  }
}

TEST(Partition, LocalSearchCanBeKeptToEachSharesAdmissibleBatches) {
  // A predictor that rewards a share at a batch below its range, a region a profile never covers.
  const auto s_free = space();
  const PartitionPredictor lure = [&s_free](const std::vector<Tenant>& tenants, double f, double m) {
    auto p = synthetic(tenants, f, m);
    for (const auto& t : tenants) {
      if (t.batch < s_free.batches_for(t.share_pct).front()) p.throughput_img_s *= 3.0;
    }
    return p;
  };
  auto s = s_free;
  const auto free = local_search_partition(s, lure, 140.0);
  ASSERT_TRUE(free.best.has_value());
  const auto lured = std::any_of(free.best->tenants.begin(), free.best->tenants.end(),
                                 [&s](const Tenant& t) { return t.batch < s.batches_for(t.share_pct).front(); });
  EXPECT_TRUE(lured) << "without the restriction the search takes the lure: " << describe(free.best->tenants);
  s.admissible_batches_only = true;
  const auto kept = local_search_partition(s, lure, 140.0);
  ASSERT_TRUE(kept.best.has_value());
  for (const auto& t : kept.best->tenants) {
    const auto allowed = s.batches_for(t.share_pct);
    EXPECT_NE(std::find(allowed.begin(), allowed.end(), t.batch), allowed.end()) << describe(kept.best->tenants);
  }
}

TEST(Partition, NothingFitsUnderACapBelowIdle) {
  const auto result = greedy_partition(space(), synthetic, 30.0);
  EXPECT_FALSE(result.best.has_value());
  EXPECT_FALSE(exhaustive_partition(space(), synthetic, 30.0).best.has_value());
}

TEST(Partition, PctodlPredictorOnThe3080Ti) {
  const auto dir = test::shared_file("pctodl");
  std::vector<predict::PctodlPredictor> by_memory;
  by_memory.push_back(predict::PctodlPredictor::load(dir, "resnet50", "imagenet_mem9501"));
  by_memory.push_back(predict::PctodlPredictor::load(dir, "resnet50", "imagenet_mem5001"));
  const PartitionPredictor predict = [&](const std::vector<Tenant>& tenants, double f, double m) {
    const auto& p = m == 9501 ? by_memory[0] : by_memory[1];
    std::vector<double> shares;
    std::vector<int> batches;
    for (const auto& t : tenants) {
      shares.push_back(t.share_pct);
      batches.push_back(t.batch);
    }
    const auto r = p.predict(shares, batches, f);
    return PartitionPrediction{r.throughput, r.power_w};
  };
  PartitionSpace s;
  for (double f = 210; f <= 2100; f += 15) s.sm_clocks_mhz.push_back(f);
  s.memory_clocks_mhz = {9501, 5001};
  const auto result = greedy_partition(s, predict, 200.0);
  ASSERT_TRUE(result.best.has_value());
  EXPECT_LE(result.best->predicted.power_w, 200.0);
  EXPECT_GT(result.best->predicted.throughput_img_s, 500.0);
  EXPECT_GT(result.predictor_calls, 10u);
}

TEST(Partition, TheVectorisedGreedyMakesThePlainGreedysPlanFromFewerEnsembleEvaluations) {
  const auto catalog = sim::Catalog::load(test::data_dir());
  const auto& gpu = catalog.gpu("rtx3080ti");
  const auto dir = test::shared_file("pctodl");
  for (const char* name : {"resnet50", "vgg19"}) {
    const auto& model = catalog.model(name);
    const auto s = runtime::pctodl_partition_space(gpu, model);
    const auto plain = runtime::pctodl_predictor(catalog, gpu, model, dir, s.memory_clocks_mhz);
    const auto curves = runtime::pctodl_curve_predictor(catalog, gpu, model, dir, s.memory_clocks_mhz);
    // The split predictor agrees with the plain one bit for bit.
    const std::vector<Tenant> two = {{50, 64}, {30, 32}};
    const auto curve = curves(two, 5001);
    for (const double f : {500.0, 1234.5, 1950.0}) {
      EXPECT_EQ(curve(f).power_w, plain(two, f, 5001).power_w);
      EXPECT_EQ(curve(f).throughput_img_s, plain(two, f, 5001).throughput_img_s);
    }
    for (const double cap : {130.0, 180.0}) {
      const auto g = greedy_partition(s, plain, cap);
      const auto v = greedy_partition_vectorised(s, curves, cap);
      ASSERT_TRUE(g.best && v.best) << name << " " << cap;
      EXPECT_EQ(v.best->tenants, g.best->tenants) << name << " " << cap;
      EXPECT_EQ(v.best->sm_clock_mhz, g.best->sm_clock_mhz);
      EXPECT_EQ(v.best->memory_clock_mhz, g.best->memory_clock_mhz);
      EXPECT_EQ(v.predictor_calls, g.predictor_calls);
      EXPECT_EQ(v.configurations, g.configurations);
      // Each prepared curve serves every clock SolveFreq tries on it.
      EXPECT_GT(v.curves, 0u);
      EXPECT_LT(v.curves * 3, v.predictor_calls) << name << " " << cap;
    }
  }
}

}  // namespace
}  // namespace gpucap::tune
