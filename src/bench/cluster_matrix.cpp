#include "gpucap/bench/cluster_matrix.hpp"

#include <fmt/format.h>

#include <filesystem>

#include "gpucap/core/error.hpp"
#include "gpucap/core/gnuplot.hpp"
#include "gpucap/core/json_file.hpp"

namespace gpucap::bench {

namespace {

// The budget of a cell or a step: "budget_fraction" (of the initial nodes' TDPs) or "budget_w".
void read_budget(const JsonFields& f, double& value, bool& fraction) {
  if (f.has("budget_fraction") == f.has("budget_w")) {
    throw f.error("budget_fraction", "give exactly one of budget_fraction (of the nodes' TDPs) and budget_w");
  }
  fraction = f.has("budget_fraction");
  value = fraction ? f.positive("budget_fraction") : f.positive("budget_w");
}

ClusterCell read_cell(const nlohmann::json& json, const std::string& path, std::size_t index, double duration_s) {
  const JsonFields f(json, path, fmt::format("cells[{}].", index));
  ClusterCell cell;
  cell.name = f.string("name");
  auto& o = cell.options;
  o.duration_s = duration_s;
  o.nodes = static_cast<std::size_t>(f.positive_integer("nodes"));
  read_budget(f, o.budget, o.budget_fraction);
  if (f.has("load")) {
    const auto load = f.numbers("load");
    if (load.size() != 2) throw f.error("load", "must be [min, max], fractions of each node's capacity at its TDP");
    o.demand_min = load[0];
    o.demand_max = load[1];
  }
  if (f.has("budget_steps")) {
    const auto& steps = f.at("budget_steps");
    if (!steps.is_array()) throw f.error("budget_steps", "must be an array of {at_s, budget_fraction or budget_w}");
    for (std::size_t k = 0; k < steps.size(); ++k) {
      const JsonFields s(steps[k], path, fmt::format("cells[{}].budget_steps[{}].", index, k));
      cluster::BudgetStep step;
      step.at_s = s.positive("at_s");
      read_budget(s, step.value, step.fraction);
      o.budget_steps.push_back(step);
    }
  }
  try {
    cluster::OptionNames names;  // a cell's fields
    names.nodes = "nodes";
    names.budget = "budget";
    names.duration = "duration_s";
    names.load = "load";
    names.threads = "threads";
    names.budget_step = "budget_steps";
    cluster::validate(o, names);
  } catch (const Error& e) {
    throw f.error("name", fmt::format("cell '{}': {}", cell.name, e.what()));
  }
  return cell;
}

double ratio(double a, double b) { return b > 0.0 ? a / b : 0.0; }

}  // namespace

bool is_cluster_matrix(const std::string& path) {
  const auto json = load_json_file(path);
  return json.is_object() && json.contains("kind") && json["kind"] == "cluster";
}

ClusterMatrix load_cluster_matrix(const std::string& path) {
  const auto json = load_json_file(path);
  const JsonFields f(json, path);
  if (f.string("kind") != "cluster") throw f.error("kind", "must be \"cluster\" for a cluster matrix");
  ClusterMatrix m;
  m.id = f.string("id");
  m.description = f.string_or("description", "");
  const double duration_s = f.positive_or("duration_s", 600.0);
  const auto& cells = f.at("cells");
  if (!cells.is_array() || cells.empty()) throw f.error("cells", "must be a non-empty array");
  for (std::size_t i = 0; i < cells.size(); ++i) {
    m.cells.push_back(read_cell(cells[i], path, i, duration_s));
    for (std::size_t j = 0; j < i; ++j) {
      if (m.cells[j].name == m.cells[i].name) throw f.error("cells", fmt::format("two cells are named '{}'", m.cells[i].name));
    }
  }
  return m;
}

ClusterMatrixReport run_cluster_matrix(const ClusterMatrix& matrix, const sim::Catalog& catalog, std::uint64_t seed,
                                       int threads) {
  ClusterMatrixReport report;
  report.matrix = matrix;
  report.seed = seed;
  for (const auto& cell : matrix.cells) {
    auto options = cell.options;
    options.seed = seed;
    options.threads = threads;
    report.cells.push_back(cluster::simulate(catalog, options));
  }
  return report;
}

std::string cluster_summary_csv(const ClusterMatrixReport& report) {
  std::string csv =
      "cell,nodes,budget_w,policy,throughput,ratio_to_equal_split,ratio_to_optimum,budget_violations,max_realloc_s,"
      "p99_realloc_s,allocation_writes\n";
  for (std::size_t i = 0; i < report.cells.size(); ++i) {
    const auto& r = report.cells[i];
    const auto& name = report.matrix.cells[i].name;
    const double equal = r.run(cluster::Policy::equal).throughput;
    for (const auto& run : r.runs) {
      csv += fmt::format("{},{},{:.1f},{},{:.4f},{:.4f},{:.4f},{},{:.3f},{:.3f},{}\n", name, r.initial_nodes, r.budget_w,
                         cluster::to_string(run.policy), run.throughput, ratio(run.throughput, equal),
                         ratio(run.throughput, r.optimum), run.budget_violations, run.max_realloc_s, run.p99_realloc_s,
                         run.writes);
    }
    csv += fmt::format("{},{},{:.1f},optimum,{:.4f},{:.4f},1.0000,,,,\n", name, r.initial_nodes, r.budget_w, r.optimum,
                       ratio(r.optimum, equal));
  }
  return csv;
}

nlohmann::json cluster_summary_json(const ClusterMatrixReport& report) {
  nlohmann::json cells = nlohmann::json::array();
  for (std::size_t i = 0; i < report.cells.size(); ++i) {
    auto j = cluster::to_json(report.cells[i]);
    j.erase("host");  // measured, not simulated: the summary stays byte-identical run to run
    j["cell"] = report.matrix.cells[i].name;
    cells.push_back(std::move(j));
  }
  return {{"matrix", report.matrix.id}, {"platform", "simulated"}, {"seed", report.seed}, {"cells", cells}};
}

std::string cluster_report_markdown(const ClusterMatrixReport& report, const std::string& command, bool with_plot) {
  std::string md = fmt::format("# Cluster matrix `{}` (simulated)\n\n{}\n\nCommand: `{}`. Every node is a twin; "
                               "throughput in TDP-equivalents (docs/cluster.md).\n\n",
                               report.matrix.id, report.matrix.description, command);
  md += "| cell | nodes | budget (W) | gpucap | equal split | TDP-prop. | balancer | optimum | gpucap / equal | "
        "gpucap / optimum | violations (all policies) | max / p99 realloc (s) |\n"
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  for (std::size_t i = 0; i < report.cells.size(); ++i) {
    const auto& r = report.cells[i];
    const auto& g = r.run(cluster::Policy::gpucap);
    std::size_t violations = 0;
    for (const auto& run : r.runs) violations += run.budget_violations;
    md += fmt::format("| {} | {} | {:.0f} | {:.1f} | {:.1f} | {:.1f} | {:.1f} | {:.1f} | {:.3f}× | {:.2f} % | {} | {:.2f} / "
                      "{:.2f} |\n",
                      report.matrix.cells[i].name, r.initial_nodes, r.budget_w, g.throughput,
                      r.run(cluster::Policy::equal).throughput, r.run(cluster::Policy::tdp).throughput,
                      r.run(cluster::Policy::balancer).throughput, r.optimum,
                      ratio(g.throughput, r.run(cluster::Policy::equal).throughput), 100.0 * ratio(g.throughput, r.optimum),
                      violations, g.max_realloc_s, g.p99_realloc_s);
  }
  if (with_plot) md += fmt::format("\n![throughput over the optimum](plots/{})\n", kClusterPlot);
  return md;
}

void write_cluster_plot(const ClusterMatrixReport& report, const std::string& dir) {
  const auto svg = (std::filesystem::path(dir) / kClusterPlot).string();
  std::string script = fmt::format(
      "set terminal svg size {},420 dynamic enhanced font 'sans,11'\nset output '{}'\n"
      "set title 'cluster matrix {}: throughput over the optimum (simulated)' noenhanced\n"
      "set style data histogram\nset style histogram cluster gap 1\nset style fill solid 0.8 border -1\n"
      "set grid ytics\nset ylabel 'throughput / optimum'\nset yrange [0.5:1.02]\nset key outside right top\n"
      "set xtics noenhanced rotate by -20\n",
      std::max<std::size_t>(640, 160 * report.cells.size()), svg, report.matrix.id);
  const auto& policies = cluster::all_policies();
  script += "plot ";
  for (std::size_t p = 0; p < policies.size(); ++p) {
    script += fmt::format("'-' using 2:xtic(1) title '{}'{}", cluster::to_string(policies[p]),
                          p + 1 < policies.size() ? ", " : "\n");
  }
  for (const auto policy : policies) {
    for (std::size_t i = 0; i < report.cells.size(); ++i) {
      const auto& r = report.cells[i];
      script += fmt::format("\"{}\" {:.4f}\n", report.matrix.cells[i].name, ratio(r.run(policy).throughput, r.optimum));
    }
    script += "e\n";
  }
  run_gnuplot(script, svg);
}

}  // namespace gpucap::bench
