#pragma once
// Runs every job of a matrix under every algorithm on the twin, in parallel, reproducibly:
// each (job, algorithm) run has its own twin seeded from (seed, job index), so results do not
// depend on the number of worker threads or on scheduling.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpucap/bench/matrix.hpp"
#include "gpucap/bench/recovery.hpp"
#include "gpucap/runtime/runner.hpp"
#include "gpucap/sim/catalog.hpp"
#include "gpucap/tune/space.hpp"

namespace gpucap::bench {

struct BenchOptions {
  std::vector<std::string> algorithms;
  bool oracle = true;           // measure each job's oracle (exhaustive search) for pct_of_oracle
  double oracle_measure_s = 3.0;  // length of one of the oracle's fixed-configuration measurements
  std::size_t search_budget = 0;  // bobd: measurements per cap (0: BOBD's default, 50)
  std::string pctodl_params_dir;  // pctodl, directcap: PctoDL's fits
  bool pctodl_shadow = false;     // pctodl: with the shadow optimizer
  std::uint64_t seed = 1;
  int threads = 1;
  double sample_hz = 100.0;
  std::string trace_dir;  // empty: no per-run traces
  std::string plot_dir;   // empty: no plots (gnuplot SVG timelines per job)
  std::function<void(std::size_t done, std::size_t total)> progress;
};

// An offline search's progress under one cap of a run (bobd): the best feasible throughput after
// each measurement, against the oracle's best over the same space and the same measurements.
struct SearchProgress {
  double cap_w = 0.0;
  std::vector<double> best_img_s;     // after 1, 2, ... measurements; 0 while none was feasible
  std::optional<double> oracle_img_s; // the oracle grid's best feasible; nullopt without an oracle
  double cost_s = 0.0;                // the measurements' time (virtual seconds on the twin)
  std::optional<tune::ConfigPoint> best;
  // Best so far as a % of the oracle after `evaluations` measurements (beyond the search's end:
  // its final value); nullopt without an oracle.
  [[nodiscard]] std::optional<double> pct_of_oracle_after(std::size_t evaluations) const;
};

struct BenchRun {
  std::string job;
  std::string model;
  std::string dataset;
  CapSchedule schedule = CapSchedule::constant(1.0);
  std::string algorithm;
  runtime::RunSummary summary;
  // The oracle's throughput over the same run: its best feasible configuration under each cap of
  // the schedule, weighted by how long that cap held during the run (0: no oracle, or nothing
  // feasible).
  double oracle_throughput_img_s = 0.0;
  [[nodiscard]] std::optional<double> pct_of_oracle() const;
  std::vector<runtime::TraceRow> trace;       // one row per window
  double over_cap_steady_windows_pct = 0.0;   // over-cap windows among those without a cap change
  std::vector<CapStepRecovery> cap_steps;     // one per change of the cap schedule
  std::vector<SearchProgress> searches;       // bobd: one per cap of the schedule; empty otherwise
  // Multi-tenant matrices: the oracle's best MPS partition for each cap of the schedule, as
  // "cap: tenants @ SM/mem MHz" (empty otherwise).
  std::vector<std::string> partition_oracle;
  // The worst step of the run (nullopt: no steps, or some step never got there: see cap_steps).
  [[nodiscard]] std::optional<int> worst_windows_to_under_cap() const;
  [[nodiscard]] std::optional<int> worst_windows_to_95pct_oracle() const;
};

// Checks every (job, algorithm) pair as a run would — names, caps, limits, options — and throws
// the first problem as Error(usage), naming the job.
void validate_bench(const Matrix& matrix, const sim::Catalog& catalog, const BenchOptions& options);

// Validates (validate_bench) before anything runs, then runs. Results are in matrix order, then
// algorithm order.
[[nodiscard]] std::vector<BenchRun> run_matrix(const Matrix& matrix, const sim::Catalog& catalog,
                                               const BenchOptions& options);

[[nodiscard]] std::string bench_summary_csv(const Matrix& matrix, const std::vector<BenchRun>& runs);
[[nodiscard]] nlohmann::json bench_summary_json(const Matrix& matrix, const std::vector<BenchRun>& runs,
                                                const BenchOptions& options);
// Markdown report: per job and algorithm throughput, windows over cap, energy per image, cap-step
// recovery, and per-algorithm means; links the plots when options.plot_dir is set. `command` is
// the command line that regenerates it.
[[nodiscard]] std::string bench_report_markdown(const Matrix& matrix, const sim::Catalog& catalog,
                                                const std::vector<BenchRun>& runs, const BenchOptions& options,
                                                const std::string& command);

}  // namespace gpucap::bench
