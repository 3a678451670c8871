// gpucap calibrate: fit the twin's parameters to measurements and write them to the data files.

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <map>
#include <vector>

#include "gpucap/calibrate/calibration.hpp"
#include "gpucap/calibrate/data_files.hpp"
#include "gpucap/cli/commands.hpp"
#include "gpucap/core/error.hpp"
#include "gpucap/core/text.hpp"
#include "gpucap/sim/catalog.hpp"
#include "progress.hpp"
#include "source_path_flags.hpp"

namespace gpucap::cli {

namespace {

struct CalibrateFlags {
  std::string sources = "all";
  SourcePathFlags paths;
  bool dry_run = false;
  bool json = false;
};

calibrate::SourcePaths source_paths(const CalibrateFlags& flags, const std::string& data_dir) {
  auto paths = calibrate::default_source_paths(data_dir, resolve_shared_dir());
  flags.paths.apply(paths);
  return paths;
}

}  // namespace

Command add_calibrate_command(CLI::App& app, const GlobalOptions& global) {
  auto flags = std::make_shared<CalibrateFlags>();
  auto* cmd = app.add_subcommand(
      "calibrate",
      "Fit the twin's GPU, model and dataset parameters to measurements (Ceres least squares) and write them to the "
      "data files (the data folder in use: --data-dir, else the checkout's data/; --dry-run writes nothing); every "
      "fit starts from the hand estimates kept under \"_prior\". The GPUs data/calibration/zeus.json names under "
      "\"derive\" (fitted to no trace) take values derived from the fitted testbeds. Every input is read before the "
      "first fit; progress goes to stderr");
  cmd->add_option("--sources", flags->sources, "p40, pctodl, published, zeus, real (comma-separated) or all")
      ->capture_default_str();
  cmd->add_option("--p40-logs", flags->paths.p40_logs, "P40 logs in the batchdvfs-p40 layout (default: shared data)");
  cmd->add_option("--pctodl-params", flags->paths.pctodl_params, "PctoDL fitted predictor folder (default: shared data)");
  cmd->add_option("--published", flags->paths.published, "Published curves file (default: DATA_DIR/calibration/published.json)");
  cmd->add_option("--zeus-traces", flags->paths.zeus_traces,
                  "Folder of Zeus power traces summary_power_<gpu>.csv (default: shared data zeus/nsdi23)");
  cmd->add_flag("--dry-run", flags->dry_run, "Fit and report, but write nothing");
  cmd->add_flag("--json", flags->json, "Print the fits as JSON");

  return Command{cmd, [flags, &global] {
                   const auto data_dir = resolve_data_dir(global);
                   const auto catalog = sim::Catalog::load(data_dir);
                   const auto sources = calibrate::parse_sources(flags->sources);
                   flags->paths.reject_unselected(sources);  // a path that would go unused
                   const StageProgress progress("calibrate");
                   const auto fits = calibrate::calibrate_sources(
                       catalog, sources, source_paths(*flags, data_dir),
                       [&progress](const std::string& stage) { progress.stage(stage); });
                   progress.stage(fmt::format("fitted in {:.0f} s", progress.elapsed_s()));
                   // Nothing is written unless every fit converged.
                   for (const auto& fit : fits) {
                     if (!fit.result.report.converged) {
                       throw Error(ErrorCode::not_converged,
                                   fmt::format("calibration of {} did not converge ({}); no data file was changed",
                                               calibrate::to_string(fit.source), fit.result.report.message));
                     }
                   }
                   nlohmann::json json = nlohmann::json::array();
                   for (const auto& fit : fits) {
                     const auto& r = fit.result.report;
                     if (!flags->json) {
                       fmt::print("{}: {} residuals, {} parameters, converged in {} iterations (cost {:.4g} -> {:.4g})\n",
                                  calibrate::to_string(fit.source), r.residuals, fit.parameters.size(), r.iterations,
                                  r.initial_cost, r.final_cost);
                     }
                     // Each key's prior and its new value: printed, or as JSON under `value_name`.
                     const auto values = [&](const std::vector<calibrate::FitParameter>& parameters,
                                             const char* value_name) {
                       nlohmann::json list = nlohmann::json::array();
                       for (const auto& p : parameters) {
                         const double before = calibrate::parameter_value(fit.start, p);
                         const double after = calibrate::round_for_file(calibrate::parameter_value(fit.result.params, p));
                         if (flags->json) {
                           list.push_back({{"parameter", p.name()}, {"prior", before}, {value_name, after}});
                         } else {
                           fmt::print("  {:<48} {:>12.6g} -> {:<12.6g}\n", p.name(), before, after);
                         }
                       }
                       return list;
                     };
                     const auto params = values(fit.parameters, "fitted");
                     if (!fit.derived.empty() && !flags->json) fmt::print("  derived from the fitted values, not fitted:\n");
                     const auto derived = values(fit.derived, "derived");
                     json.push_back({{"source", calibrate::to_string(fit.source)}, {"converged", r.converged},
                                     {"iterations", r.iterations}, {"initial_cost", r.initial_cost},
                                     {"final_cost", r.final_cost}, {"parameters", params}, {"derived", derived}});
                   }
                   if (!flags->dry_run) {
                     // A file several sources fit (a model the zeus and real data both fit) names them all.
                     std::map<std::string, std::vector<std::string>> sources_by_file, derived_by_file;
                     const auto record = [](auto& by_file, const calibrate::SourceFit& fit, const auto& parameters) {
                       for (const auto& p : parameters) {
                         auto& names = by_file[calibrate::data_file_of(fit.result.params, p)];
                         const std::string source = calibrate::to_string(fit.source);
                         if (std::find(names.begin(), names.end(), source) == names.end()) names.push_back(source);
                       }
                     };
                     for (const auto& fit : fits) {
                       record(sources_by_file, fit, fit.parameters);
                       record(derived_by_file, fit, fit.derived);
                     }
                     const auto listed = [](std::vector<std::string> names) {
                       const auto last = names.back();
                       names.pop_back();
                       return names.empty() ? last : join(names, ", ") + " and " + last;
                     };
                     const auto note_for = [&](const std::string& file) {
                       std::vector<std::string> notes;
                       if (const auto it = sources_by_file.find(file); it != sources_by_file.end()) {
                         notes.push_back(fmt::format("fitted by `gpucap calibrate` to the {} data (docs/fidelity.md)",
                                                     listed(it->second)));
                       }
                       if (const auto it = derived_by_file.find(file); it != derived_by_file.end()) {
                         notes.push_back(fmt::format("derived by `gpucap calibrate` from the GPUs fitted to the {} data, "
                                                     "not fitted to this GPU (docs/simulator.md)",
                                                     listed(it->second)));
                       }
                       return join(notes, "; ");
                     };
                     // Each fit's fitted and derived keys, kept alive while the files are written.
                     std::vector<std::vector<calibrate::FitParameter>> written(fits.size());
                     std::vector<calibrate::FittedValues> values;
                     for (std::size_t i = 0; i < fits.size(); ++i) {
                       written[i] = fits[i].parameters;
                       written[i].insert(written[i].end(), fits[i].derived.begin(), fits[i].derived.end());
                       values.push_back({&fits[i].start, &fits[i].result.params, &written[i]});
                     }
                     calibrate::write_fitted_parameters(values, note_for);
                   }
                   if (flags->json) {
                     std::cout << json.dump(2) << "\n";
                   } else {
                     fmt::print("{}\n", flags->dry_run ? "dry run: no data file was changed"
                                                       : fmt::format("wrote the fitted values to {}", data_dir));
                   }
                 }};
}

}  // namespace gpucap::cli
