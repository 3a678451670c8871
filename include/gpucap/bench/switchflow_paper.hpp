#pragma once
// SwitchFlow's evaluation (Middleware'21) re-run on the share twin, every bar beside the paper's:
// Fig. 6 (p95 latency of a high-priority inference beside a training job, TF threads against
// SwitchFlow), Fig. 7 (two training jobs: threads, MPS, SwitchFlow with a CPU or GPU LPU) and
// Table 1 (state transfer), Figs. 8–9 (input reuse) and Fig. 10 (interleaving independent models with
// JPEG input pipelines).
// The paper's values are data (data/sched/paper.json).

#include <optional>
#include <string>
#include <vector>

#include "gpucap/sim/share_twin.hpp"

namespace gpucap::bench {

enum class SwitchflowExperiment { fig6, fig7, table1, fig8, fig9, fig10, h200 };

// "switchflow-fig6" → fig6 ...; nullopt for another name.
[[nodiscard]] std::optional<SwitchflowExperiment> parse_switchflow_matrix(const std::string& name);
[[nodiscard]] std::vector<std::string> switchflow_matrix_names();

struct PaperRow {
  std::string panel;      // "6a", "7b", "T1"
  std::string case_name;  // "keras_resnet50 inference / keras_mobilenet_v2 training"
  std::string quantity;   // "TF p95 ms", "SwitchFlow p95 ms", "TF/SwitchFlow", "partner img/s", ...
  std::optional<double> paper;   // nullopt: the paper shows out-of-memory
  std::optional<double> twin;    // nullopt: the twin ran out of memory
  double tolerance = 0.0;        // the bound on |twin − paper| / paper
  // How the twin relates to this number: "" an independent check (no parameter was set from it
  // and it does not follow from those that were), "set" (it sets a parameter of its own), "fit"
  // (one of the numbers a shared parameter was fitted to), "derived" (it follows from set or
  // fitted numbers by the twin's construction).
  std::string role;

  [[nodiscard]] bool within() const;  // both OOM, or both numbers and within the tolerance
  [[nodiscard]] double error() const; // (twin − paper) / paper; 0 when either is missing
};

struct PaperReport {
  SwitchflowExperiment experiment = SwitchflowExperiment::fig6;
  std::vector<PaperRow> rows;
};

// Runs one experiment; `paper_file` is data/sched/paper.json.
[[nodiscard]] PaperReport run_switchflow_experiment(SwitchflowExperiment experiment, const sim::ShareTwin& twin,
                                                    const std::string& paper_file);

// A Markdown report: a table per panel, the misses listed, and the count within tolerance.
[[nodiscard]] std::string to_markdown(const PaperReport& report);

// An SVG (gnuplot): per panel, the twin's value against the paper's on log-log axes, with the
// diagonal and the tolerance band; out-of-memory rows are left out. Error(unsupported) without
// gnuplot.
void write_switchflow_svg(const PaperReport& report, const std::string& svg);

}  // namespace gpucap::bench
