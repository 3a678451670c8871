#pragma once
// gpucap bso bench: every Zeus NSDI'23 workload × seeds × optimizer (Zeus's, gpucap's) on one
// power trace, summarised as in ../shared/reference/zeus-bso-anchor.md — regret over the
// recurrences in optimum costs, the recurrence from which only the optimum batch size is used,
// and the mean cost of recurrences 40–50 — with a Markdown report and an SVG of cumulative regret.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gpucap/bso/simulate.hpp"

namespace gpucap::bench {

struct BsoBenchOptions {
  std::string train_csv;
  std::string power_csv;
  std::vector<std::string> workloads;  // empty: the six of the paper
  std::vector<std::uint64_t> seeds = {1, 2, 3, 4, 5};
  std::vector<bso::OptimizerKind> optimizers = {bso::OptimizerKind::zeus, bso::OptimizerKind::gpucap};
  int recurrences = 50;
  double eta = 0.5;
  std::optional<double> beta = 2.0;
  unsigned jobs = 1;  // simulations in parallel
};

// One (workload, optimizer, seed) simulation, reduced to what the report shows.
struct BsoSeedResult {
  std::uint64_t seed = 0;
  double regret_in_optimum_costs = 0.0;
  std::vector<double> cumulative_regret;  // in optimum costs, after each recurrence
  std::optional<int> settle;              // only the optimum batch size from here on
  std::optional<int> settle_near;         // only sizes within 5 % of the optimum from here on
  std::optional<double> late_cost;        // mean cost of recurrences 40–50 / optimum
  double late_share_on_optimum = 0.0;     // share of recurrences 40–50 that used only the optimum size
};

struct BsoBenchRow {
  std::string workload;
  bso::OptimizerKind optimizer = bso::OptimizerKind::zeus;
  std::vector<BsoSeedResult> seeds;
  [[nodiscard]] double mean_regret() const;
};

struct BsoWorkloadSummary {
  std::string workload;
  std::string training_optimizer;
  double target_metric = 0.0;
  int max_epochs = 0;
  int default_batch_size = 0;
  std::size_t batch_sizes = 0;
  std::size_t power_limits = 0;
  bso::TraceOptimum optimum;
  double default_cost = 0.0;
};

struct BsoBenchReport {
  std::string gpu;
  BsoBenchOptions options;
  std::vector<BsoWorkloadSummary> workloads;
  std::vector<BsoBenchRow> rows;  // workload-major, optimizer-minor
  std::vector<std::string> skipped;  // paper workloads the power trace lacks, with the reason
  [[nodiscard]] const BsoBenchRow* find(const std::string& workload, bso::OptimizerKind optimizer) const;
};

[[nodiscard]] BsoBenchReport run_bso_bench(const BsoBenchOptions& options);
[[nodiscard]] std::string bso_bench_markdown(const BsoBenchReport& report);
// Seed-averaged cumulative regret per recurrence, one panel per workload (gnuplot).
void write_bso_regret_svg(const BsoBenchReport& report, const std::string& svg);

}  // namespace gpucap::bench
