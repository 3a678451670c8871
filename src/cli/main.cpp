// gpucap: maximise DNN inference throughput on a GPU under a power cap.
// The one place where errors become exit codes and one line on stderr.

#include <fmt/format.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>
#include <cstdio>
#include <string>
#include <system_error>
#include <exception>
#include <iostream>
#include <optional>
#include <vector>

#include "gpucap/cli/commands.hpp"
#include "gpucap/core/error.hpp"
#include "gpucap/core/text.hpp"

#ifndef GPUCAP_VERSION
#define GPUCAP_VERSION "unknown"
#endif

namespace {

// The command word of `argv`: the first argument that is neither a global option nor its value
// (nullopt when there is none before "--"). Looked at before CLI11 parses, because `gpucap
// nosuchcommand --help` would otherwise print the top-level help and exit 0, hiding the typo.
std::optional<std::string> command_word(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--") return std::nullopt;
    if (arg == "--data-dir") {
      ++i;  // its value
      continue;
    }
    if (arg.rfind('-', 0) == 0) continue;
    return arg;
  }
  return std::nullopt;
}

// The long option of the command line given more than once ("--power-cap"), if any: CLI11 only
// says "At Most 1 required but received 2".
std::optional<std::string> repeated_option(int argc, char** argv) {
  std::vector<std::string> seen;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--") break;
    if (arg.rfind("--", 0) != 0) continue;
    arg = arg.substr(0, arg.find('='));
    if (std::find(seen.begin(), seen.end(), arg) != seen.end()) return arg;
    seen.push_back(arg);
  }
  return std::nullopt;
}

// For a command made of commands (`bso`, `cluster`) that was given none of its own: the error line
// naming the word given in its place, or saying that one is needed (CLI11 says only "A
// subcommand is required").
std::optional<std::string> missing_subcommand(const std::vector<gpucap::cli::Command>& commands, int argc, char** argv) {
  for (const auto& command : commands) {
    const auto* group = command.app;
    const auto subcommands = group->get_subcommands([](const CLI::App*) { return true; });
    if (!group->parsed() || subcommands.empty()) continue;
    if (std::any_of(subcommands.begin(), subcommands.end(), [](const CLI::App* s) { return s->parsed(); })) return std::nullopt;
    std::vector<std::string> names;
    for (const auto* s : subcommands) names.push_back(s->get_name());
    const auto known = gpucap::join(names, ", ");
    // The word after the group's, if it is not an option.
    for (int i = 1; i + 1 < argc; ++i) {
      if (argv[i] != group->get_name()) continue;
      const std::string next = argv[i + 1];
      if (next.rfind('-', 0) != 0) {
        return fmt::format("unknown command '{} {}'; known: {}", group->get_name(), next, known);
      }
      break;
    }
    return fmt::format("'{}' needs one of its commands: {}", group->get_name(), known);
  }
  return std::nullopt;
}

// A std::system_error is a bug unless the system refused what gpucap asked of it:
// - fmt::print reports a write it could not finish as "cannot write to file: <reason>" (a full
//   disk, a closed pipe): the output's fate, the user's to fix, as when the final flush fails;
// - std::thread reports a thread it could not start as EAGAIN with no words of its own (a limit
//   on threads, processes or memory, e.g. a thread's stack too large for the memory left).
// Settings already written were put back by the guards the exception unwound.
int report_system_error(const std::system_error& e) {
  const std::string what = e.what();
  if (what.rfind("cannot write to file", 0) == 0) {
    std::fprintf(stderr, "gpucap: error: cannot write the output (%s)\n", e.code().message().c_str());
    return gpucap::exit_code(gpucap::ErrorCode::io);
  }
  if (e.code() == std::errc::resource_unavailable_try_again && what == e.code().message()) {
    std::fprintf(stderr,
                 "gpucap: error: the system refused to start a thread (%s): a limit on threads or memory is too low "
                 "(ulimit -u, -s, -v)\n",
                 what.c_str());
    return gpucap::exit_code(gpucap::ErrorCode::io);
  }
  std::fprintf(stderr, "gpucap: internal error: %s\n", what.c_str());
  return gpucap::exit_code(gpucap::ErrorCode::internal);
}

}  // namespace

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
      gpucap::cli::add_serve_command(app, global),
      gpucap::cli::add_load_command(app, global),
      gpucap::cli::add_cluster_command(app, global),
  };

  // Unknown words are collected (not rejected by CLI11) so the error can name them, and the global
  // options may also follow the command (`gpucap run ... --data-dir DIR`).
  app.allow_extras();
  for (const auto& command : commands) command.app->fallthrough();
  std::vector<std::string> command_names;
  for (const auto& command : commands) {
    if (!command.app->get_group().empty()) command_names.push_back(command.app->get_name());  // not the hidden
  }
  const auto names = gpucap::join(command_names, ", ");
  if (const auto word = command_word(argc, argv);
      word && std::none_of(commands.begin(), commands.end(),
                           [&word](const gpucap::cli::Command& c) { return c.app->get_name() == *word; })) {
    std::fprintf(stderr, "gpucap: error: unknown command '%s'; known: %s (see --help)\n", word->c_str(), names.c_str());
    return gpucap::exit_code(gpucap::ErrorCode::usage);
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ArgumentMismatch& e) {
    if (const auto option = repeated_option(argc, argv)) {
      std::fprintf(stderr, "gpucap: error: %s was given more than once; give it once (see --help)\n", option->c_str());
    } else {
      std::fprintf(stderr, "gpucap: error: %s (see --help)\n", e.what());
    }
    return gpucap::exit_code(gpucap::ErrorCode::usage);
  } catch (const CLI::RequiredError& e) {
    const auto missing = missing_subcommand(commands, argc, argv);
    std::fprintf(stderr, "gpucap: error: %s (see --help)\n", missing ? missing->c_str() : e.what());
    return gpucap::exit_code(gpucap::ErrorCode::usage);
  } catch (const CLI::ParseError& e) {
    // --help and --version are "errors" with exit code 0; real parse errors are usage errors.
    const int code = app.exit(e);
    return code == 0 ? 0 : gpucap::exit_code(gpucap::ErrorCode::usage);
  }

  // Logs go to stderr so that stdout carries only results (CSV, JSON, summaries).
  const auto chosen = std::find_if(commands.begin(), commands.end(),
                                   [](const gpucap::cli::Command& c) { return c.app->parsed(); });
  if (chosen == commands.end() || !app.remaining().empty()) {
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
  // monitor, which only reads (it may watch a GPU another gpucap is controlling right now), nor in
  // load, which only sends requests (often to a gpucap serve on this machine, whose settings
  // these are): the next other command restores them.
  const auto name = chosen->app->get_name();
  if (name != "mps-worker" && name != "monitor" && name != "load") {
    // Through the driver the command was told to use (--nvml-lib), where it has that option.
    const auto* nvml_option = chosen->app->get_option_no_throw("--nvml-lib");
    gpucap::cli::recover_gpu_settings(nvml_option != nullptr && nvml_option->count() > 0
                                          ? nvml_option->as<std::string>()
                                          : gpucap::cli::default_nvml_library());
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
    // Commands that also run on the twin say so when there is no GPU (monitor and devices watch
    // real GPUs only; monitor names its own way out).
    const bool has_twin = name != "monitor" && name != "devices" && name != "load";
    const char* hint = e.code() == gpucap::ErrorCode::no_gpu && has_twin ? "; the simulated GPUs (--platform sim) need none" : "";
    std::fprintf(stderr, "gpucap: error: %s%s\n", e.what(), hint);
    return gpucap::exit_code(e.code());
  } catch (const std::filesystem::filesystem_error& e) {
    // A path the system refused (no permission, too long, not a folder): the user's to fix.
    std::fprintf(stderr, "gpucap: error: %s\n", e.what());
    return gpucap::exit_code(gpucap::ErrorCode::io);
  } catch (const std::system_error& e) {
    // After filesystem_error, which is a system_error too.
    return report_system_error(e);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpucap: internal error: %s\n", e.what());
    return gpucap::exit_code(gpucap::ErrorCode::internal);
  }
}
