// gpucap fit: gpucap's own predictor (predict/fitted.hpp) fitted to profile CSVs in PctoDL's
// profiler format; prints the rows used and skipped and the held-out accuracy, writes the model.

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "gpucap/cli/commands.hpp"
#include "gpucap/core/error.hpp"
#include "gpucap/core/text.hpp"
#include "gpucap/predict/fitted.hpp"

namespace gpucap::cli {

namespace {

struct FitFlags {
  std::vector<std::string> profiles;
  std::string model;
  std::string out;
  bool no_regressor = false;
  bool json = false;
};

nlohmann::json accuracy_json(const predict::Accuracy& a) {
  const auto number = [](double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(); };
  return {{"rows", a.rows}, {"mape_pct", number(a.mape_pct)}, {"r2", number(a.r2)}};
}

std::string accuracy_text(const predict::Accuracy& a) {
  if (a.rows == 0) return "n/a (no rows)";
  const auto r2 = std::isfinite(a.r2) ? fmt::format("{:.4f}", a.r2) : std::string("n/a");
  return fmt::format("MAPE {:5.2f} %, R² {}", a.mape_pct, r2);
}

void print_report(const FitFlags& flags, const predict::FittedPredictor& predictor) {
  const auto& r = predictor.report();
  std::vector<std::string> clocks;
  for (const double m : predictor.memory_clocks_mhz()) clocks.push_back(fmt::format("{:g}", m));
  fmt::print("gpucap fit: {} from {} profile file{} (accuracy against the profile's own measurements)\n", r.model,
             flags.profiles.size(), flags.profiles.size() == 1 ? "" : "s");
  fmt::print("  rows                {} read, {} used ({} fitted, {} held out)\n", r.rows_read, r.rows_used,
             r.rows_train, r.rows_held_out);
  fmt::print("  skipped             {} out-of-memory, {} idle, {} of other models{}\n", r.rows_oom, r.rows_idle,
             r.rows_other_models, r.other_models.empty() ? "" : fmt::format(" ({})", join(r.other_models, ", ")));
  fmt::print("  memory clocks       {} MHz\n", join(clocks, ", "));
  fmt::print("  held out, 20 %      throughput {}   (closed-form priors alone: {})\n",
             accuracy_text(r.held_out_throughput), accuracy_text(r.held_out_throughput_prior));
  fmt::print("                      power      {}   (closed-form priors alone: {})\n", accuracy_text(r.held_out_power),
             accuracy_text(r.held_out_power_prior));
  fmt::print("  saved model, all    throughput {}\n", accuracy_text(r.fitted_throughput));
  fmt::print("                      power      {}\n", accuracy_text(r.fitted_power));
  for (const auto& note : r.notes) fmt::print("  note                {}\n", note);
  fmt::print("  fit time            {:.2f} s\n", r.fit_seconds);
  fmt::print("  wrote               {}\n", flags.out);
}

void print_json(const FitFlags& flags, const predict::FittedPredictor& predictor) {
  const auto& r = predictor.report();
  const nlohmann::json out{{"model", r.model},
                           {"profiles", flags.profiles},
                           {"out", flags.out},
                           {"residual_regressor", !flags.no_regressor},
                           {"rows_read", r.rows_read},
                           {"rows_used", r.rows_used},
                           {"rows_train", r.rows_train},
                           {"rows_held_out", r.rows_held_out},
                           {"rows_oom", r.rows_oom},
                           {"rows_idle", r.rows_idle},
                           {"rows_other_models", r.rows_other_models},
                           {"other_models", r.other_models},
                           {"memory_clocks_mhz", predictor.memory_clocks_mhz()},
                           {"held_out",
                            {{"throughput", accuracy_json(r.held_out_throughput)},
                             {"power", accuracy_json(r.held_out_power)},
                             {"throughput_prior", accuracy_json(r.held_out_throughput_prior)},
                             {"power_prior", accuracy_json(r.held_out_power_prior)}}},
                           {"fitted",
                            {{"throughput", accuracy_json(r.fitted_throughput)},
                             {"power", accuracy_json(r.fitted_power)}}},
                           {"notes", r.notes},
                           {"fit_seconds", r.fit_seconds}};
  std::cout << out.dump(2) << "\n";
}

}  // namespace

Command add_fit_command(CLI::App& app, const GlobalOptions& /*global*/) {
  auto flags = std::make_shared<FitFlags>();
  auto* cmd = app.add_subcommand(
      "fit", "Fit gpucap's own MPS throughput/power predictor to profile CSVs (PctoDL's profiler format)");
  cmd->add_option("--profile", flags->profiles,
                  "Profile CSV (model_name,p_list,b_list,target_freq,mem_freq,sm_freq,sm_util,mem_util,"
                  "throughput_total,power_avg,power_max); repeat for several files")
      ->required()
      ->take_all();
  cmd->add_option("--model", flags->model, "Model to fit; rows of other models are skipped (default: the only one)");
  cmd->add_option("--out", flags->out, "Where to write the fitted predictor (JSON)")->required()->check(output_path());
  cmd->add_flag("--no-regressor", flags->no_regressor,
                "Closed-form priors only, without the residual regressor (for comparison)");
  cmd->add_flag("--json", flags->json, "Print the fit report as JSON");
  return Command{cmd, [flags] {
                   if (flags->out.empty()) throw usage_error("--out needs a file name");
                   std::vector<predict::ProfileRow> rows;
                   for (const auto& path : flags->profiles) {
                     auto more = predict::read_profile_csv(path);
                     rows.insert(rows.end(), std::make_move_iterator(more.begin()),
                                 std::make_move_iterator(more.end()));
                   }
                   predict::FitOptions options;
                   options.model = flags->model;
                   options.residual_regressor = !flags->no_regressor;
                   const auto predictor = predict::fit_predictor(rows, options);
                   predictor.save(flags->out);  // temporary file + rename: never half a model
                   if (flags->json) {
                     print_json(*flags, predictor);
                   } else {
                     print_report(*flags, predictor);
                   }
                 }};
}

}  // namespace gpucap::cli
