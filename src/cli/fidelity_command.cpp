// gpucap fidelity: the twin's error against measurements it was not fitted on.

#include <fmt/format.h>

#include <filesystem>
#include <iostream>

#include "gpucap/calibrate/calibration.hpp"
#include "gpucap/cli/commands.hpp"
#include "gpucap/core/error.hpp"
#include "gpucap/core/files.hpp"
#include "gpucap/sim/catalog.hpp"

namespace gpucap::cli {

namespace {

struct FidelityFlags {
  std::string sources;
  std::string p40_logs;
  std::string pctodl_params;
  std::string published;
  std::string plots_dir;
  std::string report_path;
  bool json = false;
};

std::string command_line(const FidelityFlags& flags) {
  std::string command = "gpucap fidelity";
  if (!flags.sources.empty()) command += " --sources " + flags.sources;
  if (!flags.p40_logs.empty()) command += " --p40-logs DIR";
  return command + " --report docs/fidelity.md";
}

}  // namespace

Command add_fidelity_command(CLI::App& app, const GlobalOptions& global) {
  auto flags = std::make_shared<FidelityFlags>();
  auto* cmd = app.add_subcommand(
      "fidelity",
      "Measure the twin's error against measurements it was not fitted on: P40 logs (leave-one-job-out), the PctoDL "
      "fit (held-out grid points), published curves");
  cmd->add_option("--sources", flags->sources,
                  "p40, pctodl, published (comma-separated) or all (default: all; only p40 with --p40-logs)");
  cmd->add_option("--p40-logs", flags->p40_logs,
                  "Evaluate this folder of logs in the batchdvfs-p40 layout with the current data files, without "
                  "refitting (new measurements need no code change)");
  cmd->add_option("--pctodl-params", flags->pctodl_params, "PctoDL fitted predictor folder (default: shared data)");
  cmd->add_option("--published", flags->published, "Published curves file");
  cmd->add_option("--plots", flags->plots_dir, "Write one SVG per P40 run (logged vs twin power, cap) here (gnuplot)");
  cmd->add_option("--report", flags->report_path, "Write the report as Markdown to this file");
  cmd->add_flag("--json", flags->json, "Print JSON instead of the table");

  return Command{cmd, [flags, &global] {
                   const auto data_dir = resolve_data_dir(global);
                   const auto catalog = sim::Catalog::load(data_dir);
                   const std::filesystem::path shared(resolve_shared_dir());
                   calibrate::FidelityOptions options;
                   options.sources = calibrate::parse_sources(
                       !flags->sources.empty() ? flags->sources : (flags->p40_logs.empty() ? "all" : "p40"));
                   options.paths.p40_logs =
                       flags->p40_logs.empty() ? (shared / "batchdvfs-p40").string() : flags->p40_logs;
                   options.p40_cross_validate = flags->p40_logs.empty();
                   options.paths.pctodl_params =
                       flags->pctodl_params.empty() ? (shared / "pctodl").string() : flags->pctodl_params;
                   options.paths.published =
                       flags->published.empty()
                           ? (std::filesystem::path(data_dir) / "calibration" / "published.json").string()
                           : flags->published;
                   const auto report = calibrate::measure_fidelity(catalog, options);
                   if (!flags->plots_dir.empty()) calibrate::write_p40_plots(report, flags->plots_dir);
                   if (!flags->report_path.empty()) {
                     write_text_file(flags->report_path,
                                     calibrate::fidelity_markdown(report, catalog, command_line(*flags)));
                   }
                   if (flags->json) {
                     std::cout << calibrate::fidelity_json(report).dump(2) << "\n";
                   } else {
                     std::cout << calibrate::fidelity_text(report);
                   }
                 }};
}

}  // namespace gpucap::cli
