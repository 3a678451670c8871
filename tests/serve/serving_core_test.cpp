// The serving core on worked timelines: admission by the controller's rate and queue bound, the
// batcher under run-time knobs, the accounting of every answer; and where the cap comes from.

#include <gtest/gtest.h>

#include <cmath>

#include "gpucap/core/error.hpp"
#include "gpucap/serve/cap_state.hpp"
#include "gpucap/serve/serving_core.hpp"

namespace gpucap::serve {
namespace {

control::ServingKnobs knobs(int batch, double delay_s, double admit = control::kAdmitEverything,
                            double queue = control::kAdmitEverything) {
  control::ServingKnobs k;
  k.max_batch_size = batch;
  k.max_queue_delay_s = delay_s;
  k.admit_rate_rps = admit;
  k.max_queued_items = queue;
  return k;
}

BatcherConfig config(int max_batch) {
  BatcherConfig c;
  c.max_batch_size = max_batch;
  return c;
}

LatencyStatsConfig stats(double slo_s) {
  LatencyStatsConfig s;
  s.slo_s = slo_s;
  return s;
}

PendingRequest request(std::uint64_t id, double at, int items = 1) { return {id, items, at, 0, std::nullopt}; }

TEST(TokenBucket, AdmitsTheRateWithABurstAndSaysWhenToRetry) {
  TokenBucket bucket(10.0, 0.2);  // 10/s, a burst of 2
  EXPECT_TRUE(bucket.take(0.0));
  EXPECT_TRUE(bucket.take(0.0));
  EXPECT_FALSE(bucket.take(0.0));
  EXPECT_NEAR(bucket.wait_s(0.0), 0.1, 1e-12);
  EXPECT_FALSE(bucket.take(0.05));
  EXPECT_TRUE(bucket.take(0.1));
  // Unlimited: everything, no wait.
  TokenBucket all;
  for (int i = 0; i < 1000; ++i) EXPECT_TRUE(all.take(0.0));
  EXPECT_EQ(all.wait_s(0.0), 0.0);
  EXPECT_THROW(TokenBucket(-1.0), Error);
}

// Worked timeline: cap 4, delay 5 ms; requests at 0, 1, 2 ms wait for the delay, then launch
// together; a full batch launches at once.
TEST(ServingCore, LaunchesByTheControllersKnobs) {
  ServingCore core(config(8), stats(0.1), knobs(4, 0.005));
  for (std::uint64_t i = 0; i < 3; ++i) ASSERT_TRUE(core.admit(request(i, 0.001 * static_cast<double>(i)), 0.001 * static_cast<double>(i)).accepted());
  auto step = core.step(0.003);
  EXPECT_FALSE(step.launch);
  ASSERT_TRUE(step.wake_s);
  EXPECT_NEAR(*step.wake_s, 0.005, 1e-12);
  step = core.step(0.005);
  ASSERT_TRUE(step.launch);
  EXPECT_EQ(step.launch->items, 3);
  core.finished(*step.launch, 0.005, 0.020, true);
  for (std::uint64_t i = 3; i < 7; ++i) ASSERT_TRUE(core.admit(request(i, 0.021), 0.021).accepted());
  step = core.step(0.021);
  ASSERT_TRUE(step.launch);
  EXPECT_EQ(step.launch->items, 4);  // the knob's cap, not the model's 8
  EXPECT_EQ(step.launch->reason, LaunchReason::full);
  core.finished(*step.launch, 0.021, 0.200, true);  // 179 ms: beyond the 100-ms SLO
  const auto counts = core.take_window();
  EXPECT_EQ(counts.arrivals, 7u);
  EXPECT_EQ(counts.answered, 7u);
  EXPECT_EQ(counts.good, 3u);
  EXPECT_EQ(counts.batches, 2u);
  EXPECT_NEAR(counts.busy_s, 0.015 + 0.179, 1e-12);
  EXPECT_EQ(core.take_window().arrivals, 0u);  // a fresh window
  EXPECT_EQ(core.totals().answered, 7u);
}

TEST(ServingCore, ShedsByRateAndByQueueBound) {
  // 100/s with a burst of half the 100-ms SLO: 5 at once, then one per 10 ms.
  ServingCore core(config(64), stats(0.1), knobs(8, 0.0, 100.0));
  int accepted = 0;
  int shed = 0;
  for (std::uint64_t i = 0; i < 20; ++i) {
    const auto a = core.admit(request(i, 0.0), 0.0);
    if (a.accepted()) ++accepted;
    if (a.result == AdmissionResult::shed) {
      ++shed;
      EXPECT_GT(a.retry_after_s, 0.0);
      EXPECT_NE(a.message.find("shedding"), std::string::npos);
    }
  }
  EXPECT_EQ(accepted, 5);
  EXPECT_EQ(shed, 15);
  // The queue bound: 10 items at most queued; the one that would exceed it is shed, however many
  // tokens there are.
  ServingCore bounded(config(64), stats(0.1), knobs(8, 0.0, control::kAdmitEverything, 10.0));
  for (std::uint64_t i = 0; i < 5; ++i) ASSERT_TRUE(bounded.admit(request(i, 0.0, 2), 0.0).accepted());
  EXPECT_EQ(bounded.admit(request(9, 0.0, 1), 0.0).result, AdmissionResult::shed);
  EXPECT_EQ(bounded.queued_items(), 10);
  // A request larger than the model's bound is refused (400), not shed.
  EXPECT_EQ(bounded.admit(request(10, 0.0, 65), 0.0).result, AdmissionResult::too_large);
}

// The bound counts what a request would wait behind or beside: a high-priority request is not shed
// behind a low-priority backlog (Triton bounds each level's queue), a low one is.
TEST(ServingCore, TheQueueBoundCountsTheLevelsARequestWaitsBehind) {
  BatcherConfig two = config(64);
  two.priority_levels = 2;
  two.default_priority_level = 2;
  ServingCore core(two, stats(0.1), knobs(8, 0.0, control::kAdmitEverything, 4.0));
  auto low = [](std::uint64_t id) { return PendingRequest{id, 1, 0.0, 2, std::nullopt}; };
  auto high = [](std::uint64_t id) { return PendingRequest{id, 1, 0.0, 1, std::nullopt}; };
  for (std::uint64_t i = 0; i < 4; ++i) ASSERT_TRUE(core.admit(low(i), 0.0).accepted());
  EXPECT_EQ(core.admit(low(4), 0.0).result, AdmissionResult::shed);
  EXPECT_FALSE(core.shed_on_arrival(0.0).has_value()) << "a request of the highest level would be let in";
  EXPECT_TRUE(core.admit(high(5), 0.0).accepted());
  for (std::uint64_t i = 6; i < 9; ++i) ASSERT_TRUE(core.admit(high(i), 0.0).accepted());
  EXPECT_EQ(core.admit(high(9), 0.0).result, AdmissionResult::shed) << "four of its own level are queued";
  EXPECT_TRUE(core.shed_on_arrival(0.0).has_value());
  // A place held at the headers for what turns out a low-priority request is checked at admission.
  ServingCore held(two, stats(0.1), knobs(8, 0.0, control::kAdmitEverything, 4.0));
  for (std::uint64_t i = 0; i < 4; ++i) ASSERT_TRUE(held.admit(low(i), 0.0).accepted());
  ASSERT_FALSE(held.shed_or_hold(0.0).has_value());
  EXPECT_EQ(held.admit(low(4), 0.0, true).result, AdmissionResult::shed);
  ASSERT_FALSE(held.shed_or_hold(0.0).has_value());
  EXPECT_TRUE(held.admit(high(5), 0.0, true).accepted());
  // A bound below a request's size lets it in when nothing is ahead of it, whatever waits below.
  ServingCore tight(two, stats(0.1), knobs(8, 0.0, control::kAdmitEverything, 1.4));
  ASSERT_TRUE(tight.admit(low(0), 0.0).accepted());
  EXPECT_TRUE(tight.admit(PendingRequest{1, 2, 0.0, 1, std::nullopt}, 0.0).accepted());
  EXPECT_EQ(tight.admit(PendingRequest{2, 2, 0.0, 2, std::nullopt}, 0.0).result, AdmissionResult::shed);
}

// Before a request's body is read, a server asks whether it is shed whatever its size: only when
// the admit rate has no token or the queue is over its bound even for one item; then it counts
// as an arrival shed. Otherwise nothing is counted or taken, and admit() decides.
TEST(ServingCore, ShedsOnArrivalOnlyWhatAnySizeWouldBeShed) {
  ServingCore core(config(64), stats(0.1), knobs(8, 0.0, 100.0));  // 5 tokens, then one per 10 ms
  for (int i = 0; i < 5; ++i) EXPECT_FALSE(core.shed_on_arrival(0.0).has_value());
  EXPECT_EQ(core.totals().arrivals, 0U);
  for (std::uint64_t i = 0; i < 5; ++i) ASSERT_TRUE(core.admit(request(i, 0.0), 0.0).accepted());
  const auto shed = core.shed_on_arrival(0.0);
  ASSERT_TRUE(shed.has_value());
  EXPECT_EQ(shed->result, AdmissionResult::shed);
  EXPECT_NEAR(shed->retry_after_s, 0.01, 1e-9);
  EXPECT_NE(shed->message.find("100 requests/s admitted"), std::string::npos) << shed->message;
  EXPECT_EQ(core.totals().arrivals, 6U);
  EXPECT_EQ(core.totals().shed, 1U);
  // 10 ms later a token is back: not shed on arrival, and admit() takes it.
  EXPECT_FALSE(core.shed_on_arrival(0.010).has_value());
  EXPECT_TRUE(core.admit(request(6, 0.010), 0.010).accepted());
  EXPECT_EQ(core.totals().arrivals, 7U);
  // The queue's bound: 10 items queued; one more item of any request is over it.
  ServingCore bounded(config(64), stats(0.1), knobs(8, 0.0, control::kAdmitEverything, 10.0));
  for (std::uint64_t i = 0; i < 4; ++i) ASSERT_TRUE(bounded.admit(request(i, 0.0, 2), 0.0).accepted());
  EXPECT_FALSE(bounded.shed_on_arrival(0.0).has_value());  // 8 queued: a 1-item request fits
  ASSERT_TRUE(bounded.admit(request(4, 0.0, 2), 0.0).accepted());
  const auto full = bounded.shed_on_arrival(0.0);
  ASSERT_TRUE(full.has_value());
  EXPECT_NE(full->message.find("its queue holds"), std::string::npos) << full->message;
  EXPECT_DOUBLE_EQ(full->retry_after_s, 0.1);  // the SLO: the queue drains within it
}

// A request let through as its headers came in holds its place (a token, one item of the queue's
// room) while its body arrives: others arriving meanwhile cannot take it, and its admission on the
// place does not decide again. A place given back is room again.
TEST(ServingCore, APlaceHeldAtTheHeadersIsKeptForItsRequest) {
  ServingCore core(config(64), stats(0.1), knobs(8, 0.0, 100.0, 4.0));  // 5 tokens; 4 items queued at most
  for (std::uint64_t i = 0; i < 2; ++i) ASSERT_TRUE(core.admit(request(i, 0.0), 0.0).accepted());
  EXPECT_FALSE(core.shed_or_hold(0.0).has_value());  // held: 2 queued + 1 held
  EXPECT_EQ(core.held_places(), 1);
  EXPECT_EQ(core.totals().arrivals, 2U);  // counted when it is admitted
  ASSERT_TRUE(core.admit(request(2, 0.0), 0.0).accepted());  // 3 queued + 1 held: the bound
  EXPECT_EQ(core.admit(request(3, 0.0), 0.0).result, AdmissionResult::shed);
  ASSERT_TRUE(core.shed_on_arrival(0.0).has_value());
  // Its body is in: admitted on its place, though the queue is at its bound.
  ASSERT_TRUE(core.admit(request(4, 0.0), 0.0, /*held=*/true).accepted());
  EXPECT_EQ(core.held_places(), 0);
  EXPECT_EQ(core.queued_items(), 4);
  // A place whose body never came is given back: the room is free again.
  ServingCore bounded(config(64), stats(0.1), knobs(8, 0.0, control::kAdmitEverything, 2.0));
  ASSERT_TRUE(bounded.admit(request(0, 0.0), 0.0).accepted());
  EXPECT_FALSE(bounded.shed_or_hold(0.0).has_value());
  EXPECT_EQ(bounded.admit(request(1, 0.0), 0.0).result, AdmissionResult::shed);
  bounded.give_back_place();
  EXPECT_TRUE(bounded.admit(request(2, 0.0), 0.0).accepted());
  EXPECT_TRUE(bounded.shed_or_hold(0.0).has_value());  // 2 queued: full, nothing held
  EXPECT_EQ(bounded.held_places(), 0);
  // On a held place, a request of more than one item is checked as any other.
  ServingCore three(config(64), stats(0.1), knobs(8, 0.0, control::kAdmitEverything, 3.0));
  EXPECT_FALSE(three.shed_or_hold(0.0).has_value());
  EXPECT_FALSE(three.shed_or_hold(0.0).has_value());
  ASSERT_TRUE(three.admit(request(0, 0.0), 0.0).accepted());  // 1 queued + 2 held
  EXPECT_EQ(three.admit(request(1, 0.0, 3), 0.0, true).result, AdmissionResult::shed);  // 1 + 1 + 3 > 3
  ASSERT_TRUE(three.admit(request(2, 0.0, 2), 0.0, true).accepted());                   // 1 + 0 + 2
  EXPECT_EQ(three.held_places(), 0);
}

// Places held for bodies still coming take at most half the queue's bound (at least one), so that
// clients that send headers and nothing more cannot have every other request shed.
TEST(ServingCore, AtMostHalfTheQueueIsHeldForBodiesStillComing) {
  ServingCore core(config(64), stats(0.1), knobs(8, 0.0, control::kAdmitEverything, 5.0));
  EXPECT_TRUE(core.may_hold());
  EXPECT_FALSE(core.shed_or_hold(0.0).has_value());
  EXPECT_TRUE(core.may_hold());
  EXPECT_FALSE(core.shed_or_hold(0.0).has_value());
  EXPECT_FALSE(core.may_hold());  // 2 held: floor(5 / 2)
  EXPECT_TRUE(core.admit(request(0, 0.0), 0.0).accepted());  // a whole request still finds room
  core.give_back_place();
  EXPECT_TRUE(core.may_hold());
  // Everything admitted: no bound, any number held.
  ServingCore unbounded(config(64), stats(0.1), knobs(8, 0.0));
  for (int i = 0; i < 100; ++i) ASSERT_FALSE(unbounded.shed_or_hold(0.0).has_value());
  EXPECT_TRUE(unbounded.may_hold());
  ServingCore one(config(64), stats(0.1), knobs(8, 0.0, control::kAdmitEverything, 1.0));
  EXPECT_TRUE(one.may_hold());
  EXPECT_FALSE(one.shed_or_hold(0.0).has_value());
  EXPECT_FALSE(one.may_hold());
}

TEST(ServingCore, AFailedBatchFailsItsRequestsAndTimeoutsAreAnswered) {
  auto c = config(8);
  c.default_queue_policy.default_timeout_s = 0.05;
  ServingCore core(c, stats(0.1), knobs(8, 1.0));  // a long delay: the timeout comes first
  ASSERT_TRUE(core.admit(request(1, 0.0), 0.0).accepted());
  auto step = core.step(0.06);
  ASSERT_EQ(step.timed_out, std::vector<std::uint64_t>{1});
  EXPECT_EQ(core.queued_requests(), 0u);
  ServingCore core2(config(8), stats(0.1), knobs(8, 0.0));
  ASSERT_TRUE(core2.admit(request(2, 0.0), 0.0).accepted());
  step = core2.step(0.0);
  ASSERT_TRUE(step.launch);
  core2.finished(*step.launch, 0.0, 0.01, false);
  const auto counts = core2.take_window();
  EXPECT_EQ(counts.failed, 1u);
  EXPECT_EQ(counts.answered, 0u);
  EXPECT_LT(core2.slo(0.01).slo_attainment, 1.0);
}

TEST(CapFile, ANumberOrJsonElseOneClearError) {
  EXPECT_EQ(parse_cap_file("250\n", "f"), 250.0);
  EXPECT_EQ(parse_cap_file("  180.5 W ", "f"), 180.5);
  EXPECT_EQ(parse_cap_file(R"({"watts": 200})", "f"), 200.0);
  for (const char* bad : {"", "  ", "lots", "-5", "0", "nan", "inf", "250 watts", "{\"w\": 1}", "{\"watts\": \"200\"}", "{"}) {
    try {
      (void)parse_cap_file(bad, "cap.txt");
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::invalid_data) << bad;
      EXPECT_EQ(std::string(e.what()).rfind("cap.txt: ", 0), 0u) << e.what();
    }
  }
  EXPECT_THROW((void)parse_cap_file(std::string(5000, '1'), "f"), Error);
}

// The cap set last wins: a schedule's step counts as set at its time.
TEST(CapState, TheCapSetLastIsInForce) {
  CapState cap(CapSchedule::parse("0:250,10:180"), "schedule", 30.0, 400.0);
  EXPECT_EQ(cap.at(5.0).cap_w, 250.0);
  EXPECT_EQ(cap.at(5.0).source, "schedule");
  cap.set(200.0, "admin", 6.0);
  EXPECT_EQ(cap.at(7.0).cap_w, 200.0);
  EXPECT_EQ(cap.at(7.0).source, "admin");
  EXPECT_EQ(cap.at(11.0).cap_w, 180.0);  // the schedule's next step is later
  EXPECT_EQ(cap.at(11.0).source, "schedule");
  cap.set(220.0, "file", 12.0);
  EXPECT_EQ(cap.at(13.0).cap_w, 220.0);
  EXPECT_EQ(cap.next_change_s(5.0), 10.0);
  EXPECT_TRUE(std::isinf(cap.next_change_s(10.0)));
  // Out of range: nothing changes.
  EXPECT_THROW(cap.set(500.0, "admin", 14.0), Error);
  EXPECT_THROW(cap.set(std::nan(""), "admin", 14.0), Error);
  EXPECT_EQ(cap.at(15.0).cap_w, 220.0);
  cap.note_error("file", "not a number");
  EXPECT_EQ(cap.error("file"), "not a number");
  cap.set(210.0, "file", 16.0);
  EXPECT_FALSE(cap.error("file").has_value());
  EXPECT_THROW(CapState(CapSchedule::constant(10.0), "flag", 30.0, 400.0), Error);
  // A time before a set reads the cap in force then: a sample drawn before a PUT and read after it
  // is judged against the cap it was drawn under.
  EXPECT_EQ(cap.at(15.5).cap_w, 220.0);
  EXPECT_EQ(cap.at(11.5).cap_w, 180.0);
  EXPECT_EQ(cap.at(11.5).source, "schedule");
  EXPECT_EQ(cap.at(8.0).cap_w, 200.0);
  EXPECT_EQ(cap.at(5.0).cap_w, 250.0);
  EXPECT_EQ(cap.at(16.0).cap_w, 210.0);
  // Past the sets kept (64), a time before the oldest kept reads the newest dropped (exact while
  // it was set by then; before it, the nearest known).
  CapState busy(CapSchedule::constant(250.0), "flag", 30.0, 400.0);
  for (int i = 0; i < 70; ++i) busy.set(100.0 + i, "cluster", 1.0 + i);
  EXPECT_EQ(busy.at(6.5).cap_w, 105.0);
  EXPECT_EQ(busy.at(7.0).cap_w, 106.0);
  EXPECT_EQ(busy.at(0.5).cap_w, 105.0);
  EXPECT_EQ(busy.at(69.5).cap_w, 168.0);
  EXPECT_EQ(busy.at(100.0).cap_w, 169.0);
}

TEST(CapState, SetsThatArriveOutOfOrderCountByTheirTimes) {
  // Two PUTs read the clock (5.001, then 5.000 on another thread) before they take the lock, and
  // reach it in the other order; a schedule step falls between them.
  CapState cap(CapSchedule::parse("0:250,5.0005:180"), "schedule", 30.0, 400.0);
  cap.set(200.0, "admin", 5.001);
  cap.set(210.0, "admin", 5.000);
  EXPECT_EQ(cap.at(5.0002).cap_w, 210.0);  // the earlier PUT, before the step
  EXPECT_EQ(cap.at(5.0007).cap_w, 180.0);  // the step, before the later PUT
  EXPECT_EQ(cap.at(5.002).cap_w, 200.0);   // the later PUT: set last, in force
  EXPECT_EQ(cap.at(5.002).source, "admin");
}

}  // namespace
}  // namespace gpucap::serve
