// gpucap tune: offline search for the best configuration under a cap, on the simulated GPU.

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <iostream>

#include "gpucap/cli/commands.hpp"
#include "gpucap/core/error.hpp"
#include "gpucap/core/text.hpp"
#include "gpucap/runtime/sim_job.hpp"
#include "gpucap/runtime/tuning.hpp"
#include "gpucap/tune/registry.hpp"

namespace gpucap::cli {

namespace {

struct TuneFlags {
  std::string algorithm;
  std::string gpu = "p40";
  std::string model;
  double power_cap_w = 0.0;
  std::optional<long long> budget;
  double measure_s = 3.0;
  std::optional<std::string> batch_sizes;
  std::optional<std::string> clock_levels;
  std::optional<std::string> memory_clocks;
  std::string seed = "1";
  double sample_hz = 100.0;
  bool json = false;
};

tune::SearchSpace search_space(const TuneFlags& flags, const sim::GpuSpec& gpu) {
  auto space = runtime::default_search_space(gpu);
  if (flags.batch_sizes) space.batch_sizes = control::parse_batch_sizes(*flags.batch_sizes);
  if (flags.clock_levels) space.sm_clocks_mhz = control::parse_clock_levels(*flags.clock_levels);
  if (flags.memory_clocks) space.memory_clocks_mhz = control::parse_clock_levels(*flags.memory_clocks);
  space.validate();
  return space;
}

std::string space_text(const tune::SearchSpace& space) {
  auto text = fmt::format("{} batch sizes × {} SM clocks", space.batch_sizes.size(), space.sm_clocks_mhz.size());
  if (!space.memory_clocks_mhz.empty()) text += fmt::format(" × {} memory clocks", space.memory_clocks_mhz.size());
  return text + fmt::format(" = {} configurations", space.size());
}

nlohmann::json trial_json(const tune::Trial& trial) {
  nlohmann::json j = {{"batch_size", trial.point.batch_size},
                      {"sm_clock_mhz", trial.point.sm_clock_mhz},
                      {"throughput_img_s", trial.result.throughput_img_s},
                      {"max_power_w", trial.result.max_power_w},
                      {"mean_power_w", trial.result.mean_power_w}};
  j["memory_clock_mhz"] = trial.point.memory_clock_mhz ? nlohmann::json(*trial.point.memory_clock_mhz) : nullptr;
  return j;
}

// Running best feasible throughput after each trial; null until one is feasible.
nlohmann::json trials_json(const std::vector<tune::Trial>& trials, double cap_w) {
  nlohmann::json out = nlohmann::json::array();
  std::optional<tune::Trial> best;
  for (const auto& t : trials) {
    if (tune::improves(t.result, best, cap_w)) best = t;
    auto j = trial_json(t);
    j["best_so_far_img_s"] = best ? nlohmann::json(best->result.throughput_img_s) : nlohmann::json();
    out.push_back(std::move(j));
  }
  return out;
}

nlohmann::json result_json(const TuneFlags& flags, const std::string& gpu_id, const std::string& model_id,
                           const tune::SearchSpace& space, std::size_t budget, const runtime::TuneOutcome& outcome) {
  return {{"simulated", true},
          {"algorithm", flags.algorithm},
          {"gpu", gpu_id},
          {"model", model_id},
          {"cap_w", flags.power_cap_w},
          {"space_size", space.size()},
          {"budget", budget > 0 ? nlohmann::json(budget) : nlohmann::json()},  // null: the whole space
          {"measure_s", flags.measure_s},
          {"evaluations", outcome.trials.size()},
          {"cost_s", outcome.cost_s},
          {"best", outcome.best ? trial_json(*outcome.best) : nlohmann::json()},
          {"trials", trials_json(outcome.trials, flags.power_cap_w)}};
}

void print_header(const TuneFlags& flags, const sim::GpuSpec& gpu, const tune::SearchSpace& space,
                  std::size_t budget) {
  fmt::print("gpucap tune ({}) on the SIMULATED {} (GPU twin, virtual time)\n", flags.algorithm, gpu.name);
  fmt::print("  model {}, cap {:g} W, {}, {:g} s per measurement", flags.model, flags.power_cap_w,
             space_text(space), flags.measure_s);
  fmt::print("{}\n", budget > 0 ? fmt::format(", budget {}", budget) : std::string());
}

// One line per evaluation, printed as it happens, for tuners whose next proposal depends on the
// results so far (the oracle's fixed order would only add 2,560 lines of noise).
void print_trial(const std::vector<tune::Trial>& trials, const std::optional<tune::Trial>& best, double cap_w,
                 std::size_t point_width) {
  const auto& t = trials.back();
  fmt::print("  eval {:>3}  {:<{}} {:>9.2f} img/s {:>7.2f} W  {:<8}  best {}  [simulated]\n", trials.size(),
             describe(t.point), point_width, t.result.throughput_img_s, t.result.max_power_w,
             tune::feasible(t.result, cap_w) ? "feasible" : "over cap",
             best ? fmt::format("{:.2f} img/s", best->result.throughput_img_s) : std::string("none yet"));
}

void print_summary(const tune::SearchSpace& space, const runtime::TuneOutcome& outcome) {
  const auto line = [](const char* label, const std::string& value) {
    fmt::print("  {:<22} {:>24}  [simulated]\n", label, value);
  };
  if (outcome.best) {
    line("best configuration", describe(outcome.best->point));
    line("throughput", fmt::format("{:.2f} img/s", outcome.best->result.throughput_img_s));
    line("window max power", fmt::format("{:.2f} W", outcome.best->result.max_power_w));
    line("mean power", fmt::format("{:.2f} W", outcome.best->result.mean_power_w));
  } else {
    line("best configuration", "none under the cap");
  }
  fmt::print("  {:<22} {:>24}\n", "evaluations", fmt::format("{} of {}", outcome.trials.size(), space.size()));
  line("search cost", fmt::format("{:.0f} s ({:.2f} h)", outcome.cost_s, outcome.cost_s / 3600.0));
}

}  // namespace

Command add_tune_command(CLI::App& app, const GlobalOptions& global) {
  auto flags = std::make_shared<TuneFlags>();
  auto* cmd = app.add_subcommand("tune", "Search offline for the best configuration under a power cap (simulated GPU)");
  cmd->add_option("--algorithm", flags->algorithm, "Search: oracle (exhaustive) or bobd (Bayesian optimisation)")
      ->required();
  cmd->add_option("--gpu", flags->gpu, "GPU twin (see 'gpucap list gpus')")->capture_default_str();
  cmd->add_option("--model", flags->model, "Model (see 'gpucap list models')")->required();
  cmd->add_option("--power-cap", flags->power_cap_w, "Power cap in W: the best configuration's window max stays under it")
      ->required();
  cmd->add_option("--budget", flags->budget,
                  "Most configurations to measure (default: 50 for bobd, the whole space for oracle)");
  cmd->add_option("--measure-s", flags->measure_s, "Length of one fixed-configuration measurement in seconds")
      ->capture_default_str();
  cmd->add_option("--batch-sizes", flags->batch_sizes, "Batch sizes to search, e.g. 1..256 (default) or 1,2,4,8");
  cmd->add_option("--clock-levels", flags->clock_levels, "SM clocks to search in MHz (default: the GPU's DVFS ladder)");
  cmd->add_option("--memory-clocks", flags->memory_clocks,
                  "Memory clocks to search in MHz (default: all the GPU's, if it has several)");
  cmd->add_option("--seed", flags->seed, "Seed of the twin's noise and of BOBD's initial design")
      ->capture_default_str();
  cmd->add_option("--sample-hz", flags->sample_hz, "Power sampling rate in Hz")->capture_default_str();
  cmd->add_flag("--json", flags->json, "Print the result and every trial as JSON");

  return Command{cmd, [flags, &global] {
                   const auto catalog = sim::Catalog::load(resolve_data_dir(global));
                   const auto& gpu = catalog.gpu(flags->gpu);
                   (void)catalog.model(flags->model);
                   runtime::check_cap_schedule(CapSchedule::constant(flags->power_cap_w), gpu);
                   if (flags->budget && *flags->budget < 1) {
                     throw usage_error(fmt::format("--budget {} must be at least 1", *flags->budget));
                   }
                   const auto space = search_space(*flags, gpu);
                   runtime::TrialOptions options;
                   options.measure_s = flags->measure_s;
                   options.sample_hz = flags->sample_hz;
                   options.seed = parse_seed(flags->seed);
                   const runtime::SimTrialRunner runner(catalog, flags->gpu, flags->model, options);
                   // Every configuration is checked before the first measurement.
                   for (std::size_t i = 0; i < space.size(); ++i) runner.check(space.point(i));
                   auto tuner = tune::make_tuner(flags->algorithm, space, flags->power_cap_w, options.seed);
                   const auto& info = tune::tuner_info(flags->algorithm);
                   const auto budget =
                       flags->budget ? static_cast<std::size_t>(*flags->budget) : info.default_budget;
                   const bool text_progress = !flags->json && info.adaptive;
                   // Wide enough for "batch=256 sm=1531MHz" (+ " mem=9501MHz"), so the columns line up.
                   const std::size_t point_width = space.memory_clocks_mhz.empty() ? 20 : 32;
                   if (!flags->json) print_header(*flags, gpu, space, budget);
                   const auto outcome = runtime::run_tuner(
                       *tuner, [&runner](const tune::ConfigPoint& p) { return runner.measure(p); }, flags->power_cap_w,
                       budget, [&](const std::vector<tune::Trial>& trials, const std::optional<tune::Trial>& best) {
                         if (text_progress) print_trial(trials, best, flags->power_cap_w, point_width);
                       });
                   if (flags->json) {
                     std::cout << result_json(*flags, gpu.id, catalog.model(flags->model).id, space, budget, outcome)
                                      .dump(2)
                               << "\n";
                   } else {
                     print_summary(space, outcome);
                   }
                 }};
}

}  // namespace gpucap::cli
