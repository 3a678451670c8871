// gpucap cluster forget: tell the coordinator that a lost node (its lease expired) is gone for good,
// so that the power it may still hold — its safe cap, while it might only be cut off — goes to the
// others. Refused for a live node or one the cluster does not count. Waits for the leading
// coordinator to apply it (cluster/forget.hpp).

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cmath>
#include <iostream>
#include <thread>

#include "cluster_commands.hpp"
#include "cluster_etcd.hpp"
#include "gpucap/cluster/forget.hpp"
#include "gpucap/core/error.hpp"

namespace gpucap::cli {
namespace {

struct ForgetFlags {
  EtcdFlags etcd;
  std::string node;
  double wait_s = 10.0;
  bool json = false;
};

const char* outcome_name(cluster::ForgetOutcome outcome) {
  switch (outcome) {
    case cluster::ForgetOutcome::pending: return "pending";
    case cluster::ForgetOutcome::applied: return "applied";
    case cluster::ForgetOutcome::refused: return "refused";
    case cluster::ForgetOutcome::returned: return "returned";
  }
  return "unknown";
}

cluster::ForgetOutcome wait_for_outcome(cluster::Store& store, const cluster::Keys& keys, const std::string& id,
                                        const cluster::ForgetRequest& request, double wait_s) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(wait_s);
  while (true) {
    const auto outcome = cluster::forget_outcome(store, keys, id, request);
    if (outcome != cluster::ForgetOutcome::pending || std::chrono::steady_clock::now() >= deadline) return outcome;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

void run_forget(const ForgetFlags& f) {
  cluster::check_name(f.node, "--node");
  if (!(std::isfinite(f.wait_s) && f.wait_s >= 0.0 && f.wait_s <= 600.0)) {
    throw usage_error(fmt::format("--wait {:g} must be from 0 to 600 seconds", f.wait_s));
  }
  const cluster::Keys keys(f.etcd.cluster);
  auto store = connect_etcd(f.etcd);
  const auto request = cluster::request_forget(*store, keys, f.node);
  const auto outcome = wait_for_outcome(*store, keys, f.node, request, f.wait_s);
  if (f.json) {
    std::cout << nlohmann::json{{"cluster", f.etcd.cluster},
                                {"node", f.node},
                                {"incarnation", request.incarnation},
                                {"counted_w", request.counted_w},
                                {"outcome", outcome_name(outcome)}}
                     .dump(2)
              << "\n";
  }
  switch (outcome) {
    case cluster::ForgetOutcome::applied:
      if (!f.json) {
        fmt::print("cluster {}: node {} forgotten; the power it was still counted for ({:g} W once its safe-cap "
                   "timeout had passed) goes to the others\n",
                   f.etcd.cluster, f.node, request.counted_w);
      }
      return;
    case cluster::ForgetOutcome::refused:
      throw Error(ErrorCode::invalid_data,
                  fmt::format("the coordinator did not forget node {} (it registered again, or the coordinator does "
                              "not count it: its log says which)",
                              f.node));
    case cluster::ForgetOutcome::returned:
      throw Error(ErrorCode::invalid_data,
                  fmt::format("node {} registered again while the request was open: it is counted again", f.node));
    case cluster::ForgetOutcome::pending:
      if (f.wait_s == 0.0) {
        if (!f.json) fmt::print("cluster {}: asked to forget node {}; the leading coordinator applies it\n", f.etcd.cluster, f.node);
        return;
      }
      throw Error(ErrorCode::io, fmt::format("the request was not applied within {:g} s: the leader applies it once "
                                             "the node's safe-cap timeout has passed (a new leader counts it from its "
                                             "takeover), and none may lead (gpucap cluster status says); it stays "
                                             "until then",
                                             f.wait_s));
  }
}

}  // namespace

Command add_cluster_forget_command(CLI::App& cluster, const GlobalOptions& /*global*/) {
  auto flags = std::make_shared<ForgetFlags>();
  auto* cmd = cluster.add_subcommand(
      "forget",
      "Stop counting a lost node that is off for good: the safe cap it is still counted for goes to the others");
  add_etcd_flags(*cmd, flags->etcd);
  cmd->add_option("--node", flags->node, "The lost node's id")->required();
  cmd->add_option("--wait", flags->wait_s, "Seconds to wait for the leading coordinator to apply it (0: do not wait)")
      ->default_str("10");
  cmd->add_flag("--json", flags->json, "Print JSON: node, incarnation, counted_w, outcome (applied, refused, returned, pending)");
  return {cmd, [flags] { run_forget(*flags); }};
}

}  // namespace gpucap::cli
