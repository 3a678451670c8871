#include "gpucap/serve/batcher.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "gpucap/core/error.hpp"
#include "gpucap/serve/request_queue.hpp"

namespace gpucap::serve {
namespace {

constexpr double kMs = 1e-3;

BatcherConfig config_with(int max_batch_size, double delay_s, std::vector<int> preferred = {}) {
  BatcherConfig config;
  config.max_batch_size = max_batch_size;
  config.max_queue_delay_s = delay_s;
  config.preferred_batch_sizes = std::move(preferred);
  return config;
}

// A queue and the knobs a controller set, with the config's own knobs to begin with.
struct Batcher {
  explicit Batcher(BatcherConfig c) : config(std::move(c)), queue(config), knobs(initial_knobs(config)) {}

  void arrive(std::uint64_t id, double arrival_s, int items = 1, int priority = 0) {
    ASSERT_EQ(queue.enqueue(PendingRequest{id, items, arrival_s, priority, std::nullopt}, arrival_s),
              EnqueueOutcome::accepted);
  }
  // What a serving loop does at each wake-up: apply timeouts, then decide.
  BatchDecision at(double now_s) {
    (void)queue.expire(now_s);
    return decide(queue, knobs, config, now_s);
  }
  std::vector<std::uint64_t> launch(const BatchDecision& decision) {
    std::vector<std::uint64_t> ids;
    for (const auto& r : queue.pop_batch(decision.requests)) ids.push_back(r.id);
    return ids;
  }

  BatcherConfig config;
  RequestQueue queue;
  BatcherKnobs knobs;
};

void expect_usage_error_naming(const BatcherConfig& config, const std::string& field) {
  try {
    validate(config);
    FAIL() << "expected a usage error naming " << field;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::usage);
    EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
  }
}

TEST(BatcherConfig, ValidateNamesTheBadField) {
  EXPECT_NO_THROW(validate(config_with(8, 5 * kMs, {2, 4, 8})));
  expect_usage_error_naming(config_with(0, 0.0), "max_batch_size");
  expect_usage_error_naming(config_with(8, 0.0, {4, 16}), "preferred_batch_sizes");
  expect_usage_error_naming(config_with(8, 0.0, {0}), "preferred_batch_sizes");
  expect_usage_error_naming(config_with(8, -1 * kMs), "max_queue_delay_s");

  BatcherConfig levels = config_with(8, 0.0);
  levels.priority_levels = 3;
  levels.default_priority_level = 0;
  expect_usage_error_naming(levels, "default_priority_level");
  levels.default_priority_level = 4;
  expect_usage_error_naming(levels, "default_priority_level");
  levels.default_priority_level = 3;
  EXPECT_NO_THROW(validate(levels));
  levels.priority_queue_policy[4] = QueuePolicy{};
  expect_usage_error_naming(levels, "priority_queue_policy");
  levels.priority_queue_policy.clear();
  levels.priority_queue_policy[2].default_timeout_s = -1.0;
  expect_usage_error_naming(levels, "priority_queue_policy[2].default_timeout_s");

  BatcherConfig policy = config_with(8, 0.0);
  policy.default_queue_policy.default_timeout_s = std::numeric_limits<double>::infinity();
  expect_usage_error_naming(policy, "default_queue_policy.default_timeout_s");
  policy = config_with(8, 0.0);
  policy.priority_levels = -1;
  expect_usage_error_naming(policy, "priority_levels");
}

TEST(BatcherKnobs, ClampedToTheConfigMaxAndRejectedWhenNonsense) {
  const BatcherConfig config = config_with(8, 5 * kMs);
  EXPECT_EQ(effective_knobs(BatcherKnobs{32, 1 * kMs}, config).max_batch_size, 8);
  EXPECT_EQ(effective_knobs(BatcherKnobs{3, 1 * kMs}, config).max_batch_size, 3);
  EXPECT_DOUBLE_EQ(effective_knobs(BatcherKnobs{3, 1 * kMs}, config).max_queue_delay_s, 1 * kMs);
  EXPECT_THROW((void)effective_knobs(BatcherKnobs{0, 0.0}, config), Error);
  EXPECT_THROW((void)effective_knobs(BatcherKnobs{-4, 0.0}, config), Error);
  EXPECT_THROW((void)effective_knobs(BatcherKnobs{4, -1.0}, config), Error);
  EXPECT_EQ(initial_knobs(config).max_batch_size, 8);
  EXPECT_DOUBLE_EQ(initial_knobs(config).max_queue_delay_s, 5 * kMs);
}

TEST(BatcherKnobs, AKnobAboveTheConfigMaxDoesNotLetBiggerBatchesOut) {
  Batcher b(config_with(4, 5 * kMs));
  b.knobs.max_batch_size = 64;
  for (std::uint64_t i = 0; i < 6; ++i) b.arrive(i, 0.0);
  const BatchDecision d = b.at(0.0);
  ASSERT_TRUE(d.launch());
  EXPECT_EQ(d.items, 4);
  EXPECT_EQ(d.reason, LaunchReason::full);
}

TEST(Batcher, EmptyQueueIsIdle) {
  Batcher b(config_with(8, 5 * kMs));
  EXPECT_TRUE(b.at(1.0).idle());
}

TEST(Batcher, WaitsForTheDelayThenLaunchesWhatIsThere) {
  // delay 5 ms, max 8; requests arrive at 0, 1, 2 ms.
  Batcher b(config_with(8, 5 * kMs));
  b.arrive(1, 0 * kMs);
  b.arrive(2, 1 * kMs);
  b.arrive(3, 2 * kMs);
  const BatchDecision at3 = b.at(3 * kMs);
  ASSERT_TRUE(at3.wait());
  EXPECT_DOUBLE_EQ(at3.wake_s, 5 * kMs) << "oldest arrival (0) + delay";
  EXPECT_TRUE(b.at(4.999 * kMs).wait());
  const BatchDecision at5 = b.at(at3.wake_s);
  ASSERT_TRUE(at5.launch());
  EXPECT_EQ(at5.requests, 3u);
  EXPECT_EQ(at5.items, 3);
  EXPECT_EQ(at5.reason, LaunchReason::delay_expired);
  EXPECT_EQ(b.launch(at5), (std::vector<std::uint64_t>{1, 2, 3}));
  EXPECT_TRUE(b.at(5 * kMs).idle());
}

TEST(Batcher, WakingAtWakeTimeAlwaysLaunchesDespiteRounding) {
  // 0.1 + 0.2 style sums: the decision compares now >= arrival + delay, the same sum it returns.
  Batcher b(config_with(8, 0.3));
  b.arrive(1, 0.1);
  const BatchDecision waiting = b.at(0.1);
  ASSERT_TRUE(waiting.wait());
  EXPECT_TRUE(b.at(waiting.wake_s).launch());
}

TEST(Batcher, FullBatchLaunchesAtOnceAndTheRestWaits) {
  Batcher b(config_with(4, 5 * kMs));
  for (std::uint64_t i = 0; i < 5; ++i) b.arrive(i, static_cast<double>(i) * kMs);  // 0..4 ms
  const BatchDecision at4 = b.at(4 * kMs);
  ASSERT_TRUE(at4.launch());
  EXPECT_EQ(at4.items, 4);
  EXPECT_EQ(at4.reason, LaunchReason::full);
  EXPECT_EQ(b.launch(at4), (std::vector<std::uint64_t>{0, 1, 2, 3}));
  const BatchDecision after = b.at(4 * kMs);
  ASSERT_TRUE(after.wait());
  EXPECT_DOUBLE_EQ(after.wake_s, 9 * kMs) << "the leftover's own arrival (4 ms) + delay";
}

TEST(Batcher, RequestsNeverSplitAcrossBatches) {
  // max 8: 5 + 4 items do not fit together, so 5 goes alone, at once (it cannot grow).
  Batcher b(config_with(8, 5 * kMs));
  b.arrive(1, 0.0, 5);
  b.arrive(2, 1 * kMs, 4);
  const BatchDecision d = b.at(1 * kMs);
  ASSERT_TRUE(d.launch());
  EXPECT_EQ(d.requests, 1u);
  EXPECT_EQ(d.items, 5);
  EXPECT_EQ(d.reason, LaunchReason::full);
}

TEST(Batcher, LargestPreferredSizeThatCanBeFormedLaunchesAtOnce) {
  Batcher b(config_with(8, 10 * kMs, {2, 4}));
  b.arrive(1, 0.0);
  EXPECT_TRUE(b.at(0.0).wait()) << "1 item: no preferred size yet";
  b.arrive(2, 1 * kMs);
  b.arrive(3, 2 * kMs);
  const BatchDecision three = b.at(2 * kMs);
  ASSERT_TRUE(three.launch());
  EXPECT_EQ(three.items, 2) << "3 pending: the largest preferred size formable is 2";
  EXPECT_EQ(three.reason, LaunchReason::preferred);
  b.arrive(4, 2 * kMs);
  b.arrive(5, 2 * kMs);
  const BatchDecision five = b.at(2 * kMs);
  ASSERT_TRUE(five.launch());
  EXPECT_EQ(five.requests, 4u) << "5 pending: 4 is formable and larger than 2";
  EXPECT_EQ(b.launch(five), (std::vector<std::uint64_t>{1, 2, 3, 4}));
}

TEST(Batcher, PreferredSizeMustBeFormedExactly) {
  // Requests of 3 items: prefixes are 3 and 6, never 4.
  Batcher b(config_with(8, 10 * kMs, {4}));
  b.arrive(1, 0.0, 3);
  b.arrive(2, 1 * kMs, 3);
  const BatchDecision d = b.at(1 * kMs);
  ASSERT_TRUE(d.wait());
  EXPECT_DOUBLE_EQ(d.wake_s, 10 * kMs);
}

TEST(Batcher, PreferredSizeWinsOverAFullBatch) {
  // Triton's order: a preferred size if one can be formed, otherwise the largest batch <= max.
  Batcher b(config_with(8, 10 * kMs, {4}));
  for (std::uint64_t i = 0; i < 8; ++i) b.arrive(i, 0.0);
  const BatchDecision d = b.at(0.0);
  ASSERT_TRUE(d.launch());
  EXPECT_EQ(d.items, 4);
  EXPECT_EQ(d.reason, LaunchReason::preferred);
}

TEST(Batcher, ExpiredDelaySendsEverythingNotJustThePreferredSize) {
  Batcher b(config_with(8, 5 * kMs, {4}));
  b.arrive(1, 0.0);
  EXPECT_TRUE(b.at(0.0).wait());
  for (std::uint64_t i = 2; i <= 5; ++i) b.arrive(i, 6 * kMs);  // the batcher was busy until 6 ms
  const BatchDecision d = b.at(6 * kMs);
  ASSERT_TRUE(d.launch());
  EXPECT_EQ(d.items, 5) << "request 1 waited past the delay: all 5 go, as in Triton";
  EXPECT_EQ(d.reason, LaunchReason::delay_expired);
}

TEST(Batcher, ZeroDelayLaunchesAtOnceButStillPrefersAPreferredSize) {
  Batcher plain(config_with(8, 0.0));
  plain.arrive(1, 0.0);
  plain.arrive(2, 0.0);
  plain.arrive(3, 0.0);
  const BatchDecision d = plain.at(0.0);
  ASSERT_TRUE(d.launch());
  EXPECT_EQ(d.items, 3);
  EXPECT_EQ(d.reason, LaunchReason::no_delay);

  Batcher preferring(config_with(8, 0.0, {2}));
  preferring.arrive(1, 0.0);
  preferring.arrive(2, 0.0);
  preferring.arrive(3, 0.0);
  const BatchDecision first = preferring.at(0.0);
  ASSERT_TRUE(first.launch());
  EXPECT_EQ(first.items, 2);
  EXPECT_EQ(first.reason, LaunchReason::preferred);
  (void)preferring.launch(first);
  const BatchDecision second = preferring.at(0.0);
  ASSERT_TRUE(second.launch());
  EXPECT_EQ(second.items, 1);
  EXPECT_EQ(second.reason, LaunchReason::no_delay);
}

TEST(Batcher, HigherPriorityBypassesOlderLowPriorityRequests) {
  BatcherConfig config = config_with(2, 5 * kMs);
  config.priority_levels = 2;
  config.default_priority_level = 2;
  Batcher b(config);
  b.arrive(10, 0 * kMs, 1, 2);
  b.arrive(11, 1 * kMs, 1, 2);
  b.arrive(12, 2 * kMs, 1, 1);
  const BatchDecision d = b.at(2 * kMs);
  ASSERT_TRUE(d.launch());
  EXPECT_EQ(d.reason, LaunchReason::full);
  EXPECT_EQ(b.launch(d), (std::vector<std::uint64_t>{12, 10})) << "high first, then the oldest low";
  const BatchDecision rest = b.at(2 * kMs);
  ASSERT_TRUE(rest.wait());
  EXPECT_DOUBLE_EQ(rest.wake_s, 6 * kMs) << "request 11 arrived at 1 ms";
}

TEST(Batcher, DelayCountsFromTheOldestCandidateNotTheFirstInOrder) {
  // A high-priority request at 3 ms goes first in the batch, but the low one has waited since 0.
  BatcherConfig config = config_with(8, 5 * kMs);
  config.priority_levels = 2;
  config.default_priority_level = 2;
  Batcher b(config);
  b.arrive(1, 0 * kMs, 1, 2);
  b.arrive(2, 3 * kMs, 1, 1);
  const BatchDecision d = b.at(3 * kMs);
  ASSERT_TRUE(d.wait());
  EXPECT_DOUBLE_EQ(d.wake_s, 5 * kMs);
  const BatchDecision at5 = b.at(5 * kMs);
  ASSERT_TRUE(at5.launch());
  EXPECT_EQ(b.launch(at5), (std::vector<std::uint64_t>{2, 1}));
}

TEST(Batcher, KnobCapBelowConfigMaxShapesBatchesAndIgnoresLargerPreferredSizes) {
  Batcher b(config_with(16, 5 * kMs, {8}));
  b.knobs = BatcherKnobs{4, 5 * kMs};  // the controller lowered the cap under a power cap
  for (std::uint64_t i = 0; i < 8; ++i) b.arrive(i, 0.0);
  const BatchDecision d = b.at(0.0);
  ASSERT_TRUE(d.launch());
  EXPECT_EQ(d.items, 4) << "8 is preferred but over the cap: a full batch of 4 instead";
  EXPECT_EQ(d.reason, LaunchReason::full);
}

TEST(Batcher, RequestLargerThanTheKnobCapLaunchesAlone) {
  Batcher b(config_with(16, 5 * kMs));
  b.knobs.max_batch_size = 4;
  b.arrive(1, 0.0, 2);
  b.arrive(2, 0.0, 6);  // fits the config max (16), not the knob cap (4)
  b.arrive(3, 0.0, 1);
  const BatchDecision first = b.at(0.0);
  ASSERT_TRUE(first.launch());
  EXPECT_EQ(first.items, 2) << "the 6-item request cannot join: the 2-item batch is full";
  EXPECT_EQ(first.reason, LaunchReason::full);
  EXPECT_EQ(b.launch(first), (std::vector<std::uint64_t>{1}));
  const BatchDecision second = b.at(0.0);
  ASSERT_TRUE(second.launch());
  EXPECT_EQ(second.items, 6);
  EXPECT_EQ(second.requests, 1u);
  EXPECT_EQ(second.reason, LaunchReason::oversized);
  EXPECT_EQ(b.launch(second), (std::vector<std::uint64_t>{2}));
  EXPECT_TRUE(b.at(0.0).wait()) << "the 1-item request waits for the delay as usual";
}

TEST(Batcher, ControllerShorteningTheDelayLaunchesAWaitingBatch) {
  Batcher b(config_with(8, 10 * kMs));
  b.arrive(1, 0.0);
  const BatchDecision before = b.at(3 * kMs);
  ASSERT_TRUE(before.wait());
  EXPECT_DOUBLE_EQ(before.wake_s, 10 * kMs);
  b.knobs.max_queue_delay_s = 2 * kMs;  // the SLO is at risk: wait less
  const BatchDecision after = b.at(3 * kMs);
  ASSERT_TRUE(after.launch());
  EXPECT_EQ(after.reason, LaunchReason::delay_expired);
}

TEST(Batcher, WakesEarlyForAQueueTimeoutAndThenDropsTheRejectedRequest) {
  BatcherConfig config = config_with(8, 10 * kMs);
  config.default_queue_policy.default_timeout_s = 3 * kMs;
  Batcher b(config);
  b.arrive(1, 0.0);
  b.arrive(2, 2 * kMs);  // deadline 5 ms
  const BatchDecision at2 = b.at(2 * kMs);
  ASSERT_TRUE(at2.wait());
  EXPECT_DOUBLE_EQ(at2.wake_s, 3 * kMs) << "request 1 times out at 3 ms, before the 10-ms delay";
  const ExpiredRequests expired = b.queue.expire(at2.wake_s);
  EXPECT_EQ(expired.rejected_ids, (std::vector<std::uint64_t>{1}));
  const BatchDecision at3 = decide(b.queue, b.knobs, b.config, at2.wake_s);
  ASSERT_TRUE(at3.wait());
  EXPECT_DOUBLE_EQ(at3.wake_s, 5 * kMs) << "now request 2's deadline comes first";
}

TEST(Batcher, DelayedTimeoutRequestIsBatchedAfterFreshOnesOfItsLevel) {
  BatcherConfig config = config_with(2, 0.0);
  config.default_queue_policy.timeout_action = TimeoutAction::delay;
  config.default_queue_policy.default_timeout_s = 1 * kMs;
  Batcher b(config);
  b.knobs.max_queue_delay_s = 0.0;
  b.knobs.max_batch_size = 1;  // one at a time, so order is visible
  b.arrive(1, 0.0);
  b.arrive(2, 1.5 * kMs);
  b.arrive(3, 1.5 * kMs);
  const BatchDecision d = b.at(1.5 * kMs);  // request 1 timed out at 1 ms and was delayed
  ASSERT_TRUE(d.launch());
  EXPECT_EQ(b.launch(d), (std::vector<std::uint64_t>{2}));
  EXPECT_EQ(b.launch(b.at(1.5 * kMs)), (std::vector<std::uint64_t>{3}));
  EXPECT_EQ(b.launch(b.at(1.5 * kMs)), (std::vector<std::uint64_t>{1}));
}

TEST(Batcher, MissedExpireMeansWakeNow) {
  BatcherConfig config = config_with(8, 10 * kMs);
  config.default_queue_policy.default_timeout_s = 1 * kMs;
  Batcher b(config);
  b.arrive(1, 0.0);
  const BatchDecision d = decide(b.queue, b.knobs, b.config, 2 * kMs);  // no expire() first
  ASSERT_TRUE(d.wait());
  EXPECT_DOUBLE_EQ(d.wake_s, 2 * kMs);
}

// A tiny event loop over a worked timeline: arrivals every 1 ms, delay 2.5 ms, cap 4, and an
// engine that takes 3 ms per batch. Expected batches written out by hand.
TEST(Batcher, WorkedTimelineWithABusyEngine) {
  Batcher b(config_with(4, 2.5 * kMs));
  const double engine_s = 3 * kMs;
  std::vector<double> arrivals_s;
  for (int i = 0; i < 10; ++i) arrivals_s.push_back(i * kMs);
  std::size_t next = 0;
  double engine_free_s = 0.0;
  std::vector<std::pair<double, int>> batches;  // launch time, items
  double now_s = 0.0;
  for (int guard = 0; guard < 100 && (next < arrivals_s.size() || !b.queue.empty()); ++guard) {
    while (next < arrivals_s.size() && arrivals_s[next] <= now_s) {
      b.arrive(next, arrivals_s[next]);
      ++next;
    }
    const double next_arrival_s = next < arrivals_s.size() ? arrivals_s[next] : 1e9;
    if (now_s < engine_free_s) {  // busy: nothing launches before the engine is free
      now_s = std::min(engine_free_s, next_arrival_s);
      continue;
    }
    const BatchDecision d = b.at(now_s);
    if (d.launch()) {
      batches.emplace_back(now_s, d.items);
      (void)b.launch(d);
      engine_free_s = now_s + engine_s;
    } else if (d.wait()) {
      now_s = std::min(d.wake_s, next_arrival_s);
    } else {
      now_s = next_arrival_s;
    }
  }
  // 0 ms: request 0 waits until 2.5 ms; requests 1, 2 join; 2.5 ms: delay expires, 3 go.
  // 5.5 ms: engine free, requests 3, 4, 5 queued, oldest (3 ms) waited 2.5 ms: 3 go.
  // 8.5 ms: requests 6, 7, 8 queued, oldest (6 ms) waited 2.5 ms: 3 go.
  // 11.5 ms: request 9 (9 ms) waited 2.5 ms: 1 goes.
  ASSERT_EQ(batches.size(), 4u);
  const double expected_s[] = {2.5 * kMs, 5.5 * kMs, 8.5 * kMs, 11.5 * kMs};
  const int expected_items[] = {3, 3, 3, 1};
  for (std::size_t i = 0; i < batches.size(); ++i) {
    EXPECT_NEAR(batches[i].first, expected_s[i], 1e-12) << "batch " << i;
    EXPECT_EQ(batches[i].second, expected_items[i]) << "batch " << i;
  }
}

TEST(Batcher, ReasonNamesForTracesAndMetrics) {
  EXPECT_STREQ(to_string(LaunchReason::delay_expired), "delay_expired");
  EXPECT_STREQ(to_string(LaunchReason::oversized), "oversized");
  EXPECT_EQ(level_count(config_with(8, 0.0)), 1);
}

}  // namespace
}  // namespace gpucap::serve
