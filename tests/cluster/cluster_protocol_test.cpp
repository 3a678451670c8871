// Coordinator and node agents on the in-process store, in virtual time: the protocol end to end
// (lower first, wait for the acknowledgements, then raise), and what it does when the budget drops,
// a node dies or loses the store, the leader dies, or a node sends garbage. Every test checks the
// safety invariant at every cap a node applies: the caps in force never sum above the budget.

#include <gtest/gtest.h>

#include <cmath>

#include <algorithm>

#include "cluster/cluster_harness.hpp"
#include "gpucap/cluster/forget.hpp"
#include "gpucap/cluster/schema.hpp"
#include "support/expect_error.hpp"

namespace gpucap::cluster {
namespace {

using test::curve_for;
using test::fast_timing;
using test::Harness;

// Four nodes of different appetites sharing 800 W (they could use 1,200 W), one coordinator.
struct FourNodes {
  Harness h;
  Harness::Coord* leader = nullptr;
  explicit FourNodes(double budget_w = 800.0) {
    leader = &h.add_coordinator("coord-a");
    h.set_budget(budget_w);
    for (int i = 0; i < 4; ++i) h.add_node("n" + std::to_string(i), curve_for(0.5 + 0.5 * i), 100.0, 0.02 + 0.03 * i);
  }
  Harness::Node& node(std::size_t i) { return *h.nodes()[i]; }
  // At 5 s, node 3 dies; returns it once its lease and safe-cap timeout have passed (it counts at
  // its safe cap).
  Harness::Node& kill_node3_and_wait_out() {
    h.run_until(5.0);
    auto& dead = node(3);
    h.kill(dead);
    const auto t = fast_timing();
    h.run_until(h.now() + t.lease_ttl_s + t.safe_cap_timeout_s + 2.0);
    return dead;
  }
};

double cap_at(const Harness::Node& node, double t_s) {
  double cap = 0.0;
  for (const auto& [when, c] : node.history) {
    if (when > t_s) break;
    cap = c;
  }
  return cap;
}

double max_cap_between(const Harness::Node& node, double from_s, double to_s) {
  double cap = cap_at(node, from_s);
  for (const auto& [when, c] : node.history) {
    if (when > from_s && when <= to_s) cap = std::max(cap, c);
  }
  return cap;
}

TEST(ClusterProtocol, NodesRegisterAndSettleOnTheAllocatorsCapsWithinTheBudget) {
  FourNodes c;
  c.h.run_until(5.0);
  EXPECT_TRUE(c.leader->coordinator->leader());
  EXPECT_TRUE(c.leader->coordinator->ledger().settled());
  EXPECT_LE(c.h.sum_caps_w(), 800.0);
  EXPECT_GE(c.h.sum_caps_w(), 800.0 - 4.0);  // 1-W quantum per node
  // The hungriest node gets the most.
  EXPECT_GT(c.node(3).cap_w, c.node(0).cap_w);
  for (std::size_t i = 0; i < 4; ++i) EXPECT_GE(c.node(i).cap_w, 100.0);
  EXPECT_LE(c.h.worst_excess_w(), 0.0);
  EXPECT_EQ(c.h.raises_over_budget(), 0U);
}

TEST(ClusterProtocol, ABudgetDropOf30PercentLowersFirstAndRaisesOnlyWithinTheNewBudget) {
  FourNodes c;
  c.h.run_until(5.0);
  const double dropped_at = c.h.now();
  c.h.set_budget(560.0, 1.0);  // announced now, enforced after 1 s of notice
  // At the same moment the lightest node (the quickest to apply) gets busy: it is raised while
  // the others are lowered, which is safe only if it waits for their acknowledgements.
  const double n0_before = c.node(0).cap_w;
  c.node(0).agent->set_curve(curve_for(4.0));
  c.h.run_until(10.0);
  EXPECT_LE(c.h.sum_caps_w(), 560.0);
  EXPECT_GE(c.h.sum_caps_w(), 560.0 - 4.0);
  EXPECT_GT(c.node(0).cap_w, n0_before + 20.0) << "the test needs a raise during the drop";
  EXPECT_EQ(c.h.raises_over_budget(), 0U) << "a node was raised while the sum was above the new budget";
  EXPECT_LE(c.h.worst_excess_w(), 0.0);
  // Every lowered node was at its new cap well within the notice.
  for (std::size_t i = 1; i < 4; ++i) {
    auto* node = c.h.nodes()[i].get();
    double lowered_by = 0.0;
    for (const auto& [when, cap] : node->history) {
      if (when > dropped_at && cap <= node->cap_w + 1e-9) {
        lowered_by = when;
        break;
      }
    }
    EXPECT_LT(lowered_by - dropped_at, 1.0) << node->id;
  }
  // And back up: a raise of the budget is used.
  c.h.set_budget(800.0);
  c.h.run_until(15.0);
  EXPECT_GE(c.h.sum_caps_w(), 800.0 - 4.0);
  EXPECT_LE(c.h.worst_excess_w(), 0.0);
}

TEST(ClusterProtocol, ADeadNodesPowerIsHandedOnOnlyAfterItsLeaseAndTheSafeCapTimeout) {
  FourNodes c;
  c.h.run_until(5.0);
  auto& victim = c.node(3);
  const double held = victim.cap_w;
  const double others_before = c.h.sum_caps_except_w(victim);
  const double died_at = c.h.now();
  c.h.kill(victim);
  const auto t = fast_timing();
  // Its lease was last renewed at most one keep-alive period before it died.
  const double earliest_reclaim = died_at - t.keepalive_period_s + t.lease_ttl_s + t.safe_cap_timeout_s;
  double others_max = 0.0;
  while (c.h.now() < earliest_reclaim - 0.02) {
    c.h.run_until(c.h.now() + 0.01);
    others_max = std::max(others_max, c.h.sum_caps_except_w(victim));
  }
  EXPECT_LE(others_max, 800.0 - held + 1e-6) << "the dead node's power went out before its lease and timeout";
  EXPECT_LE(others_max, others_before + 1e-6);
  c.h.run_until(died_at + t.lease_ttl_s + t.safe_cap_timeout_s + 2.0);
  // Reclaimed, less its safe cap (it may be alive, cut off, at its safe cap).
  EXPECT_GT(c.h.sum_caps_except_w(victim), others_before + 50.0);
  EXPECT_LE(c.h.sum_caps_except_w(victim), 800.0 - 100.0);
  EXPECT_LE(c.h.worst_excess_w(), 0.0);
}

TEST(ClusterProtocol, ANodeThatLosesTheStoreKeepsItsCapNeverRaisesAndFallsToItsSafeCap) {
  FourNodes c;
  c.h.run_until(5.0);
  auto& cut = c.node(3);
  const double held = cut.cap_w;
  ASSERT_GT(held, 150.0);
  const double cut_at = c.h.now();
  c.h.partition(cut, true);
  const auto t = fast_timing();
  // The budget rises meanwhile: the cut-off node must not take any of it.
  c.h.set_budget(1000.0);
  const double outage = 2.0 * (t.lease_ttl_s + t.safe_cap_timeout_s);
  c.h.run_until(cut_at + outage);
  // Kept its cap until its last contact + the timeout, then its safe cap; never above what it held.
  EXPECT_DOUBLE_EQ(cap_at(cut, cut_at + t.safe_cap_timeout_s - t.keepalive_period_s - 0.02), held);
  EXPECT_LE(max_cap_between(cut, cut_at, cut_at + outage), held);
  EXPECT_LE(cap_at(cut, cut_at + t.safe_cap_timeout_s + 0.1), 100.0);
  EXPECT_TRUE(cut.agent->fallen_back());
  // Back in contact: it registers again and is given power again, within the budget.
  c.h.partition(cut, false);
  c.h.run_until(c.h.now() + 5.0);
  EXPECT_TRUE(cut.agent->registered());
  EXPECT_FALSE(cut.agent->fallen_back());
  EXPECT_GT(cut.cap_w, 150.0);
  EXPECT_LE(c.h.sum_caps_w(), 1000.0);
  EXPECT_LE(c.h.worst_excess_w(), 0.0);
  EXPECT_TRUE(c.h.logged("its lease is gone"));
}

TEST(ClusterProtocol, AStandbyCoordinatorTakesOverWhenTheLeaderDies) {
  FourNodes c;
  auto& standby = c.h.add_coordinator("coord-b");
  c.h.run_until(5.0);
  ASSERT_TRUE(c.leader->coordinator->leader());
  EXPECT_FALSE(standby.coordinator->leader());
  const double killed_at = c.h.now();
  c.h.kill(*c.leader);
  const auto t = fast_timing();
  double took_over = -1.0;
  while (c.h.now() < killed_at + 3.0 * t.lease_ttl_s) {
    c.h.run_until(c.h.now() + 0.01);
    if (standby.coordinator->leader()) {
      took_over = c.h.now();
      break;
    }
  }
  ASSERT_GT(took_over, 0.0) << "the standby never took over";
  EXPECT_LE(took_over - killed_at, t.lease_ttl_s + t.lease_ttl_s / 2.0 + 0.1);
  // The new leader works: a 30 % drop is carried out safely.
  c.h.set_budget(560.0, 1.0);
  c.h.run_until(c.h.now() + 5.0);
  EXPECT_LE(c.h.sum_caps_w(), 560.0);
  EXPECT_GE(c.h.sum_caps_w(), 560.0 - 4.0);
  EXPECT_LE(c.h.worst_excess_w(), 0.0);
  EXPECT_EQ(c.h.raises_over_budget(), 0U);
}

TEST(ClusterProtocol, ALeaderBrieflyCutOffRereadsTheStoreAndCarriesOn) {
  FourNodes c;
  c.h.run_until(5.0);
  c.h.partition(*c.leader, true);
  c.h.set_budget(560.0, 1.5);  // written while the leader cannot see it
  c.h.run_until(5.8);          // shorter than its lease
  c.h.partition(*c.leader, false);
  c.h.run_until(9.0);
  EXPECT_TRUE(c.leader->coordinator->leader());
  EXPECT_TRUE(c.h.logged("store error"));
  EXPECT_EQ(c.leader->coordinator->budget_w(), 560.0);  // re-read after the outage
  EXPECT_LE(c.h.sum_caps_w(), 560.0);
  EXPECT_LE(c.h.worst_excess_w(), 0.0);
  EXPECT_EQ(c.h.raises_over_budget(), 0U);
}

TEST(ClusterProtocol, ALeaderCutOffPastItsLeaseStepsDownAndTheStandbyLeads) {
  FourNodes c;
  auto& standby = c.h.add_coordinator("coord-b");
  c.h.run_until(5.0);
  c.h.partition(*c.leader, true);
  c.h.run_until(10.0);  // its lease (2 s) has expired; the standby campaigned
  EXPECT_TRUE(standby.coordinator->leader());
  c.h.partition(*c.leader, false);
  c.h.run_until(12.0);
  EXPECT_FALSE(c.leader->coordinator->leader()) << "two leaders";
  EXPECT_TRUE(c.h.logged("coord-a: coordinator coord-a lost its leadership"));
  c.h.set_budget(560.0, 1.0);
  c.h.run_until(16.0);
  EXPECT_LE(c.h.sum_caps_w(), 560.0);
  EXPECT_GE(c.h.sum_caps_w(), 560.0 - 4.0);
  EXPECT_LE(c.h.worst_excess_w(), 0.0);
  EXPECT_EQ(c.h.raises_over_budget(), 0U);
}

TEST(ClusterProtocol, ADuplicateNodeIdIsRefusedWithALogLine) {
  FourNodes c;
  c.h.run_until(3.0);
  auto& impostor = c.h.add_node("n1", curve_for(3.0));
  c.h.run_until(8.0);
  EXPECT_GE(impostor.agent->refused_registrations(), 1U);
  EXPECT_FALSE(impostor.agent->registered());
  EXPECT_EQ(impostor.cap_w, 0.0);
  EXPECT_TRUE(c.h.logged("n1: the ID is already registered"));
  EXPECT_TRUE(c.node(1).agent->registered());
  EXPECT_LE(c.h.worst_excess_w(), 0.0);
}

TEST(ClusterProtocol, AStaleAcknowledgementIsIgnoredWithALogLine) {
  FourNodes c;
  c.h.run_until(5.0);
  const auto* before = c.leader->coordinator->ledger().find("n2");
  ASSERT_NE(before, nullptr);
  const double bound = before->live_bound_w();
  // An acknowledgement of 0 W from a previous incarnation of n2 (say, before a restart).
  const AckRecord stale{before->incarnation - 1, c.h.store().revision(), 0.0, false};
  (void)c.h.facility().put(PutOp{Keys("test").ack("n2"), to_json(stale), 0});
  c.h.run_until(6.0);
  EXPECT_TRUE(c.h.logged("ignoring a stale acknowledgement of node n2"));
  EXPECT_DOUBLE_EQ(c.leader->coordinator->ledger().find("n2")->live_bound_w(), bound);
  EXPECT_LE(c.h.worst_excess_w(), 0.0);
}

TEST(ClusterProtocol, BrokenCurvesAndGarbageRecordsAreIgnoredWithALogLine) {
  FourNodes c;
  c.h.run_until(5.0);
  // n0 publishes a curve with a NaN: it is held at (at most) its safe cap, the others go on.
  auto broken = curve_for(1.0);
  broken.points[1].throughput = std::nan("");
  c.node(0).agent->set_curve(broken);
  // Garbage under the cluster's keys, and a negative budget.
  (void)c.h.facility().put(PutOp{Keys("test").node("junk"), "{not json", 0});
  (void)c.h.facility().put(PutOp{Keys("test").node("bad name!"), "{}", 0});
  (void)c.h.facility().put(PutOp{Keys("test").budget(), budget_json(-5.0), 0});
  c.h.run_until(8.0);
  EXPECT_TRUE(c.h.logged("node n0 published a broken curve"));
  EXPECT_TRUE(c.h.logged("ignoring node junk: its record cannot be read"));
  EXPECT_TRUE(c.h.logged("not a valid node name"));
  EXPECT_TRUE(c.h.logged("ignoring the budget record: budget -5 W is negative; keeping 800 W"));
  EXPECT_EQ(c.leader->coordinator->budget_w(), 800.0);
  EXPECT_LE(c.node(0).cap_w, 100.0);
  EXPECT_LE(c.h.sum_caps_w(), 800.0);
  EXPECT_GE(c.h.sum_caps_w(), 800.0 - 4.0);  // its power went to the others
  EXPECT_LE(c.h.worst_excess_w(), 0.0);
  // A valid curve again: it is allocated again.
  c.node(0).agent->set_curve(curve_for(1.0));
  c.h.run_until(11.0);
  EXPECT_GT(c.node(0).cap_w, 100.0);
  EXPECT_LE(c.h.worst_excess_w(), 0.0);
}

TEST(ClusterProtocol, AGracefulLeaveHandsItsPowerOnAtOnce) {
  FourNodes c;
  c.h.run_until(5.0);
  auto& leaving = c.node(2);
  const double others_before = c.h.sum_caps_except_w(leaving);
  leaving.agent->leave(c.h.now());
  c.h.run_until(c.h.now() + 1.5);  // well within a lease TTL
  EXPECT_EQ(leaving.cap_w, 0.0);
  EXPECT_GT(c.h.sum_caps_except_w(leaving), others_before + 50.0);
  EXPECT_LE(c.h.sum_caps_w(), 800.0);
  EXPECT_EQ(c.leader->coordinator->ledger().find("n2"), nullptr);
  EXPECT_LE(c.h.worst_excess_w(), 0.0);
}

// An operator forgets a dead node: what it was still counted for (its safe cap: it might only have
// been cut off) goes to the others; a request for a live or unknown node is refused before it is
// written, and one naming another incarnation is erased by the coordinator without effect.
TEST(ClusterProtocol, AForgottenDeadNodesSafeCapGoesToTheOthers) {
  FourNodes c;
  auto& dead = c.kill_node3_and_wait_out();
  const double before_w = c.h.sum_caps_except_w(dead);
  EXPECT_NEAR(before_w, 800.0 - 100.0, 4.0) << "its safe cap stays counted";
  const Keys keys("test");

  gpucap::test::expect_error_from([&] { (void)request_forget(c.h.facility(), keys, "n2"); }, ErrorCode::usage, "is live");
  gpucap::test::expect_error_from([&] { (void)request_forget(c.h.facility(), keys, "n9"); }, ErrorCode::usage, "counts no node n9");
  gpucap::test::expect_error_from([&] { (void)request_forget(c.h.facility(), keys, "bad name!"); }, ErrorCode::usage, "node");
  // A request naming an incarnation the node never had: erased, and the node stays counted.
  const auto* lost = c.leader->coordinator->ledger().find("n3");
  ASSERT_NE(lost, nullptr);
  ASSERT_EQ(lost->state, NodeState::lost);
  ForgetRequest wrong;
  wrong.incarnation = lost->incarnation + 1;
  wrong.alloc_revision = c.h.facility().get(keys.alloc("n3")).kvs.at(0).mod_revision;
  (void)c.h.facility().put(PutOp{keys.forget("n3"), to_json(ForgetRecord{wrong.incarnation}), 0});
  c.h.run_until(c.h.now() + 1.0);
  EXPECT_TRUE(c.h.logged("ignoring the request to forget node n3: it names incarnation"));
  EXPECT_EQ(forget_outcome(c.h.facility(), keys, "n3", wrong), ForgetOutcome::refused);
  EXPECT_NEAR(c.h.sum_caps_except_w(dead), before_w, 1e-6);

  const auto request = request_forget(c.h.facility(), keys, "n3");
  EXPECT_EQ(request.incarnation, lost->incarnation);
  EXPECT_EQ(request.alloc_revision, wrong.alloc_revision);
  EXPECT_DOUBLE_EQ(request.counted_w, 100.0);
  EXPECT_EQ(forget_outcome(c.h.facility(), keys, "n3", request), ForgetOutcome::pending);
  c.h.run_until(c.h.now() + 3.0);
  EXPECT_EQ(forget_outcome(c.h.facility(), keys, "n3", request), ForgetOutcome::applied);
  EXPECT_EQ(c.leader->coordinator->ledger().find("n3"), nullptr);
  EXPECT_EQ(c.leader->coordinator->stats().forgotten, 1U);
  EXPECT_TRUE(c.h.logged("node n3 forgotten at an operator's request"));
  EXPECT_TRUE(c.h.facility().get(keys.ack("n3")).kvs.empty());
  EXPECT_GT(c.h.sum_caps_except_w(dead), before_w + 50.0);
  EXPECT_NEAR(c.h.sum_caps_except_w(dead), 800.0, 4.0);
  EXPECT_LE(c.h.worst_excess_w(), 0.0);
  gpucap::test::expect_error_from([&] { (void)request_forget(c.h.facility(), keys, "n3"); }, ErrorCode::usage, "counts no node n3");
}

// A request made while no coordinator leads waits in the store; the next leader applies it once the
// node's safe-cap timeout has passed, counted from its takeover (it cannot know when the lease
// expired): until then the node may still hold its whole bound, and stays counted at it.
TEST(ClusterProtocol, AForgetRequestedWithoutALeaderIsAppliedByTheNextOne) {
  FourNodes c;
  auto& standby = c.h.add_coordinator("coord-b");
  c.h.run_until(5.0);
  auto& dead = c.node(3);
  c.h.kill(dead);
  const auto t = fast_timing();
  c.h.run_until(c.h.now() + t.lease_ttl_s + 1.0);  // the leader saw the lease expire
  c.h.kill(*c.leader);
  const auto request = request_forget(c.h.facility(), Keys("test"), "n3");
  EXPECT_GT(request.revision, 0);
  const double give_up_s = c.h.now() + 3.0 * t.lease_ttl_s;
  while (!standby.coordinator->leader() && c.h.now() < give_up_s) c.h.run_until(c.h.now() + 0.05);
  ASSERT_TRUE(standby.coordinator->leader());
  EXPECT_TRUE(c.h.logged("coord-b: node n3 will be forgotten when its safe-cap timeout has passed"));
  EXPECT_EQ(forget_outcome(c.h.facility(), Keys("test"), "n3", request), ForgetOutcome::pending);
  ASSERT_NE(standby.coordinator->ledger().find("n3"), nullptr);
  c.h.run_until(c.h.now() + t.safe_cap_timeout_s + 1.0);
  EXPECT_EQ(forget_outcome(c.h.facility(), Keys("test"), "n3", request), ForgetOutcome::applied);
  EXPECT_EQ(standby.coordinator->ledger().find("n3"), nullptr);
  EXPECT_TRUE(c.h.logged("coord-b: node n3 forgotten at an operator's request"));
  EXPECT_FALSE(c.h.logged("ignoring the request to forget node n3")) << "the request read at the takeover came again";
  EXPECT_NEAR(c.h.sum_caps_except_w(dead), 800.0, 4.0);
  EXPECT_LE(c.h.worst_excess_w(), 0.0);
}

// A coordinator that no longer leads (another holds the leader key) forgets nothing: the erase is
// guarded by its leadership, and its ledger is left as it was; it steps down.
TEST(ClusterProtocol, ACoordinatorThatNoLongerLeadsForgetsNothing) {
  FourNodes c;
  (void)c.kill_node3_and_wait_out();
  const Keys keys("test");
  // Another coordinator's key, as after a takeover this one has not noticed yet.
  ASSERT_TRUE(c.h.facility().txn({}, std::vector<Op>{EraseOp{keys.leader()}}).succeeded);
  (void)c.h.facility().put(PutOp{keys.leader(), R"({"id": "coord-x"})", 0});
  const auto request = request_forget(c.h.facility(), keys, "n3");
  c.h.run_until(c.h.now() + 2.0);
  EXPECT_FALSE(c.leader->coordinator->leader());
  EXPECT_EQ(forget_outcome(c.h.facility(), keys, "n3", request), ForgetOutcome::pending);
  EXPECT_FALSE(c.h.facility().get(keys.alloc("n3")).kvs.empty());
  EXPECT_FALSE(c.h.logged("node n3 forgotten at an operator's request"));
}

}  // namespace
}  // namespace gpucap::cluster
