// The safety protocol's two state machines by hand (protocol.hpp): the coordinator's Ledger and a
// node's NodeSafety, with times as arguments.

#include "gpucap/cluster/protocol.hpp"

#include <gtest/gtest.h>

#include <cmath>

#include <algorithm>

#include "support/expect_error.hpp"

namespace gpucap::cluster {
namespace {

ProtocolTiming timing() {
  ProtocolTiming t;
  t.lease_ttl_s = 10.0;
  t.keepalive_period_s = 3.0;
  t.safe_cap_timeout_s = 5.0;
  return t;
}

double planned_cap(const std::vector<AllocationWrite>& writes, const std::string& id) {
  for (const auto& w : writes) {
    if (w.id == id) return w.cap_w;
  }
  return -1.0;
}

TEST(ProtocolTiming, TheTimingArgumentIsChecked) {
  EXPECT_NO_THROW(timing().validate());
  auto t = timing();
  t.keepalive_period_s = 6.0;
  test::expect_error_from([&] { t.validate(); }, ErrorCode::usage, "at most half the lease TTL");
  t = timing();
  t.max_apply_s = 11.0;
  test::expect_error_from([&] { t.validate(); }, ErrorCode::usage, "lease TTL 10 s is too short");
  t = timing();
  t.safe_cap_timeout_s = 0.0;
  test::expect_error_from([&] { t.validate(); }, ErrorCode::usage, "safe-cap timeout (s) 0 must be a positive number");
  t = timing();
  t.max_clock_drift = 1.0;
  test::expect_error_from([&] { t.validate(); }, ErrorCode::usage, "clock drift 1 must be in [0, 1)");
  // A lease the store would refuse at every try: the coordinator would never lead.
  t = timing();
  t.lease_ttl_s = 1e12;
  t.keepalive_period_s = 1.0;
  test::expect_error_from([&] { t.validate(); }, ErrorCode::usage, "must be at most 1e+06 s (the longest lease etcd grants");
  t = timing();
  t.lease_ttl_s = kMaxLeaseTtlS;
  EXPECT_NO_THROW(t.validate());
}

TEST(Ledger, LowersGoOutAtOnceAndRaisesWaitForTheirAcknowledgements) {
  Ledger ledger(timing());
  ledger.register_node("a", 1, 300.0, 100.0);
  ledger.register_node("b", 2, 300.0, 100.0);
  EXPECT_DOUBLE_EQ(ledger.committed_w(0.0), 600.0);
  // Move 100 W from a to b under a 600-W budget.
  ledger.set_target("a", 200.0);
  ledger.set_target("b", 400.0);
  auto writes = ledger.plan(600.0, 0.0);
  ASSERT_EQ(writes.size(), 1U);  // only the lower: b's raise does not fit above a's bound yet
  EXPECT_EQ(writes[0].id, "a");
  ledger.issued(writes, 10);
  EXPECT_DOUBLE_EQ(ledger.committed_w(0.0), 600.0);  // a still counts 300 until it acknowledges
  EXPECT_TRUE(ledger.plan(600.0, 0.0).empty());
  EXPECT_EQ(ledger.acknowledge("a", 1, 10, 200.0), AckResult::accepted);
  EXPECT_DOUBLE_EQ(ledger.committed_w(0.0), 500.0);
  writes = ledger.plan(600.0, 0.0);
  EXPECT_DOUBLE_EQ(planned_cap(writes, "b"), 400.0);
  ledger.issued(writes, 11);
  EXPECT_DOUBLE_EQ(ledger.committed_w(0.0), 600.0);  // b's raise counts from the moment it is issued
  EXPECT_FALSE(ledger.settled());
  EXPECT_EQ(ledger.acknowledge("b", 2, 11, 400.0), AckResult::accepted);
  EXPECT_TRUE(ledger.settled());
}

TEST(Ledger, RaisesThatFitGoSmallestFirst) {
  Ledger ledger(timing());
  ledger.register_node("a", 1, 100.0, 100.0);
  ledger.register_node("b", 2, 100.0, 100.0);
  ledger.register_node("c", 3, 100.0, 100.0);
  ledger.set_target("a", 250.0);  // +150
  ledger.set_target("b", 150.0);  // +50
  ledger.set_target("c", 180.0);  // +80
  const auto writes = ledger.plan(450.0, 0.0);  // 150 W of room: b and c fit, a does not
  ASSERT_EQ(writes.size(), 2U);
  EXPECT_DOUBLE_EQ(planned_cap(writes, "b"), 150.0);
  EXPECT_DOUBLE_EQ(planned_cap(writes, "c"), 180.0);
}

TEST(Ledger, AnUnacknowledgedRaiseKeepsCountingAfterALowerIsIssuedOverIt) {
  Ledger ledger(timing());
  ledger.register_node("a", 1, 100.0, 50.0);
  ledger.set_target("a", 300.0);
  ledger.issued(ledger.plan(1000.0, 0.0), 5);
  ledger.set_target("a", 150.0);
  ledger.issued(ledger.plan(1000.0, 0.0), 6);
  // The node may have applied 300 W (revision 5) and not yet 150 W: its bound is 300.
  EXPECT_DOUBLE_EQ(ledger.committed_w(0.0), 300.0);
  EXPECT_EQ(ledger.acknowledge("a", 1, 5, 300.0), AckResult::accepted);
  EXPECT_DOUBLE_EQ(ledger.committed_w(0.0), 300.0);  // revision 6 is still in flight
  EXPECT_EQ(ledger.acknowledge("a", 1, 6, 150.0), AckResult::accepted);
  EXPECT_DOUBLE_EQ(ledger.committed_w(0.0), 150.0);
}

TEST(Ledger, StaleAcknowledgementsAreRefused) {
  Ledger ledger(timing());
  ledger.register_node("a", 7, 200.0, 100.0);
  EXPECT_EQ(ledger.acknowledge("zz", 7, 1, 0.0), AckResult::unknown_node);
  EXPECT_EQ(ledger.acknowledge("a", 6, 1, 0.0), AckResult::stale);  // another incarnation
  EXPECT_EQ(ledger.acknowledge("a", 7, 9, 150.0), AckResult::accepted);
  EXPECT_EQ(ledger.acknowledge("a", 7, 8, 0.0), AckResult::stale);  // older than one acknowledged
  EXPECT_EQ(ledger.acknowledge("a", 7, 10, std::nan("")), AckResult::stale);
  EXPECT_DOUBLE_EQ(ledger.committed_w(0.0), 150.0);
}

TEST(Ledger, ALostNodeCountsItsBoundUntilTheTimeoutThenItsSafeCap) {
  Ledger ledger(timing());
  ledger.register_node("a", 1, 300.0, 100.0);
  ledger.register_node("b", 2, 200.0, 100.0);
  ledger.lease_expired("a", 50.0);
  EXPECT_DOUBLE_EQ(ledger.lost_w(54.9), 300.0);
  EXPECT_DOUBLE_EQ(ledger.committed_w(54.9), 500.0);
  EXPECT_EQ(ledger.next_reclaim_s(50.0), 55.0);
  EXPECT_DOUBLE_EQ(ledger.lost_w(55.0), 100.0);  // it may still be alive, at its safe cap
  EXPECT_EQ(ledger.next_reclaim_s(55.0), std::nullopt);
  ledger.set_target("a", 400.0);  // ignored: lost
  EXPECT_TRUE(ledger.plan(10'000.0, 60.0).empty());
  // It registers again with a new lease: it counts what it reports.
  ledger.register_node("a", 9, 100.0, 100.0);
  EXPECT_DOUBLE_EQ(ledger.committed_w(60.0), 300.0);
  ledger.forget("a");
  EXPECT_DOUBLE_EQ(ledger.committed_w(60.0), 200.0);
  ledger.left("b");
  EXPECT_DOUBLE_EQ(ledger.committed_w(60.0), 0.0);
  EXPECT_TRUE(ledger.nodes().empty());
}

TEST(Ledger, BadCapsAreRefused) {
  Ledger ledger(timing());
  test::expect_error_from([&] { ledger.register_node("a", 1, -1.0, 100.0); }, ErrorCode::invalid_data, "reported cap");
  ledger.register_node("a", 1, 100.0, 100.0);
  test::expect_error_from([&] { ledger.set_target("a", std::nan("")); }, ErrorCode::invalid_data, "target cap");
}

TEST(NodeSafety, ItAppliesAllocationsInRevisionOrder) {
  NodeSafety node(timing(), 100.0, 0.0, 0.0);
  EXPECT_EQ(node.allocation(5, 250.0, 1.0), 250.0);
  EXPECT_EQ(node.allocation(4, 300.0, 1.5), std::nullopt);  // older
  EXPECT_EQ(node.allocation(5, 250.0, 1.6), std::nullopt);  // the same one again
  EXPECT_EQ(node.allocation(6, 200.0, 2.0), 200.0);
  EXPECT_EQ(node.applied_revision(), 6);
}

TEST(NodeSafety, WithoutContactItKeepsItsCapThenFallsToTheSafeCapAndNeverRaises) {
  NodeSafety node(timing(), 100.0, 0.0, 0.0);
  node.contact(0.0);
  EXPECT_EQ(node.allocation(5, 250.0, 1.0), 250.0);
  node.contact(3.0);  // its last answered keep-alive was sent at 3 s
  EXPECT_EQ(node.deadline_s(), 8.0);
  EXPECT_EQ(node.tick(7.9), std::nullopt);
  EXPECT_DOUBLE_EQ(node.cap_w(), 250.0);  // keeps its cap while the timeout runs
  EXPECT_EQ(node.tick(8.0), 100.0);       // then the safe cap
  EXPECT_TRUE(node.fallen_back());
  EXPECT_EQ(node.tick(9.0), std::nullopt);
  // Out of contact: a raise waits, a lower below the safe cap is taken.
  EXPECT_EQ(node.allocation(6, 300.0, 9.0), std::nullopt);
  EXPECT_DOUBLE_EQ(node.cap_w(), 100.0);
  EXPECT_EQ(node.allocation(7, 80.0, 9.5), 80.0);
  // Contact again: the allocation re-read from the store is applied, even at the same revision.
  node.contact(10.0);
  EXPECT_EQ(node.allocation(7, 80.0, 10.0), 80.0);
  EXPECT_FALSE(node.fallen_back());
  EXPECT_EQ(node.allocation(8, 300.0, 10.5), 300.0);
}

TEST(NodeSafety, ALostLeaseFallsAtOnce) {
  NodeSafety node(timing(), 100.0, 250.0, 0.0);
  node.lease_lost(1.0);
  EXPECT_DOUBLE_EQ(node.cap_w(), 100.0);
  EXPECT_TRUE(node.fallen_back());
  NodeSafety low(timing(), 100.0, 60.0, 0.0);
  low.lease_lost(1.0);
  EXPECT_DOUBLE_EQ(low.cap_w(), 60.0);  // never raised to the safe cap
}

}  // namespace
}  // namespace gpucap::cluster
