// decide() cost of every online controller (target: well under 1 µs).

#include <benchmark/benchmark.h>

#include "gpucap/control/registry.hpp"

namespace {

const gpucap::control::PlatformLimits kP40{{544, 632, 734, 835, 949, 1063, 1189, 1303, 1430, 1531}, {}};

void BM_Decide(benchmark::State& state, const char* algorithm) {
  auto controller = gpucap::control::make_controller(algorithm, {}, kP40);
  gpucap::Observation obs;
  obs.cap_w = 131.0;
  // A power sequence that keeps the controller moving: below, above, inside the band.
  const double powers[] = {60.0, 140.0, 120.0, 90.0, 135.0, 100.0, 70.0};
  std::size_t i = 0;
  for (auto _ : state) {
    obs.power.max_w = powers[i++ % 7];
    auto knobs = controller->decide(obs);
    benchmark::DoNotOptimize(knobs);
  }
}

BENCHMARK_CAPTURE(BM_Decide, batchsizer, "batchsizer");
BENCHMARK_CAPTURE(BM_Decide, batchdvfs, "batchdvfs");
BENCHMARK_CAPTURE(BM_Decide, dvfs, "dvfs");
BENCHMARK_CAPTURE(BM_Decide, clipper, "clipper");

}  // namespace
