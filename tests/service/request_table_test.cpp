// RequestTable (service/inference_backend.hpp): the requests in flight between the HTTP threads
// and the GPU thread, and what happens to one whose caller gave up on a stalled GPU.

#include "gpucap/service/inference_backend.hpp"

#include <gtest/gtest.h>

#include "gpucap/control/serving.hpp"
#include "gpucap/core/error.hpp"
#include "gpucap/runtime/sim_platform.hpp"
#include "gpucap/serve/serving_core.hpp"
#include "gpucap/sim/catalog.hpp"
#include "support/paths.hpp"

namespace gpucap::service {
namespace {

const sim::Catalog& catalog() {
  static const auto c = sim::Catalog::load(test::data_dir());
  return c;
}

// Answers each request with one tensor named after its id, and remembers the batches it ran.
class EchoIdBackend final : public InferenceBackend {
 public:
  [[nodiscard]] const kserve::ModelMetadata& metadata() const override { return metadata_; }
  [[nodiscard]] bool simulated() const override { return true; }
  [[nodiscard]] serve::BatchRun run(serve::ServingLoop& loop, const serve::Launch& launch,
                                    std::span<const kserve::InferRequest* const> requests,
                                    std::vector<std::vector<kserve::Tensor>>& outputs) override {
    ++batches;
    if (throws) throw Error(ErrorCode::internal, "the engine threw");
    outputs.clear();
    for (const auto* request : requests) {
      kserve::Tensor t;
      t.name = request->id;
      outputs.push_back({t});
    }
    serve::BatchRun run;
    run.start_s = run.end_s = loop.now_s();
    (void)launch;
    return run;
  }
  int batches = 0;
  bool throws = false;

 private:
  kserve::ModelMetadata metadata_;
};

struct Fixture {
  Fixture()
      : platform(catalog().gpu("a100"), catalog().model("resnet50"), catalog().model("resnet50").precision,
                 runtime::SimOptions{}),
        controller(control::BatcherDefaults{8, 0.0}, platform.controller_limits()),
        core(serve::BatcherConfig{}, serve::LatencyStatsConfig{}, controller.initial_knobs(250.0)),
        loop(platform, controller, core, [](double) { return serve::CapReading{250.0, "test"}; }, 0.1) {}
  runtime::SimPlatform platform;
  control::StaticServing controller;
  serve::ServingCore core;
  serve::ServingLoop loop;
};

kserve::InferRequest request_named(const std::string& id) {
  kserve::InferRequest r;
  r.id = id;
  return r;
}

serve::Launch launch_of(std::initializer_list<std::uint64_t> ids) {
  serve::Launch launch;
  for (const auto id : ids) launch.requests.push_back(serve::PendingRequest{id, 1, 0.0, 0, std::nullopt});
  launch.items = static_cast<int>(launch.requests.size());
  return launch;
}

TEST(RequestTable, AnAbandonedRequestLeavesOnceItsBatchHasRunAndTheOthersAreAnswered) {
  Fixture f;
  EchoIdBackend backend;
  RequestTable table;
  const auto kept = table.add(request_named("kept"));
  const auto left = table.add(request_named("left"));
  // Its caller gave up while the request waited (a stalled GPU): the GPU thread still runs it.
  table.abandon(left);
  EXPECT_EQ(table.size(), 2U);
  const auto run = table.run(backend, f.loop, launch_of({kept, left}));
  EXPECT_TRUE(run.ok) << run.error;
  EXPECT_EQ(table.size(), 1U) << "the abandoned entry went with its batch";
  const auto entry = table.take(kept);
  ASSERT_EQ(entry.outputs.size(), 1U);
  EXPECT_EQ(entry.outputs.front().name, "kept");
  EXPECT_THROW((void)table.take(left), Error);
}

TEST(RequestTable, AbandoningAfterTheBatchRanRemovesTheEntryAtOnce) {
  Fixture f;
  EchoIdBackend backend;
  RequestTable table;
  const auto id = table.add(request_named("late"));
  ASSERT_TRUE(table.run(backend, f.loop, launch_of({id})).ok);
  table.abandon(id);  // its answer came just after its caller gave up
  EXPECT_EQ(table.size(), 0U);
  table.abandon(id);  // an unknown id is ignored
  table.abandon(12345);
}

TEST(RequestTable, ABatchWithARequestNotInFlightFailsWithoutThrowingAndLetsTheAbandonedGo) {
  Fixture f;
  EchoIdBackend backend;
  RequestTable table;
  const auto id = table.add(request_named("here"));
  const auto left = table.add(request_named("left"));
  table.abandon(left);
  const auto run = table.run(backend, f.loop, launch_of({id, 999, left}));
  EXPECT_FALSE(run.ok);
  EXPECT_NE(run.error.find("request 999 of the batch is not in flight"), std::string::npos) << run.error;
  EXPECT_EQ(backend.batches, 0);
  EXPECT_EQ(table.size(), 1U);  // the abandoned one went; its caller still takes the other
  EXPECT_EQ(table.take(id).request.id, "here");
}

TEST(RequestTable, ABackendThatThrowsStillLetsTheAbandonedGo) {
  Fixture f;
  EchoIdBackend backend;
  backend.throws = true;
  RequestTable table;
  const auto left = table.add(request_named("left"));
  table.abandon(left);
  EXPECT_THROW((void)table.run(backend, f.loop, launch_of({left})), Error);
  EXPECT_EQ(table.size(), 0U);
}

}  // namespace
}  // namespace gpucap::service
