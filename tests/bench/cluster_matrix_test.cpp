// The `cluster` bench matrix: its files load, a small one runs with every policy and writes its
// summary, and a bad matrix is refused naming the file and key.

#include "gpucap/bench/cluster_matrix.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "gpucap/bench/matrix.hpp"
#include "support/expect_error.hpp"
#include "support/paths.hpp"

namespace gpucap::bench {
namespace {

TEST(ClusterMatrix, TheShippedMatricesLoad) {
  for (const char* name : {"cluster", "cluster-quick"}) {
    const auto path = matrix_path(test::data_dir(), name);
    EXPECT_TRUE(is_cluster_matrix(path)) << name;
    const auto m = load_cluster_matrix(path);
    EXPECT_EQ(m.id, name);
    EXPECT_FALSE(m.cells.empty());
  }
  const auto full = load_cluster_matrix(matrix_path(test::data_dir(), "cluster"));
  EXPECT_EQ(full.cells.front().options.nodes, 1000U);  // the issue's cell
  EXPECT_DOUBLE_EQ(full.cells.front().options.budget, 0.7);
  EXPECT_FALSE(is_cluster_matrix(matrix_path(test::data_dir(), "serve-quick")));
}

TEST(ClusterMatrix, TheQuickMatrixRunsEveryPolicyWithinTheBudget) {
  const auto catalog = sim::Catalog::load(test::data_dir());
  const auto m = load_cluster_matrix(matrix_path(test::data_dir(), "cluster-quick"));
  const auto report = run_cluster_matrix(m, catalog, 1, 2);
  ASSERT_EQ(report.cells.size(), m.cells.size());
  for (const auto& cell : report.cells) {
    for (const auto& run : cell.runs) EXPECT_EQ(run.budget_violations, 0U);
  }
  const auto csv = cluster_summary_csv(report);
  // A header, then 4 policies + the optimum per cell.
  EXPECT_EQ(static_cast<std::size_t>(std::count(csv.begin(), csv.end(), '\n')), 1 + 5 * m.cells.size());
  const auto md = cluster_report_markdown(report, "gpucap bench --matrix cluster-quick", true);
  for (const auto& cell : m.cells) EXPECT_NE(md.find("| " + cell.name + " |"), std::string::npos);
  EXPECT_NE(md.find("plots/cluster-throughput.svg"), std::string::npos);
  const auto json = cluster_summary_json(report);
  EXPECT_EQ(json["platform"], "simulated");
  EXPECT_FALSE(json["cells"][0].contains("host"));  // measured figures stay out of the summary
  // The same seed, the same summary.
  EXPECT_EQ(cluster_summary_csv(run_cluster_matrix(m, catalog, 1, 1)), csv);
}

TEST(ClusterMatrix, ABadMatrixIsRefusedNamingTheKey) {
  const test::TempDir dir;
  const auto write = [&](const std::string& text) {
    const auto path = (std::filesystem::path(dir.path()) / "m.json").string();
    std::ofstream(path) << text;
    return path;
  };
  test::expect_error_from(
      [&] { (void)load_cluster_matrix(write(R"({"id": "x", "kind": "cluster", "cells": []})")); },
      ErrorCode::invalid_data, "cells");
  test::expect_error_from(
      [&] {
        (void)load_cluster_matrix(write(R"({"id": "x", "kind": "cluster", "cells": [{"name": "a", "nodes": 10}]})"));
      },
      ErrorCode::invalid_data, "give exactly one of budget_fraction");
  test::expect_error_from(
      [&] {
        (void)load_cluster_matrix(write(
            R"({"id": "x", "kind": "cluster", "cells": [{"name": "a", "nodes": 10, "budget_fraction": 5}]})"));
      },
      ErrorCode::invalid_data, "cell 'a': budget 500% is absurd");
  // The simulator's checks name the cell's fields, not the CLI's flags.
  test::expect_error_from(
      [&] {
        (void)load_cluster_matrix(write(
            R"({"id": "x", "kind": "cluster", "cells": [{"name": "a", "nodes": 10, "budget_w": 900, "load": [2, 1]}]})"));
      },
      ErrorCode::invalid_data, "cell 'a': load 2-1 must satisfy");
  test::expect_error_from(
      [&] {
        (void)load_cluster_matrix(write(
            R"({"id": "x", "kind": "cluster", "cells": [{"name": "a", "nodes": 10, "budget_w": 900, "load": [1]}]})"));
      },
      ErrorCode::invalid_data, "must be [min, max]");
}

}  // namespace
}  // namespace gpucap::bench
