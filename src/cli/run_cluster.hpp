#pragma once
// `gpucap run --cluster-etcd ...` on the twin: the job is a node of a cluster that shares one power
// budget (cluster_node.hpp); its cap in force is the node's allocation, set while it runs. A run is
// a batch job: it can use all the power its throughput curve says (no demand to clip it to).

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "cluster_node.hpp"
#include "gpucap/core/cap_timeline.hpp"
#include "gpucap/runtime/runner.hpp"
#include "gpucap/sim/catalog.hpp"

namespace gpucap::cli {

class RunClusterNode {
 public:
  // Error(usage) for flags a cluster run cannot take: a cap of its own, a pace other than realtime
  // (the cluster's allocations come in wall-clock time), or an algorithm that needs an offline
  // search or profile per cap (the caps are not known in advance). `min_cap_w`: the cap it starts
  // at (the twin's lowest loaded power).
  static void check(const ClusterNodeFlags& flags, const std::string& algorithm, std::optional<double> pace, bool cap_given);

  // Joins the cluster: the node applies its allocation to `timeline()`, from the start on.
  RunClusterNode(const ClusterNodeFlags& flags, const sim::GpuSpec& gpu, const sim::ModelSpec& model, double min_cap_w);

  [[nodiscard]] std::shared_ptr<const CapTimeline> timeline() const { return timeline_; }
  // The job's trace sink, also telling the node what each window measured.
  [[nodiscard]] runtime::TraceSink observing(runtime::TraceSink inner);

 private:
  std::chrono::steady_clock::time_point start_;
  std::shared_ptr<CapTimeline> timeline_;
  std::unique_ptr<ClusterNode> node_;  // last: leaves the cluster first
};

}  // namespace gpucap::cli
