// gpucap cluster budget: read or set a cluster's power budget (the key a facility's tool may also
// write: /gpucap/<cluster>/budget, {"budget_w": W}). The leading coordinator sees a change at once.

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <iostream>
#include <optional>

#include "cluster_commands.hpp"
#include "cluster_etcd.hpp"
#include "gpucap/cluster/schema.hpp"
#include "gpucap/core/error.hpp"
#include "gpucap/core/text.hpp"

namespace gpucap::cli {
namespace {

struct BudgetFlags {
  EtcdFlags etcd;
  std::optional<std::string> set;
  bool json = false;
};

// "1200" or "1200W": finite, >= 0, at most 1 GW. Error(usage) otherwise, before etcd is touched.
double parse_budget_flag(const std::string& text) {
  std::string_view number = trim(text);
  if (number.ends_with('W') || number.ends_with('w')) number.remove_suffix(1);
  const auto watts = parse_double(trim(number));
  if (!watts || !(*watts >= 0.0) || *watts > cluster::kMaxBudgetW) {
    throw usage_error(fmt::format("--set '{}' must be a number of watts from 0 to {:g} (1 GW)", text, cluster::kMaxBudgetW));
  }
  return *watts;
}

void run_budget(const BudgetFlags& f) {
  const std::optional<double> new_budget_w = f.set ? std::optional(parse_budget_flag(*f.set)) : std::nullopt;
  const cluster::Keys keys(f.etcd.cluster);
  auto store = connect_etcd(f.etcd);
  if (new_budget_w) (void)store->put(cluster::PutOp{keys.budget(), cluster::budget_json(*new_budget_w), 0});
  const auto read = store->get(keys.budget());
  std::optional<double> budget_w;
  std::string problem;
  if (!read.kvs.empty()) {
    const auto parsed = cluster::parse_budget(read.kvs.front().value);
    if (const auto* watts = std::get_if<double>(&parsed)) {
      budget_w = *watts;
    } else {
      problem = std::get<std::string>(parsed);
    }
  }
  if (f.json) {
    nlohmann::json out{{"cluster", f.etcd.cluster}, {"budget_w", budget_w ? nlohmann::json(*budget_w) : nlohmann::json()}};
    if (!problem.empty()) out["problem"] = problem;
    std::cout << out.dump(2) << "\n";
    return;
  }
  if (budget_w) {
    fmt::print("cluster {}: budget {:g} W{}\n", f.etcd.cluster, *budget_w, new_budget_w ? " (set)" : "");
  } else if (!problem.empty()) {
    fmt::print("cluster {}: the budget key holds no valid budget ({}); the coordinator keeps its last good one\n",
               f.etcd.cluster, problem);
  } else {
    fmt::print("cluster {}: no budget set (gpucap cluster budget --set W); nothing is allocated until one is\n",
               f.etcd.cluster);
  }
}

}  // namespace

Command add_cluster_budget_command(CLI::App& cluster, const GlobalOptions& /*global*/) {
  auto flags = std::make_shared<BudgetFlags>();
  auto* cmd = cluster.add_subcommand("budget", "Read or set a cluster's power budget in watts");
  add_etcd_flags(*cmd, flags->etcd);
  cmd->add_option("--set", flags->set, "The new budget in watts (the sum of the nodes' caps never goes above it)");
  cmd->add_flag("--json", flags->json, "Print JSON");
  return {cmd, [flags] { run_budget(*flags); }};
}

}  // namespace gpucap::cli
