#pragma once
// The bench report's plots (SVG via gnuplot): per job, a timeline of every algorithm's window
// maximum power against the cap and of its batch size (like Figures 7-8 of the BatchSizer
// paper); per matrix, each algorithm's mean % of the oracle.

#include <string>
#include <vector>

#include "gpucap/bench/harness.hpp"

namespace gpucap::bench {

// The file name of a job's timeline inside the plot folder.
[[nodiscard]] std::string timeline_file(const std::string& job);
inline constexpr const char* kOracleChartFile = "pct_of_oracle.svg";

// Writes timeline_file(job) for every job and kOracleChartFile into `dir` (which must exist).
// Error(unsupported) without gnuplot.
void write_bench_plots(const Matrix& matrix, const std::vector<BenchRun>& runs,
                       const std::vector<std::string>& algorithms, const std::string& dir);

}  // namespace gpucap::bench
