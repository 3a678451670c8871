// What the cluster's processes read from etcd, written by other nodes (cluster/schema,
// cluster/realtime): node records with their power curves (parse_node_record, a hand-written SAX
// reader), allocations, acknowledgements (and, from the same text, an operator's forget request),
// the budget and the nodes' status reports. A record that parses is written back (to_json) and must
// read back the same. The node records whose curves validate are then allocated the budget as the
// coordinator does, by every policy.
// Input: records separated by "\n", each a byte (the kind: node, alloc, ack, budget, report)
// and the value's text.

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "fuzz_support.hpp"
#include "gpucap/cluster/allocator.hpp"
#include "gpucap/cluster/curve.hpp"
#include "gpucap/cluster/realtime.hpp"
#include "gpucap/cluster/schema.hpp"

using gpucap::fuzz::check;
using gpucap::fuzz::refusals_only;
namespace cluster = gpucap::cluster;

namespace {

template <typename T, typename Parse>
const T* round_trip(std::string_view text, Parse parse, const char* what) {
  static T kept;
  const auto parsed = parse(text);
  if (!std::holds_alternative<T>(parsed)) {
    check(!std::get<std::string>(parsed).empty(), std::string("a refused ") + what + " without a reason");
    return nullptr;
  }
  kept = std::get<T>(parsed);
  const auto written = cluster::to_json(kept);
  const auto again = parse(written);
  check(std::holds_alternative<T>(again), std::string("a ") + what + " written back does not parse: " + written);
  check(cluster::to_json(std::get<T>(again)) == written, std::string("a ") + what + " written back reads differently: " + written);
  return &kept;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  gpucap::fuzz::Input input(data, size);
  std::vector<std::unique_ptr<cluster::PreparedCurve>> curves;
  double budget_w = 500.0;
  for (int record = 0; record < 32 && !input.empty(); ++record) {
    const unsigned kind = input.choice(5);
    const auto text = input.until("\n");
    switch (kind) {
      case 0:
        if (const auto* node = round_trip<cluster::NodeRecord>(text, cluster::parse_node_record, "node record")) {
          check(nlohmann::json::parse(text, nullptr, false).is_object(), "a node record that is not a JSON object parsed");
          check(node->safe_cap_w >= 0.0 && node->cap_in_force_w >= 0.0, "a node record with a negative cap parsed");
          refusals_only([&] { curves.push_back(std::make_unique<cluster::PreparedCurve>(node->curve)); });
        }
        break;
      case 1:
        if (const auto* alloc = round_trip<cluster::AllocRecord>(text, cluster::parse_alloc_record, "allocation")) {
          check(alloc->cap_w >= 0.0 && alloc->bound_w >= alloc->cap_w, "an allocation out of range parsed");
        }
        break;
      case 2:
        if (const auto* ack = round_trip<cluster::AckRecord>(text, cluster::parse_ack_record, "acknowledgement")) {
          check(ack->cap_w >= 0.0, "an acknowledgement with a negative cap parsed");
        }
        (void)round_trip<cluster::ForgetRecord>(text, cluster::parse_forget_record, "forget request");
        break;
      case 3: {
        const auto parsed = cluster::parse_budget(text);
        if (const auto* budget = std::get_if<double>(&parsed)) {
          check(std::isfinite(*budget) && *budget >= 0.0 && *budget <= cluster::kMaxBudgetW, "a budget out of range parsed");
          const auto again = cluster::parse_budget(cluster::budget_json(*budget));
          check(std::holds_alternative<double>(again) && std::get<double>(again) == *budget, "a budget does not round-trip");
          budget_w = *budget;
        }
        break;
      }
      default: {
        const auto parsed = cluster::parse_node_report(text);
        if (const auto* report = std::get_if<cluster::NodeReport>(&parsed)) {
          const auto again = cluster::parse_node_report(cluster::to_json(*report));
          check(std::holds_alternative<cluster::NodeReport>(again), "a node report written back does not parse");
          check(cluster::to_json(std::get<cluster::NodeReport>(again)) == cluster::to_json(*report), "a node report does not round-trip");
        }
        break;
      }
    }
  }
  if (curves.empty()) return 0;
  std::vector<const cluster::PreparedCurve*> nodes;
  for (const auto& curve : curves) nodes.push_back(curve.get());
  for (const auto policy : cluster::all_policies()) {
    refusals_only([&] {
      const auto allocation = cluster::allocate(budget_w, nodes, policy);
      check(allocation.caps_w.size() == nodes.size(), "an allocation without one cap per node");
      double sum = 0.0;
      for (std::size_t i = 0; i < nodes.size(); ++i) {
        const double cap = allocation.caps_w[i];
        check(cap == 0.0 || (cap >= nodes[i]->min_cap_w() && cap <= nodes[i]->max_cap_w()),
              "a cap outside its node's range: " + std::string(cluster::to_string(policy)));
        sum += cap;
      }
      check(sum <= budget_w * (1.0 + 1e-12) + 1e-9, "caps that sum above the budget: " + std::string(cluster::to_string(policy)));
    });
  }
  return 0;
}
