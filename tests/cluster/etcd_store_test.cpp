// EtcdStore against a real three-member etcd started by the test (Debian's etcd-server): the
// store.hpp semantics the cluster's protocol relies on, a member's death, and an etcd that cannot
// be reached.

#include "gpucap/cluster/etcd_store.hpp"

#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <thread>

#include "support/free_port.hpp"
#include "support/private_etcd.hpp"

namespace gpucap::cluster {
namespace {

using Clock = std::chrono::steady_clock;

class EtcdStoreTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { etcd_ = std::make_unique<test::PrivateEtcd>(3); }
  static void TearDownTestSuite() { etcd_.reset(); }

  static EtcdStore store() { return EtcdStore(parse_etcd_endpoints(etcd_->endpoints())); }

  // Polls a watch until `count` events came or 5 s passed.
  static std::vector<WatchEvent> wait_events(Store& store, WatchId watch, std::size_t count) {
    std::vector<WatchEvent> events;
    const auto deadline = Clock::now() + std::chrono::seconds(5);
    while (events.size() < count && Clock::now() < deadline) {
      for (auto& event : store.poll(watch)) events.push_back(std::move(event));
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return events;
  }

  static std::unique_ptr<test::PrivateEtcd> etcd_;
};

std::unique_ptr<test::PrivateEtcd> EtcdStoreTest::etcd_;

TEST(Base64, RoundTripsEveryByteAndEveryPaddingLength) {
  std::string all;
  for (int byte = 0; byte < 256; ++byte) all.push_back(static_cast<char>(byte));
  for (std::size_t length = 0; length <= 5; ++length) {
    EXPECT_EQ(base64_decode(base64_encode(all.substr(0, length))), all.substr(0, length)) << length;
  }
  EXPECT_EQ(base64_decode(base64_encode(all)), all);
  EXPECT_EQ(base64_encode("foo"), "Zm9v");
  EXPECT_EQ(base64_encode("fo"), "Zm8=");
  EXPECT_THROW((void)base64_decode("Zm9"), StoreError);
  EXPECT_THROW((void)base64_decode("Z!9v"), StoreError);
}

TEST(EtcdEndpoints, AListOfUrlsEachChecked) {
  EXPECT_EQ(parse_etcd_endpoints("http://127.0.0.1:2379, http://127.0.0.1:22379").size(), 2u);
  EXPECT_THROW((void)parse_etcd_endpoints(""), Error);
  EXPECT_THROW((void)parse_etcd_endpoints("http://127.0.0.1:2379,,http://h:1"), Error);
  EXPECT_THROW((void)parse_etcd_endpoints("127.0.0.1:2379"), Error);
}

TEST_F(EtcdStoreTest, PutGetAndPrefixKeepBytesRevisionsAndVersions) {
  auto s = store();
  const std::string value("binary\0\xff value", 15);
  const Revision first = s.put(PutOp{"/t1/a", value, 0});
  const Revision second = s.put(PutOp{"/t1/a", "v2", 0});
  EXPECT_EQ(second, first + 1);
  (void)s.put(PutOp{"/t1/b", "b", 0});
  (void)s.put(PutOp{"/t10", "outside", 0});
  const auto a = s.get("/t1/a");
  ASSERT_EQ(a.kvs.size(), 1u);
  EXPECT_EQ(a.kvs[0].value, "v2");
  EXPECT_EQ(a.kvs[0].create_revision, first);
  EXPECT_EQ(a.kvs[0].mod_revision, second);
  EXPECT_EQ(a.kvs[0].version, 2);
  const auto prefix = s.get_prefix("/t1/");
  ASSERT_EQ(prefix.kvs.size(), 2u) << "/t10 is not under /t1/";
  EXPECT_EQ(prefix.kvs[0].key, "/t1/a");
  EXPECT_EQ(prefix.kvs[1].key, "/t1/b");
  EXPECT_GE(prefix.revision, second + 2);
  (void)s.put(PutOp{"/t1/bin", value, 0});
  EXPECT_EQ(s.get("/t1/bin").kvs.at(0).value, value);
  EXPECT_TRUE(s.get("/t1/none").kvs.empty());
}

TEST_F(EtcdStoreTest, TransactionsApplyOneBranchAtomically) {
  auto s = store();
  const std::vector<Compare> absent{Compare::absent("/t2/leader")};
  const std::vector<Op> take{PutOp{"/t2/leader", "c1", 0}, PutOp{"/t2/term", "1", 0}};
  const std::vector<Op> otherwise{PutOp{"/t2/lost", "c2", 0}};
  const auto won = s.txn(absent, take, otherwise);
  EXPECT_TRUE(won.succeeded);
  const auto lost = s.txn(absent, take, otherwise);
  EXPECT_FALSE(lost.succeeded);
  EXPECT_EQ(lost.revision, won.revision + 1);
  EXPECT_EQ(s.get("/t2/lost").kvs.at(0).value, "c2");
  const auto leader = s.get("/t2/leader").kvs.at(0);
  const std::vector<Compare> guarded{Compare::modified_at("/t2/leader", leader.mod_revision),
                                     Compare{"/t2/leader", Compare::Target::value, 0, "c1"}};
  const std::vector<Op> erase{EraseOp{"/t2/leader"}};
  EXPECT_TRUE(s.txn(guarded, erase).succeeded);
  EXPECT_TRUE(s.get("/t2/leader").kvs.empty());
}

TEST_F(EtcdStoreTest, ALeaseKeepsItsKeysUntilItExpiresOrIsRevoked) {
  auto s = store();
  const LeaseId lease = s.grant_lease(1.0);
  (void)s.put(PutOp{"/t3/node", "up", lease});
  EXPECT_EQ(s.get("/t3/node").kvs.at(0).lease, lease);
  EXPECT_TRUE(s.keep_alive(lease));
  // Not kept alive any more: etcd deletes the key within the TTL (plus its expiry check).
  const auto deadline = Clock::now() + std::chrono::seconds(5);
  while (!s.get("/t3/node").kvs.empty() && Clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_TRUE(s.get("/t3/node").kvs.empty());
  EXPECT_FALSE(s.keep_alive(lease));
  try {
    (void)s.put(PutOp{"/t3/node", "up", lease});
    FAIL() << "a put with an expired lease must fail";
  } catch (const StoreError& error) {
    EXPECT_EQ(error.kind(), StoreErrorKind::lease_not_found) << error.what();
  }
  const LeaseId other = s.grant_lease(30.0);
  (void)s.put(PutOp{"/t3/other", "up", other});
  s.revoke_lease(other);
  EXPECT_TRUE(s.get("/t3/other").kvs.empty());
  s.revoke_lease(other);  // already gone: not an error
}

TEST_F(EtcdStoreTest, AWatchDeliversPutsAndDeletesInRevisionOrder) {
  auto s = store();
  const WatchId watch = s.watch("/t4/", 0, true);
  const Revision put1 = s.put(PutOp{"/t4/a", "1", 0});
  (void)s.put(PutOp{"/t5/outside", "x", 0});
  const auto erased = s.txn({}, std::vector<Op>{EraseOp{"/t4/a"}});
  const Revision put2 = s.put(PutOp{"/t4/b", "2", 0});
  const auto events = wait_events(s, watch, 3);
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].type, EventType::put);
  EXPECT_EQ(events[0].kv.key, "/t4/a");
  EXPECT_EQ(events[0].kv.mod_revision, put1);
  EXPECT_EQ(events[1].type, EventType::erase);
  EXPECT_EQ(events[1].kv.mod_revision, erased.revision);
  EXPECT_EQ(events[2].kv.value, "2");
  EXPECT_EQ(events[2].kv.mod_revision, put2);
  s.cancel(watch);
  EXPECT_THROW((void)s.poll(watch), StoreError);

  // From a past revision: the history since then, then what comes.
  const WatchId replay = s.watch("/t4/a", put1, false);
  const auto history = wait_events(s, replay, 2);
  ASSERT_EQ(history.size(), 2u);
  EXPECT_EQ(history[1].type, EventType::erase);
  s.cancel(replay);
}

TEST_F(EtcdStoreTest, AWatchFromACompactedRevisionSaysSo) {
  auto s = store();
  const Revision old = s.put(PutOp{"/t6/a", "1", 0});
  const Revision now = s.put(PutOp{"/t6/a", "2", 0});
  httplib::Client client(etcd_->endpoint(0));
  const auto compacted = client.Post("/v3/kv/compaction", "{\"revision\":\"" + std::to_string(now) + "\"}", "application/json");
  ASSERT_TRUE(compacted && compacted->status == 200);
  const WatchId watch = s.watch("/t6/a", old, false);
  const auto deadline = Clock::now() + std::chrono::seconds(5);
  std::optional<StoreErrorKind> kind;
  while (!kind && Clock::now() < deadline) {
    try {
      (void)s.poll(watch);
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    } catch (const StoreError& error) {
      kind = error.kind();
    }
  }
  EXPECT_EQ(kind, StoreErrorKind::compacted);
}

TEST(EtcdStoreUnreachable, EveryCallThrowsUnavailableNamingTheMembers) {
  const int port = test::free_port();  // nothing listens there
  EtcdOptions options;
  options.request_timeout_s = 0.5;
  EtcdStore s(parse_etcd_endpoints("http://127.0.0.1:" + std::to_string(port)), options);
  try {
    (void)s.get("/x");
    FAIL() << "no etcd: the call must throw";
  } catch (const StoreError& error) {
    EXPECT_EQ(error.kind(), StoreErrorKind::unavailable);
    EXPECT_NE(std::string(error.what()).find(std::to_string(port)), std::string::npos) << error.what();
  }
  EXPECT_THROW((void)s.grant_lease(5.0), StoreError);
  EXPECT_THROW((void)s.watch("/x", 0, false), StoreError);
}

// Last: it kills a member of the suite's cluster.
TEST_F(EtcdStoreTest, ZZ_AKilledMemberBreaksItsWatchesAndTheCallsGoToAnother) {
  auto s = store();
  (void)s.put(PutOp{"/t7/a", "1", 0});
  ASSERT_EQ(s.current_endpoint(), etcd_->endpoint(0));
  const WatchId watch = s.watch("/t7/", 0, true);
  etcd_->kill(0);
  (void)s.put(PutOp{"/t7/b", "2", 0});  // the next member answers
  EXPECT_NE(s.current_endpoint(), etcd_->endpoint(0));
  EXPECT_EQ(s.get("/t7/b").kvs.at(0).value, "2");
  const auto deadline = Clock::now() + std::chrono::seconds(5);
  bool broke = false;
  while (!broke && Clock::now() < deadline) {
    try {
      (void)s.poll(watch);
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    } catch (const StoreError& error) {
      broke = error.kind() == StoreErrorKind::unavailable;
    }
  }
  EXPECT_TRUE(broke) << "the stream to the killed member must end";
  // Watching again goes to a live member and sees the history from where the caller was.
  const WatchId again = s.watch("/t7/", 0, true);
  (void)s.put(PutOp{"/t7/c", "3", 0});
  const auto events = wait_events(s, again, 1);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kv.key, "/t7/c");
}

}  // namespace
}  // namespace gpucap::cluster
