// ServingRuntime (serve/serving_runtime.hpp): the GPU thread that runs the serving loop beside the
// HTTP threads, on the twin paced to the wall clock.

#include "gpucap/serve/serving_runtime.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <future>
#include <limits>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "gpucap/control/serving.hpp"
#include "gpucap/core/error.hpp"
#include "gpucap/device/device.hpp"
#include "gpucap/runtime/sim_platform.hpp"
#include "gpucap/sim/catalog.hpp"
#include "support/paths.hpp"

namespace gpucap::serve {
namespace {

using Clock = std::chrono::steady_clock;

const sim::Catalog& catalog() {
  static const auto c = sim::Catalog::load(test::data_dir());
  return c;
}

// What a runtime runs on: the twin A100 with ResNet-50, the static controller, a 250-W cap.
struct TwinA100 {
  const sim::ModelSpec& model = catalog().model("resnet50");
  runtime::SimPlatform platform{catalog().gpu("a100"), model, model.precision, runtime::SimOptions{}};
  control::StaticServing controller{control::BatcherDefaults{8, 0.0}, platform.controller_limits()};
  CapState cap{CapSchedule::constant(250.0), "flag", 100.0, 400.0};
};

// Each request its own batch, and the batch timeout after which the GPU counts as stalled.
RuntimeOptions one_request_batches(double batch_timeout_s) {
  RuntimeOptions options;
  options.batcher.max_batch_size = 1;
  options.batch_timeout_s = batch_timeout_s;
  return options;
}

// A request submitted while the GPU thread runs a sink (without the runtime's lock) must be
// launched as soon as the sink returns: the thread's wake call must not be lost while it does not
// wait. Before the fix the thread went to sleep on the wake time it had computed before the
// sink — with an empty queue, up to half a second later.
TEST(ServingRuntime, ARequestSubmittedWhileAWindowIsExportedIsLaunchedAtOnce) {
  TwinA100 twin;
  RuntimeOptions options;
  options.batcher.max_batch_size = 8;

  std::atomic<bool> submitted{false};
  Clock::time_point submitted_at;
  std::promise<Clock::time_point> launched;
  // Set once the runtime exists; its GPU thread starts in its constructor.
  std::atomic<ServingRuntime*> runtime_in_sink{nullptr};
  std::future<Answer> answer;
  const auto executor = [&](ServingLoop& loop, const Launch& launch) {
    if (submitted) launched.set_value(Clock::now());
    return loop.execute(launch);
  };
  const auto on_window = [&](const ServingWindow&) {
    if (runtime_in_sink.load() == nullptr || submitted.exchange(true)) return;
    submitted_at = Clock::now();
    answer = runtime_in_sink.load()->submit(1, 1, 0, std::nullopt);
  };
  ServingRuntime runtime(twin.platform, twin.controller, twin.cap, options, executor, on_window);
  runtime_in_sink.store(&runtime);

  // The first window closes after the static controller's period (1 s).
  auto launch = launched.get_future();
  ASSERT_EQ(launch.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  const auto waited = launch.get() - submitted_at;
  EXPECT_LT(std::chrono::duration<double>(waited).count(), 0.25)
      << "the request waited for the GPU thread's next wake time";
  EXPECT_EQ(answer.get().kind, AnswerKind::ok);
  (void)runtime.drain();
}

// A batch that does not return (a hung engine or driver) must not hold every request: past the
// batch timeout the runtime says it is stalled, so that waiting callers can give up, new requests
// are answered `stalled` at once and readiness fails; when the batch returns, it serves again.
TEST(ServingRuntime, ABatchPastItsTimeoutStallsTheRuntimeUntilItReturns) {
  TwinA100 twin;
  const auto options = one_request_batches(2.0);

  std::promise<void> entered;
  std::promise<void> release;
  auto released = release.get_future().share();
  std::mutex launched_mutex;
  std::vector<std::uint64_t> launched;
  const auto executor = [&, released](ServingLoop& loop, const Launch& launch) {
    {
      const std::lock_guard lock(launched_mutex);
      for (const auto& r : launch.requests) launched.push_back(r.id);
    }
    if (launch.requests.front().id == 1) {
      entered.set_value();
      released.wait();  // the hung batch
    }
    return loop.execute(launch);
  };
  ServingRuntime runtime(twin.platform, twin.controller, twin.cap, options, executor);
  auto first = runtime.submit(1, 1, 0, std::nullopt);
  ASSERT_EQ(entered.get_future().wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_TRUE(runtime.serving());  // within its timeout a batch is only slow
  auto queued = runtime.submit(2, 1, 0, std::nullopt);  // behind the batch: admitted
  auto withdrawn = runtime.submit(5, 1, 0, std::nullopt);  // also queued; its caller will give up

  const auto give_up = Clock::now() + std::chrono::seconds(10);
  while (!runtime.stalled() && Clock::now() < give_up) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_TRUE(runtime.stalled());
  EXPECT_FALSE(runtime.serving());
  EXPECT_EQ(runtime.stalled_answer().kind, AnswerKind::stalled);
  auto refused = runtime.submit(3, 1, 0, std::nullopt);
  ASSERT_EQ(refused.wait_for(std::chrono::seconds(0)), std::future_status::ready) << "answered at once";
  const auto stalled = refused.get();
  EXPECT_EQ(stalled.kind, AnswerKind::stalled);
  EXPECT_NE(stalled.message.find("has not finished its batch in 2 s"), std::string::npos) << stalled.message;
  EXPECT_EQ(first.wait_for(std::chrono::seconds(0)), std::future_status::timeout);
  // A caller that gives up takes a queued request out (it is answered and will never run); one in
  // the stalled batch cannot be.
  using W = ServingRuntime::Withdrawal;
  EXPECT_EQ(runtime.withdraw(5), W::withdrawn);
  ASSERT_EQ(withdrawn.wait_for(std::chrono::seconds(0)), std::future_status::ready);
  EXPECT_EQ(withdrawn.get().kind, AnswerKind::stalled);
  EXPECT_EQ(runtime.withdraw(5), W::in_batch);  // answered already
  EXPECT_EQ(runtime.withdraw(1), W::in_batch);
  EXPECT_EQ(runtime.counts().failed, 1U);

  release.set_value();
  ASSERT_EQ(first.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_EQ(first.get().kind, AnswerKind::ok);
  ASSERT_EQ(queued.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_EQ(queued.get().kind, AnswerKind::ok);
  EXPECT_FALSE(runtime.stalled());
  EXPECT_TRUE(runtime.serving());
  EXPECT_EQ(runtime.withdraw(2), W::not_stalled);  // a caller that looked just before: nothing done
  auto after = runtime.submit(4, 1, 0, std::nullopt);
  ASSERT_EQ(after.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_EQ(after.get().kind, AnswerKind::ok);
  (void)runtime.drain();
  const std::lock_guard lock(launched_mutex);
  EXPECT_EQ(launched, (std::vector<std::uint64_t>{1, 2, 4})) << "the withdrawn request never ran";
}

// SIGTERM beside a batch that does not return: once the batch is past its timeout, a drain told to
// give up answers every admitted request, puts the GPU's settings back while the batch still runs,
// and leaves the GPU thread in it; the batch, when it returns, touches nothing more.
TEST(ServingRuntime, ADrainThatGivesUpAnswersEveryoneAndRestoresTheGpuBesideAHungBatch) {
  TwinA100 twin;
  const auto options = one_request_batches(0.3);

  std::promise<void> entered;
  std::promise<void> release;
  std::once_flag released_once;
  const auto release_batch = [&] { std::call_once(released_once, [&] { release.set_value(); }); };
  auto released = release.get_future().share();
  std::atomic<int> batches{0};
  const auto executor = [&, released](ServingLoop& loop, const Launch& launch) {
    ++batches;
    if (launch.requests.front().id == 1) {
      entered.set_value();
      released.wait();
    }
    return loop.execute(launch);
  };
  // A drain that never gives up would hold the test: the batch is let go after 20 s regardless,
  // and the checks below then fail instead.
  std::promise<void> test_done;
  const std::jthread watchdog([&, done = test_done.get_future()] {
    if (done.wait_for(std::chrono::seconds(20)) == std::future_status::timeout) release_batch();
  });
  // Destroyed before the watchdog, which it lets go, also when an ASSERT below returns early.
  const std::shared_ptr<void> done(nullptr, [&](void*) { test_done.set_value(); });
  {
    ServingRuntime runtime(twin.platform, twin.controller, twin.cap, options, executor);
    // Declared after the runtime, so run before its destructor joins the GPU thread, also when an
    // ASSERT below returns early.
    const std::shared_ptr<void> let_go(nullptr, [&](void*) { release_batch(); });
    auto in_batch = runtime.submit(1, 1, 0, std::nullopt);
    ASSERT_EQ(entered.get_future().wait_for(std::chrono::seconds(10)), std::future_status::ready);
    auto queued = runtime.submit(2, 1, 0, std::nullopt);
    // The GPU thread is in the executor, before the twin: the twin is the test's to read.
    EXPECT_TRUE(twin.platform.twin().power_limit_set()) << "the static setting puts the power limit at the cap";

    const auto asked = Clock::now();
    (void)runtime.drain(ServingRuntime::HungBatch::give_up);
    const double waited_s = std::chrono::duration<double>(Clock::now() - asked).count();
    EXPECT_LT(waited_s, 5.0) << "the drain waited for the hung batch";
    EXPECT_TRUE(runtime.abandoned());
    EXPECT_FALSE(runtime.abandoned_in_device_call()) << "it gave up on a batch";
    EXPECT_EQ(runtime.abandoned_restore_error(), std::nullopt);
    for (auto* answer : {&in_batch, &queued}) {
      ASSERT_EQ(answer->wait_for(std::chrono::seconds(0)), std::future_status::ready);
      const auto a = answer->get();
      EXPECT_EQ(a.kind, AnswerKind::stopping);
      EXPECT_NE(a.message.find("stopped before this request's batch ended"), std::string::npos) << a.message;
    }
    EXPECT_FALSE(twin.platform.twin().power_limit_set()) << "the GPU's settings were not put back";
    EXPECT_EQ(runtime.submit(3, 1, 0, std::nullopt).get().kind, AnswerKind::stopping);
    EXPECT_FALSE(runtime.serving());
  }
  EXPECT_EQ(batches.load(), 1) << "a request queued behind the hung batch ran after the drain gave up";
  EXPECT_FALSE(twin.platform.twin().power_limit_set());
}

// The twin's device behind a switch: while held, a write waits before it reaches the twin (a driver
// that hangs in a knob write between batches).
class HoldableDevice final : public device::Device {
 public:
  explicit HoldableDevice(device::Device& inner) : inner_(inner) {}
  void hold() {
    const std::lock_guard lock(mutex_);
    held_ = true;
  }
  void let_go() {
    {
      const std::lock_guard lock(mutex_);
      held_ = false;
    }
    changed_.notify_all();
  }
  // Whether a write waits now, within `timeout_s`.
  bool wait_until_a_write_waits(double timeout_s) {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, std::chrono::duration<double>(timeout_s), [this] { return waiting_; });
  }

  [[nodiscard]] std::string name() const override { return inner_.name(); }
  [[nodiscard]] bool simulated() const override { return inner_.simulated(); }
  [[nodiscard]] bool has_signal(device::Signal signal) const override { return inner_.has_signal(signal); }
  [[nodiscard]] double read(device::Signal signal) override { return inner_.read(signal); }
  [[nodiscard]] bool has_control(device::Control control) const override { return inner_.has_control(control); }
  [[nodiscard]] bool can_write(device::Control control) const override { return inner_.can_write(control); }
  [[nodiscard]] device::ControlRange range(device::Control control) const override { return inner_.range(control); }
  [[nodiscard]] device::ControlValue read_control(device::Control control) override { return inner_.read_control(control); }
  void write_control(device::Control control, device::ControlValue value) override {
    {
      std::unique_lock lock(mutex_);
      waiting_ = held_;
      changed_.notify_all();
      changed_.wait(lock, [this] { return !held_; });
      waiting_ = false;
    }
    inner_.write_control(control, value);
  }

 private:
  device::Device& inner_;
  std::mutex mutex_;
  std::condition_variable changed_;
  bool held_ = false;
  bool waiting_ = false;
};

// The twin A100 with its device behind that switch.
class HoldablePlatform final : public runtime::Platform {
 public:
  explicit HoldablePlatform(runtime::SimPlatform& twin) : twin_(twin), device_(twin.device()) {}
  [[nodiscard]] bool simulated() const override { return true; }
  [[nodiscard]] std::string description() const override { return twin_.description(); }
  [[nodiscard]] runtime::Clock& clock() override { return twin_.clock(); }
  [[nodiscard]] engine::Engine& engine() override { return twin_.engine(); }
  [[nodiscard]] device::Device& device() override { return device_; }
  [[nodiscard]] runtime::PowerMeter& meter() override { return twin_.meter(); }
  [[nodiscard]] control::PlatformLimits controller_limits() const override { return twin_.controller_limits(); }
  [[nodiscard]] double power_settle_s() const override { return twin_.power_settle_s(); }
  void settle() override { twin_.settle(); }
  void wait(double seconds) override { twin_.wait(seconds); }
  HoldableDevice& holdable() { return device_; }

 private:
  runtime::SimPlatform& twin_;
  HoldableDevice device_;
};

// A driver that hangs in a knob write between batches (here: the power limit for a new cap) must
// not hold the server: requests are still taken while it waits, past the batch timeout the GPU
// counts as stalled (new requests answered at once, a waiting caller may withdraw its queued
// request), and a drain told to give up does, without a restore beside the call in the driver
// (which would race it), saying so.
TEST(ServingRuntime, ADriverThatHangsBetweenBatchesStallsTheRuntimeAndTheDrainGivesUpOnIt) {
  TwinA100 twin;
  HoldablePlatform platform(twin.platform);
  // Long enough that the checks made while the call is only slow come first, also under TSan.
  const auto options = one_request_batches(1.5);
  const auto executor = [](ServingLoop& loop, const Launch& launch) { return loop.execute(launch); };
  // Let go after 20 s regardless, so that a runtime that never gives up fails the checks below
  // instead of holding the test.
  std::promise<void> test_done;
  const std::jthread watchdog([&, done = test_done.get_future()] {
    if (done.wait_for(std::chrono::seconds(20)) == std::future_status::timeout) platform.holdable().let_go();
  });
  const std::shared_ptr<void> done(nullptr, [&](void*) { test_done.set_value(); });
  {
    ServingRuntime runtime(platform, twin.controller, twin.cap, options, executor);
    const std::shared_ptr<void> let_go(nullptr, [&](void*) { platform.holdable().let_go(); });
    EXPECT_EQ(runtime.submit(1, 1, 0, std::nullopt).get().kind, AnswerKind::ok);

    platform.holdable().hold();
    twin.cap.set(200.0, "admin", runtime.now_s());
    runtime.cap_changed();  // the static setting answers with the power limit at 200 W: a write
    ASSERT_TRUE(platform.holdable().wait_until_a_write_waits(10.0));
    const auto asked = Clock::now();
    auto queued = runtime.submit(2, 1, 0, std::nullopt);
    EXPECT_TRUE(runtime.serving()) << "within its timeout a call is only slow";
    EXPECT_LT(std::chrono::duration<double>(Clock::now() - asked).count(), 0.2)
        << "a request waited for the call in the driver";

    const auto give_up = Clock::now() + std::chrono::seconds(10);
    while (!runtime.stalled() && Clock::now() < give_up) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    ASSERT_TRUE(runtime.stalled());
    EXPECT_FALSE(runtime.serving());
    auto refused = runtime.submit(3, 1, 0, std::nullopt);
    ASSERT_EQ(refused.wait_for(std::chrono::seconds(0)), std::future_status::ready) << "answered at once";
    const auto stalled = refused.get();
    EXPECT_EQ(stalled.kind, AnswerKind::stalled);
    EXPECT_NE(stalled.message.find("the GPU's driver has not answered a settings call in 1.5 s"), std::string::npos)
        << stalled.message;
    EXPECT_EQ(runtime.withdraw(2), ServingRuntime::Withdrawal::withdrawn);
    ASSERT_EQ(queued.wait_for(std::chrono::seconds(0)), std::future_status::ready);
    EXPECT_EQ(queued.get().kind, AnswerKind::stalled);
    EXPECT_EQ(runtime.stalled_answer().message, stalled.message);

    const auto drain_asked = Clock::now();
    (void)runtime.drain(ServingRuntime::HungBatch::give_up);
    EXPECT_LT(std::chrono::duration<double>(Clock::now() - drain_asked).count(), 5.0);
    EXPECT_TRUE(runtime.abandoned());
    const auto error = runtime.abandoned_restore_error();
    ASSERT_TRUE(error.has_value());
    EXPECT_NE(error->find("has not returned in 1.5 s"), std::string::npos) << *error;
    EXPECT_TRUE(runtime.abandoned_in_device_call());
    EXPECT_EQ(runtime.submit(4, 1, 0, std::nullopt).get().kind, AnswerKind::stopping);
  }  // the write is let go, the GPU thread ends without touching the loop again, and is joined
}

// A drain told to give up on a hung batch waits for one that is only slow: within its timeout the
// batch returns and the drain ends as an ordinary one.
TEST(ServingRuntime, ADrainThatMayGiveUpStillWaitsForASlowBatch) {
  TwinA100 twin;
  const auto options = one_request_batches(5.0);
  std::promise<void> entered;
  const auto executor = [&](ServingLoop& loop, const Launch& launch) {
    entered.set_value();
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    return loop.execute(launch);
  };
  ServingRuntime runtime(twin.platform, twin.controller, twin.cap, options, executor);
  auto answer = runtime.submit(1, 1, 0, std::nullopt);
  ASSERT_EQ(entered.get_future().wait_for(std::chrono::seconds(10)), std::future_status::ready);
  const auto totals = runtime.drain(ServingRuntime::HungBatch::give_up);
  EXPECT_FALSE(runtime.abandoned());
  ASSERT_EQ(answer.wait_for(std::chrono::seconds(0)), std::future_status::ready);
  EXPECT_EQ(answer.get().kind, AnswerKind::ok);
  EXPECT_GE(totals.windows, 1) << "the last window is closed as in any drain";
}

// The engine's warm-up (RuntimeOptions::prepare) runs on the thread that then runs the batches
// (PyTorch keeps cuDNN's plans per thread), before any GPU setting is written.
TEST(ServingRuntime, PrepareRunsOnTheGpuThreadBeforeAnythingIsSet) {
  TwinA100 twin;
  auto options = one_request_batches(5.0);
  std::thread::id prepared_on;
  bool limit_set_while_preparing = true;
  options.prepare = [&] {
    prepared_on = std::this_thread::get_id();
    limit_set_while_preparing = twin.platform.twin().power_limit_set();
  };
  std::promise<std::thread::id> ran_on;
  const auto executor = [&](ServingLoop& loop, const Launch& launch) {
    ran_on.set_value(std::this_thread::get_id());
    return loop.execute(launch);
  };
  ServingRuntime runtime(twin.platform, twin.controller, twin.cap, options, executor);
  EXPECT_FALSE(limit_set_while_preparing) << "the first knobs were applied before the warm-up";
  auto answer = runtime.submit(1, 1, 0, std::nullopt);
  auto batch_thread = ran_on.get_future();
  ASSERT_EQ(batch_thread.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_NE(prepared_on, std::this_thread::get_id());
  EXPECT_EQ(prepared_on, batch_thread.get());
  EXPECT_EQ(answer.get().kind, AnswerKind::ok);
}

// A warm-up that fails (a batch size the model cannot run) ends the constructor with its error,
// the GPU untouched and the thread joined.
TEST(ServingRuntime, APrepareThatFailsEndsTheConstructorWithNothingSet) {
  TwinA100 twin;
  auto options = one_request_batches(5.0);
  options.prepare = [] { throw Error(ErrorCode::device, "out of memory at batch size 64"); };
  try {
    ServingRuntime runtime(twin.platform, twin.controller, twin.cap, options, [](ServingLoop& loop, const Launch& launch) {
      return loop.execute(launch);
    });
    ADD_FAILURE() << "the runtime started";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::device);
    EXPECT_STREQ(e.what(), "out of memory at batch size 64");
  }
  EXPECT_FALSE(twin.platform.twin().power_limit_set());
}

TEST(ServingRuntime, RefusesABatchTimeoutThatIsNotPositive) {
  TwinA100 twin;
  for (const double timeout_s : {0.0, -1.0, std::numeric_limits<double>::infinity()}) {
    RuntimeOptions options;
    options.batch_timeout_s = timeout_s;
    EXPECT_THROW(ServingRuntime(twin.platform, twin.controller, twin.cap, options, [](ServingLoop& loop, const Launch& launch) {
      return loop.execute(launch);
    }), Error);
  }
}

}  // namespace
}  // namespace gpucap::serve
