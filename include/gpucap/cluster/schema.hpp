#pragma once
// What the cluster keeps in the store: the keys and the records (JSON), shared by the coordinator,
// the node agents and the tools. Everything lives under /gpucap/<cluster>/:
//
//   budget            {"budget_w": 70000}                      written by the facility (gpucap cluster budget)
//   leader            {"id": "coord-a"}                        under the leader's lease (one coordinator)
//   nodes/<node>      NodeRecord                               under the node's lease: liveness + curve
//   alloc/<node>      {"cap_w": 245.5, "incarnation": 17,      written by the coordinator, in one txn per plan;
//                      "safe_cap_w": 150, "bound_w": 300}     safe cap and the ledger's bound with this write
//                                                             in flight: what a new leader counts after failover
//   ack/<node>        {"incarnation": 17, "revision": 901,     written by the node once the cap is applied
//                      "cap_w": 245.5, "leaving": false}
//   forget/<node>     {"incarnation": 17}                      an operator's word that a lost node is gone for
//                                                             good (gpucap cluster forget); the leader erases it
//                                                             with the node's alloc/ and ack/ keys once applied
//
// A node's incarnation is the id of the lease it registered with: an allocation or acknowledgement
// of another incarnation is stale (a node that restarted, or a duplicate ID) and is ignored. Records
// come from other machines: parse_* never throw on bad content, they say what is wrong.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "gpucap/cluster/curve.hpp"
#include "gpucap/cluster/store.hpp"

namespace gpucap::cluster {

// A cluster or node name: 1-128 characters of [A-Za-z0-9._-]. Error(usage) otherwise.
void check_name(std::string_view name, const char* what);
[[nodiscard]] bool valid_name(std::string_view name);

struct Keys {
  explicit Keys(std::string cluster);  // check_name
  [[nodiscard]] const std::string& root() const { return root_; }  // "/gpucap/<cluster>/": every key below
  [[nodiscard]] std::string budget() const { return root_ + "budget"; }
  [[nodiscard]] std::string leader() const { return root_ + "leader"; }
  [[nodiscard]] std::string nodes_prefix() const { return root_ + "nodes/"; }
  [[nodiscard]] std::string alloc_prefix() const { return root_ + "alloc/"; }
  [[nodiscard]] std::string ack_prefix() const { return root_ + "ack/"; }
  [[nodiscard]] std::string forget_prefix() const { return root_ + "forget/"; }
  [[nodiscard]] std::string node(std::string_view id) const { return nodes_prefix() + std::string(id); }
  [[nodiscard]] std::string alloc(std::string_view id) const { return alloc_prefix() + std::string(id); }
  [[nodiscard]] std::string ack(std::string_view id) const { return ack_prefix() + std::string(id); }
  [[nodiscard]] std::string forget(std::string_view id) const { return forget_prefix() + std::string(id); }
  // The node id of a key under `prefix`, if it is one and a valid name.
  [[nodiscard]] static std::optional<std::string> id_under(std::string_view key, std::string_view prefix);

 private:
  std::string root_;
};

struct NodeRecord {
  std::int64_t incarnation = 0;  // the lease the node registered with
  NodeCurve curve;               // validated by the reader (a broken curve still parses)
  double safe_cap_w = 0.0;       // what it falls to without the store
  double cap_in_force_w = 0.0;   // what it held when it registered (0: not serving yet)
  std::string gpu;               // informational
  std::string model;             // informational
};

struct AllocRecord {
  double cap_w = 0.0;
  std::int64_t incarnation = 0;
  double safe_cap_w = 0.0;  // the node's, copied from its record
  double bound_w = 0.0;     // the most the node may hold while this write is unacknowledged (>= cap_w)
};

struct AckRecord {
  std::int64_t incarnation = 0;
  Revision revision = 0;  // of the allocation applied
  double cap_w = 0.0;     // the cap now in force
  bool leaving = false;   // the node stopped serving and is about to revoke its lease
};

// An operator's request to stop counting a lost node (its lease expired): the incarnation it was
// lost with, so that a node that has registered again since is not forgotten by mistake.
struct ForgetRecord {
  std::int64_t incarnation = 0;
};

template <typename T>
using Parsed = std::variant<T, std::string>;  // the record, or what is wrong with it

[[nodiscard]] std::string to_json(const NodeRecord& record);
[[nodiscard]] std::string to_json(const AllocRecord& record);
[[nodiscard]] std::string to_json(const AckRecord& record);
[[nodiscard]] std::string to_json(const ForgetRecord& record);
[[nodiscard]] std::string budget_json(double budget_w);

[[nodiscard]] Parsed<NodeRecord> parse_node_record(std::string_view text);
[[nodiscard]] Parsed<AllocRecord> parse_alloc_record(std::string_view text);
[[nodiscard]] Parsed<AckRecord> parse_ack_record(std::string_view text);
[[nodiscard]] Parsed<ForgetRecord> parse_forget_record(std::string_view text);
// A budget: finite, >= 0 and at most kMaxBudgetW.
[[nodiscard]] Parsed<double> parse_budget(std::string_view text);

inline constexpr double kMaxBudgetW = 1e9;  // 1 GW: beyond any facility

}  // namespace gpucap::cluster
