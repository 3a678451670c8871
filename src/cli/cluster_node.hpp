#pragma once
// A `gpucap serve` or `gpucap run` node of a cluster (--cluster-etcd): the node agent (cluster/agent.hpp) in real
// time against etcd, on a thread of its own. It publishes the node's curve — its capacity under
// each cap, clipped to the demand it measures, refreshed as the demand changes — applies its
// allocation as the cap in force, and reports what it measures for `gpucap cluster status`.
//
// Each cap it applies is logged to stderr on one line, for the fault tests and an operator:
//   gpucap serve: cluster cap NODE W W at UNIX_S (allocation|safe cap|start)   (run: "gpucap run: ...")
// A lowered cap is logged after it is applied, a raised one before: the logs of all nodes, merged
// by time, never show less than was in force.

#include <CLI/CLI.hpp>

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "cluster_etcd.hpp"
#include "gpucap/cluster/agent.hpp"
#include "gpucap/cluster/curve.hpp"
#include "gpucap/cluster/etcd_store.hpp"
#include "gpucap/cluster/realtime.hpp"
#include "gpucap/serve/serving_loop.hpp"

namespace gpucap::cli {

struct ClusterNodeFlags {
  std::optional<std::string> etcd;  // --cluster-etcd: the node joins a cluster
  std::string cluster;
  std::string node;
  double priority = 1.0;
  double lease_ttl_s = 5.0;
  double safe_cap_timeout_s = 5.0;
  std::optional<double> safe_cap_w;
  EtcdTlsFlags tls;  // --cluster-etcd-ca, --cluster-etcd-cert, --cluster-etcd-key

  [[nodiscard]] bool enabled() const { return etcd.has_value(); }
};

// --cluster-etcd, --cluster, --node, --priority, --cluster-lease-ttl, --cluster-safe-cap-timeout,
// --cluster-safe-cap, and --cluster-etcd-ca, --cluster-etcd-cert, --cluster-etcd-key.
void add_cluster_node_flags(CLI::App& cmd, ClusterNodeFlags& flags);
// Error(usage) for a cluster flag without --cluster-etcd, or --cluster-etcd without --cluster and
// --node, or a bad value.
void check_cluster_node_flags(const ClusterNodeFlags& flags);

struct ClusterNodeSetup {
  cluster::NodeCurve capacity;  // min/max cap, TDP; priority is set from the flags
  std::string gpu;
  std::string model;
  bool simulated = false;
  std::function<void(double cap_w)> apply_cap;  // sets the cap in force (thread-safe)
  std::string program = "serve";                // names the command in its log lines
};

class ClusterNode {
 public:
  // Joins at the capacity curve's minimum cap (applied before the agent registers). Throws Error
  // for bad flags; etcd being unreachable is not an error: the agent keeps trying (and logs).
  ClusterNode(const ClusterNodeFlags& flags, ClusterNodeSetup setup);
  // Leaves the cluster (cap 0 acknowledged, lease revoked) and stops the thread: once the job has
  // ended or drained, since from then on the node is counted at 0 W.
  ~ClusterNode();
  ClusterNode(const ClusterNode&) = delete;
  ClusterNode& operator=(const ClusterNode&) = delete;

  // A serving window closed (any thread): the demand, throughput, power and SLO it measured.
  void observe(const serve::ServingWindow& window);
  // What a window measured (any thread); no demand: the node takes all it can use (a batch job).
  void observe_figures(double throughput_rps, double slo_attainment, double power_w, std::optional<double> demand_rps);
  [[nodiscard]] double starting_cap_w() const { return setup_.capacity.min_cap_w; }

 private:
  double step(double now_s);
  void apply(double cap_w, const char* why);
  void report();

  ClusterNodeFlags flags_;
  ClusterNodeSetup setup_;
  std::unique_ptr<cluster::EtcdStore> store_;
  cluster::StepLoop loop_;
  std::unique_ptr<cluster::NodeAgent> agent_;
  double applied_w_ = 0.0;  // the agent thread's
  bool leaving_ = false;    // set before leave(): its 0 W is the node stopping (logged as 0 W), not standby
  double next_curve_s_ = 0.0;
  double next_report_s_ = 0.0;
  std::optional<double> published_demand_rps_;
  cluster::LeaseId report_lease_ = 0;
  std::mutex mutex_;  // guards the measurements below
  std::optional<double> demand_rps_;
  cluster::NodeReport measured_;
  std::thread thread_;
};

}  // namespace gpucap::cli
