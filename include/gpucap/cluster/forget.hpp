#pragma once
// Forgetting a lost node: an operator's word that a node whose lease expired is gone for good, so
// that the coordinator stops counting the power it may still hold (its safe cap, until it comes
// back; protocol.hpp). `gpucap cluster forget` calls these; the leading coordinator applies the
// request (coordinator.hpp). The request names the incarnation the node was lost with, so a node
// that registered again meanwhile is never forgotten by mistake.

#include <cstdint>
#include <string_view>

#include "gpucap/cluster/schema.hpp"
#include "gpucap/cluster/store.hpp"

namespace gpucap::cluster {

struct ForgetRequest {
  std::int64_t incarnation = 0;  // the one the node was lost with
  double counted_w = 0.0;        // what the coordinator counts for it once the safe-cap timeout passed
  Revision revision = 0;         // of the request's write
  Revision alloc_revision = 0;   // the node's allocation record's, when the request was written
};

// Writes forget/<id> for a node that is lost: it has an allocation but no live registration. In one
// transaction guarded by both (no registration, the allocation unchanged). Error(usage) when the
// node is live, when the cluster counts no such node, or when either changed meanwhile; StoreError
// when the store cannot be reached.
[[nodiscard]] ForgetRequest request_forget(Store& store, const Keys& keys, std::string_view id);

enum class ForgetOutcome {
  pending,   // the request is there: no coordinator has taken it yet, or its node's safe-cap timeout
             // has not passed
  applied,   // the coordinator erased the request and the node's allocation: it counts 0
  refused,   // the coordinator erased the request but kept the node's allocation (its log says why)
  returned,  // the request is gone and the node has another allocation: it registered again while the
             // request was open (forgotten first or not, it is counted again)
};

// Where the request stands, judged from the request and the allocation record it was made against.
[[nodiscard]] ForgetOutcome forget_outcome(Store& store, const Keys& keys, std::string_view id,
                                           const ForgetRequest& request);

}  // namespace gpucap::cluster
