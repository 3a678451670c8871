// ServingRuntime (serve/serving_runtime.hpp): the GPU thread that runs the serving loop beside the
// HTTP threads, on the twin paced to the wall clock.

#include "gpucap/serve/serving_runtime.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>

#include "gpucap/control/serving.hpp"
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

// A request submitted while the GPU thread runs a sink (without the runtime's lock) must be
// launched as soon as the sink returns: the thread's wake call must not be lost while it does not
// wait. Before the fix the thread went to sleep on the wake time it had computed before the
// sink — with an empty queue, up to half a second later.
TEST(ServingRuntime, ARequestSubmittedWhileAWindowIsExportedIsLaunchedAtOnce) {
  const auto& model = catalog().model("resnet50");
  runtime::SimPlatform platform(catalog().gpu("a100"), model, model.precision, runtime::SimOptions{});
  control::StaticServing controller(control::BatcherDefaults{8, 0.0}, platform.controller_limits());
  CapState cap(CapSchedule::constant(250.0), "flag", 100.0, 400.0);
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
  ServingRuntime runtime(platform, controller, cap, options, executor, on_window);
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

}  // namespace
}  // namespace gpucap::serve
