#pragma once
// `gpucap cluster simulate`: a cluster of twin nodes in virtual time, driven by the same allocator,
// protocol, coordinator and node agent code as the real cluster, with etcd replaced by MemoryStore.
//
// The scenario (deterministic from the seed, the same for every policy):
//  - nodes: a GPU drawn from the catalogue (or a given list) and an inference model that GPU can
//    serve within the SLO; the node's capacity under each cap comes from the twin (twin_curves.hpp),
//    computed once per (GPU, model) pair;
//  - load: each node's demand, as a fraction of its capacity at its TDP, is log-uniform in
//    [demand_min, demand_max] and jumps to a new draw at exponential intervals; the node notices a
//    change demand_detect_s later and publishes its new curve. A node's good throughput under cap c
//    is min(capacity(c), demand) — divided by its model's unit, the geometric mean over the GPUs
//    that serve the model of their capacity at TDP, so that throughput adds up across models and a
//    faster GPU's requests still count for more ("TDP-equivalents");
//  - budget: a fraction of the initial nodes' TDPs (or watts), with optional steps; a decrease is
//    announced notice_s before it is enforced (the coordinator acts at once; violations are counted
//    against the budget in force);
//  - churn: nodes that join (start at 0 W and register), leave gracefully, die (their GPUs stop at
//    once; their leases expire), lose the store for a while (a partition: they keep their cap, fall
//    to their safe cap after the timeout, reconnect), and publish a broken curve for a while;
//  - delays: each node's watch delay and its actuator's apply time are drawn once per node.
// Every policy runs the whole scenario on a store and cluster of its own. The offline optimum is an
// upper bound computed at every sample from the true curves, the live nodes and the budget in force,
// with no protocol delay (allocator.hpp's hull_upper_bound).

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpucap/cluster/allocator.hpp"
#include "gpucap/cluster/protocol.hpp"
#include "gpucap/cluster/twin_curves.hpp"
#include "gpucap/sim/catalog.hpp"

namespace gpucap::cluster {

struct BudgetStep {
  double at_s = 0.0;
  double value = 0.0;
  bool fraction = true;  // value is a fraction of the initial nodes' TDPs; false: watts
};

struct SimulateOptions {
  std::size_t nodes = 1000;
  double budget = 0.7;  // the starting budget
  bool budget_fraction = true;
  std::vector<BudgetStep> budget_steps;
  std::uint64_t seed = 1;
  double duration_s = 600.0;
  double warmup_s = 10.0;  // not in the throughput figures: the cluster starts from nothing
  double sample_s = 1.0;
  double notice_s = 10.0;
  Policy policy = Policy::gpucap;  // the headline figure; every policy runs
  ProtocolTiming timing;
  double period_s = 1.0;
  double join_fraction = 0.05;       // of the initial node count, joining during the run
  double leave_fraction = 0.03;      // of the initial nodes, leaving gracefully
  double death_fraction = 0.02;      // dying
  double partition_fraction = 0.03;  // losing the store for 1 s to 3 × (TTL + timeout)
  double broken_curve_fraction = 0.0;
  double demand_min = 0.15;
  double demand_max = 1.3;
  double demand_change_mean_s = 120.0;
  double demand_detect_s = 2.0;
  double watch_delay_min_s = 0.005;
  double watch_delay_max_s = 0.05;
  double apply_min_s = 0.02;
  double apply_max_s = 0.2;
  std::vector<std::string> gpus;  // empty: every GPU of the catalogue
  TwinCurveOptions curves;
  int threads = 2;
  bool timeline = false;  // keep per-sample figures (plots)
};

// How the options a user sets are named in an error: the CLI's flags by default; a matrix file
// names its fields.
struct OptionNames {
  const char* nodes = "--nodes";
  const char* budget = "--budget";
  const char* duration = "--duration";
  const char* load = "--load";
  const char* threads = "--threads";
  const char* budget_step = "--budget-step";
};

// Error(usage) naming the first bad option.
void validate(const SimulateOptions& options, const OptionNames& names = {});

struct TimelinePoint {
  double t_s = 0.0;
  double throughput = 0.0;
  double caps_in_force_w = 0.0;
  double budget_w = 0.0;  // in force
};

struct PolicyRun {
  Policy policy = Policy::gpucap;
  double throughput = 0.0;         // mean over the samples after the warm-up (TDP-equivalents)
  double requests_per_s = 0.0;     // the same, in requests/s
  std::size_t budget_violations = 0;  // instants at which the caps in force summed above the budget in force
  double seconds_over_budget = 0.0;
  double max_over_budget_w = 0.0;
  double max_realloc_s = 0.0;      // the longest a node with contact took to hold a re-allocation's target
  double p50_realloc_s = 0.0;
  double p99_realloc_s = 0.0;
  std::size_t realloc_samples = 0;
  std::size_t rounds = 0;
  std::size_t writes = 0;
  std::size_t ignored = 0;         // records and acknowledgements the coordinator ignored (logged)
  std::size_t refused_registrations = 0;
  double max_round_cpu_s = 0.0;    // measured, not deterministic
  double cpu_s = 0.0;              // measured: the CPU time of this policy's whole run
  std::vector<TimelinePoint> timeline;
};

struct SimulateReport {
  SimulateOptions options;
  std::size_t initial_nodes = 0;
  std::size_t joined = 0, left = 0, died = 0, partitioned = 0, broken = 0;
  std::size_t pairs = 0;            // (GPU, model) pairs in use
  double sum_tdp_w = 0.0;           // of the initial nodes
  double budget_w = 0.0;            // at the start
  std::vector<PolicyRun> runs;      // in all_policies() order
  double optimum = 0.0;             // mean hull upper bound over the samples
  std::vector<double> optimum_timeline;
  double wall_s = 0.0;              // measured
  double optimum_cpu_s = 0.0;       // measured: the CPU time of the optimum's timeline

  [[nodiscard]] const PolicyRun& run(Policy policy) const;
};

// Runs the scenario under every policy (options.threads at once). Error(usage) for bad options.
[[nodiscard]] SimulateReport simulate(const sim::Catalog& catalog, const SimulateOptions& options,
                                      const std::function<void(std::string_view)>& log = {});

// The JSON: throughput, baselines, budget_violations, max_realloc_s, nodes, and per-policy
// figures. Deterministic from the seed except the "host" object.
[[nodiscard]] nlohmann::json to_json(const SimulateReport& report);

}  // namespace gpucap::cluster
