#include "gpucap/cluster/forget.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <variant>
#include <vector>

namespace gpucap::cluster {

ForgetRequest request_forget(Store& store, const Keys& keys, std::string_view id) {
  check_name(id, "node");
  const auto node_key = keys.node(id);
  const auto alloc_key = keys.alloc(id);
  if (!store.get(node_key).kvs.empty()) {
    throw usage_error(fmt::format(
        "node {} is live (it holds its lease): only a lost node can be forgotten; a node that is stopped leaves "
        "by itself",
        id));
  }
  const auto alloc = store.get(alloc_key);
  if (alloc.kvs.empty()) {
    throw usage_error(fmt::format("the cluster counts no node {} (gpucap cluster status lists them)", id));
  }
  const auto parsed = parse_alloc_record(alloc.kvs.front().value);
  if (const auto* problem = std::get_if<std::string>(&parsed)) {
    throw Error(ErrorCode::invalid_data, fmt::format("the allocation record of node {} cannot be read: {}", id, *problem));
  }
  const auto& record = std::get<AllocRecord>(parsed);
  const std::vector<Compare> unchanged{Compare::absent(node_key),
                                       Compare::modified_at(alloc_key, alloc.kvs.front().mod_revision)};
  const std::vector<Op> then{PutOp{keys.forget(id), to_json(ForgetRecord{record.incarnation}), 0}};
  const auto result = store.txn(unchanged, then);
  if (!result.succeeded) {
    throw usage_error(fmt::format("node {} changed while it was being forgotten (it registered again, or was given a "
                                  "new allocation); nothing was written",
                                  id));
  }
  return {record.incarnation, std::min(record.bound_w, record.safe_cap_w), result.revision, alloc.kvs.front().mod_revision};
}

ForgetOutcome forget_outcome(Store& store, const Keys& keys, std::string_view id, const ForgetRequest& request) {
  if (!store.get(keys.forget(id)).kvs.empty()) return ForgetOutcome::pending;
  const auto alloc = store.get(keys.alloc(id));
  if (alloc.kvs.empty()) return ForgetOutcome::applied;
  return alloc.kvs.front().mod_revision == request.alloc_revision ? ForgetOutcome::refused : ForgetOutcome::returned;
}

}  // namespace gpucap::cluster
