#pragma once
// The bench report's plots (SVG via gnuplot): per job, a timeline of every algorithm's window
// maximum power against the cap and of its batch size (like Figures 7-8 of the BatchSizer
// paper); per matrix, each algorithm's mean % of the oracle and the offline searches' best so far
// against evaluations.

#include <string>
#include <vector>

#include "gpucap/bench/harness.hpp"

namespace gpucap::bench {

// The file name of a job's timeline inside the plot folder.
[[nodiscard]] std::string timeline_file(const std::string& job);
inline constexpr const char* kOracleChartFile = "pct_of_oracle.svg";
inline constexpr const char* kSearchChartFile = "search_progress.svg";

// Whether any run made an offline search (bobd), whose progress kSearchChartFile shows.
[[nodiscard]] bool has_searches(const std::vector<BenchRun>& runs);

// Writes timeline_file(job) for every job, kOracleChartFile and, if has_searches(), kSearchChartFile
// into `dir` (which must exist).
// Error(unsupported) without gnuplot.
void write_bench_plots(const Matrix& matrix, const std::vector<BenchRun>& runs,
                       const std::vector<std::string>& algorithms, const std::string& dir);

}  // namespace gpucap::bench
