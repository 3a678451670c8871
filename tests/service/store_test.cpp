// The stores on SQLite and on PostgreSQL: migrations, registration races, one transaction per
// operation, refusals that change nothing, exact round trips of every number.

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <atomic>
#include <set>
#include <stdexcept>
#include <thread>

#include "gpucap/bso/optimizer.hpp"
#include "gpucap/bso/random.hpp"
#include "gpucap/service/store.hpp"
#include "service/backends.hpp"
#include "support/expect_error.hpp"

namespace gpucap::test {
namespace {

bso::JobSpec spec_named(const std::string& job_id) {
  bso::JobSpec spec;
  spec.job_id = job_id;
  spec.job_id_prefix = "store";
  spec.batch_sizes = {16, 32, 64};
  spec.default_batch_size = 32;
  spec.max_power = 300.0;
  spec.number_of_gpus = 2;
  spec.gpu_model = "NVIDIA A100";
  spec.max_epochs = 3;  // a trial that has not converged by its third report ends there
  spec.mab_seed = 11;
  return spec;
}

class StoreTest : public ::testing::TestWithParam<Backend> {
 protected:
  std::unique_ptr<service::Store> open() { return service::open_store(url_); }
  void SetUp() override { url_ = fresh_database(GetParam(), dir_); }

  TempDir dir_;
  std::string url_;
};

TEST_P(StoreTest, MigratesOnceAndKeepsJobsAcrossOpens) {
  {
    auto store = open();
    EXPECT_EQ(store->schema_version(), service::current_schema_version);
    EXPECT_FALSE(store->insert_job(bso::new_job_state(spec_named("store-a"), 1)));
  }
  auto again = open();  // the migrations find nothing to do
  EXPECT_EQ(again->schema_version(), service::current_schema_version);
  EXPECT_EQ(again->job_ids(), std::vector<std::string>{"store-a"});
  EXPECT_EQ(again->load_job("store-a"), bso::new_job_state(spec_named("store-a"), 1));
}

TEST_P(StoreTest, SecondInsertOfAnIdReturnsTheStoredSpec) {
  auto store = open();
  const auto spec = spec_named("store-a");
  EXPECT_FALSE(store->insert_job(bso::new_job_state(spec, 1)));
  auto other = spec;
  other.batch_sizes = {16, 32};
  const auto stored = store->insert_job(bso::new_job_state(other, 2));
  ASSERT_TRUE(stored);
  EXPECT_EQ(*stored, spec);
  EXPECT_EQ(store->load_job("store-a")->spec, spec);
}

// Every field of every trial, the arms (with infinite precisions) and the random state come back
// bit for bit, so a restarted server decides exactly as the old one would have.
TEST_P(StoreTest, OperationsRoundTripExactly) {
  auto store = open();
  auto memory = bso::new_job_state(spec_named("store-a"), 1);
  ASSERT_FALSE(store->insert_job(memory));
  const auto both = [&](const std::function<void(bso::JobState&)>& op) {
    op(memory);
    ASSERT_TRUE(store->update_job("store-a", op));
    ASSERT_EQ(store->load_job("store-a"), memory);
  };
  const double awkward[] = {0.1 + 0.2, 1.0 / 3.0, 123456.789e10, 1e-7, 2.0 / 7.0};
  for (int round = 0; round < 12; ++round) {
    bso::TrialId trial;
    both([&](bso::JobState& job) { trial = bso::next_trial(job); });
    for (int epoch = 1; epoch <= 3; ++epoch) {
      const double t = (1.0 + awkward[round % 5]) * epoch * 100.0;
      const bso::TrainingResult result{trial, t, t * 211.0 / 3.0, epoch == 3 && trial.batch_size != 64 ? 0.9 : 0.2, epoch};
      bool stopped = false;
      both([&](bso::JobState& job) { stopped = bso::report(job, result).stop_train; });
      if (stopped) break;
    }
    both([&](bso::JobState& job) { bso::end_trial(job, trial); });
  }
  EXPECT_EQ(memory.stage, bso::Stage::mab);  // the arms were stored too
}

TEST_P(StoreTest, ARefusedOperationWritesNothing) {
  auto store = open();
  ASSERT_FALSE(store->insert_job(bso::new_job_state(spec_named("store-a"), 1)));
  ASSERT_TRUE(store->update_job("store-a", [](bso::JobState& job) { (void)bso::next_trial(job); }));
  const auto before = store->load_job("store-a");
  EXPECT_THROW(store->update_job("store-a",
                                 [](bso::JobState& job) {
                                   (void)bso::next_trial(job);
                                   job.rng_state = bso::BsoRandom(5).state();
                                   throw bso::Refusal(bso::RefusalKind::bad_request, "no");
                                 }),
               bso::Refusal);
  EXPECT_EQ(store->load_job("store-a"), before);
}

TEST_P(StoreTest, UnknownJobsAreNotTouched) {
  auto store = open();
  bool called = false;
  EXPECT_FALSE(store->update_job("nope", [&](bso::JobState&) { called = true; }));
  EXPECT_FALSE(called);
  EXPECT_FALSE(store->delete_job("nope"));
  EXPECT_FALSE(store->load_job("nope"));
}

TEST_P(StoreTest, DeleteRemovesTheJobAndItsTrials) {
  auto store = open();
  ASSERT_FALSE(store->insert_job(bso::new_job_state(spec_named("store-a"), 1)));
  ASSERT_TRUE(store->update_job("store-a", [](bso::JobState& job) { (void)bso::next_trial(job); }));
  EXPECT_TRUE(store->delete_job("store-a"));
  EXPECT_FALSE(store->load_job("store-a"));
  EXPECT_TRUE(store->job_ids().empty());
  ASSERT_FALSE(store->insert_job(bso::new_job_state(spec_named("store-a"), 1)));  // no trials left behind
  EXPECT_TRUE(store->load_job("store-a")->trials.empty());
}

// Two store objects on one database stand for two server processes.
TEST_P(StoreTest, ConcurrentWritersNeverShareATrialNumber) {
  auto first = open();
  auto second = open();
  ASSERT_FALSE(first->insert_job(bso::new_job_state(spec_named("store-a"), 1)));
  std::atomic<int> handed_out{0};
  std::vector<std::thread> writers;
  for (int w = 0; w < 6; ++w) {
    writers.emplace_back([&, w] {
      auto& store = w % 2 == 0 ? *first : *second;
      for (int i = 0; i < 15; ++i) {
        if (store.update_job("store-a", [](bso::JobState& job) { (void)bso::next_trial(job); })) ++handed_out;
      }
    });
  }
  for (auto& t : writers) t.join();
  const auto job = first->load_job("store-a");
  ASSERT_TRUE(job);
  EXPECT_EQ(handed_out.load(), 90);
  EXPECT_EQ(job->trials.size(), 90u);  // numbered 1..90: the load checks there is no gap
}

TEST_P(StoreTest, ConcurrentRegistrationsOfOneIdInsertOnce) {
  auto first = open();
  auto second = open();
  std::atomic<int> inserted{0};
  std::vector<std::thread> registrars;
  for (int r = 0; r < 6; ++r) {
    registrars.emplace_back([&, r] {
      auto& store = r % 2 == 0 ? *first : *second;
      if (!store.insert_job(bso::new_job_state(spec_named("store-a"), static_cast<std::uint64_t>(r)))) ++inserted;
    });
  }
  for (auto& t : registrars) t.join();
  EXPECT_EQ(inserted.load(), 1);
  EXPECT_EQ(first->job_ids().size(), 1u);
}

// The durability asked for is what the database runs with, read back on the store's connection:
// SQLite's PRAGMA synchronous (FULL: every commit fsync'd; NORMAL: survives a crash of the
// process, not a power cut), PostgreSQL's synchronous_commit (full: the server's own, on by
// default; normal: off for the store's sessions). The default is full.
TEST_P(StoreTest, TheDurabilityAskedForIsTheSettingInForce) {
  const bool sqlite = GetParam() == Backend::sqlite;
  EXPECT_EQ(service::open_store(url_)->durability_setting(), sqlite ? "synchronous=FULL" : "synchronous_commit=on");
  EXPECT_EQ(service::open_store(url_, service::Durability::full)->durability_setting(),
            sqlite ? "synchronous=FULL" : "synchronous_commit=on");
  auto normal = service::open_store(url_, service::Durability::normal);
  EXPECT_EQ(normal->durability_setting(), sqlite ? "synchronous=NORMAL" : "synchronous_commit=off");
  EXPECT_FALSE(normal->insert_job(bso::new_job_state(spec_named("store-d"), 1)));  // and it still stores
  EXPECT_EQ(service::open_store(url_)->job_ids(), std::vector<std::string>{"store-d"});
}

INSTANTIATE_TEST_SUITE_P(Backends, StoreTest, ::testing::Values(Backend::sqlite, Backend::postgres), backend_name);

TEST(StoreDurability, ParsesFullAndNormalOnly) {
  EXPECT_EQ(service::parse_durability("full"), service::Durability::full);
  EXPECT_EQ(service::parse_durability("normal"), service::Durability::normal);
  expect_error_from([] { (void)service::parse_durability("fast"); }, ErrorCode::usage, "--durability 'fast': expected full or normal");
}

TEST(StoreUrl, NamesTheFormsItTakes) {
  expect_error_from([] { (void)service::open_store("mysql://x"); }, ErrorCode::usage, "sqlite:PATH");
  expect_error_from([] { (void)service::open_store("sqlite:"); }, ErrorCode::usage, "needs a path");
  expect_error_from([] { (void)service::open_store("sqlite:/nonexistent-dir/x/bso.db"); }, ErrorCode::io, "cannot open");
  // Port 1 on the loopback: nothing listens there.
  expect_error_from([] { (void)service::open_store("postgresql://nobody:secret@127.0.0.1:1/db"); }, ErrorCode::io,
                    "PostgreSQL postgresql://nobody:***@127.0.0.1:1/db");
}

TEST(StoreSchema, RefusesADatabaseFromANewerGpucap) {
  TempDir dir;
  const auto path = dir.file("bso.db");
  (void)service::open_store("sqlite:" + path);
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "INSERT INTO schema_version VALUES (99, 'later')", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);
  expect_error_from([&] { (void)service::open_store("sqlite:" + path); }, ErrorCode::invalid_data, "schema version 99");
}

}  // namespace
}  // namespace gpucap::test
