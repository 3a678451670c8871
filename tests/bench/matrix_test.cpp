#include "gpucap/bench/matrix.hpp"

#include <gtest/gtest.h>

#include "gpucap/core/error.hpp"
#include "support/paths.hpp"

namespace gpucap::bench {
namespace {

TEST(Matrix, BatchDvfsP40HasTheSeedJobsAndCaps) {
  const auto matrix = load_matrix(matrix_path(test::data_dir(), "batchdvfs-p40"));
  EXPECT_EQ(matrix.gpu, "p40");
  ASSERT_EQ(matrix.jobs.size(), 34u);
  // seed-systems.md §1.8, jobs 1..30 (job 30 at the 88 W of every logged result)
  const double caps[] = {131, 123, 228, 84, 145, 89, 112, 89,  164, 83,  159, 246, 143, 167, 237,
                         125, 192, 80,  245, 98, 120, 92, 208, 152, 135, 86,  136, 198, 236, 88};
  for (std::size_t j = 0; j < 30; ++j) {
    EXPECT_EQ(matrix.jobs[j].id, std::to_string(j + 1));
    EXPECT_DOUBLE_EQ(matrix.jobs[j].schedule.cap_at(0), caps[j]) << "job " << j + 1;
    EXPECT_EQ(matrix.jobs[j].dataset, j < 15 ? "imagenet" : "caltech256");
  }
  // seed-systems.md §1.8
  EXPECT_EQ(matrix.jobs[0].model, "inception_v1");
  EXPECT_DOUBLE_EQ(matrix.jobs[0].schedule.cap_at(0), 131);
  EXPECT_EQ(matrix.jobs[9].model, "nasnet_a_large");
  EXPECT_DOUBLE_EQ(matrix.jobs[9].schedule.cap_at(0), 83);
  EXPECT_EQ(matrix.jobs[25].model, "pnasnet_5_large");
  EXPECT_EQ(matrix.jobs[25].dataset, "caltech256");
  EXPECT_DOUBLE_EQ(matrix.jobs[29].schedule.cap_at(0), 88);
  // §1.7 dynamic-cap runs
  EXPECT_EQ(matrix.jobs[30].schedule.to_string(), "0:150,85:125,170:100");
  EXPECT_EQ(matrix.jobs[33].schedule.steps().size(), 4u);
}

TEST(Matrix, MalformedMatricesAreNamed) {
  test::TempDir dir;
  const auto expect_error = [&](const std::string& content, const std::string& fragment) {
    const auto path = dir.write("m.json", content);
    try {
      (void)load_matrix(path);
      FAIL() << content;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::invalid_data);
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    }
  };
  expect_error(R"({"id": "m", "gpu": "p40", "jobs": []})", "jobs: must be a non-empty array");
  expect_error(R"({"id": "m", "gpu": "p40"})", "missing key 'jobs'");
  expect_error(R"({"id": "m", "gpu": "p40", "jobs": [{"id": "1", "model": "x", "dataset": "y"}]})",
               "give exactly one of cap_w and schedule");
  expect_error(R"({"id": "m", "gpu": "p40", "jobs": [{"id": "1", "model": "x", "dataset": "y", "cap_w": -3}]})",
               "jobs[0].cap_w: must be > 0");
  expect_error(R"({"id": "m", "gpu": "p40", "jobs": [{"id": "1", "model": "x", "dataset": "y", "schedule": "0:1,0:2"}]})",
               "jobs[0].schedule");
  expect_error(R"({"id": "m", "gpu": "p40", "jobs": [{"id": "1", "model": "x", "dataset": "y", "cap_w": 100},
                                                    {"id": "1", "model": "x", "dataset": "y", "cap_w": 100}]})",
               "duplicate job id");
  expect_error("{", "invalid JSON");
  expect_error(R"({"id": "m", "gpu": "p40", "jobs": [{"id": "../x", "model": "x", "dataset": "y", "cap_w": 100}]})",
               "may only contain letters");
  expect_error(R"({"id": "m", "gpu": "p40", "jobs": [{"id": "1", "model": "x", "dataset": "y", "cap_w": 1e400}]})",
               "invalid JSON");
  expect_error(R"({"id": "m", "gpu": "p40", "jobs": [{"id": "1", "model": "x", "dataset": "y", "cap_w": 100,
                   "images": 18446744073709551615}]})",
               "images: is too large");
  expect_error(R"({"id": "m", "gpu": "p40", "jobs": [{"id": "1", "model": "x", "dataset": "y", "cap_w": 100,
                   "window": "never"}]})",
               "jobs[0].window");
  const std::string job = R"("jobs": [{"id": "1", "model": "x", "dataset": "y", "cap_w": 100}])";
  expect_error(R"({"id": "m", "gpu": "p40", "mps": {"oracle_max_tenants": 9, "morak_shares_pct": [40]}, )" + job + "}",
               "mps.oracle_max_tenants");
  expect_error(R"({"id": "m", "gpu": "p40", "mps": {"oracle_max_tenants": 3, "morak_shares_pct": [60, 50]}, )" + job + "}",
               "more than 100");
  expect_error(R"({"id": "m", "gpu": "p40", "mps": {"oracle_max_tenants": 3, "morak_shares_pct": [42]}, )" + job + "}",
               "multiple of 5");
  expect_error(R"({"id": "m", "gpu": "p40", "mps": {"oracle_max_tenants": 3}, )" + job + "}", "morak_shares_pct");
}

TEST(Matrix, PctodlMatricesRunMultiTenant) {
  for (const char* name : {"pctodl-3080ti", "pctodl-a100"}) {
    const auto matrix = load_matrix(matrix_path(test::data_dir(), name));
    ASSERT_TRUE(matrix.mps.has_value()) << name;
    EXPECT_EQ(matrix.mps->oracle_max_tenants, 3u);
    EXPECT_EQ(matrix.mps->morak_shares_pct, (std::vector<double>{40.0, 40.0}));
  }
  EXPECT_FALSE(load_matrix(matrix_path(test::data_dir(), "batchdvfs-p40")).mps.has_value());
}

TEST(Matrix, UnknownNameListsTheKnownMatrices) {
  try {
    (void)matrix_path(test::data_dir(), "mlperf");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::usage);
    EXPECT_NE(std::string(e.what()).find("known: batchdvfs-p40"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace gpucap::bench
