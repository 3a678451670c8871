// gpucap cluster: one power budget shared by many nodes (cluster/). One parent command; each
// subcommand lives in its own file (cluster_commands.hpp).

#include <algorithm>
#include <memory>
#include <vector>

#include "cluster_commands.hpp"
#include "gpucap/cli/commands.hpp"
#include "gpucap/core/error.hpp"

namespace gpucap::cli {

std::vector<Command> cluster_subcommands(CLI::App& cluster, const GlobalOptions& global) {
  return {
      add_cluster_coordinate_command(cluster, global),
      add_cluster_budget_command(cluster, global),
      add_cluster_status_command(cluster, global),
      add_cluster_forget_command(cluster, global),
      add_cluster_simulate_command(cluster, global),
  };
}

Command add_cluster_command(CLI::App& app, const GlobalOptions& global) {
  auto* cluster = app.add_subcommand("cluster", "One power budget shared by many GPU nodes through etcd: coordinate it, set it, watch it, or simulate it on twin nodes");
  cluster->require_subcommand(1);
  auto subcommands = std::make_shared<std::vector<Command>>(cluster_subcommands(*cluster, global));
  for (const auto& sub : *subcommands) sub.app->fallthrough();
  return {cluster, [subcommands] {
            const auto chosen = std::find_if(subcommands->begin(), subcommands->end(),
                                             [](const Command& c) { return c.app->parsed(); });
            if (chosen == subcommands->end()) throw usage_error("cluster needs a command (see gpucap cluster --help)");
            chosen->run();
          }};
}

}  // namespace gpucap::cli
