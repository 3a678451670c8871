// gpucap replay: run a controller against a real P40 log and report how often it decides as logged.

#include <fmt/format.h>

#include <iostream>

#include "gpucap/bench/replay.hpp"
#include "gpucap/cli/commands.hpp"
#include "gpucap/control/registry.hpp"
#include "gpucap/core/error.hpp"
#include "gpucap/core/files.hpp"

namespace gpucap::cli {

namespace {

std::vector<std::string> csv_files(const std::string& dir) {
  auto files = list_files(dir, ".csv");
  if (files.empty()) throw Error(ErrorCode::invalid_data, fmt::format("{}: no .csv logs", dir));
  return files;
}

struct ReplayFlags {
  std::string algorithm;
  std::string trace_path;
  std::string trace_dir;
  double alpha = 0.8;
  double window_s = 3.0;
  std::optional<std::string> clock_levels;
  bool json = false;
};
}  // namespace

Command add_replay_command(CLI::App& app, const GlobalOptions& /*global*/) {
  auto flags = std::make_shared<ReplayFlags>();
  auto* cmd = app.add_subcommand(
      "replay",
      "Replay a real Tesla P40 log (BatchDVFS, Clipper or DVFS run) through gpucap's controller and compare "
      "its decisions with the logged ones, step by step");
  cmd->add_option("--algorithm", flags->algorithm, "batchdvfs, clipper or dvfs (the log's kind)")->required();
  auto* trace = cmd->add_option("--trace", flags->trace_path,
                                "The log, e.g. ../shared/data/batchdvfs-p40/batchdvfs/01_InceptionV1_BatchDVFS.csv");
  auto* trace_dir = cmd->add_option("--trace-dir", flags->trace_dir,
                                    "Replay every .csv log in this folder: one summary row per file, then the "
                                    "pooled match line");
  trace->excludes(trace_dir);
  trace_dir->excludes(trace);
  cmd->add_option("--alpha", flags->alpha, "Band lower edge as a fraction of the cap (0.85 in the sensitivity runs)")
      ->capture_default_str();
  cmd->add_option("--window", flags->window_s, "Decision window in seconds (6 for the PNASNet-Large run)")
      ->capture_default_str();
  cmd->add_option("--clock-levels", flags->clock_levels, "SM clock levels in MHz (default: the seeds' ten P40 levels)");
  cmd->add_flag("--json", flags->json, "Print the steps and the match rate as JSON");

  return Command{cmd, [flags] {
                   const auto kind = bench::parse_p40_log_kind(flags->algorithm);
                   bench::ReplayOptions options;
                   options.alpha = flags->alpha;
                   options.window_s = flags->window_s;
                   if (flags->clock_levels) options.clock_levels_mhz = control::parse_clock_levels(*flags->clock_levels);
                   if (flags->trace_path.empty() && flags->trace_dir.empty()) {
                     throw usage_error("give --trace FILE or --trace-dir DIR");
                   }
                   if (!flags->trace_dir.empty()) {
                     std::vector<bench::ReplayResult> results;
                     for (const auto& file : csv_files(flags->trace_dir)) {
                       results.push_back(bench::replay_p40_log(bench::read_p40_log(file, kind), options));
                     }
                     std::cout << (flags->json ? bench::replay_table_json(results).dump(2) + "\n"
                                               : bench::replay_table_csv(results));
                     return;
                   }
                   const auto result = bench::replay_p40_log(bench::read_p40_log(flags->trace_path, kind), options);
                   std::cout << (flags->json ? bench::replay_json(result).dump(2) + "\n" : bench::replay_csv(result));
                 }};
}

}  // namespace gpucap::cli
