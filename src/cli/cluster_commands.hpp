#pragma once
// The subcommands of `gpucap cluster` (cluster_command.cpp), one file each. Each adds itself to
// the `cluster` group and returns the Command that runs it. To add one (coordinate, budget,
// status, forget): declare its function here, write it in its own cluster_<name>_command.cpp and list it
// in cluster_subcommands() (cluster_command.cpp).

#include <vector>

#include "gpucap/cli/commands.hpp"

namespace gpucap::cli {

// gpucap cluster simulate: twin nodes sharing one budget, in virtual time (cluster/simulate.hpp).
Command add_cluster_simulate_command(CLI::App& cluster, const GlobalOptions& global);

// gpucap cluster coordinate / budget / status / forget: a real cluster through etcd (cluster_etcd.hpp).
Command add_cluster_coordinate_command(CLI::App& cluster, const GlobalOptions& global);
Command add_cluster_budget_command(CLI::App& cluster, const GlobalOptions& global);
Command add_cluster_status_command(CLI::App& cluster, const GlobalOptions& global);
Command add_cluster_forget_command(CLI::App& cluster, const GlobalOptions& global);

// Every subcommand of the group, in the order `--help` lists them.
[[nodiscard]] std::vector<Command> cluster_subcommands(CLI::App& cluster, const GlobalOptions& global);

}  // namespace gpucap::cli
