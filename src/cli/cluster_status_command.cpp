// gpucap cluster status: one consistent read of a cluster (one etcd revision): the budget, the
// leading coordinator, and per node its allocation, the cap in force it acknowledged, and what it
// last reported measuring (power, throughput, SLO attainment) with the report's age.

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <iostream>
#include <map>
#include <optional>

#include "cluster_commands.hpp"
#include "cluster_etcd.hpp"
#include "gpucap/cluster/realtime.hpp"
#include "gpucap/cluster/schema.hpp"

namespace gpucap::cli {
namespace {

struct StatusFlags {
  EtcdFlags etcd;
  bool json = false;
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
  const auto root = budget_key.substr(0, budget_key.size() - std::string_view("budget").size());
  const auto all = store.get_prefix(root);
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
}

void run_status(const StatusFlags& f) {
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
  return {cmd, [flags] { run_status(*flags); }};
}

}  // namespace gpucap::cli
