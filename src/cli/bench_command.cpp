// gpucap bench: every job of a task matrix under every algorithm, on the simulated GPU.

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <optional>
#include <iostream>

#include "gpucap/bench/harness.hpp"
#include "gpucap/bench/cluster_matrix.hpp"
#include "gpucap/bench/matrix.hpp"
#include "gpucap/bench/cap_share_bench.hpp"
#include "gpucap/bench/plots.hpp"
#include "gpucap/bench/serve_bench.hpp"
#include "gpucap/bench/switchflow_paper.hpp"
#include "gpucap/cli/commands.hpp"
#include "gpucap/core/error.hpp"
#include "gpucap/core/atomic_file.hpp"
#include "gpucap/core/files.hpp"
#include "gpucap/core/text.hpp"
#include "progress.hpp"

namespace gpucap::cli {

namespace {

struct BenchFlags {
  std::string matrix;
  std::string algorithms = "all";
  std::string out_dir;
  int jobs = 1;
  std::string seed = "1";
  double sample_hz = 100.0;
  int bobd_budget = 50;
  std::optional<std::string> params_dir;
  bool shadow = false;
  bool json = false;
};

// "all": every algorithm; PctoDL's suite (pctodl, directcap, pctodl-batchdvfs) and mpsfit only on
// multi-tenant matrices.
std::vector<std::string> algorithm_list(const std::string& text, bool multi_tenant) {
  std::vector<std::string> names;
  if (trim(text) == "all") {
    for (const auto& info : control::algorithms()) {
      if (multi_tenant || !control::pctodl_suite_only(info.name)) names.push_back(info.name);
    }
    return names;
  }
  for (const auto item : split(text, ',')) {
    const auto name = to_lower(trim(item));
    if (name.empty()) throw usage_error(fmt::format("--algorithms '{}' has an empty entry", text));
    if (std::find(names.begin(), names.end(), name) != names.end()) {
      throw usage_error(fmt::format("--algorithms lists '{}' twice", name));
    }
    names.push_back(name);
  }
  return names;
}

// Creates DIR, DIR/traces and DIR/plots, and proves they are writable before any run starts.
void prepare_out_dir(const std::string& dir) {
  std::error_code ec;
  for (const char* sub : {"traces", "plots"}) {
    std::filesystem::create_directories(std::filesystem::path(dir) / sub, ec);
    if (ec) throw Error(ErrorCode::io, fmt::format("{}: cannot create output folder ({})", dir, ec.message()));
  }
  // A report left by an earlier run would be presented as this run's until the new one is written.
  std::filesystem::remove(std::filesystem::path(dir) / "report.md", ec);
  const auto probe = (std::filesystem::path(dir) / ".gpucap-write-test").string();
  write_text_file(probe, "");
  std::filesystem::remove(probe, ec);
}

std::string command_line(const BenchFlags& flags) {
  std::string command = fmt::format("gpucap bench --matrix {} --algorithms {} --seed {}", flags.matrix,
                                    flags.algorithms, flags.seed);
  if (flags.sample_hz != 100.0) command += fmt::format(" --sample-hz {:g}", flags.sample_hz);
  if (flags.bobd_budget != 50) command += fmt::format(" --bobd-budget {}", flags.bobd_budget);
  if (!flags.out_dir.empty()) command += " --out DIR";
  return command;
}

// A SwitchFlow matrix runs the share twin as the paper's figure does, once: of bench's flags it
// takes --seed and --out only. --out is made and proved writable before it runs.
void check_switchflow_flags(const BenchFlags& flags) {
  if (flags.jobs != 1 || flags.sample_hz != 100.0 || flags.bobd_budget != 50 || flags.params_dir || flags.shadow ||
      flags.json) {
    throw usage_error(fmt::format("--jobs, --sample-hz, --bobd-budget, --params, --shadow and --json do not apply to {}: "
                                  "it runs the share twin as the paper's figure (--seed and --out do)",
                                  flags.matrix));
  }
  (void)parse_seed(flags.seed);  // a bad seed leaves no folder behind
  if (flags.out_dir.empty()) return;
  prepare_out_dir(flags.out_dir);
  std::error_code ec;
  for (const char* unused : {"traces", "plots"}) std::filesystem::remove(std::filesystem::path(flags.out_dir) / unused, ec);
}

// SwitchFlow's figures on the share twin: a Markdown report, the paper beside the twin.
void run_switchflow_matrix(bench::SwitchflowExperiment experiment, const std::string& data_dir, const BenchFlags& flags) {
  if (flags.algorithms != "all") throw usage_error(fmt::format("--algorithms does not apply to {}: its policies are fixed by the paper's figure", flags.matrix));
  check_switchflow_flags(flags);
  const sim::ShareTwin twin(data_dir, parse_seed(flags.seed));
  const auto report = bench::run_switchflow_experiment(experiment, twin, (std::filesystem::path(data_dir) / "sched" / "paper.json").string());
  const auto markdown = bench::to_markdown(report);
  if (!flags.out_dir.empty()) {
    std::filesystem::create_directories(flags.out_dir);
    bench::write_switchflow_svg(report, (std::filesystem::path(flags.out_dir) / "paper_vs_twin.svg").string());
    write_text_file((std::filesystem::path(flags.out_dir) / "report.md").string(),
                    markdown + "\n![paper against twin](paper_vs_twin.svg)\n");
  }
  std::cout << markdown;
}

// gpucap's capshare against SwitchFlow and the best static setting, under a stepping cap (twin).
void run_cap_share_matrix(const std::string& data_dir, const BenchFlags& flags) {
  if (flags.algorithms != "all") throw usage_error("--algorithms does not apply to switchflow-cap: it compares fixed runs");
  check_switchflow_flags(flags);
  const sim::ShareTwin twin(data_dir, parse_seed(flags.seed));
  const auto markdown = bench::to_markdown(bench::run_cap_share_experiment(twin));
  if (!flags.out_dir.empty()) {
    std::filesystem::create_directories(flags.out_dir);
    write_text_file((std::filesystem::path(flags.out_dir) / "report.md").string(), markdown);
  }
  std::cout << markdown;
}

// Serving under a stepping cap on the twin (data/matrices/serve*.json): capserve against the
// static Triton-style setting, the seeds under serve and the per-segment oracle.
void run_serve_matrix(const std::string& path, const std::string& data_dir, const BenchFlags& flags) {
  if (flags.bobd_budget != 50 || flags.params_dir || flags.shadow) {
    throw usage_error(fmt::format("--bobd-budget, --params and --shadow do not apply to the serving matrix {}", flags.matrix));
  }
  const auto matrix = bench::load_serve_matrix(path);
  const auto catalog = sim::Catalog::load(data_dir);
  bench::ServeBenchOptions options;
  if (trim(flags.algorithms) != "all") options.algorithms = algorithm_list(flags.algorithms, false);
  options.seed = parse_seed(flags.seed);
  options.threads = flags.jobs;
  options.sample_hz = flags.sample_hz;
  bench::validate_serve_matrix(matrix, catalog);  // before anything is written
  std::string plot_dir;
  if (!flags.out_dir.empty()) {
    prepare_out_dir(flags.out_dir);
    std::error_code ec;
    std::filesystem::remove(std::filesystem::path(flags.out_dir) / "traces", ec);  // a serving matrix writes none
    plot_dir = (std::filesystem::path(flags.out_dir) / "plots").string();
  }
  options.progress = CountProgress("bench", stderr_is_terminal());
  const auto report = bench::run_serve_bench(matrix, catalog, options);
  auto command = fmt::format("gpucap bench --matrix {} --algorithms {} --seed {}", flags.matrix, flags.algorithms, flags.seed);
  if (flags.sample_hz != 100.0) command += fmt::format(" --sample-hz {:g}", flags.sample_hz);
  if (!flags.out_dir.empty()) command += " --out DIR";
  const auto json = bench::serve_summary_json(report);
  if (!flags.out_dir.empty()) {
    const std::filesystem::path out(flags.out_dir);
    bench::write_serve_plots(report, plot_dir);
    // All or none; the report is put in place last: its presence means the set is complete.
    write_text_files({{(out / "summary.csv").string(), bench::serve_summary_csv(report)},
                      {(out / "summary.json").string(), json.dump(2) + "\n"},
                      {(out / "report.md").string(), bench::serve_report_markdown(report, command, true)}});
  }
  if (flags.json) {
    std::cout << json.dump(2) << "\n";
  } else {
    std::cout << bench::serve_report_markdown(report, command, false);
  }
}

// A power budget shared by twin nodes (data/matrices/cluster*.json): `cluster simulate`'s cells under
// every policy (bench/cluster_matrix.hpp).
void run_cluster_bench(const std::string& path, const std::string& data_dir, const BenchFlags& flags) {
  if (trim(flags.algorithms) != "all" || flags.bobd_budget != 50 || flags.params_dir || flags.shadow ||
      flags.sample_hz != 100.0) {
    throw usage_error(fmt::format(
        "--algorithms, --sample-hz, --bobd-budget, --params and --shadow do not apply to the cluster matrix {}: every "
        "policy runs",
        flags.matrix));
  }
  const auto matrix = bench::load_cluster_matrix(path);
  const auto catalog = sim::Catalog::load(data_dir);
  const auto seed = parse_seed(flags.seed);
  if (!flags.out_dir.empty()) {
    prepare_out_dir(flags.out_dir);
    std::error_code ec;
    std::filesystem::remove(std::filesystem::path(flags.out_dir) / "traces", ec);  // a cluster matrix writes none
  }
  // The simulator runs its policies on at most 64 threads; more --jobs would change nothing.
  const auto report = bench::run_cluster_matrix(matrix, catalog, seed, std::min(flags.jobs, 64));
  auto command = fmt::format("gpucap bench --matrix {} --seed {}", flags.matrix, flags.seed);
  if (!flags.out_dir.empty()) command += " --out DIR";
  const auto json = bench::cluster_summary_json(report);
  if (!flags.out_dir.empty()) {
    const std::filesystem::path out(flags.out_dir);
    bench::write_cluster_plot(report, (out / "plots").string());
    write_text_files({{(out / "summary.csv").string(), bench::cluster_summary_csv(report)},
                      {(out / "summary.json").string(), json.dump(2) + "\n"},
                      {(out / "report.md").string(), bench::cluster_report_markdown(report, command, true)}});  // last: the set is complete
  }
  if (flags.json) {
    std::cout << json.dump(2) << "\n";
  } else {
    std::cout << bench::cluster_report_markdown(report, command, false);
  }
}

}  // namespace

Command add_bench_command(CLI::App& app, const GlobalOptions& global) {
  auto flags = std::make_shared<BenchFlags>();
  auto* cmd = app.add_subcommand("bench", "Run a task matrix under several algorithms on the simulated GPU");
  cmd->add_option("--matrix", flags->matrix, "Matrix name (see 'gpucap list matrices') or a .json file")->required();
  cmd->add_option("--algorithms", flags->algorithms, "Comma-separated algorithms, or 'all'")->capture_default_str();
  cmd->add_option("--out", flags->out_dir,
                  "Write summary.csv, summary.json, report.md and traces/ to this folder")
      ->check(output_path());
  cmd->add_option("--jobs", flags->jobs, "Runs in parallel (results do not depend on it)")->capture_default_str();
  cmd->add_option("--seed", flags->seed, "Seed of the twin's noise")->capture_default_str();
  cmd->add_option("--sample-hz", flags->sample_hz, "Power sampling rate in Hz")->capture_default_str();
  cmd->add_option("--bobd-budget", flags->bobd_budget,
                  "bobd: fixed-configuration measurements per cap in its offline search (upstream: 50)")
      ->capture_default_str();
  cmd->add_option("--params", flags->params_dir,
                  "pctodl, directcap: PctoDL's parameter folder (default: $GPUCAP_PCTODL_PARAMS, else "
                  "../shared/data/pctodl)");
  cmd->add_flag("--shadow", flags->shadow, "pctodl: run PctoDL's shadow optimizer (off as in upstream's benchmarks)");
  cmd->add_flag("--json", flags->json,
                "Print the summary as JSON instead of CSV (a serving matrix, serve*: instead of its Markdown report)");

  return Command{cmd, [flags, &global] {
                   const auto data_dir = resolve_data_dir(global);
                   if (flags->jobs < 1) throw usage_error(fmt::format("--jobs {} must be 1 or more", flags->jobs));
                   // Results do not depend on it: more than 256 runs at a time (`--jobs $(nproc)` on a
                   // large host) is 256.
                   flags->jobs = std::min(flags->jobs, 256);
                   if (flags->matrix == "switchflow-cap") {
                     run_cap_share_matrix(data_dir, *flags);
                     return;
                   }
                   if (const auto experiment = bench::parse_switchflow_matrix(flags->matrix)) {
                     run_switchflow_matrix(*experiment, data_dir, *flags);
                     return;
                   }
                   const auto path = bench::matrix_path(data_dir, flags->matrix);
                   if (bench::is_serve_matrix(path)) {
                     run_serve_matrix(path, data_dir, *flags);
                     return;
                   }
                   if (bench::is_cluster_matrix(path)) {
                     run_cluster_bench(path, data_dir, *flags);
                     return;
                   }
                   const auto matrix = bench::load_matrix(path);
                   const auto catalog = sim::Catalog::load(data_dir);
                   bench::BenchOptions options;
                   options.algorithms = algorithm_list(flags->algorithms, matrix.mps.has_value());
                   if (std::any_of(options.algorithms.begin(), options.algorithms.end(),
                                   [](const std::string& a) {
                                     return control::needs_mps_planning(a) && !control::plans_with_fitted_predictor(a);
                                   })) {
                     options.pctodl_params_dir = resolve_pctodl_params_dir(flags->params_dir);
                   }
                   options.pctodl_shadow = flags->shadow;
                   if (flags->shadow && std::find(options.algorithms.begin(), options.algorithms.end(), "pctodl") ==
                                            options.algorithms.end()) {
                     throw usage_error("--shadow applies to pctodl, which --algorithms does not include");
                   }
                   options.seed = parse_seed(flags->seed);
                   options.threads = flags->jobs;
                   options.sample_hz = flags->sample_hz;
                   if (flags->bobd_budget < 1 || flags->bobd_budget > 100'000) {
                     throw usage_error(fmt::format("--bobd-budget {} must be between 1 and 100000", flags->bobd_budget));
                   }
                   options.search_budget = static_cast<std::size_t>(flags->bobd_budget);
                   bench::validate_bench(matrix, catalog, options);  // before anything is written
                   if (!flags->out_dir.empty()) {
                     prepare_out_dir(flags->out_dir);
                     options.trace_dir = (std::filesystem::path(flags->out_dir) / "traces").string();
                     options.plot_dir = (std::filesystem::path(flags->out_dir) / "plots").string();
                   }
                   options.progress = CountProgress("bench", stderr_is_terminal());
                   const auto runs = bench::run_matrix(matrix, catalog, options);
                   const auto csv = bench::bench_summary_csv(matrix, runs);
                   const auto json = bench::bench_summary_json(matrix, runs, options);
                   if (!flags->out_dir.empty()) {
                     const std::filesystem::path out(flags->out_dir);
                     bench::write_bench_plots(matrix, runs, options.algorithms, options.plot_dir);
                     // All or none (a full disk replaces none of them); the report is put in place
                     // last: its presence means the set is complete.
                     write_text_files({{(out / "summary.csv").string(), csv},
                                       {(out / "summary.json").string(), json.dump(2) + "\n"},
                                       {(out / "report.md").string(),
                                        bench::bench_report_markdown(matrix, catalog, runs, options, command_line(*flags))}});
                   }
                   if (flags->json) {
                     std::cout << json.dump(2) << "\n";
                   } else {
                     std::cout << csv;
                   }
                 }};
}

}  // namespace gpucap::cli
