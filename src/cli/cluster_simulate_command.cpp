// gpucap cluster simulate: twin nodes sharing one power budget in virtual time, under every policy,
// with the same allocator, protocol, coordinator and node agent as a real cluster and an in-process
// store in place of etcd (cluster/simulate.hpp). Every figure is simulated.

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "cluster_commands.hpp"
#include "gpucap/cluster/schema.hpp"
#include "gpucap/cluster/simulate.hpp"
#include "gpucap/core/error.hpp"
#include "gpucap/core/text.hpp"
#include "gpucap/sim/catalog.hpp"

namespace gpucap::cli {
namespace {

// The CLI's range: the 10 to 10,000 nodes, and down to one for a quick look.
constexpr long long kMaxNodes = 10'000;

struct SimulateFlags {
  std::string nodes = "1000";
  std::string budget = "70%";
  std::string seed = "1";
  std::string policy = "gpucap";
  double duration_s = 600.0;
  std::vector<std::string> budget_steps;
  std::string gpus;
  std::string load = "0.15-1.3";
  int threads = 2;
  bool json = false;
};

struct Budget {
  double value = 0.0;
  bool fraction = true;
};

// "70%" (of the initial nodes' TDPs) or "1200" / "1200W" (watts). Error(usage) naming `flag`.
Budget parse_budget_text(std::string_view text, const char* flag) {
  const auto trimmed = trim(text);
  Budget budget;
  std::string_view number = trimmed;
  if (number.ends_with('%')) {
    number.remove_suffix(1);
  } else {
    budget.fraction = false;
    if (number.ends_with('W') || number.ends_with('w')) number.remove_suffix(1);
  }
  const auto value = parse_double(number);
  if (!value || *value <= 0.0) {
    throw usage_error(fmt::format("{} '{}' must be a positive number of watts (1200) or a percentage of the nodes' TDPs "
                                  "(70%)",
                                  flag, text));
  }
  budget.value = budget.fraction ? *value / 100.0 : *value;
  if (budget.fraction && budget.value > 2.0) {
    throw usage_error(fmt::format("{} '{}' is absurd: at most 200% of the nodes' TDPs", flag, text));
  }
  if (!budget.fraction && budget.value > cluster::kMaxBudgetW) {
    throw usage_error(fmt::format("{} '{}' is absurd: more than {:g} W", flag, text, cluster::kMaxBudgetW));
  }
  return budget;
}

// "T=BUDGET": at T seconds the budget becomes BUDGET (a decrease is enforced after the notice).
cluster::BudgetStep parse_budget_step(const std::string& text) {
  const auto eq = text.find('=');
  const auto at = eq == std::string::npos ? std::nullopt : parse_double(std::string_view(text).substr(0, eq));
  if (!at) throw usage_error(fmt::format("--budget-step '{}' must be SECONDS=BUDGET, e.g. 300=49%", text));
  const auto budget = parse_budget_text(std::string_view(text).substr(eq + 1), "--budget-step");
  return {*at, budget.value, budget.fraction};
}

// "MIN-MAX": each node's load range, fractions of its capacity at its TDP (checked by validate()).
std::pair<double, double> parse_load(const std::string& text) {
  const auto dash = text.find('-');
  const auto low = dash == std::string::npos ? std::nullopt : parse_double(std::string_view(text).substr(0, dash));
  const auto high = dash == std::string::npos ? std::nullopt : parse_double(std::string_view(text).substr(dash + 1));
  if (!low || !high) throw usage_error(fmt::format("--load '{}' must be MIN-MAX, e.g. 0.15-1.3", text));
  return {*low, *high};
}

cluster::SimulateOptions options_from(const SimulateFlags& flags) {
  cluster::SimulateOptions options;
  const auto nodes = parse_integer(flags.nodes);
  if (!nodes || *nodes < 1 || *nodes > kMaxNodes) {
    throw usage_error(fmt::format("--nodes '{}' must be a whole number from 1 to {}", flags.nodes, kMaxNodes));
  }
  options.nodes = static_cast<std::size_t>(*nodes);
  const auto budget = parse_budget_text(flags.budget, "--budget");
  options.budget = budget.value;
  options.budget_fraction = budget.fraction;
  options.seed = parse_seed(flags.seed);
  const auto policy = cluster::parse_policy(flags.policy);
  if (!policy) throw usage_error(fmt::format("--policy '{}' must be gpucap, equal, tdp or balancer", flags.policy));
  options.policy = *policy;
  options.duration_s = flags.duration_s;
  options.warmup_s = std::min(options.warmup_s, flags.duration_s / 2.0);
  for (const auto& step : flags.budget_steps) options.budget_steps.push_back(parse_budget_step(step));
  std::tie(options.demand_min, options.demand_max) = parse_load(flags.load);
  if (!flags.gpus.empty()) {
    for (const auto gpu : split(flags.gpus, ',')) options.gpus.emplace_back(trim(gpu));
  }
  options.threads = flags.threads;
  cluster::validate(options);
  return options;
}

void print_text(const cluster::SimulateReport& r) {
  const auto& o = r.options;
  const auto& equal = r.run(cluster::Policy::equal);
  std::cout << fmt::format(
      "gpucap cluster simulate: {} twin nodes ({} GPU x model pairs), {:g} s of virtual time, seed {} [simulated]\n"
      "  budget {:.0f} W at the start ({:.1f}% of the nodes' {:.0f} W of TDP)\n"
      "  events: {} joined, {} left, {} died, {} lost the store for a while, {} published a broken curve\n\n",
      r.initial_nodes, r.pairs, o.duration_s, o.seed, r.budget_w, 100.0 * r.budget_w / r.sum_tdp_w, r.sum_tdp_w, r.joined,
      r.left, r.died, r.partitioned, r.broken);
  std::cout << fmt::format("{:<10} {:>12} {:>9} {:>11} {:>11} {:>12} {:>12}\n", "policy", "throughput", "vs equal",
                           "vs optimum", "violations", "max realloc", "p99 realloc");
  for (const auto& run : r.runs) {
    const bool headline = run.policy == o.policy;
    std::cout << fmt::format("{:<10} {:>12.1f} {:>8.3f}x {:>10.1f}% {:>11} {:>10.2f} s {:>10.2f} s\n",
                             fmt::format("{}{}", cluster::to_string(run.policy), headline ? " *" : ""), run.throughput,
                             equal.throughput > 0.0 ? run.throughput / equal.throughput : 0.0,
                             r.optimum > 0.0 ? 100.0 * run.throughput / r.optimum : 0.0, run.budget_violations,
                             run.max_realloc_s, run.p99_realloc_s);
  }
  std::cout << fmt::format("{:<10} {:>12.1f}   (upper bound: every node's concave hull, no protocol delays)\n\n",
                           "optimum", r.optimum);
  const auto json = cluster::to_json(r);
  std::cout << fmt::format(
      "throughput: TDP-equivalents (each node's good requests/s over its model's capacity at TDP, the geometric mean\n"
      "over GPUs); violations: instants "
      "with the caps in force summing above the budget in force. Wall {:.1f} s; coordinator round at most {:.2f} ms "
      "CPU.\n",
      r.wall_s, json["host"]["max_round_cpu_ms"].get<double>());
}

}  // namespace

Command add_cluster_simulate_command(CLI::App& cluster, const GlobalOptions& global) {
  auto flags = std::make_shared<SimulateFlags>();
  auto* cmd = cluster.add_subcommand(
      "simulate",
      "Twin nodes sharing one budget in virtual time, under every policy: throughput against equal split, TDP-"
      "proportional, GEOPM's power_balancer and the optimum; budget violations; re-allocation times (simulated)");
  cmd->add_option("--nodes", flags->nodes, "Twin nodes at the start, 1 to 10000")->capture_default_str();
  cmd->add_option("--budget", flags->budget, "The budget: watts (1200) or a percentage of the nodes' TDPs (70%)")
      ->capture_default_str();
  cmd->add_option("--seed", flags->seed, "Seed of the scenario (GPUs, models, load, events)")->capture_default_str();
  cmd->add_option("--policy", flags->policy, "The headline policy: gpucap, equal, tdp or balancer (every one runs)")
      ->capture_default_str();
  cmd->add_option("--duration", flags->duration_s, "Virtual seconds to simulate")->capture_default_str();
  cmd->add_option("--budget-step", flags->budget_steps,
                  "SECONDS=BUDGET: the budget changes then (a decrease is announced 10 s before it is enforced); "
                  "repeatable");
  cmd->add_option("--gpus", flags->gpus, "GPUs to draw from, comma-separated (default: the whole catalogue)");
  cmd->add_option("--load", flags->load,
                  "Each node's load: log-uniform between MIN and MAX times its capacity at its TDP, drawn again "
                  "every 120 s on average")
      ->capture_default_str();
  cmd->add_option("--threads", flags->threads, "Policies simulated at once")->capture_default_str();
  cmd->add_flag("--json", flags->json, "Print JSON instead of text");
  return {cmd, [flags, &global] {
            const auto options = options_from(*flags);
            const auto catalog = sim::Catalog::load(resolve_data_dir(global));
            // The protocol's log lines (ignored records, refused registrations) with --verbose.
            const auto report = cluster::simulate(catalog, options, [](std::string_view line) { spdlog::debug("cluster: {}", line); });
            if (flags->json) {
              std::cout << cluster::to_json(report).dump(2) << '\n';
            } else {
              print_text(report);
            }
          }};
}

}  // namespace gpucap::cli
