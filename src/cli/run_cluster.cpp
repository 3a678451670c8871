#include "run_cluster.hpp"

#include <fmt/format.h>

#include <cmath>

#include "gpucap/cluster/node_curves.hpp"
#include "gpucap/cluster/twin_curves.hpp"
#include "gpucap/control/registry.hpp"
#include "gpucap/core/error.hpp"

namespace gpucap::cli {
namespace {

// A run has no latency SLO: every batch size counts (a batch may take up to a minute).
constexpr double kRunLatencyBoundS = 120.0;

}  // namespace

void RunClusterNode::check(const ClusterNodeFlags& flags, const std::string& algorithm, std::optional<double> pace,
                           bool cap_given) {
  check_cluster_node_flags(flags);
  if (!flags.enabled()) return;
  if (cap_given) {
    throw usage_error("with --cluster-etcd the cluster's coordinator sets the cap: --power-cap and --cap-schedule do "
                      "not go with it");
  }
  if (pace != 1.0) throw usage_error("--cluster-etcd on the twin needs --pace realtime (allocations come in wall-clock time)");
  if (control::needs_profile(algorithm) || control::needs_offline_search(algorithm) ||
      control::needs_mps_planning(algorithm)) {
    throw usage_error(fmt::format("{} searches or profiles each cap before the run; a cluster's caps are not known in "
                                  "advance: use an online controller (batchsizer, batchdvfs, dvfs, clipper, ...)",
                                  algorithm));
  }
}

RunClusterNode::RunClusterNode(const ClusterNodeFlags& flags, const sim::GpuSpec& gpu, const sim::ModelSpec& model,
                               double min_cap_w)
    : start_(std::chrono::steady_clock::now()),
      timeline_(std::make_shared<CapTimeline>(CapSchedule::constant(min_cap_w))) {
  cluster::TwinCurveOptions options;
  options.slo_s = 2.0 * kRunLatencyBoundS;
  const auto capacity = cluster::twin_capacity(gpu, model, options);
  if (!capacity) throw usage_error(fmt::format("{} cannot run on the {}: it cannot join a cluster", model.id, gpu.name));
  ClusterNodeSetup setup;
  setup.capacity = cluster::twin_capacity_curve(*capacity, min_cap_w);
  setup.gpu = gpu.id;
  setup.model = model.id;
  setup.simulated = true;
  setup.program = "run";
  setup.apply_cap = [this](double cap_w) {
    timeline_->set(std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count(), cap_w);
  };
  node_ = std::make_unique<ClusterNode>(flags, std::move(setup));
}

runtime::TraceSink RunClusterNode::observing(runtime::TraceSink inner) {
  return [this, inner = std::move(inner)](const runtime::TraceRow& row) {
    node_->observe_figures(row.throughput_img_s, 1.0, row.window_max_w, std::nullopt);
    if (inner) inner(row);
  };
}

}  // namespace gpucap::cli
