// gpucap bso simulate: Zeus's trace-driven simulation of one recurring training job
// (bso/simulate.hpp), with Zeus's batch-size optimizer or gpucap's — the same optimizer code the
// service runs. Figures are simulated from Zeus's NSDI'23 traces.

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include "gpucap/bench/zeus_trace.hpp"
#include "gpucap/bso/simulate.hpp"
#include "gpucap/cli/commands.hpp"
#include "gpucap/core/error.hpp"
#include "gpucap/core/text.hpp"

namespace gpucap::cli {
namespace {

struct SimulateFlags {
  std::optional<std::string> train_trace;
  std::optional<std::string> power_trace;
  std::string workload;
  std::string optimizer = "zeus";
  std::string seed = "1";
  int recurrences = 50;
  double eta = 0.5;
  std::string beta = "2.0";
  std::optional<std::string> training_optimizer;
  std::optional<double> target_metric;
  bool lower_is_better = false;
  bool higher_is_better = false;
  std::optional<int> max_epochs;
  std::optional<int> default_batch_size;
  bool json = false;
};

nlohmann::json try_json(const bso::SimTry& t) {
  return {{"batch_size", t.batch_size}, {"power_limit_w", t.power_limit_w}, {"energy_j", t.energy_j},
          {"time_s", t.time_s},         {"cost", t.cost},                   {"epochs", t.epochs},
          {"reached", t.reached},       {"profiled_power_limits", t.profiled}};
}

void print_json(const bso::TraceWorkload& w, const SimulateFlags& flags, const bso::SimResult& result) {
  nlohmann::json recurrences = nlohmann::json::array();
  for (std::size_t r = 0; r < result.recurrences.size(); ++r) {
    nlohmann::json tries = nlohmann::json::array();
    for (const auto& t : result.recurrences[r].tries) tries.push_back(try_json(t));
    recurrences.push_back({{"recurrence", r + 1}, {"cost", result.recurrences[r].cost}, {"tries", tries}});
  }
  const nlohmann::json out = {
      {"simulated", true},
      {"workload", w.name},
      {"gpu", w.gpu},
      {"optimizer", flags.optimizer},
      {"seed", flags.seed},
      {"eta", flags.eta},
      {"optimum",
       {{"batch_size", result.optimum.batch_size}, {"power_limit_w", result.optimum.power_limit_w}, {"cost", result.optimum.cost}}},
      {"default_cost", result.default_cost},
      {"regret", result.regret},
      {"regret_in_optimum_costs", result.regret_in_optimum_costs()},
      {"recurrences", recurrences}};
  std::cout << out.dump(2) << '\n';
}

void print_text(const bso::TraceWorkload& w, const SimulateFlags& flags, const bso::SimResult& result) {
  std::cout << fmt::format(
      "gpucap bso simulate: {} on the {} power trace, optimizer {} (SIMULATED from Zeus's NSDI'23 traces)\n"
      "  target {} ({} is better) within {} epochs, default batch size {}, eta {}, beta {}, seed {}\n",
      w.name, w.gpu, flags.optimizer, w.target_metric, w.higher_is_better ? "higher" : "lower", w.max_epochs,
      w.default_batch_size, flags.eta, flags.beta, flags.seed);
  for (std::size_t r = 0; r < result.recurrences.size(); ++r) {
    const auto& rec = result.recurrences[r];
    std::cout << fmt::format("recurrence {:>3}: cost {:.4g} J ({:.1f}% of optimum) in {} {}\n", r + 1, rec.cost,
                             100.0 * rec.cost / result.optimum.cost, rec.tries.size(), rec.tries.size() == 1 ? "try" : "tries");
    for (const auto& t : rec.tries) {
      std::cout << fmt::format("    bs {:>5} at {:>5g} W{}: {:>3} epochs, energy {:.4g} J, time {:.4g} s, cost {:.4g} J, {}\n",
                               t.batch_size, t.power_limit_w, t.profiled ? " (profiled limits)" : "", t.epochs, t.energy_j,
                               t.time_s, t.cost, t.reached ? "reached" : "not reached");
    }
  }
  std::cout << fmt::format("default cost {:.4g} J ({:.1f}% of optimum), optimum cost {:.4g} J [simulated]\n",
                           result.default_cost, 100.0 * result.default_cost / result.optimum.cost, result.optimum.cost);
  std::cout << fmt::format("regret {:.2f} optimum-costs over {} recurrences (optimum bs {} at {:g} W)\n",
                           result.regret_in_optimum_costs(), result.recurrences.size(), result.optimum.batch_size,
                           result.optimum.power_limit_w);
}

}  // namespace

Command add_bso_simulate_command(CLI::App& bso, const GlobalOptions& /*global*/) {
  auto flags = std::make_shared<SimulateFlags>();
  auto* cmd = bso.add_subcommand(
      "simulate", "Zeus's trace-driven simulation of one recurring training job (simulated from Zeus's NSDI'23 traces)");
  cmd->add_option("--train-trace", flags->train_trace, "summary_train.csv (default: ../shared/data/zeus/nsdi23/)");
  cmd->add_option("--power-trace", flags->power_trace,
                  "summary_power_<gpu>.csv, any GPU in that format (default: the V100 trace in ../shared/data/zeus/nsdi23/)");
  cmd->add_option("--workload", flags->workload, "DATASET/NETWORK, e.g. librispeech/deepspeech2")->required();
  cmd->add_option("--optimizer", flags->optimizer, "zeus (pruning + Gaussian Thompson sampling) or gpucap")
      ->capture_default_str();
  cmd->add_option("--seed", flags->seed, "Seed of the optimizer and of the runs drawn from the trace")->capture_default_str();
  cmd->add_option("--recurrences", flags->recurrences, "How many times the job recurs")->capture_default_str();
  cmd->add_option("--eta", flags->eta, "η: cost = η·energy + (1−η)·max_power·time")->capture_default_str();
  cmd->add_option("--beta", flags->beta, "Early stop at β × the lowest cost so far; 'none' disables it")->capture_default_str();
  cmd->add_option("--training-optimizer", flags->training_optimizer, "The trace's optimizer column (default per workload)");
  cmd->add_option("--target-metric", flags->target_metric, "Target validation metric (default per workload)");
  auto* lower = cmd->add_flag("--lower-is-better", flags->lower_is_better, "The metric is an error rate (default per workload)");
  cmd->add_flag("--higher-is-better", flags->higher_is_better, "The metric is an accuracy (default per workload)")->excludes(lower);
  cmd->add_option("--max-epochs", flags->max_epochs, "Maximum epochs of one training run (default per workload)");
  cmd->add_option("--default-batch-size", flags->default_batch_size, "b0, the user's batch size (default per workload)");
  cmd->add_flag("--json", flags->json, "Print JSON instead of text");
  return {cmd, [flags] {
            bench::ZeusWorkloadOverrides overrides;
            overrides.training_optimizer = flags->training_optimizer;
            overrides.target_metric = flags->target_metric;
            if (flags->lower_is_better) overrides.higher_is_better = false;
            if (flags->higher_is_better) overrides.higher_is_better = true;
            overrides.max_epochs = flags->max_epochs;
            overrides.default_batch_size = flags->default_batch_size;
            bso::SimOptions options;
            options.optimizer = bso::parse_optimizer(flags->optimizer);
            options.seed = parse_seed(flags->seed);
            options.recurrences = flags->recurrences;
            if (!(flags->eta >= 0.0 && flags->eta <= 1.0)) throw usage_error("--eta must be in [0, 1]");
            options.eta = flags->eta;
            options.beta = parse_beta(flags->beta);
            const auto workload = bench::load_zeus_workload(flags->train_trace.value_or(default_zeus_trace("summary_train.csv")),
                                                            flags->power_trace.value_or(default_zeus_trace("summary_power_v100.csv")),
                                                            flags->workload, overrides);
            const auto result = bso::simulate(workload, options);
            if (flags->json) {
              print_json(workload, *flags, result);
            } else {
              print_text(workload, *flags, result);
            }
          }};
}

}  // namespace gpucap::cli
