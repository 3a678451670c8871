// gpucap cluster status: one consistent read of a cluster (one etcd revision): the budget, the
// leading coordinator, and per node its allocation, the cap in force it acknowledged, and what it
// last reported measuring (power, throughput, SLO attainment) with the report's age; or, with
// --metrics, the same as Prometheus metrics read at each scrape.

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <future>
#include <iostream>
#include <map>
#include <mutex>
#include <optional>

#include "cluster_commands.hpp"
#include "cluster_etcd.hpp"
#include "gpucap/cluster/realtime.hpp"
#include "gpucap/cluster/schema.hpp"
#include "gpucap/core/error.hpp"
#include "gpucap/monitor/exposition.hpp"
#include "gpucap/service/bso_server.hpp"
#include "gpucap/service/metrics_server.hpp"

namespace gpucap::cli {
namespace {

struct StatusFlags {
  EtcdFlags etcd;
  bool json = false;
  std::optional<std::string> metrics;  // serve the cluster's figures at HOST:PORT/metrics
};

struct NodeView {
  bool registered = false;  // nodes/<id> exists: its lease is alive
  std::string problem;      // a record that does not parse
  std::optional<cluster::NodeRecord> record;
  std::optional<cluster::AllocRecord> alloc;
  std::optional<cluster::AckRecord> ack;
  std::optional<cluster::NodeReport> report;
};

struct ClusterView {
  std::optional<double> budget_w;
  std::string leader;
  std::map<std::string, NodeView> nodes;  // sorted by id
  cluster::Revision revision = 0;
};

template <typename T>
void take(const cluster::Parsed<T>& parsed, std::optional<T>& into, std::string& problem, const char* what) {
  if (const auto* record = std::get_if<T>(&parsed)) {
    into = *record;
  } else {
    problem += fmt::format("{}{}: {}", problem.empty() ? "" : "; ", what, std::get<std::string>(parsed));
  }
}

// A key under nodes/, alloc/, ack/ or status/: into that node's view. Other keys are left alone.
void read_node_key(const cluster::KeyValue& kv, const cluster::Keys& keys, const std::string& status_prefix, ClusterView& view) {
  if (const auto id = cluster::Keys::id_under(kv.key, keys.nodes_prefix())) {
    auto& node = view.nodes[*id];
    node.registered = true;
    take(cluster::parse_node_record(kv.value), node.record, node.problem, "record");
  } else if (const auto alloc_id = cluster::Keys::id_under(kv.key, keys.alloc_prefix())) {
    take(cluster::parse_alloc_record(kv.value), view.nodes[*alloc_id].alloc, view.nodes[*alloc_id].problem, "allocation");
  } else if (const auto ack_id = cluster::Keys::id_under(kv.key, keys.ack_prefix())) {
    take(cluster::parse_ack_record(kv.value), view.nodes[*ack_id].ack, view.nodes[*ack_id].problem, "acknowledgement");
  } else if (const auto report_id = cluster::Keys::id_under(kv.key, status_prefix)) {
    take(cluster::parse_node_report(kv.value), view.nodes[*report_id].report, view.nodes[*report_id].problem, "report");
  }
}

ClusterView read_cluster(cluster::Store& store, const cluster::Keys& keys) {
  const auto budget_key = keys.budget();
  const auto all = store.get_prefix(keys.root());
  ClusterView view;
  view.revision = all.revision;
  const auto status_prefix = cluster::report_prefix(keys);
  for (const auto& kv : all.kvs) {
    if (kv.key == budget_key) {
      const auto parsed = cluster::parse_budget(kv.value);
      if (const auto* watts = std::get_if<double>(&parsed)) view.budget_w = *watts;
    } else if (kv.key == keys.leader()) {
      const auto leader = nlohmann::json::parse(kv.value, nullptr, false);
      view.leader = leader.is_object() && leader.contains("id") && leader.at("id").is_string()
                        ? leader.at("id").get<std::string>()
                        : "(unreadable record)";
    } else {
      read_node_key(kv, keys, status_prefix, view);
    }
  }
  return view;
}

nlohmann::json number_or_null(std::optional<double> value) {
  return value && std::isfinite(*value) ? nlohmann::json(*value) : nlohmann::json();
}

// The cap in force: what the node last acknowledged (of its current incarnation), else what it
// reports.
std::optional<double> cap_in_force(const NodeView& node) {
  if (node.ack && node.record && node.ack->incarnation == node.record->incarnation) return node.ack->cap_w;
  if (node.report) return node.report->cap_w;
  if (node.record) return node.record->cap_in_force_w;
  return std::nullopt;
}

std::optional<double> age_s(const NodeView& node, double now_unix_s) {
  if (!node.report) return std::nullopt;
  return std::max(0.0, now_unix_s - node.report->unix_s);
}

nlohmann::json to_json(const ClusterView& view, const std::string& cluster_name) {
  const double now = cluster::unix_now_s();
  double allocated_w = 0.0;
  double measured_w = 0.0;
  nlohmann::json nodes = nlohmann::json::array();
  for (const auto& [id, node] : view.nodes) {
    if (node.alloc && node.registered) allocated_w += node.alloc->cap_w;
    const auto power = node.report ? std::optional(node.report->power_w) : std::nullopt;
    if (power && std::isfinite(*power)) measured_w += *power;
    nlohmann::json entry{{"id", id},
                         {"alive", node.registered},
                         {"cap_w", number_or_null(cap_in_force(node))},
                         {"allocation_w", number_or_null(node.alloc ? std::optional(node.alloc->cap_w) : std::nullopt)},
                         {"power_w", number_or_null(power)},
                         {"throughput", number_or_null(node.report ? std::optional(node.report->throughput_rps) : std::nullopt)},
                         {"slo_attainment", number_or_null(node.report ? std::optional(node.report->slo_attainment) : std::nullopt)},
                         {"age_s", number_or_null(age_s(node, now))},
                         {"gpu", node.record ? node.record->gpu : std::string()},
                         {"model", node.record ? node.record->model : std::string()},
                         {"simulated", node.report && node.report->simulated}};
    if (node.record) entry["priority"] = node.record->curve.priority;
    if (!node.problem.empty()) entry["problem"] = node.problem;
    nodes.push_back(entry);
  }
  return {{"cluster", cluster_name},     {"budget_w", number_or_null(view.budget_w)},
          {"leader", view.leader.empty() ? nlohmann::json() : nlohmann::json(view.leader)},
          {"allocated_w", allocated_w}, {"measured_power_w", measured_w},
          {"nodes", nodes},             {"revision", view.revision}};
}

std::string cell(const nlohmann::json& value, const char* format) {
  return value.is_number() ? fmt::format(fmt::runtime(format), value.get<double>()) : "-";
}

void print_table(const nlohmann::json& status) {
  fmt::print("cluster {}: budget {}, allocated {:.1f} W, measured {:.1f} W, leader {}\n", status["cluster"].get<std::string>(),
             cell(status["budget_w"], "{:g} W"), status["allocated_w"].get<double>(),
             status["measured_power_w"].get<double>(), status["leader"].is_null() ? "none" : status["leader"].get<std::string>());
  fmt::print("{:<16} {:<10} {:<16} {:>9} {:>9} {:>9} {:>10} {:>7} {:>7}\n", "node", "gpu", "model", "alloc W", "cap W",
             "power W", "req/s", "SLO %", "age s");
  for (const auto& node : status["nodes"]) {
    auto id = node["id"].get<std::string>();
    if (!node["alive"].get<bool>()) id += " (gone)";
    fmt::print("{:<16} {:<10} {:<16} {:>9} {:>9} {:>9} {:>10} {:>7} {:>7}{}\n", id, node["gpu"].get<std::string>(),
               node["model"].get<std::string>(), cell(node["allocation_w"], "{:.1f}"), cell(node["cap_w"], "{:.1f}"),
               cell(node["power_w"], "{:.1f}"), cell(node["throughput"], "{:.1f}"),
               node["slo_attainment"].is_number() ? fmt::format("{:.1f}", 100.0 * node["slo_attainment"].get<double>()) : "-",
               cell(node["age_s"], "{:.1f}"), node["simulated"].get<bool>() ? "  (simulated)" : "");
    if (node.contains("problem")) fmt::print("  {}: {}\n", node["id"].get<std::string>(), node["problem"].get<std::string>());
  }
  const auto& nodes = status["nodes"];
  if (std::any_of(nodes.begin(), nodes.end(), [](const nlohmann::json& node) { return !node["alive"].get<bool>(); })) {
    fmt::print("a gone node stays counted (at most at its safe cap) until it comes back; one that is off for good: "
               "gpucap cluster forget --node ID\n");
  }
}

void declare_cluster_metrics(monitor::MetricsRegistry& registry) {
  using monitor::MetricType;
  registry.declare("gpucap_cluster_up", MetricType::gauge, "1 when etcd answered this scrape's read, else 0");
  registry.declare("gpucap_cluster_budget_watts", MetricType::gauge, "The cluster's power budget");
  registry.declare("gpucap_cluster_allocated_watts", MetricType::gauge, "The sum of the live nodes' allocations");
  registry.declare("gpucap_cluster_measured_power_watts", MetricType::gauge,
                   "The sum of the power the nodes last reported (each its last window's highest sample)");
  registry.declare("gpucap_cluster_nodes", MetricType::gauge, "Nodes with a record in etcd, alive or gone");
  registry.declare("gpucap_cluster_leader", MetricType::gauge, "1 for the coordinator that leads");
  registry.declare("gpucap_cluster_node_allocation_watts", MetricType::gauge, "A node's allocation");
  registry.declare("gpucap_cluster_node_cap_watts", MetricType::gauge, "The cap a node acknowledged (in force)");
  registry.declare("gpucap_cluster_node_power_watts", MetricType::gauge, "A node's last reported power");
  registry.declare("gpucap_cluster_node_throughput", MetricType::gauge, "A node's last reported answers per second");
  registry.declare("gpucap_cluster_node_slo_attainment", MetricType::gauge, "A node's last reported share within the SLO");
  registry.declare("gpucap_cluster_node_report_age_seconds", MetricType::gauge, "Seconds since a node's last report");
}

// One scrape: a fresh registry from one read of the cluster (etcd unreachable: up 0 only).
std::string render_cluster_metrics(cluster::Store& store, const cluster::Keys& keys, const std::string& name) {
  monitor::MetricsRegistry registry;
  declare_cluster_metrics(registry);
  const monitor::Labels cluster_label{{"cluster", name}};
  nlohmann::json status;
  try {
    status = to_json(read_cluster(store, keys), name);
  } catch (const cluster::StoreError&) {
    registry.set("gpucap_cluster_up", cluster_label, 0.0);
    return registry.render();
  }
  registry.set("gpucap_cluster_up", cluster_label, 1.0);
  if (status["budget_w"].is_number()) registry.set("gpucap_cluster_budget_watts", cluster_label, status["budget_w"].get<double>());
  registry.set("gpucap_cluster_allocated_watts", cluster_label, status["allocated_w"].get<double>());
  registry.set("gpucap_cluster_measured_power_watts", cluster_label, status["measured_power_w"].get<double>());
  if (status["leader"].is_string()) {
    registry.set("gpucap_cluster_leader", {{"cluster", name}, {"id", status["leader"].get<std::string>()}}, 1.0);
  }
  std::map<std::string, double> by_state{{"alive", 0.0}, {"gone", 0.0}};
  const auto number = [](const nlohmann::json& value) { return value.is_number() ? value.get<double>() : std::nan(""); };
  for (const auto& node : status["nodes"]) {
    by_state[node["alive"].get<bool>() ? "alive" : "gone"] += 1.0;
    const monitor::Labels labels{{"cluster", name},
                                 {"node", node["id"].get<std::string>()},
                                 {"gpu", node["gpu"].get<std::string>()},
                                 {"model", node["model"].get<std::string>()}};
    registry.set_if_known("gpucap_cluster_node_allocation_watts", labels, number(node["allocation_w"]));
    registry.set_if_known("gpucap_cluster_node_cap_watts", labels, number(node["cap_w"]));
    registry.set_if_known("gpucap_cluster_node_power_watts", labels, number(node["power_w"]));
    registry.set_if_known("gpucap_cluster_node_throughput", labels, number(node["throughput"]));
    registry.set_if_known("gpucap_cluster_node_slo_attainment", labels, number(node["slo_attainment"]));
    registry.set_if_known("gpucap_cluster_node_report_age_seconds", labels, number(node["age_s"]));
  }
  for (const auto& [state, count] : by_state) registry.set("gpucap_cluster_nodes", {{"cluster", name}, {"state", state}}, count);
  return registry.render();
}

// --metrics: serves the cluster's figures, read from etcd at each scrape, until SIGINT/SIGTERM.
void serve_cluster_metrics(const StatusFlags& f) {
  const auto [host, port] = service::parse_listen_address(*f.metrics, "--metrics", "127.0.0.1:9402");
  const cluster::Keys keys(f.etcd.cluster);
  auto store = connect_etcd(f.etcd);
  // The signals are taken before any thread starts, so that every thread inherits their mask.
  std::promise<void> stopped;
  StopSignal stop([&stopped](int) { stopped.set_value(); });
  std::mutex store_mutex;  // one read at a time
  service::MetricsServer server(host, port, [&] {
    std::lock_guard lock(store_mutex);
    return render_cluster_metrics(*store, keys, f.etcd.cluster);
  });
  (void)server.start();
  fmt::print("gpucap cluster status: the metrics of cluster {} at {}\n  stop with Ctrl-C or SIGTERM\n", f.etcd.cluster,
             server.url());
  std::fflush(stdout);
  stopped.get_future().wait();
  server.stop();
}

void run_status(const StatusFlags& f) {
  if (f.metrics) {
    if (f.json) throw usage_error("--json prints the status once; --metrics serves it: give one of them");
    serve_cluster_metrics(f);
    return;
  }
  const cluster::Keys keys(f.etcd.cluster);
  auto store = connect_etcd(f.etcd);
  const auto status = to_json(read_cluster(*store, keys), f.etcd.cluster);
  if (f.json) {
    std::cout << status.dump(2) << "\n";
  } else {
    print_table(status);
  }
}

}  // namespace

Command add_cluster_status_command(CLI::App& cluster, const GlobalOptions& /*global*/) {
  auto flags = std::make_shared<StatusFlags>();
  auto* cmd = cluster.add_subcommand("status", "A cluster's budget, leader and nodes (cap, power, throughput, SLO, age)");
  add_etcd_flags(*cmd, flags->etcd);
  cmd->add_flag("--json", flags->json, "Print JSON");
  cmd->add_option("--metrics", flags->metrics,
                  "Serve the cluster's figures (budget, allocated, measured power, nodes, per node cap/power/throughput) "
                  "as Prometheus metrics at HOST:PORT/metrics, read from etcd at each scrape, until Ctrl-C");
  return {cmd, [flags] { run_status(*flags); }};
}

}  // namespace gpucap::cli
