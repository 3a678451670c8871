// gpucap cluster coordinate: one of the cluster's coordinators. Any number run (on any machines);
// one leads through etcd (a lease and a transaction), the others stand by and take over when the
// leader's lease expires. The leader reads the budget and the nodes' curves and writes every
// node's allocation (cluster/coordinator.hpp).

#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>

#include "cluster_commands.hpp"
#include "cluster_etcd.hpp"
#include "gpucap/cluster/coordinator.hpp"
#include "gpucap/cluster/realtime.hpp"
#include "gpucap/core/error.hpp"

namespace gpucap::cli {
namespace {

struct CoordinateFlags {
  EtcdFlags etcd;
  std::string id;
  std::string policy = "gpucap";
  double lease_ttl_s = 5.0;
  double safe_cap_timeout_s = 5.0;
  double period_s = 1.0;
};

std::string default_id() {
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) return fmt::format("coordinator-{}", getpid());
  return fmt::format("{}-{}", host, getpid());
}

void run_coordinate(const CoordinateFlags& f) {
  const auto policy = cluster::parse_policy(f.policy);
  if (!policy) throw usage_error(fmt::format("--policy '{}' must be gpucap, equal, tdp or balancer", f.policy));
  if (!(f.period_s >= 0.05 && f.period_s <= 3600.0)) {
    throw usage_error(fmt::format("--period {:g} must be in [0.05, 3600] seconds", f.period_s));
  }
  cluster::CoordinatorOptions options;
  options.cluster = f.etcd.cluster;
  options.id = f.id.empty() ? default_id() : f.id;
  cluster::check_name(options.id, "--id");
  options.policy = *policy;
  options.timing = protocol_timing(f.lease_ttl_s, f.safe_cap_timeout_s);
  options.period_s = f.period_s;
  options.log = [](std::string_view line) { fmt::print(stderr, "gpucap cluster coordinate: {}\n", line); };
  auto store = connect_etcd(f.etcd);
  cluster::Coordinator coordinator(*store, options);

  cluster::StepLoop loop;
  StopSignal stop([&loop](int signal) {
    fmt::print(stderr, "gpucap cluster coordinate: {}: stopping\n", signal == SIGINT ? "SIGINT" : "SIGTERM");
    loop.stop();
  });
  fmt::print("gpucap cluster coordinate: {} for cluster {} (etcd {}), policy {}, lease TTL {:g} s, safe-cap timeout {:g} s\n",
             options.id, f.etcd.cluster, f.etcd.etcd, f.policy, f.lease_ttl_s, f.safe_cap_timeout_s);
  fmt::print("  stop with Ctrl-C or SIGTERM (a standby takes over within one lease TTL)\n");
  std::fflush(stdout);
  bool was_leader = false;
  loop.run([&](double now_s) {
    const double next = coordinator.step(now_s);
    if (coordinator.leader() != was_leader) {
      was_leader = coordinator.leader();
      fmt::print("gpucap cluster coordinate: {} {} at {:.3f} (Unix time)\n", options.id,
                 was_leader ? "is the leader" : "stands by", cluster::unix_now_s());
      std::fflush(stdout);
    }
    return next;
  });
  // The leadership's lease is left to expire: a standby takes over within one TTL.
}

}  // namespace

Command add_cluster_coordinate_command(CLI::App& cluster, const GlobalOptions& /*global*/) {
  auto flags = std::make_shared<CoordinateFlags>();
  auto* cmd = cluster.add_subcommand(
      "coordinate", "Coordinate a cluster's power budget: one coordinator leads through etcd, the others stand by");
  add_etcd_flags(*cmd, flags->etcd);
  cmd->add_option("--id", flags->id, "This coordinator's name (default: HOST-PID)");
  cmd->add_option("--policy", flags->policy, "How the budget is divided: gpucap (water-filling on marginal throughput "
                                             "per watt), equal, tdp (proportional to TDP) or balancer (GEOPM's rule)")
      ->default_str("gpucap");
  cmd->add_option("--lease-ttl", flags->lease_ttl_s, "Seconds without a keep-alive before etcd drops a lease (the "
                                                     "leader's and, on the nodes, theirs)")
      ->default_str("5");
  cmd->add_option("--safe-cap-timeout", flags->safe_cap_timeout_s,
                  "Seconds a node without etcd holds its cap before it falls to its safe cap; a lost node's power is "
                  "handed out only after its lease expired and this passed (the same value on every node)")
      ->default_str("5");
  cmd->add_option("--period", flags->period_s, "The least seconds between two re-allocations")->default_str("1");
  return {cmd, [flags] { run_coordinate(*flags); }};
}

}  // namespace gpucap::cli
