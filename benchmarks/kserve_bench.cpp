// What parsing one inference request costs the server (kserve_protocol's parse_infer_request):
// a 1x3x224x224 FP32 image as JSON numbers and through the binary extension, made as gpucap load
// makes them (docs/benchmarks.md, "gpucap serve": JSON images).

#include <benchmark/benchmark.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "gpucap/service/kserve_client.hpp"
#include "gpucap/service/kserve_protocol.hpp"

namespace {

namespace kserve = gpucap::service::kserve;

kserve::ModelMetadata image_model() {
  return {"image", {"1"}, "twin", {{"input", kserve::Datatype::fp32, {-1, 3, 224, 224}}},
          {{"output", kserve::Datatype::fp32, {-1, 1000}}}, 8};
}

void parse_image(benchmark::State& state, bool binary) {
  const auto model = image_model();
  const auto inputs = kserve::make_request_inputs(model, 1, {}, 1);
  const auto request = kserve::encode_infer_request(inputs, binary);
  for (auto _ : state) {
    auto parsed = kserve::parse_infer_request(request.body, request.header_length, model);
    benchmark::DoNotOptimize(parsed);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * static_cast<std::int64_t>(request.body.size()));
  state.counters["body_MB"] = static_cast<double>(request.body.size()) / 1e6;
}

void BM_ParseImageRequestJson(benchmark::State& state) { parse_image(state, false); }
void BM_ParseImageRequestBinary(benchmark::State& state) { parse_image(state, true); }

BENCHMARK(BM_ParseImageRequestJson)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ParseImageRequestBinary)->Unit(benchmark::kMillisecond);

}  // namespace
