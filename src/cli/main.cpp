// gpucap: maximise DNN inference throughput on a GPU under a power cap.
// The one place where errors become exit codes and one line on stderr.

#include <fmt/format.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <exception>
#include <iostream>
#include <vector>

#include "gpucap/cli/commands.hpp"
#include "gpucap/core/error.hpp"
#include "gpucap/core/text.hpp"

#ifndef GPUCAP_VERSION
#define GPUCAP_VERSION "unknown"
#endif

int main(int argc, char** argv) {
  CLI::App app{
      "gpucap — maximise DNN inference throughput on a GPU under a power cap.\n"
      "Runs on the simulated GPU twin (figures are labelled simulated) or, with run --platform nvml, on a real\n"
      "NVIDIA GPU (labelled real). See README.md and docs/."};
  app.set_version_flag("--version", GPUCAP_VERSION);
  // Zero or one command: a missing or mistyped command is reported below by name.
  app.require_subcommand(0, 1);
  app.failure_message([](const CLI::App* /*app*/, const CLI::Error& e) {
    return fmt::format("gpucap: error: {} (see --help)\n", e.what());
  });

  gpucap::cli::GlobalOptions global;
  app.add_option("--data-dir", global.data_dir,
                 "Directory of GPU/model/dataset/matrix files (default: $GPUCAP_DATA_DIR or the source tree's data/)");
  bool verbose = false;
  app.add_flag("-v,--verbose", verbose, "Log every control decision to stderr");

  const std::vector<gpucap::cli::Command> commands = {
      gpucap::cli::add_run_command(app, global),
      gpucap::cli::add_replay_command(app, global),
      gpucap::cli::add_list_command(app, global),
      gpucap::cli::add_bench_command(app, global),
      gpucap::cli::add_calibrate_command(app, global),
      gpucap::cli::add_fidelity_command(app, global),
      gpucap::cli::add_tune_command(app, global),
      gpucap::cli::add_devices_command(app, global),
      gpucap::cli::add_predict_command(app, global),
      gpucap::cli::add_partition_command(app, global),
      gpucap::cli::add_profile_command(app, global),
      gpucap::cli::add_fit_command(app, global),
      gpucap::cli::add_mps_worker_command(app, global),
      gpucap::cli::add_bso_command(app, global),
      gpucap::cli::add_share_command(app, global),
      gpucap::cli::add_monitor_command(app, global),
  };

  // Unknown words are collected (not rejected by CLI11) so the error can name them, and the global
  // options may also follow the command (`gpucap run ... --data-dir DIR`).
  app.allow_extras();
  for (const auto& command : commands) command.app->fallthrough();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version are "errors" with exit code 0; real parse errors are usage errors.
    const int code = app.exit(e);
    return code == 0 ? 0 : gpucap::exit_code(gpucap::ErrorCode::usage);
  }

  // Logs go to stderr so that stdout carries only results (CSV, JSON, summaries).
  const auto chosen = std::find_if(commands.begin(), commands.end(),
                                   [](const gpucap::cli::Command& c) { return c.app->parsed(); });
  if (chosen == commands.end() || !app.remaining().empty()) {
    std::vector<std::string> command_names;
    for (const auto& command : commands) {
      if (!command.app->get_group().empty()) command_names.push_back(command.app->get_name());  // not the hidden
    }
    const auto names = gpucap::join(command_names, ", ");
    const auto extras = app.remaining();
    if (extras.empty()) {
      std::fprintf(stderr, "gpucap: error: a command is required: %s (see --help)\n", names.c_str());
    } else if (chosen == commands.end()) {
      std::fprintf(stderr, "gpucap: error: unknown command '%s'; known: %s (see --help)\n", extras.front().c_str(),
                   names.c_str());
    } else {
      std::fprintf(stderr, "gpucap: error: unexpected argument '%s' (see --help)\n", extras.front().c_str());
    }
    return gpucap::exit_code(gpucap::ErrorCode::usage);
  }

  spdlog::set_default_logger(spdlog::stderr_color_mt("gpucap"));
  spdlog::set_level(verbose ? spdlog::level::debug : spdlog::level::warn);
  spdlog::set_pattern("gpucap: %l: %v");
  // Before anything else: settings a killed gpucap left on a GPU go back as they were. Not in an
  // MPS worker: its parent gpucap owns the GPU's settings (and did this when it started). Not in
  // monitor, which only reads (it may watch a GPU another gpucap is controlling right now): the
  // next other command restores them.
  const auto name = chosen->app->get_name();
  if (name != "mps-worker" && name != "monitor") {
    gpucap::cli::recover_gpu_settings(gpucap::cli::default_nvml_library());
  }
  try {
    chosen->run();
    // Results that never reached their reader are a failure (a full disk, a closed pipe).
    std::cout.flush();
    if (!std::cout || std::fflush(stdout) != 0 || std::ferror(stdout) != 0) {
      std::fprintf(stderr, "gpucap: error: cannot write the output to standard output\n");
      return gpucap::exit_code(gpucap::ErrorCode::io);
    }
    return chosen->exit_status ? *chosen->exit_status : 0;
  } catch (const gpucap::Error& e) {
    std::fprintf(stderr, "gpucap: error: %s\n", e.what());
    return gpucap::exit_code(e.code());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpucap: internal error: %s\n", e.what());
    return gpucap::exit_code(gpucap::ErrorCode::internal);
  }
}
