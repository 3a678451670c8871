#pragma once
// The `cluster` benchmark matrix (data/matrices/cluster*.json, "kind": "cluster"): cells of
// `gpucap cluster simulate` — nodes, budget, load, budget steps — each run under every policy, with
// a CSV/JSON summary, a Markdown report and a plot. Every figure is simulated.

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpucap/cluster/simulate.hpp"
#include "gpucap/sim/catalog.hpp"

namespace gpucap::bench {

struct ClusterCell {
  std::string name;
  cluster::SimulateOptions options;  // seed and threads are the bench's
};

struct ClusterMatrix {
  std::string id;
  std::string description;
  std::vector<ClusterCell> cells;
};

[[nodiscard]] bool is_cluster_matrix(const std::string& path);
// Error(invalid_data) naming the file and key for a bad matrix (cluster::validate's rules too).
[[nodiscard]] ClusterMatrix load_cluster_matrix(const std::string& path);

struct ClusterMatrixReport {
  ClusterMatrix matrix;
  std::uint64_t seed = 1;
  std::vector<cluster::SimulateReport> cells;  // in the matrix's order
};

// Every cell with `seed`, its policies `threads` at a time.
[[nodiscard]] ClusterMatrixReport run_cluster_matrix(const ClusterMatrix& matrix, const sim::Catalog& catalog,
                                                     std::uint64_t seed, int threads);

// One row per cell × policy (and the optimum): throughput, ratios, violations, re-allocation times.
[[nodiscard]] std::string cluster_summary_csv(const ClusterMatrixReport& report);
[[nodiscard]] nlohmann::json cluster_summary_json(const ClusterMatrixReport& report);
[[nodiscard]] std::string cluster_report_markdown(const ClusterMatrixReport& report, const std::string& command,
                                                  bool with_plot);
// cluster-throughput.svg in `dir`: every policy's throughput over the optimum, per cell.
void write_cluster_plot(const ClusterMatrixReport& report, const std::string& dir);
inline constexpr const char* kClusterPlot = "cluster-throughput.svg";

}  // namespace gpucap::bench
