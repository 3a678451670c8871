// gpucap fidelity: the twin's error against measurements it was not fitted on.

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <tuple>
#include <iostream>

#include "gpucap/calibrate/calibration.hpp"
#include "gpucap/cli/commands.hpp"
#include "gpucap/core/error.hpp"
#include "gpucap/core/files.hpp"
#include "gpucap/sim/catalog.hpp"
#include "progress.hpp"
#include "source_path_flags.hpp"

namespace gpucap::cli {

namespace {

struct FidelityFlags {
  std::string sources;
  SourcePathFlags paths;
  std::string zeus_power_trace;
  std::string gpu;
  std::string zeus_csv;
  std::string plots_dir;
  std::string report_path;
  bool json = false;
};

std::string command_line(const FidelityFlags& flags) {
  std::string command = "gpucap fidelity";
  if (!flags.sources.empty()) command += " --sources " + flags.sources;
  if (!flags.paths.p40_logs.empty()) command += " --p40-logs DIR";
  return command + " --report docs/fidelity.md";
}

}  // namespace

Command add_fidelity_command(CLI::App& app, const GlobalOptions& global) {
  auto flags = std::make_shared<FidelityFlags>();
  auto* cmd = app.add_subcommand(
      "fidelity",
      "Measure the twin's error against measurements it was not fitted on: P40 logs (leave-one-job-out), the PctoDL "
      "fit (held-out grid points), published curves, Zeus's training traces under power limits (the P100 held out)");
  cmd->add_option("--sources", flags->sources,
                  "p40, pctodl, published, zeus, real (comma-separated) or all (default: all; only p40 with --p40-logs)");
  cmd->add_option("--p40-logs", flags->paths.p40_logs,
                  "Evaluate this folder of logs in the batchdvfs-p40 layout with the current data files, without "
                  "refitting (new measurements need no code change)");
  cmd->add_option("--pctodl-params", flags->paths.pctodl_params, "PctoDL fitted predictor folder (default: shared data)");
  cmd->add_option("--published", flags->paths.published, "Published curves file");
  cmd->add_option("--zeus-traces", flags->paths.zeus_traces,
                  "Folder of Zeus power traces summary_power_<gpu>.csv (default: shared data zeus/nsdi23)");
  cmd->add_option("--zeus-power-trace", flags->zeus_power_trace,
                  "Compare the twin as its data files stand with this one trace (Zeus's summary_power_<gpu>.csv "
                  "format, any GPU the twin knows) and print per workload, then the line 'zeus power-limit curves: "
                  "time MAPE X% power MAPE Y% (N configs)'");
  cmd->add_option("--zeus-csv", flags->zeus_csv,
                  "With --zeus-power-trace: also write every configuration, measured beside the twin, to this CSV file")
      ->check(output_path());
  cmd->add_option("--gpu", flags->gpu,
                  "With --zeus-power-trace: the twin GPU it ran on (default: the one named like the file's "
                  "<gpu> whose power-limit range holds the trace's limits)");
  cmd->add_option("--plots", flags->plots_dir,
                  "Write one SVG per P40 run (logged vs twin power, cap) and per Zeus trace and workload (epoch time "
                  "and power against the limit) here (gnuplot)")
      ->check(output_path());
  cmd->add_option("--report", flags->report_path, "Write the report as Markdown to this file")->check(output_path());
  cmd->add_flag("--json", flags->json, "Print JSON instead of the table");

  return Command{cmd, [flags, &global] {
                   const auto data_dir = resolve_data_dir(global);
                   const auto catalog = sim::Catalog::load(data_dir);
                   calibrate::FidelityOptions options;
                   options.paths = calibrate::default_source_paths(data_dir, resolve_shared_dir());
                   if ((!flags->gpu.empty() || !flags->zeus_csv.empty()) && flags->zeus_power_trace.empty()) {
                     throw usage_error("--gpu and --zeus-csv go with --zeus-power-trace");
                   }
                   if (!flags->zeus_power_trace.empty()) {
                     if (!flags->sources.empty() || flags->paths.any() || !flags->report_path.empty() ||
                         !flags->plots_dir.empty() || flags->json) {
                       throw usage_error("--zeus-power-trace compares one trace; it takes only --gpu and --zeus-csv");
                     }
                     const auto setup = calibrate::load_zeus_setup(options.paths.zeus_setup, catalog);
                     const auto gpu = flags->gpu.empty() ? std::nullopt : std::optional(flags->gpu);
                     const auto fidelity = calibrate::compare_zeus_trace(calibrate::TwinParams::from(catalog), catalog,
                                                                         setup, flags->zeus_power_trace, gpu);
                     if (!flags->zeus_csv.empty()) write_text_file(flags->zeus_csv, calibrate::zeus_trace_csv(fidelity));
                     std::cout << calibrate::zeus_trace_text(fidelity);
                     return;
                   }
                   options.sources = calibrate::parse_sources(
                       !flags->sources.empty() ? flags->sources : (flags->paths.p40_logs.empty() ? "all" : "p40"));
                   // A source's folder or file, given for a source that is not compared, would go unused.
                   flags->paths.reject_unselected(options.sources);
                   flags->paths.apply(options.paths);
                   options.p40_cross_validate = flags->paths.p40_logs.empty();
                   // Where the results go is tried before minutes of fitting, not after.
                   if (!flags->report_path.empty()) check_can_write(flags->report_path);
                   if (!flags->plots_dir.empty()) {
                     std::error_code ec;
                     std::filesystem::create_directories(flags->plots_dir, ec);
                     if (ec) throw Error(ErrorCode::io, fmt::format("{}: cannot create the folder ({})", flags->plots_dir, ec.message()));
                     check_can_write((std::filesystem::path(flags->plots_dir) / ".gpucap-write-test").string());
                   }
                   const StageProgress progress("fidelity");
                   options.progress = [&progress](const std::string& stage) { progress.stage(stage); };
                   const auto report = calibrate::measure_fidelity(catalog, options);
                   progress.stage(fmt::format("measured in {:.0f} s", progress.elapsed_s()));
                   if (!flags->plots_dir.empty()) {
                     calibrate::write_p40_plots(report, flags->plots_dir);
                     calibrate::write_zeus_plots(report.zeus, flags->plots_dir);
                   }
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
