#include "gpucap/bench/harness.hpp"

#include <gtest/gtest.h>

#include <algorithm>

#include "gpucap/core/error.hpp"
#include "gpucap/core/text.hpp"
#include "support/paths.hpp"

namespace gpucap::bench {
namespace {

MatrixJob job(std::string id, std::string model, std::string dataset, CapSchedule schedule, long long images,
              std::string note = {}) {
  MatrixJob j;
  j.id = std::move(id);
  j.model = std::move(model);
  j.dataset = std::move(dataset);
  j.schedule = std::move(schedule);
  j.images = images;
  j.note = std::move(note);
  return j;
}

Matrix small_matrix() {
  Matrix m;
  m.id = "small";
  m.gpu = "p40";
  m.jobs = {job("a", "inception_v1", "imagenet", CapSchedule::constant(131), 3000),
            job("b", "mobilenet_v1_1.0", "imagenet", CapSchedule::constant(98), 3000),
            job("c", "resnet_v2_50", "caltech256", CapSchedule::parse("0:150,10:100"), 4000, "steps")};
  return m;
}

TEST(Harness, MultiTenantMatricesRunThePartitionersAndSearchPartitionsForTheOracle) {
  const auto catalog = sim::Catalog::load(test::data_dir());
  Matrix m;
  m.id = "mps";
  m.gpu = "rtx3080ti";
  m.mps = MatrixMps{2, {40.0, 40.0}};
  auto j = job("6", "resnet50", "imagenet", CapSchedule::constant(150), 0);
  j.duration_s = 30.0;
  m.jobs = {j};
  BenchOptions options;
  options.algorithms = {"pctodl", "directcap", "morak"};
  options.pctodl_params_dir = test::shared_file("pctodl");
  const auto runs = run_matrix(m, catalog, options);
  ASSERT_EQ(runs.size(), 3u);
  for (const auto& run : runs) {
    ASSERT_EQ(run.partition_oracle.size(), 1u) << run.algorithm;
    EXPECT_NE(run.partition_oracle.front().find("150 W: "), std::string::npos) << run.partition_oracle.front();
    ASSERT_TRUE(run.pct_of_oracle().has_value()) << run.algorithm;
    EXPECT_GT(*run.pct_of_oracle(), 20.0) << run.algorithm;
    EXPECT_LT(*run.pct_of_oracle(), 110.0) << run.algorithm;
    ASSERT_FALSE(run.trace.empty());
  }
  // morak runs its two fixed tenants; directcap sets the board limit and leaves the clock alone.
  EXPECT_EQ(runs[2].trace.back().tenants, (std::vector<TenantKnobs>{{40.0, runs[2].trace.back().batch_size},
                                                                    {40.0, runs[2].trace.back().batch_size}}));
  EXPECT_GT(runs[1].summary.device_writes, 0);
  // Without PctoDL's fits the partitioners cannot plan: a usage error before anything runs.
  options.pctodl_params_dir.clear();
  EXPECT_THROW((void)run_matrix(m, catalog, options), Error);
}

TEST(Harness, ResultsDoNotDependOnTheNumberOfThreads) {
  const auto catalog = sim::Catalog::load(test::data_dir());
  BenchOptions options;
  options.algorithms = {"batchsizer", "batchdvfs", "dvfs", "clipper", "capfit", "bobd"};
  options.search_budget = 8;
  options.threads = 1;
  const auto serial = run_matrix(small_matrix(), catalog, options);
  options.threads = 3;
  const auto parallel = run_matrix(small_matrix(), catalog, options);
  ASSERT_EQ(serial.size(), 18u);
  ASSERT_EQ(parallel.size(), 18u);
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
            "oracle_throughput_img_s,pct_of_oracle,"
            "over_cap_windows_pct,over_cap_steady_windows_pct,time_over_cap_s,energy_j,energy_j_per_image,mean_power_w,"
            "max_power_w,cap_steps,windows_to_under_cap,windows_to_95pct_oracle,search_evaluations,search_cost_s,"
            "search_pct_of_oracle_after_20,search_pct_of_oracle,platform");
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 7);
  EXPECT_NE(csv.find("small,c,resnet_v2_50,caltech256,,0:150 10:100,clipper,4000,"), std::string::npos) << csv;
  const auto json = bench_summary_json(matrix, runs, options);
  EXPECT_EQ(json["runs"].size(), 6u);
  EXPECT_TRUE(json["simulated"].get<bool>());
  const auto report = bench_report_markdown(matrix, catalog, runs, options, "gpucap bench --matrix small");
  EXPECT_NE(report.find("**Every figure on this page is simulated**"), std::string::npos);
  EXPECT_NE(report.find("| c | resnet_v2_50 | caltech256 | 0:150,10:100 |"), std::string::npos);
  EXPECT_NE(report.find("Job c: steps"), std::string::npos);
  EXPECT_NE(report.find("## Throughput as % of the oracle"), std::string::npos);
}

TEST(Harness, EveryRunIsMeasuredAgainstTheOracle) {
  const auto catalog = sim::Catalog::load(test::data_dir());
  BenchOptions options;
  options.algorithms = {"batchdvfs", "dvfs"};
  const auto runs = run_matrix(small_matrix(), catalog, options);
  for (const auto& run : runs) {
    ASSERT_TRUE(run.pct_of_oracle().has_value()) << run.job << " " << run.algorithm;
    EXPECT_GT(*run.pct_of_oracle(), 10.0) << run.job << " " << run.algorithm;
    // Only a run that exceeded the cap can beat the best configuration that keeps under it.
    if (run.summary.windows_over_cap == 0) {
      EXPECT_LE(*run.pct_of_oracle(), 100.5) << run.job << " " << run.algorithm;
    }
  }
  // A cap that steps from 150 W to 100 W early in the run: its oracle lies between those of the two caps.
  Matrix single = small_matrix();
  single.jobs = {single.jobs[2], single.jobs[2], single.jobs[2]};
  single.jobs[0].id = "c150";
  single.jobs[0].schedule = CapSchedule::constant(150);
  single.jobs[1].id = "c100";
  single.jobs[1].schedule = CapSchedule::constant(100);
  single.jobs[2].schedule = CapSchedule::parse("0:150,2:100");
  options.algorithms = {"dvfs"};
  const auto three = run_matrix(single, catalog, options);
  ASSERT_GT(three[2].summary.duration_s, 4.0);
  EXPECT_LT(three[2].oracle_throughput_img_s, three[0].oracle_throughput_img_s);
  EXPECT_GT(three[2].oracle_throughput_img_s, three[1].oracle_throughput_img_s);
  options.oracle = false;
  EXPECT_FALSE(run_matrix(single, catalog, options)[0].pct_of_oracle().has_value());
}

void expect_usage_error_and_no_runs(const Matrix& matrix, const BenchOptions& options, const std::string& fragment) {
  const auto catalog = sim::Catalog::load(test::data_dir());
  std::size_t runs_done = 0;
  auto counting = options;
  counting.progress = [&runs_done](std::size_t, std::size_t) { ++runs_done; };
  try {
    (void)run_matrix(matrix, catalog, counting);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::usage) << e.what();
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
  EXPECT_EQ(runs_done, 0u) << "nothing may run before the whole matrix is validated";
}

TEST(Harness, InvalidInputIsRejectedBeforeAnyRun) {
  BenchOptions options;
  options.algorithms = {"batchdvfs", "nope"};
  expect_usage_error_and_no_runs(small_matrix(), options, "unknown algorithm 'nope'");
  options.algorithms = {"batchdvfs"};
  auto matrix = small_matrix();
  matrix.jobs[2].schedule = CapSchedule::constant(400);
  expect_usage_error_and_no_runs(matrix, options, "matrix small job c (batchdvfs): power cap 400 W");
  matrix = small_matrix();
  matrix.jobs[2].images = 1'000'000'000'000;
  expect_usage_error_and_no_runs(matrix, options, "job c");
  options.threads = 0;
  expect_usage_error_and_no_runs(small_matrix(), options, "--jobs 0");
  options.threads = 1;
  options.sample_hz = 0.0;
  expect_usage_error_and_no_runs(small_matrix(), options, "sampling rate");
}

TEST(Harness, AFailingRunStopsTheBenchWithItsError) {
  // Traces into a folder that does not exist: every worker's first write fails.
  const auto catalog = sim::Catalog::load(test::data_dir());
  BenchOptions options;
  options.algorithms = {"batchdvfs", "clipper"};
  options.threads = 2;
  options.trace_dir = "/nonexistent/gpucap-traces";
  try {
    (void)run_matrix(small_matrix(), catalog, options);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::io);
    EXPECT_NE(std::string(e.what()).find("/nonexistent/gpucap-traces/"), std::string::npos) << e.what();
  }
}

TEST(Harness, JobControllerOptionsReachEveryAlgorithm) {
  const auto catalog = sim::Catalog::load(test::data_dir());
  BenchOptions options;
  options.algorithms = {"batchdvfs"};
  auto matrix = small_matrix();
  matrix.jobs.resize(1);
  matrix.jobs[0].images = 0;
  matrix.jobs[0].duration_s = 60.0;
  const auto plain = run_matrix(matrix, catalog, options);
  matrix.jobs[0].controller.window = control::DecisionPeriod::every_seconds(1.0);
  const auto faster = run_matrix(matrix, catalog, options);
  EXPECT_GT(faster[0].summary.windows, 2 * plain[0].summary.windows);
}

TEST(Harness, MpsfitBeatsPctodlsBaselinesWithoutSteadyWindowsOverTheCap) {
  // Two of PctoDL's A100 tasks and a cap that falls mid-run: gpucap's multi-tenant algorithm
  // against directcap and morak (docs/benchmarks.md has all 32 tasks).
  const auto catalog = sim::Catalog::load(test::data_dir());
  Matrix m;
  m.id = "mps-a100";
  m.gpu = "a100";
  m.mps = MatrixMps{3, {40.0, 40.0}};
  auto resnet = job("20", "resnet50", "imagenet", CapSchedule::constant(150), 0);
  resnet.duration_s = 30.0;
  auto vgg = job("21", "vgg19", "imagenet", CapSchedule::parse("0:180,15:130"), 0);
  vgg.duration_s = 45.0;
  m.jobs = {resnet, vgg};
  BenchOptions options;
  options.algorithms = {"directcap", "morak", "mpsfit"};
  options.pctodl_params_dir = test::shared_file("pctodl");
  const auto runs = run_matrix(m, catalog, options);
  ASSERT_EQ(runs.size(), 6u);
  for (std::size_t j = 0; j < 2; ++j) {
    const auto& directcap = runs[3 * j];
    const auto& morak = runs[3 * j + 1];
    const auto& ours = runs[3 * j + 2];
    ASSERT_EQ(ours.algorithm, "mpsfit");
    EXPECT_EQ(ours.over_cap_steady_windows_pct, 0.0) << ours.job;
    ASSERT_TRUE(ours.pct_of_oracle().has_value());
    EXPECT_GT(*ours.pct_of_oracle(), 93.0) << ours.job;
    EXPECT_GT(ours.summary.throughput_img_s, morak.summary.throughput_img_s) << ours.job;
    EXPECT_GT(ours.summary.throughput_img_s, directcap.summary.throughput_img_s) << ours.job;
  }
  // resnet50 at 150 W is best split into tenants (vgg19 at 130 W, in one process: the oracle too).
  EXPECT_GT(runs[2].trace.back().tenants.size(), 1u) << "it runs MPS tenants";
  ASSERT_EQ(runs[5].cap_steps.size(), 1u);
  ASSERT_TRUE(runs[5].worst_windows_to_under_cap().has_value());
  EXPECT_EQ(*runs[5].worst_windows_to_under_cap(), 1) << "under the new cap in the first window";
}

TEST(Harness, CapfitBeatsBatchDvfsWithoutSteadyWindowsOverTheCapAndReportsCapSteps) {
  const auto catalog = sim::Catalog::load(test::data_dir());
  BenchOptions options;
  options.algorithms = {"batchdvfs", "capfit"};
  auto matrix = small_matrix();
  matrix.jobs[2].images = 0;
  matrix.jobs[2].duration_s = 30;  // long enough to see the step at 10 s through
  const auto runs = run_matrix(matrix, catalog, options);
  ASSERT_EQ(runs.size(), 6u);
  for (std::size_t j = 0; j < 3; ++j) {
    const auto& seed = runs[2 * j];
    const auto& ours = runs[2 * j + 1];
    ASSERT_EQ(ours.algorithm, "capfit");
    if (ours.job == "c") {
      // After the step to 100 W BatchDVFS halves its batch size window by window at 1,063 MHz,
      // over the cap all the while (~120 W): its extra throughput is drawn above the cap.
      EXPECT_GT(seed.over_cap_steady_windows_pct, 25.0);
    } else {
      EXPECT_GT(ours.summary.throughput_img_s, seed.summary.throughput_img_s) << ours.job;
    }
    EXPECT_EQ(ours.over_cap_steady_windows_pct, 0.0) << ours.job;
    ASSERT_TRUE(ours.pct_of_oracle().has_value());
    EXPECT_GT(*ours.pct_of_oracle(), 85.0) << ours.job;
  }
  const auto& stepped = runs[5];
  ASSERT_EQ(stepped.cap_steps.size(), 1u) << "job c steps 150 -> 100 W at 10 s";
  EXPECT_EQ(stepped.cap_steps[0].to_w, 100.0);
  ASSERT_TRUE(stepped.worst_windows_to_under_cap().has_value());
  EXPECT_EQ(*stepped.worst_windows_to_under_cap(), 1);
  ASSERT_TRUE(stepped.worst_windows_to_95pct_oracle().has_value());
  EXPECT_LE(*stepped.worst_windows_to_95pct_oracle(), 5);
  EXPECT_TRUE(runs[0].cap_steps.empty());
  const auto json = bench_summary_json(matrix, runs, options);
  EXPECT_EQ(json["runs"][5]["cap_steps"][0]["windows_to_under_cap"], 1);
}

TEST(Harness, BobdSearchesEveryCapBeforeItsRunsAndReportsItsBestSoFarAgainstTheOracle) {
  const auto catalog = sim::Catalog::load(test::data_dir());
  BenchOptions options;
  options.algorithms = {"bobd"};
  options.search_budget = 20;
  auto matrix = small_matrix();
  matrix.jobs[2].images = 0;
  matrix.jobs[2].duration_s = 20;  // long enough to see the step at 10 s through
  const auto runs = run_matrix(matrix, catalog, options);
  ASSERT_EQ(runs.size(), 3u);
  ASSERT_EQ(runs[0].searches.size(), 1u);
  ASSERT_EQ(runs[2].searches.size(), 2u) << "job c meets two caps";
  EXPECT_EQ(runs[2].searches[0].cap_w, 150.0);
  EXPECT_EQ(runs[2].searches[1].cap_w, 100.0);
  for (const auto& run : runs) {
    for (const auto& search : run.searches) {
      ASSERT_EQ(search.best_img_s.size(), 20u);
      for (std::size_t n = 1; n < 20; ++n) EXPECT_GE(search.best_img_s[n], search.best_img_s[n - 1]);
      ASSERT_TRUE(search.best.has_value()) << run.job;
      ASSERT_TRUE(search.pct_of_oracle_after(20).has_value());
      // The same measurements as the oracle's grid: the search cannot beat the grid's best.
      EXPECT_LE(*search.pct_of_oracle_after(20), 100.0 + 1e-9) << run.job << " " << search.cap_w;
      EXPECT_GT(*search.pct_of_oracle_after(20), 90.0) << run.job << " " << search.cap_w;
      EXPECT_EQ(search.pct_of_oracle_after(1000), search.pct_of_oracle_after(20));
      EXPECT_FALSE(search.pct_of_oracle_after(0).has_value());
      EXPECT_NEAR(search.cost_s, 20 * 3.0, 20 * 0.5) << "20 measurements of about 3 s";
    }
  }
  // The run holds what the search found: one batch size under a constant cap, another after the step.
  const auto& constant = runs[0];
  ASSERT_FALSE(constant.trace.empty());
  for (const auto& row : constant.trace) EXPECT_EQ(row.batch_size, constant.searches[0].best->batch_size);
  const auto& stepped = runs[2];
  EXPECT_EQ(stepped.trace.front().batch_size, stepped.searches[0].best->batch_size);
  EXPECT_EQ(stepped.trace.back().batch_size, stepped.searches[1].best->batch_size);

  // The search_evaluations column: 20 per cap, so 40 for job c and its two caps.
  const auto csv = bench_summary_csv(matrix, runs);
  const auto lines = split(csv, '\n');
  const auto header = split(lines[0], ',');
  const auto column = static_cast<std::size_t>(std::find(header.begin(), header.end(), "search_evaluations") -
                                               header.begin());
  ASSERT_LT(column, header.size());
  const std::vector<std::string> evaluations = {"20", "20", "40"};
  for (std::size_t row = 0; row < 3; ++row) {
    EXPECT_EQ(split(lines[row + 1], ',').at(column), evaluations[row]) << lines[row + 1];
  }
  const auto json = bench_summary_json(matrix, runs, options);
  ASSERT_EQ(json["runs"][2]["searches"].size(), 2u);
  EXPECT_EQ(json["runs"][2]["searches"][1]["best_so_far_pct_of_oracle"].size(), 20u);
  const auto report = bench_report_markdown(matrix, catalog, runs, options, "gpucap bench --matrix small");
  EXPECT_NE(report.find("## Offline search: BOBD's best so far against evaluations"), std::string::npos);
  EXPECT_NE(report.find("| 20 | "), std::string::npos) << report;

  // Without the oracle the searches still run, with nothing to compare them to.
  options.oracle = false;
  auto one = matrix;
  one.jobs.resize(1);
  const auto alone = run_matrix(one, catalog, options);
  ASSERT_EQ(alone[0].searches.size(), 1u);
  EXPECT_EQ(alone[0].searches[0].best, runs[0].searches[0].best) << "the same measurements, simulated again";
  EXPECT_FALSE(alone[0].searches[0].pct_of_oracle_after(20).has_value());
}

TEST(Harness, ABadBobdBudgetOrOptionIsRejectedBeforeAnyRun) {
  BenchOptions options;
  options.algorithms = {"bobd"};
  auto matrix = small_matrix();
  matrix.jobs[1].controller.batch_sizes = std::vector<int>{1, 2, 4};
  expect_usage_error_and_no_runs(matrix, options, "job b (bobd): --batch-sizes does not apply");
}

}  // namespace
}  // namespace gpucap::bench
