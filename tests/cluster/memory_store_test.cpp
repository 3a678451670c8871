// MemoryStore: the etcd v3 semantics the protocol relies on (store.hpp), in virtual time.

#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include <string>
#include <vector>

#include "gpucap/cluster/store.hpp"

namespace gpucap::cluster {
namespace {

StoreErrorKind error_kind(const std::function<void()>& call) {
  try {
    call();
  } catch (const StoreError& e) {
    return e.kind();
  }
  ADD_FAILURE() << "no StoreError";
  return StoreErrorKind::invalid;
}

TEST(MemoryStore, EveryWriteRaisesTheRevisionAndKeysCarryTheirs) {
  MemoryStore server;
  auto store = server.connect();
  const Revision start = server.revision();
  const Revision r1 = store->put({"/a", "1", 0});
  const Revision r2 = store->put({"/b", "2", 0});
  const Revision r3 = store->put({"/a", "3", 0});
  EXPECT_EQ(r1, start + 1);
  EXPECT_EQ(r2, start + 2);
  EXPECT_EQ(r3, start + 3);
  const auto a = store->get("/a");
  ASSERT_EQ(a.kvs.size(), 1U);
  EXPECT_EQ(a.kvs[0].value, "3");
  EXPECT_EQ(a.kvs[0].create_revision, r1);
  EXPECT_EQ(a.kvs[0].mod_revision, r3);
  EXPECT_EQ(a.kvs[0].version, 2);
  EXPECT_EQ(a.revision, r3);
  EXPECT_TRUE(store->get("/missing").kvs.empty());
}

TEST(MemoryStore, APrefixReadReturnsItsKeysInOrderAndNothingElse) {
  MemoryStore server;
  auto store = server.connect();
  (void)store->put({"/n/b", "", 0});
  (void)store->put({"/n/a", "", 0});
  (void)store->put({"/m", "", 0});
  (void)store->put({"/n", "", 0});
  const auto range = store->get_prefix("/n/");
  ASSERT_EQ(range.kvs.size(), 2U);
  EXPECT_EQ(range.kvs[0].key, "/n/a");
  EXPECT_EQ(range.kvs[1].key, "/n/b");
}

TEST(MemoryStore, ALeaseExpiresByTheStoresClockAndTakesItsKeysInOneRevision) {
  MemoryStore server(100.0);
  auto store = server.connect();
  const LeaseId lease = store->grant_lease(5.0);
  (void)store->put({"/x", "", lease});
  (void)store->put({"/y", "", lease});
  const Revision before = server.revision();
  EXPECT_EQ(server.next_lease_deadline(), 105.0);
  server.advance_to(103.0);
  EXPECT_TRUE(store->keep_alive(lease));  // renewed at 103: now due at 108
  server.advance_to(107.9);
  EXPECT_EQ(store->get_prefix("/").kvs.size(), 2U);
  server.advance_to(108.0);
  EXPECT_TRUE(store->get_prefix("/").kvs.empty());
  EXPECT_EQ(server.revision(), before + 1);
  EXPECT_FALSE(store->keep_alive(lease));
  EXPECT_EQ(server.next_lease_deadline(), std::nullopt);
  EXPECT_EQ(error_kind([&] { (void)store->put({"/z", "", lease}); }), StoreErrorKind::lease_not_found);
}

TEST(MemoryStore, ARevokedLeaseDeletesItsKeysAndABadTtlIsRefused) {
  MemoryStore server;
  auto store = server.connect();
  const LeaseId lease = store->grant_lease(10.0);
  (void)store->put({"/x", "", lease});
  store->revoke_lease(lease);
  EXPECT_TRUE(store->get("/x").kvs.empty());
  EXPECT_EQ(error_kind([&] { (void)store->grant_lease(0.0); }), StoreErrorKind::invalid);
  EXPECT_EQ(error_kind([&] { (void)store->grant_lease(std::nan("")); }), StoreErrorKind::invalid);
}

TEST(MemoryStore, APutWithoutTheLeaseDetachesTheKeyFromIt) {
  MemoryStore server;
  auto store = server.connect();
  const LeaseId lease = store->grant_lease(1.0);
  (void)store->put({"/x", "", lease});
  (void)store->put({"/x", "kept", 0});
  server.advance_to(5.0);
  ASSERT_EQ(store->get("/x").kvs.size(), 1U);
  EXPECT_EQ(store->get("/x").kvs[0].value, "kept");
}

TEST(MemoryStore, ATransactionRunsThenOrOtherwiseAtomically) {
  MemoryStore server;
  auto store = server.connect();
  const std::vector<Compare> absent{Compare::absent("/leader")};
  const std::vector<Op> claim{PutOp{"/leader", "a", 0}, PutOp{"/term", "1", 0}};
  const std::vector<Op> lost{PutOp{"/lost", "a", 0}};
  const auto first = store->txn(absent, claim, lost);
  EXPECT_TRUE(first.succeeded);
  EXPECT_EQ(store->get("/leader").kvs[0].mod_revision, store->get("/term").kvs[0].mod_revision);  // one revision
  const auto second = store->txn(absent, claim, lost);
  EXPECT_FALSE(second.succeeded);
  EXPECT_EQ(store->get("/lost").kvs.size(), 1U);
  EXPECT_EQ(store->get("/leader").kvs[0].version, 1);
  // Compares on create and mod revisions, and on the value.
  const auto leader = store->get("/leader").kvs[0];
  EXPECT_TRUE(store->txn(std::vector<Compare>{Compare::created_at("/leader", leader.create_revision)}, {}).succeeded);
  EXPECT_FALSE(store->txn(std::vector<Compare>{Compare::modified_at("/leader", leader.mod_revision + 1)}, {}).succeeded);
  Compare value{"/leader", Compare::Target::value, 0, "a"};
  EXPECT_TRUE(store->txn(std::vector<Compare>{value}, {}).succeeded);
  value.value = "b";
  EXPECT_FALSE(store->txn(std::vector<Compare>{value}, {}).succeeded);
  // A transaction without operations changes nothing.
  const Revision r = server.revision();
  (void)store->txn(absent, {}, {});
  EXPECT_EQ(server.revision(), r);
}

TEST(MemoryStore, ATransactionWithAnUnknownLeaseOrARepeatedKeyChangesNothing) {
  MemoryStore server;
  auto store = server.connect();
  const Revision r = server.revision();
  const std::vector<Op> bad_lease{PutOp{"/a", "", 0}, PutOp{"/b", "", 999}};
  EXPECT_EQ(error_kind([&] { (void)store->txn({}, bad_lease); }), StoreErrorKind::lease_not_found);
  const std::vector<Op> twice{PutOp{"/a", "", 0}, EraseOp{"/a"}};
  EXPECT_EQ(error_kind([&] { (void)store->txn({}, twice); }), StoreErrorKind::invalid);
  EXPECT_EQ(server.revision(), r);
  EXPECT_TRUE(store->get("/a").kvs.empty());
}

TEST(MemoryStore, AWatchDeliversPutsAndErasesInRevisionOrderAfterItsDelay) {
  MemoryStore server;
  auto writer = server.connect();
  auto watcher = server.connect({0.5, 7});
  std::vector<std::pair<std::uint64_t, double>> hooked;
  server.set_delivery_hook([&](std::uint64_t tag, double at) { hooked.emplace_back(tag, at); });
  const WatchId prefix = watcher->watch("/n/", 0, true);
  const WatchId exact = watcher->watch("/n/a", 0, false);
  const Revision r1 = writer->put({"/n/a", "1", 0});
  (void)writer->put({"/other", "", 0});
  const Revision r3 = writer->put({"/n/b", "2", 0});
  const std::vector<Op> erase{EraseOp{"/n/a"}};
  const Revision r4 = writer->txn({}, erase).revision;
  EXPECT_TRUE(watcher->poll(prefix).empty());  // not yet: the client's delay
  server.advance_to(0.5);
  const auto events = watcher->poll(prefix);
  ASSERT_EQ(events.size(), 3U);
  EXPECT_EQ(events[0].kv.mod_revision, r1);
  EXPECT_EQ(events[1].kv.mod_revision, r3);
  EXPECT_EQ(events[2].type, EventType::erase);
  EXPECT_EQ(events[2].kv.key, "/n/a");
  EXPECT_EQ(events[2].kv.mod_revision, r4);
  EXPECT_EQ(watcher->poll(exact).size(), 2U);
  EXPECT_TRUE(watcher->poll(prefix).empty());  // drained
  ASSERT_FALSE(hooked.empty());
  EXPECT_EQ(hooked.front(), (std::pair<std::uint64_t, double>{7, 0.5}));
}

TEST(MemoryStore, AWatchFromAPastRevisionReplaysTheHistory) {
  MemoryStore server;
  auto store = server.connect();
  const Revision r1 = store->put({"/k", "1", 0});
  (void)store->put({"/k", "2", 0});
  const WatchId watch = store->watch("/k", r1 + 1, false);  // list-then-watch: from the read's revision + 1
  const auto events = store->poll(watch);
  ASSERT_EQ(events.size(), 1U);
  EXPECT_EQ(events[0].kv.value, "2");
  store->cancel(watch);
  EXPECT_EQ(error_kind([&] { (void)store->poll(watch); }), StoreErrorKind::invalid);
}

TEST(MemoryStore, ACompactedRevisionCannotBeWatched) {
  MemoryStore server(0.0, 4);  // keeps the newest 4 events
  auto store = server.connect();
  const Revision first = store->put({"/k", "0", 0});
  for (int i = 1; i < 10; ++i) (void)store->put({"/k", std::to_string(i), 0});
  EXPECT_EQ(error_kind([&] { (void)store->watch("/k", first, false); }), StoreErrorKind::compacted);
  const WatchId recent = store->watch("/k", server.revision() - 1, false);
  EXPECT_EQ(store->poll(recent).size(), 2U);
}

TEST(MemoryStore, ACutOffClientCannotCallAndItsWatchesBreak) {
  MemoryStore server;
  auto writer = server.connect();
  auto node = server.connect({0.0, 3});
  const WatchId watch = node->watch("/k", 0, false);
  (void)writer->put({"/k", "before", 0});
  server.set_connected(3, false);
  EXPECT_FALSE(server.connected(3));
  EXPECT_EQ(error_kind([&] { (void)node->get("/k"); }), StoreErrorKind::unavailable);
  EXPECT_EQ(error_kind([&] { (void)node->put({"/k", "x", 0}); }), StoreErrorKind::unavailable);
  EXPECT_EQ(error_kind([&] { (void)node->keep_alive(1); }), StoreErrorKind::unavailable);
  (void)writer->put({"/k", "during", 0});  // the writer is unaffected
  server.set_connected(3, true);
  // The watch broke with the connection (its queued event is gone): the client must re-read.
  EXPECT_EQ(error_kind([&] { (void)node->poll(watch); }), StoreErrorKind::unavailable);
  EXPECT_EQ(error_kind([&] { (void)node->poll(watch); }), StoreErrorKind::invalid);  // cancelled
  EXPECT_EQ(node->get("/k").kvs[0].value, "during");
}

TEST(MemoryStore, TheClockNeverGoesBackAndANegativeDelayIsRefused) {
  MemoryStore server(10.0);
  server.advance_to(5.0);
  EXPECT_EQ(server.now(), 10.0);
  server.advance_to(std::nan(""));
  EXPECT_EQ(server.now(), 10.0);
  EXPECT_EQ(error_kind([&] { (void)server.connect({-1.0, 1}); }), StoreErrorKind::invalid);
}

}  // namespace
}  // namespace gpucap::cluster
