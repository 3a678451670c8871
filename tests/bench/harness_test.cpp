#include "gpucap/bench/harness.hpp"

#include <gtest/gtest.h>

#include "gpucap/core/error.hpp"
#include "support/paths.hpp"

namespace gpucap::bench {
namespace {

Matrix small_matrix() {
  Matrix m;
  m.id = "small";
  m.gpu = "p40";
  m.jobs = {MatrixJob{"a", "inception_v1", "imagenet", CapSchedule::constant(131), 3000, 0.0, ""},
            MatrixJob{"b", "mobilenet_v1_1.0", "imagenet", CapSchedule::constant(98), 3000, 0.0, ""},
            MatrixJob{"c", "resnet_v2_50", "caltech256", CapSchedule::parse("0:150,10:100"), 4000, 0.0, "steps"}};
  return m;
}

TEST(Harness, ResultsDoNotDependOnTheNumberOfThreads) {
  const auto catalog = sim::Catalog::load(test::data_dir());
  BenchOptions options;
  options.algorithms = {"batchsizer", "batchdvfs", "dvfs", "clipper"};
  options.threads = 1;
  const auto serial = run_matrix(small_matrix(), catalog, options);
  options.threads = 3;
  const auto parallel = run_matrix(small_matrix(), catalog, options);
  ASSERT_EQ(serial.size(), 12u);
  ASSERT_EQ(parallel.size(), 12u);
  for (std::size_t i = 0; i < serial.size(); ++i) {
    EXPECT_EQ(serial[i].job, parallel[i].job);
    EXPECT_EQ(serial[i].algorithm, parallel[i].algorithm);
    EXPECT_DOUBLE_EQ(serial[i].summary.energy_j, parallel[i].summary.energy_j);
    EXPECT_DOUBLE_EQ(serial[i].summary.duration_s, parallel[i].summary.duration_s);
  }
  EXPECT_EQ(bench_summary_csv(small_matrix(), serial), bench_summary_csv(small_matrix(), parallel));
}

TEST(Harness, SummaryAndReportHaveEveryRun) {
  const auto catalog = sim::Catalog::load(test::data_dir());
  BenchOptions options;
  options.algorithms = {"batchdvfs", "clipper"};
  const auto matrix = small_matrix();
  const auto runs = run_matrix(matrix, catalog, options);
  const auto csv = bench_summary_csv(matrix, runs);
  EXPECT_EQ(csv.substr(0, csv.find('\n')),
            "matrix,job,model,dataset,cap_w,cap_schedule,algorithm,images,duration_s,throughput_img_s,"
            "over_cap_windows_pct,time_over_cap_s,energy_j,energy_j_per_image,mean_power_w,max_power_w,platform");
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 7);
  EXPECT_NE(csv.find("small,c,resnet_v2_50,caltech256,,0:150 10:100,clipper,4000,"), std::string::npos) << csv;
  const auto json = bench_summary_json(matrix, runs, options);
  EXPECT_EQ(json["runs"].size(), 6u);
  EXPECT_TRUE(json["simulated"].get<bool>());
  const auto report = bench_report_markdown(matrix, catalog, runs, options, "gpucap bench --matrix small");
  EXPECT_NE(report.find("**Every figure on this page is simulated**"), std::string::npos);
  EXPECT_NE(report.find("| c | resnet_v2_50 | caltech256 | 0:150,10:100 |"), std::string::npos);
  EXPECT_NE(report.find("Job c: steps"), std::string::npos);
}

TEST(Harness, InvalidInputIsRejectedBeforeAnyRun) {
  const auto catalog = sim::Catalog::load(test::data_dir());
  BenchOptions options;
  options.algorithms = {"batchdvfs", "nope"};
  EXPECT_THROW((void)run_matrix(small_matrix(), catalog, options), Error);
  options.algorithms = {"batchdvfs"};
  auto matrix = small_matrix();
  matrix.jobs[1].schedule = CapSchedule::constant(400);
  try {
    (void)run_matrix(matrix, catalog, options);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("matrix small job b: power cap 400 W"), std::string::npos) << e.what();
  }
  options.threads = 0;
  EXPECT_THROW((void)run_matrix(small_matrix(), catalog, options), Error);
}

}  // namespace
}  // namespace gpucap::bench
