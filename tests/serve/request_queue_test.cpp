#include "gpucap/serve/request_queue.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "gpucap/core/error.hpp"

namespace gpucap::serve {
namespace {

constexpr double kMs = 1e-3;

PendingRequest request(std::uint64_t id, double arrival_s, int items = 1, int priority = 0,
                       std::optional<double> timeout_s = std::nullopt) {
  return PendingRequest{id, items, arrival_s, priority, timeout_s};
}

// Enqueues at the request's arrival time, the way a server does.
EnqueueOutcome add(RequestQueue& queue, const PendingRequest& r) { return queue.enqueue(r, r.arrival_s); }

BatcherConfig two_levels() {
  BatcherConfig config;
  config.max_batch_size = 8;
  config.priority_levels = 2;
  config.default_priority_level = 2;
  return config;
}

// Two levels; level 1's requests time out after 5 ms under DELAY (behind their level).
BatcherConfig two_levels_delaying_level_one() {
  BatcherConfig config = two_levels();
  QueuePolicy delay;
  delay.timeout_action = TimeoutAction::delay;
  delay.default_timeout_s = 5 * kMs;
  config.priority_queue_policy[1] = delay;
  return config;
}

std::vector<std::uint64_t> ids(const std::vector<PendingRequest>& batch) {
  std::vector<std::uint64_t> out;
  for (const auto& r : batch) out.push_back(r.id);
  return out;
}

TEST(RequestQueue, FifoInsideOneLevelAndCountsItems) {
  BatcherConfig config;
  config.max_batch_size = 8;
  RequestQueue queue(config);
  EXPECT_TRUE(queue.empty());
  EXPECT_EQ(add(queue, request(1, 0.0, 2)), EnqueueOutcome::accepted);
  EXPECT_EQ(add(queue, request(2, 1 * kMs, 3)), EnqueueOutcome::accepted);
  EXPECT_EQ(add(queue, request(3, 2 * kMs, 1)), EnqueueOutcome::accepted);
  EXPECT_EQ(queue.size(), 3u);
  EXPECT_EQ(queue.total_items(), 6);
  EXPECT_EQ(queue.level_count(), 1);
  EXPECT_EQ(queue.oldest_arrival_s(), 0.0);
  EXPECT_EQ(ids(queue.pop_batch(2)), (std::vector<std::uint64_t>{1, 2}));
  EXPECT_EQ(queue.size(), 1u);
  EXPECT_EQ(queue.total_items(), 1);
  EXPECT_EQ(queue.oldest_arrival_s(), 2 * kMs);
}

TEST(RequestQueue, HigherPriorityBypassesLowerAndZeroMeansDefaultLevel) {
  RequestQueue queue(two_levels());
  ASSERT_EQ(add(queue, request(10, 0.0, 1, 2)), EnqueueOutcome::accepted);   // low
  ASSERT_EQ(add(queue, request(11, 1 * kMs, 1, 0)), EnqueueOutcome::accepted);  // default = 2, low
  ASSERT_EQ(add(queue, request(12, 2 * kMs, 1, 1)), EnqueueOutcome::accepted);  // high, arrived last
  EXPECT_EQ(queue.size_at_level(1), 1u);
  EXPECT_EQ(queue.size_at_level(2), 2u);
  EXPECT_EQ(queue.ids_in_order(), (std::vector<std::uint64_t>{12, 10, 11}));
  EXPECT_EQ(ids(queue.pop_batch(1)), (std::vector<std::uint64_t>{12}));
  EXPECT_EQ(ids(queue.pop_batch(2)), (std::vector<std::uint64_t>{10, 11}));
  // As in Triton, a priority above the model's levels is the default level too (not an error).
  ASSERT_EQ(add(queue, request(13, 3 * kMs, 1, 7)), EnqueueOutcome::accepted);
  EXPECT_EQ(queue.size_at_level(2), 1u);
}

TEST(RequestQueue, RejectsBadPriorityTooLargeAndMalformedRequests) {
  RequestQueue queue(two_levels());
  EXPECT_EQ(add(queue, request(2, 0.0, 1, -1)), EnqueueOutcome::bad_priority);
  EXPECT_EQ(add(queue, request(3, 0.0, 9)), EnqueueOutcome::too_large) << "config max_batch_size is 8";
  EXPECT_EQ(add(queue, request(4, 0.0, 8)), EnqueueOutcome::accepted) << "exactly the max is fine";
  EXPECT_EQ(add(queue, request(5, 0.0, 0)), EnqueueOutcome::invalid);
  EXPECT_EQ(add(queue, request(6, 0.0, 1, 0, -1.0)), EnqueueOutcome::invalid) << "negative timeout";
  EXPECT_EQ(queue.enqueue(request(7, 0.0), std::nan("")), EnqueueOutcome::invalid);
  EXPECT_EQ(queue.size(), 1u);
  EXPECT_EQ(queue.total_items(), 8);

  BatcherConfig one_level;
  one_level.max_batch_size = 4;
  RequestQueue single(one_level);
  EXPECT_EQ(add(single, request(1, 0.0, 1, 1)), EnqueueOutcome::accepted) << "level 1 is the only level";
  EXPECT_EQ(add(single, request(2, 0.0, 1, 2)), EnqueueOutcome::accepted) << "above the levels: the default level";
  EXPECT_EQ(single.size_at_level(1), 2u);
}

TEST(RequestQueue, FullLevelRejectsWithTritonsMessageAndOtherLevelsStillAccept) {
  BatcherConfig config = two_levels();
  QueuePolicy small;
  small.max_queue_size = 2;
  config.priority_queue_policy[1] = small;  // level 2 keeps the unbounded default
  RequestQueue queue(config);
  EXPECT_EQ(add(queue, request(1, 0.0, 1, 1)), EnqueueOutcome::accepted);
  EXPECT_EQ(add(queue, request(2, 0.0, 1, 1)), EnqueueOutcome::accepted);
  const EnqueueOutcome third = add(queue, request(3, 0.0, 1, 1));
  EXPECT_EQ(third, EnqueueOutcome::queue_full);
  EXPECT_EQ(std::string(describe(third)), "Exceeds maximum queue size");
  EXPECT_EQ(add(queue, request(4, 0.0, 1, 2)), EnqueueOutcome::accepted);
  (void)queue.pop_batch(1);
  EXPECT_EQ(add(queue, request(5, 0.0, 1, 1)), EnqueueOutcome::accepted) << "room again after a pop";
}

TEST(RequestQueue, MemoryIsBoundedByMaxQueueSize) {
  BatcherConfig config;
  config.max_batch_size = 8;
  config.default_queue_policy.max_queue_size = 100;
  RequestQueue queue(config);
  std::size_t rejected = 0;
  for (std::uint64_t i = 0; i < 10000; ++i) {
    if (add(queue, request(i, static_cast<double>(i) * kMs)) == EnqueueOutcome::queue_full) ++rejected;
  }
  EXPECT_EQ(queue.size(), 100u);
  EXPECT_EQ(rejected, 9900u);
  EXPECT_EQ(queue.ids_in_order().front(), 0u) << "the first 100 stay, the rest are refused";
}

TEST(RequestQueue, RejectTimeoutRemovesExpiredRequestsAtTheDeadline) {
  BatcherConfig config;
  config.max_batch_size = 8;
  config.default_queue_policy.default_timeout_s = 5 * kMs;
  RequestQueue queue(config);
  ASSERT_EQ(add(queue, request(1, 0.0, 2)), EnqueueOutcome::accepted);      // deadline 5 ms
  ASSERT_EQ(add(queue, request(2, 3 * kMs, 1)), EnqueueOutcome::accepted);  // deadline 8 ms
  EXPECT_EQ(queue.next_deadline_s(), 5 * kMs);
  EXPECT_TRUE(queue.expire(4 * kMs).rejected_ids.empty());
  const ExpiredRequests at5 = queue.expire(5 * kMs);
  EXPECT_EQ(at5.rejected_ids, (std::vector<std::uint64_t>{1}));
  EXPECT_TRUE(at5.delayed_ids.empty());
  EXPECT_EQ(queue.size(), 1u);
  EXPECT_EQ(queue.total_items(), 1);
  EXPECT_EQ(queue.next_deadline_s(), 8 * kMs);
  EXPECT_EQ(queue.expire(9 * kMs).rejected_ids, (std::vector<std::uint64_t>{2}));
  EXPECT_TRUE(queue.empty());
}

// A request whose caller gave up (a stalled GPU) is taken out wherever it waits, with its items
// and its deadline; an id not queued is left alone.
TEST(RequestQueue, RemoveTakesOutAWaitingOrDelayedRequestWithItsItemsAndDeadline) {
  RequestQueue queue(two_levels_delaying_level_one());
  ASSERT_EQ(add(queue, request(1, 0.0, 2, 1)), EnqueueOutcome::accepted);      // deadline 5 ms
  ASSERT_EQ(add(queue, request(2, 1 * kMs, 3, 1)), EnqueueOutcome::accepted);  // deadline 6 ms
  ASSERT_EQ(add(queue, request(3, 2 * kMs, 1, 2)), EnqueueOutcome::accepted);
  EXPECT_TRUE(queue.remove(2));
  EXPECT_EQ(queue.ids_in_order(), (std::vector<std::uint64_t>{1, 3}));
  EXPECT_EQ(queue.total_items(), 3);
  EXPECT_EQ(queue.next_deadline_s(), 5 * kMs);
  EXPECT_FALSE(queue.remove(2));
  EXPECT_FALSE(queue.remove(99));
  EXPECT_EQ(queue.expire(5 * kMs).delayed_ids, (std::vector<std::uint64_t>{1}));
  EXPECT_TRUE(queue.remove(1));  // from the delayed ones
  EXPECT_EQ(queue.delayed_count(), 0u);
  EXPECT_FALSE(queue.next_deadline_s().has_value());
  EXPECT_EQ(queue.size(), 1u);
  EXPECT_EQ(queue.total_items(), 1);
  EXPECT_EQ(ids(queue.pop_batch(1)), (std::vector<std::uint64_t>{3}));
}

TEST(RequestQueue, DelayTimeoutMovesRequestBehindItsLevelButAheadOfLowerLevels) {
  RequestQueue queue(two_levels_delaying_level_one());
  ASSERT_EQ(add(queue, request(1, 0.0, 1, 1)), EnqueueOutcome::accepted);      // A, deadline 5 ms
  ASSERT_EQ(add(queue, request(2, 4 * kMs, 1, 1)), EnqueueOutcome::accepted);  // B, deadline 9 ms
  ASSERT_EQ(add(queue, request(3, 1 * kMs, 1, 2)), EnqueueOutcome::accepted);  // C, level 2
  EXPECT_EQ(queue.ids_in_order(), (std::vector<std::uint64_t>{1, 2, 3}));

  const ExpiredRequests at6 = queue.expire(6 * kMs);
  EXPECT_TRUE(at6.rejected_ids.empty());
  EXPECT_EQ(at6.delayed_ids, (std::vector<std::uint64_t>{1}));
  EXPECT_EQ(queue.size(), 3u) << "DELAY keeps the request";
  EXPECT_EQ(queue.delayed_count(), 1u);
  EXPECT_EQ(queue.ids_in_order(), (std::vector<std::uint64_t>{2, 1, 3}));
  EXPECT_EQ(queue.next_deadline_s(), 9 * kMs) << "a delayed request has no deadline left";

  EXPECT_EQ(queue.expire(10 * kMs).delayed_ids, (std::vector<std::uint64_t>{2}));
  EXPECT_EQ(queue.ids_in_order(), (std::vector<std::uint64_t>{1, 2, 3})) << "delayed in the order they timed out";
  EXPECT_TRUE(queue.expire(100.0).delayed_ids.empty()) << "nothing expires twice";
  EXPECT_EQ(ids(queue.pop_batch(3)), (std::vector<std::uint64_t>{1, 2, 3}));
}

TEST(RequestQueue, DelayedRequestsStillCountTowardsMaxQueueSize) {
  BatcherConfig config;
  config.max_batch_size = 8;
  config.default_queue_policy.max_queue_size = 2;
  config.default_queue_policy.timeout_action = TimeoutAction::delay;
  config.default_queue_policy.default_timeout_s = 1 * kMs;
  RequestQueue queue(config);
  ASSERT_EQ(add(queue, request(1, 0.0)), EnqueueOutcome::accepted);
  ASSERT_EQ(add(queue, request(2, 0.0)), EnqueueOutcome::accepted);
  ASSERT_EQ(queue.expire(2 * kMs).delayed_ids.size(), 2u);
  EXPECT_EQ(queue.enqueue(request(3, 2 * kMs), 2 * kMs), EnqueueOutcome::queue_full);
  EXPECT_EQ(queue.size(), 2u);
}

TEST(RequestQueue, TimeoutOverrideOnlyShortensAndOnlyWhenAllowed) {
  BatcherConfig config;
  config.max_batch_size = 8;
  config.default_queue_policy.default_timeout_s = 10 * kMs;
  config.default_queue_policy.allow_timeout_override = true;
  RequestQueue queue(config);
  ASSERT_EQ(add(queue, request(1, 0.0, 1, 0, 3 * kMs)), EnqueueOutcome::accepted);
  EXPECT_EQ(queue.next_deadline_s(), 3 * kMs) << "shorter than the default: honoured";
  (void)queue.pop_batch(1);
  ASSERT_EQ(add(queue, request(2, 0.0, 1, 0, 20 * kMs)), EnqueueOutcome::accepted);
  EXPECT_EQ(queue.next_deadline_s(), 10 * kMs) << "longer than the default: ignored";
  (void)queue.pop_batch(1);
  ASSERT_EQ(add(queue, request(3, 0.0, 1, 0, 0.0)), EnqueueOutcome::accepted);
  EXPECT_EQ(queue.next_deadline_s(), 10 * kMs) << "0 means no override";
  (void)queue.pop_batch(1);

  config.default_queue_policy.allow_timeout_override = false;
  RequestQueue strict(config);
  ASSERT_EQ(add(strict, request(4, 0.0, 1, 0, 3 * kMs)), EnqueueOutcome::accepted);
  EXPECT_EQ(strict.next_deadline_s(), 10 * kMs) << "override not allowed";

  // No default timeout counts as an infinitely long one: an allowed override shortens it.
  config.default_queue_policy = QueuePolicy{};
  config.default_queue_policy.allow_timeout_override = true;
  RequestQueue open(config);
  ASSERT_EQ(add(open, request(5, 0.0, 1, 0, 3 * kMs)), EnqueueOutcome::accepted);
  ASSERT_EQ(add(open, request(6, 0.0)), EnqueueOutcome::accepted);
  EXPECT_EQ(open.next_deadline_s(), 3 * kMs);
  EXPECT_EQ(open.expire(3 * kMs).rejected_ids, (std::vector<std::uint64_t>{5}));
  EXPECT_FALSE(open.next_deadline_s().has_value()) << "request 6 never times out";
}

TEST(RequestQueue, TimeoutCountsFromEnqueueTime) {
  BatcherConfig config;
  config.max_batch_size = 8;
  config.default_queue_policy.default_timeout_s = 5 * kMs;
  RequestQueue queue(config);
  // Arrived at 0 but enqueued at 2 ms (parsing took 2 ms): Triton starts the timeout at enqueue.
  ASSERT_EQ(queue.enqueue(request(1, 0.0), 2 * kMs), EnqueueOutcome::accepted);
  EXPECT_EQ(queue.next_deadline_s(), 7 * kMs);
  EXPECT_EQ(queue.oldest_arrival_s(), 0.0) << "the queue delay still counts from arrival";
}

TEST(RequestQueue, PopBatchBeyondSizeIsAnInternalError) {
  BatcherConfig config;
  config.max_batch_size = 4;
  RequestQueue queue(config);
  ASSERT_EQ(add(queue, request(1, 0.0)), EnqueueOutcome::accepted);
  try {
    (void)queue.pop_batch(2);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::internal);
  }
  EXPECT_EQ(queue.size(), 1u) << "nothing was popped";
  EXPECT_TRUE(queue.pop_batch(0).empty());
}

TEST(RequestQueue, ConstructorValidatesTheConfig) {
  BatcherConfig config;
  config.max_batch_size = 0;
  EXPECT_THROW(RequestQueue{config}, Error);
  EXPECT_THROW((void)RequestQueue(two_levels()).size_at_level(3), Error);
}

}  // namespace
}  // namespace gpucap::serve
